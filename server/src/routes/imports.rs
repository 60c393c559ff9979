//! CSV import files: `POST /audience/imports/upload` (multipart upload, streamed into Postgres in 1 MB
//! chunks, never held whole in memory) and `GET /audience/imports/{id}/errors.csv` (streamed out
//! the same way).

use axum::Router;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use herald_engine::Role;
use herald_engine::audience::import;
use tower_http::limit::RequestBodyLimitLayer;
use tower_sessions::Session;

use super::session_auth::require_member;
use crate::startup::ServerState;

/// What one upload may hold (`HERALD_IMPORT_MAX_BYTES`), and what one workspace's (and one
/// account's) uploads not yet imported may hold together.
#[derive(Clone, Copy, Debug)]
pub struct ImportLimits {
    pub max_bytes: usize,
    pub storage_caps: import::StorageCaps,
}

pub fn router(limits: ImportLimits) -> Router<ServerState> {
    let (max_bytes, storage_cap) = (limits.max_bytes, limits.storage_caps);
    Router::new()
        .route(
            "/audience/imports/upload",
            post(
                move |state: State<ServerState>, session: Session, headers: axum::http::HeaderMap, form: Multipart| {
                    upload(state, session, headers, form, storage_cap)
                },
            ),
        )
        .route("/audience/imports/{id}/errors.csv", get(errors_csv))
        .layer(DefaultBodyLimit::max(max_bytes))
        .layer(RequestBodyLimitLayer::new(max_bytes))
}

async fn upload(
    State(state): State<ServerState>,
    session: Session,
    headers: axum::http::HeaderMap,
    mut form: Multipart,
    storage_cap: import::StorageCaps,
) -> Response {
    let db = &state.app.db;
    let (tenant, user, role) = match require_member(db, &session, Role::Author).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    // The Imports page's form: a refusal goes back to it, said beside the file field (a bare
    // error page would lose the page). Other clients get the status and the reason.
    let from_page = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    let refuse = |status: StatusCode, message: String| {
        if from_page {
            let query: String =
                url::form_urlencoded::Serializer::new(String::new()).append_pair("upload_error", &message).finish();
            Redirect::to(&format!("/audience/imports?{query}")).into_response()
        } else {
            (status, message).into_response()
        }
    };
    let file = match receive(db, tenant, Some(user), role, &mut form, storage_cap).await {
        Ok(file) => file,
        Err(UploadFailure::NoFile) => return refuse(StatusCode::BAD_REQUEST, "Choose a CSV file to upload.".into()),
        Err(UploadFailure::Interrupted(status, message)) => return refuse(status, message),
        Err(UploadFailure::OverCap(message)) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, message),
        Err(UploadFailure::Failed(e)) => return internal(e),
    };
    match import::finish_upload(db, tenant, file.id, file.size).await {
        Ok(()) => Redirect::to(&format!("/audience/imports/{}", file.id)).into_response(),
        Err(herald_engine::Error::Invalid(m)) => {
            // Not kept: nothing can be imported from it.
            discard(db, tenant, file.id).await;
            refuse(StatusCode::BAD_REQUEST, m.to_string())
        }
        Err(e) => internal(e),
    }
}

/// A file received whole (not finished yet: see `import::finish_upload`).
pub struct ReceivedFile {
    pub id: import::ImportId,
    pub size: i64,
    /// Of the file's name and bytes: what makes two uploads the same request.
    pub sha256: String,
}

/// Why a file was not received; nothing of it is left behind.
pub enum UploadFailure {
    /// The form has no part named `file`.
    NoFile,
    /// The client stopped sending, or sent more than the upload limit.
    Interrupted(StatusCode, String),
    /// Storing it would take the workspace's (or account's) uploads past their cap.
    OverCap(String),
    Failed(herald_engine::Error),
}

/// Streams the form's `file` part into Postgres, 1 MB at a time (never held whole in memory),
/// for the session's upload and the API's alike.
pub async fn receive(
    db: &herald_engine::Db,
    tenant: herald_engine::TenantId,
    user: Option<herald_engine::UserId>,
    role: Role,
    form: &mut Multipart,
    storage_cap: import::StorageCaps,
) -> Result<ReceivedFile, UploadFailure> {
    use sha2::{Digest, Sha256};
    let mut field = loop {
        match form.next_field().await {
            Ok(Some(f)) if f.name() == Some("file") => break f,
            Ok(Some(_)) => continue,
            Ok(None) => return Err(UploadFailure::NoFile),
            Err(e) => return Err(UploadFailure::Interrupted(e.status(), e.body_text())),
        }
    };
    let file_name = field.file_name().unwrap_or("upload.csv").to_string();
    let id = import::begin_upload(db, tenant, user, role, &file_name).await.map_err(UploadFailure::Failed)?;
    let mut hash = Sha256::new();
    hash.update(file_name.as_bytes());
    hash.update([0]);
    let mut buf: Vec<u8> = Vec::with_capacity(import::CHUNK_BYTES);
    let (mut seq, mut size) = (0i32, 0i64);
    loop {
        let bytes = match field.chunk().await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => break,
            Err(e) => {
                discard(db, tenant, id).await;
                return Err(UploadFailure::Interrupted(
                    e.status(),
                    format!("The upload was interrupted or is too large: {}", e.body_text()),
                ));
            }
        };
        size += bytes.len() as i64;
        hash.update(&bytes);
        buf.extend_from_slice(&bytes);
        if buf.len() >= import::CHUNK_BYTES {
            if let Err(e) = import::append_chunk(db, tenant, id, seq, &buf, storage_cap).await {
                return Err(refused(db, tenant, id, e).await);
            }
            seq += 1;
            buf.clear();
        }
    }
    if !buf.is_empty()
        && let Err(e) = import::append_chunk(db, tenant, id, seq, &buf, storage_cap).await
    {
        return Err(refused(db, tenant, id, e).await);
    }
    Ok(ReceivedFile { id, size, sha256: hex::encode(hash.finalize()) })
}

async fn errors_csv(State(state): State<ServerState>, session: Session, Path(id): Path<String>) -> Response {
    let (tenant, _, _) = match require_member(&state.app.db, &session, Role::Viewer).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let Ok(id) = id.parse::<import::ImportId>() else { return StatusCode::NOT_FOUND.into_response() };
    // Known before the download starts: an unknown import (or another workspace's) is a 404.
    if let Err(e) = import::get(&state.app.db, tenant, id).await {
        return internal(e);
    }
    let db = state.app.db.clone();
    super::export::csv_download("import-errors.csv", move |tx| async move {
        import::stream_errors_csv(&db, tenant, id, tx).await
    })
}

/// An upload that could not be stored leaves nothing behind.
async fn refused(
    db: &herald_engine::Db,
    tenant: herald_engine::TenantId,
    id: import::ImportId,
    e: herald_engine::Error,
) -> UploadFailure {
    discard(db, tenant, id).await;
    match e {
        herald_engine::Error::Invalid(m) => UploadFailure::OverCap(m.to_string()),
        e => UploadFailure::Failed(e),
    }
}

async fn discard(db: &herald_engine::Db, tenant: herald_engine::TenantId, id: import::ImportId) {
    if let Err(cleanup) = import::discard(db, tenant, Role::Owner, id).await {
        tracing::warn!(error = ?cleanup, import = %id, "could not discard a refused upload");
    }
}

fn internal(e: herald_engine::Error) -> Response {
    match e {
        herald_engine::Error::NotFound => StatusCode::NOT_FOUND.into_response(),
        herald_engine::Error::Forbidden => StatusCode::FORBIDDEN.into_response(),
        herald_engine::Error::Refused(m) => (StatusCode::FORBIDDEN, m).into_response(),
        e => {
            tracing::error!(error = ?e, "import upload failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong on our side.").into_response()
        }
    }
}
