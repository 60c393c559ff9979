//! `/s/{workspace}` and `/s/{workspace}/{list}`: the hosted subscribe page. A plain HTML form
//! (no JavaScript needed) that also accepts posts from the embeddable snippet on other sites.
//!
//! Every entry mails a confirmation to the typed address, so posts count against budgets kept
//! in Postgres (`herald_engine::audience::public_entry`): past the client's, a post is refused;
//! past a list's or the workspace's, an entry needs a solved proof-of-work challenge. The page
//! then comes back with what was typed, the challenge and a small script of Herald's own (run
//! under the page's CSP nonce) that solves it with WebCrypto and sends the form again; a
//! JavaScript client gets the challenge as JSON. Nothing typed is lost on the way.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_app::ssr::{ClientIp, CspNonce};
use herald_engine::audience::consent::Origin;
use herald_engine::audience::lists::{self, List};
use herald_engine::audience::public_entry;
use herald_engine::audience::subscribe::{self, PublicContext, SubscribeRequest};
use herald_engine::{Db, Email, ListId, TenantId, workspaces};

use minijinja::context;

use super::html::{PageBrand, branded_page, error_page, field, form_fields, message_page};
use crate::startup::ServerState;

/// The hidden field bots fill in and people never see.
pub const HONEYPOT: &str = "website";

/// What the reader typed, shown again when the form comes back.
#[derive(Default)]
struct Typed {
    email: String,
    name: String,
    lists: Vec<ListId>,
}

/// What the form must do before it is sent again: solve `challenge` (its JSON), with the
/// script that the page's CSP lets run by `nonce`.
struct Check {
    message: &'static str,
    challenge: String,
    nonce: String,
}

pub async fn show(State(state): State<ServerState>, Path(params): Path<Vec<(String, String)>>) -> Response {
    let ws_slug = params.first().map(|p| p.1.clone()).unwrap_or_default();
    let list_slug = params.get(1).map(|p| p.1.clone());
    match render(&state, &ws_slug, list_slug.as_deref(), None, StatusCode::OK, None, None).await {
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
    typed: Option<&Typed>,
    check: Option<&Check>,
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
            let checked = match typed {
                Some(t) => t.lists.contains(&l.id),
                None => preselected.is_none_or(|p| p.id == l.id) && (preselected.is_some() || public.len() == 1),
            };
            context! { id => l.id.to_string(), name => l.name, description => l.description, checked }
        })
        .collect();
    let check = check.map(|c| {
        context! {
            message => c.message,
            challenge => c.challenge,
            nonce => c.nonce,
            field => public_entry::SOLUTION_FIELD,
        }
    });
    let values = context! {
        workspace => ws.name,
        slug => ws.slug,
        lists,
        error,
        honeypot => HONEYPOT,
        wording => subscribe::default_wording(&ws.name),
        email => typed.map(|t| t.email.as_str()).unwrap_or_default(),
        name => typed.map(|t| t.name.as_str()).unwrap_or_default(),
        check,
    };
    let brand = PageBrand::of(db, tenant, &ws.name).await;
    Ok(branded_page(status, &format!("Subscribe to {}", ws.name), "subscribe.html", values, brand))
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("application/json"))
}

const CHECK_INBOX: &str =
    "If the address is right, you will get an email shortly. Click the link in it to finish subscribing.";

/// Why the form asks for the check: a list's or the workspace's budget is spent.
const CHECK_NEEDED: &str = "Many people are signing up here right now, so this form asks your browser for a short \
                            check first. It runs by itself and sends the form when it is done, in a few seconds.";

/// Why the form asks again: the solution sent was wrong, expired or used before.
const CHECK_FAILED: &str = "The check did not pass: it was not finished, ran out of time or was used already. Your \
                            browser is doing a new one and sends the form when it is done.";

pub async fn submit(
    State(state): State<ServerState>,
    Path(ws_slug): Path<String>,
    axum::Extension(client): axum::Extension<ClientIp>,
    nonce: Option<axum::Extension<CspNonce>>,
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
    let app = &state.app;
    let db = &app.db;
    // In Postgres, so every web process counts the same posts.
    match public_entry::take_client(db, &app.public_entries, &client.limiter_key()).await {
        Ok(None) => {}
        Ok(Some(_)) => return error_page(herald_engine::Error::RateLimited),
        Err(e) => return error_page(e),
    }
    let Ok(tenant) = workspaces::id_for_slug(db, &ws_slug).await else {
        return error_page(herald_engine::Error::NotFound);
    };
    let ws = match workspaces::get(db, tenant).await {
        Ok(ws) => ws,
        Err(e) => return error_page(e),
    };
    let typed = Typed {
        email: field(&fields, "email").to_string(),
        name: field(&fields, "name").to_string(),
        lists: fields.iter().filter(|(k, _)| k == "list").filter_map(|(_, v)| v.parse().ok()).collect(),
    };
    // The budgets, before anything is written or mailed. A solved challenge stands in for them;
    // a wrong one is refused whatever they say (a browser only sends one it was asked for).
    let solution = field(&fields, public_entry::SOLUTION_FIELD);
    let refused = if !solution.is_empty() {
        match public_entry::redeem(db, &app.signer, &ws.slug, solution).await {
            Ok(true) => None,
            Ok(false) => Some((StatusCode::FORBIDDEN, CHECK_FAILED)),
            Err(e) => return error_page(e),
        }
    } else {
        let within = match counted_lists(db, tenant, &typed).await {
            Ok(lists) if lists.is_empty() => Ok(true),
            Ok(lists) => public_entry::within_budget(db, &app.public_entries, tenant, &lists).await,
            Err(e) => Err(e),
        };
        match within {
            Ok(true) => None,
            Ok(false) => Some((StatusCode::TOO_MANY_REQUESTS, CHECK_NEEDED)),
            Err(e) => return error_page(e),
        }
    };
    if let Some((status, message)) = refused {
        let nonce = nonce.map(|axum::Extension(CspNonce(n))| n.to_string()).unwrap_or_default();
        return ask_for_check(&state, &ws.slug, json, (status, message), &typed, nonce).await;
    }
    let header_str = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok()).map(str::to_string);
    let req = SubscribeRequest {
        email: typed.email.clone(),
        name: typed.name.clone(),
        list_ids: typed.lists.clone(),
        origin: Origin {
            source: if header_str(header::REFERER).is_some_and(|r| r.contains(&format!("/s/{ws_slug}"))) {
                "hosted_form".into()
            } else {
                "embedded_form".into()
            },
            ip: Some(client.0.to_string()),
            user_agent: header_str(header::USER_AGENT),
            wording: Some(subscribe::default_wording(&ws.name)),
        },
    };
    let cx = PublicContext { db, signer: &app.signer, jobs: &app.jobs, base_url: &app.base_url };
    match subscribe::subscribe(&cx, tenant, req).await {
        Ok(()) => ok(),
        Err(herald_engine::Error::Invalid(m)) if json => {
            (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(serde_json::json!({ "ok": false, "message": m.to_string() })))
                .into_response()
        }
        Err(herald_engine::Error::Invalid(m)) => {
            let message = m.to_string();
            match render(&state, &ws.slug, None, Some(&message), StatusCode::UNPROCESSABLE_ENTITY, Some(&typed), None)
                .await
            {
                Ok(r) => r,
                Err(e) => error_page(e),
            }
        }
        Err(e) => error_page(e),
    }
}

/// The workspace's public lists an entry names, when it is one that would be mailed (an address
/// that parses): only those count against a budget, and only ids of real lists name a bucket.
/// Anything else is answered by `subscribe` with what is wrong.
async fn counted_lists(db: &Db, tenant: TenantId, typed: &Typed) -> herald_engine::Result<Vec<ListId>> {
    if Email::parse(&typed.email).is_err() {
        return Ok(Vec::new());
    }
    let public = lists::public(db, tenant).await?;
    Ok(public.iter().map(|l| l.id).filter(|id| typed.lists.contains(id)).collect())
}

/// The answer to an entry that needs the check: the form again with what was typed and a fresh
/// challenge, or for a JavaScript client the challenge as JSON (and where to get another).
async fn ask_for_check(
    state: &ServerState,
    ws_slug: &str,
    json: bool,
    (status, message): (StatusCode, &'static str),
    typed: &Typed,
    nonce: String,
) -> Response {
    let app = &state.app;
    let challenge = match public_entry::new_challenge(&app.signer, &app.public_entries, ws_slug) {
        Ok(c) => c,
        Err(e) => return error_page(e),
    };
    if json {
        let body = serde_json::json!({
            "ok": false,
            "challenge_required": true,
            "message": message,
            "challenge": challenge,
            "challenge_url": format!("{}/s/{ws_slug}/challenge.json", app.base_url),
            "field": public_entry::SOLUTION_FIELD,
        });
        return (status, axum::Json(body)).into_response();
    }
    let challenge = match serde_json::to_string(&challenge) {
        Ok(c) => c,
        Err(e) => return error_page(herald_engine::Error::Unexpected(e.into())),
    };
    let check = Check { message, challenge, nonce };
    match render(state, ws_slug, None, None, status, Some(typed), Some(&check)).await {
        Ok(r) => r,
        Err(e) => error_page(e),
    }
}
