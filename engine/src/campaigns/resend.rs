//! Resend to non-openers: a new draft made from a sent campaign, whose audience is the readers
//! the original reached (its `sent` rows) less everyone who opened it (a privacy proxy's open
//! too, if the author says so), clicked, unsubscribed, bounced or complained since. It is a
//! campaign of its own — send log, stats, exactly-once — and each links to the other.
//!
//! The fan-out walks the original's sent rows by their ids ([`RESEND_CHUNK`]); the readers it
//! picks then pass the same checks as any campaign's (active, not suppressed, the frequency
//! cap), and delivery checks their consent to the original's lists again before each message.

use super::store::{self, Campaign};
use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use herald_types::{CampaignStatus, ResendInput, TrackingMode};

/// A chunk of a resend: the readers of the original `$14`'s sent rows with ids in ($4, $5]
/// who have not engaged with it since (`$15`: machine opens count), of those still confirmed on
/// one of the lists it was sent through (`$3`; empty when segments brought them in: any list).
pub(crate) const RESEND_CHUNK: &str = "SELECT s.reader_id FROM sends s
     WHERE s.tenant_id = $1 AND s.campaign_id = $14 AND s.status = 'sent' AND s.id > $4 AND s.id <= $5
       AND NOT EXISTS (SELECT 1 FROM events e
                       WHERE e.tenant_id = $1 AND e.campaign_id = $14 AND e.reader_id = s.reader_id
                         AND (e.kind IN ('click', 'unsubscribe', 'bounce_hard', 'bounce_soft', 'complaint')
                              OR (e.kind = 'open' AND ($15 OR NOT e.prefetch))))
       AND EXISTS (SELECT 1 FROM subscriptions c WHERE c.tenant_id = $1 AND c.reader_id = s.reader_id
                   AND c.status = 'confirmed' AND (cardinality($3::uuid[]) = 0 OR c.list_id = ANY($3)))";

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
