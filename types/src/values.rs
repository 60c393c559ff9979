//! Values checked once, when built: an invalid email or slug cannot exist past the edge, not even
//! through `Deserialize` (which parses).

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::Invalid;

/// A syntactically valid email address, trimmed. Compared and deduplicated lowercased.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema), schema(value_type = String, format = Email))]
pub struct Email(String);

impl Email {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = raw.trim();
        let invalid = || Invalid::new(format!("“{}” is not a valid email address", truncate(s, 80)));
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

impl TryFrom<String> for Email {
    type Error = Invalid;
    fn try_from(raw: String) -> Result<Self, Invalid> {
        Self::parse(&raw)
    }
}

impl From<Email> for String {
    fn from(e: Email) -> Self {
        e.0
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Slug(String);

impl Slug {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = raw.trim().to_lowercase();
        let ok = (2..=48).contains(&s.len())
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-');
        if ok {
            Ok(Self(s))
        } else {
            Err(Invalid::new("The slug must be 2–48 characters of a–z, 0–9 and “-”, not starting or ending with “-”."))
        }
    }

    /// A slug derived from a display name ("Acme News!" → "acme-news").
    pub fn from_name(name: &str) -> Result<Self, Invalid> {
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

impl TryFrom<String> for Slug {
    type Error = Invalid;
    fn try_from(raw: String) -> Result<Self, Invalid> {
        Self::parse(&raw)
    }
}

impl From<Slug> for String {
    fn from(s: Slug) -> Self {
        s.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The role does not allow this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forbidden;

string_enum!(
    /// A member's role in a workspace, from most to least powerful.
    Role, invalid = "Choose owner, admin, author or viewer." {
        Owner = "owner",
        Admin = "admin",
        Author = "author",
        Viewer = "viewer",
    }
);

impl PartialOrd for Role {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Owner < Admin < Author < Viewer: a smaller role may do more.
impl Ord for Role {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let rank = |r: &Role| Role::ALL.iter().position(|x| x == r);
        rank(self).cmp(&rank(other))
    }
}

impl Role {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        s.parse()
    }

    /// Members, settings and API keys.
    pub fn can_administer(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }

    /// Audience and campaigns.
    pub fn can_author(self) -> bool {
        matches!(self, Role::Owner | Role::Admin | Role::Author)
    }

    /// Fails unless this role is at least `needed` (Owner > Admin > Author > Viewer).
    pub fn require(self, needed: Role) -> Result<(), Forbidden> {
        if self <= needed { Ok(()) } else { Err(Forbidden) }
    }
}

/// `s`, cut to `max` characters with an ellipsis: user text quoted back in a message.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { format!("{}…", s.chars().take(max).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_checked_even_when_deserialised() {
        assert!(Email::parse(" Ada@Example.com ").is_ok());
        assert_eq!(Email::parse("Ada@Example.com").map(|e| e.lowercase()).ok(), Some("ada@example.com".into()));
        for bad in ["", "ada", "ada@", "@x.io", "a@b", "a b@x.io", "a@x..io", "a@x.io\r\nBcc: z@x.io", "a<b@x.io"] {
            assert!(Email::parse(bad).is_err(), "{bad:?} should be rejected");
            assert!(serde_json::from_value::<Email>(serde_json::json!(bad)).is_err(), "{bad:?} deserialised");
        }
        assert_eq!(serde_json::from_value::<Email>(serde_json::json!(" a@x.io")).ok(), Email::parse("a@x.io").ok());
    }

    #[test]
    fn slugs_are_checked_and_derived() {
        assert_eq!(Slug::from_name("Acme News!").map(|s| s.to_string()).ok(), Some("acme-news".into()));
        assert!(Slug::parse("-bad").is_err());
        assert!(Slug::parse("a").is_err());
        assert!(Slug::parse("good-slug-2").is_ok());
        assert!(serde_json::from_value::<Slug>(serde_json::json!("-bad")).is_err());
    }

    #[test]
    fn roles_are_ordered_and_parsed() {
        assert!(Role::Owner.require(Role::Admin).is_ok());
        assert!(Role::Author.require(Role::Admin).is_err());
        assert!(Role::Viewer.require(Role::Viewer).is_ok());
        assert!(Role::Viewer.require(Role::Author).is_err());
        assert_eq!(Role::parse("admin"), Ok(Role::Admin));
        assert!(Role::parse("root").is_err());
        assert_eq!(serde_json::to_string(&Role::Author).ok(), Some("\"author\"".into()));
    }
}
