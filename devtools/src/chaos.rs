//! `herald dev chaos`: the send engine's promise, tried against real faults.
//!
//! One round builds a scene on **a Postgres cluster of its own** (initdb in a temporary directory,
//! so it can restart it), starts **real `herald worker` processes** against it and the project's
//! SMTP sink (in this process, misbehaving on purpose), and then, while the sends run, injects
//! faults chosen by a seeded random generator (the seed is printed; the same seed replays the same
//! choices): SIGKILL of workers, SIGSTOP of a worker for longer than its lease (then SIGCONT),
//! one worker cut off from Postgres (a proxy per worker that black-holes its link, then heals),
//! `pg_ctl restart -m immediate`, `pg_terminate_backend` of the workers' connections, SMTP replies
//! slower than the lease, 4xx, drops mid-DATA, accept-then-drop, 5xx; a pause and resume, a
//! cancel, unsubscribes and suppressions mid-send; "retry failed" mid-send; two campaigns under
//! one frequency cap; a spread send; a scheduled send; a recurring campaign's edition;
//! transactional messages at the same time. Beside them, each a rule of its own under the same
//! faults: readers leaving the list that started their automation while its mail is queued
//! (they stay on another list); a send that outlives the queue age, its first attempts refused
//! with a 4xx; a resend to non-openers whose readers open the original mid-send (and a second
//! resend refused); another workspace whose automation fails every turn; events sent twice
//! under one Idempotency-Key. When everything has settled it checks the whole
//! queue against what the sink received (see [`check`]): every eligible reader accepted exactly
//! once, every extra copy under the first one's Message-ID and counted as ambiguous on its own
//! row, no data for anyone unsubscribed or suppressed more than 5 s after the commit (nor for a
//! paused campaign between 5 s after its pause and its resume, nor for a reader who left the
//! trigger list or opened the original), hard bounces suppressed, no row expired for its age
//! after a single attempt, the failing automation paused, one run per event, and each
//! campaign's sent count equal to what the sink saw.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::smtp_sink::{FaultAction, FaultRule, Faults, MailSink};
use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use herald_engine::audience::segments;
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::store::{self, CampaignInput};
use herald_engine::jobs::Jobs;
use herald_engine::{CampaignId, Db, Role, TenantId};
use herald_types::AutomationId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::PgPool;
use tokio::process::{Child, Command};
use uuid::Uuid;

/// `herald dev chaos` options.
#[derive(Clone, Debug, clap::Args)]
pub struct ChaosArgs {
    /// Keep running rounds (each with a fresh scene and its own seed) for this many minutes;
    /// 0 runs one round.
    #[arg(long, default_value_t = 0.0)]
    pub minutes: f64,
    /// The first round's seed (printed either way); later rounds use seed + round.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Readers of the main campaign.
    #[arg(long, default_value_t = 1500)]
    pub readers: usize,
    /// `herald worker` processes.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// How long faults are injected per round.
    #[arg(long, default_value_t = 40)]
    pub fault_seconds: u64,
    /// The `herald` binary to run as workers (default: this one).
    #[arg(long)]
    pub bin: Option<PathBuf>,
}

impl Default for ChaosArgs {
    fn default() -> Self {
        Self { minutes: 0.0, seed: None, readers: 1500, workers: 3, fault_seconds: 40, bin: None }
    }
}

/// The lease the workers run with: short, so that faults that cost a lease cost seconds.
const LEASE_SECONDS: u64 = 4;
/// Worker 0's pool size (see `Workers::spawn`).
const SATURATED_POOL: &str = "4";
/// Rows a worker claims at once.
const BATCH: u64 = 10;
const SLOW_REPLY_MAX: Duration = Duration::from_secs(2 * LEASE_SECONDS);
const SMTP_TIMEOUT_SECONDS: u64 = 3;

/// What one round found.
#[derive(Debug, Default)]
pub struct RoundReport {
    pub seed: u64,
    pub messages_expected: usize,
    pub copies_received: usize,
    pub extra_copies: usize,
    pub ambiguous_counted: i64,
    pub faults: BTreeMap<&'static str, usize>,
    pub violations: Vec<String>,
    pub elapsed: Duration,
}

impl std::fmt::Display for RoundReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} messages expected, {} copies received ({} extra, {} counted ambiguous), faults {:?}, {} violations, {:.0} s",
            self.seed,
            self.messages_expected,
            self.copies_received,
            self.extra_copies,
            self.ambiguous_counted,
            self.faults,
            self.violations.len(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// Runs rounds for `args.minutes` (at least one); returns every round's report. Stops at the
/// first round with a violation.
pub async fn run(args: &ChaosArgs) -> anyhow::Result<Vec<RoundReport>> {
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("where is the herald binary?")?,
    };
    let first = args.seed.unwrap_or_else(rand::random);
    let started = Instant::now();
    let mut reports = Vec::new();
    for round in 0.. {
        let seed = first.wrapping_add(round);
        eprintln!("chaos round {round}: seed {seed} (replay with --seed {seed})");
        let report = run_round(&bin, args, seed).await.with_context(|| format!("chaos round with seed {seed}"))?;
        eprintln!("chaos round {round}: {report}");
        let failed = !report.violations.is_empty();
        reports.push(report);
        if failed || started.elapsed().as_secs_f64() >= args.minutes * 60.0 {
            break;
        }
    }
    Ok(reports)
}

// ---------------------------------------------------------------------------------------------
// A Postgres cluster the harness owns
// ---------------------------------------------------------------------------------------------

struct OwnedPostgres {
    dir: PathBuf,
    bindir: PathBuf,
    port: u16,
}

impl OwnedPostgres {
    async fn start() -> anyhow::Result<Self> {
        let bindir = pg_bindir().context("no PostgreSQL server binaries (initdb) found")?;
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("herald-chaos-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let pg = Self { dir, bindir, port };
        if is_root() {
            run_ok(Command::new("chown").arg("-R").arg("postgres:postgres").arg(&pg.dir)).await?;
        }
        pg.pg_cmd("initdb", &["-D", &pg.data(), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C"])
            .await?;
        // Durable enough for the question asked (a restart -m immediate still recovers from the
        // WAL; fsync only matters to a power cut), fast enough for a short run.
        let conf = "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 300\n\
                    fsync = off\nfull_page_writes = off\n";
        let conf_path = Path::new(&pg.data()).join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)?;
        text.push_str(conf);
        std::fs::write(&conf_path, text)?;
        pg.ctl(&["start"]).await?;
        Ok(pg)
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    async fn ctl(&self, extra: &[&str]) -> anyhow::Result<()> {
        let log = self.dir.join("pg.log").display().to_string();
        let port = format!("-p {}", self.port);
        let data = self.data();
        let mut args = vec!["-D", &data, "-l", &log, "-o", &port, "-w", "-t", "60"];
        args.extend_from_slice(extra);
        self.pg_cmd("pg_ctl", &args).await
    }

    /// `pg_ctl restart -m immediate`: every connection dies, the server recovers from its WAL.
    async fn restart_immediate(&self) -> anyhow::Result<()> {
        self.ctl(&["-m", "immediate", "restart"]).await
    }

    async fn pg_cmd(&self, tool: &str, args: &[&str]) -> anyhow::Result<()> {
        let exe = self.bindir.join(tool);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.arg("-u").arg("postgres").arg("--").arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args);
        run_ok(&mut cmd).await
    }
}

impl Drop for OwnedPostgres {
    fn drop(&mut self) {
        let exe = self.bindir.join("pg_ctl");
        let data = self.data();
        let mut cmd = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.arg("-u").arg("postgres").arg("--").arg(&exe);
            c
        } else {
            std::process::Command::new(&exe)
        };
        let _ = cmd.args(["-D", &data, "-m", "immediate", "stop"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    // SAFETY-free check: root's home and uid 0 show in /proc/self/status.
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn pg_bindir() -> Option<PathBuf> {
    if let Ok(out) = std::process::Command::new("sh").arg("-c").arg("command -v initdb").output()
        && out.status.success()
    {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        return std::fs::canonicalize(p).ok()?.parent().map(Path::to_path_buf);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort_by_key(|p| p.parent().and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok()).unwrap_or(0));
    found.pop()
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn run_ok(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd.stdin(Stdio::null()).output().await?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}{}",
            cmd.as_std(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Workers
// ---------------------------------------------------------------------------------------------

/// A TCP proxy between one worker and Postgres that the suite can cut and heal. Cut, it forwards
/// nothing either way and leaves every connection open (a new one hangs before it reaches
/// Postgres), as a network partition does: the worker's queries and lease renewals neither
/// fail nor finish, while the other workers go on. Healed, whatever was held back goes through.
struct Partition {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Partition {
    async fn start(postgres_port: u16) -> anyhow::Result<Self> {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let shared = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let cut = shared.clone();
                tokio::spawn(async move {
                    while cut.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", postgres_port)).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(pump(client_read, server_write, cut.clone()), pump(server_read, client_write, cut));
                });
            }
        });
        Ok(Self { port, cut })
    }

    /// Cuts the link for `span`, then heals it (in the background, as `Workers::freeze` does).
    fn cut_for(&self, span: Duration) {
        use std::sync::atomic::Ordering;
        self.cut.store(true, Ordering::SeqCst);
        let cut = self.cut.clone();
        tokio::spawn(async move {
            tokio::time::sleep(span).await;
            cut.store(false, Ordering::SeqCst);
        });
    }
}

/// Copies one direction of a proxied connection, holding each chunk while the link is cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0_u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        while cut.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

struct Workers {
    bin: PathBuf,
    env: Vec<(String, String)>,
    /// Each worker's own way to Postgres, so one can be cut off while the others are not.
    links: Vec<Partition>,
    /// `DATABASE_URL` with `{port}` where the worker's link's port goes.
    database_url: String,
    logs: PathBuf,
    slots: Vec<Option<Child>>,
    started: usize,
    /// Workers that exited without being killed (a worker must survive its database).
    exited: Vec<String>,
}

impl Workers {
    fn spawn(&mut self, slot: usize) -> anyhow::Result<()> {
        self.started += 1;
        let log = std::fs::File::create(self.logs.join(format!("worker-{slot}-{}.log", self.started)))?;
        let child = Command::new(&self.bin)
            .arg("worker")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("DATABASE_URL", self.database_url.replace("{port}", &self.links[slot].port.to_string()))
            // Worker 0's pool is saturated for good: fewer connections than its loops (eight
            // delivery, two transactional, the supervisor and the job pollers) want at once.
            .envs((slot == 0).then_some(("HERALD_DB_MAX_CONNECTIONS", SATURATED_POOL)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        self.slots[slot] = Some(child);
        Ok(())
    }

    /// SIGKILL: no cleanup, leases and apalis jobs left behind.
    async fn kill(&mut self, slot: usize) {
        if let Some(mut child) = self.slots[slot].take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// SIGSTOP, then SIGCONT after `pause` (in the background, so other faults go on meanwhile):
    /// a worker frozen mid-transaction for longer than its lease (a VM paused, a process
    /// starved), whose renewals, fences and open transactions freeze with it.
    fn freeze(&self, slot: usize, pause: Duration) {
        let Some(pid) = self.slots[slot].as_ref().and_then(Child::id) else { return };
        tokio::spawn(async move {
            let signal = |sig: &'static str| Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
            if signal("STOP").await.is_ok_and(|s| s.success()) {
                tokio::time::sleep(pause).await;
                let _ = signal("CONT").await;
            }
        });
    }

    /// Starts any worker that is not running; one that exited on its own is noted.
    fn ensure_all(&mut self) -> anyhow::Result<()> {
        for slot in 0..self.slots.len() {
            let alive = match self.slots[slot].as_mut() {
                Some(c) => match c.try_wait() {
                    Ok(None) => true,
                    Ok(Some(status)) => {
                        self.exited.push(format!("worker {slot} exited on its own ({status}); see its log"));
                        false
                    }
                    Err(_) => false,
                },
                None => false,
            };
            if !alive {
                self.spawn(slot)?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The scene
// ---------------------------------------------------------------------------------------------

/// A campaign of the scene and what it should end as.
struct SceneCampaign {
    id: CampaignId,
    tenant: TenantId,
    name: &'static str,
    /// Reader addresses of its list.
    readers: Vec<String>,
    /// Cancelled mid-send: at most one copy each, nothing left queued.
    cancelled: bool,
    /// An automation's email step: it stays `sending` (the automation is live), and its
    /// readers are those the automation let in.
    automation_step: bool,
}

struct Scene {
    campaigns: Vec<SceneCampaign>,
    /// The two campaigns under one frequency cap (indexes into `campaigns`).
    capped: (usize, usize),
    /// Transactional message id → recipient.
    messages: HashMap<Uuid, String>,
    /// Address → when it was unsubscribed or suppressed (committed).
    opted_out: HashMap<String, DateTime<Utc>>,
    /// The paused campaign (an index into `campaigns`), when the pause had committed and when
    /// the resume was asked for: in between only messages already on the wire may reach the
    /// server.
    paused_campaign: usize,
    pause_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// The A/B test (index into `campaigns`): each reader gets one message, of the version its
    /// send-log row names, and the rest gets the winner.
    ab_test: usize,
    /// Address → when a reason to stop mailing it committed that is not an opt-out, and which:
    /// it left the list that started its automation, it opened the original of its resend. As
    /// for an opt-out, nothing may reach it more than 5 s later, and nothing is owed to it.
    stopped: HashMap<String, (DateTime<Utc>, &'static str)>,
    /// The send that outlives its queue age (an index into `campaigns`): a row of it may expire
    /// once a retry failed too, never after a single attempt.
    soft_failures: usize,
}

async fn insert_tenant(owner: &PgPool, name: &str, cap: Option<i32>) -> anyhow::Result<TenantId> {
    let tenant = TenantId::new();
    sqlx::query(
        "INSERT INTO tenants (id, name, slug, postal_address, default_from_name, default_from_email, frequency_cap_hours,
                              campaign_mail_per_day)
         VALUES ($1, $2, $3, '1 Chaos Road, Lyon', $2, 'news@chaos.test', $4, NULL)",
    )
    .bind(tenant)
    .bind(name)
    .bind(format!("{}-{}", name.to_lowercase(), &Uuid::new_v4().simple().to_string()[..8]))
    .bind(cap)
    .execute(owner)
    .await?;
    Ok(tenant)
}

/// A list of confirmed readers (see [`insert_list_into`]); returns the list and the addresses.
async fn insert_list(owner: &PgPool, tenant: TenantId, prefix: &str, n: usize) -> anyhow::Result<(Uuid, Vec<String>)> {
    let list = Uuid::new_v4();
    sqlx::query("INSERT INTO lists (id, tenant_id, name, slug, opt_in) VALUES ($1, $2, $3, $3, 'single')")
        .bind(list)
        .bind(tenant)
        .bind(format!("{prefix}-{}", &list.simple().to_string()[..6]))
        .execute(owner)
        .await?;
    insert_list_into(owner, tenant, list, prefix, n).await
}

async fn create_campaign(db: &Db, tenant: TenantId, name: &str, lists: &[Uuid]) -> anyhow::Result<CampaignId> {
    let input = CampaignInput {
        name: name.into(),
        subject: format!("{name} for {{{{ reader.name }}}}"),
        from_email: "news@chaos.test".into(),
        from_name: "Chaos".into(),
        list_ids: lists.iter().map(|&l| l.into()).collect(),
        // Written in blocks: the main campaign of every round goes through the MJML
        // render, so the faults are survived by block campaigns too.
        body_format: herald_types::BodyFormat::Blocks,
        body: herald_types::BlockDocument {
            version: herald_types::blocks::CURRENT_VERSION,
            theme: Default::default(),
            blocks: vec![
                herald_types::Block::Paragraph {
                    text: "Hello {{ reader.name }}! A [link](https://example.com/a).".into(),
                },
                herald_types::Block::Footer { text: "[Unsubscribe]({{ unsubscribe_url }})".into() },
            ],
        }
        .to_json(),
        ..Default::default()
    };
    Ok(store::create(db, tenant, Role::Owner, &input).await?.id)
}

/// A campaign to a segment with an exclusion: 300 readers on a list of their own, a
/// third of them tagged "vip", half on the Free plan; it targets the tagged readers and leaves
/// out the Free plan. Returns it and the readers it must reach (the check also fails it for a
/// copy to anyone else).
async fn segment_campaign(owner: &PgPool, db: &Db, tenant: TenantId) -> anyhow::Result<(CampaignId, Vec<String>)> {
    let (list, _) = insert_list(owner, tenant, "seg", 300).await?;
    let tag = Uuid::new_v4();
    sqlx::query("INSERT INTO tags (tenant_id, id, name) VALUES ($1, $2, 'vip')")
        .bind(tenant)
        .bind(tag)
        .execute(owner)
        .await?;
    sqlx::query(
        "INSERT INTO reader_tags (tenant_id, tag_id, reader_id)
         SELECT $1, $2, reader_id FROM subscriptions WHERE list_id = $3 AND reader_id % 3 = 0",
    )
    .bind(tenant)
    .bind(tag)
    .bind(list)
    .execute(owner)
    .await?;
    sqlx::query("INSERT INTO fields (tenant_id, key, label, kind, choices) VALUES ($1, 'plan', 'Plan', 'choice', '[\"Free\", \"Pro\"]')")
        .bind(tenant)
        .execute(owner)
        .await?;
    sqlx::query(
        "UPDATE readers SET attributes = jsonb_build_object('plan', CASE WHEN id % 2 = 0 THEN 'Free' ELSE 'Pro' END)
         WHERE id IN (SELECT reader_id FROM subscriptions WHERE list_id = $1)",
    )
    .bind(list)
    .execute(owner)
    .await?;
    let expected: Vec<String> = sqlx::query_scalar(
        "SELECT lower(r.email) FROM readers r JOIN subscriptions s ON s.reader_id = r.id
         WHERE s.list_id = $1 AND r.id % 3 = 0 AND r.id % 2 = 1",
    )
    .bind(list)
    .fetch_all(owner)
    .await?;
    let segment = |name: &str, rule: serde_json::Value| herald_types::SegmentInput {
        name: name.into(),
        definition: serde_json::from_value(serde_json::json!({"match": "all", "rules": [rule]})).unwrap_or_default(),
    };
    let vip =
        segments::create(db, tenant, Role::Owner, &segment("VIP", serde_json::json!({"kind": "tag", "tag_id": tag})))
            .await?;
    let free = segments::create(
        db,
        tenant,
        Role::Owner,
        &segment("Free", serde_json::json!({"kind": "field", "key": "plan", "op": "eq", "value": "Free"})),
    )
    .await?;
    let input = CampaignInput {
        name: "Segment".into(),
        subject: "Segment for {{ reader.name }}".into(),
        from_email: "news@chaos.test".into(),
        from_name: "Chaos".into(),
        segment_ids: vec![vip.id],
        exclude_segment_id: Some(free.id),
        body: "Hello {{ reader.name }}!\n\n[Unsubscribe]({{ unsubscribe_url }})".into(),
        ..Default::default()
    };
    Ok((store::create(db, tenant, Role::Owner, &input).await?.id, expected))
}

/// An A/B test of two subjects on 300 readers of a list of its own, with a test share
/// the round draws: the winner is chosen during the faults, by hand or by the workers'
/// supervisor when the window is made to end.
async fn ab_campaign(
    owner: &PgPool,
    db: &Db,
    tenant: TenantId,
    percent: u8,
) -> anyhow::Result<(CampaignId, Vec<String>)> {
    let (list, readers) = insert_list(owner, tenant, "ab", 300).await?;
    let version = |label: &str| format!("AB version {label} for {{{{ reader.name }}}}");
    let input = CampaignInput {
        name: "A/B".into(),
        subject: version("A"),
        from_email: "news@chaos.test".into(),
        from_name: "Chaos".into(),
        list_ids: vec![list.into()],
        body: "Hello {{ reader.name }}!\n\n[Unsubscribe]({{ unsubscribe_url }})".into(),
        ab_test: Some(herald_types::AbTest {
            variants: vec![herald_types::Variant { subject: version("B"), ..Default::default() }],
            test_percent: percent,
            metric: herald_types::AbMetric::Opens,
            window_hours: 1,
        }),
        ..Default::default()
    };
    Ok((store::create(db, tenant, Role::Owner, &input).await?.id, readers))
}

// ---------------------------------------------------------------------------------------------
// One round
// ---------------------------------------------------------------------------------------------

async fn run_round(bin: &Path, args: &ChaosArgs, seed: u64) -> anyhow::Result<RoundReport> {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let pg = OwnedPostgres::start().await?;
    // Migrated and run as an ordinary owner, as on managed Postgres; `owner` below is the
    // inspector (the owner's privileges and every workspace's rows, not a superuser).
    crate::ordinary_owner::ensure(&pg.url("postgres")).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE herald OWNER {}", crate::ordinary_owner::OWNER_ROLE)))
        .execute(&PgPool::connect(&pg.url("postgres")).await?)
        .await?;
    let owner_url = crate::ordinary_owner::with_user(&pg.url("herald"), crate::ordinary_owner::OWNER_ROLE)?;
    herald_engine::infra::migrate::run(&owner_url).await?;
    let inspector_url = crate::ordinary_owner::with_user(&pg.url("herald"), crate::ordinary_owner::INSPECTOR_ROLE)?;
    let owner = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(&inspector_url).await?;
    let db = Db::connect(&herald_engine::infra::db::runtime_url(&owner_url, None)?, 8).await?;
    let jobs = Jobs::new(&db);

    // The sink: random 4xx (at RCPT and after the data), drops mid-DATA, accept-then-drop;
    // `dead…` addresses are unknown users (5xx, hard bounce), `reject…` ones get a 5xx.
    let (sink, sink_addr) = MailSink::start("127.0.0.1:0").await?;
    let base_faults = Faults::none()
        .with_rule(FaultRule::new("dead", FaultAction::user_unknown()))
        .with_rule(FaultRule::new("reject", FaultAction::RejectData("554 5.7.1 Rejected as spam".into())))
        .with_random(0.02, FaultAction::mailbox_busy())
        .with_random(0.03, FaultAction::try_again_later())
        .with_random(0.05, FaultAction::DropMidData)
        .with_random(0.005, FaultAction::DropAfterData)
        .with_random_reply_delay(Duration::from_millis(20));
    sink.set_faults(base_faults.clone());

    // The scene.
    let main_tenant = insert_tenant(&owner, "Chaos", None).await?;
    let capped_tenant = insert_tenant(&owner, "Capped", Some(24)).await?;
    // A workspace whose automation fails every turn: the others' must not notice.
    let broken_tenant = insert_tenant(&owner, "Broken", None).await?;
    // All send From chaos.test, verified as an operator would (no DKIM key is published, so
    // nothing is signed and the key's sealing secret does not matter).
    let operator = herald_engine::infra::tokens::Signer::new(b"chaos-operator");
    for tenant in [main_tenant, capped_tenant, broken_tenant] {
        herald_engine::sending::domains::mark_verified(&db, &operator, tenant, "chaos.test").await?;
    }
    let n = args.readers.max(100);
    let (main_list, mut main_readers) = insert_list(&owner, main_tenant, "r", n).await?;
    // Dead and rejected addresses among the living (an old import appended at the end, too).
    let (_, dead) = insert_list_into(&owner, main_tenant, main_list, "dead", n / 50 + 100).await?;
    let (_, rejected) = insert_list_into(&owner, main_tenant, main_list, "reject", 5).await?;
    main_readers.extend(dead.iter().cloned());
    main_readers.extend(rejected.iter().cloned());
    let (spread_list, spread_readers) = insert_list(&owner, main_tenant, "spread", 30).await?;
    let (pause_list, pause_readers) = insert_list(&owner, main_tenant, "pause", 600).await?;
    let (cancel_list, cancel_readers) = insert_list(&owner, main_tenant, "cancel", 800).await?;
    let (cap_list, cap_readers) = insert_list(&owner, capped_tenant, "cap", 200).await?;

    // A second target list overlapping the first: 50 of the main list's readers are on it too,
    // and each of them must get the campaign once all the same.
    let (overlap_list, overlap_readers) = insert_list(&owner, main_tenant, "overlap", 20).await?;
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, reader_id, 'confirmed', now() FROM subscriptions WHERE list_id = $3 ORDER BY reader_id LIMIT 50",
    )
    .bind(main_tenant)
    .bind(overlap_list)
    .bind(main_list)
    .execute(&owner)
    .await?;
    main_readers.extend(overlap_readers);
    let main = create_campaign(&db, main_tenant, "Main", &[main_list, overlap_list]).await?;
    let spread = create_campaign(&db, main_tenant, "Spread", &[spread_list]).await?;
    // Thirty readers over 20 seconds (below the editor's minimum; set directly).
    sqlx::query("UPDATE campaigns SET spread_hours = 20.0 / 3600 WHERE id = $1").bind(spread).execute(&owner).await?;
    let paused = create_campaign(&db, main_tenant, "Paused", &[pause_list]).await?;
    let cancelled = create_campaign(&db, main_tenant, "Cancelled", &[cancel_list]).await?;
    let cap_a = create_campaign(&db, capped_tenant, "Cap A", &[cap_list]).await?;
    let cap_b = create_campaign(&db, capped_tenant, "Cap B", &[cap_list]).await?;
    // Started by the workers' supervisor when its time comes, not by a click.
    let (sched_list, sched_readers) = insert_list(&owner, main_tenant, "sched", 200).await?;
    let scheduled = create_campaign(&db, main_tenant, "Scheduled", &[sched_list]).await?;
    // A daily recurring campaign whose slot two minutes ago is due (its last edition two days
    // old): the supervisor makes that one edition, which must reach each reader once.
    let (edition_list, edition_readers) = insert_list(&owner, main_tenant, "edition", 150).await?;
    let recurring = create_campaign(&db, main_tenant, "Daily", &[edition_list]).await?;
    let (segment, segment_readers) = segment_campaign(&owner, &db, main_tenant).await?;
    let (ab, ab_readers) = ab_campaign(&owner, &db, main_tenant, rng.gen_range(10..=60)).await?;
    // An automation of two mails, live from the start; its readers enter in batches
    // during the faults.
    let (_, auto_readers) = insert_list(&owner, main_tenant, "auto", 300).await?;
    let (automation, auto_steps) = welcome_automation(&db, &jobs, main_tenant).await?;
    // Each of these proves one rule under the same faults (see each helper).
    let leavers = trigger_leavers(&owner, &db, &jobs, main_tenant).await?;
    let (soft, soft_readers, soft_refused) = soft_failure_campaign(&owner, &db, main_tenant).await?;
    // Until each refused reader's first attempt has failed (see `soft_refusals_done`).
    let mut faults_now = refused_once(base_faults.clone(), &soft_refused);
    sink.set_faults(faults_now.clone());
    let (resend, second_resend) = resend_campaign(&owner, &db, main_tenant).await?;
    let broken = broken_automation(&owner, &db, &jobs, broken_tenant).await?;
    let signup = signup_automation(&owner, &db, &jobs, main_tenant).await?;
    let mut scene = Scene {
        campaigns: vec![
            SceneCampaign {
                id: main,
                tenant: main_tenant,
                name: "Main",
                readers: main_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: spread,
                tenant: main_tenant,
                name: "Spread",
                readers: spread_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: paused,
                tenant: main_tenant,
                name: "Paused",
                readers: pause_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: cancelled,
                tenant: main_tenant,
                name: "Cancelled",
                readers: cancel_readers,
                cancelled: true,
                automation_step: false,
            },
            SceneCampaign {
                id: cap_a,
                tenant: capped_tenant,
                name: "Cap A",
                readers: cap_readers.clone(),
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: cap_b,
                tenant: capped_tenant,
                name: "Cap B",
                readers: cap_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: segment,
                tenant: main_tenant,
                name: "Segment",
                readers: segment_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: ab,
                tenant: main_tenant,
                name: "A/B",
                readers: ab_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: soft,
                tenant: main_tenant,
                name: "Soft failures",
                readers: soft_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: resend.id,
                tenant: main_tenant,
                name: "Resend",
                readers: resend.readers.clone(),
                cancelled: false,
                automation_step: false,
            },
        ],
        capped: (4, 5),
        messages: HashMap::new(),
        opted_out: HashMap::new(),
        paused_campaign: 2,
        pause_window: None,
        ab_test: 7,
        stopped: HashMap::new(),
        soft_failures: 8,
    };

    // The workers.
    let logs = pg.dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let secret = hex::encode(rand::random::<[u8; 32]>());
    let env: Vec<(String, String)> = [
        ("HERALD_ENV", "production".into()),
        ("HERALD_SECRET_KEY", secret),
        ("HERALD_BASE_URL", "https://chaos.herald.test".into()),
        ("HERALD_SMTP_URL", format!("smtp://{sink_addr}")),
        ("HERALD_SEND_LEASE_SECONDS", LEASE_SECONDS.to_string()),
        ("HERALD_SMTP_TIMEOUT_SECONDS", SMTP_TIMEOUT_SECONDS.to_string()),
        ("HERALD_SEND_BATCH", BATCH.to_string()),
        ("HERALD_SEND_RETRY_BASE_SECONDS", "0.1".into()),
        ("HERALD_SEND_MAX_ATTEMPTS", "60".into()),
        ("HERALD_SMTP_RATE", "100000".into()),
        ("HERALD_SMTP_BURST", "1000".into()),
        ("HERALD_SEND_CONCURRENCY", "8".into()),
        ("HERALD_TRANSACTIONAL_BACKOFF", "0.2,0.4,0.8,1.6,3.2,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5".into()),
        ("HERALD_DB_MAX_CONNECTIONS", "16".into()),
        ("RUST_LOG", "warn,herald_engine=info".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut links = Vec::new();
    for _ in 0..args.workers.max(1) {
        links.push(Partition::start(pg.port).await?);
    }
    let mut workers = Workers {
        bin: bin.to_path_buf(),
        env,
        links,
        database_url: owner_url.replace(&format!(":{}/", pg.port), ":{port}/"),
        logs: logs.clone(),
        slots: (0..args.workers.max(1)).map(|_| None).collect(),
        started: 0,
        exited: Vec::new(),
    };
    workers.ensure_all()?;

    // Go: every campaign at once, and transactional messages beside them.
    for c in &scene.campaigns {
        lifecycle::send_now(&db, &jobs, c.tenant, Role::Owner, c.id).await?;
    }
    // The soft-failure send's rows are aged past the queue age as each is first claimed.
    let aging = tokio::spawn(age_claimed_rows(
        owner.clone(),
        main_tenant,
        soft,
        Instant::now() + Duration::from_secs(args.fault_seconds + 5),
    ));
    // Scheduled as `store::schedule` leaves it (its template check needs the render sandbox,
    // which this harness, as a test binary, cannot start).
    let due = Utc::now() + chrono::Duration::milliseconds(rng.gen_range(1_000..4_000));
    sqlx::query("UPDATE campaigns SET status = 'scheduled', scheduled_at = $2, schedule_tz = 'UTC' WHERE id = $1")
        .bind(scheduled)
        .bind(due)
        .execute(&owner)
        .await?;
    scene.campaigns.push(SceneCampaign {
        id: scheduled,
        tenant: main_tenant,
        name: "Scheduled",
        readers: sched_readers,
        cancelled: false,
        automation_step: false,
    });
    // Started as `recurring::start` leaves it (set directly for the same reason as above).
    let slot_time = (Utc::now() - chrono::Duration::minutes(2)).format("%H:%M").to_string();
    sqlx::query(
        "UPDATE campaigns SET status = 'recurring', last_edition_slot = now() - interval '2 days',
                recurrence = jsonb_build_object('every', 'day', 'time', $2::text, 'tz', 'UTC')
         WHERE id = $1",
    )
    .bind(recurring)
    .bind(&slot_time)
    .execute(&owner)
    .await?;
    for i in 0..60 {
        // As the API stores them: canonical (every third typed `TX{i}@Chäos.Test`).
        let typed = if i % 3 == 0 { format!("TX{i}@Chäos.Test") } else { format!("tx{i}@chaos.test") };
        let to = String::from(herald_engine::Email::parse(&typed)?);
        let id = insert_message(&owner, main_tenant, &to).await?;
        scene.messages.insert(id, to);
    }

    // Faults, until the fault phase ends.
    let mut report = RoundReport { seed, ..Default::default() };
    report.violations.extend(second_resend);
    let fault_until = Instant::now() + Duration::from_secs(args.fault_seconds);
    let pause_at = Instant::now() + Duration::from_millis(rng.gen_range(300..2_000));
    let resume_at = pause_at + Duration::from_millis(rng.gen_range(2_000..6_000));
    let cancel_at = Instant::now() + Duration::from_millis(rng.gen_range(300..2_500));
    // "Retry failed" on the main campaign while it is still sending (its 5xx rows go again).
    let retry_at = Instant::now() + Duration::from_millis(rng.gen_range(3_000..8_000));
    let mut retry_done = false;
    let opt_out_at = Instant::now() + Duration::from_millis(rng.gen_range(300..3_000));
    let (mut paused_done, mut resumed_done, mut cancel_done, mut opt_out_done) = (false, false, false, false);
    let mut paused_at: Option<DateTime<Utc>> = None;
    // One of the two capped campaigns is paused with the others (and resumed with them), or
    // cancelled mid-send: the readers it held must then go to the other one, once.
    let (cap_a, cap_b) = (scene.campaigns[scene.capped.0].id, scene.campaigns[scene.capped.1].id);
    let cancel_cap_a = rng.gen_bool(0.5);
    let cap_cancel_at = Instant::now() + Duration::from_millis(rng.gen_range(1_000..5_000));
    let mut cap_cancel_done = !cancel_cap_a;
    // The A/B test's winner: chosen by hand (this process, through Postgres restarts) or by the
    // workers' supervisor once the window is made to end (workers killed mid-choice).
    let ab_pick_at = Instant::now() + Duration::from_millis(rng.gen_range(1_000..10_000));
    let ab_by_hand = rng.gen_bool(0.5);
    let mut ab_done = false;
    // The automation's readers enter in six batches at random moments (as six imports would),
    // and ten of them opt out at another.
    let mut enter_at: Vec<Instant> = (0..6)
        .map(|_| Instant::now() + Duration::from_millis(rng.gen_range(200..args.fault_seconds.max(4) * 700)))
        .collect();
    enter_at.sort();
    let mut entered_batches = 0usize;
    let auto_opt_out_at = Instant::now() + Duration::from_millis(rng.gen_range(1_000..5_000));
    let mut auto_opt_out_done = false;
    // One signup event per reader at a random moment, each sent twice under its key (one copy
    // after the other, or both at once), beside the faults.
    let plan: Vec<(Duration, i64, String, bool)> = signup
        .readers
        .iter()
        .map(|(id, address)| {
            let after = Duration::from_millis(rng.gen_range(200..args.fault_seconds.max(4) * 700));
            (after, *id, address.clone(), rng.gen_bool(0.5))
        })
        .collect();
    let events_sent =
        tokio::spawn(send_events(db.clone(), main_tenant, plan, Instant::now(), fault_until + Duration::from_secs(60)));
    // The leavers leave at a random moment once their first mail is queued (and held); it is
    // resumed `LEAVE_HOLD` later.
    let leave_at = Instant::now() + Duration::from_millis(rng.gen_range(1_000..4_000));
    let mut left: Option<Instant> = None;
    let mut leave_resumed = false;
    // Readers of the resend open the original while the spread still holds their copies.
    let open_at = Instant::now() + Duration::from_millis(rng.gen_range(3_000..8_000));
    let mut opened_done = false;
    let mut soft_refusing = true;
    let soft_refusing_by = Instant::now() + Duration::from_secs(20);
    let mut slow_until: Option<Instant> = None;
    let mut next_fault = Instant::now() + Duration::from_millis(rng.gen_range(500..2_000));
    while Instant::now() < fault_until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        workers.ensure_all()?;
        let now = Instant::now();
        if !paused_done && now >= pause_at {
            paused_done = true;
            if !cancel_cap_a {
                let _ = lifecycle::pause(&db, capped_tenant, Role::Owner, cap_b, "chaos: paused by hand").await;
            }
            if lifecycle::pause(&db, main_tenant, Role::Owner, paused, "chaos: paused by hand").await.is_ok() {
                *report.faults.entry("pause").or_default() += 1;
                // Committed before `pause` returned.
                paused_at = Some(Utc::now());
            }
        }
        if paused_done && !resumed_done && now >= resume_at {
            resumed_done = true;
            scene.pause_window = paused_at.map(|at| (at, Utc::now()));
            let _ = lifecycle::resume(&db, &jobs, main_tenant, Role::Owner, paused).await;
            let _ = lifecycle::resume(&db, &jobs, capped_tenant, Role::Owner, cap_b).await;
        }
        if !retry_done && now >= retry_at {
            retry_done = true;
            let main = scene.campaigns[0].id;
            if lifecycle::retry_failed(&db, &jobs, main_tenant, Role::Owner, main).await.is_ok() {
                *report.faults.entry("retry_failed").or_default() += 1;
            }
        }
        if !cancel_done && now >= cancel_at {
            cancel_done = true;
            lifecycle::cancel(&db, main_tenant, Role::Owner, cancelled).await?;
            *report.faults.entry("cancel").or_default() += 1;
        }
        if !cap_cancel_done && now >= cap_cancel_at {
            cap_cancel_done = true;
            if lifecycle::cancel(&db, capped_tenant, Role::Owner, cap_a).await.is_ok() {
                scene.campaigns[scene.capped.0].cancelled = true;
                *report.faults.entry("capped cancel").or_default() += 1;
            }
        }
        if !ab_done && now >= ab_pick_at {
            ab_done = end_ab_test(&db, &jobs, &owner, main_tenant, ab, ab_by_hand).await;
            if ab_done {
                *report.faults.entry(if ab_by_hand { "winner by hand" } else { "winner by window" }).or_default() += 1;
            }
        }
        if entered_batches < enter_at.len() && now >= enter_at[entered_batches] {
            let batch: Vec<&String> = auto_readers.iter().skip(entered_batches * 50).take(50).collect();
            // Through Postgres restarts a batch may fail, and is tried again (one that committed
            // unseen lets nobody in twice: the re-entry rule is "once").
            if enter_automation(&db, main_tenant, "chaos", &batch).await.is_ok() {
                entered_batches += 1;
                *report.faults.entry("automation entries").or_default() += 1;
            }
        }
        if !auto_opt_out_done && now >= auto_opt_out_at {
            auto_opt_out_done = true;
            for (i, address) in auto_readers.iter().step_by(30).take(10).enumerate() {
                let at = opt_out(&owner, main_tenant, address, i % 2 == 0).await?;
                scene.opted_out.insert(address.clone(), at);
            }
        }
        if !opt_out_done && now >= opt_out_at {
            opt_out_done = true;
            let living: Vec<&String> = scene.campaigns[0].readers.iter().filter(|a| a.starts_with('r')).collect();
            for (i, address) in living.iter().step_by((living.len() / 30).max(1)).take(30).enumerate() {
                let at = opt_out(&owner, main_tenant, address, i % 3 == 0).await?;
                scene.opted_out.insert((*address).clone(), at);
            }
            *report.faults.entry("unsubscribes").or_default() += 1;
        }
        if soft_refusing
            && (now >= soft_refusing_by || soft_refusals_done(&owner, soft, &soft_refused).await.unwrap_or(false))
        {
            // Each refused reader's 4xx came: the rules go, or a later change of the faults
            // (which counts `times` afresh) would refuse them a second time.
            soft_refusing = false;
            faults_now = base_faults.clone();
            sink.set_faults(match slow_until {
                Some(_) => faults_now.clone().with_random_reply_delay(SLOW_REPLY_MAX),
                None => faults_now.clone(),
            });
        }
        if left.is_none() && now >= leave_at {
            match leave_trigger_list(&owner, &leavers, &mut scene.stopped).await {
                Ok(true) => {
                    left = Some(Instant::now());
                    *report.faults.entry("trigger-list leavers").or_default() += 1;
                }
                // Their first mail is not queued yet: the next tick.
                Ok(false) => {}
                Err(e) => eprintln!("chaos: the leavers could not leave yet: {e:#}"),
            }
        }
        if !leave_resumed && left.is_some_and(|t| now >= t + LEAVE_HOLD) {
            leave_resumed = release_held_step(&owner, &db, &jobs, &leavers).await.is_ok();
        }
        if !opened_done && now >= open_at {
            match open_original(&owner, main_tenant, &resend, 10, &mut scene.stopped).await {
                Ok(true) => {
                    opened_done = true;
                    *report.faults.entry("opens of a resent original").or_default() += 1;
                }
                // The resend's fan-out has not written its rows yet: the next tick.
                Ok(false) => {}
                Err(e) => eprintln!("chaos: could not open the original yet: {e:#}"),
            }
        }
        if let Some(until) = slow_until
            && now >= until
        {
            slow_until = None;
            sink.set_faults(faults_now.clone());
        }
        if now < next_fault {
            continue;
        }
        next_fault = now + Duration::from_millis(rng.gen_range(500..3_000));
        let roll: u32 = rng.gen_range(0..100);
        let result: anyhow::Result<&'static str> = async {
            Ok(match roll {
                0..=29 => {
                    let slot = rng.gen_range(0..workers.slots.len());
                    workers.kill(slot).await;
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(0..1_500))).await;
                    workers.spawn(slot)?;
                    "sigkill"
                }
                30..=34 => {
                    // One worker cut off from Postgres for longer than its lease; the rest not.
                    let slot = rng.gen_range(0..workers.links.len());
                    workers.links[slot]
                        .cut_for(Duration::from_millis(rng.gen_range(LEASE_SECONDS * 1_200..LEASE_SECONDS * 2_500)));
                    "partition"
                }
                35..=44 => {
                    pg.restart_immediate().await?;
                    "pg restart"
                }
                45..=64 => {
                    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'herald_app'")
                        .execute(&owner)
                        .await?;
                    "pg_terminate_backend"
                }
                65..=79 => {
                    // Replies slower than the lease, for a few seconds.
                    sink.set_faults(faults_now.clone().with_random_reply_delay(SLOW_REPLY_MAX));
                    slow_until = Some(now + Duration::from_millis(rng.gen_range(2_000..6_000)));
                    "slow smtp"
                }
                80..=89 => {
                    // Frozen for longer than the lease, mid-whatever it was doing.
                    let slot = rng.gen_range(0..workers.slots.len());
                    workers.freeze(
                        slot,
                        Duration::from_millis(rng.gen_range(LEASE_SECONDS * 1_200..LEASE_SECONDS * 2_500)),
                    );
                    "sigstop"
                }
                _ => {
                    let i = rng.gen_range(0..60);
                    let to = format!("tx-late{}-{i}@chaos.test", report.faults.values().sum::<usize>());
                    let id = insert_message(&owner, main_tenant, &to).await?;
                    scene.messages.insert(id, to);
                    "transactional"
                }
            })
        }
        .await;
        match result {
            Ok(what) => *report.faults.entry(what).or_default() += 1,
            // The pool reconnects after a restart; a failed fault is only noted.
            Err(e) => eprintln!("chaos: a fault could not be injected: {e:#}"),
        }
    }
    if !resumed_done {
        scene.pause_window = paused_at.map(|at| (at, Utc::now()));
        let _ = lifecycle::resume(&db, &jobs, main_tenant, Role::Owner, paused).await;
        let _ = lifecycle::resume(&db, &jobs, capped_tenant, Role::Owner, cap_b).await;
    }
    if !cancel_done {
        lifecycle::cancel(&db, main_tenant, Role::Owner, cancelled).await?;
    }
    let entering_by = Instant::now() + Duration::from_secs(60);
    while entered_batches < enter_at.len() && Instant::now() < entering_by {
        let batch: Vec<&String> = auto_readers.iter().skip(entered_batches * 50).take(50).collect();
        match enter_automation(&db, main_tenant, "chaos", &batch).await {
            Ok(()) => entered_batches += 1,
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }

    if !cap_cancel_done && lifecycle::cancel(&db, capped_tenant, Role::Owner, cap_a).await.is_ok() {
        scene.campaigns[scene.capped.0].cancelled = true;
    }
    // Leavers who have not left yet (an answer lost to the last fault) leave now; then the list
    // automation's first mail, held until `LEAVE_HOLD` after they left, goes out.
    let resume_by = Instant::now() + Duration::from_secs(60);
    while !leave_resumed && Instant::now() < resume_by {
        workers.ensure_all()?;
        if left.is_none() && leave_trigger_list(&owner, &leavers, &mut scene.stopped).await.unwrap_or(false) {
            left = Some(Instant::now());
        }
        if left.is_some_and(|t| t.elapsed() >= LEAVE_HOLD) {
            leave_resumed = release_held_step(&owner, &db, &jobs, &leavers).await.is_ok();
        }
        if !leave_resumed {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // Likewise readers' opens of the resent original (nothing to do once the resend has no copy
    // left to hold back).
    let opening_by = Instant::now() + Duration::from_secs(30);
    while !opened_done && Instant::now() < opening_by {
        match open_original(&owner, main_tenant, &resend, 10, &mut scene.stopped).await {
            Ok(true) => opened_done = true,
            Ok(false) => break,
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    // Every signup event has been sent (or given up on) before the queue may count as settled.
    let accepted = events_sent.await.unwrap_or_default();
    let aged = aging.await.unwrap_or_default();

    // Calm: a well-behaved sink, every worker up, until everything has an outcome.
    sink.set_faults(
        Faults::none()
            .with_rule(FaultRule::new("dead", FaultAction::user_unknown()))
            .with_rule(FaultRule::new("reject", FaultAction::RejectData("554 5.7.1 Rejected as spam".into()))),
    );
    let settle_by = Instant::now() + Duration::from_secs(180);
    loop {
        workers.ensure_all()?;
        // A test whose winner was not chosen during the faults ends now.
        if !ab_done {
            ab_done = end_ab_test(&db, &jobs, &owner, main_tenant, ab, false).await;
        }
        // A campaign that paused itself (a run of failures) is resumed, as its author would; an
        // automation's mail that paused with its automation stays paused with it.
        let auto_paused: Vec<(CampaignId, TenantId)> = sqlx::query_as(
            "SELECT c.id, c.tenant_id FROM campaigns c
             WHERE c.status = 'paused' AND c.pause_reason IS DISTINCT FROM 'chaos: paused by hand'
               AND (c.automation_id IS NULL
                    OR EXISTS (SELECT 1 FROM automations a
                               WHERE a.tenant_id = c.tenant_id AND a.id = c.automation_id AND a.status = 'live'))",
        )
        .fetch_all(&owner)
        .await
        .unwrap_or_default();
        for (id, tenant) in auto_paused {
            eprintln!("chaos: campaign {id} paused itself; resuming it");
            let _ = lifecycle::resume(&db, &jobs, tenant, Role::Owner, id).await;
        }
        if settled(&owner).await.unwrap_or(false) {
            break;
        }
        if Instant::now() > settle_by {
            let open: Vec<(String, String, i64)> = sqlx::query_as(
                "SELECT c.name, s.status, count(*) FROM sends s JOIN campaigns c ON c.id = s.campaign_id
                 WHERE s.status IN ('queued', 'sending') GROUP BY 1, 2",
            )
            .fetch_all(&owner)
            .await
            .unwrap_or_default();
            report.violations.push(format!("the queue did not settle within 180 s after the faults stopped: {open:?}"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for slot in 0..workers.slots.len() {
        workers.kill(slot).await;
    }
    report.violations.append(&mut workers.exited);
    // The recurring campaign's one due slot: one edition, checked like every other campaign.
    let editions: Vec<CampaignId> =
        sqlx::query_scalar("SELECT id FROM campaigns WHERE parent_id = $1").bind(recurring).fetch_all(&owner).await?;
    match editions[..] {
        [edition] => scene.campaigns.push(SceneCampaign {
            id: edition,
            tenant: main_tenant,
            name: "Daily edition",
            readers: edition_readers,
            cancelled: false,
            automation_step: false,
        }),
        _ => report.violations.push(format!("{} editions for the recurring campaign's one due slot", editions.len())),
    }
    // The automation's two mails: their audience is whoever it let in, by its runs.
    let entered: Vec<String> = sqlx::query_scalar(
        "SELECT lower(r.email) FROM automation_runs a JOIN readers r ON r.id = a.reader_id WHERE a.automation_id = $1",
    )
    .bind(automation)
    .fetch_all(&owner)
    .await?;
    eprintln!("chaos: {} of {} readers entered the automation", entered.len(), auto_readers.len());
    if entered.len() != auto_readers.len() {
        report.violations.push(format!("{} of {} readers entered the automation", entered.len(), auto_readers.len()));
    }
    for (step, name) in auto_steps.iter().zip(["Automation step 1", "Automation step 2"]) {
        scene.campaigns.push(SceneCampaign {
            id: *step,
            tenant: main_tenant,
            name,
            readers: entered.clone(),
            cancelled: false,
            automation_step: true,
        });
    }
    // The list automation's two mails, to whoever its list let in (the leavers too: they are
    // owed nothing once they left, and nothing may reach them 5 s after).
    let entered = automation_readers(&owner, leavers.automation).await?;
    if entered.len() != leavers.readers.len() {
        report.violations.push(format!(
            "{} of {} readers entered the automation their list starts",
            entered.len(),
            leavers.readers.len()
        ));
    }
    for (step, name) in leavers.steps.iter().zip(["List automation step 1", "List automation step 2"]) {
        scene.campaigns.push(SceneCampaign {
            id: *step,
            tenant: main_tenant,
            name,
            readers: entered.clone(),
            cancelled: false,
            automation_step: true,
        });
    }
    // The signup automation's mail, to whoever its events let in.
    eprintln!("chaos: {} of {} signup events accepted", accepted.len(), signup.readers.len());
    if accepted.len() != signup.readers.len() {
        report.violations.push(format!(
            "{} of {} signup events were never accepted",
            signup.readers.len() - accepted.len(),
            signup.readers.len()
        ));
    }
    scene.campaigns.push(SceneCampaign {
        id: signup.step,
        tenant: main_tenant,
        name: "Signup automation",
        readers: automation_readers(&owner, signup.automation).await?,
        cancelled: false,
        automation_step: true,
    });
    eprintln!("chaos: {aged} rows of the soft-failure send aged past the queue age at their first claim");
    if report.violations.is_empty() {
        check(&owner, &sink, &scene, &mut report).await?;
        check_automation_order(&sink, &auto_steps, &mut report.violations).await;
        check_automation_order(&sink, &leavers.steps, &mut report.violations).await;
        check_soft_failures(&owner, &scene.campaigns[scene.soft_failures], &mut report.violations).await?;
        check_broken_automation(&owner, &sink, &broken, &mut report.violations).await?;
        check_event_entries(&owner, &signup, &accepted, &mut report.violations).await?;
    }
    report.elapsed = started.elapsed();
    if !report.violations.is_empty() {
        // Keep the worker logs of a failed round next to the temporary cluster's.
        let kept = std::env::temp_dir().join(format!("herald-chaos-logs-{seed}"));
        let _ = std::fs::remove_dir_all(&kept);
        let _ = std::fs::rename(&logs, &kept);
        eprintln!("chaos: worker logs kept in {}", kept.display());
    }
    drop(pg);
    Ok(report)
}

/// More readers on an existing list: `{prefix}{i}@chaos.test`, every third one typed in mixed
/// case under the internationalised domain `Chäos.Test` and stored as Herald stores every
/// address, in its canonical form (`{prefix}{i}@xn--chos-qoa.test`); returns the addresses.
async fn insert_list_into(
    owner: &PgPool,
    tenant: TenantId,
    list: Uuid,
    prefix: &str,
    n: usize,
) -> anyhow::Result<(Uuid, Vec<String>)> {
    let addresses = (1..=n)
        .map(|i| {
            let typed = if i % 3 == 0 {
                format!("{}{i}@Chäos.Test", prefix.to_uppercase())
            } else {
                format!("{prefix}{i}@chaos.test")
            };
            herald_engine::Email::parse(&typed).map(String::from).map_err(|e| anyhow::anyhow!("{typed}: {e}"))
        })
        .collect::<anyhow::Result<Vec<String>>>()?;
    sqlx::query(
        "WITH r AS (
             INSERT INTO readers (tenant_id, email, name)
             SELECT $1, a, 'Reader ' || ord FROM unnest($3::text[]) WITH ORDINALITY AS x(a, ord)
             RETURNING id
         )
         INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, id, 'confirmed', now() FROM r",
    )
    .bind(tenant)
    .bind(list)
    .bind(&addresses)
    .execute(owner)
    .await?;
    Ok((list, addresses))
}

/// Unsubscribes the reader from every list (or suppresses the address by hand); returns the
/// commit time.
async fn opt_out(owner: &PgPool, tenant: TenantId, address: &str, suppress: bool) -> anyhow::Result<DateTime<Utc>> {
    if suppress {
        sqlx::query(
            "INSERT INTO suppressions (tenant_id, email_lower, reason, source) VALUES ($1, $2, 'manual', 'chaos')",
        )
        .bind(tenant)
        .bind(address)
        .execute(owner)
        .await?;
    } else {
        sqlx::query(
            "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now()
             WHERE tenant_id = $1 AND reader_id = (SELECT id FROM readers WHERE tenant_id = $1 AND lower(email) = $2)",
        )
        .bind(tenant)
        .bind(address)
        .execute(owner)
        .await?;
    }
    Ok(sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(owner).await?)
}

/// A live automation: an event lets readers in; it mails them twice, one step after the other
/// (no wait: a wait's logic is the API tests' with their own clock; here the faults are what
/// matters). Returns it and its two steps' campaigns.
async fn welcome_automation(db: &Db, jobs: &Jobs, tenant: TenantId) -> anyhow::Result<(AutomationId, [CampaignId; 2])> {
    use herald_engine::automations::store as automations;
    let input: herald_types::AutomationInput = serde_json::from_value(serde_json::json!({
        "name": "Chaos welcome", "trigger": {"kind": "event", "name": "chaos"},
        "steps": [
            {"action": {"kind": "email", "subject": "Automation one", "body": "Hello {{ reader.email }}"}},
            {"action": {"kind": "email", "subject": "Automation two", "body": "Again, {{ reader.email }}"}}
        ]
    }))?;
    let a = automations::create(db, tenant, Role::Owner, &input).await?;
    automations::start(db, jobs, tenant, Role::Owner, a.id).await?;
    let step = |i: usize| a.steps.get(i).and_then(|s| s.campaign_id).context("an email step without a campaign");
    Ok((a.id, [step(0)?, step(1)?]))
}

/// Lets `addresses` into the automations the event `name` starts, as the API's event does for
/// each.
async fn enter_automation(db: &Db, tenant: TenantId, name: &str, addresses: &[&String]) -> anyhow::Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "SELECT automation_enter('event', array_agg(tenant_id), array_agg($3::text), array_agg(id), NULL)
         FROM readers WHERE tenant_id = $1 AND lower(email) = ANY($2)",
    )
    .bind(tenant)
    .bind(addresses.iter().map(|a| a.as_str()).collect::<Vec<_>>())
    .bind(name)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The automation's second mail never reached a reader before its first (a sequence's order):
/// a run's next step waits until its last mail is out.
async fn check_automation_order(sink: &MailSink, steps: &[CampaignId; 2], v: &mut Vec<String>) {
    let mut first: HashMap<(usize, String), DateTime<Utc>> = HashMap::new();
    for d in sink.deliveries().await {
        let mid = d.message_id.clone().unwrap_or_default();
        let Some(step) = steps.iter().position(|c| mid.contains(&c.to_string())) else { continue };
        let at = first.entry((step, d.rcpt_to.clone())).or_insert(d.data_end_at);
        *at = (*at).min(d.data_end_at);
    }
    for ((step, rcpt), second) in &first {
        if *step == 1
            && let Some(one) = first.get(&(0, rcpt.clone()))
            && second < one
        {
            v.push(format!("automation: {rcpt} got step 2 at {second}, before step 1 at {one}"));
        }
        if *step == 1 && !first.contains_key(&(0, rcpt.clone())) {
            v.push(format!("automation: {rcpt} got step 2 without step 1"));
        }
    }
}

/// A queued transactional message, as `POST /api/v1/messages` leaves it.
async fn insert_message(owner: &PgPool, tenant: TenantId, to: &str) -> anyhow::Result<Uuid> {
    let id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO messages (id, tenant_id, idempotency_key, request_hash, to_email, from_email, subject, html, text_body)
         VALUES ($1, $2, $3, 'chaos', $4, 'app@chaos.test', 'Your code', '<p>1234</p>', '1234')",
    )
    .bind(id)
    .bind(tenant)
    .bind(id.to_string())
    .bind(to)
    .execute(owner)
    .await?;
    Ok(id)
}

/// Chooses the A/B test's winner by hand (version B), or makes its window end for the workers'
/// supervisor to choose. False when Postgres was not there to ask, or the fan-out has not
/// started the test yet (the caller tries again).
async fn end_ab_test(db: &Db, jobs: &Jobs, owner: &PgPool, tenant: TenantId, ab: CampaignId, by_hand: bool) -> bool {
    let done = if by_hand {
        herald_engine::campaigns::ab_test::pick_winner(db, jobs, tenant, Role::Owner, ab, Some(1)).await.map(drop)
    } else {
        // Once the fan-out has started the test: its first chunk sets the window's end.
        match sqlx::query("UPDATE campaigns SET ab_decide_at = now() WHERE id = $1 AND ab_seed IS NOT NULL")
            .bind(ab)
            .execute(owner)
            .await
        {
            Ok(r) if r.rows_affected() == 1 => Ok(()),
            Ok(_) => return false,
            Err(e) => Err(herald_engine::Error::from(e)),
        }
    };
    if let Err(e) = &done {
        eprintln!("chaos: could not end the A/B test yet: {e}");
    }
    done.is_ok()
}

/// A live automation from its definition (the API's JSON); returns it and its email steps'
/// campaigns, in step order.
async fn live_automation(
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
    definition: serde_json::Value,
) -> anyhow::Result<(AutomationId, Vec<CampaignId>)> {
    use herald_engine::automations::store as automations;
    let input: herald_types::AutomationInput = serde_json::from_value(definition)?;
    let a = automations::create(db, tenant, Role::Owner, &input).await?;
    automations::start(db, jobs, tenant, Role::Owner, a.id).await?;
    Ok((a.id, a.steps.iter().filter_map(|s| s.campaign_id).collect()))
}

/// The readers an automation let in, each once however many runs they have.
async fn automation_readers(owner: &PgPool, automation: AutomationId) -> anyhow::Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT lower(r.email) FROM automation_runs a JOIN readers r ON r.id = a.reader_id
         WHERE a.automation_id = $1",
    )
    .bind(automation)
    .fetch_all(owner)
    .await?)
}

/// How long the list automation's first mail stays held after its leavers left: longer than the
/// 5 s the checks allow, so that a copy the claim let through would be seen.
const LEAVE_HOLD: Duration = Duration::from_secs(6);

/// An automation a list starts (two mails) whose 40 readers are confirmed on another list too. A
/// quarter of them leave the trigger list, and only it, while its first mail is queued for them:
/// the workspace may still mail them, this automation may not (the claim asks what the scheduler
/// asked, confirmed on the trigger's own list, not on any list).
struct TriggerLeavers {
    tenant: TenantId,
    automation: AutomationId,
    /// The trigger list.
    list: Uuid,
    steps: [CampaignId; 2],
    readers: Vec<String>,
    leavers: Vec<String>,
    leaver_ids: Vec<i64>,
}

async fn trigger_leavers(owner: &PgPool, db: &Db, jobs: &Jobs, tenant: TenantId) -> anyhow::Result<TriggerLeavers> {
    let (other, readers) = insert_list(owner, tenant, "leave", 40).await?;
    let (list, _) = insert_list(owner, tenant, "trigger", 0).await?;
    let (automation, steps) = live_automation(
        db,
        jobs,
        tenant,
        serde_json::json!({
            "name": "Chaos list welcome", "trigger": {"kind": "list_confirmed", "list_id": list},
            "steps": [
                {"action": {"kind": "email", "subject": "List one", "body": "Hello {{ reader.email }}"}},
                {"action": {"kind": "email", "subject": "List two", "body": "Again, {{ reader.email }}"}}
            ]
        }),
    )
    .await?;
    let steps: [CampaignId; 2] =
        steps.try_into().map_err(|_| anyhow::anyhow!("the list automation's two mails have no campaigns"))?;
    // Its first mail is held until after the leavers left (paused, as a guard pauses an
    // automation's mail: `lifecycle::pause` leaves that mail to its automation), so that it is
    // still queued for them when they leave, whatever the faults' timing.
    sqlx::query(
        "UPDATE campaigns SET status = 'paused', pause_reason = 'chaos: paused by hand', updated_at = now()
         WHERE id = $1 AND status = 'sending'",
    )
    .bind(steps[0])
    .execute(owner)
    .await?;
    // Confirmed on the trigger list as an import confirms them: its trigger lets them in.
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, reader_id, 'confirmed', now() FROM subscriptions WHERE list_id = $3",
    )
    .bind(tenant)
    .bind(list)
    .bind(other)
    .execute(owner)
    .await?;
    let leavers: Vec<String> = readers.iter().step_by(4).cloned().collect();
    let leaver_ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 AND lower(email) = ANY($2)")
            .bind(tenant)
            .bind(&leavers)
            .fetch_all(owner)
            .await?;
    Ok(TriggerLeavers { tenant, automation, list, steps, readers, leavers, leaver_ids })
}

/// The leavers leave the trigger list, and only it (as `opt_out` unsubscribes, for one list),
/// once the automation's first mail is queued for each of them, and are noted in `stopped` with
/// when that committed. False while that mail is not queued for all of them yet. Tried again
/// after an error (a commit whose answer was lost changes nothing the second time, and the time
/// read then is later than the commit, which only widens the bound).
async fn leave_trigger_list(
    owner: &PgPool,
    t: &TriggerLeavers,
    stopped: &mut HashMap<String, (DateTime<Utc>, &'static str)>,
) -> anyhow::Result<bool> {
    let queued: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sends WHERE campaign_id = $1 AND reader_id = ANY($2) AND status = 'queued'",
    )
    .bind(t.steps[0])
    .bind(&t.leaver_ids)
    .fetch_one(owner)
    .await?;
    if queued < t.leaver_ids.len() as i64 {
        return Ok(false);
    }
    sqlx::query(
        "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now()
         WHERE tenant_id = $1 AND list_id = $2 AND reader_id = ANY($3)",
    )
    .bind(t.tenant)
    .bind(t.list)
    .bind(&t.leaver_ids)
    .execute(owner)
    .await?;
    let at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(owner).await?;
    for address in &t.leavers {
        stopped.insert(address.clone(), (at, "left the automation's trigger list"));
    }
    Ok(true)
}

/// Lets the held first mail go, as resuming an automation's paused mail does.
async fn release_held_step(owner: &PgPool, db: &Db, jobs: &Jobs, t: &TriggerLeavers) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE campaigns SET status = 'sending', pause_reason = NULL, heartbeat_at = now(), updated_at = now()
         WHERE id = $1 AND status = 'paused'",
    )
    .bind(t.steps[0])
    .execute(owner)
    .await?;
    jobs.kick_campaign(db, t.tenant, t.steps[0], true).await?;
    Ok(())
}

/// A send that outlives the workspace's queue age: 40 readers of a list of its own, every other
/// one of the first twenty refused once with a 4xx ([`refused_once`]), and each row's first
/// claim moved past the workspace's limit as soon as it is made ([`age_claimed_rows`]), as a
/// send days long leaves a row that failed early on. Returns it, its readers and the refused.
async fn soft_failure_campaign(
    owner: &PgPool,
    db: &Db,
    tenant: TenantId,
) -> anyhow::Result<(CampaignId, Vec<String>, Vec<String>)> {
    let (list, readers) = insert_list(owner, tenant, "soft", 40).await?;
    let id = create_campaign(db, tenant, "Soft failures", &[list]).await?;
    let refused = readers.iter().take(20).step_by(2).cloned().collect();
    Ok((id, readers, refused))
}

/// `faults` and a `451` for the first attempt of each of `refused`: a rule per address, since a
/// rule's `times` counts its matches whoever they are.
fn refused_once(faults: Faults, refused: &[String]) -> Faults {
    refused.iter().fold(faults, |f, address| {
        f.with_rule(FaultRule::new(address.clone(), FaultAction::try_again_later()).times(1))
    })
}

/// Whether each refused reader's first attempt is over (its row back in the queue with the
/// attempt counted, or further).
async fn soft_refusals_done(owner: &PgPool, campaign: CampaignId, refused: &[String]) -> anyhow::Result<bool> {
    let done: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sends WHERE campaign_id = $1 AND lower(email) = ANY($2)
           AND (attempts >= 2 OR (attempts >= 1 AND status <> 'sending') OR status IN ('skipped', 'cancelled', 'expired'))",
    )
    .bind(campaign)
    .bind(refused)
    .fetch_one(owner)
    .await?;
    Ok(done >= refused.len() as i64)
}

/// Ages the campaign's rows as a send that outlived the workspace's queue age leaves them: each
/// row claimed once (and not failed twice) gets a first claim older than `max_queue_age_hours`,
/// moments after that claim, until `until` or the end of the send. Rows a transaction holds are
/// left for the next pass (SKIP LOCKED): the workers never wait on this. Returns how many rows
/// it aged.
async fn age_claimed_rows(owner: PgPool, tenant: TenantId, campaign: CampaignId, until: Instant) -> u64 {
    let mut aged = 0;
    let mut max_age: Option<i32> = None;
    let mut passes = 0u64;
    while Instant::now() < until {
        passes += 1;
        if max_age.is_none() {
            max_age = sqlx::query_scalar("SELECT max_queue_age_hours FROM tenants WHERE id = $1")
                .bind(tenant)
                .fetch_one(&owner)
                .await
                .ok();
        }
        if let Some(hours) = max_age {
            let result = sqlx::query(
                "WITH due AS (
                     SELECT id FROM sends
                     WHERE campaign_id = $1 AND status IN ('queued', 'sending') AND attempts <= 1
                       AND first_claimed_at > now() - make_interval(hours => $2)
                     FOR UPDATE SKIP LOCKED
                 )
                 UPDATE sends s SET first_claimed_at = now() - make_interval(hours => $2 + 1)
                 FROM due WHERE s.id = due.id",
            )
            .bind(campaign)
            .bind(hours)
            .execute(&owner)
            .await;
            match result {
                Ok(r) => aged += r.rows_affected(),
                // Postgres restarting: the next pass.
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        if passes.is_multiple_of(50)
            && sqlx::query_scalar::<_, bool>("SELECT status = 'sent' FROM campaigns WHERE id = $1")
                .bind(campaign)
                .fetch_one(&owner)
                .await
                .unwrap_or(false)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    aged
}

/// A resend to non-openers, and the original it resends.
struct Resend {
    original: CampaignId,
    id: CampaignId,
    readers: Vec<String>,
}

/// The original went to 60 readers of a list of its own two days ago, opens tracked per reader
/// (written as its send left it: every row `sent`); its resend goes out spread over 30 s, so
/// that readers who open the original mid-send ([`open_original`]) still have their copy ahead.
/// A second resend without `again` must be refused: returns what went wrong if it was not.
async fn resend_campaign(owner: &PgPool, db: &Db, tenant: TenantId) -> anyhow::Result<(Resend, Option<String>)> {
    use herald_engine::campaigns::resend;
    let (list, readers) = insert_list(owner, tenant, "resend", 60).await?;
    let original = create_campaign(db, tenant, "Original", &[list]).await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'sent', tracking = 'on', fanout_done = true, recipients = $2,
                started_at = now() - interval '2 days', finished_at = now() - interval '2 days'
         WHERE id = $1",
    )
    .bind(original)
    .bind(readers.len() as i64)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, attempts, sent_at, first_claimed_at)
         SELECT $1, $2, s.reader_id, r.email, 'sent', 1, now() - interval '2 days', now() - interval '2 days'
         FROM subscriptions s JOIN readers r ON r.id = s.reader_id
         WHERE s.list_id = $3 ORDER BY s.reader_id",
    )
    .bind(tenant)
    .bind(original)
    .bind(list)
    .execute(owner)
    .await?;
    let input = herald_types::ResendInput { subject: String::new(), count_machine_opens: false, again: false };
    let id = resend::create(db, tenant, Role::Owner, original, &input).await?.id;
    // Thirty seconds (below the editor's minimum; set directly, as for the spread campaign).
    sqlx::query("UPDATE campaigns SET spread_hours = 30.0 / 3600 WHERE id = $1").bind(id).execute(owner).await?;
    let second = match resend::create(db, tenant, Role::Owner, original, &input).await {
        Err(herald_engine::Error::Conflict(_)) => None,
        Ok(made) => {
            // Out of the way: a draft left behind would never let the round settle.
            sqlx::query("DELETE FROM campaigns WHERE id = $1").bind(made.id).execute(owner).await?;
            Some("a second resend of one original was made without `again`".to_string())
        }
        Err(e) => Some(format!("a second resend without `again` failed, but not as a conflict: {e}")),
    };
    Ok((Resend { original, id, readers }, second))
}

/// The `n` readers of the resend whose copies the spread sends last open the original (as its
/// tracking pixel records an open) while their copies are still ahead, and are noted in
/// `stopped` with when that committed. False while the resend has no copy left to hold back
/// (its fan-out has not written its rows yet, or it is over). Tried again after an error, it
/// notes those whose open committed unseen.
async fn open_original(
    owner: &PgPool,
    tenant: TenantId,
    resend: &Resend,
    n: i64,
    stopped: &mut HashMap<String, (DateTime<Utc>, &'static str)>,
) -> anyhow::Result<bool> {
    let mut opened: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT lower(r.email) FROM events e JOIN readers r ON r.id = e.reader_id
         WHERE e.tenant_id = $1 AND e.campaign_id = $2 AND e.kind = 'open'",
    )
    .bind(tenant)
    .bind(resend.original)
    .fetch_all(owner)
    .await?;
    if opened.is_empty() {
        opened = sqlx::query_scalar(
            "WITH picked AS (
                 SELECT s.reader_id, lower(s.email) AS email FROM sends s
                 WHERE s.campaign_id = $3 AND s.status IN ('queued', 'sending')
                 ORDER BY s.id DESC LIMIT $4
             ), opened AS (
                 INSERT INTO events (tenant_id, campaign_id, reader_id, kind, prefetch)
                 SELECT $1, $2, reader_id, 'open', false FROM picked
             )
             SELECT email FROM picked",
        )
        .bind(tenant)
        .bind(resend.original)
        .bind(resend.id)
        .bind(n)
        .fetch_all(owner)
        .await?;
    }
    if opened.is_empty() {
        return Ok(false);
    }
    let at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(owner).await?;
    for address in opened {
        stopped.insert(address, (at, "opened the original"));
    }
    Ok(true)
}

/// Another workspace's automation that fails every turn: its "wait until" names a zone Postgres
/// does not know (`Mars/Olympus`, written behind the editor's back, as a zone the server has
/// stopped knowing would be), so moving a reader to it raises. Its 20 readers enter at once,
/// tag themselves, and go no further. Returns it and its mail's campaigns.
async fn broken_automation(
    owner: &PgPool,
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
) -> anyhow::Result<(AutomationId, Vec<CampaignId>)> {
    let (_, readers) = insert_list(owner, tenant, "broken", 20).await?;
    let tag = Uuid::new_v4();
    sqlx::query("INSERT INTO tags (tenant_id, id, name) VALUES ($1, $2, 'started')")
        .bind(tenant)
        .bind(tag)
        .execute(owner)
        .await?;
    let (automation, steps) = live_automation(
        db,
        jobs,
        tenant,
        serde_json::json!({
            "name": "Chaos broken zone", "trigger": {"kind": "event", "name": "broken"},
            "steps": [
                {"action": {"kind": "add_tag", "tag_id": tag}},
                {"action": {"kind": "wait_until", "time": "09:00", "zone": "Europe/Paris"}},
                {"action": {"kind": "email", "subject": "Never", "body": "Never sent, {{ reader.email }}"}}
            ]
        }),
    )
    .await?;
    sqlx::query(
        "UPDATE automations SET steps = jsonb_set(steps, '{1,action,zone}', '\"Mars/Olympus\"')
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(automation)
    .execute(owner)
    .await?;
    let everyone: Vec<&String> = readers.iter().collect();
    enter_automation(db, tenant, "broken", &everyone).await?;
    Ok((automation, steps))
}

/// An automation a signup event starts, one mail, at every event (so an event entered twice
/// would mail twice), and its 40 readers' ids and addresses.
struct Signup {
    automation: AutomationId,
    step: CampaignId,
    readers: Vec<(i64, String)>,
}

async fn signup_automation(owner: &PgPool, db: &Db, jobs: &Jobs, tenant: TenantId) -> anyhow::Result<Signup> {
    let (list, _) = insert_list(owner, tenant, "signup", 40).await?;
    let (automation, steps) = live_automation(
        db,
        jobs,
        tenant,
        serde_json::json!({
            "name": "Chaos signup", "trigger": {"kind": "event", "name": "signup"}, "reentry": "every_time",
            "steps": [{"action": {"kind": "email", "subject": "Signed up", "body": "Welcome, {{ reader.email }}"}}]
        }),
    )
    .await?;
    let step = steps.first().copied().context("the signup mail has no campaign")?;
    let readers: Vec<(i64, String)> = sqlx::query_as(
        "SELECT r.id, lower(r.email) FROM readers r JOIN subscriptions s ON s.reader_id = r.id
         WHERE s.list_id = $1 ORDER BY r.id",
    )
    .bind(list)
    .fetch_all(owner)
    .await?;
    Ok(Signup { automation, step, readers })
}

/// Sends each reader's one signup event as an API client whose reply was lost sends it: twice
/// under one Idempotency-Key, the second copy after the first or both at once (`plan`: when,
/// after `started`, the reader, and whether at once). Through Postgres restarts a reader's pair
/// is sent again, under the same key, until a copy is accepted or `give_up`. Returns the readers
/// whose event was accepted.
async fn send_events(
    db: Db,
    tenant: TenantId,
    mut plan: Vec<(Duration, i64, String, bool)>,
    started: Instant,
    give_up: Instant,
) -> Vec<String> {
    use herald_engine::automations::events::record;
    plan.sort_by_key(|p| p.0);
    let mut accepted = Vec::new();
    for (after, reader, address, at_once) in plan {
        tokio::time::sleep_until((started + after).into()).await;
        let input = herald_types::ReaderEventInput { name: "signup".into(), data: serde_json::json!({"plan": "pro"}) };
        let key = format!("chaos-signup-{reader}");
        loop {
            let ok = if at_once {
                let (a, b) = tokio::join!(
                    record(&db, tenant, reader, &input, Some(key.as_str())),
                    record(&db, tenant, reader, &input, Some(key.as_str()))
                );
                a.is_ok() || b.is_ok()
            } else {
                let first = record(&db, tenant, reader, &input, Some(key.as_str())).await;
                let again = record(&db, tenant, reader, &input, Some(key.as_str())).await;
                first.is_ok() || again.is_ok()
            };
            if ok {
                accepted.push(address);
                break;
            }
            if Instant::now() >= give_up {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    accepted
}

/// Every campaign sent or cancelled with nothing queued or in flight, every message final.
///
/// A paused automation's readers keep their place until its author resumes it: they are not
/// waiting for anything the round does.
async fn settled(owner: &PgPool) -> anyhow::Result<bool> {
    let open: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM campaigns WHERE status NOT IN ('sent', 'cancelled', 'recurring')
                                                AND automation_id IS NULL)
              + (SELECT count(*) FROM automation_runs r WHERE r.state = 'waiting'
                   AND EXISTS (SELECT 1 FROM automations a
                               WHERE a.tenant_id = r.tenant_id AND a.id = r.automation_id AND a.status = 'live'))
              + (SELECT count(*) FROM sends WHERE status IN ('queued', 'sending'))
              + (SELECT count(*) FROM messages WHERE status IN ('queued', 'sending'))",
    )
    .fetch_one(owner)
    .await?;
    Ok(open == 0)
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

/// The A/B test: a winner was chosen, nobody is left held, every reader sent has a version, and
/// each copy received is the version its reader's row names (so no reader got two versions:
/// their copies are of one row).
async fn check_ab_versions(
    owner: &PgPool,
    sink: &MailSink,
    c: &SceneCampaign,
    v: &mut Vec<String>,
) -> anyhow::Result<()> {
    let (winner, held): (Option<i16>, i64) = sqlx::query_as(
        "SELECT ab_winner, (SELECT count(*) FROM sends WHERE campaign_id = $1 AND status = 'held') FROM campaigns WHERE id = $1",
    )
    .bind(c.id)
    .fetch_one(owner)
    .await?;
    if winner.is_none() || held > 0 {
        v.push(format!("{}: winner {winner:?}, {held} readers still held", c.name));
    }
    let versions: HashMap<String, Option<i16>> =
        sqlx::query_as("SELECT lower(email), variant FROM sends WHERE campaign_id = $1 AND status <> 'skipped'")
            .bind(c.id)
            .fetch_all(owner)
            .await?
            .into_iter()
            .collect();
    let id = c.id.to_string();
    let mut by_version = [0usize; 2];
    for mail in sink.messages().await {
        let parsed = mail.parse();
        let ours = parsed.headers.iter().any(|(k, val)| k.eq_ignore_ascii_case("message-id") && val.contains(&id));
        if !ours {
            continue;
        }
        let rcpt = mail.rcpt_to.first().cloned().unwrap_or_default();
        let label = parsed.subject.strip_prefix("AB version ").and_then(|s| s.chars().next());
        let got = label.map(|l| (l as u8).wrapping_sub(b'A') as i16);
        match versions.get(&rcpt) {
            Some(Some(want)) if got == Some(*want) => by_version[*want as usize % 2] += 1,
            want => v.push(format!("{}: {rcpt} got {:?} but its row names version {want:?}", c.name, parsed.subject)),
        }
    }
    eprintln!("chaos: {} copies of version A {}, of B {}, winner {winner:?}", c.name, by_version[0], by_version[1]);
    Ok(())
}

/// What the sink accepted for one (campaign or message, recipient): the distinct Message-IDs,
/// and when the data of each copy ended.
type Received = (BTreeSet<String>, Vec<DateTime<Utc>>);

/// Compares the whole queue with what the sink accepted.
async fn check(owner: &PgPool, sink: &MailSink, scene: &Scene, report: &mut RoundReport) -> anyhow::Result<()> {
    // A reader who opted out: no message's data reaches the server more than this long after
    // the opt-out committed (the engine checks again before each message once a claim is a
    // second old). Measured at the end of the data, which Herald controls; a slow server's 250
    // may come later.
    let opt_out_bound = chrono::Duration::seconds(5);
    // (campaign or message, recipient) → Message-IDs and the times of each copy.
    let mut got: HashMap<(String, String), Received> = HashMap::new();
    for d in sink.deliveries().await {
        let mid = d.message_id.clone().unwrap_or_default();
        // `<campaign.reader@domain>` or `msg.<id>@domain`.
        let key = mid.split('@').next().unwrap_or_default();
        let owner_key = match key.strip_prefix("msg.") {
            Some(id) => id.to_string(),
            None => key.split('.').next().unwrap_or_default().to_string(),
        };
        let entry = got.entry((owner_key, d.rcpt_to.clone())).or_default();
        entry.0.insert(mid);
        entry.1.push(d.data_end_at);
        report.copies_received += 1;
    }
    let v = &mut report.violations;
    let mut extra_total = 0usize;
    let mut ambiguous_total = 0i64;
    for (i, c) in scene.campaigns.iter().enumerate() {
        let key = |rcpt: &str| (c.id.to_string(), rcpt.to_string());
        let mut distinct = 0usize;
        let mut copies = 0usize;
        for rcpt in &c.readers {
            let Some((ids, times)) = got.get(&key(rcpt)) else { continue };
            distinct += 1;
            copies += times.len();
            if ids.len() > 1 {
                v.push(format!("{}: {rcpt} got {} different Message-IDs: {ids:?}", c.name, ids.len()));
            }
            if let Some(at) = scene.opted_out.get(rcpt)
                && let Some(late) = times.iter().find(|t| **t > *at + opt_out_bound)
            {
                v.push(format!("{}: {rcpt} opted out at {at} and still got a copy at {late}", c.name));
            }
            // Left the trigger list, opened the original: the same bound, the claim's checks being
            // the same.
            if let Some((at, why)) = scene.stopped.get(rcpt)
                && let Some(late) = times.iter().find(|t| **t > *at + opt_out_bound)
            {
                v.push(format!("{}: {rcpt} {why} at {at} and still got a copy at {late}", c.name));
            }
            // Paused: only what was already on the wire may still arrive (the same bound).
            if let (true, Some((paused, resumed))) = (i == scene.paused_campaign, scene.pause_window)
                && let Some(late) = times.iter().find(|t| **t > paused + opt_out_bound && **t < resumed)
            {
                v.push(format!("{}: {rcpt} got a copy at {late}, paused at {paused}, resumed at {resumed}", c.name));
            }
        }
        // Nobody outside the campaign's audience (its lists, its segments less its exclusion).
        let audience: HashSet<&str> = c.readers.iter().map(String::as_str).collect();
        let id = c.id.to_string();
        let outsiders: Vec<&String> =
            got.keys().filter(|(of, rcpt)| *of == id && !audience.contains(rcpt.as_str())).map(|(_, r)| r).collect();
        if !outsiders.is_empty() {
            v.push(format!(
                "{}: {} readers outside its audience got it, e.g. {:?}",
                c.name,
                outsiders.len(),
                &outsiders[..outsiders.len().min(5)]
            ));
        }
        // A row of the send that outlived its queue age expires once a retry failed too: its
        // reader is owed nothing more (`check_soft_failures` fails one that expired sooner).
        let expired: HashSet<String> = if i == scene.soft_failures {
            sqlx::query_scalar(
                "SELECT lower(email) FROM sends WHERE campaign_id = $1 AND status = 'expired' AND attempts >= 2",
            )
            .bind(c.id)
            .fetch_all(owner)
            .await?
            .into_iter()
            .collect()
        } else {
            HashSet::new()
        };
        let expected: Vec<&String> = c
            .readers
            .iter()
            .filter(|r| {
                !r.starts_with("dead")
                    && !r.starts_with("reject")
                    && !scene.opted_out.contains_key(*r)
                    && !scene.stopped.contains_key(*r)
                    && !expired.contains(*r)
            })
            .collect();
        if !c.cancelled && i != scene.capped.0 && i != scene.capped.1 {
            report.messages_expected += expected.len();
            let missing: Vec<&&String> = expected.iter().filter(|r| !got.contains_key(&key(r))).collect();
            if !missing.is_empty() {
                v.push(format!(
                    "{}: {} eligible readers got nothing, e.g. {:?}",
                    c.name,
                    missing.len(),
                    &missing[..missing.len().min(5)]
                ));
            }
        }
        let (status, ambiguous, open): (String, i64, i64) = sqlx::query_as(
            "SELECT c.status,
                    (SELECT coalesce(sum(ambiguous), 0) FROM sends s WHERE s.campaign_id = c.id)::bigint,
                    (SELECT count(*) FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'sending'))
             FROM campaigns c WHERE c.id = $1",
        )
        .bind(c.id)
        .fetch_one(owner)
        .await?;
        let want = if c.cancelled {
            "cancelled"
        } else if c.automation_step {
            "sending"
        } else {
            "sent"
        };
        if status != want || open != 0 {
            v.push(format!("{}: ended {status} with {open} rows queued or in flight (expected {want}, none)", c.name));
        }
        // Herald's account of each reader against the sink's: a row recorded `sent` was
        // received; a received message's row is `sent`, or counted as ambiguous (a copy whose
        // 250 never came back may be followed by a skip or a cancel, which Herald cannot tell).
        let rows: Vec<(String, String, i32)> =
            sqlx::query_as("SELECT lower(email), status, ambiguous FROM sends WHERE campaign_id = $1")
                .bind(c.id)
                .fetch_all(owner)
                .await?;
        let mut sent = 0usize;
        for (rcpt, row_status, row_ambiguous) in rows {
            let received = got.contains_key(&key(&rcpt));
            sent += usize::from(row_status == "sent");
            if row_status == "sent" && !received {
                v.push(format!("{}: {rcpt} is recorded sent but the sink never got it", c.name));
            }
            if received && row_status != "sent" && row_ambiguous == 0 {
                v.push(format!("{}: {rcpt} got a copy but Herald says {row_status}, not ambiguous", c.name));
            }
            // Per row, not only in sum: every copy beyond the first is counted on its own row.
            let copies = got.get(&key(&rcpt)).map_or(0, |g| g.1.len());
            if copies > 1 && copies - 1 > row_ambiguous as usize {
                v.push(format!("{}: {rcpt} got {copies} copies but its row counts {row_ambiguous} ambiguous", c.name));
            }
        }
        eprintln!(
            "chaos: {} {status}: {sent} sent, {distinct} readers received, {copies} copies, {ambiguous} ambiguous",
            c.name
        );
        let extra = copies - distinct;
        if (ambiguous as usize) < extra {
            v.push(format!("{}: {extra} extra copies but only {ambiguous} counted as ambiguous", c.name));
        }
        extra_total += extra;
        ambiguous_total += ambiguous;
    }
    check_ab_versions(owner, sink, &scene.campaigns[scene.ab_test], v).await?;
    // Two campaigns, one frequency cap: each reader gets exactly one of them.
    let (a, b) = (&scene.campaigns[scene.capped.0], &scene.campaigns[scene.capped.1]);
    for rcpt in &a.readers {
        let n = [a.id, b.id].iter().filter(|id| got.contains_key(&(id.to_string(), rcpt.clone()))).count();
        report.messages_expected += 1;
        if n == 2 {
            // Both arrived: explained only by a copy Herald could not know of, on a row that
            // ended unsent but counts it as ambiguous (its data went out and no reply came back,
            // then the campaign was cancelled): by Herald's books that campaign never reached
            // the reader, so the other one took them rather than lose them.
            let unknown: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM sends s JOIN readers r ON r.id = s.reader_id
                 WHERE s.campaign_id = ANY($1) AND r.email = $2 AND s.status <> 'sent' AND s.ambiguous > 0",
            )
            .bind(vec![a.id.0, b.id.0])
            .bind(rcpt)
            .fetch_one(owner)
            .await?;
            if unknown > 0 {
                continue;
            }
        }
        if n != 1 {
            v.push(format!("frequency cap: {rcpt} got {n} of the two capped campaigns (expected exactly one)"));
        }
    }
    // Hard bounces end suppressed; their rows failed.
    let unsuppressed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM readers r WHERE r.email LIKE 'dead%'
           AND NOT EXISTS (SELECT 1 FROM suppressions x WHERE x.tenant_id = r.tenant_id
                           AND x.email_lower = lower(r.email) AND x.reason = 'hard_bounce')",
    )
    .fetch_one(owner)
    .await?;
    if unsuppressed > 0 {
        v.push(format!("{unsuppressed} unknown users were not suppressed"));
    }
    // Transactional: each message exactly once (or more under one Message-ID, counted).
    for (id, to) in &scene.messages {
        report.messages_expected += 1;
        let (status, ambiguous): (String, i32) =
            sqlx::query_as("SELECT status, ambiguous FROM messages WHERE id = $1").bind(id).fetch_one(owner).await?;
        let copies = got.get(&(id.to_string(), to.clone())).map(|g| g.1.len()).unwrap_or(0);
        if status != "sent" || copies == 0 {
            v.push(format!("transactional {id} to {to}: {status}, {copies} copies"));
        } else if copies - 1 > ambiguous as usize {
            v.push(format!("transactional {id}: {} extra copies, {ambiguous} counted", copies - 1));
        }
        extra_total += copies.saturating_sub(1);
        ambiguous_total += i64::from(ambiguous);
    }
    report.extra_copies = extra_total;
    report.ambiguous_counted = ambiguous_total;
    Ok(())
}

/// The send that outlived its queue age: no row expired for its age after a single attempt (one
/// soft failure early in a long send is never a row's last try); whether its readers got their
/// copy is checked with every campaign's.
async fn check_soft_failures(owner: &PgPool, c: &SceneCampaign, v: &mut Vec<String>) -> anyhow::Result<()> {
    let early: Vec<(String, i32)> = sqlx::query_as(
        "SELECT lower(email), attempts FROM sends WHERE campaign_id = $1 AND status = 'expired' AND attempts < 2",
    )
    .bind(c.id)
    .fetch_all(owner)
    .await?;
    for (rcpt, attempts) in &early {
        v.push(format!("{}: {rcpt} expired for its queue age after {attempts} attempt(s)", c.name));
    }
    let (retried, expired): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'sent' AND attempts >= 2), count(*) FILTER (WHERE status = 'expired')
         FROM sends WHERE campaign_id = $1",
    )
    .bind(c.id)
    .fetch_one(owner)
    .await?;
    eprintln!("chaos: {}: {retried} sent on a retry, {expired} expired after two attempts or more", c.name);
    Ok(())
}

/// The failing workspace's automation: paused by the scheduler, with a reason, having mailed
/// nobody (its readers never got past the broken step).
async fn check_broken_automation(
    owner: &PgPool,
    sink: &MailSink,
    broken: &(AutomationId, Vec<CampaignId>),
    v: &mut Vec<String>,
) -> anyhow::Result<()> {
    let (automation, steps) = broken;
    let (status, reason): (String, Option<String>) =
        sqlx::query_as("SELECT status, pause_reason FROM automations WHERE id = $1")
            .bind(*automation)
            .fetch_one(owner)
            .await?;
    if status != "paused" || reason.is_none() {
        v.push(format!("the failing automation ended {status} (reason {reason:?}), not paused by the scheduler"));
    }
    let ids: Vec<Uuid> = steps.iter().map(|c| c.0).collect();
    let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM sends WHERE campaign_id = ANY($1)")
        .bind(&ids)
        .fetch_one(owner)
        .await?;
    let ids: Vec<String> = steps.iter().map(ToString::to_string).collect();
    let received = sink
        .deliveries()
        .await
        .iter()
        .filter(|d| d.message_id.as_deref().is_some_and(|m| ids.iter().any(|id| m.contains(id.as_str()))))
        .count();
    if queued > 0 || received > 0 {
        v.push(format!(
            "the failing automation queued {queued} mails and {received} reached the server (expected none)"
        ));
    }
    Ok(())
}

/// One run per event: each reader's one signup event, however many copies came under its key,
/// let them in once (the automation takes every event, so a second run would be a second mail).
async fn check_event_entries(
    owner: &PgPool,
    signup: &Signup,
    accepted: &[String],
    v: &mut Vec<String>,
) -> anyhow::Result<()> {
    let runs: HashMap<String, i64> = sqlx::query_as(
        "SELECT lower(r.email), count(*) FROM automation_runs a JOIN readers r ON r.id = a.reader_id
         WHERE a.automation_id = $1 GROUP BY 1",
    )
    .bind(signup.automation)
    .fetch_all(owner)
    .await?
    .into_iter()
    .collect();
    for (rcpt, n) in &runs {
        if *n > 1 {
            v.push(format!("signup: {rcpt}'s one event (sent twice under its Idempotency-Key) made {n} runs"));
        }
    }
    for rcpt in accepted {
        if !runs.contains_key(rcpt) {
            v.push(format!("signup: {rcpt}'s event was accepted but made no run"));
        }
    }
    Ok(())
}
