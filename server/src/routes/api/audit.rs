//! `GET /api/v1/audit`: the workspace's audit log, newest first, a page at a time.

use axum::Json;
use axum::extract::{Query, State};
use herald_engine::api_keys::ApiCaller;
use herald_engine::audit;
use herald_types::AuditEntry;
use serde::Deserialize;
use utoipa::IntoParams;

use super::paging::{Page, PageQuery};
use super::{ApiError, ApiFailure};
use crate::startup::ServerState;

#[derive(Deserialize, IntoParams)]
pub struct AuditQuery {
    /// Only this action, e.g. `campaign.sent`.
    action: Option<String>,
    /// Only actors whose name (email or key name) contains this.
    actor: Option<String>,
    /// The previous page's `next_cursor`.
    cursor: Option<String>,
    /// 1 to 500; 100 by default.
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/audit", operation_id = "listAuditEntries", security(("api_key" = [])), params(AuditQuery),
    responses((status = 200, description = "Entries, newest first: `data` and `next_cursor`", body = Page<AuditEntry>), (status = 422, body = ApiError)))]
pub async fn index(
    State(s): State<ServerState>,
    caller: ApiCaller,
    Query(q): Query<AuditQuery>,
) -> Result<Json<Page<AuditEntry>>, ApiFailure> {
    let page = PageQuery { cursor: q.cursor, limit: q.limit };
    let limit = page.limit(100, 500)?;
    let before = page.after(|k| k.parse::<i64>().ok())?;
    let action = match q.action.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
        None => None,
        Some(a) => Some(audit::Action::parse(a).ok_or_else(|| {
            herald_engine::Error::invalid(format!("Unknown action {a:?}; see the list in the API documentation."))
        })?),
    };
    let filter = audit::Filter { action, actor: q.actor, before, limit: limit + 1 };
    let entries = audit::list(&s.app.db, caller.tenant, &filter).await?;
    Ok(Json(Page::new(entries, limit, |e| e.id.to_string())))
}
