//! Custom fields: a workspace's typed reader fields. Values live in the reader's
//! `attributes` object under the field's key, typed as JSON (text and dates as strings, dates in
//! ISO form `YYYY-MM-DD`, numbers as numbers, yes/no as booleans, a choice as its text), so
//! templates (`{{ reader.fields.plan }}`), filters and the API read them as before.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::invalid::{Invalid, Problems};

string_enum!(
    /// What a field holds.
    FieldKind, invalid = "Unknown field type: use text, number, date, yes_no or choice.", default = Text {
        Text = "text",
        Number = "number",
        /// A calendar day, `YYYY-MM-DD`.
        Date = "date",
        YesNo = "yes_no",
        /// One of the field's `choices`.
        Choice = "choice",
    }
);

impl FieldKind {
    pub fn label(self) -> &'static str {
        match self {
            FieldKind::Text => "Text",
            FieldKind::Number => "Number",
            FieldKind::Date => "Date",
            FieldKind::YesNo => "Yes / no",
            FieldKind::Choice => "One of a set",
        }
    }
}

/// The longest text value.
pub const MAX_TEXT_CHARS: usize = 1_000;
/// Fields per workspace.
pub const MAX_FIELDS: usize = 100;

/// A workspace's field.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Field {
    /// Its name in merge tags (`{{ reader.fields.<key> }}`), the API and imports.
    pub key: String,
    pub label: String,
    pub kind: FieldKind,
    /// For `choice`: the allowed values, in order.
    #[serde(default)]
    pub choices: Vec<String>,
}

/// `POST /api/v1/fields`, `PATCH /api/v1/fields/{key}` (the key and type cannot change).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FieldInput {
    #[serde(default)]
    pub key: String,
    pub label: String,
    #[serde(default)]
    pub kind: FieldKind,
    #[serde(default)]
    pub choices: Vec<String>,
}

impl FieldInput {
    /// Every problem at once, keyed `key`, `label` and `choices`.
    pub fn validate(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        if let Err(e) = check_key(&self.key) {
            problems.add("key", e.to_string());
        }
        let label = self.label.trim();
        if label.is_empty() || label.chars().count() > 60 || label.chars().any(char::is_control) {
            problems.add("label", "Give the field a label of one line, at most 60 characters.");
        }
        match self.kind {
            FieldKind::Choice => {
                let choices: Vec<&str> = self.choices.iter().map(|c| c.trim()).collect();
                if choices.is_empty() || choices.len() > 50 {
                    problems.add("choices", "A choice field needs 1 to 50 choices.");
                } else if choices
                    .iter()
                    .any(|c| c.is_empty() || c.chars().count() > 100 || c.chars().any(char::is_control))
                {
                    problems.add("choices", "Each choice is one line of 1 to 100 characters.");
                } else if (1..choices.len()).any(|i| choices[..i].iter().any(|c| c.eq_ignore_ascii_case(choices[i]))) {
                    problems.add("choices", "Each choice once.");
                }
            }
            _ if !self.choices.is_empty() => problems.add("choices", "Only a choice field has choices."),
            _ => {}
        }
        problems.into_result()
    }
}

/// A field key: 1–40 of `a–z`, `0–9` and `_`, starting with a letter, so it works as written
/// in a merge tag (`reader.fields.plan_tier`).
pub fn check_key(key: &str) -> Result<(), Invalid> {
    let ok = !key.is_empty()
        && key.len() <= 40
        && key.starts_with(|c: char| c.is_ascii_lowercase())
        && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(
            "A key is 1 to 40 lowercase letters, digits or _, starting with a letter (like plan or signup_source).",
        ))
    }
}

/// The key an import column or a label suggests: `"Plan tier"` → `plan_tier`.
pub fn suggest_key(label: &str) -> String {
    let mut key: String = label
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>()
        .split('_')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("_");
    if !key.starts_with(|c: char| c.is_ascii_lowercase()) {
        key = format!("f_{key}");
    }
    key.chars().take(40).collect::<String>().trim_end_matches('_').to_string()
}

impl Field {
    /// A value typed into a form or read from a CSV cell, as stored; empty means "no value"
    /// (`None`). The error says what this field takes.
    pub fn parse_text(&self, raw: &str) -> Result<Option<Value>, String> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(None);
        }
        self.check(&Value::String(raw.to_string())).map(Some)
    }

    /// A value from JSON (the API) or text, checked and normalised: a number may come as
    /// `"12.5"`, a yes/no as `"yes"`, a date as `"2026-11-26"`, a choice in any case.
    pub fn check(&self, v: &Value) -> Result<Value, String> {
        let wrong = |what: &str| format!("{} takes {what}.", self.label);
        match (self.kind, v) {
            (FieldKind::Text, Value::String(s)) if s.chars().count() <= MAX_TEXT_CHARS => Ok(Value::String(s.clone())),
            (FieldKind::Text, Value::Number(n)) => Ok(Value::String(n.to_string())),
            (FieldKind::Text, Value::Bool(b)) => Ok(Value::String(b.to_string())),
            (FieldKind::Text, _) => Err(wrong(&format!("text of at most {MAX_TEXT_CHARS} characters"))),
            (FieldKind::Number, Value::Number(n)) => Ok(Value::Number(n.clone())),
            (FieldKind::Number, Value::String(s)) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .and_then(|f| {
                    if f.fract() == 0.0 && f.abs() < 9e15 {
                        Some(Value::from(f as i64))
                    } else {
                        serde_json::Number::from_f64(f).map(Value::Number)
                    }
                })
                .ok_or_else(|| wrong("a number, like 12 or 3.5")),
            (FieldKind::Number, _) => Err(wrong("a number, like 12 or 3.5")),
            (FieldKind::Date, Value::String(s)) => chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
                .map(|d| Value::String(d.format("%Y-%m-%d").to_string()))
                .map_err(|_| wrong("a date written YYYY-MM-DD, like 2026-11-26")),
            (FieldKind::Date, _) => Err(wrong("a date written YYYY-MM-DD, like 2026-11-26")),
            (FieldKind::YesNo, Value::Bool(b)) => Ok(Value::Bool(*b)),
            (FieldKind::YesNo, Value::String(s)) => match s.trim().to_lowercase().as_str() {
                "yes" | "y" | "true" | "1" | "on" => Ok(Value::Bool(true)),
                "no" | "n" | "false" | "0" | "off" => Ok(Value::Bool(false)),
                _ => Err(wrong("yes or no")),
            },
            (FieldKind::YesNo, _) => Err(wrong("yes or no")),
            (FieldKind::Choice, Value::String(s)) => self
                .choices
                .iter()
                .find(|c| c.eq_ignore_ascii_case(s.trim()))
                .map(|c| Value::String(c.clone()))
                .ok_or_else(|| wrong(&format!("one of {}", self.choices.join(", ")))),
            (FieldKind::Choice, _) => Err(wrong(&format!("one of {}", self.choices.join(", ")))),
        }
    }

    /// A stored value as a form shows it.
    pub fn display(&self, v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Bool(b) => if *b { "yes" } else { "no" }.to_string(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(kind: FieldKind, choices: &[&str]) -> Field {
        Field { key: "k".into(), label: "K".into(), kind, choices: choices.iter().map(|c| c.to_string()).collect() }
    }

    #[test]
    fn values_are_typed_and_wrong_types_refused() {
        let n = field(FieldKind::Number, &[]);
        assert_eq!(n.check(&json!("12")), Ok(json!(12)));
        assert_eq!(n.check(&json!(" 3.5 ")), Ok(json!(3.5)));
        assert!(n.check(&json!("twelve")).expect_err("twelve").contains("a number"));
        assert!(n.check(&json!("NaN")).is_err());
        let d = field(FieldKind::Date, &[]);
        assert_eq!(d.check(&json!("2026-02-03")), Ok(json!("2026-02-03")));
        assert!(d.check(&json!("03/02/2026")).is_err());
        assert!(d.check(&json!("2026-02-30")).is_err());
        let y = field(FieldKind::YesNo, &[]);
        assert_eq!((y.check(&json!("Yes")), y.check(&json!(false))), (Ok(json!(true)), Ok(json!(false))));
        assert!(y.check(&json!("maybe")).is_err());
        let c = field(FieldKind::Choice, &["Free", "Pro"]);
        assert_eq!(c.check(&json!("pro")), Ok(json!("Pro")));
        assert!(c.check(&json!("team")).expect_err("team").contains("one of Free, Pro"));
        assert_eq!(field(FieldKind::Text, &[]).parse_text("  "), Ok(None));
    }

    #[test]
    fn keys_and_definitions_are_checked() {
        assert!(check_key("plan_tier").is_ok());
        for bad in ["", "Plan", "1st", "a-b", &"x".repeat(41)] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        assert_eq!(suggest_key("Plan tier!"), "plan_tier");
        assert_eq!(suggest_key("2nd city"), "f_2nd_city");
        let bad = FieldInput {
            key: "x".into(),
            label: "".into(),
            kind: FieldKind::Choice,
            choices: vec!["a".into(), "A".into()],
        };
        let fields: Vec<_> = bad.validate().expect_err("bad").errors.into_iter().filter_map(|e| e.field).collect();
        assert_eq!(fields, ["label", "choices"]);
    }
}
