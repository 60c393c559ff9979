//! Where an image's bytes live, behind one interface. Postgres is the default: nothing to set
//! up, and the bytes go in the same transaction as the row that makes them servable. An
//! S3-compatible bucket is the other, for deployments with several machines (and images that
//! should not live in the database's backups).
//!
//! With a bucket, the order of writes keeps the rule "a row exists only once its bytes do":
//! saving puts the object first and inserts the row after, under the workspace's storage lock;
//! deleting removes the row first and the object only after that commits, under the same lock
//! and only when no row names the hash again ([`MediaStorage::release`]). A failure in between
//! leaves an unreferenced object (content-addressed, harmless), never a row without bytes.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStoreExt, PutPayload, RetryConfig};

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};

#[derive(Clone, Debug, Default)]
pub enum MediaStorage {
    /// `media_blobs`, beside the `media` rows.
    #[default]
    Postgres,
    /// Objects `media/{workspace}/{sha256}` in a bucket.
    S3(S3Bucket),
}

/// How to reach a bucket (`HERALD_MEDIA_S3_*`).
#[derive(Clone, PartialEq, Eq)]
pub struct S3Config {
    /// `https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:9000`…; `None` for AWS's own.
    pub endpoint: Option<String>,
    pub bucket: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for S3Config {
    /// Without the secret key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
pub struct S3Bucket {
    store: Arc<AmazonS3>,
    bucket: String,
}

impl std::fmt::Debug for S3Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Bucket").field("bucket", &self.bucket).finish_non_exhaustive()
    }
}

impl S3Bucket {
    /// A client for the bucket (nothing is contacted yet). It retries twice, within ten
    /// seconds, so an upload to an unreachable bucket fails while its author is still waiting.
    pub fn new(config: &S3Config) -> anyhow::Result<S3Bucket> {
        // `new`, not `from_env`: the AWS_* variables of the machine must not redirect it.
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_access_key_id(&config.access_key_id)
            .with_secret_access_key(&config.secret_access_key)
            .with_retry(RetryConfig {
                max_retries: 2,
                retry_timeout: Duration::from_secs(10),
                ..RetryConfig::default()
            })
            .with_client_options(
                ClientOptions::new().with_connect_timeout(Duration::from_secs(5)).with_timeout(Duration::from_secs(30)),
            );
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        }
        let store = builder.build().map_err(|e| anyhow::anyhow!("the media bucket {}: {e}", config.bucket))?;
        Ok(S3Bucket { store: Arc::new(store), bucket: config.bucket.clone() })
    }

    fn path(tenant: TenantId, hash: &str) -> Path {
        Path::from(format!("media/{tenant}/{hash}"))
    }

    async fn put(&self, tenant: TenantId, hash: &str, bytes: &[u8]) -> Result<()> {
        // Content-addressed: writing the same bytes again is harmless.
        self.store.put(&Self::path(tenant, hash), PutPayload::from(bytes.to_vec())).await.map_err(unavailable)?;
        Ok(())
    }

    async fn get(&self, tenant: TenantId, hash: &str) -> Result<Option<Vec<u8>>> {
        match self.store.get(&Self::path(tenant, hash)).await {
            Ok(found) => Ok(Some(found.bytes().await.map_err(unavailable)?.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn delete(&self, tenant: TenantId, hash: &str) -> Result<()> {
        match self.store.delete(&Self::path(tenant, hash)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }
}

/// The bucket failed: logged in full, told to the author as a temporary problem (the bucket's
/// own error text can name hosts and keys).
fn unavailable(e: object_store::Error) -> Error {
    tracing::error!(error = %e, "media bucket");
    Error::Unavailable("Image storage cannot be reached right now. Try again in a minute.".into())
}

impl MediaStorage {
    /// Stores `bytes` under `hash`, in `tx` (the caller inserts the row after, in the same one,
    /// holding the workspace's storage lock).
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
            // Boxed: the client's futures are large, and would be inlined into every caller's.
            MediaStorage::S3(bucket) => Box::pin(bucket.put(tenant, hash, bytes)).await?,
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
            MediaStorage::S3(bucket) => Box::pin(bucket.get(tenant, hash)).await,
        }
    }

    /// Forgets the bytes under `hash`, in the transaction that deletes their row (Postgres). A
    /// bucket's object goes after that commits: [`MediaStorage::release`].
    pub(crate) async fn remove(&self, tx: &mut Tx, tenant: TenantId, hash: &str) -> Result<()> {
        match self {
            MediaStorage::Postgres => {
                sqlx::query("DELETE FROM media_blobs WHERE tenant_id = $1 AND hash = $2")
                    .bind(tenant)
                    .bind(hash)
                    .execute(&mut **tx)
                    .await?;
            }
            MediaStorage::S3(_) => {}
        }
        Ok(())
    }

    /// After a deleted row committed: deletes the bucket's object, unless the same image was
    /// uploaded again meanwhile (under the storage lock that uploads take, so none can slip in
    /// between the check and the delete).
    pub(crate) async fn release(&self, db: &Db, tenant: TenantId, hash: &str) -> Result<()> {
        let MediaStorage::S3(bucket) = self else { return Ok(()) };
        let mut tx = db.tenant_tx(tenant).await?;
        super::lock_storage(&mut tx, tenant).await?;
        let again: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM media WHERE tenant_id = $1 AND hash = $2)")
            .bind(tenant)
            .bind(hash)
            .fetch_one(&mut *tx)
            .await?;
        if !again {
            Box::pin(bucket.delete(tenant, hash)).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
