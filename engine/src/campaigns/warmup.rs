//! Warm-up: a new workspace's campaigns reach at most `tenants.campaign_mail_per_day` readers in
//! any 24 hours (10,000 unless an operator changed it; NULL for no limit), so a fresh sign-up
//! cannot turn the installation's reputation into a spam cannon on its first day.
//!
//! Counted as the recipients of the campaigns started in the last 24 hours, plus the mail
//! automations queued (`automation_mail_hours`; automations hold their own mail back at the
//! limit, in the scheduler's batch). Checked twice: an estimate when a send is asked for (a 422
//! that says what to do), and exactly as the fan-out writes each chunk, in the chunk's own
//! transaction, so a scheduled send or a recurring edition that would go over is paused before
//! delivery can claim a row of it. Resuming is refused while the campaign would still go over.

use crate::domain::{CampaignId, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};

/// The workspace's limit, and the readers its campaigns started in the last 24 hours reached,
/// other than `except`.
async fn usage(tx: &mut Tx, tenant: TenantId, except: CampaignId) -> Result<Option<(i64, i64)>> {
    let (limit, used): (Option<i32>, i64) = sqlx::query_as(
        "SELECT t.campaign_mail_per_day,
                (SELECT coalesce(sum(c.recipients), 0)::bigint FROM campaigns c
                 WHERE c.tenant_id = $1 AND c.started_at > now() - interval '1 day' AND c.id <> $2)
                + (SELECT coalesce(sum(h.mails), 0)::bigint FROM automation_mail_hours h
                   WHERE h.tenant_id = $1 AND h.hour > now() - interval '25 hours')
         FROM tenants t WHERE t.id = $1",
    )
    .bind(tenant)
    .bind(except)
    .fetch_one(&mut **tx)
    .await?;
    Ok(limit.map(|l| (i64::from(l), used)))
}

/// `this_send` says how big the send is ("this campaign reaches 1,200 readers").
fn refusal(limit: i64, used: i64, this_send: &str) -> String {
    format!(
        "This workspace is warming up: its campaigns may reach {limit} readers a day, {used} were mailed in the \
         last 24 hours, and {this_send}. Send to a smaller list, wait a day, or ask the operator to raise the limit."
    )
}

/// Before a send starts: the readers the lists hold (an upper bound of the audience) must fit.
/// Counting stops past the allowance, so a large list costs no more than the limit.
pub(super) async fn check_estimate(
    tx: &mut Tx,
    tenant: TenantId,
    campaign: CampaignId,
    lists: &[crate::domain::ListId],
) -> Result<()> {
    let Some((limit, used)) = usage(tx, tenant, campaign).await? else { return Ok(()) };
    let allowance = (limit - used).max(0);
    let audience: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT DISTINCT s.reader_id FROM subscriptions s JOIN readers r ON r.id = s.reader_id
                               WHERE s.tenant_id = $1 AND s.list_id = ANY($2) AND s.status = 'confirmed'
                                 AND r.status = 'active'
                               LIMIT $3) x",
    )
    .bind(tenant)
    .bind(lists)
    .bind(allowance + 1)
    .fetch_one(&mut **tx)
    .await?;
    if audience > allowance {
        let this_send = format!("the chosen lists hold more than the {allowance} readers left");
        Err(Error::invalid(refusal(limit, used, &this_send)))
    } else {
        Ok(())
    }
}

/// In a fan-out chunk's transaction, after the campaign's recipients grew: pauses the campaign
/// (if it is sending) when it has gone over. Returns whether it did.
pub(super) async fn pause_if_over(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<bool> {
    let Some((limit, used)) = usage(tx, tenant, campaign).await? else { return Ok(false) };
    let mine: i64 = sqlx::query_scalar("SELECT recipients FROM campaigns WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(campaign)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(Error::NotFound)?;
    if used + mine <= limit {
        return Ok(false);
    }
    use super::store::CampaignStatus::{Paused, Sending};
    let reason = refusal(limit, used, &format!("this campaign reaches {mine}"));
    let paused =
        super::store::transition(tx, tenant, campaign, &[Sending], Paused, "pause_reason = $5", |q| q.bind(reason))
            .await?
            .is_some();
    if paused {
        tracing::warn!(%campaign, limit, used, recipients = mine, "campaign paused by the warm-up limit");
    }
    Ok(paused)
}

/// Before a paused campaign resumes: all its recipients must fit.
pub(super) async fn check_resume(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<()> {
    let Some((limit, used)) = usage(tx, tenant, campaign).await? else { return Ok(()) };
    let mine: i64 = sqlx::query_scalar("SELECT recipients FROM campaigns WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(campaign)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(Error::NotFound)?;
    if used + mine > limit {
        Err(Error::invalid(refusal(limit, used, &format!("this campaign reaches {mine}"))))
    } else {
        Ok(())
    }
}

/// The operator's setting (`herald admin set-limits --campaign-mail-per-day N|unlimited`).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn set_limit(db: &Db, tenant: TenantId, per_day: Option<i32>) -> Result<()> {
    if per_day.is_some_and(|n| n < 0) {
        return Err(Error::invalid("The limit cannot be negative."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("UPDATE tenants SET campaign_mail_per_day = $2 WHERE id = $1")
        .bind(tenant)
        .bind(per_day)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}
