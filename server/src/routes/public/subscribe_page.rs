//! `/s/{workspace}` and `/s/{workspace}/{list}`: the hosted subscribe page. A plain HTML form
//! (no JavaScript needed) that also accepts posts from the embeddable snippet on other sites.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_engine::audience::consent::Origin;
use herald_engine::audience::lists::{self, List};
use herald_engine::audience::subscribe::{self, PublicContext, SubscribeRequest};
use herald_engine::workspaces;
use uuid::Uuid;

use super::html::{card_page, error_page, esc, field, form_fields, message_page};
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
    let wording = subscribe::default_wording(&ws.name);
    let boxes: String = public
        .iter()
        .map(|l| {
            let checked = preselected.is_none_or(|p| p.id == l.id) && (preselected.is_some() || public.len() == 1);
            format!(
                "<label class=\"flex items-start gap-2 py-1\"><input type=\"checkbox\" name=\"list\" value=\"{}\" {} class=\"mt-1\">\
                 <span><span class=\"font-medium\">{}</span><span class=\"block text-xs text-slate-500\">{}</span></span></label>",
                l.id,
                if checked { "checked" } else { "" },
                esc(&l.name),
                esc(&l.description)
            )
        })
        .collect();
    let body = if public.is_empty() {
        format!(
            "<h1 class=\"text-xl font-semibold\">{}</h1><p class=\"mt-3 text-sm text-slate-500\">There is nothing to subscribe to yet.</p>",
            esc(&ws.name)
        )
    } else {
        format!(
            "<h1 class=\"text-xl font-semibold text-slate-900\">Subscribe to {name}</h1>\
             {err}\
             <form method=\"post\" action=\"/s/{slug}\" class=\"mt-6 space-y-4\">\
               <div><label for=\"email\" class=\"label\">Email</label><input id=\"email\" name=\"email\" type=\"email\" required autocomplete=\"email\" class=\"input\"></div>\
               <div><label for=\"name\" class=\"label\">Name <span class=\"text-slate-400\">(optional)</span></label><input id=\"name\" name=\"name\" type=\"text\" maxlength=\"200\" autocomplete=\"name\" class=\"input\"></div>\
               <fieldset><legend class=\"label\">Lists</legend>{boxes}</fieldset>\
               <div style=\"position:absolute;left:-10000px\" aria-hidden=\"true\"><label>Leave this empty<input name=\"{HONEYPOT}\" tabindex=\"-1\" autocomplete=\"off\"></label></div>\
               <p class=\"text-xs text-slate-500\">{wording}</p>\
               <button type=\"submit\" class=\"btn-primary w-full\">Subscribe</button>\
             </form>",
            name = esc(&ws.name),
            slug = esc(&ws.slug),
            err = error
                .map(|e| format!(
                    "<p role=\"alert\" class=\"mt-4 rounded-md bg-red-50 px-3 py-2 text-sm text-red-700\">{}</p>",
                    esc(e)
                ))
                .unwrap_or_default(),
            wording = esc(&wording),
        )
    };
    Ok(card_page(status, &format!("Subscribe to {}", ws.name), &body))
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
    if !state.app.public_form_limiter.check(&format!("subscribe:{}", peer)) {
        return error_page(herald_engine::Error::RateLimited);
    }
    let db = &state.app.db;
    let Ok(tenant) = workspaces::id_for_slug(db, &ws_slug).await else {
        return error_page(herald_engine::Error::NotFound);
    };
    let ws_name = workspaces::get(db, tenant).await.map(|w| w.name).unwrap_or_default();
    let list_ids: Vec<Uuid> =
        fields.iter().filter(|(k, _)| k == "list").filter_map(|(_, v)| Uuid::parse_str(v).ok()).collect();
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
