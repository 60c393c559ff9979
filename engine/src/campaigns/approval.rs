//! Send approval: a workspace rule under which authors write campaigns and ask for them to go
//! out, and only owners and admins send (by approving a request, or directly).
//!
//! The rule is enforced where every send starts or restarts (`approval_rule::gate`, called by
//! `lifecycle::send_now`, `schedule` and `resume`), so the UI, the API and recurring starts all
//! meet it. Approving runs the send the author asked for (now, or scheduled) with
//! the approver's role; a send that cannot start (say, an unverified domain) puts the request
//! back to pending, with the reason shown to the approver. What was approved is what goes out:
//! editing a campaign withdraws its pending request, and an approved one cannot be edited by an
//! author until its schedule is cancelled (`store::update`, `approval_rule::guard_edit`).

use chrono::{DateTime, Utc};

use super::lifecycle;
use super::store::{self, Campaign, CampaignStatus};
use crate::domain::{CampaignId, Role, TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::jobs::Jobs;
use crate::workspaces::TeamRule;

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn required(db: &Db, tenant: TenantId) -> Result<bool> {
    crate::workspaces::team_rule(db, tenant, TeamRule::SendApproval).await
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn set_required(db: &Db, tenant: TenantId, role: Role, on: bool) -> Result<()> {
    crate::workspaces::set_team_rule(db, tenant, role, TeamRule::SendApproval, on).await
}

pub use herald_types::{ApprovalRequest as Request, ApprovalState};

#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn latest(db: &Db, tenant: TenantId, campaign: CampaignId) -> Result<Option<Request>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row = sqlx::query_as(
        "SELECT coalesce(r.email, 'a former member') AS requested_by, a.requested_at, a.send_at, a.timezone,
                coalesce(a.decision, 'pending') AS state, d.email AS decided_by, a.decided_at, a.note
         FROM send_approvals a LEFT JOIN users r ON r.id = a.requested_by LEFT JOIN users d ON d.id = a.decided_by
         WHERE a.tenant_id = $1 AND a.campaign_id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row)
}

/// An author asks for the campaign to be sent now (`send_at` `None`) or at a time. The
/// campaign must be a draft that could be sent (the same checks as a send), so the approver is
/// not asked about something that cannot go out.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn request(
    db: &Db,
    tenant: TenantId,
    user: UserId,
    role: Role,
    campaign: CampaignId,
    send_at: Option<DateTime<Utc>>,
    timezone: &str,
) -> Result<()> {
    role.require(Role::Author)?;
    if send_at.is_some_and(|at| at <= Utc::now()) {
        return Err(Error::invalid("Choose a time in the future."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let current: Campaign = store::get_in(&mut tx, tenant, campaign).await?;
    if current.status != CampaignStatus::Draft {
        return Err(Error::Conflict("Only a draft can be put up for approval.".into()));
    }
    super::readiness::check_ready(&mut tx, tenant, &current).await?;
    sqlx::query(
        "INSERT INTO send_approvals (tenant_id, campaign_id, requested_by, send_at, timezone)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (campaign_id) DO UPDATE SET requested_by = $3, requested_at = now(), send_at = $4,
             timezone = $5, decided_by = NULL, decided_at = NULL, decision = NULL, note = ''",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(user)
    .bind(send_at)
    .bind(timezone.trim())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Tells the workspace's owners and admins that `campaign` waits for them (system mail, counted
/// like invites). A refusal by the system-mail limit is logged: the request stands, and shows in
/// the campaigns list.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn mail_approvers(
    db: &Db,
    jobs: &Jobs,
    base_url: &str,
    tenant: TenantId,
    campaign: CampaignId,
) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    let (name, asker): (String, String) = sqlx::query_as(
        "SELECT c.name, coalesce(u.email, 'A member') FROM campaigns c
         JOIN send_approvals a ON a.campaign_id = c.id LEFT JOIN users u ON u.id = a.requested_by
         WHERE c.tenant_id = $1 AND c.id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_one(&mut *tx)
    .await?;
    let approvers: Vec<String> = sqlx::query_scalar(
        "SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.tenant_id = $1 AND m.role IN ('owner', 'admin') ORDER BY u.email",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let link = format!("{}/campaigns/{campaign}", base_url.trim_end_matches('/'));
    for to in approvers {
        let mail = crate::sending::mail::OutgoingMail {
            to,
            subject: format!(
                "Herald: a campaign waits for your approval ({})",
                crate::sending::mail::subject_name(&name)
            ),
            text: format!(
                "{asker} asks for the campaign \"{name}\" to go out. Approve it or turn it down here:\n{link}"
            ),
            html: format!(
                "<p>{} asks for the campaign <strong>{}</strong> to go out.</p><p><a href=\"{link}\">Approve it or turn it down</a></p>",
                crate::sending::mail::escape_html(&asker),
                crate::sending::mail::escape_html(&name)
            ),
            ..Default::default()
        };
        match jobs.enqueue_workspace_mail(tenant, mail).await {
            Ok(()) => {}
            Err(Error::Invalid(why)) => tracing::warn!(%tenant, %why, "approval mail refused by the system-mail limit"),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The campaigns of the workspace that wait for approval.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn pending_campaigns(db: &Db, tenant: TenantId) -> Result<Vec<CampaignId>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let ids = sqlx::query_scalar("SELECT campaign_id FROM send_approvals WHERE tenant_id = $1 AND decided_at IS NULL")
        .bind(tenant)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(ids)
}

/// An owner or admin approves: the campaign is sent or scheduled as asked.
///
/// The request is claimed first (pending → approved) under a lock on the campaign row, and only
/// if the campaign has not changed since it was asked; an edit takes the same lock, so it either
/// withdrew the request before (nothing to approve) or comes after and is refused by
/// `approval_rule::guard_edit`. A send that then cannot start puts the request back to pending.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn approve(
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
    user: UserId,
    role: Role,
    campaign: CampaignId,
) -> Result<Campaign> {
    role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query("SELECT 1 FROM campaigns WHERE tenant_id = $1 AND id = $2 FOR UPDATE")
        .bind(tenant)
        .bind(campaign)
        .execute(&mut *tx)
        .await?;
    let claimed: Option<(Option<DateTime<Utc>>, String)> = sqlx::query_as(
        "UPDATE send_approvals a SET decided_by = $3, decided_at = now(), decision = 'approved'
         FROM campaigns c
         WHERE a.tenant_id = $1 AND a.campaign_id = $2 AND a.decided_at IS NULL
           AND c.tenant_id = a.tenant_id AND c.id = a.campaign_id AND c.updated_at <= a.requested_at
         RETURNING a.send_at, a.timezone",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(user)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    let Some((send_at, timezone)) = claimed else {
        return Err(Error::Conflict("There is no request waiting for approval on this campaign.".into()));
    };
    let sent = match send_at {
        Some(at) if at > Utc::now() => lifecycle::schedule(db, tenant, role, campaign, at, &timezone).await,
        // A requested time that has passed while waiting: the approver is sending it now.
        _ => lifecycle::send_now(db, jobs, tenant, role, campaign).await,
    };
    if sent.is_err() {
        let mut tx = db.tenant_tx(tenant).await?;
        sqlx::query(
            "UPDATE send_approvals SET decided_by = NULL, decided_at = NULL, decision = NULL
             WHERE tenant_id = $1 AND campaign_id = $2 AND decision = 'approved'",
        )
        .bind(tenant)
        .bind(campaign)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    sent
}

/// An owner or admin turns the request down, with a note for the author.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn reject(
    db: &Db,
    tenant: TenantId,
    user: UserId,
    role: Role,
    campaign: CampaignId,
    note: &str,
) -> Result<()> {
    role.require(Role::Admin)?;
    if note.chars().count() > 1000 {
        return Err(Error::invalid("Keep the note under 1,000 characters."));
    }
    if !decide(db, tenant, user, campaign, "rejected", note.trim()).await? {
        return Err(Error::Conflict("There is no request waiting for approval on this campaign.".into()));
    }
    Ok(())
}

async fn decide(
    db: &Db,
    tenant: TenantId,
    user: UserId,
    campaign: CampaignId,
    decision: &str,
    note: &str,
) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query(
        "UPDATE send_approvals SET decided_by = $3, decided_at = now(), decision = $4, note = $5
         WHERE tenant_id = $1 AND campaign_id = $2 AND decided_at IS NULL",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(user)
    .bind(decision)
    .bind(note)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(n > 0)
}
