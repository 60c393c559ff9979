//! `herald bench messages`: `POST /api/v1/messages` under load (a measurement, not a test).
//!
//! Starts the real HTTP server in this process (no workers: enqueueing is measured, not SMTP)
//! against the configured Postgres, with a workspace, an API key and a template. Phase 1 drives
//! `--connections` keep-alive connections for `--seconds`, each request a new idempotency key
//! and a rendered template. Phase 2 replays the keys phase 1 used, from all connections at once
//! and in a different order, and checks the books: one message row per key, every replay a 200
//! naming the first request's message.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use herald_engine::transactional::templates::{self, TemplateInput};
use herald_engine::{Role, TenantId, api_keys};
use uuid::Uuid;

use crate::BenchEnv;
use herald_engine::infra::tokens::Signer;

#[derive(clap::Args, Debug, Clone)]
pub struct MessagesBench {
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// How long the load runs.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

pub async fn run(args: MessagesBench, env: &BenchEnv) -> anyhow::Result<()> {
    crate::in_bench_workspace(
        env,
        "Messages Bench",
        Some("noreply@bench.test"),
        args.keep,
        |owner, tenant| async move { measure(&args, env, &owner, tenant).await },
    )
    .await
}

/// The `i`-th message under idempotency key `key`.
fn request(client: &reqwest::Client, url: &str, key: &str, i: usize, api_key: &str) -> reqwest::RequestBuilder {
    let body = format!(
        r#"{{"to":"reader{}@example{}.com","template":"receipt","variables":{{"name":"Reader {i}","order":{i},"total":"{}.00"}}}}"#,
        i % 100_000,
        i % 50,
        i % 500
    );
    client
        .post(url)
        .bearer_auth(api_key)
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(body)
}

async fn measure(args: &MessagesBench, env: &BenchEnv, owner: &sqlx::PgPool, tenant: TenantId) -> anyhow::Result<()> {
    let db = herald_engine::Db::connect(&env.app_database_url, 2).await?;
    let (_, api_key) = api_keys::create(&db, tenant, None, Role::Owner, "bench", Role::Admin).await?;
    herald_engine::sending::domains::mark_verified(&db, &Signer::new(&env.secret_key), tenant, "bench.test").await?;
    templates::create(
        &db,
        tenant,
        Role::Owner,
        &TemplateInput {
            name: "receipt".into(),
            subject: "Your receipt for order {{ order }}".into(),
            html: "<p>Hi {{ name }},</p><p>Order {{ order }}: {{ total }} EUR. <a href=\"https://shop.example/orders/{{ order }}\">See it</a></p>".into(),
            sample: serde_json::json!({"name": "A", "order": 1, "total": "1.00"}),
            ..Default::default()
        },
    )
    .await?;
    let served = (env.serve)().await?;
    let addr = served.addr;
    let url = format!("http://{addr}/api/v1/messages");
    let run_id = Uuid::new_v4().simple().to_string()[..8].to_string();
    println!(
        "herald bench messages: {} connections, {} s, server at {addr}, a new key and a rendered template per request",
        args.connections, args.seconds
    );

    // Phase 1: new keys. Connection c uses keys c, c + n, c + 2n, … so they never collide.
    let n = args.connections;
    let pg_before = crate::bench::postgres_cpu_seconds();
    let me_before = crate::bench::cpu_seconds("self");
    let running = Arc::new(AtomicBool::new(true));
    let counts: Vec<Arc<std::sync::atomic::AtomicUsize>> =
        (0..n).map(|_| Arc::new(std::sync::atomic::AtomicUsize::new(0))).collect();
    let started = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|c| {
            let (running, api_key, run_id, count, url) =
                (running.clone(), api_key.clone(), run_id.clone(), counts[c].clone(), url.clone());
            let make = move |client: &reqwest::Client, j: usize| {
                count.store(j + 1, Ordering::Relaxed);
                let i = c + j * n;
                request(client, &url, &format!("{run_id}-{i}"), i, &api_key)
            };
            tokio::spawn(async move { crate::load::client(make, 0, &[201], running).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    running.store(false, Ordering::Relaxed);
    let mut latencies = Vec::new();
    let mut errors = 0;
    for c in clients {
        let (l, e) = c.await?;
        latencies.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let pg_cpu = crate::bench::postgres_cpu_seconds() - pg_before;
    let me_cpu = crate::bench::cpu_seconds("self") - me_before;
    let created = latencies.len();
    report("enqueue", &mut latencies, elapsed, errors);
    println!("cpu:         {me_cpu:.1} s this process (server + load generator), {pg_cpu:.1} s Postgres");

    // Phase 2: replay every key phase 1 sent, all connections at once, in reverse order.
    let sent_per_conn: Vec<usize> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let keys: Arc<Vec<usize>> =
        Arc::new((0..n).flat_map(|c| (0..sent_per_conn[c]).map(move |j| c + j * n)).rev().collect());
    let total = keys.len();
    // Connections with no share are done from the start.
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(n.saturating_sub(total)));
    let running = Arc::new(AtomicBool::new(true));
    let started = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|c| {
            let (keys, api_key, run_id, done, running, url) =
                (keys.clone(), api_key.clone(), run_id.clone(), done.clone(), running.clone(), url.clone());
            let make = move |client: &reqwest::Client, j: usize| {
                let at = c + j * n;
                if at < keys.len() && at + n >= keys.len() {
                    // This connection's last key of its share.
                    done.fetch_add(1, Ordering::Relaxed);
                }
                let i = keys[at % keys.len()];
                request(client, &url, &format!("{run_id}-{i}"), i, &api_key)
            };
            tokio::spawn(async move { crate::load::client(make, 0, &[200], running).await })
        })
        .collect();
    // Each connection replays its share once.
    let per_conn = total.div_ceil(n);
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.store(false, Ordering::Relaxed);
    let mut replay_latencies = Vec::new();
    let mut replay_errors = 0;
    for c in clients {
        let (l, e) = c.await?;
        replay_latencies.extend(l);
        replay_errors += e;
    }
    let replay_elapsed = started.elapsed().as_secs_f64();
    let replayed = replay_latencies.len();
    report("replay", &mut replay_latencies, replay_elapsed, replay_errors);
    served.stop.await?;

    let (rows, distinct): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT idempotency_key) FROM messages WHERE tenant_id = $1")
            .bind(tenant)
            .fetch_one(owner)
            .await?;
    println!(
        "books:       {created} created (201), {replayed} replays answered 200 of {total} keys (~{per_conn} per connection); {rows} message rows, {distinct} distinct keys"
    );
    if rows != distinct || rows as usize != created {
        anyhow::bail!("expected one message per created key: {created} created, {rows} rows, {distinct} keys");
    }
    println!("check:       one message per key; replays created nothing");
    Ok(())
}

fn report(phase: &str, latencies: &mut [u32], elapsed: f64, errors: u64) {
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    println!(
        "{phase}: {:>8} answered in {elapsed:.1} s = {:.0} requests/s ({errors} errors); p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        latencies.len(),
        latencies.len() as f64 / elapsed,
        pct(0.5),
        pct(0.99),
        latencies.last().copied().unwrap_or(0) as f64 / 1000.0
    );
}
