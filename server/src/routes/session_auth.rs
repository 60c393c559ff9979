//! Session authentication for the few plain axum routes behind the login (file upload and
//! downloads): the same check as every server function (`herald_app::ssr::member_of_session`),
//! answered as a plain response.

use axum::response::{IntoResponse, Response};
use herald_engine::{Db, Role, TenantId, UserId};
use tower_sessions::Session;

/// The caller's current workspace, user and role, or the response to send instead.
pub async fn require_member(db: &Db, session: &Session, min: Role) -> Result<(TenantId, UserId, Role), Response> {
    herald_app::ssr::member_of_session(db, session, min).await.map_err(|e| (e.status(), e.to_string()).into_response())
}
