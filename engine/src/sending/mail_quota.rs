//! Limits on the mail Herald sends on a workspace's behalf: invites and opt-in confirmations
//! (including those an import sends). Counted over the last 24 hours per workspace, per account
//! (every workspace it made: workspaces are free) and per recipient across every workspace, so that a workspace cannot turn the installation's mail
//! into a spam cannon, and a stranger's address cannot be mail-bombed by rotating lists,
//! workspaces or IP addresses. The count lives in Postgres (`claim_system_mail` in `engine/sql/sending.sql`),
//! so every process of an installation shares it.

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Db;

/// Per 24 hours. `HERALD_SYSTEM_MAIL_PER_WORKSPACE`, `HERALD_SYSTEM_MAIL_PER_RECIPIENT` and
/// `HERALD_SYSTEM_MAIL_PER_ACCOUNT`; `herald admin set-limits` raises one workspace's (or, with
/// `--email`, one account's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemMailLimits {
    pub per_workspace: i32,
    pub per_recipient: i32,
    pub per_account: i32,
}

impl Default for SystemMailLimits {
    fn default() -> Self {
        // A workspace importing a double opt-in list needs its operator to raise the first;
        // nobody needs more than a handful of confirmation emails a day.
        Self { per_workspace: 1_000, per_recipient: 5, per_account: 1_000 }
    }
}

/// Counts one message to `recipient` for `tenant`, or refuses it with a message for the person
/// who asked for it.
pub(crate) async fn claim(db: &Db, tenant: TenantId, limits: SystemMailLimits, recipient: &str) -> Result<()> {
    // In the workspace's transaction: its own `tenants` row (a possible raised limit) is what
    // row-level security lets it read.
    let mut tx = db.tenant_tx(tenant).await?;
    let refused: Option<String> = sqlx::query_scalar("SELECT claim_system_mail($1, $2, $3, $4, $5)")
        .bind(tenant)
        .bind(crate::domain::Email::key(recipient))
        .bind(limits.per_workspace)
        .bind(limits.per_recipient)
        .bind(limits.per_account)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    match refused.as_deref() {
        None => Ok(()),
        Some("recipient") => Err(Error::invalid(
            "This address has already been sent several emails like this today. Check its inbox (and spam folder), \
             or try again tomorrow.",
        )),
        Some(account) if account.starts_with("account:") => {
            let limit = account.trim_start_matches("account:");
            tracing::warn!(%tenant, limit, "an account reached its daily limit of system mail");
            Err(Error::invalid(format!(
                "Your workspaces have sent your account's {limit} invitation and confirmation emails for today. Try \
                 again tomorrow, or ask the operator to raise your account's limit."
            )))
        }
        Some(workspace) => {
            let limit = workspace.strip_prefix("workspace:").unwrap_or("its");
            tracing::warn!(%tenant, limit, "a workspace reached its daily limit of system mail");
            Err(Error::invalid(format!(
                "This workspace has sent its {limit} invitation and confirmation emails for today. Try again \
                 tomorrow, or ask the operator to raise the limit."
            )))
        }
    }
}

/// Sets one workspace's daily limit (`None`: back to the installation's). For operators.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn set_workspace_limit(db: &Db, tenant: TenantId, per_day: Option<i32>) -> Result<()> {
    if per_day.is_some_and(|n| n < 0) {
        return Err(Error::invalid("The limit cannot be negative."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("UPDATE tenants SET system_mail_per_day = $2 WHERE id = $1")
        .bind(tenant)
        .bind(per_day)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}
