//! `/api/v1/automations`: welcome mails and drip sequences (see `herald_engine::automations`),
//! their lifecycle, report and readers; `POST /api/v1/readers/{id}/events` lets a reader into
//! the automations an event name triggers. Another workspace's ids answer 404.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit::Action;
use herald_engine::automations::{events, report, store};
use herald_types::{
    Automation, AutomationId, AutomationInput, AutomationReport, AutomationStepId, EventAccepted, ReaderEventInput, Run,
};
use serde::Deserialize;

use super::paging::{Page, PageQuery};
use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[utoipa::path(get, path = "/api/v1/automations", operation_id = "listAutomations", security(("api_key" = [])),
    responses((status = 200, description = "The workspace's automations, archived last", body = Vec<Automation>)))]
pub async fn index(State(s): State<ServerState>, caller: ApiCaller) -> Result<Json<Vec<Automation>>, ApiFailure> {
    Ok(Json(store::list(&s.app.db, caller.tenant).await?))
}

#[utoipa::path(post, path = "/api/v1/automations", operation_id = "createAutomation", security(("api_key" = [])),
    request_body = AutomationInput,
    responses((status = 201, description = "Created, as a draft", body = Automation),
              (status = 422, description = "Keyed by the field: `name`, `trigger.list_id`, `steps.1.subject`", body = ApiError)))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<AutomationInput>,
) -> Result<(StatusCode, Json<Automation>), ApiFailure> {
    Ok((StatusCode::CREATED, Json(store::create(&s.app.db, caller.tenant, caller.role, &body).await?)))
}

#[utoipa::path(get, path = "/api/v1/automations/{id}", operation_id = "getAutomation", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id")),
    responses((status = 200, description = "The automation with its steps", body = Automation), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
) -> Result<Json<Automation>, ApiFailure> {
    Ok(Json(store::get(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(put, path = "/api/v1/automations/{id}", operation_id = "updateAutomation", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id")), request_body = AutomationInput,
    responses((status = 200, description = "Replaced. Steps keep their place by id; on a live automation readers at a removed step move on or exit (`removed_step_readers`)", body = Automation),
              (status = 404, body = ApiError), (status = 409, description = "Archived", body = ApiError),
              (status = 422, body = ApiError)))]
pub async fn update(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
    ApiJson(body): ApiJson<AutomationInput>,
) -> Result<Json<Automation>, ApiFailure> {
    Ok(Json(store::update(&s.app.db, caller.tenant, caller.role, id, &body).await?))
}

#[utoipa::path(delete, path = "/api/v1/automations/{id}", operation_id = "deleteAutomation", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id")),
    responses((status = 204, description = "Deleted"), (status = 404, body = ApiError),
              (status = 409, description = "Not a draft: archive it instead", body = ApiError)))]
pub async fn delete(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
) -> Result<StatusCode, ApiFailure> {
    store::delete(&s.app.db, caller.tenant, caller.role, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/api/v1/automations/{id}/start", operation_id = "startAutomation", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id")),
    responses((status = 200, description = "Live: readers enter and move on", body = Automation), (status = 404, body = ApiError),
              (status = 409, description = "Already live, or archived", body = ApiError),
              (status = 422, description = "A step cannot be sent yet: the message names it and what to fix", body = ApiError)))]
pub async fn start(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
) -> Result<Json<Automation>, ApiFailure> {
    let a = store::start(&s.app.db, &s.app.jobs, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, Action::AutomationStarted, id, serde_json::json!({})).await;
    Ok(Json(a))
}

#[utoipa::path(post, path = "/api/v1/automations/{id}/pause", operation_id = "pauseAutomation", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id")),
    responses((status = 200, description = "Paused: nobody enters or moves on; waiting readers keep their place", body = Automation),
              (status = 404, body = ApiError), (status = 409, description = "Not live", body = ApiError)))]
pub async fn pause(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
) -> Result<Json<Automation>, ApiFailure> {
    let a = store::pause(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, Action::AutomationPaused, id, serde_json::json!({})).await;
    Ok(Json(a))
}

#[utoipa::path(post, path = "/api/v1/automations/{id}/archive", operation_id = "archiveAutomation", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id")),
    responses((status = 200, description = "Archived for good: waiting readers left, queued mail cancelled", body = Automation),
              (status = 404, body = ApiError), (status = 409, description = "Already archived", body = ApiError)))]
pub async fn archive(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
) -> Result<Json<Automation>, ApiFailure> {
    let a = store::archive(&s.app.db, caller.tenant, caller.role, id).await?;
    caller.audit(&s.app.db, Action::AutomationArchived, id, serde_json::json!({})).await;
    Ok(Json(a))
}

#[utoipa::path(get, path = "/api/v1/automations/{id}/report", operation_id = "getAutomationReport", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id")),
    responses((status = 200, description = "Readers by state; per step: reached, waiting, sent, opened, clicked", body = AutomationReport),
              (status = 404, body = ApiError)))]
pub async fn show_report(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
) -> Result<Json<AutomationReport>, ApiFailure> {
    Ok(Json(report::report(&s.app.db, caller.tenant, id).await?))
}

/// `GET /api/v1/automations/{id}/runs?step=`
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct RunsQuery {
    /// Only the readers waiting at this step.
    pub step: Option<AutomationStepId>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// 1 to 500; 100 by default.
    pub limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/automations/{id}/runs", operation_id = "listAutomationRuns", security(("api_key" = [])),
    params(("id" = AutomationId, Path, description = "The automation's id"), RunsQuery),
    responses((status = 200, description = "Runs, latest first (or those waiting at `step`), each with its path: `data` and `next_cursor`", body = Page<Run>),
              (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn runs(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<AutomationId>,
    Query(q): Query<RunsQuery>,
) -> Result<Json<Page<Run>>, ApiFailure> {
    let page = PageQuery { cursor: q.cursor, limit: q.limit };
    let limit = page.limit(100, 500)?;
    let before = page.after(|k| k.parse::<i64>().ok())?;
    let fetched = report::runs_page(&s.app.db, caller.tenant, id, q.step, before, limit + 1).await?;
    Ok(Json(Page::new(fetched, limit, |r| r.id.to_string())))
}

#[utoipa::path(get, path = "/api/v1/readers/{id}/automations", operation_id = "listReaderAutomationRuns", security(("api_key" = [])),
    params(("id" = i64, Path, description = "The reader's id")),
    responses((status = 200, description = "The reader's runs through automations, latest first, each with its path", body = Vec<Run>),
              (status = 404, body = ApiError)))]
pub async fn reader_runs(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
) -> Result<Json<Vec<Run>>, ApiFailure> {
    herald_engine::audience::readers::detail(&s.app.db, caller.tenant, id).await?;
    Ok(Json(report::reader_runs(&s.app.db, caller.tenant, id).await?))
}

#[utoipa::path(post, path = "/api/v1/readers/{id}/events", operation_id = "recordReaderEvent", security(("api_key" = [])),
    params(("id" = i64, Path, description = "The reader's id"),
           ("Idempotency-Key" = Option<String>, Header, description = "A unique key per event, kept at least 24 h: a retry with the same key and body answers the first response and enters nobody again; the same key with another body is refused (422)")),
    request_body = ReaderEventInput,
    responses((status = 200, description = "Accepted; how many automations it let the reader into", body = EventAccepted),
              (status = 404, body = ApiError), (status = 409, body = ApiError), (status = 422, body = ApiError)))]
pub async fn record_event(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<i64>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<ReaderEventInput>,
) -> Result<Json<EventAccepted>, ApiFailure> {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok());
    Ok(Json(events::record(&s.app.db, caller.tenant, id, &body, key).await?))
}
