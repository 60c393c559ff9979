//! A transactional template as authors and API callers write it.

use serde::{Deserialize, Serialize};

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
}
