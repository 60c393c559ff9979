//! Where an image's bytes live, behind one interface. Postgres is the default: nothing to set
//! up, and the bytes go in the same transaction as the row that makes them servable. An
//! S3-compatible bucket is the other, for deployments with several machines (and images that
//! should not live in the database's backups).
//!
//! A bucket keeps one object per `media` row, `media/{workspace}/{sha256}/{media id}`, written
//! before the row is inserted and deleted after the row is gone. So a row never exists without
//! its bytes, whatever fails in between (a failure leaves an unreferenced object, which costs
//! storage and breaks nothing), no bucket call runs inside a transaction or under a lock, and a
//! late delete can only ever remove its own row's object, never the one an upload of the same
//! image made after it.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt as _;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore as _, ObjectStoreExt as _, PutPayload, RetryConfig};

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use herald_types::MediaId;

#[derive(Clone, Debug, Default)]
pub enum MediaStorage {
    /// `media_blobs`, beside the `media` rows.
    #[default]
    Postgres,
    /// One object per row in a bucket.
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

    /// The object of one `media` row.
    pub fn object(tenant: TenantId, hash: &str, id: MediaId) -> Path {
        Path::from(format!("media/{tenant}/{hash}/{id}"))
    }

    async fn put(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.store.put(path, PutPayload::from(bytes.to_vec())).await.map_err(unavailable)?;
        Ok(())
    }

    async fn get(&self, path: &Path) -> Result<Option<Vec<u8>>> {
        match self.store.get(path).await {
            Ok(found) => Ok(Some(found.bytes().await.map_err(unavailable)?.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn delete(&self, path: &Path) -> Result<()> {
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Every object of a deleted workspace.
    async fn purge(&self, tenant: TenantId) -> Result<u64> {
        let prefix = Path::from(format!("media/{tenant}"));
        let objects: Vec<_> = self.store.list(Some(&prefix)).try_collect().await.map_err(unavailable)?;
        for meta in &objects {
            self.delete(&meta.location).await?;
        }
        Ok(objects.len() as u64)
    }
}

/// The bucket failed: logged in full, told to the author as a temporary problem (the bucket's
/// own error text can name hosts and keys).
fn unavailable(e: object_store::Error) -> Error {
    tracing::error!(error = %e, "media bucket");
    Error::Unavailable("Image storage cannot be reached right now. Try again in a minute.".into())
}

impl MediaStorage {
    /// Before the row's transaction: a bucket's object for row `id`. (The client's futures are
    /// large: boxed, so they are not inlined into every caller's.)
    pub(crate) async fn put_object(&self, tenant: TenantId, hash: &str, id: MediaId, bytes: &[u8]) -> Result<()> {
        match self {
            MediaStorage::Postgres => Ok(()),
            MediaStorage::S3(bucket) => Box::pin(bucket.put(&S3Bucket::object(tenant, hash, id), bytes)).await,
        }
    }

    /// Inside the row's transaction: Postgres's copy of the bytes (the caller inserts the row
    /// after, in the same transaction).
    pub(crate) async fn put_in(&self, tx: &mut Tx, tenant: TenantId, hash: &str, bytes: &[u8]) -> Result<()> {
        if let MediaStorage::Postgres = self {
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
        Ok(())
    }

    /// The bytes of row `id` (`hash`), if any. A bucket that lacks them falls back to Postgres:
    /// images stored before a switch to a bucket keep being served.
    pub(crate) async fn get(&self, db: &Db, tenant: TenantId, hash: &str, id: MediaId) -> Result<Option<Vec<u8>>> {
        if let MediaStorage::S3(bucket) = self
            && let Some(bytes) = Box::pin(bucket.get(&S3Bucket::object(tenant, hash, id))).await?
        {
            return Ok(Some(bytes));
        }
        let mut tx = db.tenant_tx(tenant).await?;
        let data = sqlx::query_scalar("SELECT data FROM media_blobs WHERE tenant_id = $1 AND hash = $2")
            .bind(tenant)
            .bind(hash)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(data)
    }

    /// Inside the transaction that deletes the row: Postgres's copy of the bytes.
    pub(crate) async fn remove_in(&self, tx: &mut Tx, tenant: TenantId, hash: &str) -> Result<()> {
        // Also with a bucket: bytes stored before the switch go with their row.
        sqlx::query("DELETE FROM media_blobs WHERE tenant_id = $1 AND hash = $2")
            .bind(tenant)
            .bind(hash)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// After the row is gone (or was never inserted): its object, in a task of its own, so a
    /// request that is dropped half-way still finishes it. `then` runs once it is done.
    pub(crate) fn discard_object(
        &self,
        tenant: TenantId,
        hash: &str,
        id: MediaId,
        then: impl FnOnce() + Send + 'static,
    ) {
        let MediaStorage::S3(bucket) = self else {
            then();
            return;
        };
        let (bucket, path, hash) = (bucket.clone(), S3Bucket::object(tenant, hash, id), hash.to_string());
        tokio::spawn(async move {
            if let Err(e) = bucket.delete(&path).await {
                tracing::warn!(%tenant, %hash, error = %e, "an unreferenced image stays in the bucket");
            }
            then();
        });
    }

    /// After a workspace is deleted (its rows went with it): every object it had.
    #[tracing::instrument(skip_all, fields(%tenant))]
    pub async fn purge_workspace(&self, tenant: TenantId) {
        if let MediaStorage::S3(bucket) = self {
            match Box::pin(bucket.purge(tenant)).await {
                Ok(n) => tracing::info!(%tenant, objects = n, "a deleted workspace's images left the bucket"),
                Err(e) => tracing::error!(%tenant, error = %e, "a deleted workspace's images stay in the bucket"),
            }
        }
    }
}
