//! A workspace's transactional sending settings: which identity carries it (so receipts and
//! resets can use a different domain and reputation than newsletters) and the default sender.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{Email, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, sqlx::FromRow)]
pub struct TransactionalSettings {
    /// `None`: the server's default SMTP server.
    pub identity_id: Option<Uuid>,
    pub from_name: String,
    pub from_email: String,
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn get(db: &Db, tenant: TenantId) -> Result<TransactionalSettings> {
    let mut tx = db.tenant_tx(tenant).await?;
    let s = sqlx::query_as(
        "SELECT transactional_identity_id AS identity_id, transactional_from_name AS from_name,
                transactional_from_email AS from_email
         FROM tenants WHERE id = $1",
    )
    .bind(tenant)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(s)
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn save(db: &Db, tenant: TenantId, role: Role, s: &TransactionalSettings) -> Result<TransactionalSettings> {
    role.require(Role::Admin)?;
    let from_email = s.from_email.trim();
    if !from_email.is_empty() {
        Email::parse(from_email)?;
    }
    if s.from_name.chars().any(char::is_control) || s.from_name.chars().count() > 100 {
        return Err(Error::invalid("The sender name must be one line of at most 100 characters."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    if let Some(id) = s.identity_id {
        let known: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sending_identities WHERE tenant_id = $1 AND id = $2)")
                .bind(tenant)
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        if !known {
            return Err(Error::invalid("That sending identity does not exist."));
        }
    }
    sqlx::query(
        "UPDATE tenants SET transactional_identity_id = $2, transactional_from_name = $3, transactional_from_email = $4
         WHERE id = $1",
    )
    .bind(tenant)
    .bind(s.identity_id)
    .bind(s.from_name.trim())
    .bind(from_email)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    get(db, tenant).await
}
