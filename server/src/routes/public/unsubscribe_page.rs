//! `/u/{token}`: leaving. GET shows one button for the list the message came from, one for
//! everything, and the preference center. POST applies the choice; a POST whose body is
//! `List-Unsubscribe=One-Click` (RFC 8058, sent by mail providers) unsubscribes at once.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_engine::audience::consent::Origin;
use herald_engine::audience::subscribe::{self, Leave};

use herald_engine::ListId;
use minijinja::context;

use super::html::{PageBrand, branded_page, error_page, field, form_fields, message_page};
use crate::startup::ServerState;

/// What the link in a preview or a test send says: it belongs to no reader.
fn preview_link_page() -> Response {
    message_page(
        StatusCode::OK,
        "This is a preview",
        "This link came from a preview or a test email, so it does nothing. In the email readers get, it lets them unsubscribe.",
    )
}

pub async fn show(State(state): State<ServerState>, Path(token): Path<String>) -> Response {
    if token == subscribe::PREVIEW_UNSUBSCRIBE_TOKEN {
        return preview_link_page();
    }
    match subscribe::unsubscribe_page(&state.app.db, &state.app.signer, &token).await {
        Ok(p) => {
            let list = |(id, name, subscribed): &(ListId, String, bool)| {
                context! { id => id.to_string(), name, subscribed }
            };
            let brand = PageBrand::of(&state.app.db, p.tenant, &p.workspace).await;
            let values = context! {
                email => p.email,
                workspace => p.workspace,
                list => p.list.as_ref().map(list),
                left_everything => p.left_everything,
                preferences => p.preferences.iter().map(list).collect::<Vec<_>>(),
            };
            branded_page(StatusCode::OK, "Manage your subscription", "unsubscribe.html", values, brand)
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
    if token == subscribe::PREVIEW_UNSUBSCRIBE_TOKEN {
        return preview_link_page();
    }
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
                fields.iter().filter(|(k, _)| k == "list").filter_map(|(_, v)| v.parse().ok()).collect(),
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
    let app = &state.app;
    let cx = subscribe::PublicContext { db: &app.db, signer: &app.signer, jobs: &app.jobs, base_url: &app.base_url };
    match subscribe::leave(&cx, &token, what, &origin).await {
        // Mail providers only look at the status; keep the answer tiny.
        Ok(()) if one_click => (StatusCode::OK, "Unsubscribed").into_response(),
        Ok(()) if preferences => message_page(
            StatusCode::OK,
            "Preferences saved",
            "Your choices are saved and apply from the next email. A list you added starts once you confirm it with the link we mailed you.",
        ),
        Ok(()) => message_page(
            StatusCode::OK,
            "You are unsubscribed",
            "Done. You will not get these emails any more. Changed your mind? Use the link in any earlier email to subscribe again.",
        ),
        Err(e) => error_page(e),
    }
}
