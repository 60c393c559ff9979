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
