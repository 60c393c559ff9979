//! One round, phase by phase: the stage and the scene, the workers, every send started, the
//! faults, the calm in which everything settles, and the checks.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::Utc;
use herald_engine::campaigns::lifecycle;
use herald_engine::{CampaignId, Role, TenantId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::PgPool;
use tokio::task::JoinHandle;

use super::automations::automation_readers;
use super::checks::{
    check, check_automation_order, check_broken_automation, check_event_entries, check_soft_failures, settled,
};
use super::faults::Timeline;
use super::fixtures::{end_ab_test, insert_message};
use super::scene::{SceneCampaign, Setup, build_scene};
use super::soft_failures::age_claimed_rows;
use super::stage::Stage;
use super::webhooks;
use super::workers::Workers;
use super::{ChaosArgs, RoundReport};
use crate::smtp_sink::{FaultAction, FaultRule, Faults};

pub(super) async fn run_round(bin: &Path, args: &ChaosArgs, seed: u64) -> anyhow::Result<RoundReport> {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    // Its own stream for the lost replies, so the round's draws stay as they were.
    let stage = Stage::start(seed.rotate_left(17) ^ 0x0010_55e5).await?;

    // The scene.
    let mut setup = build_scene(&stage, args, &mut rng).await?;

    // The workers.
    let logs = stage.pg.dir.join("logs");
    let mut workers = Workers::new(bin, args.workers, stage.pg.port, &stage.owner_url, stage.sink_addr, &logs).await?;
    // The main workspace's webhook endpoint, before any mail goes out.
    let (receiver, hook_url) = webhooks::Receiver::start().await?;
    webhooks::subscribe(&stage, &workers.secret, setup.main_tenant, &hook_url).await?;
    workers.ensure_all()?;

    let aging = start_sends(&stage, &mut setup, args, &mut rng).await?;

    // Faults, until the fault phase ends.
    let mut report = RoundReport { seed, ..Default::default() };
    report.violations.extend(setup.second_resend.take());
    let timeline = Timeline::plan(args, &stage, &setup, &mut rng);
    let over = timeline.run(&stage, &mut workers, &mut setup, &mut report, &mut rng).await?;
    // Every signup event has been sent (or given up on) before the queue may count as settled.
    let accepted = over.events_sent.await.unwrap_or_default();
    let lost = usize::try_from(stage.events_link.dropped()).unwrap_or(usize::MAX);
    *report.faults.entry("event reply lost").or_default() += lost;
    let aged = aging.await.unwrap_or_default();

    settle(&stage, &mut workers, &setup, over.ab_done, &mut report).await?;
    for slot in 0..workers.slots.len() {
        workers.kill(slot).await;
    }
    report.violations.append(&mut workers.exited);
    add_late_campaigns(&stage.owner, &mut setup, &accepted, &mut report).await?;
    eprintln!("chaos: {aged} rows of the soft-failure send aged past the queue age at their first claim");
    if report.violations.is_empty() {
        let (owner, sink, scene) = (&stage.owner, &stage.sink, &setup.scene);
        check(owner, sink, scene, &mut report).await?;
        check_automation_order(sink, &setup.auto_steps, &mut report.violations).await;
        check_automation_order(sink, &setup.leavers.steps, &mut report.violations).await;
        check_soft_failures(owner, &scene.campaigns[scene.soft_failures], &mut report.violations).await?;
        check_broken_automation(owner, sink, &setup.broken, &mut report.violations).await?;
        check_event_entries(owner, &setup.signup, &accepted, &mut report.violations).await?;
        webhooks::check(owner, &receiver, setup.main_tenant, &mut report.violations).await?;
    }
    report.elapsed = started.elapsed();
    if !report.violations.is_empty() {
        // Keep the worker logs of a failed round next to the temporary cluster's.
        let kept = std::env::temp_dir().join(format!("herald-chaos-logs-{seed}"));
        let _ = std::fs::remove_dir_all(&kept);
        let _ = std::fs::rename(&logs, &kept);
        eprintln!("chaos: worker logs kept in {}", kept.display());
    }
    drop(stage);
    Ok(report)
}

/// Starts every send: the scene's campaigns, the soft-failure send's aging (returned: how many
/// rows it aged), the scheduled campaign, the recurring one, and 60 transactional messages.
async fn start_sends(
    stage: &Stage,
    setup: &mut Setup,
    args: &ChaosArgs,
    rng: &mut StdRng,
) -> anyhow::Result<JoinHandle<u64>> {
    let Stage { owner, db, jobs, .. } = stage;
    // Go: every campaign at once but the second capped one (the timeline starts it as the first
    // is held), and transactional messages beside them.
    let late = setup.scene.campaigns[setup.scene.capped.1].id;
    for c in setup.scene.campaigns.iter().filter(|c| c.id != late) {
        lifecycle::send_now(db, jobs, c.tenant, Role::Owner, c.id).await?;
    }
    // The soft-failure send's rows are aged past the queue age as each is first claimed.
    let aging = tokio::spawn(age_claimed_rows(
        owner.clone(),
        setup.main_tenant,
        setup.soft,
        Instant::now() + Duration::from_secs(args.fault_seconds + 5),
    ));
    // Scheduled as `store::schedule` leaves it (its template check needs the render sandbox,
    // which this harness, as a test binary, cannot start).
    let due = Utc::now() + chrono::Duration::milliseconds(rng.gen_range(1_000..4_000));
    sqlx::query("UPDATE campaigns SET status = 'scheduled', scheduled_at = $2, schedule_tz = 'UTC' WHERE id = $1")
        .bind(setup.scheduled)
        .bind(due)
        .execute(owner)
        .await?;
    setup.scene.campaigns.push(SceneCampaign {
        id: setup.scheduled,
        tenant: setup.main_tenant,
        name: "Scheduled",
        readers: std::mem::take(&mut setup.sched_readers),
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
    .bind(setup.recurring)
    .bind(&slot_time)
    .execute(owner)
    .await?;
    for i in 0..60 {
        // As the API stores them: canonical (every third typed `TX{i}@Chäos.Test`).
        let typed = if i % 3 == 0 { format!("TX{i}@Chäos.Test") } else { format!("tx{i}@chaos.test") };
        let to = String::from(herald_engine::Email::parse(&typed)?);
        let id = insert_message(owner, setup.main_tenant, &to).await?;
        setup.scene.messages.insert(id, to);
    }
    Ok(aging)
}

/// Until everything has an outcome (or 180 s have passed, a violation).
async fn settle(
    stage: &Stage,
    workers: &mut Workers,
    setup: &Setup,
    mut ab_done: bool,
    report: &mut RoundReport,
) -> anyhow::Result<()> {
    let Stage { owner, db, jobs, sink, .. } = stage;
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
            ab_done = end_ab_test(db, jobs, owner, setup.main_tenant, setup.ab, false).await;
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
        .fetch_all(owner)
        .await
        .unwrap_or_default();
        for (id, tenant) in auto_paused {
            eprintln!("chaos: campaign {id} paused itself; resuming it");
            let _ = lifecycle::resume(db, jobs, tenant, Role::Owner, id).await;
        }
        if settled(owner).await.unwrap_or(false) {
            break;
        }
        if Instant::now() > settle_by {
            let open: Vec<(String, String, i64)> = sqlx::query_as(
                "SELECT c.name, s.status, count(*) FROM sends s JOIN campaigns c ON c.id = s.campaign_id
                 WHERE s.status IN ('queued', 'sending') GROUP BY 1, 2",
            )
            .fetch_all(owner)
            .await
            .unwrap_or_default();
            report.violations.push(format!("the queue did not settle within 180 s after the faults stopped: {open:?}"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// The campaigns whose audience is known only once the round has settled: the recurring
/// campaign's one edition, and the automations' mails (to whoever each let in).
async fn add_late_campaigns(
    owner: &PgPool,
    setup: &mut Setup,
    accepted: &[String],
    report: &mut RoundReport,
) -> anyhow::Result<()> {
    // The recurring campaign's one due slot: one edition, checked like every other campaign.
    let editions: Vec<CampaignId> = sqlx::query_scalar("SELECT id FROM campaigns WHERE parent_id = $1")
        .bind(setup.recurring)
        .fetch_all(owner)
        .await?;
    match editions[..] {
        [edition] => setup.scene.campaigns.push(SceneCampaign {
            id: edition,
            tenant: setup.main_tenant,
            name: "Daily edition",
            readers: std::mem::take(&mut setup.edition_readers),
            cancelled: false,
            automation_step: false,
        }),
        _ => report.violations.push(format!("{} editions for the recurring campaign's one due slot", editions.len())),
    }
    // The automation's two mails: their audience is whoever it let in, by its runs (every run:
    // a reader let in twice counts twice).
    let entered: Vec<String> = sqlx::query_scalar(
        "SELECT lower(r.email) FROM automation_runs a JOIN readers r ON r.id = a.reader_id WHERE a.automation_id = $1",
    )
    .bind(setup.automation)
    .fetch_all(owner)
    .await?;
    let steps = [(setup.auto_steps[0], "Automation step 1"), (setup.auto_steps[1], "Automation step 2")];
    let expected = setup.auto_readers.len();
    add_automation_mails(setup, report, "the automation", entered, expected, &steps);
    // The list automation's two mails, to whoever its list let in (the leavers too: they are
    // owed nothing once they left, and nothing may reach them 5 s after).
    let entered = automation_readers(owner, setup.leavers.automation).await?;
    let steps =
        [(setup.leavers.steps[0], "List automation step 1"), (setup.leavers.steps[1], "List automation step 2")];
    let expected = setup.leavers.readers.len();
    add_automation_mails(setup, report, "the automation their list starts", entered, expected, &steps);
    // The signup automation's mail, to whoever its events let in.
    eprintln!("chaos: {} of {} signup events accepted", accepted.len(), setup.signup.readers.len());
    if accepted.len() != setup.signup.readers.len() {
        report.violations.push(format!(
            "{} of {} signup events were never accepted",
            setup.signup.readers.len() - accepted.len(),
            setup.signup.readers.len()
        ));
    }
    let entered = automation_readers(owner, setup.signup.automation).await?;
    let steps = [(setup.signup.step, "Signup automation")];
    let expected = entered.len();
    add_automation_mails(setup, report, "the signup automation", entered, expected, &steps);
    Ok(())
}

/// An automation's mails, each checked like a campaign whose audience is whoever the automation
/// let in (`entered`), of whom there should be `expected`.
fn add_automation_mails(
    setup: &mut Setup,
    report: &mut RoundReport,
    what: &str,
    entered: Vec<String>,
    expected: usize,
    steps: &[(CampaignId, &'static str)],
) {
    eprintln!("chaos: {} of {expected} readers entered {what}", entered.len());
    if entered.len() != expected {
        report.violations.push(format!("{} of {expected} readers entered {what}", entered.len()));
    }
    for &(id, name) in steps {
        setup.scene.campaigns.push(SceneCampaign {
            id,
            tenant: setup.main_tenant,
            name,
            readers: entered.clone(),
            cancelled: false,
            automation_step: true,
        });
    }
}
