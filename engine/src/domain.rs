//! Domain values, checked once when built: an invalid email or slug cannot exist past the edge.

use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

use crate::error::{Error, Result};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
        #[sqlx(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }
        }

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
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                Uuid::parse_str(s).map(Self).map_err(|_| Error::NotFound)
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

/// A syntactically valid email address, trimmed. Compared and deduplicated lowercased.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Email(String);

impl Email {
    pub fn parse(raw: &str) -> Result<Self> {
        let s = raw.trim();
        let invalid = || Error::Invalid(format!("“{}” is not a valid email address", truncate(s, 80)));
        // CR/LF (or any control character) in an address is an SMTP header injection attempt.
        if s.is_empty() || s.len() > 254 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(invalid());
        }
        let (local, domain) = s.rsplit_once('@').ok_or_else(invalid)?;
        if local.is_empty()
            || local.len() > 64
            || local.contains('@')
            || domain.len() < 3
            || !domain.contains('.')
            || domain.starts_with('.')
            || domain.ends_with('.')
            || domain.contains("..")
            || !domain.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '.')
            || s.contains(['<', '>', '(', ')', ',', ';', ':', '\\', '"', '[', ']'])
        {
            return Err(invalid());
        }
        Ok(Self(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn lowercase(&self) -> String {
        self.0.to_lowercase()
    }
}

impl AsRef<str> for Email {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A URL-safe identifier: 2–48 of `a-z 0-9 -`, not starting or ending with `-`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slug(String);

impl Slug {
    pub fn parse(raw: &str) -> Result<Self> {
        let s = raw.trim().to_lowercase();
        let ok = (2..=48).contains(&s.len())
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-');
        if ok {
            Ok(Self(s))
        } else {
            Err(Error::Invalid(
                "The slug must be 2–48 characters of a–z, 0–9 and “-”, not starting or ending with “-”.".into(),
            ))
        }
    }

    /// A slug derived from a display name ("Acme News!" → "acme-news").
    pub fn from_name(name: &str) -> Result<Self> {
        let mut out = String::new();
        for c in name.trim().to_lowercase().chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c);
            } else if !out.ends_with('-') && !out.is_empty() {
                out.push('-');
            }
        }
        let out = out.trim_end_matches('-');
        Self::parse(&out.chars().take(48).collect::<String>())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A member's role in a workspace, from most to least powerful.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Author,
    Viewer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Admin, Role::Author, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Author => "author",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| Error::Invalid(format!("unknown role “{}”", truncate(s, 20))))
    }

    /// Members, settings and API keys.
    pub fn can_administer(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }

    /// Audience and campaigns.
    pub fn can_author(self) -> bool {
        matches!(self, Role::Owner | Role::Admin | Role::Author)
    }

    /// Fails with `Forbidden` unless this role is at least `needed` (Owner > Admin > Author > Viewer).
    pub fn require(self, needed: Role) -> Result<()> {
        if self <= needed { Ok(()) } else { Err(Error::Forbidden) }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { format!("{}…", s.chars().take(max).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_checked() {
        assert!(Email::parse(" Ada@Example.com ").is_ok());
        assert_eq!(Email::parse("Ada@Example.com").map(|e| e.lowercase()).ok(), Some("ada@example.com".into()));
        for bad in ["", "ada", "ada@", "@x.io", "a@b", "a b@x.io", "a@x..io", "a@x.io\r\nBcc: z@x.io", "a<b@x.io"] {
            assert!(Email::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn slugs_are_checked_and_derived() {
        assert_eq!(Slug::from_name("Acme News!").map(|s| s.to_string()).ok(), Some("acme-news".into()));
        assert!(Slug::parse("-bad").is_err());
        assert!(Slug::parse("a").is_err());
        assert!(Slug::parse("good-slug-2").is_ok());
    }

    #[test]
    fn roles_are_ordered() {
        assert!(Role::Owner.require(Role::Admin).is_ok());
        assert!(Role::Author.require(Role::Admin).is_err());
        assert!(Role::Viewer.require(Role::Viewer).is_ok());
        assert!(Role::Viewer.require(Role::Author).is_err());
    }
}
