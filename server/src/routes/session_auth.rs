//! Session authentication for the few plain axum routes behind the login (file upload and
//! downloads), matching what `herald_app::ssr::require_role` does for server functions.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use herald_app::ssr::{SESSION_TENANT, SESSION_USER};
use herald_engine::{Db, Role, TenantId, UserId, workspaces};
use tower_sessions::Session;

/// The caller's current workspace, user and role, or the response to send instead.
pub async fn require_member(db: &Db, session: &Session, min: Role) -> Result<(TenantId, UserId, Role), Response> {
    let user = session.get::<UserId>(SESSION_USER).await.ok().flatten();
    let tenant = session.get::<TenantId>(SESSION_TENANT).await.ok().flatten();
    let (Some(user), Some(tenant)) = (user, tenant) else {
        return Err((StatusCode::UNAUTHORIZED, "Log in first.").into_response());
    };
    match workspaces::access(db, tenant, user).await {
        Ok(Some(role)) if role.require(min).is_ok() => Ok((tenant, user, role)),
        Ok(_) => Err((StatusCode::FORBIDDEN, "You do not have permission to do that.").into_response()),
        Err(herald_engine::Error::Refused(why)) => Err((StatusCode::FORBIDDEN, why).into_response()),
        Err(e) => {
            tracing::error!(error = ?e, "role lookup failed");
            Err((StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong.").into_response())
        }
    }
}
