//! The audit log: an append-only record per workspace of who (a member or an API key) did what
//! to which object, when and from which address.
//!
//! The surfaces record an entry after the use case succeeded (a server function through
//! `herald_app::ssr::Member::audit`, a REST handler through the API's `audit`), so every way
//! of doing a listed thing leaves the same entry. A failed write is logged and does not undo
//! what was done: the action happened, and the log is for reading, not for permission.
//! The table is insert-and-select only for the app's role (see the migration).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::{TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::Db;

/// Who did it. The address is the client's, as the server's edge worked it out.
#[derive(Clone, Debug)]
pub enum Actor {
    User {
        id: UserId,
        ip: String,
    },
    ApiKey {
        id: Uuid,
        ip: String,
    },
    /// `herald admin …` at the command line.
    Operator,
}

pub use herald_types::{ActorKind, AuditAction as Action, AuditEntry as Entry};

/// Appends one entry. `object` names what was acted on (a campaign id, an address, a key's
/// name); `detail` holds what else a reader of the log needs (a new role, a time).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn record(
    db: &Db,
    tenant: TenantId,
    actor: &Actor,
    action: Action,
    object: &str,
    detail: serde_json::Value,
) -> Result<()> {
    let no_ip = String::new();
    let (user, key, ip) = match actor {
        Actor::User { id, ip } => (Some(*id), None, ip),
        Actor::ApiKey { id, ip } => (None, Some(*id), ip),
        Actor::Operator => (None, None, &no_ip),
    };
    let mut tx = db.tenant_tx(tenant).await?;
    // The actor's name as it is now: the entry keeps it after the account or key is gone.
    sqlx::query(
        "INSERT INTO audit_log (tenant_id, actor_user_id, actor_key_id, actor, action, object, detail, ip)
         VALUES ($1, $2, $3,
                 coalesce((SELECT email FROM users WHERE id = $2),
                          (SELECT 'API key “' || name || '”' FROM api_keys WHERE id = $3),
                          CASE WHEN $2::uuid IS NULL AND $3::uuid IS NULL THEN 'the operator' END, 'unknown'),
                 $4, $5, $6, $7)",
    )
    .bind(tenant)
    .bind(user)
    .bind(key)
    .bind(action.as_str())
    .bind(object)
    .bind(detail)
    .bind(ip)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// [`record`], with a failure logged instead of returned (see the module comment).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn note(db: &Db, tenant: TenantId, actor: &Actor, action: Action, object: &str, detail: serde_json::Value) {
    if let Err(e) = record(db, tenant, actor, action, object, detail).await {
        tracing::error!(error = ?e, %tenant, action = action.as_str(), "audit entry not written");
    }
}

#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub action: Option<Action>,
    /// Part of the actor's name (case-insensitive).
    pub actor: Option<String>,
    /// Entries older than this id (the previous page's last).
    pub before: Option<i64>,
    pub limit: i64,
}

/// Newest first.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId, filter: &Filter) -> Result<Vec<Entry>> {
    // Callers check their page size; this bounds one read (a page and the row that says more).
    if !(1..=1000).contains(&filter.limit) {
        return Err(Error::invalid("limit must be between 1 and 1000."));
    }
    let actor = filter.actor.as_deref().map(str::trim).filter(|a| !a.is_empty()).map(|a| {
        let escaped = a.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        format!("%{escaped}%")
    });
    let mut tx = db.tenant_tx(tenant).await?;
    #[allow(clippy::type_complexity)]
    let rows: Vec<(
        i64,
        DateTime<Utc>,
        ActorKind,
        String,
        Option<String>,
        String,
        String,
        Option<String>,
        serde_json::Value,
        String,
    )> =
        sqlx::query_as(
            // The name of an object kept as an id, while it exists (the log reads as sentences).
            "SELECT a.id, a.at,
                CASE WHEN a.actor_user_id IS NOT NULL THEN 'user' WHEN a.actor_key_id IS NOT NULL THEN 'api_key' ELSE 'operator' END,
                a.actor,
                (SELECT nullif(u.name, '') FROM memberships m JOIN users u ON u.id = m.user_id
                  WHERE m.tenant_id = a.tenant_id AND m.user_id = a.actor_user_id),
                a.action, a.object,
                CASE WHEN a.action LIKE 'campaign.%' THEN
                         (SELECT c.name FROM campaigns c WHERE c.tenant_id = a.tenant_id AND c.id::text = a.object)
                     WHEN a.action LIKE 'automation.%' THEN
                         (SELECT x.name FROM automations x WHERE x.tenant_id = a.tenant_id AND x.id::text = a.object)
                     WHEN a.action = 'api_key.revoked' THEN
                         (SELECT k.name FROM api_keys k WHERE k.tenant_id = a.tenant_id AND k.id::text = a.object)
                     WHEN a.action = 'import.started' THEN
                         (SELECT i.file_name FROM imports i WHERE i.tenant_id = a.tenant_id AND i.id::text = a.object)
                END,
                a.detail, a.ip FROM audit_log a
         WHERE a.tenant_id = $1 AND ($2::text IS NULL OR a.action = $2) AND ($3::text IS NULL OR a.actor ILIKE $3)
           AND ($4::bigint IS NULL OR a.id < $4)
         ORDER BY a.id DESC LIMIT $5",
    )
    .bind(tenant)
    .bind(filter.action.map(Action::as_str))
    .bind(actor)
    .bind(filter.before)
    .bind(filter.limit)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, at, actor_kind, actor, actor_name, action, object, object_name, detail, ip)| {
            // An action this build does not know (written by a newer one) is skipped, not a 500.
            let action = Action::parse(&action)?;
            Some(Entry { id, at, actor_kind, actor, actor_name, action, object, object_name, detail, ip })
        })
        .collect())
}
