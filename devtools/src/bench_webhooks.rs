//! `herald bench webhooks`: `message.opened` events from the tracking firehose to a local
//! receiver through the real outbound-webhook senders (a measurement, not a test).
//!
//! Opens are written as the tracking flusher writes them (`record_hits`, one call every 100 ms)
//! at `--rate` a second. Phase 1 writes them with no endpoint subscribed (what tracking costs
//! without webhooks); phase 2 with one endpoint receiving `message.opened`, a receiver on
//! loopback and the senders of one worker process running in this process. Reported: each
//! phase's `record_hits` time per batch, the events' lag from the open to the receiver (p50, p99,
//! max), the backlog of undelivered events every 10 s, and Postgres's CPU per 1,000 events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use herald_engine::infra::egress::Egress;
use herald_engine::infra::tokens::Signer;
use herald_engine::outbound_webhooks::{self as hooks, delivery};
use herald_engine::{Role, TenantId};
use uuid::Uuid;

use crate::BenchEnv;

#[derive(clap::Args, Debug, Clone)]
pub struct WebhooksBench {
    /// Opens per second (1M an hour is 278).
    #[arg(long, default_value_t = 300)]
    pub rate: u32,
    /// How long phase 2 (with the endpoint) writes opens; phase 1 runs a third of it.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// How long the receiver takes to answer each delivery.
    #[arg(long, default_value_t = 0)]
    pub receiver_delay_ms: u64,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

pub async fn run(args: WebhooksBench, env: &BenchEnv) -> anyhow::Result<()> {
    crate::in_bench_workspace(env, "Webhooks Bench", None, args.keep, |owner, tenant| async move {
        measure(&args, env, &owner, tenant).await
    })
    .await
}

#[derive(Clone, Default)]
struct Receiver {
    /// Seconds from each event's open to its arrival here.
    lags: Arc<Mutex<Vec<f64>>>,
    ids: Arc<Mutex<std::collections::HashSet<String>>>,
    duplicates: Arc<AtomicU64>,
    delay: Duration,
}

async fn receive(State(r): State<Receiver>, body: String) -> axum::http::StatusCode {
    let now = chrono::Utc::now();
    if !r.delay.is_zero() {
        tokio::time::sleep(r.delay).await;
    }
    let Ok(event) = serde_json::from_str::<serde_json::Value>(&body) else {
        return axum::http::StatusCode::BAD_REQUEST;
    };
    let id = event["id"].as_str().unwrap_or_default().to_string();
    if !r.ids.lock().unwrap_or_else(|e| e.into_inner()).insert(id) {
        r.duplicates.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(at) = event["timestamp"].as_str().and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok()) {
        r.lags.lock().unwrap_or_else(|e| e.into_inner()).push((now - at).as_seconds_f64());
    }
    axum::http::StatusCode::NO_CONTENT
}

/// Writes `rate` opens a second for `seconds` as the tracking flusher does; returns the opens
/// written and each batch's milliseconds.
async fn write_opens(
    db: &herald_engine::Db,
    tenant: TenantId,
    campaign: Uuid,
    readers: &[i64],
    rate: u32,
    seconds: u64,
) -> anyhow::Result<(u64, Vec<f64>)> {
    let per_batch = (rate as usize / 10).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let started = Instant::now();
    let (mut written, mut times) = (0u64, Vec::new());
    while started.elapsed() < Duration::from_secs(seconds) {
        tick.tick().await;
        let now = chrono::Utc::now();
        let pick = |i: usize| readers[(written as usize + i) % readers.len()];
        let t = Instant::now();
        sqlx::query_scalar::<_, i64>("SELECT record_hits($1, $2, $3, $4, $5, $6, $7)")
            .bind(vec![tenant.0; per_batch])
            .bind(vec![campaign; per_batch])
            .bind((0..per_batch).map(pick).collect::<Vec<_>>())
            .bind(vec![0i64; per_batch])
            .bind(vec![false; per_batch])
            .bind(vec![false; per_batch])
            .bind(vec![now; per_batch])
            .fetch_one(db.pool())
            .await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        written += per_batch as u64;
    }
    Ok((written, times))
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted.get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1))).copied().unwrap_or(0.0)
}

async fn measure(args: &WebhooksBench, env: &BenchEnv, owner: &sqlx::PgPool, tenant: TenantId) -> anyhow::Result<()> {
    let db = herald_engine::Db::connect(&env.app_database_url, 8).await?;
    let campaign = Uuid::new_v4();
    sqlx::query("INSERT INTO campaigns (id, tenant_id, name, subject) VALUES ($1, $2, 'Opened', 'Opened')")
        .bind(campaign)
        .bind(tenant)
        .execute(owner)
        .await?;
    let readers: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO readers (tenant_id, email) SELECT $1, 'r' || g || '@bench.test' FROM generate_series(1, 1000) g RETURNING id",
    )
    .bind(tenant)
    .fetch_all(owner)
    .await?;
    println!(
        "herald bench webhooks: {} opens/s ({:.1}M an hour), phase 1 {} s without an endpoint, phase 2 {} s with one",
        args.rate,
        args.rate as f64 * 3600.0 / 1e6,
        args.seconds / 3,
        args.seconds
    );

    // Phase 1: what tracking costs with no endpoint subscribed.
    let (_, without) = write_opens(&db, tenant, campaign, &readers, args.rate, (args.seconds / 3).max(1)).await?;

    // Phase 2: an endpoint, a receiver and the senders.
    let receiver = Receiver { delay: Duration::from_millis(args.receiver_delay_ms), ..Default::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hooks", listener.local_addr()?);
    let app = axum::Router::new().route("/hooks", axum::routing::post(receive)).with_state(receiver.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let signer = Signer::new(&env.secret_key);
    let jobs = herald_engine::jobs::Jobs::new(&db);
    let egress = Egress::allow_loopback();
    let change = hooks::Change {
        db: &db,
        signer: &signer,
        egress: &egress,
        jobs: &jobs,
        tenant,
        role: Role::Owner,
        actor: herald_engine::audit::Actor::Operator,
    };
    let input = herald_types::WebhookEndpointInput {
        url,
        event_types: vec!["message.opened".into()],
        enabled: true,
        ..Default::default()
    };
    hooks::create(&change, &input).await?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let cx = delivery::WebhookContext {
        db: db.clone(),
        signer: signer.clone(),
        jobs: jobs.clone(),
        config: Arc::new(delivery::WebhookDeliveryConfig { egress, ..Default::default() }),
    };
    let senders = tokio::spawn(delivery::run(cx, stop_rx));
    let backlog = {
        let owner = owner.clone();
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => return samples,
                }
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM outbound_deliveries WHERE tenant_id = $1 AND state = 'pending'",
                )
                .bind(tenant)
                .fetch_one(&owner)
                .await
                .unwrap_or(-1);
                samples.push(n);
            }
        });
        (stop, task)
    };
    let pg_before = crate::bench::postgres_cpu_seconds();
    let me_before = crate::bench::cpu_seconds("self");
    let (written, with) = write_opens(&db, tenant, campaign, &readers, args.rate, args.seconds).await?;
    let drain_started = Instant::now();
    while (receiver.ids.lock().unwrap_or_else(|e| e.into_inner()).len() as u64) < written {
        if drain_started.elapsed() > Duration::from_secs(300) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drained_in = drain_started.elapsed().as_secs_f64();
    let pg_cpu = crate::bench::postgres_cpu_seconds() - pg_before;
    let me_cpu = crate::bench::cpu_seconds("self") - me_before;
    let _ = backlog.0.send(true);
    let samples = backlog.1.await?;
    let _ = stop_tx.send(true);
    senders.await?;

    let received = receiver.ids.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
    let mut lags = receiver.lags.lock().unwrap_or_else(|e| e.into_inner()).clone();
    lags.sort_by(f64::total_cmp);
    println!(
        "record_hits: {:.2} ms a batch of {} without an endpoint, {:.2} ms with one subscribed to opens",
        mean(&without),
        (args.rate / 10).max(1),
        mean(&with)
    );
    println!(
        "delivered:   {received} of {written} events ({} duplicates), the last {drained_in:.1} s after the last open",
        receiver.duplicates.load(Ordering::Relaxed)
    );
    println!(
        "lag:         p50 {:.2} s, p99 {:.2} s, max {:.2} s from the open to the receiver",
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or(0.0)
    );
    let every_10s: Vec<String> = samples.iter().step_by(10).map(|n| n.to_string()).collect();
    println!(
        "backlog:     {} undelivered every 10 s; max {}",
        every_10s.join(", "),
        samples.iter().max().copied().unwrap_or(0)
    );
    println!(
        "cpu:         Postgres {pg_cpu:.1} s ({:.2} s per 1,000 events), this process {me_cpu:.1} s (writer, senders, receiver)",
        pg_cpu * 1000.0 / written.max(1) as f64
    );
    if received < written {
        anyhow::bail!("{} events were not delivered within 300 s", written - received);
    }
    Ok(())
}
