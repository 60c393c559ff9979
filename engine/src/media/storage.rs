//! Where an image's bytes live, behind one interface. Postgres is the default: nothing to set
//! up, and the bytes go in the same transaction as the row that makes them servable.

use crate::domain::TenantId;
use crate::error::Result;
use crate::infra::db::{Db, Tx};

#[derive(Clone, Debug, Default)]
pub enum MediaStorage {
    /// `media_blobs`, beside the `media` rows.
    #[default]
    Postgres,
}

impl MediaStorage {
    /// Stores `bytes` under `hash`, in `tx` (the caller inserts the row after, in the same one).
    pub(crate) async fn put(&self, tx: &mut Tx, tenant: TenantId, hash: &str, bytes: &[u8]) -> Result<()> {
        match self {
            MediaStorage::Postgres => {
                sqlx::query(
                    "INSERT INTO media_blobs (tenant_id, hash, data) VALUES ($1, $2, $3)
                     ON CONFLICT (tenant_id, hash) DO NOTHING",
                )
                .bind(tenant)
                .bind(hash)
                .bind(bytes)
                .execute(&mut **tx)
                .await?;
            }
        }
        Ok(())
    }

    /// The bytes stored under `hash`, if any.
    pub(crate) async fn get(&self, db: &Db, tenant: TenantId, hash: &str) -> Result<Option<Vec<u8>>> {
        match self {
            MediaStorage::Postgres => {
                let mut tx = db.tenant_tx(tenant).await?;
                let data = sqlx::query_scalar("SELECT data FROM media_blobs WHERE tenant_id = $1 AND hash = $2")
                    .bind(tenant)
                    .bind(hash)
                    .fetch_optional(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(data)
            }
        }
    }

    /// Forgets the bytes under `hash`, in the transaction that deletes their row.
    pub(crate) async fn remove(&self, tx: &mut Tx, tenant: TenantId, hash: &str) -> Result<()> {
        match self {
            MediaStorage::Postgres => {
                sqlx::query("DELETE FROM media_blobs WHERE tenant_id = $1 AND hash = $2")
                    .bind(tenant)
                    .bind(hash)
                    .execute(&mut **tx)
                    .await?;
            }
        }
        Ok(())
    }
}
