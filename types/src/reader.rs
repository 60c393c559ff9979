//! Readers and their subscriptions as the API, the pages and the engine see them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::ListId;

string_enum!(
    /// A reader across the whole workspace. Unsubscribed: left every list (the unsubscribe
    /// page's "everything"). Blocklisted: a member stopped all mail to them.
    ReaderStatus, invalid = "Unknown status: use active, unsubscribed or blocklisted.", default = Active {
        Active = "active",
        Unsubscribed = "unsubscribed",
        Blocklisted = "blocklisted",
    }
);

impl ReaderStatus {
    /// How the pages name it.
    pub fn label(self) -> &'static str {
        match self {
            ReaderStatus::Active => "Active",
            ReaderStatus::Unsubscribed => "Left everything",
            ReaderStatus::Blocklisted => "Blocklisted",
        }
    }
}

string_enum!(
    /// A reader on one list. Unconfirmed: an opt-in list's confirmation mail is out.
    SubscriptionStatus, invalid = "Unknown subscription status.", default = Confirmed {
        Unconfirmed = "unconfirmed",
        Confirmed = "confirmed",
        Unsubscribed = "unsubscribed",
    }
);

impl SubscriptionStatus {
    /// On the list, confirmed or waiting for the confirmation (what a preferences page shows
    /// as ticked).
    pub fn is_on_list(self) -> bool {
        self != SubscriptionStatus::Unsubscribed
    }
}

string_enum!(
    /// What an import or a bulk upsert does with addresses already in the workspace: fill in a
    /// non-empty name and merge attributes (update), or leave them exactly as they are (skip).
    Existing, invalid = "Existing readers must be updated or skipped.", default = Update {
        Update = "update",
        Skip = "skip",
    }
);

/// A reader: one address in a workspace, with a name and free-form attributes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct Reader {
    pub id: i64,
    pub email: String,
    pub name: String,
    /// A JSON object (`{"city": "Lyon"}`), available to templates.
    pub attributes: serde_json::Value,
    pub status: ReaderStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A page of readers, newest first.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ReaderPage {
    pub readers: Vec<Reader>,
    /// Pass as `before` to get the next page; `None` on the last page.
    pub next_before: Option<i64>,
}

/// A reader's place on one list.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct Subscription {
    pub list_id: ListId,
    pub list_name: String,
    pub status: SubscriptionStatus,
    pub created_at: DateTime<Utc>,
    pub confirmed_at: Option<DateTime<Utc>>,
    pub unsubscribed_at: Option<DateTime<Utc>>,
}

impl Subscription {
    /// When it last changed: left, else confirmed, else joined.
    pub fn since(&self) -> DateTime<Utc> {
        self.unsubscribed_at.or(self.confirmed_at).unwrap_or(self.created_at)
    }
}

/// One line of a reader's consent ledger: what they agreed to or withdrew, where and how.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ConsentEvent {
    pub id: i64,
    pub list_id: Option<ListId>,
    pub list_name: Option<String>,
    pub action: String,
    pub source: String,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// The consent text the reader saw, when there was one.
    pub wording: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// One line of a reader's activity: a message sent, failed or skipped, and what followed (an
/// open, a click, a bounce…).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct ReaderEvent {
    pub at: DateTime<Utc>,
    pub kind: String,
    pub campaign_id: Option<crate::ids::CampaignId>,
    pub campaign_name: Option<String>,
    /// The link, for a click.
    pub url: Option<String>,
    pub detail: Option<String>,
}

impl ReaderEvent {
    /// What the activity table shows in its last column: the link clicked, or the detail.
    pub fn summary(&self) -> &str {
        self.url.as_deref().or(self.detail.as_deref()).unwrap_or_default()
    }
}

/// One reader to create or merge: the bulk API's items and an import's rows.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ReaderInput {
    pub email: String,
    #[serde(default)]
    pub name: String,
    /// A JSON object (`{"city": "Lyon"}`), merged into the reader's attributes.
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub attributes: Option<serde_json::Value>,
    /// Tags to add (names; new ones are created). Tags the reader has stay.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// `POST /api/v1/readers`: one new reader.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewReader {
    #[serde(flatten)]
    pub reader: ReaderInput,
    /// Lists to subscribe the reader to, as confirmed (you attest their consent).
    #[serde(default)]
    pub lists: Vec<ListId>,
}

/// `PATCH /api/v1/readers/{id}`: what to change; a missing field keeps its value.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ReaderChange {
    pub name: Option<String>,
    /// Replaces the attributes object.
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub attributes: Option<serde_json::Value>,
    /// Tags to add (names; new ones are created). Tags the reader has stay.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// `POST /api/v1/readers/bulk`: many readers at once, merged on the lowercased email, so a
/// retry is harmless.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BulkUpsert {
    /// Up to 10,000 readers.
    pub readers: Vec<ReaderInput>,
    #[serde(default)]
    pub lists: Vec<ListId>,
    /// `update` (default) or `skip` for addresses already in the workspace.
    #[serde(default)]
    pub existing: Existing,
}

/// What a bulk upsert did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BulkOutcome {
    pub created: u64,
    pub updated: u64,
    /// Addresses already here (with `skip`) and repeats inside the request.
    pub skipped: u64,
    pub invalid: Vec<crate::invalid::Rejected>,
    /// The readers created or updated: for the server's next step (an import's opt-in mails),
    /// never sent.
    #[serde(skip)]
    pub reader_ids: Vec<i64>,
}

/// `POST /api/v1/readers/{id}/subscriptions`: lists to add the reader to.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ListChoice {
    pub lists: Vec<ListId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_keep_their_stored_names() {
        assert_eq!(ReaderStatus::Unsubscribed.as_str(), "unsubscribed");
        assert_eq!("Blocklisted".parse::<ReaderStatus>(), Ok(ReaderStatus::Blocklisted));
        assert!("gone".parse::<ReaderStatus>().is_err());
        assert!(SubscriptionStatus::Unconfirmed.is_on_list() && !SubscriptionStatus::Unsubscribed.is_on_list());
    }
}
