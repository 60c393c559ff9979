//! What the stats pages and the API read: every figure from a rollup row (campaign_stats,
//! campaign_stats_hourly, campaign_domain_stats, campaign_links, audience_daily), so a page costs
//! a handful of index reads however many recipients and events a campaign has. The event log
//! itself is only read for one reader's history and for the streamed export.

use chrono::{DateTime, NaiveDate, Utc};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::audience::export::CsvChunks;
use crate::domain::{CampaignId, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use herald_types::{CampaignStatus, TrackingMode};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, sqlx::FromRow)]
pub struct Counters {
    pub sent: i64,
    pub failed: i64,
    pub delivered: i64,
    pub hard_bounces: i64,
    pub soft_bounces: i64,
    pub complaints: i64,
    pub unsubscribes: i64,
    pub opens: i64,
    pub unique_opens: i64,
    pub prefetch_opens: i64,
    pub clicks: i64,
    pub unique_clicks: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, sqlx::FromRow)]
pub struct HourPoint {
    pub hour: DateTime<Utc>,
    pub opens: i64,
    pub unique_opens: i64,
    pub clicks: i64,
    pub unique_clicks: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, sqlx::FromRow)]
pub struct LinkStat {
    pub url: String,
    pub clicks: i64,
    pub unique_clicks: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, sqlx::FromRow)]
pub struct DomainStat {
    pub domain: String,
    pub sent: i64,
    pub failed: i64,
    pub bounced: i64,
    pub complaints: i64,
    pub unique_opens: i64,
    pub unique_clicks: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CampaignStats {
    pub campaign_id: CampaignId,
    pub name: String,
    pub status: CampaignStatus,
    pub tracking: TrackingMode,
    pub recipients: i64,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub counters: Counters,
    pub timeline: Vec<HourPoint>,
    pub top_links: Vec<LinkStat>,
    /// The 10 domains with the most messages.
    pub domains: Vec<DomainStat>,
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn campaign(db: &Db, tenant: TenantId, id: CampaignId) -> Result<CampaignStats> {
    let mut tx = db.tenant_tx(tenant).await?;
    #[allow(clippy::type_complexity)]
    let (name, status, tracking, recipients, started_at, finished_at): (
        String,
        CampaignStatus,
        TrackingMode,
        i64,
        Option<DateTime<Utc>>,
        Option<DateTime<Utc>>,
    ) = sqlx::query_as(
        "SELECT name, status, tracking, recipients, started_at, finished_at FROM campaigns WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    let counters: Counters = sqlx::query_as(
        "SELECT sent, failed, delivered, hard_bounces, soft_bounces, complaints, unsubscribes, opens, unique_opens,
                prefetch_opens, clicks, unique_clicks
         FROM campaign_stats WHERE tenant_id = $1 AND campaign_id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?
    .unwrap_or_default();
    // At most two weeks of hours: a chart of every hour since a send years ago says nothing.
    let timeline = sqlx::query_as(
        "SELECT hour, opens, unique_opens, clicks, unique_clicks FROM (
             SELECT * FROM campaign_stats_hourly WHERE tenant_id = $1 AND campaign_id = $2 ORDER BY hour LIMIT 336) h
         ORDER BY hour",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    let top_links = sqlx::query_as(
        "SELECT url, clicks, unique_clicks FROM campaign_links WHERE tenant_id = $1 AND campaign_id = $2
         ORDER BY clicks DESC, id LIMIT 10",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    let domains = sqlx::query_as(
        "SELECT domain, sent, failed, bounced, complaints, unique_opens, unique_clicks FROM campaign_domain_stats
         WHERE tenant_id = $1 AND campaign_id = $2 ORDER BY sent + failed DESC, domain LIMIT 10",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(CampaignStats {
        campaign_id: id,
        name,
        status,
        tracking,
        recipients,
        started_at,
        finished_at,
        counters,
        timeline,
        top_links,
        domains,
    })
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, sqlx::FromRow)]
pub struct DayPoint {
    pub day: NaiveDate,
    pub subscribes: i64,
    pub unsubscribes: i64,
}

pub use herald_types::RecentCampaign;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Dashboard {
    /// The last 90 days (days without changes are absent).
    pub growth: Vec<DayPoint>,
    pub recent: Vec<RecentCampaign>,
    /// Campaign mail of the last 30 days.
    pub sent_30d: i64,
    pub bounces_30d: i64,
    pub complaints_30d: i64,
    /// Readers who may be mailed (active), and subscriptions by state over every list (the
    /// lists' kept counts: the same cost at ten readers or ten million).
    pub readers: i64,
    pub confirmed: i64,
    pub unconfirmed: i64,
    pub lists: i64,
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn dashboard(db: &Db, tenant: TenantId) -> Result<Dashboard> {
    let mut tx = db.tenant_tx(tenant).await?;
    let growth = sqlx::query_as(
        "SELECT day, subscribes, unsubscribes FROM audience_daily
         WHERE tenant_id = $1 AND day > (now() AT TIME ZONE 'UTC')::date - 90 ORDER BY day",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    let recent = sqlx::query_as(
        "SELECT c.id, c.name, c.finished_at, coalesce(s.sent, 0) AS sent, coalesce(s.unique_opens, 0) AS unique_opens,
                coalesce(s.unique_clicks, 0) AS unique_clicks
         FROM campaigns c LEFT JOIN campaign_stats s ON s.campaign_id = c.id
         WHERE c.tenant_id = $1 AND c.status IN ('sending', 'paused', 'sent', 'cancelled') AND c.automation_id IS NULL
         ORDER BY c.started_at DESC NULLS LAST LIMIT 6",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    let (sent_30d, bounces_30d, complaints_30d): (i64, i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(s.sent), 0)::bigint, coalesce(sum(s.hard_bounces), 0)::bigint, coalesce(sum(s.complaints), 0)::bigint
         FROM campaigns c JOIN campaign_stats s ON s.campaign_id = c.id
         WHERE c.tenant_id = $1 AND c.started_at > now() - interval '30 days'",
    )
    .bind(tenant)
    .fetch_one(&mut *tx)
    .await?;
    let (readers, confirmed, unconfirmed, lists): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM readers WHERE tenant_id = $1 AND status = 'active'),
                coalesce((SELECT sum(c.n) FROM lists l JOIN list_counts c ON c.list_id = l.id
                          WHERE l.tenant_id = $1 AND c.status = 'confirmed'), 0)::bigint,
                coalesce((SELECT sum(c.n) FROM lists l JOIN list_counts c ON c.list_id = l.id
                          WHERE l.tenant_id = $1 AND c.status = 'unconfirmed'), 0)::bigint,
                (SELECT count(*) FROM lists WHERE tenant_id = $1)",
    )
    .bind(tenant)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Dashboard { growth, recent, sent_30d, bounces_30d, complaints_30d, readers, confirmed, unconfirmed, lists })
}

/// Messages sent, unique opens and unique clicks of each of `campaigns` that has counts (one
/// query for a list page, not one per row).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn engagement(
    db: &Db,
    tenant: TenantId,
    campaigns: &[CampaignId],
) -> Result<std::collections::HashMap<CampaignId, (i64, i64, i64)>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows: Vec<(CampaignId, i64, i64, i64)> = sqlx::query_as(
        "SELECT campaign_id, sent, unique_opens, unique_clicks FROM campaign_stats
         WHERE tenant_id = $1 AND campaign_id = ANY($2)",
    )
    .bind(tenant)
    .bind(campaigns)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(|(id, sent, opens, clicks)| (id, (sent, opens, clicks))).collect())
}

pub use herald_types::ReaderEvent;

/// One reader's last 200 events: messages sent, and what followed.
#[tracing::instrument(skip_all, fields(%tenant, %reader))]
pub async fn reader_events(db: &Db, tenant: TenantId, reader: i64) -> Result<Vec<ReaderEvent>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(
        "SELECT at, kind, campaign_id, campaign_name, url, detail FROM (
             SELECT e.at, e.kind, e.campaign_id, c.name AS campaign_name, l.url, e.detail
             FROM events e LEFT JOIN campaigns c ON c.id = e.campaign_id LEFT JOIN campaign_links l ON l.id = e.link_id
             WHERE e.tenant_id = $1 AND e.reader_id = $2
             UNION ALL
             SELECT coalesce(s.sent_at, s.updated_at), CASE WHEN s.status = 'sent' THEN 'sent' ELSE s.status END,
                    s.campaign_id, c.name, NULL, s.reason
             FROM sends s JOIN campaigns c ON c.id = s.campaign_id
             WHERE s.tenant_id = $1 AND s.reader_id = $2 AND s.status IN ('sent', 'failed', 'skipped', 'expired')
         ) x ORDER BY at DESC LIMIT 200",
    )
    .bind(tenant)
    .bind(reader)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Streams a campaign's events as CSV (`at,event,email,url,detail`) in chunks, so a 10M-event
/// export never sits in memory. Anonymous events have no email.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn stream_events_csv(
    db: &Db,
    tenant: TenantId,
    campaign: CampaignId,
    out: mpsc::Sender<Vec<u8>>,
) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM campaigns WHERE tenant_id = $1 AND id = $2)")
        .bind(tenant)
        .bind(campaign)
        .fetch_one(&mut *tx)
        .await?;
    if !exists {
        return Err(Error::NotFound);
    }
    let mut csv = CsvChunks::new(out, &["at", "event", "email", "url", "detail"])?;
    {
        let mut rows = sqlx::query_as::<_, (DateTime<Utc>, String, Option<String>, Option<String>, Option<String>)>(
            "SELECT e.at, e.kind, r.email, l.url, e.detail FROM events e
             LEFT JOIN readers r ON r.id = e.reader_id LEFT JOIN campaign_links l ON l.id = e.link_id
             WHERE e.tenant_id = $1 AND e.campaign_id = $2 ORDER BY e.at",
        )
        .bind(tenant)
        .bind(campaign)
        .fetch(&mut *tx);
        while let Some((at, kind, email, url, detail)) = rows.try_next().await? {
            let (email, url, detail) = (email.unwrap_or_default(), url.unwrap_or_default(), detail.unwrap_or_default());
            if !csv.row(&[&at.to_rfc3339(), &kind, &email, &url, &detail]).await? {
                return Ok(()); // the client went away
            }
        }
    }
    csv.finish().await?;
    tx.commit().await?;
    Ok(())
}
