//! `/api/v1/imports`: a CSV import as the Imports page runs it — upload the file, read the
//! guessed column mapping and a preview, start it with a mapping and lists, follow its progress,
//! and download the rows it could not import.
//!
//! The upload streams into Postgres a megabyte at a time (`routes::imports::receive`), so its
//! route is served outside the general body limit and outside the stored-answer layer, which
//! would read the whole body first; it keeps its `Idempotency-Key` on the import itself.

use axum::Json;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::import::{self, Import, ImportId, ImportInto, ImportSummary, KeyedUpload, StartImport};
use herald_engine::audit::Action;
use herald_types::{Existing, ImportMode, ListId};
use serde::Deserialize;
use tower_http::limit::RequestBodyLimitLayer;
use utoipa::ToSchema;

use super::idempotency::{HEADER, REPLAYED};
use super::paging::{Page, PageQuery, parse_time_and_id, time_and_id};
use super::{ApiError, ApiFailure, ApiJson};
use crate::routes::imports::{UploadFailure, receive};
use crate::startup::ServerState;

/// `POST /api/v1/imports` with its own body limit (`HERALD_IMPORT_MAX_BYTES`).
pub fn upload_route(max_bytes: usize) -> MethodRouter<ServerState> {
    post(upload)
        .layer::<_, std::convert::Infallible>(DefaultBodyLimit::max(max_bytes))
        .layer(RequestBodyLimitLayer::new(max_bytes))
}

#[utoipa::path(post, path = "/api/v1/imports", operation_id = "uploadImport", security(("api_key" = [])),
    request_body(content_type = "multipart/form-data", description = "The CSV file in the field `file` (comma, semicolon or tab separated, UTF-8, a header row first), at most `HERALD_IMPORT_MAX_BYTES`. Nothing is imported yet: read the guessed `mapping`, then start it."),
    responses((status = 201, description = "Uploaded: its columns, a preview of the first rows and the guessed mapping", body = Import),
              (status = 413, description = "Larger than the upload limit, or the workspace's uploads not imported yet would pass their storage cap", body = ApiError),
              (status = 422, description = "No `file` part, an empty file or no header row; or the Idempotency-Key was used for another file (`fields[\"Idempotency-Key\"]`)", body = ApiError)))]
pub async fn upload(
    State(s): State<ServerState>,
    caller: ApiCaller,
    headers: HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> Response {
    let Ok(mut form) = form else {
        return upload_failure(UploadFailure::NoFile);
    };
    let db = &s.app.db;
    let key = match headers.get(HEADER).map(|k| k.to_str().map(str::to_owned)) {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(_)) => {
            return ApiFailure::from(herald_engine::Error::invalid("The Idempotency-Key must be printable ASCII."))
                .into_response();
        }
    };
    let key = match key.as_deref().map(herald_engine::api_requests::check_key) {
        None => None,
        Some(Ok(k)) => Some(k.to_owned()),
        Some(Err(e)) => return ApiFailure::from(e).into_response(),
    };
    let file = match receive(db, caller.tenant, None, caller.role, &mut form, s.imports.storage_caps).await {
        Ok(file) => file,
        Err(failure) => return upload_failure(failure),
    };
    let finished = match &key {
        None => import::finish_upload(db, caller.tenant, file.id, file.size).await.map(|()| KeyedUpload::Finished),
        Some(key) => {
            let key = import::UploadKey { key, sha256: &file.sha256 };
            import::finish_keyed_upload(db, caller.tenant, file.id, file.size, key).await
        }
    };
    let (id, replayed) = match finished {
        Ok(KeyedUpload::Finished) => (file.id, false),
        Ok(KeyedUpload::Replay(first)) => (first, true),
        Err(e) => {
            // A file that could not be read as CSV is not kept for a second try.
            if let Err(cleanup) = import::discard(db, caller.tenant, herald_engine::Role::Owner, file.id).await
                && !matches!(cleanup, herald_engine::Error::NotFound)
            {
                tracing::warn!(error = ?cleanup, "could not discard an unreadable upload");
            }
            return ApiFailure::from(e).into_response();
        }
    };
    match import::get(db, caller.tenant, id).await {
        Ok(view) => {
            let mut res = (StatusCode::CREATED, Json(view)).into_response();
            if replayed {
                res.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
            }
            res
        }
        Err(e) => ApiFailure::from(e).into_response(),
    }
}

fn upload_failure(failure: UploadFailure) -> Response {
    use herald_engine::Error;
    let file = |m: &str| ApiFailure::from(Error::Invalid(herald_types::Invalid::field("file", m))).into_response();
    let too_large = |message: String| {
        let fields = [("file".to_string(), message.clone())].into();
        (StatusCode::PAYLOAD_TOO_LARGE, Json(ApiError { code: "too_large", message, fields })).into_response()
    };
    match failure {
        UploadFailure::NoFile => file("Send the CSV file as multipart/form-data, in the field named \"file\"."),
        UploadFailure::Interrupted(StatusCode::PAYLOAD_TOO_LARGE, message) | UploadFailure::OverCap(message) => {
            too_large(message)
        }
        UploadFailure::Interrupted(_, message) => file(&message),
        UploadFailure::Failed(e) => ApiFailure::from(e).into_response(),
    }
}

#[utoipa::path(get, path = "/api/v1/imports", operation_id = "listImports", security(("api_key" = [])), params(PageQuery),
    responses((status = 200, description = "Imports, newest first, 50 a page by default (at most 200): `data` and `next_cursor`", body = Page<ImportSummary>),
              (status = 422, body = ApiError)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Query(q): Query<PageQuery>,
) -> Result<Json<Page<ImportSummary>>, ApiFailure> {
    let limit = q.limit(50, 200)?;
    let after = q.after(parse_time_and_id::<ImportId>)?;
    let fetched = import::page(&s.app.db, caller.tenant, after, limit + 1).await?;
    Ok(Json(Page::new(fetched, limit, |i| time_and_id(i.created_at, i.id))))
}

#[utoipa::path(get, path = "/api/v1/imports/{id}", operation_id = "getImport", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The import's id")),
    responses((status = 200, description = "The import: while it can be started, its columns, preview and mapping; once started, its progress (`status`, `rows_read`, `bytes_done` of `size_bytes`, `created`, `updated`, `skipped`, `invalid`, `rows_per_second`, `error`)", body = Import),
              (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<ImportId>,
) -> Result<Json<Import>, ApiFailure> {
    Ok(Json(import::get(&s.app.db, caller.tenant, id).await?))
}

/// How to import an uploaded file.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportStart {
    /// One entry per column, in order: `email` (exactly one), `name` (at most one), `tags`
    /// (comma-separated tag names), `attributes.<key>`, or `ignore`. Leave out to use the
    /// guessed mapping the upload answered.
    #[serde(default)]
    pub mapping: Option<Vec<String>>,
    /// The lists the readers join. Empty only with `no_list`.
    #[serde(default)]
    pub lists: Vec<ListId>,
    /// Import the readers onto no list (they then get no campaign): must be said, never implied.
    #[serde(default)]
    pub no_list: bool,
    /// `confirmed` (the workspace attests consent) or `opt_in` (each reader is mailed a link
    /// and joins on clicking it). Default `confirmed`.
    #[serde(default)]
    pub mode: ImportMode,
    /// Readers already in the workspace: `update` their name and attributes, or `skip` them.
    #[serde(default)]
    pub existing: Existing,
}

#[utoipa::path(post, path = "/api/v1/imports/{id}/start", operation_id = "startImport", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The import's id")), request_body = ImportStart,
    responses((status = 202, description = "Queued: follow it with GET /api/v1/imports/{id}", body = Import),
              (status = 404, body = ApiError),
              (status = 409, description = "Already queued, running or done", body = ApiError),
              (status = 422, description = "Keyed by the field: `mapping`, `lists`", body = ApiError)))]
pub async fn start(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<ImportId>,
    ApiJson(body): ApiJson<ImportStart>,
) -> Result<(StatusCode, Json<Import>), ApiFailure> {
    let db = &s.app.db;
    let mapping = match body.mapping {
        Some(m) => m,
        None => import::get(db, caller.tenant, id).await?.mapping,
    };
    let into = ImportInto::from_form(body.lists, body.no_list)?;
    let start = StartImport { mapping, into, mode: body.mode, existing: body.existing };
    let detail = serde_json::json!({ "mode": start.mode, "existing": start.existing, "lists": start.into.list_ids() });
    import::start(db, &s.app.jobs, caller.tenant, caller.role, id, start).await?;
    caller.audit(db, Action::ImportStarted, id, detail).await;
    Ok((StatusCode::ACCEPTED, Json(import::get(db, caller.tenant, id).await?)))
}

#[utoipa::path(delete, path = "/api/v1/imports/{id}", operation_id = "discardImport", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The import's id")),
    responses((status = 204, description = "Its file, mapping and error report are deleted; readers a failed run imported stay"),
              (status = 404, body = ApiError),
              (status = 409, description = "Running or done", body = ApiError)))]
pub async fn discard(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<ImportId>,
) -> Result<StatusCode, ApiFailure> {
    import::discard(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/imports/{id}/errors.csv", operation_id = "downloadImportErrors", security(("api_key" = [])),
    params(("id" = Uuid, Path, description = "The import's id")),
    responses((status = 200, description = "CSV: line, reason and the row as read, for every row that was not imported", content_type = "text/csv"),
              (status = 404, body = ApiError)))]
pub async fn errors_csv(State(s): State<ServerState>, caller: ApiCaller, Path(id): Path<ImportId>) -> Response {
    // Known before the download starts: an unknown import (or another workspace's) is a 404.
    if let Err(e) = import::get(&s.app.db, caller.tenant, id).await {
        return ApiFailure::from(e).into_response();
    }
    let db = s.app.db.clone();
    let tenant = caller.tenant;
    crate::routes::export::csv_download("import-errors.csv", move |tx| async move {
        import::stream_errors_csv(&db, tenant, id, tx).await
    })
}
