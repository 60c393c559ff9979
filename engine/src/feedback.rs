//! What happens to a message after it left: deliveries, bounces, complaints and unsubscribes,
//! reported synchronously by SMTP or later by a provider's webhook. Bounces and complaints
//! protect the workspace's sending reputation: a hard bounce or a complaint suppresses the
//! address at once, N soft bounces within the workspace's window do too, and a complaint also
//! unsubscribes the reader from everything.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::audience::consent::Origin;
use crate::audience::{subscribe, suppressions};
use crate::domain::{CampaignId, TenantId};
use crate::error::Result;
use crate::events::{bump, bump_domain, insert_event, record_unsubscribe};
use crate::infra::db::{Db, Tx};
use crate::webhooks::{EventKind, ProviderEvent};

/// What [`apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// This provider event id was applied before: nothing happened.
    Duplicate,
    /// Applied; `matched` tells whether it was tied to a message in the send log.
    New { matched: bool },
}

/// The send-log row a provider event is about.
#[derive(Debug, sqlx::FromRow)]
struct MatchedSend {
    id: i64,
    campaign_id: CampaignId,
    reader_id: i64,
}

/// Applies one verified provider event in its own transaction. Idempotent on the provider's
/// event id: the id is recorded in the same transaction as the effects, so a replay (or two
/// deliveries racing) has exactly one effect.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn apply(db: &Db, tenant: TenantId, provider: &str, ev: &ProviderEvent) -> Result<Applied> {
    let mut tx = db.tenant_tx(tenant).await?;
    if !record_delivery(&mut tx, tenant, provider, ev).await? {
        return Ok(Applied::Duplicate);
    }
    // A transactional message, by our Message-ID.
    if let Some(message) = crate::transactional::messages::match_event(&mut tx, tenant, ev, false).await? {
        crate::transactional::messages::apply_event(&mut tx, tenant, message, ev, provider).await?;
        tx.commit().await?;
        return Ok(Applied::New { matched: true });
    }
    let send = find_send(&mut tx, tenant, ev).await?;
    // Or one whose provider id matched where no campaign message did.
    if send.is_none()
        && let Some(message) = crate::transactional::messages::match_event(&mut tx, tenant, ev, true).await?
    {
        crate::transactional::messages::apply_event(&mut tx, tenant, message, ev, provider).await?;
        tx.commit().await?;
        return Ok(Applied::New { matched: true });
    }
    let reader = find_reader(&mut tx, tenant, ev, send.as_ref()).await?;
    let campaign = send.as_ref().map(|s| s.campaign_id);
    let detail: String = format!("{provider}: {}", ev.detail).chars().take(500).collect();
    let source = format!("{provider} webhook");
    let about = About { tenant, ev, send: send.as_ref(), reader, campaign, detail: &detail, source: &source };
    let kind = match ev.kind {
        EventKind::Delivered => delivered(&mut tx, &about).await?,
        EventKind::Bounce { hard: true } => hard_bounce(&mut tx, &about).await?,
        EventKind::Bounce { hard: false } => soft_bounce(&mut tx, &about).await?,
        EventKind::Complaint => complaint(&mut tx, &about).await?,
        EventKind::Unsubscribe => {
            unsubscribe(&mut tx, &about).await?;
            // record_unsubscribe wrote the event for a matched message.
            if campaign.is_some() && reader.is_some() {
                tx.commit().await?;
                return Ok(Applied::New { matched: true });
            }
            "unsubscribe"
        }
    };
    insert_event(&mut tx, tenant, campaign, reader, kind, &detail, ev.at).await?;
    tx.commit().await?;
    Ok(Applied::New { matched: send.is_some() })
}

/// What one provider event is about, as the effects of its kind read it.
struct About<'a> {
    tenant: TenantId,
    ev: &'a ProviderEvent,
    send: Option<&'a MatchedSend>,
    reader: Option<i64>,
    campaign: Option<CampaignId>,
    /// The provider's detail, prefixed with its name and bounded.
    detail: &'a str,
    /// `{provider} webhook`.
    source: &'a str,
}

/// Records the event's keys; false when one was seen before and the event is not applied again.
async fn record_delivery(tx: &mut Tx, tenant: TenantId, provider: &str, ev: &ProviderEvent) -> Result<bool> {
    // The event's id, and the delivery's signed token where the provider has one: either seen
    // before means this is a redelivery or a replay. Recorded in the transaction that applies
    // the event, so a delivery that failed half-way is not taken for a replay when it is retried.
    let token =
        ev.delivery_token.as_ref().map(|t| format!("delivery-token:{}", t.chars().take(200).collect::<String>()));
    for key in std::iter::once(ev.event_id.chars().take(300).collect::<String>()).chain(token) {
        let fresh = sqlx::query(
            "INSERT INTO webhook_events (tenant_id, provider, event_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(tenant)
        .bind(provider)
        .bind(key)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if fresh == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The reader the event is about: the matched send's, else the workspace's reader with its address.
async fn find_reader(
    tx: &mut Tx,
    tenant: TenantId,
    ev: &ProviderEvent,
    send: Option<&MatchedSend>,
) -> Result<Option<i64>> {
    let reader: Option<i64> = match send {
        Some(s) => Some(s.reader_id),
        None => {
            sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 AND lower(email) = lower($2)")
                .bind(tenant)
                .bind(crate::domain::Email::key(&ev.email))
                .fetch_optional(&mut **tx)
                .await?
        }
    };
    Ok(reader)
}

async fn delivered(tx: &mut Tx, a: &About<'_>) -> Result<&'static str> {
    if let Some(s) = a.send
        && mark_first(tx, a.tenant, s.id, "delivered_at", a.ev.at).await?
    {
        bump(tx, a.tenant, s.campaign_id, "delivered").await?;
    }
    Ok("delivered")
}

async fn hard_bounce(tx: &mut Tx, a: &About<'_>) -> Result<&'static str> {
    suppressions::add_in(
        tx,
        a.tenant,
        &a.ev.email,
        crate::audience::suppressions::SuppressionReason::HardBounce,
        a.source,
    )
    .await?;
    if let Some(s) = a.send {
        let first = sqlx::query(
            "UPDATE sends SET hard_bounce = true, reason = coalesce(reason, $3), updated_at = now()
                     WHERE tenant_id = $1 AND id = $2 AND NOT hard_bounce",
        )
        .bind(a.tenant)
        .bind(s.id)
        .bind(a.detail)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        if first > 0 {
            bump(tx, a.tenant, s.campaign_id, "hard_bounces").await?;
            bump_domain(tx, a.tenant, s.campaign_id, &a.ev.email, "bounced").await?;
        }
    }
    Ok("bounce_hard")
}

async fn soft_bounce(tx: &mut Tx, a: &About<'_>) -> Result<&'static str> {
    if let Some(s) = a.send {
        sqlx::query("UPDATE sends SET soft_bounces = soft_bounces + 1 WHERE tenant_id = $1 AND id = $2")
            .bind(a.tenant)
            .bind(s.id)
            .execute(&mut **tx)
            .await?;
        bump(tx, a.tenant, s.campaign_id, "soft_bounces").await?;
    }
    if let Some(r) = a.reader {
        // This one plus earlier ones in the window.
        let (limit, earlier): (i32, i64) = sqlx::query_as(
            "SELECT t.soft_bounce_limit,
                            (SELECT count(*) FROM events e WHERE e.reader_id = $2 AND e.tenant_id = $1 AND e.kind = 'bounce_soft'
                               AND e.at > now() - make_interval(days => t.soft_bounce_window_days))
                     FROM tenants t WHERE t.id = $1",
        )
        .bind(a.tenant)
        .bind(r)
        .fetch_one(&mut **tx)
        .await?;
        if earlier + 1 >= i64::from(limit) {
            let why = format!("{}: {} soft bounces", a.source, earlier + 1);
            suppressions::add_in(
                tx,
                a.tenant,
                &a.ev.email,
                crate::audience::suppressions::SuppressionReason::SoftBounce,
                &why,
            )
            .await?;
        }
    }
    Ok("bounce_soft")
}

async fn complaint(tx: &mut Tx, a: &About<'_>) -> Result<&'static str> {
    suppressions::add_in(
        tx,
        a.tenant,
        &a.ev.email,
        crate::audience::suppressions::SuppressionReason::Complaint,
        a.source,
    )
    .await?;
    if let Some(r) = a.reader {
        let email: Option<String> = sqlx::query_scalar("SELECT email FROM readers WHERE tenant_id = $1 AND id = $2")
            .bind(a.tenant)
            .bind(r)
            .fetch_optional(&mut **tx)
            .await?;
        if let Some(email) = email {
            // Its `unsubscribed_all` suppression does not replace the complaint above.
            subscribe::leave_everything(tx, a.tenant, r, &email, &Origin::new("complaint")).await?;
        }
    }
    if let Some(s) = a.send
        && mark_first(tx, a.tenant, s.id, "complained_at", a.ev.at).await?
    {
        bump(tx, a.tenant, s.campaign_id, "complaints").await?;
        bump_domain(tx, a.tenant, s.campaign_id, &a.ev.email, "complaints").await?;
    }
    Ok("complaint")
}

/// Unsubscribes the reader from the campaign's lists (or from everything), and records it
/// against the campaign.
async fn unsubscribe(tx: &mut Tx, a: &About<'_>) -> Result<()> {
    if let Some(r) = a.reader {
        let lists: Vec<crate::domain::ListId> = match a.campaign {
            Some(c) => {
                sqlx::query_scalar(
                    // A campaign with segments reached the reader through any list: all go.
                    "SELECT unnest(list_ids) FROM campaigns WHERE tenant_id = $1 AND id = $2 AND segment_ids = '{}'",
                )
                .bind(a.tenant)
                .bind(c)
                .fetch_all(&mut **tx)
                .await?
            }
            None => Vec::new(),
        };
        let origin = Origin::new(a.source);
        if lists.is_empty() {
            subscribe::leave_everything(tx, a.tenant, r, &a.ev.email, &origin).await?;
        } else {
            for list in lists {
                subscribe::unsubscribe_from(tx, a.tenant, r, list, &origin).await?;
            }
        }
        if let Some(c) = a.campaign {
            record_unsubscribe(tx, a.tenant, c, r, a.source).await?;
        }
    }
    Ok(())
}

/// By our Message-ID (`{campaign}.{reader}@domain`, the form every campaign message carries),
/// else by the id the provider's SMTP reply gave (SendGrid's event ids extend it with `.filter…`).
async fn find_send(tx: &mut Tx, tenant: TenantId, ev: &ProviderEvent) -> Result<Option<MatchedSend>> {
    if let Some(OurMessageId { campaign, reader, entry }) = ev.message_id.as_deref().and_then(parse_message_id) {
        // Mail sent before its reader was merged into another copy of the same mailbox names
        // the merged copy; the row is the kept reader's now.
        let reader = crate::audience::aliases::resolve_id(tx, tenant, reader).await?.unwrap_or(reader);
        let found = sqlx::query_as(
            "SELECT id, campaign_id, reader_id FROM sends
             WHERE tenant_id = $1 AND campaign_id = $2 AND reader_id = $3 AND entry = $4",
        )
        .bind(tenant)
        .bind(campaign)
        .bind(reader)
        .bind(entry)
        .fetch_optional(&mut **tx)
        .await?;
        if found.is_some() {
            return Ok(found);
        }
    }
    if let Some(pid) = ev.provider_id.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
        let short = pid.split('.').next().unwrap_or(pid);
        return Ok(sqlx::query_as(
            "SELECT id, campaign_id, reader_id FROM sends WHERE tenant_id = $1 AND provider_id IN ($2, $3) LIMIT 1",
        )
        .bind(tenant)
        .bind(pid)
        .bind(short)
        .fetch_optional(&mut **tx)
        .await?);
    }
    Ok(None)
}

/// What a campaign message's Message-ID names (see `compose`): the campaign, the reader, and
/// for an automation's step the reader's entry into it (0 for every other campaign).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OurMessageId {
    pub campaign: Uuid,
    pub reader: i64,
    pub entry: i32,
}

/// `<uuid>.<reader id>@domain`, or an automation step's `<uuid>.<reader id>.<entry>@domain`
/// (a reader who enters again gets a new Message-ID), with or without angle brackets. Without
/// the entry, a bounce of step mail matched no row and counted only by address.
pub fn parse_message_id(id: &str) -> Option<OurMessageId> {
    let id = id.trim().trim_start_matches('<').trim_end_matches('>');
    let (local, _) = id.split_once('@')?;
    let (campaign, rest) = local.split_once('.')?;
    let (reader, entry) = match rest.split_once('.') {
        Some((reader, entry)) => (reader, entry.parse().ok()?),
        None => (rest, 0),
    };
    Some(OurMessageId { campaign: Uuid::parse_str(campaign).ok()?, reader: reader.parse().ok()?, entry })
}

/// Sets a send's first-time column (`delivered_at`, `complained_at`) unless it is set already;
/// true when this call set it, so the matching counter moves once per message.
async fn mark_first(tx: &mut Tx, tenant: TenantId, send: i64, column: &'static str, at: DateTime<Utc>) -> Result<bool> {
    debug_assert!(["delivered_at", "complained_at"].contains(&column));
    let n = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE sends SET {column} = $3 WHERE tenant_id = $1 AND id = $2 AND {column} IS NULL"
    )))
    .bind(tenant)
    .bind(send)
    .bind(at)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_our_message_ids_only() {
        let c = Uuid::new_v4();
        let id = |reader, entry| Some(OurMessageId { campaign: c, reader, entry });
        assert_eq!(parse_message_id(&format!("<{c}.42@news.example>")), id(42, 0));
        assert_eq!(parse_message_id(&format!("{c}.42@news.example")), id(42, 0));
        assert_eq!(parse_message_id(&format!("<{c}.42.3@news.example>")), id(42, 3));
        assert_eq!(parse_message_id("0100018c-abc@email.amazonses.com"), None);
        assert_eq!(parse_message_id(&format!("{c}.x@d")), None);
        assert_eq!(parse_message_id(&format!("{c}.42.x@d")), None);
    }
}
