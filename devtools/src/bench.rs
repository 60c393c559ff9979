//! `herald bench send`: the send engine's benchmark (a measurement, not a test).
//!
//! In one run, against the configured Postgres and a `herald dev smtp-sink` child process (a
//! separate process, so its CPU is not counted as Herald's, like a real MTA):
//!
//! 1. **Raw blast**: the sink's limit with the delivery workers' own SMTP client and nothing
//!    else (no database, no rendering).
//! 2. **Fan-out**: a campaign to `--fanout-readers` readers (default 1M), timed against a bare
//!    `INSERT … SELECT` of the same rows into the same table as the same role.
//! 3. **End to end**: a 2 KB personalised campaign to `--readers` readers (default 100k), from
//!    the "send" compare-and-set through the apalis jobs (fan-out, delivery workers claiming,
//!    rendering, SMTP, acknowledging) until the campaign is `sent`, with CPU seconds of this
//!    process and of the Postgres server, and peak RSS.
//!
//! Everything lives in a fresh workspace, deleted at the end unless `--keep`.

use std::time::{Duration, Instant};

use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::store::{self, CampaignInput};
use herald_engine::campaigns::{fanout, progress};
use herald_engine::infra::tokens::Signer;
use herald_engine::jobs;
use herald_engine::sending::identities::SmtpIdentity;
use herald_engine::sending::mail::Mailer;
use herald_engine::sending::smtp::{SmtpConnection, SmtpServer};
use herald_engine::worker::WorkerSetup;
use herald_engine::{Db, Role, TenantId};
use uuid::Uuid;

use crate::BenchEnv;

#[derive(clap::Args, Debug, Clone)]
pub struct SendBench {
    /// Readers the end-to-end send goes to.
    #[arg(long, default_value_t = 100_000)]
    pub readers: usize,
    /// Readers the fan-out measurement writes send-log rows for (at least --readers).
    #[arg(long, default_value_t = 1_000_000)]
    pub fanout_readers: usize,
    /// SMTP connections (delivery workers) for the end-to-end send and for the raw blast.
    #[arg(long, default_value_t = 16)]
    pub connections: u32,
    /// Messages in the raw blast.
    #[arg(long, default_value_t = 100_000)]
    pub blast_messages: usize,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
    /// Sign every message with DKIM: `--dkim` or `--dkim rsa` with a fresh RSA-2048 key
    /// (`openssl genrsa`), `--dkim ed25519` with a fresh Ed25519 key (`openssl genpkey`).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "rsa")]
    pub dkim: Option<DkimAlgorithm>,
    /// 250s recorded per statement and rows armed ahead (`HERALD_SEND_ACK_BATCH` otherwise).
    #[arg(long)]
    pub ack_batch: Option<usize>,
    /// Skip the fan-out measurement (the 1M-row walk), for a quicker end-to-end figure.
    #[arg(long)]
    pub skip_fanout: bool,
    /// Give the workspace a webhook endpoint receiving `message.sent`, so every send also writes
    /// its event (the endpoint is on an address the senders refuse at once: the figure is the
    /// events' cost to the send, not a receiver's).
    #[arg(long)]
    pub webhook: bool,
    /// Send from this many `herald worker` child processes (sharing `--connections`) instead of
    /// workers inside this process; their CPU is counted as Herald's.
    #[arg(long, default_value_t = 0)]
    pub processes: u32,
}

/// CPU time (user + system) of a process, from /proc (Linux only; zero elsewhere).
pub(crate) fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { return 0.0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / clock_ticks_per_second()
}

/// Asked once: `postgres_cpu_seconds` reads every server process.
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// CPU seconds of every process named `postgres` on this machine (the database server; only
/// meaningful when it runs here, as in development).
pub(crate) fn postgres_cpu_seconds() -> f64 {
    cpu_seconds_of(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres"))
}

/// Herald's template sandbox children (`herald render-sandbox`): Herald's work, in other
/// processes.
pub(crate) fn render_sandbox_cpu_seconds() -> f64 {
    cpu_seconds_of(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            c.split(|b| *b == 0).any(|arg| arg == herald_engine::sending::template_sandbox::CHILD_COMMAND.as_bytes())
        })
    })
}

/// CPU seconds of every live process `matches` picks.
fn cpu_seconds_of(matches: impl Fn(&str) -> bool) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|pid| pid.chars().all(|c| c.is_ascii_digit()))
        .filter(|pid| matches(pid))
        .map(|pid| cpu_seconds(&pid))
        .sum()
}

/// Peak resident set size of this process, in MiB.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// A ~2 KB Markdown body with the usual merge tags.
pub(crate) fn two_kb_body() -> String {
    let mut body = String::from("Hello {{ reader.name | default(\"friend\") }},\n\n");
    let paragraph = "This week in Herald: the quick brown fox jumps over the lazy dog, and the \
                     newsletter reaches every reader exactly once, however often the workers fall over.\n\n";
    while body.len() < 1800 {
        body.push_str(paragraph);
    }
    body.push_str("[Read more](https://example.com/issue/42)\n\n[Unsubscribe]({{ unsubscribe_url }})\n");
    body
}

/// The sink as a child process on a free port; killed when dropped.
pub(crate) async fn start_sink() -> anyhow::Result<(tokio::process::Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = tokio::process::Command::new(std::env::current_exe()?)
        .args(["dev", "smtp-sink", "--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        anyhow::ensure!(Instant::now() < deadline, "the SMTP sink did not start on port {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((child, format!("smtp://127.0.0.1:{port}")))
}

pub async fn run(args: SendBench, env: &BenchEnv) -> anyhow::Result<()> {
    let SendBench {
        readers,
        fanout_readers,
        connections,
        blast_messages,
        keep,
        dkim,
        ack_batch,
        skip_fanout,
        processes,
        webhook,
    } = args;
    anyhow::ensure!(
        !(dkim.is_some() && processes > 0),
        "--dkim signs with the in-process identity; it cannot be combined with --processes"
    );
    let fanout_readers = if skip_fanout { readers } else { fanout_readers };
    herald_engine::infra::migrate::run(&env.database_url).await?;
    // Not `startup::core`: that would also start the dev mail catcher on its usual port.
    let db = Db::connect(&env.app_database_url, env.db_max_connections.max(connections + 4)).await?;
    herald_engine::infra::migrate::check_runtime_role(&db).await?;
    let fanout_readers = fanout_readers.max(readers);
    println!(
        "herald bench send: {readers} readers end to end, {fanout_readers} for the fan-out, {connections} connections"
    );
    let (_sink, smtp_url) = start_sink().await?;
    let server = SmtpServer::parse(&smtp_url)?;

    // 1. Raw blast: same client, same message size, no database.
    let raw = crate::blast::sample_message("bench@herald.test", 0, "blast@example.com");
    let blast = crate::blast::blast(
        &server,
        connections as usize,
        blast_messages,
        "bench@herald.test",
        "blast@example.com",
        &raw,
    )
    .await?;
    println!(
        "raw blast:   {} messages of {} bytes over {} connections in {:.2} s = {:.0} msg/s",
        blast.messages,
        raw.len(),
        blast.connections,
        blast.elapsed.as_secs_f64(),
        blast.per_second
    );

    let (tenant, owner, slug) = bench_workspace(&db, env).await?;
    let dkim_label = dkim.map_or("off", DkimAlgorithm::label);
    let dkim = match dkim {
        Some(algorithm) => Some(bench_dkim_key(algorithm).await?),
        None => None,
    };
    stage_breakdown(dkim.as_ref()).await?;
    if webhook {
        bench_endpoint(&db, env, tenant, "message.sent").await?;
    }
    let options = Options { readers, fanout_readers, connections, dkim, dkim_label, ack_batch, skip_fanout, processes };
    let result = measure(&db, &owner, tenant, &smtp_url, env, &options).await;
    let outcome = match result {
        Ok(Measured { end_to_end, without_database }) => {
            println!(
                "ratio:       end to end is {:.0} % of the raw blast ({:.0} / {:.0} msg/s); with no database at all \
                 it would be {:.0} % ({:.0} msg/s)",
                100.0 * end_to_end / blast.per_second,
                end_to_end,
                blast.per_second,
                100.0 * without_database / blast.per_second,
                without_database
            );
            Ok(())
        }
        Err(e) => Err(e),
    };
    if keep {
        println!("kept workspace {slug} ({tenant})");
    } else {
        sqlx::query("DELETE FROM tenants WHERE id = $1").bind(tenant).execute(&owner).await?;
    }
    outcome
}

/// A fresh workspace "Bench Co" sending From the verified `bench.test`, with the owner role's
/// pool for set-up (seeding goes through the owner: it is set-up, not what is measured); returns
/// it, that pool and its slug.
pub(crate) async fn bench_workspace(db: &Db, env: &BenchEnv) -> anyhow::Result<(TenantId, sqlx::PgPool, String)> {
    let tenant = TenantId::new();
    let owner = crate::owner_in_workspace(&env.database_url, tenant).await?;
    let slug = format!("bench-{}", &Uuid::new_v4().simple().to_string()[..8]);
    sqlx::query(
        "INSERT INTO tenants (id, name, slug, postal_address, default_from_name, default_from_email, campaign_mail_per_day)
         VALUES ($1, 'Bench Co', $2, '1 Bench Street, Lyon', 'Bench Co', 'news@bench.test', NULL)",
    )
    .bind(tenant)
    .bind(&slug)
    .execute(&owner)
    .await?;
    herald_engine::sending::domains::mark_verified(db, &Signer::new(&env.secret_key), tenant, "bench.test").await?;
    Ok((tenant, owner, slug))
}

/// What the end-to-end measurement varies.
struct Options {
    readers: usize,
    fanout_readers: usize,
    connections: u32,
    dkim: Option<herald_engine::sending::identities::DkimKey>,
    /// `off`, or the key's algorithm.
    dkim_label: &'static str,
    ack_batch: Option<usize>,
    skip_fanout: bool,
    processes: u32,
}

/// The key a `--dkim` benchmark signs with.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DkimAlgorithm {
    Rsa,
    Ed25519,
}

impl DkimAlgorithm {
    fn label(self) -> &'static str {
        match self {
            DkimAlgorithm::Rsa => "RSA-2048",
            DkimAlgorithm::Ed25519 => "Ed25519",
        }
    }
}

/// A DKIM key for `bench.test`, as an identity would hold it.
async fn bench_dkim_key(algorithm: DkimAlgorithm) -> anyhow::Result<herald_engine::sending::identities::DkimKey> {
    let args: &[&str] = match algorithm {
        DkimAlgorithm::Rsa => &["genrsa", "2048"],
        DkimAlgorithm::Ed25519 => &["genpkey", "-algorithm", "ed25519"],
    };
    let out = tokio::process::Command::new("openssl").args(args).output().await?;
    anyhow::ensure!(out.status.success(), "openssl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(herald_engine::sending::identities::DkimKey {
        domain: "bench.test".into(),
        selector: "herald".into(),
        private_key_pem: String::from_utf8(out.stdout)?,
    })
}

async fn measure(
    db: &Db,
    owner: &sqlx::PgPool,
    tenant: TenantId,
    smtp_url: &str,
    env: &BenchEnv,
    options: &Options,
) -> anyhow::Result<Measured> {
    let Options { readers, fanout_readers, connections, .. } = *options;
    // Two lists: every reader on the big one, the first `readers` on the small one.
    let (big, small) = (Uuid::new_v4(), Uuid::new_v4());
    for (id, name) in [(big, "Everyone"), (small, "Sample")] {
        sqlx::query("INSERT INTO lists (id, tenant_id, name, slug, opt_in) VALUES ($1, $2, $3, $4, 'single')")
            .bind(id)
            .bind(tenant)
            .bind(name)
            .bind(name.to_lowercase())
            .execute(owner)
            .await?;
    }
    let seeding = Instant::now();
    sqlx::query(
        "INSERT INTO readers (tenant_id, email, name, attributes)
         SELECT $1, 'bench' || g || '@example.com', 'Reader ' || g, jsonb_build_object('city', 'Lyon')
         FROM generate_series(1, $2) g",
    )
    .bind(tenant)
    .bind(fanout_readers as i64)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, id, 'confirmed', now() FROM readers WHERE tenant_id = $1
         UNION ALL
         SELECT $1, $3, id, 'confirmed', now() FROM (SELECT id FROM readers WHERE tenant_id = $1 ORDER BY id LIMIT $4) s",
    )
    .bind(tenant)
    .bind(big)
    .bind(small)
    .bind(readers as i64)
    .execute(owner)
    .await?;
    sqlx::query("ANALYZE readers").execute(owner).await?;
    sqlx::query("ANALYZE subscriptions").execute(owner).await?;
    println!("seeded:      {fanout_readers} readers in {:.1} s", seeding.elapsed().as_secs_f64());

    let draft = |name: &str, list: Uuid| CampaignInput {
        name: name.into(),
        subject: "Issue 42 for {{ reader.name }}".into(),
        from_name: "Bench Co".into(),
        from_email: "news@bench.test".into(),
        list_ids: vec![list.into()],
        body: two_kb_body(),
        ..Default::default()
    };

    if !options.skip_fanout {
        fanout_versus_bare_insert(db, owner, tenant, &draft, big).await?;
    }

    // 3. End to end through the apalis workers of this process.
    let setup = worker_setup(db, env, tenant, smtp_url, connections, options.dkim.clone(), options.ack_batch)?;
    println!("end to end:  {} 250s per statement, DKIM {}", setup.delivery.ack_batch, options.dkim_label);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let mut children = Vec::new();
    let workers = if options.processes == 0 {
        tokio::spawn(herald_engine::worker::run_workers(setup, async move {
            let _ = stop_rx.wait_for(|s| *s).await;
        }))
    } else {
        children = spawn_workers(env, smtp_url, options)?;
        // Their pollers start within a second.
        tokio::time::sleep(Duration::from_secs(2)).await;
        tokio::spawn(async { Ok(()) })
    };
    let pids: Vec<String> = children.iter().filter_map(|c| c.id()).map(|p| p.to_string()).collect();
    let herald_cpu =
        || cpu_seconds("self") + pids.iter().map(|p| cpu_seconds(p)).sum::<f64>() + render_sandbox_cpu_seconds();
    let campaign = store::create(db, tenant, Role::Owner, &draft("End to end", small)).await?;
    let (cpu0, pg0) = (herald_cpu(), postgres_cpu_seconds());
    let started = Instant::now();
    lifecycle::send_now(db, &jobs::Jobs::new(db), tenant, Role::Owner, campaign.id).await?;
    // Only the status is polled (one row): the full progress counts scan the send log.
    loop {
        let c = store::get(db, tenant, campaign.id).await?;
        if c.status != store::CampaignStatus::Sending {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(3600), "the send did not finish within an hour");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let p = progress::progress(db, tenant, campaign.id).await?;
    let (cpu, pg) = (herald_cpu() - cpu0, postgres_cpu_seconds() - pg0);
    let _ = stop_tx.send(true);
    let _ = workers.await;
    for mut child in children {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    anyhow::ensure!(
        p.status == store::CampaignStatus::Sent && p.sent == readers as i64,
        "the send ended {}: {p:?}",
        p.status
    );
    let rate = p.sent as f64 / elapsed;
    let per_100k = 100_000.0 / p.sent as f64;
    println!(
        "end to end:  {} messages in {elapsed:.2} s = {rate:.0} msg/s (click to `sent`, fan-out included); \
         {} ambiguous, {} failed",
        p.sent, p.ambiguous, p.failed
    );
    println!(
        "CPU:         {:.1} s in Herald (template sandbox children included) + {:.1} s in Postgres per 100k messages",
        cpu * per_100k,
        pg * per_100k
    );
    // Before the no-database run, which holds every reader in memory.
    println!("peak RSS:    {:.0} MiB (this process, end to end)", peak_rss_mib());
    let ceiling = without_database(db, tenant, campaign.id, smtp_url, env, options).await?;
    Ok(Measured { end_to_end: rate, without_database: ceiling })
}

/// Workers as `herald worker` runs them, sending through `smtp_url` with `connections` SMTP
/// connections and no rate limit (the sink is the limit).
pub(crate) fn worker_setup(
    db: &Db,
    env: &BenchEnv,
    tenant: TenantId,
    smtp_url: &str,
    connections: u32,
    dkim: Option<herald_engine::sending::identities::DkimKey>,
    ack_batch: Option<usize>,
) -> anyhow::Result<WorkerSetup> {
    let identity = SmtpIdentity {
        bucket: format!("identity:bench:{tenant}"),
        server: SmtpServer::parse(smtp_url)?,
        max_connections: connections,
        rate_per_second: 1_000_000.0,
        burst: 10_000,
        dkim,
    };
    let mut delivery = herald_engine::campaigns::delivery::DeliveryConfig::new(
        jobs::unique_worker_name("bench"),
        env.base_url.clone(),
        identity,
    );
    delivery.batch_size = env.send_batch_size;
    delivery.ack_batch = ack_batch.unwrap_or(env.send_ack_batch);
    Ok(WorkerSetup {
        db: db.clone(),
        mailer: Mailer::from_url(smtp_url, &env.mail_from)?,
        signer: Signer::new(&env.secret_key),
        base_url: env.base_url.clone(),
        delivery,
        send_concurrency: connections as usize,
        transactional: herald_engine::transactional::delivery::TxDeliveryConfig::new(
            jobs::unique_worker_name("bench-transactional"),
            herald_engine::sending::identities::SmtpIdentity {
                bucket: format!("identity:bench-tx:{tenant}"),
                server: SmtpServer::parse(smtp_url)?,
                max_connections: 1,
                rate_per_second: 1_000.0,
                burst: 100,
                dkim: None,
            },
        ),
        transactional_wake: std::sync::Arc::new(tokio::sync::Notify::new()),
        system_mail_limits: Default::default(),
        webhooks: Default::default(),
    })
}

/// The send's two figures.
struct Measured {
    end_to_end: f64,
    without_database: f64,
}

/// The same campaign to the same readers with no database at all: each of `connections` tasks
/// renders a batch in the sandbox, composes each message with the engine's own
/// [`Composer`](herald_engine::campaigns::compose::Composer) (tracked links, open pixel,
/// layout, text version, MIME, DKIM) and sends it over its own connection, as a delivery loop
/// does, but claims, arms and records nothing. No database design can make the end-to-end
/// send faster than this on the same machine: it is the ceiling of Herald's own work.
async fn without_database(
    db: &Db,
    tenant: TenantId,
    campaign_id: herald_engine::CampaignId,
    smtp_url: &str,
    env: &BenchEnv,
    options: &Options,
) -> anyhow::Result<f64> {
    use herald_engine::campaigns::compose::{Composer, Reader};
    use herald_engine::sending::message::{CompiledCampaign, DkimSigner, Workspace};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    // Set-up, not measured: the readers, the links the send registered, the compiled campaign.
    let mut tx = db.tenant_tx(tenant).await?;
    let readers: Vec<(i64, String, String, serde_json::Value)> = sqlx::query_as(
        "SELECT r.id, r.email, r.name, r.attributes FROM sends s JOIN readers r ON r.id = s.reader_id
         WHERE s.campaign_id = $1 ORDER BY s.id",
    )
    .bind(campaign_id)
    .fetch_all(&mut *tx)
    .await?;
    let links: std::collections::HashMap<String, i64> =
        sqlx::query_as("SELECT url, id FROM campaign_links WHERE campaign_id = $1")
            .bind(campaign_id)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect();
    let (slug, postal): (String, String) = sqlx::query_as("SELECT slug, postal_address FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    let campaign = store::get(db, tenant, campaign_id).await?;
    let workspace = Workspace { name: "Bench Co".into(), postal_address: postal };
    let turn = herald_engine::sending::template_sandbox::Turn::background(tenant);
    let compiled = CompiledCampaign::compile(&store::content(&campaign), &workspace, turn)
        .await?
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let dkim = match &options.dkim {
        Some(k) => Some(DkimSigner::new(&k.selector, &k.domain, &k.private_key_pem)?),
        None => None,
    };
    let from = campaign.from_email.clone();
    let signer = Signer::new(&env.secret_key);
    let composer = Arc::new(Composer::new(compiled, tenant, campaign, &slug, signer, &env.base_url, dkim));
    let (readers, links) = (Arc::new(readers), Arc::new(links));
    let batch = env.send_batch_size.max(1) as usize;
    let server = SmtpServer::parse(smtp_url)?;

    let next = Arc::new(AtomicUsize::new(0));
    let cpu0 = cpu_seconds("self") + render_sandbox_cpu_seconds();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..options.connections {
        let (composer, readers, links, next, server, from) =
            (composer.clone(), readers.clone(), links.clone(), next.clone(), server.clone(), from.clone());
        tasks.spawn(async move {
            let mut conn = SmtpConnection::connect(&server, Duration::from_secs(30)).await?;
            loop {
                let first = next.fetch_add(batch, Ordering::AcqRel);
                if first >= readers.len() {
                    break;
                }
                let rows = &readers[first..(first + batch).min(readers.len())];
                let batch: Vec<Reader<'_>> = rows
                    .iter()
                    .map(|(id, email, name, attributes)| Reader {
                        id: *id,
                        email,
                        name,
                        attributes,
                        feed: None,
                        entry: 0,
                        message_reader: None,
                    })
                    .collect();
                let urls: Vec<String> = batch.iter().map(|r| composer.unsubscribe_url(r.id)).collect();
                let rendered = composer.render(&batch, &urls).await?;
                for ((reader, parts), unsubscribe) in batch.iter().zip(rendered).zip(urls) {
                    let parts = parts.map_err(|e| anyhow::anyhow!("{e}"))?;
                    let raw = composer.message(reader, parts, unsubscribe, |url| links.get(url).copied())?;
                    conn.send(&from, reader.email, &raw).await?;
                }
            }
            conn.quit().await;
            Ok::<(), anyhow::Error>(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds("self") + render_sandbox_cpu_seconds() - cpu0;
    let rate = readers.len() as f64 / elapsed;
    println!(
        "no database: {} messages in {elapsed:.2} s = {rate:.0} msg/s (render, compose and send as the loops do; \
         no claim, arm or record); {:.1} s in Herald per 100k messages",
        readers.len(),
        cpu * 100_000.0 / readers.len() as f64
    );
    Ok(rate)
}

/// Where Herald's CPU goes per message, stage by stage, on this process's core (no database,
/// no SMTP): the same calls the delivery loop makes for a 2 KB personalised Markdown campaign
/// with tracked links, and for a block campaign with the same text (a block campaign
/// must cost no more per message than the Markdown one). The two are measured in turns, one
/// message of each at a time, so that whatever else the machine does falls on both alike.
pub async fn stage_breakdown(dkim: Option<&herald_engine::sending::identities::DkimKey>) -> anyhow::Result<()> {
    use herald_engine::sending::message::{BodyFormat, CampaignContent, CompiledCampaign, DkimSigner, Workspace};
    const N: usize = 5_000;
    let markdown = CampaignContent {
        subject: "Issue 42 for {{ reader.name }}".into(),
        preheader: String::new(),
        format: BodyFormat::Markdown,
        body: two_kb_body(),
    };
    let blocks = CampaignContent { format: BodyFormat::Blocks, body: two_kb_blocks(), ..markdown.clone() };
    let workspace = Workspace { name: "Bench Co".into(), postal_address: "1 Bench Street, Lyon".into() };
    let turn = herald_engine::sending::template_sandbox::Turn::background(herald_types::TenantId::new());
    let compile =
        async |content| CompiledCampaign::compile(content, &workspace, turn).await?.map_err(|e| anyhow::anyhow!("{e}"));
    let compiled = [compile(&markdown).await?, compile(&blocks).await?];
    let signer = match dkim {
        Some(k) => Some(DkimSigner::new(&k.selector, &k.domain, &k.private_key_pem)?),
        None => None,
    };
    let mut stages = [Stages::default(), Stages::default()];
    for i in 0..N {
        // Each goes first in every other pair.
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            stages[k].message(&compiled[k], i, signer.as_ref()).await?;
        }
    }
    let labels = [("", "minijinja + Markdown"), (" (blocks)", "minijinja; the blocks became HTML once")];
    for ((label, render), stages) in labels.into_iter().zip(&stages) {
        stages.print(label, render, N, dkim.is_some());
    }
    Ok(())
}

/// The two-kilobyte Markdown body as a block document: each of its paragraphs a paragraph block,
/// so both campaigns say the same words with the same links and merge tags, and what differs
/// per message is what blocks cost. (A footer block or a button would add text and links the
/// Markdown body does not have.)
fn two_kb_blocks() -> String {
    use herald_types::{Block, BlockDocument};
    let blocks = two_kb_body()
        .split("\n\n")
        .filter(|p| !p.trim().is_empty())
        .map(|p| Block::Paragraph { text: p.trim().to_string() })
        .collect();
    BlockDocument { version: herald_types::blocks::CURRENT_VERSION, theme: Default::default(), blocks }.to_json()
}

/// Seconds spent in each stage of composing a message, summed over the messages composed.
#[derive(Default)]
struct Stages {
    render: f64,
    links: f64,
    assemble: f64,
    mime: f64,
}

impl Stages {
    /// Composes message `i` of `compiled` as the delivery loop does, timing each stage.
    async fn message(
        &mut self,
        compiled: &herald_engine::sending::message::CompiledCampaign,
        i: usize,
        signer: Option<&herald_engine::sending::message::DkimSigner>,
    ) -> anyhow::Result<()> {
        use herald_engine::sending::message::{self, Envelope, MessageContext, Recipient};
        use herald_engine::tracking::links;
        let attributes = serde_json::json!({"city": "Lyon"});
        let own = "https://bench.herald.test/";
        let email = format!("bench{i}@example.com");
        let name = format!("Reader {i}");
        let unsubscribe = format!("https://bench.herald.test/u/{i:075}");
        let recipient = Recipient { email: &email, name: &name, attributes: &attributes };
        let web = format!("https://bench.herald.test/v/{i:0140}");
        let ctx = MessageContext { unsubscribe_url: &unsubscribe, web_version_url: &web };
        let t = Instant::now();
        let mut parts = compiled.render_body(&recipient, &ctx).await?.map_err(|e| anyhow::anyhow!("{e}"))?;
        self.render += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let _ = links::trackable_urls(&parts.body, own);
        parts.body = links::rewrite(&parts.body, own, |_| Some(format!("https://bench.herald.test/c/{i:075}")));
        self.links += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let rendered = compiled.assemble(parts, &ctx, Some("https://bench.herald.test/o/000000000000000000000000000"));
        self.assemble += t.elapsed().as_secs_f64();
        let envelope = Envelope {
            from_name: "Bench Co".into(),
            from_email: "news@bench.test".into(),
            reply_to: None,
            to_email: email.clone(),
            to_name: name.clone(),
            message_id: format!("bench.{i}@bench.test"),
            list_unsubscribe_url: unsubscribe.clone(),
            list_unsubscribe_mailto: None,
            list_id: "list.bench.bench.test".into(),
            feedback_id: "bench:bench:herald".into(),
        };
        let t = Instant::now();
        let raw = message::build_message(&rendered, &envelope, signer)?;
        self.mime += t.elapsed().as_secs_f64();
        std::hint::black_box(raw);
        Ok(())
    }

    fn print(&self, label: &str, render: &str, messages: usize, dkim: bool) {
        let us = |t: f64| t * 1e6 / messages as f64;
        println!(
            "per message{label}: render ({render}) {:.0} µs, link rewriting {:.0} µs, layout + text version {:.0} µs, \
             MIME{} {:.0} µs; {:.0} µs in all",
            us(self.render),
            us(self.links),
            us(self.assemble),
            if dkim { " + DKIM" } else { "" },
            us(self.mime),
            us(self.render + self.links + self.assemble + self.mime)
        );
    }
}

/// `herald worker` processes against the same database and sink, the default identity set up
/// like the in-process one (unlimited rate, `--connections` in all).
fn spawn_workers(env: &BenchEnv, smtp_url: &str, options: &Options) -> anyhow::Result<Vec<tokio::process::Child>> {
    let per_process = options.connections.div_ceil(options.processes);
    let ack_batch = options.ack_batch.unwrap_or(env.send_ack_batch);
    (0..options.processes)
        .map(|_| {
            Ok(tokio::process::Command::new(std::env::current_exe()?)
                .arg("worker")
                .env("DATABASE_URL", &env.database_url)
                .env("HERALD_APP_DATABASE_URL", &env.app_database_url)
                .env("HERALD_ENV", "production")
                .env("HERALD_SECRET_KEY", hex::encode(rand::random::<[u8; 32]>()))
                .env("HERALD_BASE_URL", "https://bench.herald.test")
                .env("HERALD_SMTP_URL", smtp_url)
                .env("HERALD_SMTP_RATE", "1000000")
                .env("HERALD_SMTP_BURST", "10000")
                .env("HERALD_SMTP_MAX_CONNECTIONS", options.connections.to_string())
                .env("HERALD_SEND_CONCURRENCY", per_process.to_string())
                .env("HERALD_SEND_BATCH", env.send_batch_size.to_string())
                .env("HERALD_SEND_ACK_BATCH", ack_batch.to_string())
                .env("HERALD_DB_MAX_CONNECTIONS", (per_process + 8).to_string())
                .env("RUST_LOG", "error")
                .kill_on_drop(true)
                .spawn()?)
        })
        .collect()
}

/// The fan-out proper against a bare `INSERT … SELECT` of the same rows.
async fn fanout_versus_bare_insert(
    db: &Db,
    owner: &sqlx::PgPool,
    tenant: TenantId,
    draft: &dyn Fn(&str, Uuid) -> CampaignInput,
    big: Uuid,
) -> anyhow::Result<()> {
    // 2a. The bare INSERT … SELECT: same rows, same table and indexes, same role under RLS.
    let bare = store::create(db, tenant, Role::Owner, &draft("Bare insert", big)).await?;
    let started = Instant::now();
    let mut tx = db.tenant_tx(tenant).await?;
    let bare_rows = sqlx::query(
        "INSERT INTO sends (tenant_id, campaign_id, reader_id, email)
         SELECT $1, $2, r.id, r.email FROM subscriptions s JOIN readers r ON r.id = s.reader_id
         WHERE s.tenant_id = $1 AND s.list_id = $3 AND s.status = 'confirmed'",
    )
    .bind(tenant)
    .bind(bare.id)
    .bind(big)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    let bare_rate = bare_rows as f64 / started.elapsed().as_secs_f64();
    sqlx::query("DELETE FROM sends WHERE campaign_id = $1").bind(bare.id).execute(owner).await?;
    sqlx::query("VACUUM ANALYZE sends").execute(owner).await?;

    // 2b. The fan-out proper (every eligibility check, chunked, resumable). Started by hand
    // rather than through `send_now`, so no delivery job ever picks this campaign up.
    let big_campaign = store::create(db, tenant, Role::Owner, &draft("Fan-out", big)).await?;
    sqlx::query("UPDATE campaigns SET status = 'sending', started_at = now() WHERE id = $1")
        .bind(big_campaign.id)
        .execute(owner)
        .await?;
    let started = Instant::now();
    let queued = fanout::run(db, tenant, big_campaign.id).await?;
    let fanout_rate = queued as f64 / started.elapsed().as_secs_f64();
    lifecycle::cancel(db, tenant, Role::Owner, big_campaign.id).await?;
    println!(
        "fan-out:     {queued} rows at {fanout_rate:.0} rows/s; bare INSERT … SELECT {bare_rows} rows at {bare_rate:.0} rows/s \
         ({:.0} %)",
        100.0 * fanout_rate / bare_rate
    );

    Ok(())
}

#[derive(clap::Args, Debug, Clone)]
pub struct ImportBench {
    /// Rows in the generated CSV.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: usize,
    /// Make `plan` a choice field first, so every row also writes its typed value (the side
    /// table segment counts read, `field_values`).
    #[arg(long)]
    pub typed_field: bool,
    /// Give the workspace a webhook endpoint receiving `reader.subscribed`, so every imported
    /// reader also writes its event.
    #[arg(long)]
    pub webhook: bool,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

/// A webhook endpoint receiving `event_type`, on an address the senders refuse at once: a
/// benchmark measures what writing the events costs the work, not a receiver.
async fn bench_endpoint(db: &Db, env: &BenchEnv, tenant: TenantId, event_type: &str) -> anyhow::Result<()> {
    let (signer, mail_jobs, egress) = (Signer::new(&env.secret_key), jobs::Jobs::new(db), Default::default());
    let change = herald_engine::outbound_webhooks::Change {
        db,
        signer: &signer,
        egress: &egress,
        jobs: &mail_jobs,
        tenant,
        role: Role::Owner,
        actor: herald_engine::audit::Actor::Operator,
    };
    let input = herald_types::WebhookEndpointInput {
        url: "https://hooks.bench.invalid/herald".into(),
        event_types: vec![event_type.into()],
        enabled: true,
        ..Default::default()
    };
    herald_engine::outbound_webhooks::create(&change, &input).await?;
    println!("webhook:     an endpoint receives {event_type} (each one writes its event)");
    Ok(())
}

/// `herald bench import`: a generated CSV (email, name, two attributes) through the real import
/// path — stored in 1 MB chunks as an upload is, then the import job run to the end — and then
/// the audience pages' queries timed on the resulting workspace (the 200 ms budget).
pub async fn run_import(args: ImportBench, env: &BenchEnv) -> anyhow::Result<()> {
    use herald_engine::audience::import::{self, ImportContext, StartImport};
    use herald_engine::audience::lists::{self, ListInput};
    use herald_engine::audience::readers::{self, AttributeCondition, ReaderFilter, ReaderStatus};

    herald_engine::infra::migrate::run(&env.database_url).await?;
    let db = Db::connect(&env.app_database_url, env.db_max_connections).await?;
    herald_engine::infra::migrate::check_runtime_role(&db).await?;
    let tenant = TenantId::new();
    let owner = crate::owner_in_workspace(&env.database_url, tenant).await?;
    let slug = format!("bench-{}", &Uuid::new_v4().simple().to_string()[..8]);
    sqlx::query("INSERT INTO tenants (id, name, slug) VALUES ($1, 'Import Bench', $2)")
        .bind(tenant)
        .bind(&slug)
        .execute(&owner)
        .await?;
    let outcome = async {
        let list = lists::create(
            &db,
            tenant,
            Role::Owner,
            &ListInput {
                name: "All".into(),
                slug: None,
                description: String::new(),
                opt_in: lists::OptIn::Single,
                visibility: lists::Visibility::Private,
            },
        )
        .await?;
        if args.typed_field {
            let plan = herald_types::FieldInput {
                key: "plan".into(),
                label: "Plan".into(),
                kind: herald_types::FieldKind::Choice,
                choices: vec!["free".into(), "pro".into()],
            };
            herald_engine::audience::fields::create(&db, tenant, Role::Owner, &plan).await?;
        }
        if args.webhook {
            bench_endpoint(&db, env, tenant, "reader.subscribed").await?;
        }
        // The upload, chunked as the browser upload is (not what is measured).
        let id = import::begin_upload(&db, tenant, None, Role::Owner, "million.csv").await?;
        let cities = ["Lyon", "Paris", "Nantes", "Lille", "Nice"];
        let (mut chunk, mut seq, mut size) = (String::from("email,name,city,plan\n"), 0, 0usize);
        for i in 0..args.rows {
            let plan = if i % 3 == 0 { "pro" } else { "free" };
            chunk.push_str(&format!("reader{i}@example.com,Reader {i},{},{plan}\n", cities[i % 5]));
            if chunk.len() >= import::CHUNK_BYTES || i + 1 == args.rows {
                import::append_chunk(&db, tenant, id, seq, chunk.as_bytes(), import::StorageCaps::UNLIMITED).await?;
                size += chunk.len();
                seq += 1;
                chunk.clear();
            }
        }
        import::finish_upload(&db, tenant, id, size as i64).await?;
        let start = StartImport {
            mapping: vec!["email".into(), "name".into(), "attributes.city".into(), "attributes.plan".into()],
            into: import::ImportInto::Lists(vec![list.id]),
            mode: import::ImportMode::Confirmed,
            existing: herald_engine::audience::bulk::Existing::Update,
        };
        let jobs = jobs::Jobs::new(&db);
        import::start(&db, &jobs, tenant, Role::Owner, id, start).await?;
        let cx = ImportContext { db: db.clone(), signer: Signer::new(&env.secret_key), jobs, base_url: env.base_url.clone() };
        let (cpu0, pg0) = (cpu_seconds("self"), postgres_cpu_seconds());
        let started = Instant::now();
        import::run(&cx, tenant, id).await?;
        let secs = started.elapsed().as_secs_f64();
        let (cpu, pg) = (cpu_seconds("self") - cpu0, postgres_cpu_seconds() - pg0);
        let view = import::get(&db, tenant, id).await?;
        anyhow::ensure!(view.created == args.rows as i64, "imported {} of {} rows", view.created, args.rows);
        println!(
            "import:      {} rows ({:.1} MB) in {secs:.1} s = {:.0} rows/s; CPU {cpu:.1} s Herald + {pg:.1} s Postgres; \
             peak RSS {:.0} MiB",
            args.rows,
            size as f64 / 1e6,
            args.rows as f64 / secs,
            peak_rss_mib()
        );

        // The audience pages on this workspace, as the runtime role under row-level security.
        sqlx::query("ANALYZE readers").execute(&owner).await?;
        sqlx::query("ANALYZE subscriptions").execute(&owner).await?;
        let filters: Vec<(&str, ReaderFilter, Option<i64>)> = vec![
            ("first page", ReaderFilter::default(), None),
            ("deep page (keyset)", ReaderFilter::default(), Some(args.rows as i64 / 2)),
            ("search, rare term", ReaderFilter { search: Some("reader777777@".into()), ..Default::default() }, None),
            // A term most readers match (a shared domain): the newest-rows window answers it.
            ("search, common term", ReaderFilter { search: Some("@example".into()), ..Default::default() }, None),
            // 111k matches, all among the oldest fifth of the readers: the worst case for a
            // newest-first page (the window finds none; every match is fetched and sorted).
            ("search, old-rows term", ReaderFilter { search: Some("reader1".into()), ..Default::default() }, None),
            ("list filter", ReaderFilter { list: Some(list.id), ..Default::default() }, None),
            ("status with no match", ReaderFilter { status: Some(ReaderStatus::Blocklisted), ..Default::default() }, None),
            (
                "attribute city = \"Nice\"",
                ReaderFilter { attribute: Some(AttributeCondition::parse("city = \"Nice\"")?), ..Default::default() },
                None,
            ),
            (
                "attribute plan in [...]",
                ReaderFilter { attribute: Some(AttributeCondition::parse("plan in [\"pro\", \"team\"]")?), ..Default::default() },
                None,
            ),
        ];
        for (label, filter, before) in filters {
            // The id the deep page starts from is relative to this workspace's ids.
            let before = match before {
                Some(offset) => {
                    let min: i64 = sqlx::query_scalar("SELECT min(id) FROM readers WHERE tenant_id = $1")
                        .bind(tenant)
                        .fetch_one(&owner)
                        .await?;
                    Some(min + offset)
                }
                None => None,
            };
            let mut best = f64::MAX;
            let mut found = 0;
            for _ in 0..3 {
                let t = Instant::now();
                found = readers::search(&db, tenant, &filter, before, 50).await?.readers.len();
                best = best.min(t.elapsed().as_secs_f64() * 1000.0);
            }
            println!("readers page {label:<28} {best:>7.1} ms ({found} rows)");
        }
        let t = Instant::now();
        let counts = lists::with_counts(&db, tenant).await?;
        println!(
            "lists page with counts            {:>7.1} ms ({} confirmed)",
            t.elapsed().as_secs_f64() * 1000.0,
            counts.first().map(|l| l.confirmed).unwrap_or(0)
        );
        Ok::<(), anyhow::Error>(())
    }
    .await;
    if args.keep {
        println!("kept workspace {slug} ({tenant})");
    } else {
        sqlx::query("DELETE FROM tenants WHERE id = $1").bind(tenant).execute(&owner).await?;
    }
    outcome
}
