//! `/api/v1/media`: list, upload and delete a workspace's images with an API key; and the upload
//! itself, which the editor's session route (`routes::media`) shares.
//!
//! Uploads have their own body limit (axum's default is far smaller), and every upload is decoded
//! and re-encoded off the async threads (`herald_engine::media::prepare_off_thread`).

use axum::Json;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use herald_engine::api_keys::ApiCaller;
use herald_engine::media::{self, Media, MediaId, MediaLibrary};
use herald_engine::{Role, TenantId};

use super::{ApiError, ApiFailure};
use crate::startup::ServerState;

/// A multipart body holding one image of at most [`media::MAX_UPLOAD_BYTES`], with room for
/// the multipart framing.
pub const UPLOAD_BODY_LIMIT: usize = media::MAX_UPLOAD_BYTES + 64 * 1024;

/// `POST /api/v1/media`, with the upload's body limit.
pub fn upload_route() -> MethodRouter<ServerState> {
    post(upload_from_api).layer(DefaultBodyLimit::max(UPLOAD_BODY_LIMIT))
}

/// The `file` part of a multipart upload: its name and bytes (bounded by the body limit).
async fn file_part(form: &mut Multipart) -> Result<(String, Vec<u8>), herald_engine::Error> {
    let invalid = |m: &str| herald_engine::Error::Invalid(herald_types::Invalid::field("file", m));
    loop {
        match form.next_field().await {
            Ok(Some(field)) if field.name() == Some("file") => {
                let name = field.file_name().unwrap_or("image").to_string();
                let bytes = field.bytes().await.map_err(|_| {
                    invalid(&format!(
                        "The upload was interrupted, or is larger than {} MB.",
                        media::MAX_UPLOAD_BYTES >> 20
                    ))
                })?;
                return Ok((name, bytes.to_vec()));
            }
            Ok(Some(_)) => continue,
            Ok(None) => return Err(invalid("Choose an image to upload (the form field is named \"file\").")),
            Err(_) => {
                return Err(invalid(&format!(
                    "The upload was interrupted, or is larger than {} MB.",
                    media::MAX_UPLOAD_BYTES >> 20
                )));
            }
        }
    }
}

/// Checks the role, reads the `file` part, prepares and saves the image.
pub async fn store(
    s: &ServerState,
    tenant: TenantId,
    user: Option<herald_engine::UserId>,
    role: Role,
    form: &mut Multipart,
) -> Result<Media, herald_engine::Error> {
    if !role.can_author() {
        return Err(herald_engine::Error::Forbidden);
    }
    let (name, bytes) = file_part(form).await?;
    let app = &s.app;
    let prepared = media::prepare_off_thread(&app.db, tenant, app.media_quota, bytes).await?;
    media::save(&app.db, &app.media_storage, &app.base_url, tenant, user, role, &name, prepared, app.media_quota).await
}

#[utoipa::path(post, path = "/api/v1/media", operation_id = "uploadMedia", security(("api_key" = [])),
    request_body(content_type = "multipart/form-data", description = "One image in the field `file`: PNG, JPEG, GIF or WebP, at most 10 MB and 8000 × 8000 pixels. It is re-encoded (at most 1200 px wide, without metadata); uploading the same image again answers the stored one."),
    responses((status = 201, description = "Stored; `url` is its permanent address", body = Media),
              (status = 422, description = "Not an accepted image, too large, or the storage quota is used up", body = ApiError)))]
pub async fn upload_from_api(State(s): State<ServerState>, caller: ApiCaller, mut form: Multipart) -> Response {
    match store(&s, caller.tenant, None, caller.role, &mut form).await {
        Ok(m) => (StatusCode::CREATED, Json(m)).into_response(),
        Err(e) => ApiFailure::from(e).into_response(),
    }
}

#[utoipa::path(get, path = "/api/v1/media", operation_id = "listMedia", security(("api_key" = [])),
    responses((status = 200, description = "The workspace's images, newest first, and the storage they use", body = MediaLibrary)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<MediaLibrary>, ApiFailure> {
    let app = &s.app;
    Ok(Json(media::library(&app.db, &app.base_url, caller.tenant, app.media_quota).await?))
}

#[utoipa::path(delete, path = "/api/v1/media/{id}", operation_id = "deleteMedia", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The image's id")),
    responses((status = 204, description = "Deleted: its address answers 404 from now on, also in mail already sent"),
              (status = 404, body = ApiError)))]
pub async fn remove(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<MediaId>,
) -> Result<StatusCode, ApiFailure> {
    media::delete(&s.app.db, &s.app.media_storage, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
