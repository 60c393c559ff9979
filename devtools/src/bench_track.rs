//! `herald bench track`: the open and click endpoints under load (a measurement, not a test).
//!
//! Starts the real HTTP server in this process (no job workers, no mail catcher) against the
//! configured Postgres, seeds a sent campaign with `--readers` recipients and two links, then
//! drives `--connections` keep-alive HTTP/1.1 connections on loopback for `--seconds`, 80 %
//! opens and 20 % clicks over every reader's tokens. Afterwards it waits for the write buffer
//! to drain and checks the books: responses == rows stored + counted drops.
//!
//! The load generator is [`crate::load`] (reqwest, one keep-alive connection per task); it
//! shares the process, and so the two cores, with the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use herald_engine::TenantId;
use herald_engine::infra::tokens::Signer;
use herald_engine::tracking::{HitCounters, Target, TrackingKeys};
use uuid::Uuid;

use crate::BenchEnv;

#[derive(clap::Args, Debug, Clone)]
pub struct TrackBench {
    /// Recipients of the seeded campaign (each has its own tokens).
    #[arg(long, default_value_t = 10_000)]
    pub readers: usize,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// How long the load runs.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

pub async fn run(args: TrackBench, env: &BenchEnv) -> anyhow::Result<()> {
    crate::in_bench_workspace(env, "Track Bench", None, args.keep, |owner, tenant| async move {
        measure(&args, env, &owner, tenant).await
    })
    .await
}

async fn measure(args: &TrackBench, env: &BenchEnv, owner: &sqlx::PgPool, tenant: TenantId) -> anyhow::Result<()> {
    // Seeding (not measured): readers, a sent campaign with their send-log rows, two links.
    let campaign = Uuid::new_v4();
    sqlx::query("INSERT INTO campaigns (id, tenant_id, name, status, started_at, finished_at) VALUES ($1, $2, 'Bench', 'sent', now(), now())")
        .bind(campaign)
        .bind(tenant)
        .execute(owner)
        .await?;
    sqlx::query("INSERT INTO campaign_stats (campaign_id, tenant_id) VALUES ($1, $2)")
        .bind(campaign)
        .bind(tenant)
        .execute(owner)
        .await?;
    let readers: Vec<i64> = sqlx::query_scalar(
        "WITH r AS (INSERT INTO readers (tenant_id, email, name)
                    SELECT $1, 'reader' || g || '@example' || (g % 50) || '.com', '' FROM generate_series(1, $2) g
                    RETURNING id, email)
         INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, sent_at)
         SELECT $1, $3, id, email, 'sent', now() FROM r RETURNING reader_id",
    )
    .bind(tenant)
    .bind(args.readers as i32)
    .bind(campaign)
    .fetch_all(owner)
    .await?;
    let links: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO campaign_links (tenant_id, campaign_id, url)
         VALUES ($1, $2, 'https://example.com/a'), ($1, $2, 'https://example.com/b') RETURNING id",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_all(owner)
    .await?;
    let keys = TrackingKeys::new(&Signer::new(&env.secret_key));
    let mac = keys.workspace(tenant);
    // Every fifth request is a click.
    let mut paths: Vec<String> = Vec::with_capacity(readers.len() * 5);
    for (i, r) in readers.iter().enumerate() {
        let target = Target { tenant, campaign, reader: Some(*r) };
        for _ in 0..4 {
            paths.push(format!("/o/{}", keys.open_token(&mac, &target)));
        }
        paths.push(format!("/c/{}", keys.click_token(&mac, &target, links[i % links.len()])));
    }
    let paths = Arc::new(paths);

    // The real server, as `herald serve` builds it, on a free port, without workers.
    let served = (env.serve)().await?;
    let (addr, counters) = (served.addr, served.hit_counters.clone());
    let base = format!("http://{addr}");

    println!(
        "herald bench track: {} readers, {} connections, {} s, 80 % opens / 20 % clicks, server at {addr}",
        readers.len(),
        args.connections,
        args.seconds
    );
    let pg_before = crate::bench::postgres_cpu_seconds();
    let me_before = crate::bench::cpu_seconds("self");
    let (ok, errors, latencies, elapsed) = hammer(&base, paths, args.connections, args.seconds, &[200, 302]).await?;
    // The books: wait until everything accepted is written (or counted lost).
    let drain_start = Instant::now();
    let get = HitCounters::get;
    while get(&counters.accepted) > get(&counters.stored) + get(&counters.discarded) + get(&counters.lost)
        && drain_start.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drained_in = drain_start.elapsed().as_secs_f64();
    let pg_cpu = crate::bench::postgres_cpu_seconds() - pg_before;
    let me_cpu = crate::bench::cpu_seconds("self") - me_before;
    let images = serve_images(args, env, tenant, &base).await?;
    served.stop.await?;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE campaign_id = $1")
        .bind(campaign)
        .fetch_one(owner)
        .await?;
    println!(
        "load:        {ok} responses in {elapsed:.1} s = {:.0} hits/s ({errors} connection errors)",
        ok as f64 / elapsed
    );
    println!("latency:     {}", percentiles(latencies));
    println!(
        "books:       accepted {}, stored {}, dropped {}, discarded {}, lost {}; event rows {rows}; buffer drained {drained_in:.2} s after the load",
        get(&counters.accepted),
        get(&counters.stored),
        get(&counters.dropped),
        get(&counters.discarded),
        get(&counters.lost)
    );
    println!("cpu:         {me_cpu:.1} s this process (server + load generator), {pg_cpu:.1} s Postgres");
    // The stats page's query on the campaign just hammered (rollups only).
    let db = herald_engine::Db::connect(&env.app_database_url, 2).await?;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        herald_engine::campaigns::stats::campaign(&db, tenant, campaign.into()).await?;
        best = best.min(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!("stats page:  {best:.1} ms for the campaign's figures, series, links and domains ({rows} events)");
    let accounted = rows as u64 + get(&counters.dropped);
    if accounted != ok {
        anyhow::bail!("{ok} hits answered but {accounted} accounted for (rows + drops)");
    }
    println!("check:       every hit accounted for (responses == rows stored + counted drops)");
    println!("{images}");
    Ok(())
}

/// The image a campaign shows, fetched as Apple Mail Privacy Protection fetches it (every
/// image of every message on arrival), on the same server right after the tracking load: the
/// first request fills the cache, the rest are answered from it.
async fn serve_images(args: &TrackBench, env: &BenchEnv, tenant: TenantId, base: &str) -> anyhow::Result<String> {
    use herald_engine::media;
    let db = herald_engine::Db::connect(&env.app_database_url, 2).await?;
    let image =
        media::prepare(include_bytes!("../../end2end/fixtures/tulips.png")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let bytes = image.bytes.len();
    let stored = media::save(
        &db,
        &media::MediaStorage::Postgres,
        base,
        tenant,
        None,
        herald_engine::Role::Owner,
        "bench.png",
        image,
        media::MediaQuota::default(),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let path = stored.url.strip_prefix(base).unwrap_or(&stored.url).to_string();
    let (ok, errors, latencies, elapsed) =
        hammer(base, Arc::new(vec![path]), args.connections, args.seconds, &[200]).await?;
    Ok(format!(
        "images:      {ok} responses in {elapsed:.1} s = {:.0} image hits/s of a {bytes}-byte PNG from the cache ({errors} connection errors); latency {}",
        ok as f64 / elapsed,
        percentiles(latencies)
    ))
}

/// `connections` keep-alive clients requesting `paths` in turn for `seconds`: the responses
/// with an expected status, connection errors, their latencies (µs) and the time taken.
async fn hammer(
    base: &str,
    paths: Arc<Vec<String>>,
    connections: usize,
    seconds: u64,
    expected: &'static [u16],
) -> anyhow::Result<(u64, u64, Vec<u32>, f64)> {
    let running = Arc::new(AtomicBool::new(true));
    let started = Instant::now();
    let clients: Vec<_> = (0..connections)
        .map(|c| {
            let (paths, running) = (paths.clone(), running.clone());
            let base = base.to_string();
            let request = move |client: &reqwest::Client, i: usize| {
                client
                    .get(format!("{base}{}", paths[i % paths.len()]))
                    .header("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) bench")
            };
            tokio::spawn(async move { crate::load::client(request, c * 7919, expected, running).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    running.store(false, Ordering::Relaxed);
    let mut latencies: Vec<u32> = Vec::new();
    let (mut ok, mut errors) = (0u64, 0u64);
    for c in clients {
        let (l, e) = c.await?;
        ok += l.len() as u64;
        errors += e;
        latencies.extend(l);
    }
    Ok((ok, errors, latencies, started.elapsed().as_secs_f64()))
}

/// "p50 0.41 ms, p99 2.10 ms, max 9.80 ms" of latencies in µs.
fn percentiles(mut latencies: Vec<u32>) -> String {
    latencies.sort_unstable();
    let at = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        at(0.50) as f64 / 1000.0,
        at(0.99) as f64 / 1000.0,
        latencies.last().copied().unwrap_or(0) as f64 / 1000.0
    )
}
