//! `/u/{token}`: leaving. GET shows one button for the list the message came from, one for
//! everything, and the preference center. POST applies the choice; a POST whose body is
//! `List-Unsubscribe=One-Click` (RFC 8058, sent by mail providers) unsubscribes at once.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_engine::audience::consent::Origin;
use herald_engine::audience::subscribe::{self, Leave};
use uuid::Uuid;

use super::html::{card_page, error_page, esc, field, form_fields, message_page};
use crate::startup::ServerState;

pub async fn show(State(state): State<ServerState>, Path(token): Path<String>) -> Response {
    match subscribe::unsubscribe_page(&state.app.db, &state.app.signer, &token).await {
        Ok(p) => {
            let this_list = match &p.list {
                Some((_, name, true)) => format!(
                    "<form method=\"post\" class=\"mt-6\"><input type=\"hidden\" name=\"action\" value=\"list\">\
                     <button type=\"submit\" class=\"btn-primary w-full\">Unsubscribe from {}</button></form>",
                    esc(name)
                ),
                Some((_, name, false)) => {
                    format!("<p class=\"mt-6 text-sm text-slate-600\">You are not subscribed to {}.</p>", esc(name))
                }
                None => String::new(),
            };
            let everything = if p.left_everything {
                "<p class=\"mt-4 text-sm text-slate-600\">You have left everything from this sender.</p>".to_string()
            } else {
                "<form method=\"post\" class=\"mt-3\"><input type=\"hidden\" name=\"action\" value=\"all\">\
                 <button type=\"submit\" class=\"btn-secondary w-full\">Unsubscribe from everything</button></form>"
                    .to_string()
            };
            let prefs = if p.preferences.is_empty() {
                String::new()
            } else {
                let boxes: String = p
                    .preferences
                    .iter()
                    .map(|(id, name, on)| {
                        format!(
                            "<label class=\"flex items-center gap-2 py-1 text-sm\"><input type=\"checkbox\" name=\"list\" value=\"{id}\" {}> {}</label>",
                            if *on { "checked" } else { "" },
                            esc(name)
                        )
                    })
                    .collect();
                format!(
                    "<form method=\"post\" class=\"mt-8 border-t border-slate-100 pt-6\"><input type=\"hidden\" name=\"action\" value=\"preferences\">\
                     <h2 class=\"font-medium\">Choose what you receive</h2><div class=\"mt-2\">{boxes}</div>\
                     <button type=\"submit\" class=\"btn-secondary mt-3\">Save preferences</button></form>"
                )
            };
            card_page(
                StatusCode::OK,
                "Manage your subscription",
                &format!(
                    "<h1 class=\"text-xl font-semibold text-slate-900\">Manage your subscription</h1>\
                     <p class=\"mt-2 text-sm text-slate-600\">{} from {}</p>{this_list}{everything}{prefs}",
                    esc(&p.email),
                    esc(&p.workspace)
                ),
            )
        }
        Err(e) => error_page(e),
    }
}

pub async fn submit(
    State(state): State<ServerState>,
    Path(token): Path<String>,
    axum::Extension(herald_app::ssr::ClientIp(peer)): axum::Extension<herald_app::ssr::ClientIp>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fields = form_fields(&body);
    let one_click = field(&fields, "List-Unsubscribe") == "One-Click";
    let origin = Origin {
        source: if one_click { "one_click".into() } else { "unsubscribe_link".into() },
        ip: Some(peer.to_string()),
        user_agent: headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string),
        wording: None,
    };
    let what = if one_click {
        Leave::ThisList
    } else {
        match field(&fields, "action") {
            "list" => Leave::ThisList,
            "all" => Leave::Everything,
            "preferences" => Leave::Preferences(
                fields.iter().filter(|(k, _)| k == "list").filter_map(|(_, v)| Uuid::parse_str(v).ok()).collect(),
            ),
            _ => {
                return message_page(
                    StatusCode::BAD_REQUEST,
                    "Something is not right",
                    "Choose what to unsubscribe from.",
                );
            }
        }
    };
    let preferences = matches!(what, Leave::Preferences(_));
    match subscribe::leave(&state.app.db, &state.app.signer, &token, what, &origin).await {
        // Mail providers only look at the status; keep the answer tiny.
        Ok(()) if one_click => (StatusCode::OK, "Unsubscribed").into_response(),
        Ok(()) if preferences => {
            message_page(StatusCode::OK, "Preferences saved", "Your choices are saved and apply from the next email.")
        }
        Ok(()) => message_page(
            StatusCode::OK,
            "You are unsubscribed",
            "Done. You will not get these emails any more. Changed your mind? Use the link in any earlier email to subscribe again.",
        ),
        Err(e) => error_page(e),
    }
}
