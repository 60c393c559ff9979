//! Resend to non-openers: a new draft made from a sent campaign, whose audience is the readers
//! the original reached (its `sent` rows) less everyone who opened it (a privacy proxy's open
//! too, if the author says so), clicked, unsubscribed, bounced or complained since. It is a
//! campaign of its own — send log, stats, exactly-once — and each links to the other.
//!
//! The fan-out walks the original's sent rows by their ids ([`RESEND_CHUNK`]); the readers it
//! picks then pass the same checks as any campaign's (active, not suppressed, the frequency
//! cap), and delivery checks again, at each claim and before a late message, their consent to
//! the original's lists and that they have not engaged with the original meanwhile.
//!
//! One resend per original: a second one would mail the readers of the first again, so it is
//! made only when the author asks for it knowing how many that is ([`ResendInput::again`]).

use super::store::{self, Campaign};
use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use herald_types::{CampaignStatus, ResendInput, TrackingMode};

/// SQL true when the reader of send row `s` has engaged with the original since it was sent
/// (opened it — a privacy proxy's open only when the boolean placeholder says so —, clicked,
/// unsubscribed, bounced or complained): the resend's fan-out leaves them out, and its claim
/// asks again, since they may open the original while their resend waits its turn.
/// The arguments are the placeholders of the tenant, the original and the boolean.
macro_rules! engaged_with_original {
    ($tenant:literal, $original:literal, $machine_opens:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM events e
                     WHERE e.tenant_id = ",
            $tenant,
            " AND e.campaign_id = ",
            $original,
            " AND e.reader_id = s.reader_id
                       AND (e.kind IN ('click', 'unsubscribe', 'bounce_hard', 'bounce_soft', 'complaint')
                            OR (e.kind = 'open' AND (",
            $machine_opens,
            " OR NOT e.prefetch))))"
        )
    };
}
pub(crate) use engaged_with_original;

/// A chunk of a resend: the readers of the original `$14`'s sent rows with ids in ($4, $5]
/// who have not engaged with it since (`$15`: machine opens count), of those still confirmed on
/// one of the lists it was sent through (`$3`; empty when segments brought them in: any list).
pub(crate) const RESEND_CHUNK: &str = concat!(
    "SELECT s.reader_id FROM sends s
     WHERE s.tenant_id = $1 AND s.campaign_id = $14 AND s.status = 'sent' AND s.id > $4 AND s.id <= $5
       AND NOT ",
    engaged_with_original!("$1", "$14", "$15"),
    "
       AND EXISTS (SELECT 1 FROM subscriptions c WHERE c.tenant_id = $1 AND c.reader_id = s.reader_id
                   AND c.status = 'confirmed' AND (cardinality($3::uuid[]) = 0 OR c.list_id = ANY($3)))"
);

/// The first sent row of the original after `cursor` (a send id), for the next chunk.
pub(crate) const RESEND_NEXT: &str =
    "SELECT min(id) FROM sends WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'sent' AND id > $3";

/// Makes the resend draft of `original` and returns it.
#[tracing::instrument(skip_all, fields(%tenant, %original))]
pub async fn create(
    db: &Db,
    tenant: TenantId,
    role: Role,
    original: CampaignId,
    input: &ResendInput,
) -> Result<Campaign> {
    role.require(Role::Author)?;
    input.validate()?;
    let mut tx = db.tenant_tx(tenant).await?;
    let c = store::get_in(&mut tx, tenant, original).await?;
    if c.status != CampaignStatus::Sent {
        return Err(Error::Conflict("Only a sent campaign can be sent again to readers who did not open it.".into()));
    }
    if c.tracking != TrackingMode::On {
        return Err(Error::Conflict(
            "This campaign did not track opens per reader, so who did not open it is unknown.".into(),
        ));
    }
    // Under the original's row lock: two clicks at once make one resend, not two.
    sqlx::query("SELECT 1 FROM campaigns WHERE tenant_id = $1 AND id = $2 FOR UPDATE")
        .bind(tenant)
        .bind(original)
        .execute(&mut *tx)
        .await?;
    if !input.again {
        let (earlier, twice): (Option<String>, i64) = sqlx::query_as(
            "SELECT (SELECT name FROM campaigns WHERE tenant_id = $1 AND resend_of = $2 AND status <> 'cancelled'
                     ORDER BY created_at LIMIT 1),
                    (SELECT count(DISTINCT s.reader_id) FROM sends s JOIN campaigns r ON r.id = s.campaign_id
                     WHERE r.tenant_id = $1 AND r.resend_of = $2 AND s.tenant_id = $1 AND s.status IN ('sent', 'sending', 'queued'))",
        )
        .bind(tenant)
        .bind(original)
        .fetch_one(&mut *tx)
        .await?;
        if let Some(name) = earlier {
            let readers = if twice == 1 { "1 reader".to_string() } else { format!("{twice} readers") };
            return Err(Error::Conflict(format!(
                "This campaign was already sent again as “{name}” (to {readers}). Another resend would mail those who still have not opened a second time: make it only if you mean to."
            )));
        }
    }
    let subject = if input.subject.trim().is_empty() { c.subject.clone() } else { input.subject.clone() };
    // The lists (and segments) are copied for consent: a reader must still be confirmed on one
    // of the lists the original went through. The audience itself is the original's.
    let id = CampaignId::new();
    sqlx::query(
        "INSERT INTO campaigns (id, tenant_id, name, subject, preheader, identity_id, from_name, from_email, reply_to,
             list_ids, segment_ids, body_format, body, tracking, resend_of, resend_machine_opens)
         SELECT $3, tenant_id, left(name || ' (to non-openers)', 200), $4, preheader, identity_id, from_name, from_email,
                reply_to, list_ids, segment_ids, body_format, body, tracking, id, $5
         FROM campaigns WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(original)
    .bind(id)
    .bind(&subject)
    .bind(input.count_machine_opens)
    .execute(&mut *tx)
    .await?;
    let made = store::get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(made)
}
