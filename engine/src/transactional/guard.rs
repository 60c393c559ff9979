//! The bounce and complaint guard for the transactional stream, as campaigns have
//! theirs: a workspace whose transactional mail of the last 7 days hard-bounces more than 5 %
//! or is reported as spam more than 0.3 % of the time (once enough has gone out to tell) stops
//! sending it. Queued messages wait (the claim skips the workspace); the workspace's admins see
//! the reason on the Transactional page and resume when they have found the cause.

use crate::domain::{Role, TenantId};
use crate::error::Result;
use crate::infra::db::{Db, Tx};

/// The thresholds campaigns use (see `campaigns::delivery`).
const MAX_HARD_BOUNCE_RATE: f64 = 0.05;
const MAX_COMPLAINT_RATE: f64 = 0.003;
/// Messages sent in the window before a rate means anything.
const MIN_SAMPLE: i64 = 100;

/// After a hard bounce or a complaint was recorded in `tx`: pauses the workspace's transactional
/// stream when its rates crossed a threshold. Returns the reason when it did.
pub(crate) async fn check(tx: &mut Tx, tenant: TenantId) -> Result<Option<String>> {
    let (sent, bounced, complained): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE sent_at > now() - interval '7 days'),
                count(*) FILTER (WHERE bounced_at > now() - interval '7 days'),
                count(*) FILTER (WHERE complained_at > now() - interval '7 days')
         FROM messages WHERE tenant_id = $1 AND created_at > now() - interval '8 days'",
    )
    .bind(tenant)
    .fetch_one(&mut **tx)
    .await?;
    let Some(reason) = reason(sent, bounced, complained) else { return Ok(None) };
    let paused = sqlx::query(
        "UPDATE tenants SET transactional_paused_reason = $2 WHERE id = $1 AND transactional_paused_reason IS NULL",
    )
    .bind(tenant)
    .bind(&reason)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if paused == 0 {
        return Ok(None);
    }
    tracing::warn!(%tenant, sent, bounced, complained, "transactional stream paused by the bounce and complaint guard");
    Ok(Some(reason))
}

/// Why the stream must stop, if it must.
fn reason(sent: i64, bounced: i64, complained: i64) -> Option<String> {
    if sent < MIN_SAMPLE {
        return None;
    }
    let rate = |n: i64| n as f64 / sent as f64;
    if rate(bounced) > MAX_HARD_BOUNCE_RATE {
        Some(format!(
            "Transactional sending is paused: {bounced} of the {sent} messages of the last 7 days hard-bounced \
             (more than {:.0} %). Check where the addresses come from, then resume.",
            100.0 * MAX_HARD_BOUNCE_RATE
        ))
    } else if rate(complained) > MAX_COMPLAINT_RATE {
        Some(format!(
            "Transactional sending is paused: {complained} of the {sent} messages of the last 7 days were reported \
             as spam (more than {:.1} %). Send only what recipients asked for, then resume.",
            100.0 * MAX_COMPLAINT_RATE
        ))
    } else {
        None
    }
}

/// Why the workspace's transactional stream is paused (`None` while it runs).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn paused_reason(db: &Db, tenant: TenantId) -> Result<Option<String>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let reason = sqlx::query_scalar("SELECT transactional_paused_reason FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(reason)
}

/// An admin resumes the stream: queued messages go out again. True when it was paused.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn resume(db: &Db, tenant: TenantId, role: Role) -> Result<bool> {
    role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query(
        "UPDATE tenants SET transactional_paused_reason = NULL WHERE id = $1 AND transactional_paused_reason IS NOT NULL",
    )
    .bind(tenant)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::reason;

    #[test]
    fn the_guard_waits_for_a_sample_then_stops_at_either_rate() {
        assert_eq!(reason(99, 99, 99), None, "too few to tell");
        assert_eq!(reason(1000, 50, 3), None, "exactly at the limits");
        assert!(reason(1000, 51, 0).is_some_and(|r| r.contains("hard-bounced")));
        assert!(reason(1000, 0, 4).is_some_and(|r| r.contains("reported as spam")));
    }
}
