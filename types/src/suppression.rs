//! An address a workspace never mails, and why.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

string_enum!(
    /// Why an address is suppressed.
    SuppressionReason, invalid = "The reason is manual, hard_bounce, soft_bounce, complaint or unsubscribed_all.", default = Manual {
        HardBounce = "hard_bounce",
        /// Soft bounces that kept coming back.
        SoftBounce = "soft_bounce",
        Complaint = "complaint",
        /// Added by a member or through the API.
        Manual = "manual",
        /// The reader left everything from this sender.
        UnsubscribedAll = "unsubscribed_all",
    }
);

impl SuppressionReason {
    /// "hard bounce", for sentences.
    pub fn label(self) -> &'static str {
        match self {
            SuppressionReason::HardBounce => "hard bounce",
            SuppressionReason::SoftBounce => "soft bounce",
            SuppressionReason::Complaint => "complaint",
            SuppressionReason::Manual => "manual",
            SuppressionReason::UnsubscribedAll => "unsubscribed from everything",
        }
    }

    /// Bounces and complaints protect the workspace's sending reputation: they outrank other
    /// reasons, and removing them needs an explicit confirmation.
    pub fn protects_reputation(self) -> bool {
        matches!(self, SuppressionReason::HardBounce | SuppressionReason::SoftBounce | SuppressionReason::Complaint)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Suppression {
    pub email_lower: String,
    pub reason: SuppressionReason,
    /// Where it came from: a campaign, a provider's webhook, "api", "admin"…
    pub source: String,
    pub created_at: DateTime<Utc>,
}

/// `POST /api/v1/suppressions`: addresses to stop mailing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewSuppressions {
    pub emails: Vec<String>,
    /// `manual` (default), `hard_bounce`, `soft_bounce`, `complaint` or `unsubscribed_all`.
    #[serde(default)]
    pub reason: SuppressionReason,
}

/// What adding suppressions did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SuppressionsAdded {
    pub suppressed: usize,
    /// Entries that are not email addresses (first 200 characters of each), not added.
    pub invalid: Vec<String>,
}
