//! Server-only plumbing shared by the server functions: the application state they get from
//! context, and the session and role checks every one of them starts with.

use std::sync::Arc;

use herald_engine::infra::rate_limit::RateLimiter;
use herald_engine::infra::tokens::Signer;
use herald_engine::jobs::Jobs;
use herald_engine::{Db, Role, TenantId, UserId};
use leptos::prelude::*;
use tower_sessions::Session;

use crate::error::AppError;

pub const SESSION_USER: &str = "user_id";
pub const SESSION_TENANT: &str = "tenant_id";

/// Everything a server function may need, provided once by the server as Leptos context.
#[derive(Clone, Debug)]
pub struct AppState {
    pub db: Db,
    pub signer: Signer,
    pub jobs: Jobs,
    /// The server's default SMTP identity (`HERALD_SMTP_URL`), for test sends.
    pub default_identity: herald_engine::sending::identities::SmtpIdentity,
    /// Where a workspace's own SMTP identity may connect (`HERALD_EGRESS_ALLOW`).
    pub egress: herald_engine::infra::egress::Egress,
    /// Public base URL, e.g. `https://herald.example.com` (no trailing slash).
    pub base_url: String,
    pub dev_mode: bool,
    /// Login and sign-up attempts per client IP.
    pub auth_ip_limiter: Arc<RateLimiter>,
    /// Login attempts per account (lowercased email).
    pub auth_account_limiter: Arc<RateLimiter>,
    /// The public forms' budgets (per client, list and workspace, kept in Postgres) and the
    /// work their challenge asks for once one is spent.
    pub public_entries: herald_engine::audience::public_entry::EntryLimits,
    /// Template previews per member (each one runs a sandboxed render).
    pub preview_limiter: Arc<RateLimiter>,
    /// Where transactional messages are accepted (API and the templates page's test send).
    pub outbox: herald_engine::transactional::messages::Outbox,
    /// Live DNS checks of sending domains (`HERALD_DNS_SERVER`, `HERALD_SPF_INCLUDE`).
    pub domains: herald_engine::sending::domains::DomainChecker,
    /// Where the media library keeps image bytes, and how much it may keep.
    pub media_storage: herald_engine::media::MediaStorage,
    pub media_quota: herald_engine::media::MediaQuota,
}

pub fn state() -> Result<AppState, AppError> {
    use_context::<AppState>().ok_or_else(|| {
        tracing::error!("AppState missing from context");
        AppError::Internal
    })
}

pub async fn session() -> Result<Session, AppError> {
    leptos_axum::extract::<Session>().await.map_err(|e| {
        tracing::error!(error = ?e, "session layer missing");
        AppError::Internal
    })
}

/// An id from a form or URL. A malformed one is answered like an unknown one: 404.
pub fn parse_id(raw: &str) -> Result<uuid::Uuid, AppError> {
    uuid::Uuid::parse_str(raw.trim()).map_err(|_| AppError::NotFound.respond())
}

/// The client's address, as the server's middleware worked it out: the socket's peer, or,
/// when that peer is one of the operator's trusted proxies (`HERALD_TRUSTED_PROXIES`), the
/// address it forwarded for. Every limiter keys on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientIp(pub std::net::IpAddr);

impl ClientIp {
    /// What a per-client limiter counts: the IPv4 address, or the IPv6 /64 around the address.
    /// One IPv6 customer holds a whole /64 (2^64 addresses), so keying on the full address gave
    /// an attacker unlimited keys.
    pub fn limiter_key(self) -> String {
        match self.0 {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => {
                    let s = v6.segments();
                    format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
                }
            },
        }
    }
}

/// This response's Content-Security-Policy nonce, chosen by the server's edge middleware: only
/// scripts that carry it run, and Leptos writes it on every script it emits (the server's render
/// context hands it to [`leptos::nonce::Nonce`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CspNonce(pub std::sync::Arc<str>);

pub async fn client_ip() -> String {
    match leptos_axum::extract::<axum::Extension<ClientIp>>().await {
        Ok(axum::Extension(ClientIp(ip))) => ip.to_string(),
        Err(_) => "unknown".into(),
    }
}

/// The client as limiters count it ([`ClientIp::limiter_key`]).
pub async fn client_limiter_key() -> String {
    match leptos_axum::extract::<axum::Extension<ClientIp>>().await {
        Ok(axum::Extension(ip)) => ip.limiter_key(),
        Err(_) => "unknown".into(),
    }
}

fn session_err(e: tower_sessions::session::Error) -> AppError {
    tracing::error!(error = ?e, "session store failed");
    AppError::Internal
}

pub async fn session_user(session: &Session) -> Result<Option<UserId>, AppError> {
    session.get::<UserId>(SESSION_USER).await.map_err(session_err)
}

pub async fn set_session_tenant(session: &Session, tenant: TenantId) -> Result<(), AppError> {
    session.insert(SESSION_TENANT, tenant).await.map_err(session_err)
}

/// Session keys the sessions page reads (see `herald_engine::accounts`).
const SESSION_USER_AGENT: &str = "ua";
const SESSION_IP: &str = "ip";
const SESSION_STARTED: &str = "started";
const SESSION_SEEN: &str = "seen";
/// "Last seen" is written at most this often, not on every request.
const SEEN_EVERY: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// Starts a logged-in session for `user`, with a new session id (no fixation), noting the
/// device and address it started from for the sessions page.
pub async fn log_in(session: &Session, user: UserId) -> Result<(), AppError> {
    session.cycle_id().await.map_err(session_err)?;
    session.remove_value(SESSION_PENDING_2FA).await.map_err(session_err)?;
    session.insert(SESSION_USER, user).await.map_err(session_err)?;
    let user_agent: String = leptos_axum::extract::<axum::http::HeaderMap>()
        .await
        .ok()
        .and_then(|h| {
            h.get(axum::http::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(|s| s.chars().take(300).collect())
        })
        .unwrap_or_default();
    let now = chrono::Utc::now().to_rfc3339();
    session.insert(SESSION_USER_AGENT, user_agent).await.map_err(session_err)?;
    session.insert(SESSION_IP, client_ip().await).await.map_err(session_err)?;
    session.insert(SESSION_STARTED, &now).await.map_err(session_err)?;
    session.insert(SESSION_SEEN, &now).await.map_err(session_err)?;
    Ok(())
}

/// A session whose password step passed for an account with two-factor: the user, when, and
/// where to go after the code.
const SESSION_PENDING_2FA: &str = "pending_2fa";
/// How long the code step may take after the password step.
const SECOND_FACTOR_WINDOW: i64 = 600;

/// Remembers that `user` passed the password step; nothing else is reachable until the code.
pub async fn start_second_factor(session: &Session, user: UserId, next: String) -> Result<(), AppError> {
    session.cycle_id().await.map_err(session_err)?;
    session.remove_value(SESSION_USER).await.map_err(session_err)?;
    session.insert(SESSION_PENDING_2FA, (user, chrono::Utc::now().timestamp(), next)).await.map_err(session_err)
}

/// The user waiting for their second factor in this session and where they were going, unless
/// the window has passed.
pub async fn pending_second_factor(session: &Session) -> Result<Option<(UserId, String)>, AppError> {
    let pending: Option<(UserId, i64, String)> = session.get(SESSION_PENDING_2FA).await.map_err(session_err)?;
    Ok(pending
        .filter(|(_, at, _)| chrono::Utc::now().timestamp() - at < SECOND_FACTOR_WINDOW)
        .map(|(user, _, next)| (user, next)))
}

/// This session's id as the store keeps it (what `herald_engine::accounts` compares with).
pub fn session_id(session: &Session) -> String {
    session.id().map(|id| id.to_string()).unwrap_or_default()
}

/// Moves "last seen" forward when it is older than [`SEEN_EVERY`].
async fn note_seen(session: &Session) -> Result<(), AppError> {
    let seen: Option<String> = session.get(SESSION_SEEN).await.map_err(session_err)?;
    let stale = seen
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s).ok())
        .is_none_or(|t| chrono::Utc::now().signed_duration_since(t) > SEEN_EVERY);
    if stale {
        session.insert(SESSION_SEEN, chrono::Utc::now().to_rfc3339()).await.map_err(session_err)?;
    }
    Ok(())
}

pub async fn log_out(session: &Session) -> Result<(), AppError> {
    session.flush().await.map_err(session_err)
}

/// The logged-in user, or `Unauthenticated`.
pub async fn require_user() -> Result<(AppState, Session, UserId), AppError> {
    let state = state()?;
    let session = session().await?;
    let user = session_user(&session).await?.ok_or_else(|| AppError::Unauthenticated.respond())?;
    note_seen(&session).await?;
    Ok((state, session, user))
}

/// The caller of a workspace-scoped server function.
#[derive(Clone, Debug)]
pub struct Member {
    pub state: AppState,
    pub user: UserId,
    pub tenant: TenantId,
    pub role: Role,
}

impl Member {
    /// Appends an entry to the workspace's audit log for what this member just did (see
    /// `herald_engine::audit`); a failed write is logged, not returned.
    pub async fn audit(&self, action: herald_engine::audit::Action, object: impl ToString, detail: serde_json::Value) {
        let actor = herald_engine::audit::Actor::User { id: self.user, ip: client_ip().await };
        herald_engine::audit::note(&self.state.db, self.tenant, &actor, action, &object.to_string(), detail).await;
    }
}

/// Checks the session, the current workspace and that the user's role there is at least `min`.
/// The role is read from the database on every call, so a removed member loses access at once;
/// so is the workspace's two-factor rule.
/// Template previews one member may ask for per minute.
pub const PREVIEWS_PER_MINUTE: u32 = 30;

/// Counts one template preview against the member's allowance ([`AppState::preview_limiter`]):
/// a preview runs a sandboxed render, and only the viewer role is needed to ask for one.
pub fn count_preview(m: &Member) -> Result<(), AppError> {
    match m.state.preview_limiter.retry_after(&m.user.to_string()) {
        None => Ok(()),
        Some(wait) => {
            let secs = wait.as_secs().max(1);
            Err(AppError::Busy {
                message: format!("You have asked for many previews in the last minute; try again in {secs} s."),
                retry_after: secs,
            }
            .respond())
        }
    }
}

pub async fn require_role(min: Role) -> Result<Member, AppError> {
    let (state, session, _) = require_user().await?;
    let (tenant, user, role) = member_of_session(&state.db, &session, min).await.map_err(AppError::respond)?;
    Ok(Member { state, user, tenant, role })
}

/// The one membership check, for server functions ([`require_role`]) and the server's plain
/// routes (uploads and downloads) alike: the session's user, in the session's workspace, with a
/// role of at least `min` (and two-factor if the workspace requires it).
pub async fn member_of_session(db: &Db, session: &Session, min: Role) -> Result<(TenantId, UserId, Role), AppError> {
    let user = session_user(session).await?.ok_or(AppError::Unauthenticated)?;
    let tenant = session.get::<TenantId>(SESSION_TENANT).await.map_err(session_err)?.ok_or(AppError::NotFound)?;
    let role = herald_engine::workspaces::access(db, tenant, user).await?.ok_or(AppError::Forbidden)?;
    role.require(min)?;
    Ok((tenant, user, role))
}
