//! The send-approval rule, where it is enforced: every send that starts or restarts passes
//! [`gate`] (`lifecycle::send_now`, `schedule`, `resume`), and an edit passes [`guard_edit`]
//! (`store::update`), so what was approved is what goes out. Requests and decisions are in
//! `approval`, which starts the approved send; this module calls nothing of the campaigns', so
//! both the rows and the lifecycle can call it.

use herald_types::CampaignStatus;

use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Tx;

const NEEDS_APPROVAL: &str = "In this workspace only an owner or admin starts or restarts a send: authors use \
                              \"Ask for approval\".";

/// Refuses an author's send in a workspace that requires approval.
pub(crate) async fn gate(tx: &mut Tx, tenant: TenantId, role: Role) -> Result<()> {
    if role.can_administer() {
        return Ok(());
    }
    if required_in(tx, tenant).await? { Err(Error::Refused(NEEDS_APPROVAL.into())) } else { Ok(()) }
}

/// Whether the workspace requires an admin's approval for an author's sends.
pub(crate) async fn required_in(tx: &mut Tx, tenant: TenantId) -> Result<bool> {
    Ok(sqlx::query_scalar("SELECT require_send_approval FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?)
}

/// Under the rule, an author may not change a campaign once it is approved (scheduled, or about
/// to start): what was approved is what goes out. Unscheduling it ([`forget`]) makes it an
/// editable draft again, to be asked for anew. Called by `store::update` with the campaign row
/// locked.
pub(crate) async fn guard_edit(tx: &mut Tx, tenant: TenantId, role: Role, campaign: CampaignId) -> Result<()> {
    if role.can_administer() {
        return Ok(());
    }
    let row: Option<(bool, CampaignStatus, Option<String>)> = sqlx::query_as(
        "SELECT t.require_send_approval, c.status, a.decision
         FROM campaigns c JOIN tenants t ON t.id = c.tenant_id
         LEFT JOIN send_approvals a ON a.campaign_id = c.id
         WHERE c.tenant_id = $1 AND c.id = $2 FOR UPDATE OF c",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_optional(&mut **tx)
    .await?;
    match row {
        Some((true, status, decision)) if status == CampaignStatus::Scheduled || decision.as_deref() == Some("approved") => {
            Err(Error::Refused(
                "This campaign was approved as it is. To change it, cancel its schedule first, then ask for approval again."
                    .into(),
            ))
        }
        _ => Ok(()),
    }
}

/// Called when a schedule is cancelled: the campaign is a draft again and any request for it,
/// decided or not, is gone (the audit log keeps the story).
pub(crate) async fn forget(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<()> {
    sqlx::query("DELETE FROM send_approvals WHERE tenant_id = $1 AND campaign_id = $2")
        .bind(tenant)
        .bind(campaign)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Called when a campaign is edited: a pending request is withdrawn.
pub(crate) async fn withdraw_pending(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<()> {
    sqlx::query("DELETE FROM send_approvals WHERE tenant_id = $1 AND campaign_id = $2 AND decided_at IS NULL")
        .bind(tenant)
        .bind(campaign)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
