//! `/confirm/{token}`: double opt-in. GET shows what will be confirmed with a button; only the
//! POST confirms, so mail scanners that prefetch links cannot subscribe anyone.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use herald_engine::audience::consent::Origin;
use herald_engine::audience::subscribe;

use super::html::{card_page, error_page, esc};
use crate::startup::ServerState;

pub async fn show(State(state): State<ServerState>, Path(token): Path<String>) -> Response {
    match subscribe::confirm_preview(&state.app.db, &state.app.signer, &token).await {
        Ok(p) => card_page(
            StatusCode::OK,
            "Confirm your subscription",
            &format!(
                "<h1 class=\"text-xl font-semibold text-slate-900\">Confirm your subscription</h1>\
                 <p class=\"mt-3 text-sm text-slate-600\">Subscribe <strong>{}</strong> to <strong>{}</strong> from {}?</p>\
                 <form method=\"post\" class=\"mt-6\"><button type=\"submit\" class=\"btn-primary w-full\">Confirm subscription</button></form>",
                esc(&p.email),
                esc(&p.lists.join(", ")),
                esc(&p.workspace)
            ),
        ),
        Err(e) => error_page(e),
    }
}

pub async fn confirm(
    State(state): State<ServerState>,
    Path(token): Path<String>,
    axum::Extension(herald_app::ssr::ClientIp(peer)): axum::Extension<herald_app::ssr::ClientIp>,
    headers: HeaderMap,
) -> Response {
    let origin = Origin {
        source: "confirmation_link".into(),
        ip: Some(peer.to_string()),
        user_agent: headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string),
        wording: None,
    };
    match subscribe::confirm(&state.app.db, &state.app.signer, &token, &origin).await {
        Ok(p) => card_page(
            StatusCode::OK,
            "Subscription confirmed",
            &format!(
                "<h1 class=\"text-xl font-semibold text-slate-900\">You are subscribed</h1>\
                 <p class=\"mt-3 text-sm text-slate-600\" data-testid=\"confirmed\"><strong>{}</strong> will receive <strong>{}</strong> from {}.</p>\
                 <p class=\"mt-3 text-xs text-slate-500\">Every email has a link to unsubscribe at once.</p>",
                esc(&p.email),
                esc(&p.lists.join(", ")),
                esc(&p.workspace)
            ),
        ),
        Err(e) => error_page(e),
    }
}
