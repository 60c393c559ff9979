//! Suspending an account: `herald admin suspend-account` and its reverse. Above
//! the campaigns it pauses; the checks that refuse work while suspended live with the limits
//! (`account_limits::require_not_suspended`), below every feature that calls them.

use crate::domain::{TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::Db;

/// The workspaces an account answers for: those it made and those it owns.
async fn workspaces_of(db: &Db, account: UserId) -> Result<Vec<TenantId>> {
    let mut tx = db.user_tx(account).await?;
    let ids = sqlx::query_scalar(
        "SELECT t.id FROM tenants t WHERE t.account_id = $1
            OR EXISTS (SELECT 1 FROM memberships m WHERE m.tenant_id = t.id AND m.user_id = $1 AND m.role = 'owner')",
    )
    .bind(account)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(ids)
}

async fn account_by_email(db: &Db, email: &str) -> Result<UserId> {
    sqlx::query_scalar("SELECT id FROM users WHERE lower(email) = lower($1)")
        .bind(crate::domain::Email::key(email))
        .fetch_optional(db.pool())
        .await?
        .ok_or(Error::NotFound)
}

/// `herald admin suspend-account`: the account's API keys answer 403 at once; its workspaces'
/// sending campaigns are paused (their delivery loops stop at their next claim), scheduled ones
/// wait, queued transactional mail is not claimed, and nothing can be started or resumed until
/// [`reinstate`]. Each workspace's audit log says so. Returns the workspaces affected.
#[tracing::instrument(skip_all)]
pub async fn suspend(db: &Db, email: &str, reason: &str) -> Result<Vec<TenantId>> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(Error::invalid("Say why the account is suspended: its members see the reason."));
    }
    let account = account_by_email(db, email).await?;
    sqlx::query("UPDATE users SET suspended_at = coalesce(suspended_at, now()), suspended_reason = $2 WHERE id = $1")
        .bind(account)
        .bind(reason)
        .execute(db.pool())
        .await?;
    let pause_reason = format!("The account is suspended: {reason}");
    let workspaces = workspaces_of(db, account).await?;
    for &tenant in &workspaces {
        let mut tx = db.tenant_tx(tenant).await?;
        sqlx::query("UPDATE tenants SET suspended_at = coalesce(suspended_at, now()) WHERE id = $1")
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
        let sending: Vec<crate::domain::CampaignId> =
            sqlx::query_scalar("SELECT id FROM campaigns WHERE tenant_id = $1 AND status = 'sending'")
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?;
        tx.commit().await?;
        for campaign in sending {
            match crate::campaigns::lifecycle::pause(db, tenant, crate::domain::Role::Owner, campaign, &pause_reason)
                .await
            {
                Ok(_) | Err(Error::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let detail = serde_json::json!({ "reason": reason });
        crate::audit::note(
            db,
            tenant,
            &crate::audit::Actor::Operator,
            crate::audit::Action::AccountSuspended,
            email,
            detail,
        )
        .await;
    }
    Ok(workspaces)
}

/// Lifts [`suspend`]: keys work again and scheduled campaigns start; paused campaigns stay
/// paused until a member resumes them.
#[tracing::instrument(skip_all)]
pub async fn reinstate(db: &Db, email: &str) -> Result<Vec<TenantId>> {
    let account = account_by_email(db, email).await?;
    sqlx::query("UPDATE users SET suspended_at = NULL, suspended_reason = NULL WHERE id = $1")
        .bind(account)
        .execute(db.pool())
        .await?;
    let workspaces = workspaces_of(db, account).await?;
    for &tenant in &workspaces {
        let mut tx = db.tenant_tx(tenant).await?;
        sqlx::query("UPDATE tenants SET suspended_at = NULL WHERE id = $1").bind(tenant).execute(&mut *tx).await?;
        tx.commit().await?;
        let detail = serde_json::json!({});
        crate::audit::note(
            db,
            tenant,
            &crate::audit::Actor::Operator,
            crate::audit::Action::AccountReinstated,
            email,
            detail,
        )
        .await;
    }
    Ok(workspaces)
}
