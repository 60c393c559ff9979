//! `herald bench automations`: an automation's first mail against a campaign's send,
//! in one run, and what the scheduler costs while readers wait.
//!
//! Against the configured Postgres and a `herald dev smtp-sink` child process, with the workers
//! of this process (as `herald worker` runs them):
//!
//! 1. **Campaign**: a 2 KB personalised campaign to `--readers` readers, click to `sent`.
//! 2. **Automation**: the same readers enter a live automation (one event for all, one
//!    statement, as a big import's confirmations would); timed from that commit until step 1 —
//!    the same mail — is `sent` to every one of them. Its rate over the campaign's is the figure
//!    the issue asks to be at least 0.8.
//! 3. **Waiting**: everyone now waits a day at step 2; for `--wait-seconds` the process's CPU
//!    (every worker loop, the scheduler's ticks among them) and Postgres's are measured, and one
//!    scheduler tick is timed.

use std::time::{Duration, Instant};

use herald_engine::automations::{scheduler, store as automations};
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::store::{self, CampaignInput};
use herald_engine::jobs::Jobs;
use herald_engine::{Db, Role, TenantId};
use uuid::Uuid;

use crate::BenchEnv;
use crate::bench::{
    bench_workspace, cpu_seconds, postgres_cpu_seconds, render_sandbox_cpu_seconds, start_sink, two_kb_body,
    worker_setup,
};

#[derive(clap::Args, Debug, Clone)]
pub struct AutomationsBench {
    /// Readers of the campaign, who then enter the automation.
    #[arg(long, default_value_t = 1_000_000)]
    pub readers: usize,
    /// SMTP connections (delivery workers).
    #[arg(long, default_value_t = 16)]
    pub connections: u32,
    /// How long the waiting readers' cost is measured.
    #[arg(long, default_value_t = 30)]
    pub wait_seconds: u64,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

pub async fn run(args: AutomationsBench, env: &BenchEnv) -> anyhow::Result<()> {
    herald_engine::infra::migrate::run(&env.database_url).await?;
    let db = Db::connect(&env.app_database_url, env.db_max_connections.max(args.connections + 8)).await?;
    herald_engine::infra::migrate::check_runtime_role(&db).await?;
    // Every figure depends on it: without autovacuum dead rows pile up in `sends` and
    // `automation_runs` for the whole run (the CI machines' Postgres has it off).
    let autovacuum: String = sqlx::query_scalar("SELECT current_setting('autovacuum')").fetch_one(db.pool()).await?;
    println!(
        "herald bench automations: {} readers, {} connections, Postgres autovacuum {autovacuum}",
        args.readers, args.connections
    );
    let (_sink, smtp_url) = start_sink().await?;
    let (tenant, owner, slug) = bench_workspace(&db, env).await?;
    let outcome = measure(&db, &owner, tenant, &smtp_url, env, &args).await;
    if args.keep {
        println!("kept workspace {slug} ({tenant})");
    } else {
        sqlx::query("DELETE FROM tenants WHERE id = $1").bind(tenant).execute(&owner).await?;
    }
    outcome
}

async fn measure(
    db: &Db,
    owner: &sqlx::PgPool,
    tenant: TenantId,
    smtp_url: &str,
    env: &BenchEnv,
    args: &AutomationsBench,
) -> anyhow::Result<()> {
    let list = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO lists (id, tenant_id, name, slug, opt_in) VALUES ($1, $2, 'Everyone', 'everyone', 'single')",
    )
    .bind(list)
    .bind(tenant)
    .execute(owner)
    .await?;
    let seeding = Instant::now();
    sqlx::query(
        "INSERT INTO readers (tenant_id, email, name)
         SELECT $1, 'bench' || g || '@example.com', 'Reader ' || g FROM generate_series(1, $2) g",
    )
    .bind(tenant)
    .bind(args.readers as i64)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, id, 'confirmed', now() FROM readers WHERE tenant_id = $1",
    )
    .bind(tenant)
    .bind(list)
    .execute(owner)
    .await?;
    sqlx::query("ANALYZE readers").execute(owner).await?;
    sqlx::query("ANALYZE subscriptions").execute(owner).await?;
    println!("seeded:      {} readers in {:.1} s", args.readers, seeding.elapsed().as_secs_f64());

    let setup = worker_setup(db, env, tenant, smtp_url, args.connections, None, None)?;
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let workers = tokio::spawn(herald_engine::worker::run_workers(setup, async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let jobs = Jobs::new(db);
    let herald_cpu = || cpu_seconds("self") + render_sandbox_cpu_seconds();

    // 1. The campaign.
    let input = CampaignInput {
        name: "Reference".into(),
        subject: "Welcome, {{ reader.name }}".into(),
        from_name: "Bench Co".into(),
        from_email: "news@bench.test".into(),
        list_ids: vec![list.into()],
        body: two_kb_body(),
        ..Default::default()
    };
    let campaign = store::create(db, tenant, Role::Owner, &input).await?;
    let (cpu0, pg0) = (herald_cpu(), postgres_cpu_seconds());
    let started = Instant::now();
    lifecycle::send_now(db, &jobs, tenant, Role::Owner, campaign.id).await?;
    loop {
        if store::get(db, tenant, campaign.id).await?.status != store::CampaignStatus::Sending {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(3600), "the campaign did not finish within an hour");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let campaign_secs = started.elapsed().as_secs_f64();
    let campaign_rate = args.readers as f64 / campaign_secs;
    let (cpu, pg) = (herald_cpu() - cpu0, postgres_cpu_seconds() - pg0);
    println!(
        "campaign:    {} messages in {campaign_secs:.1} s = {campaign_rate:.0} msg/s; \
         CPU {:.1} s Herald + {:.1} s Postgres per 100k",
        args.readers,
        cpu * 100_000.0 / args.readers as f64,
        pg * 100_000.0 / args.readers as f64
    );

    // 2. The automation: the same mail, then a day's wait, then another.
    let automation: herald_types::AutomationInput = serde_json::from_value(serde_json::json!({
        "name": "Welcome", "trigger": {"kind": "event", "name": "bench"}, "cap_exempt": true,
        "steps": [
            {"action": {"kind": "email", "subject": "Welcome, {{ reader.name }}", "body": two_kb_body()}},
            {"action": {"kind": "wait", "amount": 1, "unit": "days"}},
            {"action": {"kind": "email", "subject": "A day in", "body": "Hello again"}}
        ]
    }))?;
    let automation = automations::create(db, tenant, Role::Owner, &automation).await?;
    automations::start(db, &jobs, tenant, Role::Owner, automation.id).await?;
    let step1 = automation.steps[0].campaign_id.ok_or_else(|| anyhow::anyhow!("no campaign for step 1"))?;
    let (cpu0, pg0) = (herald_cpu(), postgres_cpu_seconds());
    let started = Instant::now();
    let mut tx = db.tenant_tx(tenant).await?;
    let entered: i64 = sqlx::query_scalar(
        "SELECT automation_enter('event', array_agg(tenant_id), array_agg('bench'::text), array_agg(id), NULL)
         FROM readers WHERE tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let entering = started.elapsed().as_secs_f64();
    println!("entered:     {entered} readers in one statement, {entering:.1} s");
    // Done when no run waits at step 1 and none of its mail is queued or being sent: index
    // probes. Counting the sent rows every half second instead cost the machine a fifth of a
    // core at 500k (no visibility map without vacuum: every row's heap page), which the
    // campaign's own wait does not pay. The count runs every 30 s for the progress line.
    let sent_so_far = || {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sends WHERE campaign_id = $1 AND status = 'sent'")
            .bind(step1)
            .fetch_one(owner)
    };
    let mut last_report = (Instant::now(), 0i64);
    loop {
        let busy: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM automation_runs WHERE tenant_id = $1 AND automation_id = $2
                              AND state = 'waiting' AND step_id = $3)
                 OR EXISTS (SELECT 1 FROM sends WHERE campaign_id = $4 AND status IN ('queued', 'sending'))",
        )
        .bind(tenant)
        .bind(automation.id)
        .bind(automation.steps[0].id)
        .bind(step1)
        .fetch_one(owner)
        .await?;
        if !busy {
            break;
        }
        if last_report.0.elapsed() >= Duration::from_secs(30) {
            let sent = sent_so_far().await?;
            let rate = (sent - last_report.1) as f64 / last_report.0.elapsed().as_secs_f64();
            println!(
                "  … {sent} sent after {:.0} s, {rate:.0} msg/s over the last 30 s",
                started.elapsed().as_secs_f64()
            );
            last_report = (Instant::now(), sent);
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(3600), "step 1 did not reach everyone within an hour");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let automation_secs = started.elapsed().as_secs_f64();
    let sent = sent_so_far().await?;
    anyhow::ensure!(sent == entered, "step 1 ended with {sent} sent of {entered} entered");
    let automation_rate = entered as f64 / automation_secs;
    let (cpu, pg) = (herald_cpu() - cpu0, postgres_cpu_seconds() - pg0);
    println!(
        "automation:  step 1 to {entered} readers in {automation_secs:.1} s = {automation_rate:.0} msg/s \
         (entry included) = {:.2}× the campaign's rate; CPU {:.1} s Herald + {:.1} s Postgres per 100k",
        automation_rate / campaign_rate,
        cpu * 100_000.0 / entered as f64,
        pg * 100_000.0 / entered as f64
    );

    // 3. Everyone waits a day: what that costs.
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM automation_runs WHERE tenant_id = $1 AND automation_id = $2 AND state = 'waiting'",
    )
    .bind(tenant)
    .bind(automation.id)
    .fetch_one(owner)
    .await?;
    // The last delivery loops let their slots go after 5 s idle.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let (cpu0, pg0) = (herald_cpu(), postgres_cpu_seconds());
    tokio::time::sleep(Duration::from_secs(args.wait_seconds)).await;
    let (cpu, pg) = (herald_cpu() - cpu0, postgres_cpu_seconds() - pg0);
    let secs = args.wait_seconds as f64;
    // The scheduler's own share: its tick's wall time (its statements' Postgres time included)
    // over the tick interval, an upper bound on the CPU it takes. Twenty ticks, the median.
    let mut ticks = Vec::new();
    for _ in 0..20 {
        let tick = Instant::now();
        scheduler::tick(db, &jobs, chrono::Utc::now()).await?;
        ticks.push(tick.elapsed().as_secs_f64());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ticks.sort_by(f64::total_cmp);
    let (median, slowest) = (ticks[ticks.len() / 2], ticks[ticks.len() - 1]);
    println!(
        "waiting:     {waiting} readers wait; over {secs:.0} s the whole worker process used {:.2} % of a core \
         and Postgres {:.2} %; a scheduler tick takes {:.1} ms (median of 20, slowest {:.1} ms): \
         at one tick a second the scheduler uses at most {:.2} % of a core",
        100.0 * cpu / secs,
        100.0 * pg / secs,
        median * 1000.0,
        slowest * 1000.0,
        100.0 * median / scheduler::TICK.as_secs_f64()
    );
    let _ = stop_tx.send(true);
    let _ = workers.await;
    Ok(())
}
