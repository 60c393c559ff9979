//! Whether a campaign can be sent now: everything a send (or an automation step's mail) needs,
//! each failure a message that says what to fix. Checked where sends start (`lifecycle`), where
//! an author asks for approval, where a recurring campaign starts and where an automation turns on.

use super::store::{self, Campaign};
use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Tx;
use crate::sending::message::CompiledCampaign;

/// Everything that must hold before a send may start; the messages say what to fix.
pub(crate) async fn check_ready(tx: &mut Tx, tenant: TenantId, c: &Campaign) -> Result<()> {
    let workspace = check_sender(tx, tenant, c).await?;
    if c.list_ids.is_empty() && c.segment_ids.is_empty() {
        return Err(Error::invalid("Choose at least one list or segment to send to."));
    }
    // Segments' readers are counted as the fan-out writes them (`warmup::pause_if_over`).
    super::warmup::check_estimate(tx, tenant, c.id, &c.list_ids).await?;
    if !store::segments_exist(tx, tenant, &c.segment_ids, c.exclude_segment_id).await? {
        return Err(Error::invalid("One of the chosen segments no longer exists."));
    }
    if !c.segment_ids.is_empty() || c.exclude_segment_id.is_some() {
        // Each segment must still fit the workspace (the fan-out builds the same tree).
        let ids = |v: &[herald_types::SegmentId]| v.iter().map(|s| s.0).collect::<Vec<_>>();
        let lists: Vec<uuid::Uuid> = c.list_ids.iter().map(|l| l.0).collect();
        super::targeting::tree(tx, tenant, &lists, &ids(&c.segment_ids), c.exclude_segment_id.map(|s| s.0)).await?;
    }
    let known: i64 = sqlx::query_scalar("SELECT count(*) FROM lists WHERE tenant_id = $1 AND id = ANY($2)")
        .bind(tenant)
        .bind(&c.list_ids)
        .fetch_one(&mut **tx)
        .await?;
    if known != c.list_ids.len() as i64 {
        return Err(Error::invalid("One of the chosen lists no longer exists."));
    }
    store::attribute_condition(c)?;
    check_template(tenant, c, &workspace).await
}

/// What any mail of the workspace needs before it may go out — a campaign's or an automation
/// step's: the account not suspended, a postal address, a subject, a verified sender. Returns
/// the workspace as the templates name it.
pub(crate) async fn check_sender(
    tx: &mut Tx,
    tenant: TenantId,
    c: &Campaign,
) -> Result<crate::sending::message::Workspace> {
    crate::account_limits::require_not_suspended(tx, tenant).await?;
    let (postal, name): (String, String) = sqlx::query_as("SELECT postal_address, name FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?;
    if postal.trim().is_empty() {
        return Err(Error::invalid(
            "Add your workspace's postal address in Settings first: the law requires it in every campaign.",
        ));
    }
    if c.subject.trim().is_empty() {
        return Err(Error::invalid("Write a subject first."));
    }
    if c.from_email.trim().is_empty() {
        return Err(Error::invalid("Choose a sender address first."));
    }
    crate::sending::domains::require_verified_sender(tx, tenant, c.identity_id.is_some(), &c.from_email).await?;
    Ok(crate::sending::message::Workspace { name, postal_address: postal })
}

/// The campaign's templates (every A/B version's) compile.
pub(crate) async fn check_template(
    tenant: TenantId,
    c: &Campaign,
    workspace: &crate::sending::message::Workspace,
) -> Result<()> {
    let turn = crate::sending::template_sandbox::Turn::request(tenant);
    CompiledCampaign::compile(&store::content(c), workspace, turn)
        .await?
        .map_err(|e| Error::invalid(format!("Fix the template first: {e}")))?;
    super::ab_test::check_versions(c, workspace, tenant).await?;
    Ok(())
}
