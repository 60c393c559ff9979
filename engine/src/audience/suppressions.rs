//! The per-workspace suppression list: addresses this workspace never mails, whatever list they
//! are on. Keyed by the address's canonical form ([`Email::key`]), so a bounce reported for
//! `Anna@Exämple.com` suppresses the reader stored as `anna@xn--exmple-cua.com`; one workspace's
//! entries never affect another's.

use crate::domain::{Email, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use chrono::{DateTime, Utc};

pub use herald_types::{Suppression, SuppressionReason, SuppressionsAdded};

/// Adds (or keeps) a suppression inside a caller's tenant transaction. An existing entry keeps its
/// original reason unless the new one is a bounce or complaint, which are stronger.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn add_in(tx: &mut Tx, tenant: TenantId, email: &str, reason: SuppressionReason, source: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO suppressions (tenant_id, email_lower, reason, source) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant_id, email_lower) DO UPDATE SET reason = excluded.reason, source = excluded.source
         WHERE excluded.reason IN ('hard_bounce', 'soft_bounce', 'complaint')
           AND suppressions.reason NOT IN ('hard_bounce', 'soft_bounce', 'complaint')",
    )
    .bind(tenant)
    .bind(Email::key(email))
    .bind(reason)
    .bind(source)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Adds many addresses (a pasted list or a CSV column). Returns (added or kept, invalid lines).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn add_many(
    db: &Db,
    tenant: TenantId,
    role: Role,
    emails: &[String],
    reason: SuppressionReason,
    source: &str,
) -> Result<SuppressionsAdded> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let mut ok = 0;
    let mut invalid = Vec::new();
    for raw in emails.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        match Email::parse(raw) {
            Ok(email) => {
                add_in(&mut tx, tenant, email.as_str(), reason, source).await?;
                ok += 1;
            }
            Err(_) => invalid.push(raw.chars().take(200).collect()),
        }
    }
    tx.commit().await?;
    Ok(SuppressionsAdded { suppressed: ok, invalid })
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn is_suppressed(tx: &mut Tx, tenant: TenantId, email: &str) -> Result<Option<SuppressionReason>> {
    Ok(sqlx::query_scalar("SELECT reason FROM suppressions WHERE tenant_id = $1 AND email_lower = $2")
        .bind(tenant)
        .bind(Email::key(email))
        .fetch_optional(&mut **tx)
        .await?)
}

/// Searches by address fragment, newest first, at most `limit`.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn search(db: &Db, tenant: TenantId, query: &str, limit: i64) -> Result<Vec<Suppression>> {
    search_after(db, tenant, query, None, limit).await
}

/// [`search`] continued after `after`, a page's last `(created_at, email_lower)`.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn search_after(
    db: &Db,
    tenant: TenantId,
    query: &str,
    after: Option<(DateTime<Utc>, String)>,
    limit: i64,
) -> Result<Vec<Suppression>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let pattern =
        format!("%{}%", query.trim().to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
    let (after_at, after_email) = after.unzip();
    let rows = sqlx::query_as(
        "SELECT email_lower, reason, source, created_at FROM suppressions
         WHERE tenant_id = $1 AND email_lower LIKE $2
           AND ($4::timestamptz IS NULL OR created_at < $4 OR (created_at = $4 AND email_lower > $5))
         ORDER BY created_at DESC, email_lower LIMIT $3",
    )
    .bind(tenant)
    .bind(pattern)
    .bind(limit.clamp(1, 1001))
    .bind(after_at)
    .bind(after_email)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Removes a suppression (admins only). A bounce or complaint needs `confirmed = true`.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn remove(db: &Db, tenant: TenantId, role: Role, email: &str, confirmed: bool) -> Result<()> {
    role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let reason = is_suppressed(&mut tx, tenant, email).await?.ok_or(Error::NotFound)?;
    if reason.protects_reputation() && !confirmed {
        return Err(Error::invalid(format!(
            "This address is suppressed because of a {}. Mailing it again can hurt your sending reputation; confirm to remove it.",
            reason.label()
        )));
    }
    sqlx::query("DELETE FROM suppressions WHERE tenant_id = $1 AND email_lower = $2")
        .bind(tenant)
        .bind(Email::key(email))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
