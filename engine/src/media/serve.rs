//! Serving images: a hot path. Apple Mail Privacy Protection fetches every image of every
//! message when it arrives, so a campaign to 100,000 readers asks for each of its images 100,000
//! times within minutes. An in-process cache (weighed in bytes) answers those without Postgres;
//! a miss reads the row (so only a finished upload of this workspace is served) and then the
//! bytes.

use std::sync::Arc;

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use super::{ImageKind, MediaStorage};
use crate::domain::TenantId;
use crate::error::Result;
use crate::infra::db::Db;

/// What the cache may hold, in bytes of images.
const CACHE_BYTES: u64 = 64 << 20;

/// An image ready to answer with. `Bytes` clones share one buffer.
#[derive(Clone, Debug)]
pub struct Served {
    pub bytes: bytes::Bytes,
    pub kind: ImageKind,
}

/// A SHA-256 as written in a URL, parsed: 64 lowercase hex digits and nothing else.
pub type Hash = [u8; 32];

pub fn parse_hash(hex_digits: &str) -> Option<Hash> {
    if hex_digits.len() != 64 || hex_digits.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_digits, &mut out).ok()?;
    Some(out)
}

#[derive(Clone)]
struct ByBytes;

impl Weighter<(TenantId, Hash), Served> for ByBytes {
    fn weight(&self, _: &(TenantId, Hash), served: &Served) -> u64 {
        served.bytes.len() as u64 + 64
    }
}

/// The process's image cache, one per database handle (`Db::shared`).
pub struct MediaCache(Cache<(TenantId, Hash), Served, ByBytes>);

impl Default for MediaCache {
    fn default() -> Self {
        MediaCache(Cache::with_weighter(4_096, CACHE_BYTES, ByBytes))
    }
}

fn cache(db: &Db) -> Arc<MediaCache> {
    db.shared::<MediaCache>()
}

/// The image `tenant` stores as `hash` with extension `extension`, if there is one.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn fetch(
    db: &Db,
    storage: &MediaStorage,
    tenant: TenantId,
    hash: &str,
    extension: &str,
) -> Result<Option<Served>> {
    let Some(key) = parse_hash(hash) else { return Ok(None) };
    let cache = cache(db);
    let served = match cache.0.get(&(tenant, key)) {
        Some(served) => served,
        None => {
            let mut tx = db.tenant_tx(tenant).await?;
            let row: Option<(herald_types::MediaId, String)> =
                sqlx::query_as("SELECT id, content_type FROM media WHERE tenant_id = $1 AND hash = $2")
                    .bind(tenant)
                    .bind(hash)
                    .fetch_optional(&mut *tx)
                    .await?;
            tx.commit().await?;
            let Some((id, content_type)) = row else { return Ok(None) };
            let Some(kind) = ImageKind::from_content_type(&content_type) else { return Ok(None) };
            let Some(bytes) = storage.get(db, tenant, hash, id).await? else { return Ok(None) };
            let served = Served { bytes: bytes::Bytes::from(bytes), kind };
            cache.0.insert((tenant, key), served.clone());
            served
        }
    };
    // `/media/…/{hash}.png` names one file: any other extension is not it.
    Ok((served.kind.extension() == extension).then_some(served))
}

/// Drops a deleted image from this process's cache. (Other processes keep theirs until it is
/// evicted: a deleted image may be served by them a while longer.)
pub fn forget(db: &Db, tenant: TenantId, hash: &str) {
    if let Some(key) = parse_hash(hash) {
        cache(db).0.remove(&(tenant, key));
    }
}
