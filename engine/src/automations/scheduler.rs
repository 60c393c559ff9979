//! The scheduler: moves readers whose step is due, in batches, and starts delivery for the
//! email steps it queued. Every process runs one; two at once are safe (each batch locks its
//! runs `SKIP LOCKED`, and a step's log row refuses a second run of it).
//!
//! Its cost while readers wait is one index probe per live automation per tick
//! (`due_automations` in `engine/sql/automations.sql`), however many readers wait, and one
//! look at the (nearly always empty) table of confirmation mails that subscribe steps owe.
//!
//! Workspaces do not hold each other up. An automation whose trigger check or batch fails (a
//! step's time zone the server no longer knows, any error of `automation_advance`) is logged and
//! counted, and the tick goes on with the others; after [`PAUSE_AFTER_FAILURES`] failed turns in
//! a row it is paused, with a reason its author can act on. Each workspace gets at most
//! [`WORKSPACE_BUDGET`] of a tick, and the automations served least recently go first, so one
//! with a million runs due shares the scheduler with the others instead of holding it.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::automations::store;
use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::{BulkTable, Db};
use crate::infra::tokens::Signer;
use crate::jobs::Jobs;
use herald_types::AutomationId;

/// How often due steps are looked for: a step runs at most about this long after its time.
pub const TICK: Duration = Duration::from_secs(1);
/// Runs per transaction: big enough that a million readers entering at once are moved at the
/// send's pace, small enough that an edit waits for one batch only.
pub const BATCH: i32 = 1000;
/// Batches between two looks at the statistics of the tables a batch reads (see
/// [`refresh_statistics`]): every batch rewrites a thousand runs.
const STATISTICS_EVERY: u64 = 20;
/// How long one workspace may take of a tick before the scheduler moves on to the next (what it
/// left due goes first next tick). A workspace with a million runs due then delays the others'
/// steps by about this long, not by the minutes its backlog takes; and it is a few batches long,
/// so such a workspace still moves at nearly its full pace (a tick cut short is followed at once
/// by the next, without [`TICK`]'s pause).
pub const WORKSPACE_BUDGET: Duration = Duration::from_secs(2);
/// Failed turns in a row after which the scheduler pauses an automation. More than one, so that
/// a failure that clears by itself does not stop an author's automation; few, because a broken
/// step fails the same way every tick (a second), holding its readers and filling the logs until
/// its author fixes it. Failures that say the database was unreachable do not count.
pub const PAUSE_AFTER_FAILURES: i32 = 3;

/// What one tick did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Steps run: a run moved through one step counts one.
    pub steps: u64,
    /// Trigger checks and automations' batches that failed (logged; the tick went on).
    pub failed: u64,
    /// A workspace used up its share with steps perhaps still due: the next tick follows at once.
    pub cut_short: bool,
}

/// What mailing the confirmations that subscribe steps owe needs besides the database and the
/// queue: the links are signed and point at the installation.
#[derive(Clone)]
pub struct ConfirmationMail {
    pub signer: Signer,
    pub base_url: String,
}

/// Runs until `stop` says so. A tick that fails (Postgres restarting) is logged and the next
/// one tries again: nothing of a failed batch committed.
#[tracing::instrument(skip_all)]
pub async fn run(db: Db, jobs: Jobs, mail: ConfirmationMail, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let pause = match tick_within(&db, &jobs, Utc::now(), WORKSPACE_BUDGET).await {
            Ok(report) if report.cut_short => Duration::ZERO,
            Ok(_) => TICK,
            Err(e) => {
                tracing::warn!(error = ?e, "automation scheduler tick failed");
                TICK
            }
        };
        // A subscribe step on a double opt-in list owes the reader a confirmation mail, written
        // in the step's transaction (SQL signs and queues no mail): mailed here, after the
        // commit, and by the next pass should this process die first.
        let cx = crate::audience::subscribe::PublicContext {
            db: &db,
            signer: &mail.signer,
            jobs: &jobs,
            base_url: &mail.base_url,
        };
        if let Err(e) = crate::audience::subscribe::send_owed_confirmations(&cx).await {
            tracing::warn!(error = ?e, "owed confirmation mails not sent; the next pass tries again");
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One pass at the clock `now` (tests pass a later one to skip waits): every due step of every
/// live automation, until none is due or its workspace's share of the tick is used. Returns the
/// steps run.
#[tracing::instrument(skip_all)]
pub async fn tick(db: &Db, jobs: &Jobs, now: DateTime<Utc>) -> Result<u64> {
    Ok(tick_within(db, jobs, now, WORKSPACE_BUDGET).await?.steps)
}

/// [`tick`], each workspace's share of it `budget` (a workspace always gets one batch). Fails
/// only when the automations to check or to move cannot be listed (the database is
/// unreachable); one automation's failure is logged, counted against it and in the report.
#[tracing::instrument(skip_all)]
pub async fn tick_within(db: &Db, jobs: &Jobs, now: DateTime<Utc>, budget: Duration) -> Result<TickReport> {
    let mut report = TickReport::default();
    // Periodic triggers first (a segment's new members, today's anniversaries): the readers they
    // let in are due at once, in the same pass.
    let to_check: Vec<(TenantId, AutomationId)> =
        sqlx::query_as("SELECT tenant_id, automation_id FROM automations_to_check($1)")
            .bind(now)
            .fetch_all(db.pool())
            .await?;
    // Each check's outcome waits for the automation's batches: a turn is one success or failure.
    let mut checked: HashMap<(TenantId, AutomationId), Outcome> = HashMap::new();
    for (tenant, automation) in to_check {
        let outcome = match check_trigger(db, tenant, automation, now).await {
            Ok(entered) => {
                if entered > 0 {
                    tracing::info!(%tenant, %automation, entered, "readers entered an automation by its periodic trigger");
                }
                Outcome::Succeeded
            }
            Err(e) => {
                report.failed += 1;
                Outcome::of_failure(&e, Trouble::Trigger, tenant, automation)
            }
        };
        checked.insert((tenant, automation), outcome);
    }
    // In the function's order (least recently served first), which its ordinality keeps.
    let due: Vec<(TenantId, AutomationId)> = sqlx::query_as(
        "SELECT tenant_id, automation_id FROM due_automations($1) WITH ORDINALITY AS d ORDER BY d.ordinality",
    )
    .bind(now)
    .fetch_all(db.pool())
    .await?;
    // Counted across the tick's automations: the statistics are the tables', not one's.
    let mut batches = 0u64;
    for (tenant, automations) in by_workspace(due) {
        let deadline = Instant::now() + budget;
        for (i, automation) in automations.into_iter().enumerate() {
            // The workspace's first automation always has its turn: every workspace moves.
            if i > 0 && Instant::now() >= deadline {
                report.cut_short = true;
                break;
            }
            let outcome = match advance(db, jobs, tenant, automation, now, deadline, &mut batches).await {
                Ok(advanced) => {
                    report.steps += advanced.steps;
                    report.cut_short |= !advanced.drained;
                    Outcome::Succeeded
                }
                Err(e) => {
                    report.failed += 1;
                    Outcome::of_failure(&e, Trouble::Steps, tenant, automation)
                }
            };
            let outcome = checked.remove(&(tenant, automation)).map_or(outcome, |check| check.and(outcome));
            record_turn(db, tenant, automation, outcome, true).await;
        }
    }
    // Checked, and no batch this tick (none due, or its workspace's share was used).
    for ((tenant, automation), outcome) in checked {
        record_turn(db, tenant, automation, outcome, false).await;
    }
    Ok(report)
}

/// The due automations by workspace, in the list's order: each workspace where its first (least
/// recently served) automation is, its automations in the list's order too.
fn by_workspace(due: Vec<(TenantId, AutomationId)>) -> Vec<(TenantId, Vec<AutomationId>)> {
    let mut out: Vec<(TenantId, Vec<AutomationId>)> = Vec::new();
    let mut place: HashMap<TenantId, usize> = HashMap::new();
    for (tenant, automation) in due {
        let at = *place.entry(tenant).or_insert_with(|| {
            out.push((tenant, Vec::new()));
            out.len() - 1
        });
        out[at].1.push(automation);
    }
    out
}

/// One periodic trigger check, in the workspace's transaction: the readers it let in.
async fn check_trigger(db: &Db, tenant: TenantId, automation: AutomationId, now: DateTime<Utc>) -> Result<i64> {
    let mut tx = db.tenant_tx(tenant).await?;
    let entered: i64 = sqlx::query_scalar("SELECT automation_check_trigger($1, $2, $3)")
        .bind(tenant)
        .bind(automation)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(entered)
}

/// Which part of an automation failed, for the reason its author reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trouble {
    /// Its periodic trigger's check (a segment, a date field).
    Trigger,
    /// A batch of its steps.
    Steps,
}

impl Trouble {
    /// What the automation's page says once the scheduler paused it: plain words, never the
    /// database's message (which may quote SQL, and goes to the logs).
    fn pause_reason(self) -> String {
        let what = match self {
            Trouble::Trigger => "its trigger could not be checked. Check its segment or date field",
            Trouble::Steps => "a step could not be scheduled. Check its steps and their time zones",
        };
        format!("Paused after {PAUSE_AFTER_FAILURES} failed attempts in a row: {what}, then resume.")
    }
}

/// How an automation's turn in a tick went, for its count of failures in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    /// Failed for a reason of its own: counts.
    Failed(Trouble),
    /// Failed because the database was unreachable: says nothing about the automation.
    Inconclusive,
}

impl Outcome {
    /// Logs `e` (the only place its text goes) and says whether it counts against the automation.
    fn of_failure(e: &Error, trouble: Trouble, tenant: TenantId, automation: AutomationId) -> Outcome {
        tracing::warn!(error = ?e, %tenant, %automation, ?trouble, "an automation failed; the scheduler goes on with the others");
        if e.is_connection_lost() { Outcome::Inconclusive } else { Outcome::Failed(trouble) }
    }

    /// One turn of a check and a batch: the failure of either is the turn's.
    fn and(self, other: Outcome) -> Outcome {
        match (self, other) {
            (Outcome::Failed(trouble), _) | (_, Outcome::Failed(trouble)) => Outcome::Failed(trouble),
            (Outcome::Inconclusive, _) | (_, Outcome::Inconclusive) => Outcome::Inconclusive,
            (Outcome::Succeeded, Outcome::Succeeded) => Outcome::Succeeded,
        }
    }
}

/// Keeps the automation's count of failed turns in a row and, when `had_turn`, when it last had
/// one (which orders the next tick); pauses it when the count reaches [`PAUSE_AFTER_FAILURES`].
/// A failure to record is logged: the tick goes on.
async fn record_turn(db: &Db, tenant: TenantId, automation: AutomationId, outcome: Outcome, had_turn: bool) {
    if let Err(e) = try_record_turn(db, tenant, automation, outcome, had_turn).await {
        tracing::warn!(error = ?e, %tenant, %automation, "could not record an automation's turn");
    }
}

async fn try_record_turn(
    db: &Db,
    tenant: TenantId,
    automation: AutomationId,
    outcome: Outcome,
    had_turn: bool,
) -> Result<()> {
    let verdict = match outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed(_) => "failed",
        Outcome::Inconclusive => "inconclusive",
    };
    let mut tx = db.tenant_tx(tenant).await?;
    // A check's success off its automation's turn changes nothing unless failures were counted:
    // no write then. An automation paused meanwhile is left as its author left it.
    let failures: Option<i32> = sqlx::query_scalar(
        "UPDATE automations
         SET advanced_at = CASE WHEN $3 THEN now() ELSE advanced_at END,
             failures = CASE $4::text WHEN 'failed' THEN failures + 1 WHEN 'succeeded' THEN 0 ELSE failures END
         WHERE tenant_id = $1 AND id = $2 AND status = 'live'
           AND ($3 OR $4::text = 'failed' OR ($4::text = 'succeeded' AND failures > 0))
         RETURNING failures",
    )
    .bind(tenant)
    .bind(automation)
    .bind(had_turn)
    .bind(verdict)
    .fetch_optional(&mut *tx)
    .await?;
    if let (Outcome::Failed(trouble), Some(failures)) = (outcome, failures)
        && failures >= PAUSE_AFTER_FAILURES
        && store::pause_failing(&mut tx, tenant, automation, &trouble.pause_reason()).await?
    {
        tracing::warn!(%tenant, %automation, failures, ?trouble, "automation paused: it failed turn after turn");
    }
    tx.commit().await?;
    Ok(())
}

/// What [`advance`] did.
struct Advanced {
    steps: u64,
    /// Stopped because nothing was left due, not because the workspace's share was used.
    drained: bool,
}

/// Runs `automation`'s due steps batch by batch until none is due or `deadline` passes (after
/// one batch at least); a step that makes the next one due at once is run in the next batch, so
/// a reader goes through an email and a tag in one pass. `batches` counts the tick's batches so
/// far, for [`refresh_statistics`].
async fn advance(
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
    automation: AutomationId,
    now: DateTime<Utc>,
    deadline: Instant,
    batches: &mut u64,
) -> Result<Advanced> {
    let mut total = 0u64;
    let mut queued_any = false;
    let mut first = true;
    let drained = loop {
        if !first && Instant::now() >= deadline {
            break false;
        }
        first = false;
        if batches.is_multiple_of(STATISTICS_EVERY) {
            refresh_statistics(db).await;
        }
        *batches += 1;
        let batch_started = Instant::now();
        let mut tx = db.tenant_tx(tenant).await?;
        let (handled, queued): (i32, i32) =
            sqlx::query_as("SELECT handled, queued FROM automation_advance($1, $2, $3, $4)")
                .bind(tenant)
                .bind(automation)
                .bind(now)
                .bind(BATCH)
                .fetch_one(&mut *tx)
                .await?;
        tx.commit().await?;
        if handled > 0 {
            tracing::debug!(%automation, handled, queued, ms = batch_started.elapsed().as_millis() as u64, "automation batch");
        }
        total += handled as u64;
        if queued > 0 {
            queued_any = true;
            // Mail goes out while later batches are still being moved. Should starting it fail,
            // the supervisor's round starts it (see `start_delivery`): not the automation's fault.
            if let Err(e) = start_delivery(db, jobs, tenant, automation).await {
                tracing::warn!(error = ?e, %tenant, %automation, "could not start an automation's delivery");
            }
        }
        if handled == 0 {
            break true;
        }
    };
    if queued_any {
        tracing::debug!(%tenant, %automation, steps = total, "automation steps run");
    }
    Ok(Advanced { steps: total, drained })
}

/// A million readers entering at once leave `automation_runs` with no statistics, and without
/// them the batch's look-ups by id became scans of every waiting run (8 s a batch at 100k; 0.3 s
/// after ANALYZE). Cheap when nothing changed much: one look at the table's size and counters.
async fn refresh_statistics(db: &Db) {
    for table in [BulkTable::AutomationRuns, BulkTable::AutomationStepLog, BulkTable::Sends] {
        db.analyze_if_stale(table).await;
    }
}

/// Starts delivery for the automation's step campaigns that have mail due and no loop working
/// on them (a loop that is already sending picks the new rows up itself). The supervisor's
/// `claim_unattended_campaigns` does the same within 15 s should this process die first.
async fn start_delivery(db: &Db, jobs: &Jobs, tenant: TenantId, automation: AutomationId) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    let idle: Vec<crate::domain::CampaignId> = sqlx::query_scalar(
        "SELECT c.id FROM campaigns c
         WHERE c.tenant_id = $1 AND c.automation_id = $2 AND c.status = 'sending'
           AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.campaign_id = c.id AND l.slot >= 0 AND l.expires_at > now())
           AND EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status = 'queued' AND s.next_attempt_at <= now())",
    )
    .bind(tenant)
    .bind(automation)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    for campaign in idle {
        jobs.kick_campaign(db, tenant, campaign, true).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspaces_take_turns_in_the_order_their_first_due_automation_comes() {
        let (a, b) = (TenantId(uuid::Uuid::from_u128(1)), TenantId(uuid::Uuid::from_u128(2)));
        let x = |n: u128| AutomationId(uuid::Uuid::from_u128(n));
        let grouped = by_workspace(vec![(b, x(1)), (a, x(2)), (b, x(3)), (a, x(4))]);
        assert_eq!(grouped, vec![(b, vec![x(1), x(3)]), (a, vec![x(2), x(4)])]);
        assert!(by_workspace(Vec::new()).is_empty());
    }

    #[test]
    fn a_turn_fails_when_its_check_or_its_batch_did() {
        use Outcome::*;
        assert_eq!(Succeeded.and(Failed(Trouble::Steps)), Failed(Trouble::Steps));
        assert_eq!(Failed(Trouble::Trigger).and(Succeeded), Failed(Trouble::Trigger));
        assert_eq!(Inconclusive.and(Succeeded), Inconclusive);
        assert_eq!(Succeeded.and(Succeeded), Succeeded);
        let reason = Trouble::Steps.pause_reason();
        assert!(reason.starts_with(&format!("Paused after {PAUSE_AFTER_FAILURES} failed attempts")), "{reason}");
    }
}
