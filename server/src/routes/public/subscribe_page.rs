//! `/s/{workspace}` and `/s/{workspace}/{list}`: the hosted subscribe page. A plain HTML form
//! (no JavaScript needed) that also accepts posts from the embeddable snippet on other sites.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_engine::ListId;
use herald_engine::audience::consent::Origin;
use herald_engine::audience::lists::{self, List};
use herald_engine::audience::subscribe::{self, PublicContext, SubscribeRequest};
use herald_engine::workspaces;

use minijinja::context;

use super::html::{card_page, error_page, field, form_fields, message_page};
use crate::startup::ServerState;

/// The hidden field bots fill in and people never see.
pub const HONEYPOT: &str = "website";

pub async fn show(State(state): State<ServerState>, Path(params): Path<Vec<(String, String)>>) -> Response {
    let ws_slug = params.first().map(|p| p.1.clone()).unwrap_or_default();
    let list_slug = params.get(1).map(|p| p.1.clone());
    match render(&state, &ws_slug, list_slug.as_deref(), None, StatusCode::OK).await {
        Ok(r) => r,
        Err(e) => error_page(e),
    }
}

async fn render(
    state: &ServerState,
    ws_slug: &str,
    list_slug: Option<&str>,
    error: Option<&str>,
    status: StatusCode,
) -> herald_engine::Result<Response> {
    let db = &state.app.db;
    let tenant = workspaces::id_for_slug(db, ws_slug).await.map_err(|_| herald_engine::Error::NotFound)?;
    let ws = workspaces::get(db, tenant).await?;
    let public = lists::public(db, tenant).await?;
    let preselected: Option<&List> = match list_slug {
        Some(s) => Some(public.iter().find(|l| l.slug == s).ok_or(herald_engine::Error::NotFound)?),
        None => None,
    };
    let lists: Vec<_> = public
        .iter()
        .map(|l| {
            let checked = preselected.is_none_or(|p| p.id == l.id) && (preselected.is_some() || public.len() == 1);
            context! { id => l.id.to_string(), name => l.name, description => l.description, checked }
        })
        .collect();
    let values = context! {
        workspace => ws.name,
        slug => ws.slug,
        lists,
        error,
        honeypot => HONEYPOT,
        wording => subscribe::default_wording(&ws.name),
    };
    Ok(card_page(status, &format!("Subscribe to {}", ws.name), "subscribe.html", values))
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("application/json"))
}

const CHECK_INBOX: &str = "If the address is right, you will get an email shortly. For lists that ask for confirmation, click the link in it to finish subscribing.";

pub async fn submit(
    State(state): State<ServerState>,
    Path(ws_slug): Path<String>,
    axum::Extension(herald_app::ssr::ClientIp(peer)): axum::Extension<herald_app::ssr::ClientIp>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json = wants_json(&headers);
    let fields = form_fields(&body);
    let ok = || {
        if json {
            axum::Json(serde_json::json!({ "ok": true, "message": CHECK_INBOX })).into_response()
        } else {
            message_page(StatusCode::OK, "Check your inbox", CHECK_INBOX)
        }
    };
    // Bots that fill the honeypot get the same answer as everyone, and nothing happens.
    if !field(&fields, HONEYPOT).is_empty() {
        return ok();
    }
    if !state.app.public_form_limiter.check(&format!("subscribe:{}", herald_app::ssr::ClientIp(peer).limiter_key())) {
        return error_page(herald_engine::Error::RateLimited);
    }
    let db = &state.app.db;
    let Ok(tenant) = workspaces::id_for_slug(db, &ws_slug).await else {
        return error_page(herald_engine::Error::NotFound);
    };
    let ws_name = workspaces::get(db, tenant).await.map(|w| w.name).unwrap_or_default();
    let list_ids: Vec<ListId> =
        fields.iter().filter(|(k, _)| k == "list").filter_map(|(_, v)| v.parse().ok()).collect();
    let header_str = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok()).map(str::to_string);
    let req = SubscribeRequest {
        email: field(&fields, "email").to_string(),
        name: field(&fields, "name").to_string(),
        list_ids,
        origin: Origin {
            source: if header_str(header::REFERER).is_some_and(|r| r.contains(&format!("/s/{ws_slug}"))) {
                "hosted_form".into()
            } else {
                "embedded_form".into()
            },
            ip: Some(peer.to_string()),
            user_agent: header_str(header::USER_AGENT),
            wording: Some(subscribe::default_wording(&ws_name)),
        },
    };
    let cx = PublicContext { db, signer: &state.app.signer, jobs: &state.app.jobs, base_url: &state.app.base_url };
    match subscribe::subscribe(&cx, tenant, req).await {
        Ok(()) => ok(),
        Err(herald_engine::Error::Invalid(m)) if json => {
            (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(serde_json::json!({ "ok": false, "message": m.to_string() })))
                .into_response()
        }
        Err(herald_engine::Error::Invalid(m)) => {
            match render(&state, &ws_slug, None, Some(&m.to_string()), StatusCode::UNPROCESSABLE_ENTITY).await {
                Ok(r) => r,
                Err(e) => error_page(e),
            }
        }
        Err(e) => error_page(e),
    }
}
