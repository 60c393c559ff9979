//! `/confirm/{token}`: double opt-in. GET shows what will be confirmed with a button; only the
//! POST confirms, so mail scanners that prefetch links cannot subscribe anyone.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use herald_engine::audience::consent::Origin;
use herald_engine::audience::subscribe;

use super::html::{PageBrand, branded_page, error_page};
use crate::startup::ServerState;

pub async fn show(State(state): State<ServerState>, Path(token): Path<String>) -> Response {
    match subscribe::confirm_preview(&state.app.db, &state.app.signer, &token).await {
        Ok(p) => {
            let brand = PageBrand::of(&state.app.db, p.tenant, &p.workspace).await;
            branded_page(StatusCode::OK, "Confirm your subscription", "confirm.html", &p, brand)
        }
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
        Ok(p) => {
            let brand = PageBrand::of(&state.app.db, p.tenant, &p.workspace).await;
            branded_page(StatusCode::OK, "Subscription confirmed", "confirmed.html", &p, brand)
        }
        Err(e) => error_page(e),
    }
}
