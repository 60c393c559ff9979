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

/// Whether responses carry `Strict-Transport-Security` (only when the base URL is https: over
/// plain http the header would be ignored, and on a development machine it would be wrong).
#[derive(Clone, Copy)]
pub struct Https(pub bool);

/// 128 random bits, URL-safe base64 (a valid CSP nonce).
fn new_nonce() -> Arc<str> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()).into()
}

/// Headers every response carries (unless a route set its own): no framing by other sites, no
/// content sniffing, no full URLs (with their tokens) in referrers to other sites, HSTS under
/// https, and a CSP under which only scripts carrying this response's nonce run (plus what they
/// load: `'strict-dynamic'`), so injected markup cannot run script. Styles and images are left
/// open: the app shows emails, whose inline styles and remote images are the point.
pub async fn security_headers(State(https): State<Https>, mut req: Request, next: Next) -> Response {
    let nonce = new_nonce();
    req.extensions_mut().insert(herald_app::ssr::CspNonce(nonce.clone()));
    let mut res = next.run(req).await;
    let headers = res.headers_mut();
    let csp = format!(
        "script-src 'nonce-{nonce}' 'strict-dynamic' 'wasm-unsafe-eval'; frame-ancestors 'self'; base-uri 'self'; \
         object-src 'none'; form-action 'self'"
    );
    if let Ok(csp) = header::HeaderValue::from_str(&csp) {
        headers.entry(header::CONTENT_SECURITY_POLICY).or_insert(csp);
    }
    let mut set = |name: header::HeaderName, value: &'static str| {
        headers.entry(name).or_insert(header::HeaderValue::from_static(value));
    };
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    // SAMEORIGIN, not DENY: the app's own pages show emails in sandboxed frames.
    set(header::X_FRAME_OPTIONS, "SAMEORIGIN");
    set(header::REFERRER_POLICY, "strict-origin-when-cross-origin");
    if https.0 {
        set(header::STRICT_TRANSPORT_SECURITY, "max-age=63072000; includeSubDomains");
    }
    res
}

/// The operator's reverse proxies (`HERALD_TRUSTED_PROXIES`). Only their `X-Forwarded-For` is
/// believed: anyone else can send that header.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(pub Arc<Vec<ipnet::IpNet>>);

impl TrustedProxies {
    pub fn from_setting(setting: &str) -> Result<Self, String> {
        let nets = setting
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|item| {
                item.parse::<ipnet::IpNet>()
                    .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| format!("HERALD_TRUSTED_PROXIES: `{item}` is not an address or a CIDR range"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(Arc::new(nets)))
    }

    fn trusts(&self, ip: std::net::IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The socket's peer, unless it is a trusted proxy: then the right-most address of
    /// `X-Forwarded-For` that is not itself a trusted proxy (addresses further left were
    /// written by the client and prove nothing).
    pub fn client_ip(&self, peer: std::net::IpAddr, headers: &HeaderMap) -> std::net::IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect::<Vec<_>>();
        for hop in forwarded.iter().rev() {
            match hop.parse::<std::net::IpAddr>() {
                Ok(ip) if self.trusts(ip) => continue,
                Ok(ip) => return ip,
                // A garbled hop: nothing left of it can be believed.
                Err(_) => break,
            }
        }
        peer
    }
}

/// Puts the [`herald_app::ssr::ClientIp`] on every request.
pub async fn client_ip(
    State(proxies): State<TrustedProxies>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<std::net::SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    let ip = proxies.client_ip(peer.ip(), req.headers());
    req.extensions_mut().insert(herald_app::ssr::ClientIp(ip));
    next.run(req).await
}
