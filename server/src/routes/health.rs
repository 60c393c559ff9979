//! `/healthz` (the process answers), `/readyz` (database reachable, migrations current) and
//! `/metrics` (Prometheus text).

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
    let mut out = state.metrics.render();
    let c = &state.tracking.recorder.counters;
    let get = herald_engine::tracking::HitCounters::get;
    for (name, help, value) in [
        ("accepted", "Opens and clicks handed to the write buffer.", get(&c.accepted)),
        ("dropped", "Opens and clicks not recorded because the buffer was full.", get(&c.dropped)),
        ("stored", "Opens and clicks written to the database.", get(&c.stored)),
        ("discarded", "Buffered hits the database refused (campaign or link gone).", get(&c.discarded)),
        ("lost", "Hits of batches that could not be written after retries.", get(&c.lost)),
    ] {
        out.push_str(&format!(
            "# HELP herald_tracking_hits_{name}_total {help}\n# TYPE herald_tracking_hits_{name}_total counter\nherald_tracking_hits_{name}_total {value}\n"
        ));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}
