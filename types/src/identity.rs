//! A sending identity: an SMTP server a workspace sends through, with its connection limit, rate
//! and optional DKIM key, as the settings page, the engine and the seed data see it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::invalid::Problems;
use crate::{IdentityId, Invalid};

/// An identity as members see it: no password and no key (both are sealed at rest and never
/// shown again).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Identity {
    pub id: IdentityId,
    pub name: String,
    /// The SMTP URL without its password.
    pub smtp_display: String,
    pub max_connections: i32,
    pub rate_per_second: f64,
    pub burst: i32,
    pub dkim_domain: Option<String>,
    pub dkim_selector: Option<String>,
    /// `ses`, `sendgrid`, `postmark`, `mailgun` or `generic`; `None` takes no webhooks.
    pub webhook_provider: Option<String>,
    /// The last path segment of this identity's webhook URL. Never serialised: whoever holds
    /// it can report on the workspace's mail, so only the server builds the URL, for admins.
    #[serde(skip)]
    pub webhook_token: Option<String>,
    /// SES: the SNS topic this webhook accepts, pinned by the first message it heard.
    pub webhook_sns_topic: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl Identity {
    /// `herald._domainkey.example.com`, when it signs.
    pub fn dkim_record(&self) -> Option<String> {
        match (&self.dkim_selector, &self.dkim_domain) {
            (Some(selector), Some(domain)) => Some(format!("{selector}._domainkey.{domain}")),
            _ => None,
        }
    }

    /// "4 connections · 10/s · burst 20".
    pub fn limits(&self) -> String {
        let plural = if self.max_connections == 1 { "" } else { "s" };
        format!(
            "{} connection{plural} · {}/s · burst {}",
            self.max_connections,
            trim_float(self.rate_per_second),
            self.burst
        )
    }
}

/// `10` rather than `10.0`, `0.5` as is.
pub fn trim_float(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v}") }
}

/// What an admin writes to add or change an identity.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct IdentityInput {
    pub name: String,
    /// `smtp://user:pass@host:port`, `smtp://host:587?tls=required` or `smtps://host:465`.
    /// Empty on update keeps the stored URL (and its password).
    #[serde(default)]
    pub smtp_url: String,
    pub max_connections: i32,
    pub rate_per_second: f64,
    pub burst: i32,
    #[serde(default)]
    pub dkim_domain: String,
    #[serde(default)]
    pub dkim_selector: String,
    /// PEM; empty on update keeps the stored key, an empty domain removes it.
    #[serde(default)]
    pub dkim_private_key: String,
}

impl Default for IdentityInput {
    /// What the form starts with: four connections, 10 messages a second, a burst of 20.
    fn default() -> Self {
        Self {
            name: String::new(),
            smtp_url: String::new(),
            max_connections: 4,
            rate_per_second: 10.0,
            burst: 20,
            dkim_domain: String::new(),
            dkim_selector: String::new(),
            dkim_private_key: String::new(),
        }
    }
}

impl IdentityInput {
    /// The checks that need neither the database nor the network, each filed under its field.
    /// (The URL's syntax and destination and the key's PEM are checked by the engine.)
    pub fn check(&self) -> Result<(), Invalid> {
        let mut problems = Problems::default();
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > 80 {
            problems.add("name", "The name needs 1–80 characters.");
        }
        if !(1..=64).contains(&self.max_connections) {
            problems.add("max_connections", "Connections must be between 1 and 64.");
        }
        if !(self.rate_per_second > 0.0 && self.rate_per_second <= 100_000.0) {
            problems.add("rate_per_second", "The rate must be between 0 and 100,000 messages per second.");
        }
        if !(1..=10_000).contains(&self.burst) {
            problems.add("burst", "The burst must be between 1 and 10,000.");
        }
        let dns_label = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        let domain = self.dkim_domain.trim();
        if !domain.is_empty() {
            if !dns_label(domain) {
                problems.add("dkim_domain", "The DKIM domain may hold letters, digits, dots and dashes.");
            }
            if !dns_label(self.dkim_selector.trim()) {
                problems.add("dkim_selector", "DKIM needs a selector (letters, digits, dots, dashes).");
            }
        }
        problems.into_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_each_field_and_accept_the_defaults_with_a_name() {
        let ok = IdentityInput { name: "Relay".into(), ..Default::default() };
        assert_eq!(ok.check(), Ok(()));
        let bad = IdentityInput {
            name: " ".into(),
            max_connections: 0,
            rate_per_second: f64::NAN,
            burst: 0,
            dkim_domain: "example.com".into(),
            ..Default::default()
        };
        let e = bad.check().expect_err("every field is wrong");
        for field in ["name", "max_connections", "rate_per_second", "burst", "dkim_selector"] {
            assert!(e.message_for(field).is_some(), "{field}: {e}");
        }
        assert!(e.message_for("dkim_domain").is_none());
    }

    #[test]
    fn the_webhook_token_never_leaves_the_server() {
        let identity = Identity {
            id: IdentityId::NIL,
            name: "Relay".into(),
            smtp_display: "smtp://relay:587".into(),
            max_connections: 1,
            rate_per_second: 0.5,
            burst: 1,
            dkim_domain: None,
            dkim_selector: None,
            webhook_provider: Some("ses".into()),
            webhook_token: Some("secret-token".into()),
            webhook_sns_topic: None,
            created_at: DateTime::UNIX_EPOCH,
        };
        let json = serde_json::to_string(&identity).expect("serialises");
        assert!(!json.contains("secret-token"), "{json}");
        assert_eq!(identity.limits(), "1 connection · 0.5/s · burst 1");
    }
}
