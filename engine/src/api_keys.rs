//! Workspace API keys: shown once at creation, stored as a SHA-256 hash (the key is 256 bits of
//! randomness, so a slow hash adds nothing), listed by prefix, revocable.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use rand::RngCore;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::domain::{Role, TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::Db;

const KEY_PREFIX: &str = "hrld_";

pub use herald_types::{ApiKey, ApiKeyId};

/// The authenticated caller of an API request.
#[derive(Clone, Debug)]
pub struct ApiCaller {
    pub key_id: Uuid,
    pub tenant: TenantId,
    /// What the key may do (its role, at most admin).
    pub role: Role,
    /// The client's address (set by the HTTP layer), for the audit log.
    pub ip: String,
}

impl ApiCaller {
    /// Appends an audit entry for what this key just did (see [`crate::audit`]).
    #[tracing::instrument(skip_all)]
    pub async fn audit(&self, db: &Db, action: crate::audit::Action, object: impl ToString, detail: serde_json::Value) {
        let actor = crate::audit::Actor::ApiKey { id: self.key_id, ip: self.ip.clone() };
        crate::audit::note(db, self.tenant, &actor, action, &object.to_string(), detail).await;
    }
}

fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Creates a key that acts as `role` (admin, author or viewer); returns it with the one and only
/// copy of its secret. `actor` is its maker (`None`: an operator at the CLI): the key stops
/// working while its maker is not an admin of the workspace, and dies with the maker's account.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create(
    db: &Db,
    tenant: TenantId,
    actor: Option<UserId>,
    actor_role: Role,
    name: &str,
    role: Role,
) -> Result<(ApiKey, String)> {
    actor_role.require(Role::Admin)?;
    if role == Role::Owner {
        return Err(Error::Invalid(herald_types::Invalid::new("A key acts as admin, author or viewer.").at("role")));
    }
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 80 {
        return Err(Error::invalid("Give the key a name of 1–80 characters."));
    }
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let key = format!("{KEY_PREFIX}{}", B64.encode(secret));
    let prefix: String = key.chars().take(KEY_PREFIX.len() + 6).collect();
    let id = ApiKeyId::new();
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "INSERT INTO api_keys (id, tenant_id, name, prefix, key_hash, created_by, role) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(tenant)
    .bind(name)
    .bind(&prefix)
    .bind(hash_key(&key))
    .bind(actor)
    .bind(role)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let key_view = list(db, tenant).await?.into_iter().find(|k| k.id == id).ok_or(Error::NotFound)?;
    Ok((key_view, key))
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<ApiKey>> {
    let mut tx = db.tenant_tx(tenant).await?;
    // The maker's address comes through their membership: a member sees the addresses of the
    // workspace's members, and a maker who left shows as an inactive key without an address.
    let keys = sqlx::query_as::<_, ApiKey>(
        "SELECT k.id, k.name, k.prefix, k.created_at, k.last_used_at, k.revoked_at, k.role,
                (SELECT u.email FROM users u WHERE u.id = k.created_by) AS created_by,
                (k.created_by IS NULL OR EXISTS (SELECT 1 FROM memberships m WHERE m.tenant_id = k.tenant_id
                     AND m.user_id = k.created_by AND m.role IN ('owner', 'admin'))) AS active
         FROM api_keys k
         WHERE k.tenant_id = $1 ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(keys)
}

/// The member who made a key (`None` for a key the operator made at the command line): what
/// the key does in a person's name (an invitation) is done in theirs.
pub async fn maker(db: &Db, tenant: TenantId, key: Uuid) -> Result<Option<crate::domain::UserId>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let maker: Option<Option<crate::domain::UserId>> =
        sqlx::query_scalar("SELECT created_by FROM api_keys WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(maker.flatten())
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn revoke(db: &Db, tenant: TenantId, actor_role: Role, id: ApiKeyId) -> Result<()> {
    actor_role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n =
        sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL")
            .bind(tenant)
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

/// Resolves a bearer key to its workspace; unknown, malformed and revoked keys are all
/// `Unauthenticated`. A key whose maker is no longer an admin of the workspace, or whose
/// account or workspace is suspended, is refused (403) with what to do.
#[tracing::instrument(skip_all)]
pub async fn authenticate(db: &Db, key: &str) -> Result<ApiCaller> {
    if !key.starts_with(KEY_PREFIX) || key.len() > 100 {
        return Err(Error::Unauthenticated);
    }
    let row: Option<(Uuid, TenantId, Role, String)> =
        sqlx::query_as("SELECT key_id, tenant_id, role, standing FROM authenticate_api_key($1)")
            .bind(hash_key(key))
            .fetch_optional(db.pool())
            .await?;
    let Some((key_id, tenant, role, standing)) = row else { return Err(Error::Unauthenticated) };
    match standing.as_str() {
        "ok" => Ok(ApiCaller { key_id, tenant, role, ip: String::new() }),
        "suspended" => Err(Error::Refused(
            "This workspace's account is suspended: its keys do nothing until the operator lifts it.".into(),
        )),
        _ => Err(Error::Refused(
            "The member who made this key is no longer an admin of the workspace: an admin must make a new one.".into(),
        )),
    }
}
