//! The outbound webhooks' promise under the round's faults. The main workspace has an endpoint
//! receiving `message.sent`, served here by a receiver that fails now and then (a 500, or an
//! answer slower than the senders' timeout). Once everything has settled: each message recorded
//! sent has exactly one `message.sent` event (written in the transaction that records the send,
//! so a killed worker or a restarted Postgres can neither lose nor double it), and every event
//! reached the receiver at least once, under its one id, however often a worker died mid-delivery.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use herald_engine::TenantId;
use herald_engine::infra::egress::Egress;
use herald_engine::infra::tokens::Signer;
use sqlx::PgPool;

use super::stage::Stage;

/// What the senders in the workers are told: a short timeout, so the receiver's slow answers
/// cost an attempt; quick retries, so the round settles in seconds.
pub(super) const WORKER_ENV: &[(&str, &str)] = &[
    ("HERALD_WEBHOOK_TIMEOUT_SECONDS", "2"),
    ("HERALD_WEBHOOK_BACKOFF", "0.2,0.5,1"),
    // The receiver runs here, on loopback; production refuses internal addresses otherwise.
    ("HERALD_EGRESS_ALLOW", "127.0.0.1/32"),
];

/// Every seventh request is answered 500, every 23rd after 3 s (past the timeout).
const FAIL_EVERY: u64 = 7;
const SLOW_EVERY: u64 = 23;

#[derive(Clone, Default)]
pub(super) struct Receiver {
    /// How many times each event id arrived and was answered 2xx or not.
    arrivals: Arc<Mutex<HashMap<String, u32>>>,
    requests: Arc<AtomicU64>,
}

async fn receive(State(r): State<Receiver>, body: String) -> StatusCode {
    let n = r.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let Ok(event) = serde_json::from_str::<serde_json::Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let id = event["id"].as_str().unwrap_or_default().to_string();
    if n % SLOW_EVERY == 0 {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    if n % FAIL_EVERY == 0 {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    *r.arrivals.lock().unwrap_or_else(|e| e.into_inner()).entry(id).or_default() += 1;
    StatusCode::NO_CONTENT
}

impl Receiver {
    /// Listens on loopback; answers until the round's process ends.
    pub(super) async fn start() -> anyhow::Result<(Self, String)> {
        let receiver = Receiver::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hooks", listener.local_addr()?);
        let app = axum::Router::new().route("/hooks", axum::routing::post(receive)).with_state(receiver.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok((receiver, url))
    }

    fn accepted(&self) -> HashMap<String, u32> {
        self.arrivals.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The main workspace's endpoint, sealed with the workers' secret key so they can sign with it.
pub(super) async fn subscribe(stage: &Stage, secret_key: &str, tenant: TenantId, url: &str) -> anyhow::Result<()> {
    let signer = Signer::new(secret_key.as_bytes());
    let egress = Egress::allow_loopback();
    let change = herald_engine::outbound_webhooks::Change {
        db: &stage.db,
        signer: &signer,
        egress: &egress,
        jobs: &stage.jobs,
        tenant,
        role: herald_engine::Role::Owner,
        actor: herald_engine::audit::Actor::Operator,
    };
    let input = herald_types::WebhookEndpointInput {
        url: url.to_string(),
        event_types: vec!["message.sent".into()],
        enabled: true,
        ..Default::default()
    };
    herald_engine::outbound_webhooks::create(&change, &input).await?;
    Ok(())
}

/// Once settled: one event per message recorded sent, every event delivered and received.
pub(super) async fn check(
    owner: &PgPool,
    receiver: &Receiver,
    tenant: TenantId,
    v: &mut Vec<String>,
) -> anyhow::Result<usize> {
    // Campaign mail: rows recorded sent since the endpoint exists (the resend's original was
    // "sent" two days before, by the fixture), per campaign and reader (an automation's reader
    // let in twice has two rows), against the events that name them.
    let sent: Vec<(String, i64)> = sqlx::query_as(
        "SELECT campaign_id::text || ':' || reader_id, count(*) FROM sends
          WHERE tenant_id = $1 AND status = 'sent'
            AND sent_at >= (SELECT min(created_at) FROM webhook_endpoints WHERE tenant_id = $1)
          GROUP BY 1",
    )
    .bind(tenant)
    .fetch_all(owner)
    .await?;
    let announced: Vec<(String, i64)> = sqlx::query_as(
        "SELECT CASE data->'message'->>'channel'
                    WHEN 'campaign' THEN (data->'message'->>'campaign_id') || ':' || (data->'reader'->>'id')
                    ELSE 'message:' || (data->'message'->>'id') END, count(*)
           FROM outbound_events WHERE tenant_id = $1 AND type = 'message.sent' GROUP BY 1",
    )
    .bind(tenant)
    .fetch_all(owner)
    .await?;
    let mut want: BTreeMap<String, i64> = sent.into_iter().collect();
    let messages: Vec<String> =
        sqlx::query_scalar("SELECT 'message:' || id FROM messages WHERE tenant_id = $1 AND status = 'sent'")
            .bind(tenant)
            .fetch_all(owner)
            .await?;
    want.extend(messages.into_iter().map(|m| (m, 1)));
    let got: BTreeMap<String, i64> = announced.into_iter().collect();
    // Told per campaign (or "message" for transactional mail): how many of its rows differ.
    let mut wrong: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for k in want.keys().chain(got.keys()).collect::<std::collections::BTreeSet<_>>() {
        let (w, g) = (want.get(k).copied().unwrap_or(0), got.get(k).copied().unwrap_or(0));
        if w != g {
            let e = wrong.entry(k.split(':').next().unwrap_or_default()).or_default();
            e.0 += 1;
            e.1 += usize::try_from(w).unwrap_or(0);
            e.2 += usize::try_from(g).unwrap_or(0);
        }
    }
    if !wrong.is_empty() {
        let names: HashMap<String, String> =
            sqlx::query_as("SELECT id::text, name FROM campaigns WHERE tenant_id = $1")
                .bind(tenant)
                .fetch_all(owner)
                .await?
                .into_iter()
                .collect();
        let wrong: BTreeMap<&str, _> =
            wrong.into_iter().map(|(k, n)| (names.get(k).map_or(k, String::as_str), n)).collect();
        v.push(format!(
            "message.sent events do not match the messages recorded sent, per campaign (rows that differ, sent, \
             announced): {wrong:?}"
        ));
    }

    // Every event delivered, and the receiver took each one at least once.
    let events: Vec<(String, String)> = sqlx::query_as(
        "SELECT 'evt_' || replace(d.event_id::text, '-', ''), d.state
           FROM outbound_deliveries d WHERE d.tenant_id = $1",
    )
    .bind(tenant)
    .fetch_all(owner)
    .await?;
    let accepted = receiver.accepted();
    let undelivered: Vec<&(String, String)> = events.iter().filter(|(_, state)| state != "delivered").take(5).collect();
    if !undelivered.is_empty() {
        v.push(format!("webhook deliveries not delivered once everything settled: {undelivered:?}"));
    }
    let missing: Vec<&String> =
        events.iter().map(|(id, _)| id).filter(|id| !accepted.contains_key(*id)).take(5).collect();
    if !missing.is_empty() {
        v.push(format!("events the receiver never took: {missing:?}"));
    }
    if events.len() < want.values().sum::<i64>() as usize {
        v.push(format!("{} deliveries for {} messages sent", events.len(), want.values().sum::<i64>()));
    }
    let again = accepted.values().filter(|n| **n > 1).count();
    eprintln!(
        "chaos: {} message.sent events, {} received ({} more than once), {} requests to the receiver",
        events.len(),
        accepted.len(),
        again,
        receiver.requests.load(Ordering::Relaxed)
    );
    Ok(events.len())
}
