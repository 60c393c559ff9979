//! Pages for readers, not authors: the hosted subscribe page, double opt-in confirmation and
//! unsubscribing, and a campaign's web version. Plain HTML forms, so they work without JavaScript and from any mail client.

pub mod confirm_page;
pub mod entry_challenge;
pub mod html;
pub mod subscribe_page;
pub mod unsubscribe_page;
pub mod web_version;

use axum::Router;
use axum::routing::get;
use tower_http::limit::RequestBodyLimitLayer;

use crate::startup::ServerState;

/// Public form bodies are small; anything bigger is not a person filling in a form.
const PUBLIC_BODY_LIMIT: usize = 16 * 1024;

pub fn router() -> Router<ServerState> {
    Router::new()
        .route("/s/{workspace}", get(subscribe_page::show).post(subscribe_page::submit))
        .route("/s/{workspace}/{list}", get(subscribe_page::show))
        .route("/s/{workspace}/challenge.json", get(entry_challenge::show))
        .route("/confirm/{token}", get(confirm_page::show).post(confirm_page::confirm))
        .route("/u/{token}", get(unsubscribe_page::show).post(unsubscribe_page::submit))
        .route("/v/{token}", get(web_version::show))
        .layer(RequestBodyLimitLayer::new(PUBLIC_BODY_LIMIT))
}
