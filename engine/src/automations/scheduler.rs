//! The scheduler: moves readers whose step is due, in batches, and starts delivery for the
//! email steps it queued. Every process runs one; two at once are safe (each batch locks its
//! runs `SKIP LOCKED`, and a step's log row refuses a second run of it).
//!
//! Its cost while readers wait is one index probe per live automation per tick
//! (`due_automations` in `engine/sql/automations.sql`), however many readers wait, and one
//! look at the (nearly always empty) table of confirmation mails that subscribe steps owe.

use chrono::{DateTime, Utc};
use std::time::Duration;

use crate::domain::TenantId;
use crate::error::Result;
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
        if let Err(e) = tick(&db, &jobs, Utc::now()).await {
            tracing::warn!(error = ?e, "automation scheduler tick failed");
        }
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
            _ = tokio::time::sleep(TICK) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// One pass at the clock `now` (tests pass a later one to skip waits): every due step of every
/// live automation, until none is due. Returns the steps run.
#[tracing::instrument(skip_all)]
pub async fn tick(db: &Db, jobs: &Jobs, now: DateTime<Utc>) -> Result<u64> {
    // Periodic triggers first (a segment's new members, today's anniversaries): the readers they
    // let in are due at once, in the same pass.
    let to_check: Vec<(TenantId, AutomationId)> =
        sqlx::query_as("SELECT tenant_id, automation_id FROM automations_to_check($1)")
            .bind(now)
            .fetch_all(db.pool())
            .await?;
    for (tenant, automation) in to_check {
        let mut tx = db.tenant_tx(tenant).await?;
        let entered: i64 = sqlx::query_scalar("SELECT automation_check_trigger($1, $2, $3)")
            .bind(tenant)
            .bind(automation)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        if entered > 0 {
            tracing::info!(%tenant, %automation, entered, "readers entered an automation by its periodic trigger");
        }
    }
    let due: Vec<(TenantId, AutomationId)> = sqlx::query_as("SELECT tenant_id, automation_id FROM due_automations($1)")
        .bind(now)
        .fetch_all(db.pool())
        .await?;
    let mut total = 0u64;
    // Counted across the tick's automations: the statistics are the tables', not one's.
    let mut batches = 0u64;
    for (tenant, automation) in due {
        total += advance(db, jobs, tenant, automation, now, &mut batches).await?;
    }
    Ok(total)
}

/// Runs `automation`'s due steps batch by batch; a step that makes the next one due at once is
/// run in the next batch, so a reader goes through an email and a tag in one pass.
/// `batches` counts the tick's batches so far, for [`refresh_statistics`].
async fn advance(
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
    automation: AutomationId,
    now: DateTime<Utc>,
    batches: &mut u64,
) -> Result<u64> {
    let mut total = 0u64;
    let mut queued_any = false;
    loop {
        if batches.is_multiple_of(STATISTICS_EVERY) {
            refresh_statistics(db).await;
        }
        *batches += 1;
        let batch_started = std::time::Instant::now();
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
            // Mail goes out while later batches are still being moved.
            start_delivery(db, jobs, tenant, automation).await?;
        }
        if handled == 0 {
            break;
        }
    }
    if queued_any {
        tracing::debug!(%tenant, %automation, steps = total, "automation steps run");
    }
    Ok(total)
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
