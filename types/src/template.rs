//! A transactional template as authors and API callers write it, and as it is stored: the
//! current version's content, its history, and what it renders to.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::invalid::Problems;
use crate::{Email, Invalid, TemplateId};

/// The most a subject or body source may hold.
pub const MAX_SOURCE: usize = 512 * 1024;

/// A template as listed and edited: its current version's content.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Template {
    pub id: TemplateId,
    pub name: String,
    pub description: String,
    pub version: i32,
    pub from_name: String,
    pub from_email: String,
    pub reply_to: String,
    pub subject: String,
    pub html: String,
    pub text_body: String,
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub sample: serde_json::Value,
    pub updated_at: DateTime<Utc>,
}

impl Template {
    /// What the editor starts from to save the next version.
    pub fn input(&self) -> TemplateInput {
        TemplateInput {
            name: self.name.clone(),
            description: self.description.clone(),
            from_name: self.from_name.clone(),
            from_email: self.from_email.clone(),
            reply_to: self.reply_to.clone(),
            subject: self.subject.clone(),
            html: self.html.clone(),
            text_body: self.text_body.clone(),
            sample: self.sample.clone(),
        }
    }
}

/// One saved version, for the history list.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct TemplateVersion {
    pub version: i32,
    pub subject: String,
    pub created_at: DateTime<Utc>,
}

/// What a template (or an inline request) renders to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderedMessage {
    pub subject: String,
    pub html: String,
    pub text: String,
}

/// A named, versioned template: `POST /api/v1/messages` names it in `template`. Every save of
/// an existing one is a new version.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct TemplateInput {
    /// Lowercase letters, digits, `-` and `_`: what `POST /messages` names in `template`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub from_name: String,
    #[serde(default)]
    pub from_email: String,
    #[serde(default)]
    pub reply_to: String,
    /// MiniJinja, like the bodies: `Reset your password, {{ name }}`.
    pub subject: String,
    #[serde(default)]
    pub html: String,
    #[serde(default)]
    pub text_body: String,
    /// Sample variables for the preview (a JSON object; `{}` when omitted or null).
    #[serde(default = "empty_object", deserialize_with = "null_as_empty")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub sample: serde_json::Value,
}

impl TemplateInput {
    /// The checks that need no template engine, each filed under its field; returns the input
    /// normalised (the name lowercased, addresses trimmed). Compiling is the engine's part.
    pub fn check(&self) -> Result<TemplateInput, Invalid> {
        let mut i = self.clone();
        let mut problems = Problems::default();
        i.name = i.name.trim().to_ascii_lowercase();
        let name_ok = !i.name.is_empty()
            && i.name.len() <= 63
            && i.name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && i.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !name_ok {
            problems.add(
                "name",
                "The name may use lowercase letters, digits, “-” and “_” (up to 63), e.g. password-reset.",
            );
        }
        if i.subject.trim().is_empty() {
            problems.add("subject", "The subject is required.");
        }
        if i.html.trim().is_empty() && i.text_body.trim().is_empty() {
            problems.add("html", "Write an HTML body, a text body, or both.");
        }
        for (field, source) in [("subject", &i.subject), ("html", &i.html), ("text_body", &i.text_body)] {
            if source.len() > MAX_SOURCE {
                problems.add(field, "A template may be at most 512 KB.");
            }
        }
        i.from_email = i.from_email.trim().to_string();
        i.reply_to = i.reply_to.trim().to_string();
        for (field, address) in [("from_email", &i.from_email), ("reply_to", &i.reply_to)] {
            if !address.is_empty() {
                problems.check(Email::parse(address).map(drop).map_err(|e| e.at(field)));
            }
        }
        if !i.sample.is_object() {
            problems.add("sample", "The sample variables must be a JSON object, like {\"name\": \"Ada\"}.");
        }
        problems.into_result().map(|()| i)
    }
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(if v.is_null() { empty_object() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omitted_or_null_samples_are_empty_objects() {
        for body in [
            serde_json::json!({"name": "a", "subject": "s"}),
            serde_json::json!({"name": "a", "subject": "s", "sample": null}),
        ] {
            let t: TemplateInput = serde_json::from_value(body).expect("parses");
            assert_eq!(t.sample, serde_json::json!({}));
        }
    }

    #[test]
    fn checks_name_their_fields_and_normalise() {
        let ok = TemplateInput {
            name: " Password-Reset ".into(),
            subject: "Hi".into(),
            html: "<p>x</p>".into(),
            from_email: " ada@example.com ".into(),
            sample: empty_object(),
            ..Default::default()
        };
        let normal = ok.check().expect("valid");
        assert_eq!((normal.name.as_str(), normal.from_email.as_str()), ("password-reset", "ada@example.com"));
        let bad = TemplateInput { name: "no spaces".into(), reply_to: "nobody".into(), ..Default::default() };
        let e = bad.check().expect_err("invalid");
        for field in ["name", "subject", "html", "reply_to", "sample"] {
            assert!(e.message_for(field).is_some(), "{field}: {e}");
        }
    }
}
