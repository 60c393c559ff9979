//! `/api/v1/suppressions`: the workspace's suppression list.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use herald_engine::api_keys::ApiCaller;
use herald_engine::audience::suppressions::{self, Suppression};
use herald_types::{NewSuppressions, SuppressionsAdded};
use serde::Deserialize;

use super::paging::{Page, PageQuery, parse_time_and_id, time_and_id};
use super::{ApiError, ApiFailure, ApiJson};
use crate::startup::ServerState;

#[derive(Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    pub q: String,
    pub cursor: Option<String>,
    pub limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/suppressions", operation_id = "listSuppressions", security(("api_key" = [])),
    params(("q" = Option<String>, Query, description = "Address fragment"),
           ("cursor" = Option<String>, Query, description = "The previous page's next_cursor"),
           ("limit" = Option<i64>, Query, description = "1–1000, default 100")),
    responses((status = 200, description = "Newest first: `data` and `next_cursor`"), (status = 422, body = ApiError)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Query(q): Query<SearchQuery>,
) -> Result<Json<Page<Suppression>>, ApiFailure> {
    let page = PageQuery { cursor: q.cursor, limit: q.limit };
    let limit = page.limit(100, 1000)?;
    let after = page.after(parse_time_and_id::<String>)?;
    let fetched = suppressions::search_after(&s.app.db, caller.tenant, &q.q, after, limit + 1).await?;
    Ok(Json(Page::new(fetched, limit, |s| time_and_id(s.created_at, &s.email_lower))))
}

#[utoipa::path(post, path = "/api/v1/suppressions", operation_id = "addSuppressions", security(("api_key" = [])), request_body = NewSuppressions,
    responses((status = 200, body = SuppressionsAdded), (status = 422, body = ApiError)))]
pub async fn add(
    State(s): State<ServerState>,
    caller: ApiCaller,
    ApiJson(body): ApiJson<NewSuppressions>,
) -> Result<Json<SuppressionsAdded>, ApiFailure> {
    herald_engine::audience::bulk::check_size(body.emails.len(), 10_000)?;
    Ok(Json(suppressions::add_many(&s.app.db, caller.tenant, caller.role, &body.emails, body.reason, "api").await?))
}

#[derive(Deserialize)]
pub struct RemoveQuery {
    /// Must be `true` to remove a hard bounce or complaint.
    #[serde(default)]
    pub confirm: bool,
}

#[utoipa::path(delete, path = "/api/v1/suppressions/{email}", operation_id = "removeSuppression", security(("api_key" = [])),
    params(("confirm" = Option<bool>, Query, description = "Required (true) for hard bounces and complaints")),
    responses((status = 204, description = "Removed"), (status = 404, body = ApiError), (status = 422, body = ApiError)))]
pub async fn remove(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Path(email): Path<String>,
    Query(q): Query<RemoveQuery>,
) -> Result<StatusCode, ApiFailure> {
    suppressions::remove(&s.app.db, caller.tenant, caller.role, &email, q.confirm).await?;
    let address = herald_engine::Email::key(&email);
    caller.audit(&s.app.db, herald_engine::audit::Action::SuppressionRemoved, address, serde_json::json!({})).await;
    Ok(StatusCode::NO_CONTENT)
}
