//! A send that outlives the workspace's queue age: its rows' first claims aged past the limit
//! as they are made, and some of its readers refused once with a 4xx, so that a row expiring
//! after a single attempt would show.

use std::time::{Duration, Instant};

use herald_engine::{CampaignId, Db, TenantId};
use sqlx::PgPool;

use super::fixtures::{create_campaign, insert_list};
use crate::smtp_sink::{FaultAction, FaultRule, Faults};

/// A send that outlives the workspace's queue age: 40 readers of a list of its own, every other
/// one of the first twenty refused once with a 4xx ([`refused_once`]), and each row's first
/// claim moved past the workspace's limit as soon as it is made ([`age_claimed_rows`]), as a
/// send days long leaves a row that failed early on. Returns it, its readers and the refused.
pub(super) async fn soft_failure_campaign(
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
pub(super) fn refused_once(faults: Faults, refused: &[String]) -> Faults {
    refused.iter().fold(faults, |f, address| {
        f.with_rule(FaultRule::new(address.clone(), FaultAction::try_again_later()).times(1))
    })
}

/// Whether each refused reader's first attempt is over (its row back in the queue with the
/// attempt counted, or further).
pub(super) async fn soft_refusals_done(
    owner: &PgPool,
    campaign: CampaignId,
    refused: &[String],
) -> anyhow::Result<bool> {
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
pub(super) async fn age_claimed_rows(owner: PgPool, tenant: TenantId, campaign: CampaignId, until: Instant) -> u64 {
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
