//! Inviting teammates: an admin invites an address with a role; the invite goes out by mail with
//! a signed, expiring link; accepting it once (logged in as that address) creates the membership.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{Email, Role, TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::Db;
use crate::infra::tokens::Signer;

pub const TOKEN_PURPOSE: &str = "invite";
pub const VALID_FOR_DAYS: i64 = 7;

#[derive(Serialize, Deserialize)]
struct InviteClaim {
    t: TenantId,
    i: Uuid,
}

pub use herald_types::{InviteId, PendingInvite};

/// What the invite page shows before the invite is accepted.
#[derive(Clone, Debug, Serialize)]
pub struct InvitePreview {
    pub tenant_id: TenantId,
    pub workspace_name: String,
    pub email: String,
    pub role: Role,
    pub invited_by: String,
}

/// A new invite and the link token to mail.
#[derive(Debug)]
pub struct NewInvite {
    pub invite: PendingInvite,
    pub token: String,
}

#[tracing::instrument(skip(db, signer))]
pub async fn create(
    db: &Db,
    signer: &Signer,
    tenant: TenantId,
    actor: UserId,
    actor_role: Role,
    email: &Email,
    role: Role,
) -> Result<NewInvite> {
    actor_role.require(Role::Admin)?;
    if role == Role::Owner {
        return Err(Error::invalid("Invite as admin, then make them owner once they have joined."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let already: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
                        WHERE m.tenant_id = $1 AND lower(u.email) = lower($2))",
    )
    .bind(tenant)
    .bind(email.as_str())
    .fetch_one(&mut *tx)
    .await?;
    if already {
        return Err(Error::Conflict(format!("{email} is already a member of this workspace.")));
    }
    // A fresh invite replaces any earlier pending one for the same address.
    sqlx::query(
        "UPDATE invites SET revoked_at = now()
         WHERE tenant_id = $1 AND lower(email) = lower($2) AND accepted_at IS NULL AND revoked_at IS NULL",
    )
    .bind(tenant)
    .bind(email.as_str())
    .execute(&mut *tx)
    .await?;
    let id = Uuid::new_v4();
    let expires_at = Utc::now() + Duration::days(VALID_FOR_DAYS);
    sqlx::query(
        "INSERT INTO invites (id, tenant_id, email, role, invited_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(tenant)
    .bind(email.as_str())
    .bind(role.as_str())
    .bind(actor)
    .bind(expires_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let token = signer.sign(TOKEN_PURPOSE, Some(expires_at.timestamp()), &InviteClaim { t: tenant, i: id });
    Ok(NewInvite { invite: PendingInvite { id: id.into(), email: email.to_string(), role, expires_at }, token })
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn pending(db: &Db, tenant: TenantId) -> Result<Vec<PendingInvite>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows: Vec<(Uuid, String, String, DateTime<Utc>)> = sqlx::query_as(
        "SELECT id, email, role, expires_at FROM invites
         WHERE tenant_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()
         ORDER BY created_at DESC",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    rows.into_iter()
        .map(|(id, email, role, expires_at)| {
            Ok(PendingInvite { id: InviteId(id), email, role: Role::parse(&role)?, expires_at })
        })
        .collect()
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn revoke(db: &Db, tenant: TenantId, actor_role: Role, id: InviteId) -> Result<()> {
    actor_role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n =
        sqlx::query("UPDATE invites SET revoked_at = now() WHERE tenant_id = $1 AND id = $2 AND accepted_at IS NULL")
            .bind(tenant)
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

/// Reads a still-usable invite from its link token.
#[tracing::instrument(skip_all)]
pub async fn preview(db: &Db, signer: &Signer, token: &str) -> Result<InvitePreview> {
    let claim: InviteClaim = signer.verify(TOKEN_PURPOSE, token)?;
    let mut tx = db.tenant_tx(claim.t).await?;
    let row: Option<(String, String, String, Option<String>, bool)> = sqlx::query_as(
        "SELECT t.name, i.email, i.role, coalesce(nullif(u.name, ''), u.email),
                (i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now())
         FROM invites i JOIN tenants t ON t.id = i.tenant_id LEFT JOIN users u ON u.id = i.invited_by
         WHERE i.tenant_id = $1 AND i.id = $2",
    )
    .bind(claim.t)
    .bind(claim.i)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    let (workspace_name, email, role, invited_by, usable) = row.ok_or(Error::NotFound)?;
    if !usable {
        return Err(Error::invalid("This invite has already been used, was withdrawn or has expired."));
    }
    Ok(InvitePreview {
        tenant_id: claim.t,
        workspace_name,
        email,
        role: Role::parse(&role)?,
        invited_by: invited_by.unwrap_or_else(|| "A former member".into()),
    })
}

/// Accepts an invite as `user` (whose address must be the invited one). Single use: the
/// compare-and-set on `accepted_at IS NULL` lets exactly one request through.
#[tracing::instrument(skip(db, signer, token))]
pub async fn accept(db: &Db, signer: &Signer, token: &str, user: UserId, user_email: &str) -> Result<TenantId> {
    let claim: InviteClaim = signer.verify(TOKEN_PURPOSE, token)?;
    let mut tx = db.tenant_tx(claim.t).await?;
    let row: Option<(String, String)> = sqlx::query_as(
        "UPDATE invites SET accepted_at = now(), accepted_by = $3
         WHERE tenant_id = $1 AND id = $2 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()
           AND lower(email) = lower($4)
         RETURNING role, email",
    )
    .bind(claim.t)
    .bind(claim.i)
    .bind(user)
    .bind(user_email)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((role, _)) = row else {
        let invited: Option<(String, bool)> = sqlx::query_as(
            "SELECT email, (accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now())
             FROM invites WHERE tenant_id = $1 AND id = $2",
        )
        .bind(claim.t)
        .bind(claim.i)
        .fetch_optional(&mut *tx)
        .await?;
        return Err(match invited {
            None => Error::NotFound,
            Some((_, false)) => Error::invalid("This invite has already been used, was withdrawn or has expired."),
            Some((email, true)) => {
                Error::invalid(format!("This invite is for {email}. Log in with that address to accept it."))
            }
        });
    };
    sqlx::query(
        "INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT (tenant_id, user_id) DO NOTHING",
    )
    .bind(claim.t)
    .bind(user)
    .bind(role)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(claim.t)
}

/// Creates an invite and queues its email (through the job queue and the mailer).
#[allow(clippy::too_many_arguments)]
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn invite_and_mail(
    db: &Db,
    signer: &Signer,
    jobs: &crate::jobs::Jobs,
    base_url: &str,
    tenant: TenantId,
    actor: UserId,
    actor_role: Role,
    email: &Email,
    role: Role,
) -> Result<PendingInvite> {
    // An invitation is mail from Herald with the inviter's name in it: only an address that
    // proved its mailbox may send one.
    crate::accounts::require_verified_email(db, actor).await?;
    let new = create(db, signer, tenant, actor, actor_role, email, role).await?;
    let ws = crate::workspaces::get(db, tenant).await?;
    let inviter = crate::users::get_user(db, actor).await?;
    let inviter = if inviter.name.is_empty() { inviter.email } else { inviter.name };
    let link = format!("{}/invite/{}", base_url.trim_end_matches('/'), new.token);
    if let Err(e) = jobs.enqueue_workspace_mail(tenant, invite_mail(email, &ws.name, &inviter, role, &link)).await {
        // No mail, no invite: a refused mail (a quota, `mail_quota`) leaves nothing pending.
        if let Err(revoke) = revoke(db, tenant, actor_role, new.invite.id).await {
            tracing::warn!(error = %revoke, "could not withdraw an invite whose mail was refused");
        }
        return Err(e);
    }
    Ok(new.invite)
}

fn invite_mail(
    to: &Email,
    workspace: &str,
    inviter: &str,
    role: Role,
    link: &str,
) -> crate::sending::mail::OutgoingMail {
    use crate::sending::mail::escape_html as e;
    // Workspace and inviter names are user input: the subject is Herald's sentence with the
    // workspace's name quoted and cut short (the inviter is named in the body only), and both are
    // escaped in HTML.
    let subject = format!("Herald: an invitation to the workspace {}", crate::sending::mail::subject_name(workspace));
    let text = format!(
        "{inviter} invited you to join the workspace “{workspace}” on Herald as {role}.\n\n\
         Accept the invite: {link}\n\nThe link works once and expires in {VALID_FOR_DAYS} days. \
         If you did not expect this, ignore this email."
    );
    let html = format!(
        "<div style=\"font-family:sans-serif;max-width:520px\">\
         <p>{} invited you to join the workspace <strong>{}</strong> on Herald as <strong>{role}</strong>.</p>\
         <p><a href=\"{}\" style=\"display:inline-block;background:#4f46e5;color:#fff;padding:10px 18px;border-radius:6px;text-decoration:none\">Accept the invite</a></p>\
         <p style=\"color:#64748b;font-size:13px\">Or open this link: {}<br>It works once and expires in {VALID_FOR_DAYS} days. If you did not expect this, ignore this email.</p></div>",
        e(inviter),
        e(workspace),
        e(link),
        e(link)
    );
    crate::sending::mail::OutgoingMail { to: to.to_string(), subject, html, text, ..Default::default() }
}
