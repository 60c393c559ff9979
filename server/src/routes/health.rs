//! `/healthz` (the process answers), `/readyz` (database reachable, migrations current) and
//! `/metrics` (Prometheus text).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use crate::startup::ServerState;

pub async fn healthz() -> &'static str {
    "ok"
}

pub async fn readyz(State(state): State<ServerState>) -> impl IntoResponse {
    match herald_engine::migrate::is_current(&state.app.db).await {
        Ok(true) => (StatusCode::OK, "ready"),
        Ok(false) => (StatusCode::SERVICE_UNAVAILABLE, "migrations pending"),
        Err(e) => {
            tracing::warn!(error = ?e, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}

pub async fn metrics(State(state): State<ServerState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render())
}
