//! A resend to non-openers whose readers open the original mid-send, and a second resend that
//! must be refused.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use herald_engine::{CampaignId, Db, Role, TenantId};
use sqlx::PgPool;

use super::fixtures::{create_campaign, insert_list};

/// A resend to non-openers, and the original it resends.
pub(super) struct Resend {
    original: CampaignId,
    pub(super) id: CampaignId,
    pub(super) readers: Vec<String>,
}

/// The original went to 60 readers of a list of its own two days ago, opens tracked per reader
/// (written as its send left it: every row `sent`); its resend goes out spread over 30 s, so
/// that readers who open the original mid-send ([`open_original`]) still have their copy ahead.
/// A second resend without `again` must be refused: returns what went wrong if it was not.
pub(super) async fn resend_campaign(
    owner: &PgPool,
    db: &Db,
    tenant: TenantId,
) -> anyhow::Result<(Resend, Option<String>)> {
    use herald_engine::campaigns::resend;
    let (list, readers) = insert_list(owner, tenant, "resend", 60).await?;
    let original = create_campaign(db, tenant, "Original", &[list]).await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'sent', tracking = 'on', fanout_done = true, recipients = $2,
                started_at = now() - interval '2 days', finished_at = now() - interval '2 days'
         WHERE id = $1",
    )
    .bind(original)
    .bind(readers.len() as i64)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, attempts, sent_at, first_claimed_at)
         SELECT $1, $2, s.reader_id, r.email, 'sent', 1, now() - interval '2 days', now() - interval '2 days'
         FROM subscriptions s JOIN readers r ON r.id = s.reader_id
         WHERE s.list_id = $3 ORDER BY s.reader_id",
    )
    .bind(tenant)
    .bind(original)
    .bind(list)
    .execute(owner)
    .await?;
    let input = herald_types::ResendInput { subject: String::new(), count_machine_opens: false, again: false };
    let id = resend::create(db, tenant, Role::Owner, original, &input).await?.id;
    // Thirty seconds (below the editor's minimum; set directly, as for the spread campaign).
    sqlx::query("UPDATE campaigns SET spread_hours = 30.0 / 3600 WHERE id = $1").bind(id).execute(owner).await?;
    let second = match resend::create(db, tenant, Role::Owner, original, &input).await {
        Err(herald_engine::Error::Conflict(_)) => None,
        Ok(made) => {
            // Out of the way: a draft left behind would never let the round settle.
            sqlx::query("DELETE FROM campaigns WHERE id = $1").bind(made.id).execute(owner).await?;
            Some("a second resend of one original was made without `again`".to_string())
        }
        Err(e) => Some(format!("a second resend without `again` failed, but not as a conflict: {e}")),
    };
    Ok((Resend { original, id, readers }, second))
}

/// The `n` readers of the resend whose copies the spread sends last open the original (as its
/// tracking pixel records an open) while their copies are still ahead, and are noted in
/// `stopped` with when that committed. False while the resend has no copy left to hold back
/// (its fan-out has not written its rows yet, or it is over). Tried again after an error, it
/// notes those whose open committed unseen.
pub(super) async fn open_original(
    owner: &PgPool,
    tenant: TenantId,
    resend: &Resend,
    n: i64,
    stopped: &mut HashMap<String, (DateTime<Utc>, &'static str)>,
) -> anyhow::Result<bool> {
    let mut opened: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT lower(r.email) FROM events e JOIN readers r ON r.id = e.reader_id
         WHERE e.tenant_id = $1 AND e.campaign_id = $2 AND e.kind = 'open'",
    )
    .bind(tenant)
    .bind(resend.original)
    .fetch_all(owner)
    .await?;
    if opened.is_empty() {
        opened = sqlx::query_scalar(
            "WITH picked AS (
                 SELECT s.reader_id, lower(s.email) AS email FROM sends s
                 WHERE s.campaign_id = $3 AND s.status IN ('queued', 'sending')
                 ORDER BY s.id DESC LIMIT $4
             ), opened AS (
                 INSERT INTO events (tenant_id, campaign_id, reader_id, kind, prefetch)
                 SELECT $1, $2, reader_id, 'open', false FROM picked
             )
             SELECT email FROM picked",
        )
        .bind(tenant)
        .bind(resend.original)
        .bind(resend.id)
        .bind(n)
        .fetch_all(owner)
        .await?;
    }
    if opened.is_empty() {
        return Ok(false);
    }
    let at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(owner).await?;
    for address in opened {
        stopped.insert(address, (at, "opened the original"));
    }
    Ok(true)
}
