//! The people in a workspace, and those invited into it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{InviteId, Role, UserId};

/// A member of a workspace.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Member {
    pub user_id: UserId,
    pub email: String,
    pub name: String,
    pub role: Role,
    pub joined_at: DateTime<Utc>,
    /// Logs in with a second factor.
    pub two_factor: bool,
}

/// An invitation not yet accepted, withdrawn or expired.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PendingInvite {
    pub id: InviteId,
    pub email: String,
    pub role: Role,
    pub expires_at: DateTime<Utc>,
}
