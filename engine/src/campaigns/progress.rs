//! What the campaign page shows while sending and after: counts per status, the current rate
//! and an ETA, failures with their reasons, and why readers were skipped.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::domain::{CampaignId, TenantId};
use crate::error::Result;
use crate::infra::db::Db;
use herald_types::{CampaignStatus, SendStatus};

pub use herald_types::{Failure, Progress, Report, SkipCount};

/// Live counts scan the campaign's send log; a finished send reads the figures frozen when it
/// ended (`campaign_stats.final_counts`), so a 1M-recipient report costs one row.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn progress(db: &Db, tenant: TenantId, campaign: CampaignId) -> Result<Progress> {
    let mut tx = db.tenant_tx(tenant).await?;
    #[allow(clippy::type_complexity)]
    let (status, pause_reason, fanout_done, recipients, started_at, finished_at, frozen): (
        CampaignStatus,
        Option<String>,
        bool,
        i64,
        Option<DateTime<Utc>>,
        Option<DateTime<Utc>>,
        Option<sqlx::types::Json<FrozenCounts>>,
    ) = sqlx::query_as(
        "SELECT c.status, c.pause_reason, c.fanout_done, c.recipients, c.started_at, c.finished_at, s.final_counts
         FROM campaigns c LEFT JOIN campaign_stats s ON s.campaign_id = c.id
         WHERE c.tenant_id = $1 AND c.id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(crate::Error::NotFound)?;
    // A cancelled send's figures are final once nothing of it is queued or in flight (a row
    // given back after the cancel ends cancelled); the first look after that freezes them, so a
    // cancelled campaign does not scan its send log on every view for ever.
    if status == CampaignStatus::Cancelled && frozen.is_none() {
        let settled: bool = sqlx::query_scalar(
            "SELECT NOT EXISTS (SELECT 1 FROM sends WHERE tenant_id = $1 AND campaign_id = $2 AND status IN ('queued', 'sending'))",
        )
        .bind(tenant)
        .bind(campaign)
        .fetch_one(&mut *tx)
        .await?;
        if settled {
            super::tally::snapshot_final(&mut tx, tenant, campaign).await?;
        }
    }
    let frozen = frozen.filter(|_| status.is_finished()).map(|j| j.0);
    let (counts, hard_bounces, ambiguous, recent) = match frozen {
        Some(f) => (f.by_status.into_iter().collect::<Vec<_>>(), f.hard_bounces, f.ambiguous, 0),
        None => {
            // One pass over the campaign's send log (it was two: the counts, then the bounces).
            let rows: Vec<LiveCounts> = sqlx::query_as(
                "SELECT status, count(*) AS n, count(*) FILTER (WHERE hard_bounce) AS hard_bounces,
                        coalesce(sum(ambiguous), 0)::bigint AS ambiguous,
                        count(*) FILTER (WHERE status = 'sent' AND sent_at > now() - interval '10 seconds') AS recent
                 FROM sends WHERE tenant_id = $1 AND campaign_id = $2 GROUP BY status",
            )
            .bind(tenant)
            .bind(campaign)
            .fetch_all(&mut *tx)
            .await?;
            let sum = |f: fn(&LiveCounts) -> i64| rows.iter().map(f).sum::<i64>();
            let totals = (sum(|r| r.hard_bounces), sum(|r| r.ambiguous), sum(|r| r.recent));
            (rows.iter().map(|r| (r.status, r.n)).collect(), totals.0, totals.1, totals.2)
        }
    };
    tx.commit().await?;
    let mut p = Progress {
        status,
        pause_reason,
        fanout_done,
        recipients,
        hard_bounces,
        ambiguous,
        started_at,
        finished_at,
        rate: recent as f64 / 10.0,
        ..Default::default()
    };
    for (status, n) in counts {
        *p.count_mut(status) = n;
    }
    if p.rate > 0.0 && p.status == CampaignStatus::Sending {
        p.eta_seconds = Some(((p.queued + p.sending) as f64 / p.rate).ceil() as i64);
    }
    Ok(p)
}

/// How old the figures a view of a campaign still sending may be (see [`view`]).
const VIEW_MAX_AGE_SECS: f64 = 2.0;

/// [`progress`] as a page view or an API read wants it. For a campaign still sending, counting
/// its send log is a scan (722 ms at 1M rows, `herald bench scans`): every viewer shares one
/// count of at most [`VIEW_MAX_AGE_SECS`], and while one viewer recounts, the others get the
/// last count. Anything not sending is [`progress`] itself (frozen figures, or a paused send).
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn view(db: &Db, tenant: TenantId, campaign: CampaignId) -> Result<Progress> {
    let mut tx = db.tenant_tx(tenant).await?;
    let (status, last, fresh): (CampaignStatus, Option<sqlx::types::Json<Progress>>, bool) = sqlx::query_as(
        "SELECT c.status, s.live_progress, coalesce(s.live_at > now() - make_interval(secs => $3), false)
         FROM campaigns c LEFT JOIN campaign_stats s ON s.campaign_id = c.id
         WHERE c.tenant_id = $1 AND c.id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(VIEW_MAX_AGE_SECS)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(crate::Error::NotFound)?;
    if status != CampaignStatus::Sending {
        tx.commit().await?;
        return progress(db, tenant, campaign).await;
    }
    if let (Some(last), true) = (&last, fresh) {
        tx.commit().await?;
        return Ok(last.0.clone());
    }
    // This viewer recounts, unless another one is at it (for at most 30 s, in case it died).
    let recount = sqlx::query_scalar::<_, bool>(
        "INSERT INTO campaign_stats AS s (campaign_id, tenant_id, live_refresh_from) VALUES ($2, $1, now())
         ON CONFLICT (campaign_id) DO UPDATE SET live_refresh_from = now()
         WHERE s.live_refresh_from IS NULL OR s.live_refresh_from < now() - interval '30 seconds'
         RETURNING true",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_optional(&mut *tx)
    .await?
    .is_some();
    tx.commit().await?;
    if let (Some(last), false) = (&last, recount) {
        return Ok(last.0.clone());
    }
    let p = progress(db, tenant, campaign).await?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE campaign_stats SET live_progress = $3, live_at = now(), live_refresh_from = NULL
         WHERE tenant_id = $1 AND campaign_id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(sqlx::types::Json(&p))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(p)
}

/// One status's row of the live count.
#[derive(sqlx::FromRow)]
struct LiveCounts {
    status: SendStatus,
    n: i64,
    hard_bounces: i64,
    ambiguous: i64,
    recent: i64,
}

/// `campaign_stats.final_counts`, written by `tally::snapshot_final`.
#[derive(Debug, Deserialize)]
struct FrozenCounts {
    by_status: std::collections::HashMap<SendStatus, i64>,
    hard_bounces: i64,
    ambiguous: i64,
}

#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn report(db: &Db, tenant: TenantId, campaign: CampaignId) -> Result<Report> {
    let progress = view(db, tenant, campaign).await?;
    let mut tx = db.tenant_tx(tenant).await?;
    let failures = sqlx::query_as(
        "SELECT email, status, reason, attempts, hard_bounce, updated_at FROM sends
         WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'failed' ORDER BY updated_at DESC LIMIT 200",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_all(&mut *tx)
    .await?;
    let skipped = sqlx::query_as(
        "SELECT coalesce(reason, status) AS reason, count(*) AS count FROM sends
         WHERE tenant_id = $1 AND campaign_id = $2 AND status IN ('skipped', 'expired', 'cancelled')
         GROUP BY 1 ORDER BY 2 DESC",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Report { progress, failures, skipped })
}
