//! Sent and failed counts per recipient domain, kept by each delivery loop in memory and added
//! to the rollups every few seconds (a per-message counter update would make every loop queue
//! on one row). When the send ends, [`snapshot_final`] replaces them with exact figures from
//! the send log, so a crash that lost a few seconds of tallies leaves no trace in the stats.

use std::collections::HashMap;

use crate::domain::{CampaignId, TenantId};
use crate::error::Result;
use crate::events::domain_of;
use crate::infra::db::{Db, Tx};

#[derive(Debug, Default)]
pub struct DomainTally {
    /// domain → (sent, failed, hard bounced)
    counts: HashMap<String, (i64, i64, i64)>,
}

impl DomainTally {
    pub fn sent(&mut self, email: &str) {
        self.counts.entry(domain_of(email)).or_default().0 += 1;
    }

    pub fn failed(&mut self, email: &str, hard_bounce: bool) {
        let c = self.counts.entry(domain_of(email)).or_default();
        c.1 += 1;
        c.2 += i64::from(hard_bounce);
    }

    /// Adds the tallies to the rollups and clears them. Skipped once the send's final figures
    /// are in (the campaign_stats row lock orders this against [`snapshot_final`]).
    #[tracing::instrument(skip_all, fields(%tenant))]
    pub async fn flush(&mut self, db: &Db, tenant: TenantId, campaign: CampaignId) -> Result<()> {
        if self.counts.is_empty() {
            return Ok(());
        }
        let mut rows: Vec<(String, (i64, i64, i64))> = self.counts.drain().collect();
        rows.sort();
        let (sent, failed) = rows.iter().fold((0, 0), |acc, (_, c)| (acc.0 + c.0, acc.1 + c.1));
        let mut tx = db.tenant_tx(tenant).await?;
        let open: Option<bool> = sqlx::query_scalar(
            "INSERT INTO campaign_stats AS s (campaign_id, tenant_id, sent, failed) VALUES ($2, $1, $3, $4)
             ON CONFLICT (campaign_id) DO UPDATE SET sent = s.sent + excluded.sent, failed = s.failed + excluded.failed,
                 updated_at = now()
             WHERE s.final_counts IS NULL
             RETURNING true",
        )
        .bind(tenant)
        .bind(campaign)
        .bind(sent)
        .bind(failed)
        .fetch_optional(&mut *tx)
        .await?;
        if open.is_some() {
            sqlx::query(
                "INSERT INTO campaign_domain_stats AS s (campaign_id, tenant_id, domain, sent, failed, bounced)
                 SELECT $2, $1, d, n, f, b FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) AS x(d, n, f, b)
                 ON CONFLICT (campaign_id, domain) DO UPDATE SET sent = s.sent + excluded.sent,
                     failed = s.failed + excluded.failed, bounced = s.bounced + excluded.bounced",
            )
            .bind(tenant)
            .bind(campaign)
            .bind(rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1.0).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1.1).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1.2).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// Freezes a finished send's figures: counts per status (what the progress view shows) and per
/// domain, computed once from the send log instead of on every page view.
pub(crate) async fn snapshot_final(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<()> {
    // Lock the counters first, so a loop's late flush waits and then sees the final figures.
    sqlx::query(
        "INSERT INTO campaign_stats (campaign_id, tenant_id) VALUES ($2, $1)
         ON CONFLICT (campaign_id) DO UPDATE SET updated_at = now()",
    )
    .bind(tenant)
    .bind(campaign)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "INSERT INTO campaign_domain_stats AS s (campaign_id, tenant_id, domain, sent, failed, bounced)
         SELECT $2, $1, lower(split_part(email, '@', 2)), count(*) FILTER (WHERE status = 'sent'),
                count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE hard_bounce)
         FROM sends WHERE tenant_id = $1 AND campaign_id = $2 GROUP BY 3
         ON CONFLICT (campaign_id, domain) DO UPDATE SET sent = excluded.sent, failed = excluded.failed,
             bounced = excluded.bounced",
    )
    .bind(tenant)
    .bind(campaign)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE campaign_stats s SET final_counts = x.counts, sent = x.sent, failed = x.failed, updated_at = now()
         FROM (SELECT jsonb_build_object(
                          'by_status', coalesce((SELECT jsonb_object_agg(status, n) FROM (
                              SELECT status, count(*) AS n FROM sends WHERE tenant_id = $1 AND campaign_id = $2 GROUP BY 1) c), '{}'),
                          'hard_bounces', (SELECT count(*) FROM sends WHERE tenant_id = $1 AND campaign_id = $2 AND hard_bounce),
                          'ambiguous', (SELECT coalesce(sum(ambiguous), 0) FROM sends WHERE tenant_id = $1 AND campaign_id = $2),
                          'skipped_no_data', (SELECT count(*) FROM sends WHERE tenant_id = $1 AND campaign_id = $2
                                              AND status = 'skipped' AND reason = $3)
                      ) AS counts,
                      (SELECT count(*) FROM sends WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'sent') AS sent,
                      (SELECT count(*) FROM sends WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'failed') AS failed) x
         WHERE s.campaign_id = $2 AND s.tenant_id = $1",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(super::feed_fetch::NO_DATA)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A send that starts again (retrying failures) goes back to live counting; the rows it
/// requeued are no longer failures.
pub(crate) async fn reopen(tx: &mut Tx, tenant: TenantId, campaign: CampaignId, requeued: i64) -> Result<()> {
    sqlx::query(
        "UPDATE campaign_stats SET final_counts = NULL, failed = greatest(failed - $3, 0), updated_at = now()
         WHERE tenant_id = $1 AND campaign_id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(requeued)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE campaign_domain_stats d SET failed = greatest(d.failed - x.n, 0)
         FROM (SELECT lower(split_part(email, '@', 2)) AS domain, count(*) AS n FROM sends
               WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'queued' AND attempts = 0 GROUP BY 1) x
         WHERE d.tenant_id = $1 AND d.campaign_id = $2 AND d.domain = x.domain",
    )
    .bind(tenant)
    .bind(campaign)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
