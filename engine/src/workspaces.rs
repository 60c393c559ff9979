//! Workspaces (tenants), their settings and their members.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::{Email, Role, Slug, TenantId, UserId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::Db;

#[derive(Clone, Debug, Serialize)]
pub struct WorkspaceSummary {
    pub id: TenantId,
    pub name: String,
    pub slug: String,
    pub role: Role,
}

#[derive(Clone, Debug, Serialize, sqlx::FromRow)]
pub struct Workspace {
    pub id: TenantId,
    pub name: String,
    pub slug: String,
    pub postal_address: String,
    pub default_from_name: String,
    pub default_from_email: String,
    /// An IANA zone (`Europe/Berlin`): where an automation's "wait until Monday 09:00" falls
    /// for readers without a zone of their own when the step names none.
    pub time_zone: String,
}

impl Workspace {
    /// CAN-SPAM: no campaign may be sent before a physical postal address is on file.
    pub fn can_send_campaigns(&self) -> bool {
        !self.postal_address.trim().is_empty()
    }
}

pub use herald_types::Member;

#[derive(Clone, Debug)]
pub struct SettingsUpdate {
    pub name: String,
    pub postal_address: String,
    pub default_from_name: String,
    pub default_from_email: String,
    /// None keeps the workspace's zone.
    pub time_zone: Option<String>,
}

fn check_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 80 {
        return Err(Error::invalid("The workspace name needs 1–80 characters."));
    }
    Ok(name.to_string())
}

/// Creates a workspace with `owner` as its owner; it counts against `owner`'s account limits
/// ([`crate::account_limits`]).
#[tracing::instrument(skip(db))]
pub async fn create(db: &Db, owner: UserId, name: &str, slug: Option<&str>) -> Result<WorkspaceSummary> {
    let name = check_name(name)?;
    let slug = match slug.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => Slug::parse(s)?,
        None => Slug::from_name(&name)?,
    };
    let id = TenantId::new();
    let mut tx = db.tenant_user_tx(id, owner).await?;
    crate::account_limits::check_new_workspace(&mut tx, owner).await?;
    let res = sqlx::query("INSERT INTO tenants (id, name, slug, account_id) VALUES ($1, $2, $3, $4)")
        .bind(id)
        .bind(&name)
        .bind(slug.as_str())
        .bind(owner)
        .execute(&mut *tx)
        .await;
    if let Err(e) = res {
        return Err(if is_unique_violation(&e, "tenants_slug_key") {
            Error::Conflict(format!("The slug “{slug}” is taken. Choose another."))
        } else {
            e.into()
        });
    }
    sqlx::query("INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'owner')")
        .bind(id)
        .bind(owner)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(WorkspaceSummary { id, name, slug: slug.to_string(), role: Role::Owner })
}

/// The workspaces `user` belongs to, by name.
#[tracing::instrument(skip_all)]
pub async fn list_for_user(db: &Db, user: UserId) -> Result<Vec<WorkspaceSummary>> {
    let mut tx = db.user_tx(user).await?;
    let rows: Vec<(TenantId, String, String, String)> = sqlx::query_as(
        "SELECT t.id, t.name, t.slug, m.role FROM memberships m JOIN tenants t ON t.id = m.tenant_id
         WHERE m.user_id = $1 ORDER BY lower(t.name), t.slug",
    )
    .bind(user)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    rows.into_iter()
        .map(|(id, name, slug, role)| Ok(WorkspaceSummary { id, name, slug, role: Role::parse(&role)? }))
        .collect()
}

/// `user`'s role in `tenant`, or `None` when not a member.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn role_of(db: &Db, tenant: TenantId, user: UserId) -> Result<Option<Role>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let role: Option<String> = sqlx::query_scalar("SELECT role FROM memberships WHERE tenant_id = $1 AND user_id = $2")
        .bind(tenant)
        .bind(user)
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(role.map(|r| Role::parse(&r)).transpose()?)
}

/// What a request in `tenant` may do as `user`: their role, or `None` when not a member. A
/// member without two-factor in a workspace that requires it is `Refused` (they can still switch
/// to it and see why, and turn it on from their account).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn access(db: &Db, tenant: TenantId, user: UserId) -> Result<Option<Role>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let row: Option<(String, bool)> = sqlx::query_as(
        "SELECT m.role, t.require_two_factor AND u.totp_enabled_at IS NULL
         FROM memberships m JOIN tenants t ON t.id = m.tenant_id JOIN users u ON u.id = m.user_id
         WHERE m.tenant_id = $1 AND m.user_id = $2",
    )
    .bind(tenant)
    .bind(user)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    match row {
        None => Ok(None),
        Some((_, true)) => Err(Error::Refused(TWO_FACTOR_REQUIRED.into())),
        Some((role, false)) => Ok(Some(Role::parse(&role)?)),
    }
}

/// A rule every member of a workspace follows (Settings → Members → Team rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TeamRule {
    /// Every member logs in with two-factor (`two_factor`).
    TwoFactor,
    /// Authors ask, owners and admins approve each send (`campaigns::approval`).
    SendApproval,
}

impl TeamRule {
    fn column(self) -> &'static str {
        match self {
            TeamRule::TwoFactor => "require_two_factor",
            TeamRule::SendApproval => "require_send_approval",
        }
    }
}

/// Whether the workspace has `rule` on.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn team_rule(db: &Db, tenant: TenantId, rule: TeamRule) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    let on: Option<bool> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {} FROM tenants WHERE id = $1", rule.column())))
            .bind(tenant)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    on.ok_or(Error::NotFound)
}

/// Turns `rule` on or off; owners and admins only. (Preconditions of a rule, such as having
/// two-factor oneself, are checked by its module before this.)
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn set_team_rule(db: &Db, tenant: TenantId, actor: Role, rule: TeamRule, on: bool) -> Result<()> {
    actor.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE tenants SET {} = $2, updated_at = now() WHERE id = $1",
        rule.column()
    )))
    .bind(tenant)
    .bind(on)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// What a member without two-factor reads in a workspace that requires it.
pub const TWO_FACTOR_REQUIRED: &str =
    "This workspace requires two-factor authentication of every member. Turn it on under Your account, then come back.";

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn get(db: &Db, tenant: TenantId) -> Result<Workspace> {
    let mut tx = db.tenant_tx(tenant).await?;
    let ws = sqlx::query_as(
        "SELECT id, name, slug, postal_address, default_from_name, default_from_email, time_zone FROM tenants WHERE id = $1",
    )
    .bind(tenant)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    tx.commit().await?;
    Ok(ws)
}

#[tracing::instrument(skip_all)]
pub async fn id_for_slug(db: &Db, slug: &str) -> Result<TenantId> {
    let id: Option<TenantId> =
        sqlx::query_scalar("SELECT tenant_id_for_slug($1)").bind(slug).fetch_one(db.pool()).await?;
    id.ok_or(Error::NotFound)
}

#[tracing::instrument(skip(db, update))]
pub async fn update_settings(db: &Db, tenant: TenantId, update: SettingsUpdate) -> Result<Workspace> {
    let name = check_name(&update.name)?;
    let postal_address = update.postal_address.trim().to_string();
    if postal_address.chars().count() > 500 {
        return Err(Error::invalid("The postal address can have at most 500 characters."));
    }
    let from_name = update.default_from_name.trim().to_string();
    if from_name.chars().any(char::is_control) || from_name.chars().count() > 100 {
        return Err(Error::invalid("The sender name must be one line of at most 100 characters."));
    }
    let from_email = match update.default_from_email.trim() {
        "" => String::new(),
        s => Email::parse(s)?.to_string(),
    };
    let time_zone = update.time_zone.map(|z| z.trim().to_string());
    let mut tx = db.tenant_tx(tenant).await?;
    if let Some(zone) = &time_zone {
        let known: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1)")
            .bind(zone)
            .fetch_one(&mut *tx)
            .await?;
        if !known {
            return Err(Error::invalid("Choose a time zone such as Europe/Berlin."));
        }
    }
    let ws = sqlx::query_as(
        "UPDATE tenants SET name = $2, postal_address = $3, default_from_name = $4, default_from_email = $5,
                time_zone = coalesce($6, time_zone), updated_at = now()
         WHERE id = $1
         RETURNING id, name, slug, postal_address, default_from_name, default_from_email, time_zone",
    )
    .bind(tenant)
    .bind(name)
    .bind(postal_address)
    .bind(from_name)
    .bind(from_email)
    .bind(time_zone)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    // Drafts written before there was a default sender take it now (new ones take it when they
    // are made): otherwise they stay stuck at "Choose a sender address first".
    sqlx::query(
        "UPDATE campaigns SET from_email = t.default_from_email,
                from_name = CASE WHEN campaigns.from_name = '' THEN t.default_from_name ELSE campaigns.from_name END
         FROM tenants t
         WHERE t.id = $1 AND campaigns.tenant_id = $1 AND campaigns.status IN ('draft', 'scheduled')
           AND campaigns.from_email = '' AND t.default_from_email <> ''",
    )
    .bind(tenant)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(ws)
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn members(db: &Db, tenant: TenantId) -> Result<Vec<Member>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows: Vec<(UserId, String, String, String, DateTime<Utc>, bool)> = sqlx::query_as(
        "SELECT u.id, u.email, u.name, m.role, m.created_at, u.totp_enabled_at IS NOT NULL
         FROM memberships m JOIN users u ON u.id = m.user_id
         WHERE m.tenant_id = $1 ORDER BY m.created_at, lower(u.email)",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    rows.into_iter()
        .map(|(user_id, email, name, role, joined_at, two_factor)| {
            Ok(Member { user_id, email, name, role: Role::parse(&role)?, joined_at, two_factor })
        })
        .collect()
}

/// Changes a member's role. Only owners grant or take away ownership, and the last owner stays.
#[tracing::instrument(skip(db))]
pub async fn set_role(db: &Db, tenant: TenantId, actor: Role, user: UserId, role: Role) -> Result<()> {
    actor.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let current = locked_role(&mut tx, tenant, user).await?;
    if (current == Role::Owner || role == Role::Owner) && actor != Role::Owner {
        return Err(Error::Forbidden);
    }
    if current == Role::Owner && role != Role::Owner {
        ensure_another_owner(&mut tx, tenant).await?;
    }
    sqlx::query("UPDATE memberships SET role = $3 WHERE tenant_id = $1 AND user_id = $2")
        .bind(tenant)
        .bind(user)
        .bind(role.as_str())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Removes a member. Admins may remove non-owners; owners anyone but the last owner.
#[tracing::instrument(skip(db))]
pub async fn remove_member(db: &Db, tenant: TenantId, actor: Role, user: UserId) -> Result<()> {
    actor.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let current = locked_role(&mut tx, tenant, user).await?;
    if current == Role::Owner {
        if actor != Role::Owner {
            return Err(Error::Forbidden);
        }
        ensure_another_owner(&mut tx, tenant).await?;
    }
    sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2")
        .bind(tenant)
        .bind(user)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Leaves a workspace, whatever one's role; the last owner cannot (someone must stay in charge).
#[tracing::instrument(skip(db))]
pub async fn leave(db: &Db, tenant: TenantId, user: UserId) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    if locked_role(&mut tx, tenant, user).await? == Role::Owner {
        ensure_another_owner(&mut tx, tenant).await.map_err(|_| {
            Error::invalid("You are this workspace's only owner: make someone else owner before you leave.")
        })?;
    }
    sqlx::query("DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2")
        .bind(tenant)
        .bind(user)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// A member's role, with their membership row locked until the transaction ends.
async fn locked_role(tx: &mut crate::infra::db::Tx, tenant: TenantId, user: UserId) -> Result<Role> {
    let role: Option<String> =
        sqlx::query_scalar("SELECT role FROM memberships WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE")
            .bind(tenant)
            .bind(user)
            .fetch_optional(&mut **tx)
            .await?;
    Ok(Role::parse(&role.ok_or(Error::NotFound)?)?)
}

async fn ensure_another_owner(tx: &mut crate::infra::db::Tx, tenant: TenantId) -> Result<()> {
    // Lock every owner row so two concurrent demotions cannot both see "another owner".
    let owners: Vec<UserId> =
        sqlx::query_scalar("SELECT user_id FROM memberships WHERE tenant_id = $1 AND role = 'owner' FOR UPDATE")
            .bind(tenant)
            .fetch_all(&mut **tx)
            .await?;
    if owners.len() < 2 {
        return Err(Error::invalid("A workspace needs at least one owner. Make someone else owner first."));
    }
    Ok(())
}

/// The workspace's sending policy (seed 004).
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct SendingPolicy {
    /// At most one campaign email per reader per this many hours; `None` = no cap.
    pub frequency_cap_hours: Option<i32>,
    /// A queued message older than this expires instead of sending.
    pub max_queue_age_hours: i32,
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn sending_policy(db: &Db, tenant: TenantId) -> Result<SendingPolicy> {
    let mut tx = db.tenant_tx(tenant).await?;
    let (frequency_cap_hours, max_queue_age_hours): (Option<i32>, i32) =
        sqlx::query_as("SELECT frequency_cap_hours, max_queue_age_hours FROM tenants WHERE id = $1")
            .bind(tenant)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(Error::NotFound)?;
    tx.commit().await?;
    Ok(SendingPolicy { frequency_cap_hours, max_queue_age_hours })
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn set_sending_policy(db: &Db, tenant: TenantId, role: Role, policy: SendingPolicy) -> Result<()> {
    role.require(Role::Admin)?;
    if let Some(h) = policy.frequency_cap_hours
        && !(1..=8760).contains(&h)
    {
        return Err(Error::invalid("The frequency cap must be 1 to 8,760 hours, or off."));
    }
    if !(1..=8760).contains(&policy.max_queue_age_hours) {
        return Err(Error::invalid("The maximum queue age must be 1 to 8,760 hours."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE tenants SET frequency_cap_hours = $2, max_queue_age_hours = $3, updated_at = now() WHERE id = $1",
    )
    .bind(tenant)
    .bind(policy.frequency_cap_hours)
    .bind(policy.max_queue_age_hours)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
