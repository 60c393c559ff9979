//! Values checked once, when built: an invalid email or slug cannot exist past the edge, not even
//! through `Deserialize` (which parses).

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::Invalid;

/// A syntactically valid email address in its one canonical form, so that one mailbox is one
/// reader, one suppression and one idempotent request whatever way it was typed: trimmed,
/// Unicode NFC, the domain through UTS-46 to its ASCII (A-label) form, the local part
/// lowercased. Normalised here, in Rust, and never by the database's collation: `lower()` under
/// the C collation folds ASCII only, so `Anna@Exämple.com` and `anna@xn--exmple-cua.com` were two
/// readers. Lowercasing the local part is what every mailbox provider does in practice (RFC 5321
/// leaves it to the receiving host), and Herald has always matched addresses case-insensitively.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema), schema(value_type = String, format = Email))]
pub struct Email(String);

impl Email {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        use unicode_normalization::UnicodeNormalization;
        let s = raw.trim();
        let invalid = || Invalid::new(format!("“{}” is not a valid email address", truncate(s, 80)));
        // CR/LF (or any control character) in an address is an SMTP header injection attempt.
        if s.is_empty() || s.len() > 254 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(invalid());
        }
        let (local, domain) = s.rsplit_once('@').ok_or_else(invalid)?;
        if local.is_empty()
            || local.contains('@')
            || s.contains(['<', '>', '(', ')', ',', ';', ':', '\\', '"', '[', ']'])
        {
            return Err(invalid());
        }
        let local: String = local.nfc().collect::<String>().to_lowercase().nfc().collect();
        let domain = idna::domain_to_ascii(&domain.nfc().collect::<String>()).map_err(|_| invalid())?;
        if local.len() > 64
            || domain.len() < 3
            || !domain.contains('.')
            || domain.starts_with('.')
            || domain.ends_with('.')
            || domain.contains("..")
            || !domain.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            return Err(invalid());
        }
        let canonical = format!("{local}@{domain}");
        if canonical.len() > 254 {
            return Err(invalid());
        }
        Ok(Self(canonical))
    }

    /// The form `raw` is stored and looked up under: canonical when it is an address, else
    /// trimmed and lowercased (a look-up by text that is not an address still finds nothing
    /// rather than failing, and a provider's odd report is kept as it came).
    pub fn key(raw: &str) -> String {
        Self::parse(raw).map(String::from).unwrap_or_else(|_| raw.trim().to_lowercase())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The address as stored and compared (already canonical; kept for callers that key maps).
    pub fn lowercase(&self) -> String {
        self.0.clone()
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

/// Who may call a route or a server function, declared once beside it (the API's route table,
/// the app's server-function table) and enforced before its handler runs, so a handler that
/// forgets to check cannot grant more than its declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone, logged in or not: sign-up, log-in, password reset, the API's own description.
    Public,
    /// A logged-in user acting on their own account or membership (their password, their
    /// sessions, leaving a workspace): any role may, since it touches nobody else.
    Own,
    /// Reads the workspace: a member (or key) with at least this role. Changes nothing.
    Read(Role),
    /// Changes the workspace: a member (or key) with at least this role; never a viewer.
    Change(Editor),
}

/// The roles that may change a workspace: a viewer's role cannot be named here, so a route that
/// changes anything cannot be declared open to viewers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Editor {
    Author,
    Admin,
    Owner,
}

impl From<Editor> for Role {
    fn from(e: Editor) -> Role {
        match e {
            Editor::Author => Role::Author,
            Editor::Admin => Role::Admin,
            Editor::Owner => Role::Owner,
        }
    }
}

impl Access {
    pub const VIEWER_READS: Access = Access::Read(Role::Viewer);
    pub const AUTHOR_READS: Access = Access::Read(Role::Author);
    pub const ADMIN_READS: Access = Access::Read(Role::Admin);
    pub const AUTHOR_CHANGES: Access = Access::Change(Editor::Author);
    pub const ADMIN_CHANGES: Access = Access::Change(Editor::Admin);

    /// The least role a workspace member needs; `None` when no membership is needed.
    pub fn role(self) -> Option<Role> {
        match self {
            Access::Public | Access::Own => None,
            Access::Read(r) => Some(r),
            Access::Change(e) => Some(e.into()),
        }
    }

    /// Whether a member with `role` passes.
    pub fn allows(self, role: Role) -> bool {
        self.role().is_none_or(|needed| role.require(needed).is_ok())
    }

    /// The stable name the OpenAPI document carries (`x-herald-access`): `public`, `own`,
    /// `read:viewer`, `change:author`, ….
    pub fn name(self) -> String {
        match self {
            Access::Public => "public".into(),
            Access::Own => "own".into(),
            Access::Read(r) => format!("read:{}", r.as_str()),
            Access::Change(e) => format!("change:{}", Role::from(e).as_str()),
        }
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
    fn one_mailbox_has_one_canonical_address_however_it_is_typed() {
        let canonical = |raw: &str| Email::parse(raw).map(|e| e.as_str().to_string()).ok();
        // Unicode domain, A-label, mixed case, decomposed (NFD) umlaut: one mailbox.
        for typed in ["Anna@Exämple.com", "anna@xn--exmple-cua.com", "ANNA@EXÄMPLE.COM", "Anna@Exa\u{308}mple.com"] {
            assert_eq!(canonical(typed).as_deref(), Some("anna@xn--exmple-cua.com"), "{typed:?}");
        }
        // A Unicode local part is lowercased and composed, not dropped.
        assert_eq!(canonical("Ä\u{308}NNE@x.io"), canonical("ä\u{308}nne@x.io"));
        assert_eq!(canonical("Jürgen@x.io").as_deref(), Some("jürgen@x.io"));
        assert_eq!(canonical("Ju\u{308}rgen@X.IO").as_deref(), Some("jürgen@x.io"));
        // Full-width dots and letters map to ASCII under UTS-46.
        assert_eq!(canonical("a@ｅｘａｍｐｌｅ．com").as_deref(), Some("a@example.com"));
        // Domains UTS-46 rejects are invalid addresses, not silently kept.
        for bad in ["a@xn--a.com", "a@x_y.io", "a@exa mple.com"] {
            assert!(Email::parse(bad).is_err(), "{bad:?} should be rejected");
        }
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
