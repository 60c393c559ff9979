//! Tags on readers.

use serde::{Deserialize, Serialize};

use crate::TagId;
use crate::invalid::Invalid;

/// The longest tag name.
pub const MAX_TAG_CHARS: usize = 50;

/// A workspace's tag, with how many readers carry it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Tag {
    pub id: TagId,
    pub name: String,
    /// Readers with this tag.
    pub readers: i64,
}

/// Tag names: what `POST /api/v1/readers/{id}/tags` adds, and a reader's tags after a change.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct TagNames {
    /// Names; case-insensitive, created when new. At most 50 characters each, no commas.
    pub tags: Vec<String>,
}

/// A tag name as stored: trimmed, one line, 1–50 characters, without commas (they separate
/// tags in an import column and in the bulk form).
pub fn check_tag_name(name: &str) -> Result<String, Invalid> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Invalid::new("A tag needs a name."));
    }
    if name.chars().any(|c| c.is_control() || c == ',') {
        return Err(Invalid::new(format!("“{name}”: a tag name is one line, without commas.")));
    }
    if name.chars().count() > MAX_TAG_CHARS {
        return Err(Invalid::new(format!("A tag name can have at most {MAX_TAG_CHARS} characters.")));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_names_are_one_short_line_without_commas() {
        assert_eq!(check_tag_name("  VIP ").as_deref(), Ok("VIP"));
        assert!(check_tag_name("").is_err());
        assert!(check_tag_name("a,b").is_err());
        assert!(check_tag_name("a\nb").is_err());
        assert!(check_tag_name(&"x".repeat(51)).is_err());
        assert!(check_tag_name(&"é".repeat(50)).is_ok());
    }
}
