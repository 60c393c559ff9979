//! `/v/{token}`: a reader's copy of a campaign on the web ("View in your browser").
//!
//! The page is the workspace's own HTML, so it is served in a sandbox (`Content-Security-Policy:
//! sandbox`, no `allow-scripts`, no `allow-same-origin`): no script in it runs, and it is on an
//! origin of its own, never Herald's (no cookies, no session).

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use herald_engine::campaigns::{preview::PREVIEW_WEB_VERSION_TOKEN, web_version};

use super::html::{error_page, message_page};
use crate::startup::ServerState;

pub async fn show(State(state): State<ServerState>, Path(token): Path<String>) -> Response {
    if token == PREVIEW_WEB_VERSION_TOKEN {
        return message_page(
            StatusCode::OK,
            "This is a preview",
            "This link came from a preview or a test email. In the email readers get, it opens their own copy of it here.",
        );
    }
    match web_version::render(&state.app.db, &state.app.signer, &state.app.base_url, &token).await {
        Ok(html) => {
            let mut response = Html(html).into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "sandbox allow-popups allow-popups-to-escape-sandbox; default-src 'none'; img-src * data:; style-src 'unsafe-inline' *; font-src *",
                ),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
            headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
            response
        }
        Err(e) => error_page(e),
    }
}
