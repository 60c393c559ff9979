//! Images: `GET /media/{workspace}/{sha256}.{ext}` serves them to anyone (mail clients fetch
//! them), and `POST /media/upload` takes one from the editor or the library page (a member's
//! session). The API's routes, and the upload both share, are in [`super::api::media`].

use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use herald_engine::media;
use herald_engine::{Role, TenantId};
use tower_sessions::Session;

use super::api::ApiFailure;
use super::api::media::{UPLOAD_BODY_LIMIT, store};
use super::session_auth::require_member;
use crate::startup::ServerState;

pub fn router() -> Router<ServerState> {
    // Beside the general body limit: an image may be larger than other requests.
    let upload = post(upload_from_session).layer(DefaultBodyLimit::max(UPLOAD_BODY_LIMIT));
    Router::new().route("/media/{tenant}/{file}", get(serve)).route("/media/upload", upload)
}

/// Immutable: the name is the hash of the bytes. `nosniff`: the type is what Herald encoded.
async fn serve(State(s): State<ServerState>, Path((tenant, file)): Path<(String, String)>) -> Response {
    let (Ok(tenant), Some((hash, extension))) = (tenant.parse::<TenantId>(), file.split_once('.')) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match media::serve::fetch(&s.app.db, &s.app.media_storage, tenant, hash, extension).await {
        Ok(Some(image)) => (
            [
                (header::CONTENT_TYPE, HeaderValue::from_static(image.kind.content_type())),
                (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable")),
                (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
                (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("default-src 'none'; sandbox")),
            ],
            image.bytes,
        )
            .into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => {
            tracing::error!(error = ?e, "serving an image failed");
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    }
}

/// From the editor and the library page: the stored image as JSON, or the API's JSON error.
async fn upload_from_session(State(s): State<ServerState>, session: Session, mut form: Multipart) -> Response {
    let (tenant, user, role) = match require_member(&s.app.db, &session, Role::Author).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    match store(&s, tenant, Some(user), role, &mut form).await {
        Ok(m) => (StatusCode::CREATED, Json(m)).into_response(),
        Err(e) => ApiFailure::from(e).into_response(),
    }
}
