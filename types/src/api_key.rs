//! A workspace's key for the REST API, as its admins see it (never the key itself).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ApiKeyId;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub name: String,
    /// The key's first characters, to tell keys apart.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// What the key may do: admin, author or viewer (never more than its maker).
    pub role: crate::Role,
    /// Its maker's address (`None` for a key an operator made with the CLI).
    pub created_by: Option<String>,
    /// False while its maker is not an admin of the workspace: the key answers 403.
    pub active: bool,
}

impl ApiKey {
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }
}
