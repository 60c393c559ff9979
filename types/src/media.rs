//! A workspace's media library: images uploaded for campaigns, served by Herald at
//! content-hashed, immutable addresses (`/media/{workspace}/{sha256}.{ext}`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::MediaId;

/// One stored image. Its bytes are what Herald re-encoded from the upload (at most
/// [`MAX_STORED_WIDTH`] wide, without metadata), so `bytes` is what a reader downloads.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Media {
    pub id: MediaId,
    /// The absolute address mail uses; it never changes and never serves anything else.
    pub url: String,
    /// As uploaded, for people: "team-photo.jpg".
    pub file_name: String,
    /// `image/png`, `image/jpeg` or `image/gif`.
    pub content_type: String,
    pub width: i32,
    pub height: i32,
    pub bytes: i64,
    pub created_at: DateTime<Utc>,
}

/// The library and how much of the workspace's storage it uses.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct MediaLibrary {
    pub items: Vec<Media>,
    pub used_bytes: i64,
    pub quota_bytes: i64,
}

/// Images wider than this are scaled down when uploaded: twice the 600 px a mail shows, so they
/// stay sharp on high-density screens.
pub const MAX_STORED_WIDTH: u32 = 1200;
