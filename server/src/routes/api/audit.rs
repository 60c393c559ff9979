//! `GET /api/v1/audit`: the workspace's audit log, newest first, a page at a time.

use axum::Json;
use axum::extract::{Query, State};
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{ApiError, ApiFailure};
use crate::startup::ServerState;

#[derive(Deserialize, IntoParams)]
pub struct AuditQuery {
    /// Only this action, e.g. `campaign.sent`.
    action: Option<String>,
    /// Only actors whose name (email or key name) contains this.
    actor: Option<String>,
    /// Only entries older than this id: the `next_before` of the previous page.
    before: Option<i64>,
    /// 1 to 500; 100 by default.
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
pub struct AuditPage {
    pub entries: Vec<herald_types::AuditEntry>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_before: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/audit", operation_id = "listAuditEntries", security(("api_key" = [])), params(AuditQuery),
    responses((status = 200, body = AuditPage), (status = 422, body = ApiError)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Query(q): Query<AuditQuery>,
) -> Result<Json<AuditPage>, ApiFailure> {
    let action = match q.action.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        None => None,
        Some(a) => Some(audit::Action::parse(a).ok_or_else(|| {
            herald_engine::Error::invalid(format!("Unknown action {a:?}; see the list in the API documentation."))
        })?),
    };
    let limit = q.limit.unwrap_or(100);
    let filter = audit::Filter { action, actor: q.actor, before: q.before, limit };
    let entries = audit::list(&s.app.db, caller.tenant, &filter).await?;
    let next_before = (entries.len() as i64 == limit).then(|| entries.last().map(|e| e.id)).flatten();
    Ok(Json(AuditPage { entries, next_before }))
}
