//! `/healthz` (the process answers), `/readyz` (database reachable, migrations current) and
//! `/metrics` (OpenMetrics text).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::startup::ServerState;

pub async fn healthz() -> &'static str {
    "ok"
}

pub async fn readyz(State(state): State<ServerState>) -> impl IntoResponse {
    let dead = herald_engine::worker::dead_workers();
    if !dead.is_empty() {
        // The pollers restart on their own (with backoff); until then this process takes no
        // jobs of those kinds, and a load balancer or orchestrator should know.
        let names: Vec<&str> = dead.iter().map(|(kind, _)| *kind).collect();
        tracing::warn!(?dead, "readiness: job workers down");
        return (StatusCode::SERVICE_UNAVAILABLE, format!("job workers down: {}", names.join(", ")));
    }
    match herald_engine::infra::migrate::is_current(&state.app.db).await {
        Ok(true) => (StatusCode::OK, "ready".to_string()),
        Ok(false) => (StatusCode::SERVICE_UNAVAILABLE, "migrations pending".to_string()),
        Err(e) => {
            tracing::warn!(error = ?e, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable".to_string())
        }
    }
}

pub async fn metrics(State(state): State<ServerState>, headers: HeaderMap) -> Response {
    use crate::config::MetricsAccess;
    match &state.metrics_access {
        MetricsAccess::Open => {}
        MetricsAccess::Closed => return StatusCode::NOT_FOUND.into_response(),
        MetricsAccess::Token(token) => {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or("");
            // Constant time: the comparison must not say how much of a guess was right.
            let equal = given.len() == token.len()
                && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
            if !equal {
                return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a token is required")
                    .into_response();
            }
        }
    }
    let out = state.metrics.render();
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], out).into_response()
}
