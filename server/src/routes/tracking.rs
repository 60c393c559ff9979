//! `GET /o/{token}` (the open pixel) and `GET /c/{token}` (tracked links). Neither waits on
//! Postgres for the hit: the token is checked with its HMAC in memory and the hit goes to the
//! batching recorder. A click needs its link's URL, read once per link and then cached.
//! Anything forged, truncated or of another workspace is a 404 that records nothing; the
//! redirect goes only to the URL registered for the link when the campaign was sent.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;
use herald_engine::tracking::{self, Hit, HitRecorder, TrackingKeys};
use herald_engine::transactional::messages::{self, MessageId};
use herald_engine::{Db, TenantId};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::startup::ServerState;

/// Links resolved so far. Bounded: cleared when full (a cold cache only costs one read a link).
const LINK_CACHE_MAX: usize = 100_000;
/// Transactional hits written at once. Each is a small transaction of its own (transactional
/// volumes are low); beyond this many in flight a hit is dropped and counted, as a full campaign
/// buffer does, so a flood of replayed pixels cannot take every pooled connection.
const MESSAGE_HIT_WRITERS: usize = 4;

#[derive(Clone, Debug)]
pub struct TrackingState {
    pub keys: TrackingKeys,
    pub recorder: HitRecorder,
    links: Arc<RwLock<LinkCache>>,
    message_writers: Arc<Semaphore>,
}

/// (campaign, link id) → URL.
type LinkCache = HashMap<(Uuid, i64), Arc<str>>;

impl TrackingState {
    pub fn new(keys: TrackingKeys, recorder: HitRecorder) -> Self {
        Self { keys, recorder, links: Arc::default(), message_writers: Arc::new(Semaphore::new(MESSAGE_HIT_WRITERS)) }
    }

    /// Writes a transactional open or click off the response's path, if a writer is free;
    /// otherwise drops it and counts the drop (the campaign recorder's `dropped`).
    fn record_message_hit(&self, db: &Db, tenant: TenantId, message: MessageId, click: Option<String>, prefetch: bool) {
        let counters = &self.recorder.counters;
        let Ok(permit) = Arc::clone(&self.message_writers).try_acquire_owned() else {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        let (db, counters) = (db.clone(), counters.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match messages::record_hit(&db, tenant, message, click.as_deref(), prefetch).await {
                Ok(()) => counters.stored.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    tracing::warn!(error = ?e, "could not record a transactional open or click");
                    counters.lost.fetch_add(1, Ordering::Relaxed)
                }
            };
        });
    }

    /// The registered URL, or `None` for a link that is not this campaign's or a campaign that
    /// was never sent. Only answers are cached: a miss needs a correctly signed token, which
    /// only the server can mint, so misses cannot be used to hammer the database.
    async fn link_url(&self, db: &Db, target: &tracking::Target, link: i64) -> Result<Option<Arc<str>>, sqlx::Error> {
        let key = (target.campaign, link);
        if let Some(url) = self.links.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(Some(url.clone()));
        }
        let url: Option<String> = sqlx::query_scalar("SELECT tracked_link($1, $2, $3)")
            .bind(target.tenant)
            .bind(target.campaign)
            .bind(link)
            .fetch_one(db.pool())
            .await?;
        let url: Option<Arc<str>> = url.map(Arc::from);
        if let Some(url) = &url {
            let mut cache = self.links.write().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= LINK_CACHE_MAX {
                cache.clear();
            }
            cache.insert(key, url.clone());
        }
        Ok(url)
    }
}

pub fn router() -> Router<ServerState> {
    Router::new().route("/o/{token}", get(open)).route("/c/{token}", get(click))
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, [(header::CACHE_CONTROL, "no-store")], "Not found").into_response()
}

fn user_agent(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok())
}

async fn open(
    State(state): State<ServerState>,
    axum::Extension(herald_app::ssr::ClientIp(peer)): axum::Extension<herald_app::ssr::ClientIp>,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> Response {
    let t = &state.tracking;
    // Mail clients sometimes append an extension-like suffix; tokens never contain a dot.
    let token = token.split('.').next().unwrap_or_default();
    let prefetch = tracking::is_prefetch(Some(peer), user_agent(&headers));
    if let Some(target) = t.keys.verify_open(token) {
        t.recorder.record(Hit { target, link: None, prefetch, at: Utc::now() });
    } else if let Some((tenant, message)) = t.keys.verify_message_open(token) {
        t.record_message_hit(&state.app.db, tenant, message, None, prefetch);
    } else {
        return not_found();
    }
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("image/gif")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store, no-cache, must-revalidate, max-age=0")),
            (header::PRAGMA, HeaderValue::from_static("no-cache")),
            (header::EXPIRES, HeaderValue::from_static("0")),
        ],
        tracking::PIXEL_GIF,
    )
        .into_response()
}

async fn click(State(state): State<ServerState>, Path(token): Path<String>) -> Response {
    let t = &state.tracking;
    if let Some((tenant, message, index)) = t.keys.verify_message_click(&token) {
        return message_click(&state, tenant, message, index).await;
    }
    let Some((target, link)) = t.keys.verify_click(&token) else { return not_found() };
    let url = match t.link_url(&state.app.db, &target, link).await {
        Ok(Some(url)) => url,
        Ok(None) => return not_found(),
        Err(e) => {
            tracing::error!(error = %e, "looking up a tracked link failed");
            return (StatusCode::SERVICE_UNAVAILABLE, "Please try again in a moment.").into_response();
        }
    };
    let Ok(location) = HeaderValue::from_str(&url) else { return not_found() };
    // Link scanners that prefetch every URL look like clicks; nothing tells them apart reliably.
    t.recorder.record(Hit { target, link: Some(link), prefetch: false, at: Utc::now() });
    redirect(location)
}

/// A click in a transactional message: its link list names the URL (never the request).
async fn message_click(state: &ServerState, tenant: TenantId, message: MessageId, index: i64) -> Response {
    let db = &state.app.db;
    let url = match messages::link(db, tenant, message, index).await {
        Ok(Some(url)) => url,
        Ok(None) => return not_found(),
        Err(e) => {
            tracing::error!(error = ?e, "looking up a transactional link failed");
            return (StatusCode::SERVICE_UNAVAILABLE, "Please try again in a moment.").into_response();
        }
    };
    let Ok(location) = HeaderValue::from_str(&url) else { return not_found() };
    state.tracking.record_message_hit(db, tenant, message, Some(url), false);
    redirect(location)
}

fn redirect(location: HeaderValue) -> Response {
    (
        StatusCode::FOUND,
        [
            (header::LOCATION, location),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        ],
    )
        .into_response()
}
