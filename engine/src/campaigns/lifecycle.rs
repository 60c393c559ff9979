//! A campaign's sends: start now, schedule, unschedule, pause, resume, cancel, retry the
//! failures, and the engine's own moves (finish when nothing is left; pause an automation whose
//! step cannot send). Every change is one compare-and-set UPDATE whose WHERE names the expected
//! state (`store::transition`), so a double click, two tabs or two API calls start one send
//! (seed 002, layer 2). The features it calls (approval's rule, warm-up, recurring editions, the
//! tallies) do not call it back.

use chrono::{DateTime, Utc};

use super::readiness;
use super::store::{self, Campaign, CampaignStatus};
use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::jobs::Jobs;

/// Starts sending now. Exactly one caller wins the draft/scheduled → sending transition; the
/// others get 409. The fan-out and delivery jobs are enqueued after the commit; should the
/// process die in between, the supervisor sees a sending campaign with no heartbeat and
/// enqueues them itself.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn send_now(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval_rule::gate(&mut tx, tenant, role).await?;
    let current = store::get_in(&mut tx, tenant, id).await?;
    if current.recurrence.is_some() {
        // "Send" on a recurring campaign starts its schedule; each slot sends an edition.
        tx.commit().await?;
        return super::recurring::start(db, tenant, role, id).await;
    }
    readiness::check_ready(&mut tx, tenant, &current).await?;
    use CampaignStatus::{Draft, Scheduled, Sending};
    let started = store::transition(
        &mut tx,
        tenant,
        id,
        &[Draft, Scheduled],
        Sending,
        "started_at = now(), heartbeat_at = now(), pause_reason = NULL",
        |q| q,
    )
    .await?;
    let Some(campaign) = started else {
        return Err(Error::Conflict("This campaign is already sending or was sent.".into()));
    };
    tx.commit().await?;
    jobs.kick_campaign(db, tenant, id, false).await?;
    Ok(campaign)
}

/// Schedules a draft (or moves a schedule). `at` must be in the future; `tz` is kept so the
/// editor shows the time as the author chose it.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn schedule(
    db: &Db,
    tenant: TenantId,
    role: Role,
    id: CampaignId,
    at: DateTime<Utc>,
    tz: &str,
) -> Result<Campaign> {
    role.require(Role::Author)?;
    if at <= Utc::now() {
        return Err(Error::invalid("Choose a time in the future."));
    }
    if tz.is_empty() || tz.len() > 64 || tz.chars().any(char::is_control) {
        return Err(Error::invalid("Unknown time zone."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval_rule::gate(&mut tx, tenant, role).await?;
    let current = store::get_in(&mut tx, tenant, id).await?;
    readiness::check_ready(&mut tx, tenant, &current).await?;
    use CampaignStatus::{Draft, Scheduled};
    let row = store::transition(
        &mut tx,
        tenant,
        id,
        &[Draft, Scheduled],
        Scheduled,
        "scheduled_at = $5, schedule_tz = $6",
        |q| q.bind(at).bind(tz),
    )
    .await?;
    let c = row.ok_or_else(|| Error::Conflict("This campaign is already sending or was sent.".into()))?;
    tx.commit().await?;
    Ok(c)
}

/// [`transition`] for the lifecycle calls: 404 when the campaign does not exist, 409 with
/// `conflict` when it is in another state. Returns the open transaction for follow-up writes.
async fn transition_or_conflict<'q>(
    db: &Db,
    tenant: TenantId,
    id: CampaignId,
    (from, to): (&'q [CampaignStatus], CampaignStatus),
    (also, bind_also): (&str, impl FnOnce(store::CampaignQuery<'q>) -> store::CampaignQuery<'q>),
    conflict: &str,
) -> Result<(Campaign, Tx)> {
    let mut tx = db.tenant_tx(tenant).await?;
    match store::transition(&mut tx, tenant, id, from, to, also, bind_also).await? {
        Some(c) => Ok((c, tx)),
        None => {
            store::get_in(&mut tx, tenant, id).await?;
            Err(Error::Conflict(conflict.to_string()))
        }
    }
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn unschedule(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, mut tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Scheduled], CampaignStatus::Draft),
        ("scheduled_at = NULL", |q| q),
        "This campaign is not scheduled.",
    )
    .await?;
    super::approval_rule::forget(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(c)
}

/// Stops new claims at once: the claim statement requires `status = 'sending'`.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn pause(db: &Db, tenant: TenantId, role: Role, id: CampaignId, reason: &str) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Sending], CampaignStatus::Paused),
        ("pause_reason = $5", |q| q.bind(reason)),
        "Only a sending campaign can be paused.",
    )
    .await?;
    tx.commit().await?;
    Ok(c)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn resume(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval_rule::gate(&mut tx, tenant, role).await?;
    crate::account_limits::require_not_suspended(&mut tx, tenant).await?;
    super::warmup::check_resume(&mut tx, tenant, id).await?;
    tx.commit().await?;
    let (c, tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Paused], CampaignStatus::Sending),
        ("pause_reason = NULL, heartbeat_at = now()", |q| q),
        "Only a paused campaign can be resumed.",
    )
    .await?;
    tx.commit().await?;
    jobs.kick_campaign(db, tenant, id, c.fanout_done).await?;
    Ok(c)
}

/// Ends a send: queued rows (and those held for an A/B test's winner) become `cancelled`; messages already handed to a connection finish.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn cancel(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, mut tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Sending, CampaignStatus::Paused], CampaignStatus::Cancelled),
        ("finished_at = now()", |q| q),
        "Only a sending or paused campaign can be cancelled.",
    )
    .await?;
    sqlx::query(
        "UPDATE sends SET status = 'cancelled', updated_at = now() WHERE tenant_id = $1 AND campaign_id = $2 AND status IN ('queued', 'held')",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    // No frozen figures here: messages in flight still finish after this.
    tx.commit().await?;
    Ok(c)
}

/// Puts failed messages (not hard bounces, which are suppressed) back in the queue and sends
/// again. Returns how many were requeued.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn retry_failed(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: CampaignId) -> Result<u64> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    // The campaign row lock orders this against `finish_if_done` (which takes it too): either
    // the send finished first and this reopens it, or these rows are queued before it looks.
    store::lock_in(&mut tx, tenant, id).await?;
    let c = store::get_in(&mut tx, tenant, id).await?;
    if !matches!(c.status, CampaignStatus::Sent | CampaignStatus::Sending | CampaignStatus::Paused) {
        return Err(Error::Conflict("Only a campaign that has sent can retry its failures.".into()));
    }
    let n = sqlx::query(
        "UPDATE sends SET status = 'queued', attempts = 0, next_attempt_at = now(), reason = NULL,
                first_claimed_at = NULL, updated_at = now()
         WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'failed' AND NOT hard_bounce",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n > 0 && c.status == CampaignStatus::Sent {
        super::tally::reopen(&mut tx, tenant, id, n as i64).await?;
        use CampaignStatus::{Sending, Sent};
        store::transition(&mut tx, tenant, id, &[Sent], Sending, "finished_at = NULL, heartbeat_at = now()", |q| q)
            .await?;
    }
    tx.commit().await?;
    if n > 0 {
        jobs.kick_campaign(db, tenant, id, true).await?;
    }
    Ok(n)
}

/// A step's campaign paused itself (its template broke, its mail kept failing, the bounce rate):
/// the whole automation pauses, saying why, so nobody moves on towards mail that cannot go out.
/// False when `campaign` is not an automation's step.
pub(crate) async fn pause_automation_of(db: &Db, tenant: TenantId, campaign: CampaignId, reason: &str) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    let automation: Option<Option<herald_types::AutomationId>> =
        sqlx::query_scalar("SELECT automation_id FROM campaigns WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(campaign)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(Some(automation)) = automation else { return Ok(false) };
    sqlx::query(
        "UPDATE automations SET status = 'paused', pause_reason = $3, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status = 'live'",
    )
    .bind(tenant)
    .bind(automation)
    .bind(reason)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'paused', pause_reason = $3, updated_at = now()
         WHERE tenant_id = $1 AND automation_id = $2 AND status = 'sending'",
    )
    .bind(tenant)
    .bind(automation)
    .bind(reason)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::warn!(%automation, reason, "automation paused itself");
    Ok(true)
}

/// sending → sent, once the fan-out finished and no row is queued, held for an A/B test's
/// winner, or in flight. "Done" is this
/// condition, never "the last claim came back empty" (listmonk #1931).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub(crate) async fn finish_if_done(db: &Db, tenant: TenantId, id: CampaignId) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    // Idle loops ask this several times a second: look first without the lock.
    let looks_done: Option<bool> = sqlx::query_scalar(
        "SELECT c.status = 'sending' AND c.fanout_done AND c.automation_id IS NULL
                AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'held', 'sending'))
         FROM campaigns c WHERE c.tenant_id = $1 AND c.id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    if looks_done != Some(true) {
        tx.commit().await?;
        return Ok(false);
    }
    // Then lock, and look again: the check below runs on a snapshot taken after the lock, so it
    // sees rows a concurrent "retry failed" queued before releasing the lock (an UPDATE's
    // re-check after waiting for a lock would reuse its older snapshot for the NOT EXISTS).
    store::lock_in(&mut tx, tenant, id).await?;
    let n = sqlx::query(
        "UPDATE campaigns c SET status = 'sent', finished_at = now(), updated_at = now()
         WHERE c.tenant_id = $1 AND c.id = $2 AND c.status = 'sending' AND c.fanout_done AND c.automation_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'held', 'sending'))",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n > 0 {
        super::tally::snapshot_final(&mut tx, tenant, id).await?;
    }
    tx.commit().await?;
    Ok(n > 0)
}
