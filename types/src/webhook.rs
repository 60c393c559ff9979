//! Outbound webhooks: a workspace's endpoints, the events they receive and their deliveries,
//! signed on the Standard Webhooks scheme (<https://www.standardwebhooks.com>).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Every event type an endpoint can receive, in the order the page lists them.
pub const EVENT_TYPES: &[(&str, &str)] = &[
    ("reader.subscribed", "A reader joined a list (or joined it again)"),
    ("reader.confirmed", "A reader's subscription to a list is confirmed"),
    ("reader.unsubscribed", "A reader left a list"),
    ("reader.updated", "A reader's address, name, fields or status changed"),
    ("reader.deleted", "A reader was erased (ids only)"),
    ("reader.tagged", "A tag was added to a reader"),
    ("reader.untagged", "A tag was removed from a reader"),
    ("campaign.started", "A campaign began sending"),
    ("campaign.paused", "A sending campaign was paused"),
    ("campaign.finished", "A campaign finished (sent or cancelled)"),
    ("message.sent", "A message (campaign or transactional) was handed to the mail server"),
    ("message.delivered", "The provider reported a message delivered"),
    ("message.bounced", "A message bounced (`hard` says whether for good)"),
    ("message.complained", "A reader marked a message as spam"),
    ("message.opened", "A message was opened (`privacy_prefetch` marks mail-privacy proxies)"),
    ("message.clicked", "A link in a message was clicked"),
    ("automation.entered", "A reader entered an automation"),
    ("automation.step_sent", "An automation's email step queued its mail to a reader"),
    ("automation.exited", "A reader's run through an automation ended (finished or left early)"),
];

/// The test event "send a test event" sends; no endpoint subscribes to it.
pub const TEST_EVENT: &str = "webhook.test";

/// The version of the payloads' shape, in every payload as `schema_version`.
pub const SCHEMA_VERSION: u32 = 1;

/// Whether `t` names an event type (exactly, or a group as `reader.*`).
pub fn expand_event_types(requested: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for r in requested {
        let r = r.trim();
        let matched: Vec<&str> = match r.strip_suffix(".*") {
            Some(group) => EVENT_TYPES.iter().map(|(t, _)| *t).filter(|t| t.split('.').next() == Some(group)).collect(),
            None => EVENT_TYPES.iter().map(|(t, _)| *t).filter(|t| *t == r).collect(),
        };
        if matched.is_empty() {
            return Err(format!("“{r}” is not an event type; see the list of event types."));
        }
        for t in matched {
            if !out.iter().any(|o| o == t) {
                out.push(t.to_string());
            }
        }
    }
    if out.is_empty() {
        return Err("Choose at least one event type.".into());
    }
    out.sort_by_key(|t| EVENT_TYPES.iter().position(|(e, _)| e == t));
    Ok(out)
}

/// An endpoint as the API and the page show it (never with its secret).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct WebhookEndpoint {
    pub id: Uuid,
    pub url: String,
    pub description: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    /// Why Herald disabled it (every attempt failed for 72 hours); `None` otherwise.
    pub disabled_reason: Option<String>,
    /// While a rotated secret's predecessor still signs too.
    pub previous_secret_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// Deliveries waiting for their next attempt.
    pub pending: i64,
}

/// What an author or a client sets of an endpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct WebhookEndpointInput {
    /// `https://…` (or `http://…`); it must reach the public internet.
    pub url: String,
    #[serde(default)]
    pub description: String,
    /// Exact types (`reader.subscribed`) or groups (`reader.*`).
    pub event_types: Vec<String>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

/// An endpoint just made, or its secret just rotated: the secret, shown this once.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct WebhookEndpointWithSecret {
    pub endpoint: WebhookEndpoint,
    /// `whsec_` + base64: the HMAC key is the decoded bytes (Standard Webhooks).
    pub secret: String,
}

/// A rotation: the old secret keeps signing beside the new one for `overlap_hours` (default 24).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RotateSecret {
    #[serde(default)]
    pub overlap_hours: Option<u32>,
}

/// One event's delivery to one endpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct WebhookDelivery {
    /// The event id (`webhook-id`), the same on every attempt.
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `delivered` or `failed` (gave up after retrying for a day).
    pub state: String,
    pub attempts: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub last_status: Option<i16>,
    pub last_error: Option<String>,
    pub last_latency_ms: Option<i32>,
    /// The first 2 KiB of the receiver's last answer.
    pub last_response: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A page of an endpoint's deliveries, newest first.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct WebhookDeliveries {
    pub items: Vec<WebhookDelivery>,
    /// Pass as `before` for the next page; absent on the last.
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_expand_and_unknown_types_are_refused() {
        let all_readers = expand_event_types(&["reader.*".into()]).expect("group");
        assert_eq!(all_readers.len(), 7);
        assert!(all_readers.iter().all(|t| t.starts_with("reader.")));
        let mixed = expand_event_types(&["campaign.finished".into(), "reader.tagged".into(), "reader.tagged".into()])
            .expect("ok");
        assert_eq!(mixed, vec!["reader.tagged".to_string(), "campaign.finished".to_string()]);
        assert!(expand_event_types(&["reader.exploded".into()]).is_err());
        assert!(expand_event_types(&[]).is_err());
    }
}
