//! Ids as types: a campaign id cannot be passed where a list id is expected. They serialise as
//! bare UUIDs, so JSON, URLs and forms look as they always did.

use std::fmt;
use uuid::Uuid;

/// The text was not an id. Callers answer "not found": an id that cannot exist names nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadId;

impl fmt::Display for BadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not an id")
    }
}

impl std::error::Error for BadId {}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
        #[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
        pub struct $name(pub Uuid);

        impl $name {
            /// Names nothing: what a malformed id in an address becomes, so the server's
            /// answer is the same "not found" as for an id that does not exist.
            pub const NIL: Self = Self(Uuid::nil());

            /// A fresh random id (server only).
            #[cfg(not(target_arch = "wasm32"))]
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }
        }

        #[cfg(not(target_arch = "wasm32"))]
        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = BadId;
            fn from_str(s: &str) -> Result<Self, BadId> {
                Uuid::parse_str(s.trim()).map(Self).map_err(|_| BadId)
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }
    };
}

id_type!(
    /// A workspace's id. Every tenant-owned row carries one.
    TenantId
);
id_type!(
    /// An account's id.
    UserId
);
id_type!(
    /// A campaign's id (one-off, recurring, or an edition of a recurring one).
    CampaignId
);
id_type!(
    /// A mailing list's id.
    ListId
);
id_type!(
    /// A sending identity's id (an SMTP server and its sender addresses).
    IdentityId
);
id_type!(
    /// A transactional message's id.
    MessageId
);
id_type!(
    /// A CSV import's id.
    ImportId
);
id_type!(
    /// A transactional template's id.
    TemplateId
);
id_type!(
    /// A pending invitation into a workspace.
    InviteId
);
id_type!(
    /// A workspace's REST API key.
    ApiKeyId
);
id_type!(
    /// A saved segment's id.
    SegmentId
);
id_type!(
    /// A tag on readers.
    TagId
);
id_type!(
    /// An automation.
    AutomationId
);
id_type!(
    /// A step of an automation: stable through edits, so readers waiting at it keep their place.
    AutomationStepId
);
id_type!(
    /// An image in a workspace's media library.
    MediaId
);
id_type!(
    /// An author's saved campaign template.
    CampaignTemplateId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_serialise_as_bare_uuids() {
        let raw = "6f1c1c9e-3b1d-4f59-9d7e-2f0c4b8a1d11";
        let id: CampaignId = raw.parse().expect("a uuid");
        assert_eq!(serde_json::to_string(&id).ok(), Some(format!("\"{raw}\"")));
        assert_eq!(" nope ".parse::<ListId>(), Err(BadId));
    }
}
