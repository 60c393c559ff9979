//! The media library: images a workspace uploads for its campaigns.
//!
//! An upload is decoded with the `image` crate under [`image::Limits`] (dimensions and memory
//! bounded before any pixel is allocated), off the async threads ([`prepare`] runs in
//! `spawn_blocking`, two at a time), turned upright by its EXIF orientation, scaled to at most
//! [`MAX_STORED_WIDTH`] wide and re-encoded, which drops EXIF and every other piece of metadata
//! (an animated GIF frame by frame, its frames and pixels counted).
//! The format is read from the bytes, never from the file name or the browser's content type, so
//! a script renamed `photo.png` is refused. SVG is refused: it can carry script.
//!
//! The stored bytes are named by their SHA-256: `/media/{workspace}/{sha256}.{ext}` never changes
//! and never serves anything else, so it is served `immutable` ([`storage`] holds the bytes,
//! [`serve`] the hot path with its cache). A row exists only once its bytes are stored, and
//! serving looks the row up first, so an unfinished upload is never served.

pub mod serve;
pub mod storage;

use std::collections::HashMap;
use std::io::Cursor;

use herald_types::Invalid;
pub use herald_types::media::MAX_STORED_WIDTH;
pub use herald_types::{Media, MediaId, MediaLibrary};
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader};
use sha2::{Digest, Sha256};

use crate::domain::{Role, TenantId, UserId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
pub use storage::{MediaStorage, S3Bucket, S3Config};

/// The largest file accepted.
pub const MAX_UPLOAD_BYTES: usize = 10 * 1024 * 1024;
/// The largest image accepted, each way, in pixels.
pub const MAX_DIMENSION: u32 = 8_000;
/// The most memory one decode's pixels may take (an 8000 × 4000 RGBA image).
const MAX_DECODE_BYTES: u64 = 128 * 1024 * 1024;

/// What a workspace's images may take together, and its account's.
#[derive(Clone, Copy, Debug)]
pub struct MediaQuota {
    pub per_workspace: i64,
    pub per_account: i64,
}

impl Default for MediaQuota {
    fn default() -> Self {
        MediaQuota { per_workspace: 100 << 20, per_account: 500 << 20 }
    }
}

/// An upload made ready to store: re-encoded bytes, their kind and their name.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub bytes: Vec<u8>,
    pub kind: ImageKind,
    pub width: u32,
    pub height: u32,
    /// SHA-256 of `bytes`, lowercase hex: the name in the URL.
    pub hash: String,
}

/// The formats Herald stores. WebP uploads are stored as PNG or JPEG: many mail clients
/// (Outlook among them) show no WebP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
    Gif,
}

impl ImageKind {
    pub fn content_type(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::Gif => "image/gif",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            ImageKind::Png => "png",
            ImageKind::Jpeg => "jpg",
            ImageKind::Gif => "gif",
        }
    }

    pub fn from_content_type(s: &str) -> Option<Self> {
        [ImageKind::Png, ImageKind::Jpeg, ImageKind::Gif].into_iter().find(|k| k.content_type() == s)
    }
}

fn refused(message: impl Into<String>) -> Error {
    Error::Invalid(Invalid::field("file", message))
}

/// Decodes, checks and re-encodes an upload. CPU-bound: call [`prepare_off_thread`] from async
/// code.
pub fn prepare(upload: &[u8]) -> Result<Prepared> {
    if upload.is_empty() {
        return Err(refused("The file is empty."));
    }
    if upload.len() > MAX_UPLOAD_BYTES {
        return Err(refused(format!("Images may be at most {} MB.", MAX_UPLOAD_BYTES >> 20)));
    }
    let reader = ImageReader::new(Cursor::new(upload))
        .with_guessed_format()
        .map_err(|_| refused("The file could not be read."))?;
    let format = reader.format();
    if !matches!(format, Some(ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP)) {
        return Err(refused("Upload a PNG, JPEG, GIF or WebP image (SVG is not accepted: it can carry script)."));
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_DIMENSION);
    limits.max_image_height = Some(MAX_DIMENSION);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    let too_large = || {
        refused(format!(
            "Images may be at most {MAX_DIMENSION} × {MAX_DIMENSION} pixels and {} MB once opened.",
            MAX_DECODE_BYTES >> 20
        ))
    };
    let invalid = |e: image::ImageError| match e {
        image::ImageError::Limits(_) => too_large(),
        _ => refused("The file is not a valid image."),
    };
    if format == Some(ImageFormat::Gif) {
        return prepare_gif(upload, limits).map_err(invalid)?;
    }
    let mut reader = reader;
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(invalid)?;
    // `from_decoder` checks the dimensions but not the memory the pixels take (a 16-bit RGBA
    // image needs 8 bytes a pixel): the decoder says how much before anything is allocated.
    if decoder.total_bytes() > MAX_DECODE_BYTES {
        return Err(too_large());
    }
    let orientation = decoder.orientation().unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut image = DynamicImage::from_decoder(decoder).map_err(invalid)?;
    image.apply_orientation(orientation);
    if image.width() > MAX_STORED_WIDTH {
        let height = (u64::from(image.height()) * u64::from(MAX_STORED_WIDTH) / u64::from(image.width())).max(1);
        image = image.resize_exact(MAX_STORED_WIDTH, height as u32, image::imageops::FilterType::Lanczos3);
    }
    // Photographs stay JPEG; anything with transparency, or drawn (PNG, GIF), becomes PNG.
    let kind = if format == Some(ImageFormat::Jpeg) || (format == Some(ImageFormat::WebP) && !image.color().has_alpha())
    {
        ImageKind::Jpeg
    } else {
        ImageKind::Png
    };
    let mut out = Vec::new();
    let encoded = match kind {
        ImageKind::Jpeg => {
            let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85);
            DynamicImage::ImageRgb8(image.to_rgb8()).write_with_encoder(encoder)
        }
        _ => image.write_to(&mut Cursor::new(&mut out), ImageFormat::Png),
    };
    encoded.map_err(|_| refused("The image could not be re-encoded."))?;
    let (width, height) = (image.width(), image.height());
    Ok(finish(out, kind, width, height))
}

/// The most frames an animated GIF may have, and the most pixels all its frames together.
const MAX_GIF_FRAMES: usize = 500;
const MAX_GIF_PIXELS: u64 = 50_000_000;

/// A GIF, re-encoded frame by frame so animations keep playing while comments, XMP and other
/// extensions are dropped; one frame is in memory at a time, and the frames and their pixels
/// are counted so a small file cannot unpack into a bomb. Wider than [`MAX_STORED_WIDTH`]: its
/// first frame, scaled, as a PNG.
fn prepare_gif(upload: &[u8], limits: image::Limits) -> std::result::Result<Result<Prepared>, image::ImageError> {
    use image::codecs::gif::{GifDecoder, GifEncoder, Repeat};
    use image::{AnimationDecoder, ImageDecoder as _};
    let mut decoder = GifDecoder::new(Cursor::new(upload))?;
    decoder.set_limits(limits)?;
    let (width, height) = decoder.dimensions();
    // Each frame is decoded onto a whole canvas.
    if decoder.total_bytes() > MAX_DECODE_BYTES {
        return Err(image::ImageError::Limits(image::error::LimitError::from_kind(
            image::error::LimitErrorKind::InsufficientMemory,
        )));
    }
    if width > MAX_STORED_WIDTH {
        let first = DynamicImage::from_decoder(decoder)?;
        let scaled_height = (u64::from(height) * u64::from(MAX_STORED_WIDTH) / u64::from(width)).max(1) as u32;
        let image = first.resize_exact(MAX_STORED_WIDTH, scaled_height, image::imageops::FilterType::Lanczos3);
        let mut out = Vec::new();
        image.write_to(&mut Cursor::new(&mut out), ImageFormat::Png)?;
        return Ok(Ok(finish(out, ImageKind::Png, image.width(), image.height())));
    }
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(&mut out, 10);
        encoder.set_repeat(Repeat::Infinite)?;
        let mut pixels = 0u64;
        for (i, frame) in decoder.into_frames().enumerate() {
            let frame = frame?;
            pixels += u64::from(frame.buffer().width()) * u64::from(frame.buffer().height());
            if i >= MAX_GIF_FRAMES || pixels > MAX_GIF_PIXELS {
                return Ok(Err(refused(format!(
                    "Animated GIFs may have at most {MAX_GIF_FRAMES} frames and {} million pixels in all.",
                    MAX_GIF_PIXELS / 1_000_000
                ))));
            }
            encoder.encode_frame(frame)?;
        }
    }
    Ok(Ok(finish(out, ImageKind::Gif, width, height)))
}

fn finish(bytes: Vec<u8>, kind: ImageKind, width: u32, height: u32) -> Prepared {
    let hash = hex::encode(Sha256::digest(&bytes));
    Prepared { bytes, kind, width, height, hash }
}

/// Uploads being decoded at once, in the whole process: each may hold up to
/// [`MAX_DECODE_BYTES`] of pixels and again as much while it is turned and scaled, so the
/// memory images can take is bounded whatever number arrive together.
static PREPARING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// One decode at a time per workspace: its uploads queue behind each other, so one workspace
/// sending images as fast as it can holds at most one of the process's [`PREPARING`] slots and
/// every other workspace's upload still gets the other.
fn workspace_turn(tenant: TenantId) -> std::sync::Arc<tokio::sync::Semaphore> {
    static TURNS: std::sync::LazyLock<std::sync::Mutex<HashMap<TenantId, std::sync::Weak<tokio::sync::Semaphore>>>> =
        std::sync::LazyLock::new(Default::default);
    let mut turns = TURNS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Entries of workspaces with no upload in flight are dropped as the map is used.
    turns.retain(|_, turn| turn.strong_count() > 0);
    if let Some(turn) = turns.get(&tenant).and_then(std::sync::Weak::upgrade) {
        return turn;
    }
    let turn = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
    turns.insert(tenant, std::sync::Arc::downgrade(&turn));
    turn
}

/// [`prepare`] on a blocking thread (a large image takes a second of CPU), two at a time in the
/// process and one at a time per workspace. The library's room is checked first (see
/// [`check_room`]): a workspace whose library is full waits for no slot and holds none.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn prepare_off_thread(db: &Db, tenant: TenantId, quota: MediaQuota, upload: Vec<u8>) -> Result<Prepared> {
    check_room(db, tenant, quota).await?;
    let stopped = |e: tokio::sync::AcquireError| Error::Unexpected(anyhow::anyhow!("image preparation stopped: {e}"));
    let workspace = workspace_turn(tenant);
    let _workspace_turn = workspace.acquire().await.map_err(stopped)?;
    let _turn = PREPARING.acquire().await.map_err(stopped)?;
    tokio::task::spawn_blocking(move || prepare(&upload))
        .await
        .map_err(|e| Error::Unexpected(anyhow::anyhow!("image preparation failed: {e}")))?
}

/// Refuses an upload before it is decoded when the workspace's or its account's library has no
/// room left at all (the re-encoded size is known only after the decode; [`save`] checks it).
async fn check_room(db: &Db, tenant: TenantId, quota: MediaQuota) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    check_quota(&mut tx, tenant, 1, quota).await?;
    tx.commit().await?;
    Ok(())
}

/// The address an image is served at.
pub fn url(base_url: &str, tenant: TenantId, hash: &str, kind: ImageKind) -> String {
    format!("{}/media/{tenant}/{hash}.{}", base_url.trim_end_matches('/'), kind.extension())
}

#[derive(sqlx::FromRow)]
struct Row {
    id: MediaId,
    hash: String,
    file_name: String,
    content_type: String,
    width: i32,
    height: i32,
    bytes: i64,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl Row {
    fn into_media(self, base_url: &str, tenant: TenantId) -> Media {
        let kind = ImageKind::from_content_type(&self.content_type).unwrap_or(ImageKind::Png);
        Media {
            id: self.id,
            url: url(base_url, tenant, &self.hash, kind),
            file_name: self.file_name,
            content_type: self.content_type,
            width: self.width,
            height: self.height,
            bytes: self.bytes,
            created_at: self.created_at,
        }
    }
}

/// One quota check at a time per account, so two uploads cannot both take the last megabytes,
/// and the same image sent twice at once is found by the second (not a unique violation).
async fn lock_storage(tx: &mut Tx, tenant: TenantId) -> Result<()> {
    let account = crate::account_limits::account_of(tx, tenant).await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('media-storage:' || $1::text, 0))")
        .bind(account.map_or_else(|| tenant.to_string(), |a| format!("account:{a}")))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Stores a prepared upload, unless the workspace's or its account's images would then take
/// more than `quota`. The same image uploaded twice is stored once (its hash is its name): the
/// second upload answers the first one's entry.
#[tracing::instrument(skip_all, fields(%tenant))]
#[allow(clippy::too_many_arguments)]
pub async fn save(
    db: &Db,
    storage: &MediaStorage,
    base_url: &str,
    tenant: TenantId,
    user: Option<UserId>,
    role: Role,
    file_name: &str,
    image: Prepared,
    quota: MediaQuota,
) -> Result<Media> {
    if !role.can_author() {
        return Err(Error::Forbidden);
    }
    let file_name: String = file_name.trim().chars().filter(|c| !c.is_control()).take(200).collect();
    let file_name = if file_name.is_empty() { format!("image.{}", image.kind.extension()) } else { file_name };
    let size = image.bytes.len() as i64;
    // A re-upload answers the stored entry, and a full library is refused, before any bytes move.
    let mut tx = db.tenant_tx(tenant).await?;
    if let Some(row) = stored_as(&mut tx, tenant, &image.hash).await? {
        tx.commit().await?;
        return Ok(row.into_media(base_url, tenant));
    }
    check_quota(&mut tx, tenant, size, quota).await?;
    tx.commit().await?;
    // A bucket's object first, outside any transaction or lock (see `storage`).
    let id = MediaId::new();
    storage.put_object(tenant, &image.hash, id, &image.bytes).await?;
    let inserted = async {
        let mut tx = db.tenant_tx(tenant).await?;
        lock_storage(&mut tx, tenant).await?;
        // The same image may have been stored meanwhile, or the quota used up: checked again
        // under the lock.
        if let Some(row) = stored_as(&mut tx, tenant, &image.hash).await? {
            tx.commit().await?;
            return Ok((row, false));
        }
        check_quota(&mut tx, tenant, size, quota).await?;
        storage.put_in(&mut tx, tenant, &image.hash, &image.bytes).await?;
        let row: Row = sqlx::query_as(
            "INSERT INTO media (tenant_id, id, hash, content_type, width, height, bytes, file_name, created_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             RETURNING id, hash, file_name, content_type, width, height, bytes::bigint AS bytes, created_at",
        )
        .bind(tenant)
        .bind(id)
        .bind(&image.hash)
        .bind(image.kind.content_type())
        .bind(image.width as i32)
        .bind(image.height as i32)
        .bind(size as i32)
        .bind(&file_name)
        .bind(user)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok::<_, Error>((row, true))
    }
    .await;
    match inserted {
        Ok((row, true)) => Ok(row.into_media(base_url, tenant)),
        // Our object is no row's: it goes.
        Ok((row, false)) => {
            storage.discard_object(tenant, &image.hash, id, || {});
            Ok(row.into_media(base_url, tenant))
        }
        Err(e) => {
            storage.discard_object(tenant, &image.hash, id, || {});
            Err(e)
        }
    }
}

/// The row that already stores `hash`, if one does.
async fn stored_as(tx: &mut Tx, tenant: TenantId, hash: &str) -> Result<Option<Row>> {
    Ok(sqlx::query_as::<_, Row>(
        "SELECT id, hash, file_name, content_type, width, height, bytes::bigint AS bytes, created_at
         FROM media WHERE tenant_id = $1 AND hash = $2",
    )
    .bind(tenant)
    .bind(hash)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Refuses `size` more bytes when the workspace's or its account's images would then take more
/// than `quota`.
async fn check_quota(tx: &mut Tx, tenant: TenantId, size: i64, quota: MediaQuota) -> Result<()> {
    let (used, account_used): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(bytes), 0)::bigint, account_media_bytes($1) FROM media WHERE tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(&mut **tx)
    .await?;
    if used + size > quota.per_workspace {
        return Err(refused(format!(
            "The media library is full ({} of {} MB used). Delete images you no longer need first.",
            used >> 20,
            quota.per_workspace >> 20
        )));
    }
    if account_used + size > quota.per_account {
        return Err(refused(format!(
            "Your account's workspaces use their {} MB of image storage. Delete images you no longer need first.",
            quota.per_account >> 20
        )));
    }
    Ok(())
}

/// The workspace's images, newest first, with the storage they use.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn library(db: &Db, base_url: &str, tenant: TenantId, quota: MediaQuota) -> Result<MediaLibrary> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, hash, file_name, content_type, width, height, bytes::bigint AS bytes, created_at
             FROM media WHERE tenant_id = $1 ORDER BY created_at DESC, id",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    let used_bytes = rows.iter().map(|r| r.bytes).sum();
    Ok(MediaLibrary {
        items: rows.into_iter().map(|r| r.into_media(base_url, tenant)).collect(),
        used_bytes,
        quota_bytes: quota.per_workspace,
    })
}

/// Deletes an image: its address answers 404 from now on (mail already sent shows it broken).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn delete(db: &Db, storage: &MediaStorage, tenant: TenantId, role: Role, id: MediaId) -> Result<()> {
    if !role.can_author() {
        return Err(Error::Forbidden);
    }
    let mut tx = db.tenant_tx(tenant).await?;
    let hash: Option<String> = sqlx::query_scalar("DELETE FROM media WHERE tenant_id = $1 AND id = $2 RETURNING hash")
        .bind(tenant)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(hash) = hash else { return Err(Error::NotFound) };
    storage.remove_in(&mut tx, tenant, &hash).await?;
    tx.commit().await?;
    serve::forget(db, tenant, &hash);
    // The row is gone, so nothing serves it any more; its object goes after. A fetch that read
    // the row just before the delete may have cached the bytes since: forgotten again then.
    let (db, forget_hash) = (db.clone(), hash.clone());
    storage.discard_object(tenant, &hash, id, move || serve::forget(&db, tenant, &forget_hash));
    Ok(())
}

#[cfg(test)]
mod tests;
