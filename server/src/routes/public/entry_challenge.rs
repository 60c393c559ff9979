//! `/s/{workspace}/challenge.json`: a fresh proof-of-work challenge for the workspace's public
//! form, for a form that solves one before it posts (an embedded form's own script, or the
//! ALTCHA widget's `challengeurl`). The hosted page needs no call here: it gets its challenge
//! with the refusal that asks for one. Stateless: making a challenge costs one key derivation
//! and stores nothing (a solution is recorded only when it is used). `.json`, so no list slug
//! (letters, digits and "-") can take its address from `/s/{workspace}/{list}`.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use herald_engine::audience::public_entry;
use herald_engine::workspaces;

use super::html::error_page;
use crate::startup::ServerState;

pub async fn show(State(state): State<ServerState>, Path(ws_slug): Path<String>) -> Response {
    let app = &state.app;
    let Ok(tenant) = workspaces::id_for_slug(&app.db, &ws_slug).await else {
        return error_page(herald_engine::Error::NotFound);
    };
    let ws = match workspaces::get(&app.db, tenant).await {
        Ok(ws) => ws,
        Err(e) => return error_page(e),
    };
    match public_entry::new_challenge(&app.signer, &app.public_entries, &ws.slug) {
        // Readable by a form's script on any site (it holds nothing secret), and never cached:
        // each is solved once.
        Ok(challenge) => {
            ([(header::CACHE_CONTROL, "no-store"), (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")], axum::Json(challenge))
                .into_response()
        }
        Err(e) => error_page(e),
    }
}
