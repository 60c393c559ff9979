//! The event log (`events`) and the campaign counters an event moves (`campaign_stats`,
//! `campaign_domain_stats`). Several features learn of events: audience (an unsubscribe through
//! a campaign's link), campaigns (a bounce in the SMTP conversation) and feedback (a provider's
//! report). They all write here, and this module imports none of them.

use chrono::{DateTime, Utc};

use crate::domain::{CampaignId, TenantId};
use crate::error::Result;
use crate::infra::db::Tx;

/// A hard bounce from the SMTP conversation itself (5xx "user unknown" at RCPT). The caller
/// already suppressed the address and marked the send.
pub(crate) async fn record_sync_bounce(
    tx: &mut Tx,
    tenant: TenantId,
    campaign: CampaignId,
    reader: i64,
    reply: &str,
) -> Result<()> {
    insert_event(tx, tenant, Some(campaign), Some(reader), "bounce_hard", &format!("SMTP: {reply}"), Utc::now())
        .await?;
    bump(tx, tenant, campaign, "hard_bounces").await
}

/// An unsubscribe through the link in a campaign's message: counted once per reader.
pub(crate) async fn record_unsubscribe(
    tx: &mut Tx,
    tenant: TenantId,
    campaign: CampaignId,
    reader: i64,
    source: &str,
) -> Result<()> {
    let seen: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM events WHERE reader_id = $2 AND campaign_id = $3 AND kind = 'unsubscribe' AND tenant_id = $1)",
    )
    .bind(tenant)
    .bind(reader)
    .bind(campaign)
    .fetch_one(&mut **tx)
    .await?;
    if seen {
        return Ok(());
    }
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM campaigns WHERE tenant_id = $1 AND id = $2)")
        .bind(tenant)
        .bind(campaign)
        .fetch_one(&mut **tx)
        .await?;
    if !exists {
        return Ok(());
    }
    insert_event(tx, tenant, Some(campaign), Some(reader), "unsubscribe", source, Utc::now()).await?;
    bump(tx, tenant, campaign, "unsubscribes").await
}

pub(crate) async fn insert_event(
    tx: &mut Tx,
    tenant: TenantId,
    campaign: Option<CampaignId>,
    reader: Option<i64>,
    kind: &str,
    detail: &str,
    at: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, detail, at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(reader)
    .bind(kind)
    .bind(detail)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Adds one to a campaign counter. `column` is one of a fixed set, never user input.
pub(crate) async fn bump(tx: &mut Tx, tenant: TenantId, campaign: CampaignId, column: &'static str) -> Result<()> {
    debug_assert!(["delivered", "hard_bounces", "soft_bounces", "complaints", "unsubscribes"].contains(&column));
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO campaign_stats AS s (campaign_id, tenant_id, {column}) VALUES ($2, $1, 1)
         ON CONFLICT (campaign_id) DO UPDATE SET {column} = s.{column} + 1, updated_at = now()"
    )))
    .bind(tenant)
    .bind(campaign)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(crate) async fn bump_domain(
    tx: &mut Tx,
    tenant: TenantId,
    campaign: CampaignId,
    email: &str,
    column: &'static str,
) -> Result<()> {
    debug_assert!(["bounced", "complaints"].contains(&column));
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO campaign_domain_stats AS s (campaign_id, tenant_id, domain, {column}) VALUES ($2, $1, $3, 1)
         ON CONFLICT (campaign_id, domain) DO UPDATE SET {column} = s.{column} + 1"
    )))
    .bind(tenant)
    .bind(campaign)
    .bind(domain_of(email))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The part after the `@`, lowercased: what per-domain figures are keyed by.
pub fn domain_of(email: &str) -> String {
    email.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()).unwrap_or_default()
}
