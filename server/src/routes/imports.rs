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

/// `max_bytes` bounds one upload, `storage_cap` what one workspace's (and one account's) uploads
/// not yet imported may hold together.
pub fn router(max_bytes: usize, storage_cap: import::StorageCaps) -> Router<ServerState> {
    Router::new()
        .route(
            "/audience/imports/upload",
            post(move |state: State<ServerState>, session: Session, form: Multipart| {
                upload(state, session, form, storage_cap)
            }),
        )
        .route("/audience/imports/{id}/errors.csv", get(errors_csv))
        .layer(DefaultBodyLimit::max(max_bytes))
        .layer(RequestBodyLimitLayer::new(max_bytes))
}

fn bad_request(message: &str) -> Response {
    (StatusCode::BAD_REQUEST, message.to_string()).into_response()
}

async fn upload(
    State(state): State<ServerState>,
    session: Session,
    mut form: Multipart,
    storage_cap: import::StorageCaps,
) -> Response {
    let db = &state.app.db;
    let (tenant, user, role) = match require_member(db, &session, Role::Author).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let mut field = loop {
        match form.next_field().await {
            Ok(Some(f)) if f.name() == Some("file") => break f,
            Ok(Some(_)) => continue,
            Ok(None) => return bad_request("Choose a CSV file to upload."),
            Err(e) => return (e.status(), e.body_text()).into_response(),
        }
    };
    let file_name = field.file_name().unwrap_or("upload.csv").to_string();
    let id = match import::begin_upload(db, tenant, Some(user), role, &file_name).await {
        Ok(id) => id,
        Err(e) => return internal(e),
    };
    let mut buf: Vec<u8> = Vec::with_capacity(import::CHUNK_BYTES);
    let (mut seq, mut size) = (0i32, 0i64);
    loop {
        match field.chunk().await {
            Ok(Some(bytes)) => {
                size += bytes.len() as i64;
                buf.extend_from_slice(&bytes);
                if buf.len() >= import::CHUNK_BYTES {
                    if let Err(e) = import::append_chunk(db, tenant, id, seq, &buf, storage_cap).await {
                        return refused(db, tenant, id, e).await;
                    }
                    seq += 1;
                    buf.clear();
                }
            }
            Ok(None) => break,
            Err(e) => {
                return (e.status(), format!("The upload was interrupted or is too large: {}", e.body_text()))
                    .into_response();
            }
        }
    }
    if !buf.is_empty()
        && let Err(e) = import::append_chunk(db, tenant, id, seq, &buf, storage_cap).await
    {
        return refused(db, tenant, id, e).await;
    }
    match import::finish_upload(db, tenant, id, size).await {
        Ok(()) => Redirect::to(&format!("/audience/imports/{id}")).into_response(),
        Err(herald_engine::Error::Invalid(m)) => bad_request(&m.to_string()),
        Err(e) => internal(e),
    }
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
) -> Response {
    if let Err(cleanup) = import::discard(db, tenant, Role::Owner, id).await {
        tracing::warn!(error = ?cleanup, import = %id, "could not discard a refused upload");
    }
    match e {
        herald_engine::Error::Invalid(m) => (StatusCode::PAYLOAD_TOO_LARGE, m.to_string()).into_response(),
        e => internal(e),
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
