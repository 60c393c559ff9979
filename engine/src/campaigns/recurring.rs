//! Recurring campaigns (seed 003): a weekly personalised digest and the like.
//!
//! A recurring campaign never sends itself. At each slot of its schedule the supervisor copies
//! it into an *edition*: an ordinary campaign with its own send log, fan-out, pacing ("spread
//! over N hours") and crash recovery, so "exactly once per reader per edition" is the one-off
//! engine's guarantee. `UNIQUE (parent_id, edition_slot)` and the parent's `last_edition_slot`
//! (moved in the same transaction) make each slot one edition however many supervisors race;
//! only the newest due slot is ever made, so a server that was down over several slots sends
//! one late edition, not one per missed slot.
//!
//! Slots are computed by Postgres (`recurrence_latest_slot` in `engine/sql/sending.sql`) from the time zone
//! database, so "Wednesday 13:00 Europe/Berlin" stays 13:00 local across daylight saving.
//!
//! Per-reader data: with `feed = api` the caller pushes a JSON object per reader before the
//! edition; the edition's fan-out moves it into the reader's send-log row (a resumed edition
//! renders the same data) and readers without data are skipped with the reason "no data for
//! this edition". With `feed = url` the sender fetches it per reader (see `feed_fetch`).

use chrono::{DateTime, Utc};

use super::store::{self, Campaign, CampaignStatus};
use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::jobs::Jobs;

pub use herald_types::{FeedSource, Recurrence};

/// Checks the time zone against Postgres's database (the one that computes the slots).
async fn check_tz(tx: &mut crate::infra::db::Tx, tz: &str) -> Result<()> {
    let known: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1)")
        .bind(tz.trim())
        .fetch_one(&mut **tx)
        .await?;
    if known { Ok(()) } else { Err(Error::invalid(format!("“{}” is not a time zone Herald knows.", tz.trim()))) }
}

/// Starts the schedule: the first edition is the first slot after now.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn start(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let current = store::get_in(&mut tx, tenant, id).await?;
    let Some(rec) = &current.recurrence else {
        return Err(Error::invalid("This campaign has no schedule."));
    };
    rec.validate()?;
    check_tz(&mut tx, &rec.tz).await?;
    super::readiness::check_ready(&mut tx, tenant, &current).await?;
    let started = store::transition(
        &mut tx,
        tenant,
        id,
        &[CampaignStatus::Draft],
        CampaignStatus::Recurring,
        "pause_reason = NULL, last_edition_slot = coalesce(recurrence_latest_slot(recurrence, now()), now())",
        |q| q,
    )
    .await?;
    let Some(campaign) = started else {
        return Err(Error::Conflict("This campaign is already running or was sent.".into()));
    };
    tx.commit().await?;
    Ok(campaign)
}

/// Stops the schedule (editions already sending go on); the campaign is a draft again.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn stop(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let stopped =
        store::transition(&mut tx, tenant, id, &[CampaignStatus::Recurring], CampaignStatus::Draft, "", |q| q).await?;
    let Some(campaign) = stopped else {
        store::get_in(&mut tx, tenant, id).await?;
        return Err(Error::Conflict("This campaign is not running on a schedule.".into()));
    };
    tx.commit().await?;
    Ok(campaign)
}

/// Makes the editions that are due at `now` and starts them. Returns the new editions' ids.
/// Public so tests can drive it with their own clock.
#[tracing::instrument(skip_all)]
pub async fn make_due_editions(db: &Db, jobs: &Jobs, now: DateTime<Utc>) -> Result<Vec<CampaignId>> {
    let due: Vec<(TenantId, CampaignId, DateTime<Utc>)> =
        sqlx::query_as("SELECT tenant_id, campaign_id, slot FROM due_editions($1)")
            .bind(now)
            .fetch_all(db.pool())
            .await?;
    let mut made = Vec::new();
    for (tenant, parent, slot) in due {
        if let Some(edition) = make_edition(db, tenant, parent, slot).await? {
            tracing::info!(%parent, %edition, %slot, "recurring campaign: edition started");
            jobs.kick_campaign(db, tenant, edition, false).await?;
            made.push(edition);
        }
    }
    Ok(made)
}

/// Copies the parent into the edition for `slot`, once. The parent's row lock serialises racing
/// supervisors; the loser sees the moved `last_edition_slot` and makes nothing.
async fn make_edition(
    db: &Db,
    tenant: TenantId,
    parent: CampaignId,
    slot: DateTime<Utc>,
) -> Result<Option<CampaignId>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let moved = sqlx::query(
        "UPDATE campaigns SET last_edition_slot = $3
         WHERE tenant_id = $1 AND id = $2 AND status = 'recurring' AND (last_edition_slot IS NULL OR last_edition_slot < $3)",
    )
    .bind(tenant)
    .bind(parent)
    .bind(slot)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if moved == 0 {
        return Ok(None);
    }
    let edition = CampaignId::new();
    let inserted = sqlx::query(
        "INSERT INTO campaigns (id, tenant_id, name, subject, preheader, identity_id, from_name, from_email, reply_to,
             list_ids, attribute_filter, segment_ids, exclude_segment_id, body_format, body, spread_hours, tracking, feed,
             feed_url, parent_id, edition_slot, status, started_at, heartbeat_at)
         SELECT $3, tenant_id, name || ' — ' || to_char($4 AT TIME ZONE coalesce(recurrence->>'tz', 'UTC'), 'YYYY-MM-DD'),
             subject, preheader, identity_id, from_name, from_email, reply_to, list_ids, attribute_filter, segment_ids,
             exclude_segment_id, body_format, body,
             spread_hours, tracking, feed, feed_url, id, $4, 'sending', now(), now()
         FROM campaigns WHERE tenant_id = $1 AND id = $2
         ON CONFLICT (parent_id, edition_slot) DO NOTHING",
    )
    .bind(tenant)
    .bind(parent)
    .bind(edition)
    .bind(slot)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok((inserted == 1).then_some(edition))
}

pub use herald_types::Edition;

#[tracing::instrument(skip_all, fields(%tenant, %parent))]
pub async fn editions(db: &Db, tenant: TenantId, parent: CampaignId) -> Result<Vec<Edition>> {
    let mut tx = db.tenant_tx(tenant).await?;
    store::get_in(&mut tx, tenant, parent).await?;
    // The latest 100 editions; a finished one reads the figures frozen when it ended (one row),
    // only one still sending (or frozen before the no-data count was kept) counts its send log.
    // This joined every edition's whole log before limiting: a daily edition to 100k readers
    // read 36M rows a view after a year.
    let rows = sqlx::query_as(
        "SELECT c.id, c.edition_slot AS slot, c.status, c.recipients,
                coalesce((f.final_counts -> 'by_status' ->> 'sent')::bigint, live.sent, 0) AS sent,
                coalesce((f.final_counts ->> 'skipped_no_data')::bigint, live.skipped_no_data, 0) AS skipped_no_data,
                coalesce((f.final_counts -> 'by_status' ->> 'failed')::bigint, live.failed, 0) AS failed
         FROM (SELECT * FROM campaigns WHERE tenant_id = $1 AND parent_id = $2 ORDER BY edition_slot DESC LIMIT 100) c
         LEFT JOIN campaign_stats f ON f.campaign_id = c.id AND f.tenant_id = c.tenant_id
         LEFT JOIN LATERAL (
             SELECT count(*) FILTER (WHERE s.status = 'sent') AS sent,
                    count(*) FILTER (WHERE s.status = 'skipped' AND s.reason = $3) AS skipped_no_data,
                    count(*) FILTER (WHERE s.status = 'failed') AS failed
             FROM sends s
             WHERE s.tenant_id = c.tenant_id AND s.campaign_id = c.id
               AND (f.final_counts IS NULL OR NOT f.final_counts ? 'skipped_no_data')
         ) live ON true
         ORDER BY c.edition_slot DESC",
    )
    .bind(tenant)
    .bind(parent)
    .bind(super::feed_fetch::NO_DATA)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

use herald_types::Rejected;
pub use herald_types::{FeedItem, FeedResult};

pub const MAX_FEED_ITEMS: usize = 10_000;
/// The reason of an item whose reader is not in the workspace (the single-reader route
/// answers 404 for it).
pub const NO_SUCH_READER: &str = "no such reader in this workspace";
const MAX_FEED_BYTES: usize = 64 * 1024;

/// Stores data for readers' next edition (replacing what was there). Items with an unknown
/// reader or a non-object are reported with their index; the rest are stored.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn put_feed(
    db: &Db,
    tenant: TenantId,
    role: Role,
    campaign: CampaignId,
    items: &[FeedItem],
) -> Result<FeedResult> {
    role.require(Role::Author)?;
    if items.len() > MAX_FEED_ITEMS {
        return Err(Error::invalid(format!("Send at most {MAX_FEED_ITEMS} readers' data per request.")));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let c = store::get_in(&mut tx, tenant, campaign).await?;
    if c.recurrence.is_none() || c.feed != FeedSource::Api {
        return Err(Error::invalid(
            "This campaign takes no pushed data: make it recurring with per-reader data from the API.",
        ));
    }
    let mut result = FeedResult::default();
    let (mut ids, mut emails, mut datas, mut idx) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, item) in items.iter().enumerate() {
        if !item.data.is_object() {
            result.rejected.push(Rejected { index: i, reason: "data must be a JSON object".into() });
            continue;
        }
        if item.data.to_string().len() > MAX_FEED_BYTES {
            result.rejected.push(Rejected { index: i, reason: "data is larger than 64 KB".into() });
            continue;
        }
        let r = item.reader.trim();
        ids.push(r.parse::<i64>().ok());
        emails.push(r.to_lowercase());
        datas.push(item.data.clone());
        idx.push(i as i64);
    }
    let stored: Vec<i64> = sqlx::query_scalar(
        "WITH input AS (
             SELECT * FROM unnest($3::bigint[], $4::text[], $5::jsonb[], $6::bigint[]) AS x(rid, email, data, idx)
         ), matched AS (
             SELECT DISTINCT ON (r.id) r.id, x.data, x.idx FROM input x
             JOIN readers r ON r.tenant_id = $1 AND (r.id = x.rid OR (x.rid IS NULL AND lower(r.email) = x.email))
             ORDER BY r.id, x.idx DESC
         ), upserted AS (
             INSERT INTO campaign_feed (tenant_id, campaign_id, reader_id, data)
             SELECT $1, $2, id, data FROM matched
             ON CONFLICT (campaign_id, reader_id) DO UPDATE SET data = excluded.data, updated_at = now()
             RETURNING reader_id
         )
         SELECT m.idx FROM matched m JOIN upserted u ON u.reader_id = m.id",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(&ids)
    .bind(&emails)
    .bind(&datas)
    .bind(&idx)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    result.stored = stored.len() as u64;
    let stored: std::collections::HashSet<i64> = stored.into_iter().collect();
    for i in idx {
        if !stored.contains(&i) {
            result.rejected.push(Rejected { index: i as usize, reason: NO_SUCH_READER.into() });
        }
    }
    result.rejected.sort_by_key(|r| r.index);
    Ok(result)
}

/// How many readers have data waiting for the next edition.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn pending_feed(db: &Db, tenant: TenantId, campaign: CampaignId) -> Result<i64> {
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query_scalar("SELECT count(*) FROM campaign_feed WHERE tenant_id = $1 AND campaign_id = $2")
        .bind(tenant)
        .bind(campaign)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weekly() -> Recurrence {
        Recurrence {
            every: "week".into(),
            weekdays: vec![3],
            month_day: None,
            time: "13:00".into(),
            tz: "Europe/Berlin".into(),
        }
    }

    #[test]
    fn validates_schedules() {
        assert!(weekly().validate().is_ok());
        assert!(Recurrence { weekdays: vec![], ..weekly() }.validate().is_err());
        assert!(Recurrence { weekdays: vec![8], ..weekly() }.validate().is_err());
        assert!(Recurrence { time: "25:00".into(), ..weekly() }.validate().is_err());
        assert!(Recurrence { every: "month".into(), month_day: Some(31), ..weekly() }.validate().is_err());
        assert!(Recurrence { every: "month".into(), month_day: Some(1), ..weekly() }.validate().is_ok());
        assert!(Recurrence { tz: "Europe/Berlin'; --".into(), ..weekly() }.validate().is_err());
    }

    #[test]
    fn describes_schedules() {
        assert_eq!(weekly().describe(), "Every Wednesday at 13:00 (Europe/Berlin)");
    }

    #[test]
    fn feed_urls_are_http() {
        let input = |url: &str| super::super::store::CampaignInput {
            feed: FeedSource::Url,
            feed_url: url.into(),
            ..Default::default()
        };
        assert!(super::super::store::validate_feed_url(&input("ftp://x/{email}")).is_err());
        assert!(super::super::store::validate_feed_url(&input("https://data.example/feed?e={email}")).is_ok());
    }
}
