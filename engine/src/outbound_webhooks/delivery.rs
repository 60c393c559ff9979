//! The webhook senders: claim due deliveries across workspaces, send each signed, record the
//! answer, and schedule the next attempt.
//!
//! - At least once: a claim moves a delivery a lease ahead; a process that dies mid-attempt
//!   leaves it due again when the lease runs out, and the receiver may see it twice (the same
//!   `webhook-id`, so it can tell).
//! - Fair: a claim takes a few deliveries per endpoint, endpoints in random order, and skips the
//!   endpoints this process already has that many in flight to. A slow endpoint holds only its
//!   own share of the senders, for at most the timeout each.
//! - Retries: exponential backoff with jitter until the delivery is a day old, then `failed`.
//!   An endpoint whose every attempt failed for three days is disabled and its workspace's
//!   admins are mailed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use herald_types::webhook::SCHEMA_VERSION;
use rand::Rng;
use uuid::Uuid;

use super::signing;
use crate::domain::TenantId;
use crate::error::Result;
use crate::infra::db::Db;
use crate::infra::egress::Egress;
use crate::infra::sealing;
use crate::infra::tokens::Signer;
use crate::jobs::Jobs;

#[derive(Clone, Debug)]
pub struct WebhookDeliveryConfig {
    /// Where endpoints may be (`HERALD_EGRESS_ALLOW`).
    pub egress: Egress,
    /// The wait after the 1st, 2nd, … failed attempt; the last repeats (`HERALD_WEBHOOK_BACKOFF`).
    pub backoff: Vec<Duration>,
    /// Attempts go on until a delivery is this old.
    pub retry_for: Duration,
    /// An endpoint whose every attempt failed this long is disabled.
    pub disable_after: Duration,
    /// Deliveries in flight per endpoint, per process.
    pub per_endpoint: u32,
    /// Deliveries in flight in all, per process.
    pub concurrency: usize,
    pub timeout: Duration,
    /// Delivered and failed events are pruned after this.
    pub keep_for: Duration,
    /// How often an idle sender looks for due deliveries.
    pub poll: Duration,
}

impl Default for WebhookDeliveryConfig {
    fn default() -> Self {
        Self {
            egress: Egress::default(),
            backoff: DEFAULT_BACKOFF.iter().map(|s| Duration::from_secs(*s)).collect(),
            retry_for: Duration::from_secs(24 * 3600),
            disable_after: Duration::from_secs(72 * 3600),
            per_endpoint: 8,
            concurrency: 32,
            timeout: Duration::from_secs(10),
            keep_for: Duration::from_secs(7 * 24 * 3600),
            poll: Duration::from_millis(250),
        }
    }
}

/// 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, then every 4 h: about a dozen attempts in the
/// first day.
pub const DEFAULT_BACKOFF: [u64; 8] = [5, 30, 120, 600, 1800, 3600, 7200, 14400];

/// The wait after `attempts` failed attempts, ±20 % so a receiver that was down is not hit by
/// every retry in the same second.
pub fn retry_wait(backoff: &[Duration], attempts: i32) -> Duration {
    let i = usize::try_from(attempts.max(1) - 1).unwrap_or(0).min(backoff.len().saturating_sub(1));
    let base = backoff.get(i).copied().unwrap_or(Duration::from_secs(60));
    base.mul_f64(rand::thread_rng().gen_range(0.8..1.2))
}

#[derive(Clone)]
pub struct WebhookContext {
    pub db: Db,
    pub signer: Signer,
    pub jobs: Jobs,
    pub config: Arc<WebhookDeliveryConfig>,
}

type Claimed =
    (Uuid, Uuid, Uuid, i32, String, String, Option<String>, String, serde_json::Value, DateTime<Utc>, DateTime<Utc>);

/// One claimed delivery.
struct Due {
    tenant: TenantId,
    endpoint: Uuid,
    event: Uuid,
    attempts: i32,
    url: String,
    secret: String,
    previous_secret: Option<String>,
    event_type: String,
    data: serde_json::Value,
    occurred_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
}

/// What one attempt got.
pub struct Outcome {
    pub status: Option<u16>,
    pub error: Option<String>,
    pub latency: Duration,
    pub response: String,
}

impl Outcome {
    fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Runs until `stop`; the attempts in flight then finish (each within the timeout).
pub async fn run(cx: WebhookContext, mut stop: tokio::sync::watch::Receiver<bool>) {
    let in_flight: Arc<Mutex<HashMap<Uuid, u32>>> = Arc::default();
    let freed = Arc::new(tokio::sync::Notify::new());
    let permits = Arc::new(tokio::sync::Semaphore::new(cx.config.concurrency.max(1)));
    let client = cx.config.egress.http_client(cx.config.timeout, 0, "Herald-Webhooks/1");
    let mut pruned_at = Instant::now();
    loop {
        if *stop.borrow() {
            break;
        }
        let room = permits.available_permits();
        let mut claimed = 0;
        if room > 0 {
            let busy: Vec<Uuid> = {
                let map = in_flight.lock().unwrap_or_else(|e| e.into_inner());
                map.iter().filter(|(_, n)| **n >= cx.config.per_endpoint).map(|(id, _)| *id).collect()
            };
            match claim(&cx, room, &busy).await {
                Ok(due) => {
                    claimed = due.len();
                    for d in due {
                        let Ok(permit) = permits.clone().try_acquire_owned() else { break };
                        *in_flight.lock().unwrap_or_else(|e| e.into_inner()).entry(d.endpoint).or_default() += 1;
                        let (cx, client, in_flight, freed) =
                            (cx.clone(), client.clone(), in_flight.clone(), freed.clone());
                        tokio::spawn(async move {
                            let endpoint = d.endpoint;
                            attempt_and_record(&cx, &client, d).await;
                            {
                                let mut map = in_flight.lock().unwrap_or_else(|e| e.into_inner());
                                if let Some(n) = map.get_mut(&endpoint) {
                                    *n = n.saturating_sub(1);
                                    if *n == 0 {
                                        map.remove(&endpoint);
                                    }
                                }
                            }
                            drop(permit);
                            freed.notify_one();
                        });
                    }
                }
                Err(e) => tracing::warn!(error = ?e, "webhook claim failed; trying again shortly"),
            }
        }
        if pruned_at.elapsed() > Duration::from_secs(600) {
            pruned_at = Instant::now();
            if let Err(e) = prune(&cx.db, cx.config.keep_for).await {
                tracing::warn!(error = ?e, "pruning delivered webhook events failed");
            }
        }
        // Claim again at once after a claim that found work; otherwise wait for an attempt to
        // finish (its endpoint may have more due), a poll, or the stop.
        if claimed == 0 || permits.available_permits() == 0 {
            tokio::select! {
                _ = tokio::time::sleep(cx.config.poll) => {}
                _ = freed.notified() => {}
                _ = stop.changed() => {}
            }
        }
    }
    // Let the attempts in flight finish and record their answers.
    let _ = permits.acquire_many(cx.config.concurrency.max(1) as u32).await;
}

async fn claim(cx: &WebhookContext, room: usize, busy: &[Uuid]) -> Result<Vec<Due>> {
    // The lease outlasts an attempt (the timeout) and its recording.
    let lease = cx.config.timeout * 2 + Duration::from_secs(5);
    let rows: Vec<Claimed> = sqlx::query_as("SELECT * FROM webhook_claim($1, $2, $3, $4)")
        .bind(cx.config.per_endpoint as i32)
        .bind(room as i32)
        .bind(lease.as_secs_f64())
        .bind(busy)
        .fetch_all(cx.db.pool())
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| Due {
            tenant: TenantId::from(r.0),
            endpoint: r.1,
            event: r.2,
            attempts: r.3,
            url: r.4,
            secret: r.5,
            previous_secret: r.6,
            event_type: r.7,
            data: r.8,
            occurred_at: r.9,
            created_at: r.10,
        })
        .collect())
}

/// The body every attempt of an event sends: the same bytes each time but for nothing.
pub fn payload(event_id: &str, event_type: &str, occurred_at: DateTime<Utc>, data: &serde_json::Value) -> String {
    serde_json::json!({
        "id": event_id,
        "type": event_type,
        "timestamp": occurred_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "schema_version": SCHEMA_VERSION,
        "data": data,
    })
    .to_string()
}

async fn attempt_and_record(cx: &WebhookContext, client: &reqwest::Client, d: Due) {
    let outcome = attempt(cx, client, &d).await;
    if let Err(e) = record(cx, &d, &outcome).await {
        // The lease brings the delivery back; the receiver may see it again (same id).
        tracing::warn!(error = ?e, "could not record a webhook attempt");
    }
}

async fn attempt(cx: &WebhookContext, client: &reqwest::Client, d: &Due) -> Outcome {
    let id = signing::event_id(d.event);
    let body = payload(&id, &d.event_type, d.occurred_at, &d.data);
    let mut secrets = Vec::new();
    for sealed in std::iter::once(&d.secret).chain(d.previous_secret.iter()) {
        match sealing::open(&cx.signer, sealed) {
            Ok(s) => secrets.push(s),
            Err(e) => tracing::error!(error = ?e, "a webhook endpoint's secret cannot be opened"),
        }
    }
    let started = Instant::now();
    // Names are checked as the client resolves them; an address in the URL is checked here.
    if !url::Url::parse(&d.url).is_ok_and(|u| cx.config.egress.permits_url(&u)) {
        return Outcome {
            status: None,
            error: Some("Herald could not connect to the endpoint.".into()),
            latency: Duration::ZERO,
            response: String::new(),
        };
    }
    if secrets.is_empty() {
        return Outcome {
            status: None,
            error: Some("Herald could not sign this delivery.".into()),
            latency: Duration::ZERO,
            response: String::new(),
        };
    }
    let timestamp = Utc::now().timestamp();
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let signature = signing::signature_header(&refs, &id, timestamp, body.as_bytes());
    let sent = client
        .post(&d.url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(res) => {
            let status = res.status().as_u16();
            let response = read_start(res, 2048).await;
            Outcome { status: Some(status), error: None, latency: started.elapsed(), response }
        }
        // What the workspace is told is generic: never what an inside address answered.
        Err(e) => {
            let error = if e.is_timeout() {
                format!("No answer within {} s.", cx.config.timeout.as_secs())
            } else if e.is_redirect() {
                "The endpoint answered with a redirect; Herald does not follow them.".to_string()
            } else if e.is_connect() {
                "Herald could not connect to the endpoint.".to_string()
            } else {
                "The request failed.".to_string()
            };
            Outcome { status: None, error: Some(error), latency: started.elapsed(), response: String::new() }
        }
    }
}

/// The first `max` bytes of an answer, as text.
async fn read_start(res: reqwest::Response, max: usize) -> String {
    let mut out = Vec::new();
    let mut stream = res.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        out.extend_from_slice(&chunk[..chunk.len().min(max - out.len())]);
        if out.len() >= max {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn record(cx: &WebhookContext, d: &Due, o: &Outcome) -> Result<()> {
    let mut tx = cx.db.tenant_tx(d.tenant).await?;
    let latency = i32::try_from(o.latency.as_millis()).unwrap_or(i32::MAX);
    let status = o.status.map(|s| s as i16);
    if o.delivered() {
        sqlx::query(
            "UPDATE outbound_deliveries SET state = 'delivered', delivered_at = now(), last_status = $4,
                    last_error = NULL, last_latency_ms = $5, last_response = $6
              WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id = $3",
        )
        .bind(d.tenant)
        .bind(d.endpoint)
        .bind(d.event)
        .bind(status)
        .bind(latency)
        .bind(&o.response)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE webhook_endpoints SET failing_since = NULL
              WHERE tenant_id = $1 AND id = $2 AND failing_since IS NOT NULL",
        )
        .bind(d.tenant)
        .bind(d.endpoint)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        return Ok(());
    }
    let give_up = Utc::now() - d.created_at >= chrono::Duration::from_std(cx.config.retry_for).unwrap_or_default();
    let wait = retry_wait(&cx.config.backoff, d.attempts);
    sqlx::query(
        "UPDATE outbound_deliveries
            SET state = CASE WHEN $4 THEN 'failed' ELSE 'pending' END,
                next_attempt_at = now() + make_interval(secs => $5),
                last_status = $6, last_error = $7, last_latency_ms = $8, last_response = $9
          WHERE tenant_id = $1 AND endpoint_id = $2 AND event_id = $3",
    )
    .bind(d.tenant)
    .bind(d.endpoint)
    .bind(d.event)
    .bind(give_up)
    .bind(wait.as_secs_f64())
    .bind(status)
    .bind(&o.error)
    .bind(latency)
    .bind(&o.response)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE webhook_endpoints SET failing_since = now()
          WHERE tenant_id = $1 AND id = $2 AND failing_since IS NULL",
    )
    .bind(d.tenant)
    .bind(d.endpoint)
    .execute(&mut *tx)
    .await?;
    let disabled: Option<String> = sqlx::query_scalar(
        "UPDATE webhook_endpoints
            SET enabled = false, updated_at = now(),
                disabled_reason = 'Every delivery failed for ' || round($3 / 3600) || ' hours, so Herald turned this endpoint off.'
          WHERE tenant_id = $1 AND id = $2 AND enabled AND failing_since < now() - make_interval(secs => $3)
         RETURNING url",
    )
    .bind(d.tenant)
    .bind(d.endpoint)
    .bind(cx.config.disable_after.as_secs_f64())
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    if let Some(url) = disabled {
        let hours = cx.config.disable_after.as_secs() / 3600;
        super::mail_admins(
            &cx.db,
            &cx.jobs,
            d.tenant,
            "A webhook endpoint was turned off",
            &format!(
                "Every delivery to {url} failed for {hours} hours, so Herald turned the endpoint off. \
                 Events are not queued for it while it is off.\n\nFix the receiver, then turn the endpoint \
                 on again on Settings → Webhooks."
            ),
        )
        .await?;
    }
    Ok(())
}

async fn prune(db: &Db, keep_for: Duration) -> Result<()> {
    loop {
        let n: i32 = sqlx::query_scalar("SELECT webhook_prune($1, 5000)")
            .bind(keep_for.as_secs_f64())
            .fetch_one(db.pool())
            .await?;
        if n < 5000 {
            return Ok(());
        }
    }
}
