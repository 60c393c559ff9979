//! A list: a named group of readers, with how they join it and where it is offered.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::invalid::Problems;
use crate::{Invalid, ListId, Slug};

string_enum!(
    /// How a reader joins a list.
    OptIn, invalid = "Opt-in must be “single” or “double”.", default = Double {
        /// Subscribed at once.
        Single = "single",
        /// Subscribed once the reader opens the link in a confirmation email.
        Double = "double",
    }
);

string_enum!(
    /// Where a list is offered.
    Visibility, invalid = "Visibility must be “public” or “private”.", default = Public {
        /// On the hosted sign-up page and in the preference center.
        Public = "public",
        /// Import and API only.
        Private = "private",
    }
);

/// A list as every surface sees it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct List {
    pub id: ListId,
    pub name: String,
    pub slug: String,
    pub description: String,
    pub opt_in: OptIn,
    pub visibility: Visibility,
    pub created_at: DateTime<Utc>,
}

impl List {
    pub fn is_double_opt_in(&self) -> bool {
        self.opt_in == OptIn::Double
    }
}

/// A list with how many readers are on it, by subscription status.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ListWithCounts {
    #[cfg_attr(feature = "sqlx", sqlx(flatten))]
    #[serde(flatten)]
    pub list: List,
    pub confirmed: i64,
    pub unconfirmed: i64,
    pub unsubscribed: i64,
}

/// What an author writes to create or change a list.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ListInput {
    pub name: String,
    /// The list's address on the hosted page; empty or absent derives one from the name.
    #[serde(default)]
    pub slug: Option<String>,
    #[serde(default)]
    pub description: String,
    /// `single` or `double` (the default).
    #[serde(default)]
    pub opt_in: OptIn,
    /// `public` (the default) or `private`.
    #[serde(default)]
    pub visibility: Visibility,
}

impl ListInput {
    /// The trimmed name and the slug to store, or every problem filed under its field.
    pub fn check(&self) -> Result<(String, Slug), Invalid> {
        let mut problems = Problems::default();
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            problems.add("name", "The list name needs 1–100 characters.");
        }
        if self.description.chars().count() > 1000 {
            problems.add("description", "The description can have at most 1000 characters.");
        }
        let slug = match self.slug.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) => Slug::parse(s).map_err(|e| e.at("slug")),
            None => Slug::from_name(name).map_err(|e| e.at("name")),
        };
        let slug = problems.take(slug);
        problems.into_result()?;
        Ok((name.to_string(), slug.ok_or_else(|| Invalid::field("slug", "The list needs an address."))?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_double_opt_in_and_public_and_checks_name_their_fields() {
        let input: ListInput = serde_json::from_value(serde_json::json!({"name": "Product news"})).expect("parses");
        assert_eq!((input.opt_in, input.visibility), (OptIn::Double, Visibility::Public));
        assert_eq!(input.check().map(|(_, slug)| slug.as_str().to_string()), Ok("product-news".into()));
        let bad = ListInput { name: String::new(), slug: Some("-x-".into()), ..Default::default() };
        let e = bad.check().expect_err("invalid");
        assert!(e.message_for("name").is_some() && e.message_for("slug").is_some(), "{e}");
        assert!(serde_json::from_value::<ListInput>(serde_json::json!({"name": "x", "opt_in": "triple"})).is_err());
    }
}
