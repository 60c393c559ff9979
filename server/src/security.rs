//! Cross-site request forgery defence: every state-changing request must come from a page of
//! this app. Leptos server functions have no CSRF protection of their own (leptos #3786), and
//! SameSite=Lax alone does not cover same-site subdomains or GET-encoded calls.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The allowed origin, e.g. `http://127.0.0.1:3000` (scheme://host[:port]).
#[derive(Clone, Debug)]
pub struct AllowedOrigin(pub Arc<String>);

impl AllowedOrigin {
    pub fn from_base_url(base_url: &str) -> Self {
        let origin = url::Url::parse(base_url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_else(|_| base_url.to_string());
        Self(Arc::new(origin))
    }
}

/// Paths that accept cross-site POSTs by design, none of which reads the session cookie:
/// `/api/v1/` authenticates with a bearer key; `/s/` is the subscribe form, embeddable on any
/// site; `/u/` receives RFC 8058 one-click unsubscribes from mail providers (no Origin) and is
/// authorised by the signed token in its path, like `/confirm/`; `/webhooks/` are provider
/// callbacks, authenticated by the provider's signature.
const EXEMPT_PREFIXES: &[&str] = &["/api/v1/", "/s/", "/u/", "/confirm/", "/webhooks/"];

fn request_origin(headers: &HeaderMap) -> Option<String> {
    if let Some(o) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        return Some(o.to_string());
    }
    let referer = headers.get(header::REFERER).and_then(|v| v.to_str().ok())?;
    url::Url::parse(referer).ok().map(|u| u.origin().ascii_serialization())
}

pub async fn require_same_origin(State(allowed): State<AllowedOrigin>, req: Request, next: Next) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let path = req.uri().path();
    if safe || EXEMPT_PREFIXES.iter().any(|p| path.starts_with(p)) {
        return next.run(req).await;
    }
    match request_origin(req.headers()) {
        Some(origin) if origin == *allowed.0 => next.run(req).await,
        origin => {
            tracing::warn!(?origin, path, "cross-site request refused");
            (StatusCode::FORBIDDEN, "Cross-site request refused.").into_response()
        }
    }
}
