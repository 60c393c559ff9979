//! `/api/v1/messages`: transactional mail. `POST` needs an `Idempotency-Key` header: the same key
//! with the same body answers with the first request's message (200 instead of 201) and never
//! sends twice; the same key with another body is a 422 (`fields["Idempotency-Key"]`).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use herald_engine::api_keys::ApiCaller;
use herald_engine::transactional::messages::{self, Message, MessageEvent, MessageFilter, MessageId, TemplateId};
use serde::{Deserialize, Serialize};

use super::paging::{Page, PageQuery, parse_time_and_id, time_and_id};
use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

/// A message with its history.
#[derive(Serialize)]
pub struct MessageJson {
    #[serde(flatten)]
    pub message: Message,
    pub events: Vec<MessageEvent>,
}

#[utoipa::path(post, path = "/api/v1/messages", operation_id = "sendMessage", security(("api_key" = [])), request_body = herald_types::SendRequest,
    params(("Idempotency-Key" = String, Header, description = "A unique key per message, kept at least 24 h (e.g. order-1234-receipt)")),
    responses((status = 201, description = "Queued"), (status = 200, description = "A replay: the first request's message"),
              (status = 403, body = ApiError, description = "The key's maker is no longer an admin, or the account is suspended"),
              (status = 422, body = ApiError, description = "Invalid, suppressed recipient, a template error, or the key used with a different body"),
              (status = 429, body = ApiError, description = "The account's daily allowance is used up, or its workspace is already rendering two templates; see Retry-After")))]
pub async fn create(
    State(s): State<ServerState>,
    caller: ApiCaller,
    headers: HeaderMap,
    // Read as sent (a `SendRequest`): a replay is compared with the first request as written.
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Result<(StatusCode, Json<Message>), ApiFailure> {
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let done = messages::enqueue(&s.app.outbox, caller.tenant, caller.role, key, &body).await?;
    let status = if done.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(done.message)))
}

#[derive(Deserialize)]
pub struct ListQuery {
    pub status: Option<String>,
    /// A recipient address (or its start) or an idempotency key.
    pub q: Option<String>,
    pub template: Option<TemplateId>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    pub limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/messages", operation_id = "listMessages", security(("api_key" = [])),
    params(("status" = Option<String>, Query, description = "queued, sending, sent, failed or cancelled"),
           ("q" = Option<String>, Query, description = "A recipient address (or its start) or an idempotency key"),
           ("template" = Option<Uuid>, Query), ("cursor" = Option<String>, Query, description = "The previous page's next_cursor"),
           ("limit" = Option<i64>, Query, description = "1–500, default 50")),
    responses((status = 200, description = "Messages, newest first: `data` and `next_cursor`"), (status = 422, body = ApiError)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Query(q): Query<ListQuery>,
) -> Result<Json<Page<Message>>, ApiFailure> {
    let page = PageQuery { cursor: q.cursor, limit: q.limit };
    let limit = page.limit(50, 500)?;
    let after = page.after(parse_time_and_id::<MessageId>)?;
    let filter = MessageFilter { status: q.status, q: q.q, template: q.template, after, limit: Some(limit + 1) };
    let fetched = messages::list(&s.app.db, caller.tenant, &filter).await?;
    Ok(Json(Page::new(fetched, limit, |m| time_and_id(m.created_at, m.id))))
}

#[utoipa::path(get, path = "/api/v1/messages/{id}", operation_id = "getMessage", security(("api_key" = [])),
    responses((status = 200, description = "The message and its events"), (status = 404, body = ApiError)))]
pub async fn show(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<MessageId>,
) -> Result<Json<MessageJson>, ApiFailure> {
    let (message, events) = messages::with_events(&s.app.db, caller.tenant, id).await?;
    Ok(Json(MessageJson { message, events }))
}

#[utoipa::path(post, path = "/api/v1/messages/{id}/cancel", operation_id = "cancelMessage", security(("api_key" = [])),
    responses((status = 200, description = "Cancelled"), (status = 404, body = ApiError),
              (status = 409, body = ApiError, description = "No longer queued")))]
pub async fn cancel(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(id): Path<MessageId>,
) -> Result<Json<Message>, ApiFailure> {
    Ok(Json(messages::cancel(&s.app.db, caller.tenant, caller.role, id).await?))
}
