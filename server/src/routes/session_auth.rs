//! Session authentication for the few plain axum routes behind the login (file upload and
//! downloads): the same check as every server function (`herald_app::ssr::member_of_session`),
//! answered as a plain response; and the declared access of every server function.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use herald_app::access;
use herald_app::error::AppError;
use herald_engine::{Db, Role, TenantId, UserId};
use tower_sessions::Session;

/// The caller's current workspace, user and role, or the response to send instead.
pub async fn require_member(db: &Db, session: &Session, min: Role) -> Result<(TenantId, UserId, Role), Response> {
    herald_app::ssr::member_of_session(db, session, min).await.map_err(|e| (e.status(), e.to_string()).into_response())
}

/// Checks a server function's declared access (`herald_app::access`) before the function runs:
/// a member whose role falls short gets the same 403 the function's own check would give, and a
/// function with no declaration refuses everyone. Public and own-account functions pass through
/// (they check the session themselves).
pub async fn server_fn_access(State(db): State<Db>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !path.starts_with(access::PREFIX) {
        return next.run(req).await;
    }
    let Some(declared) = access::of_path(path) else {
        tracing::error!(path, "a server function without a declared access was called");
        return server_fn_error(AppError::Forbidden);
    };
    let Some(min) = declared.role() else {
        return next.run(req).await;
    };
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        tracing::error!(path, "no session layer in front of the server functions");
        return server_fn_error(AppError::Internal);
    };
    match herald_app::ssr::member_of_session(&db, &session, min).await {
        Ok(_) => next.run(req).await,
        Err(e) => server_fn_error(e),
    }
}

/// An error as a server function answers it: its status, and the error as JSON (what the
/// client's `AppError` decoder reads).
fn server_fn_error(e: AppError) -> Response {
    let body = serde_json::to_string(&e).unwrap_or_else(|_| "\"Internal\"".into());
    (e.status(), [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
