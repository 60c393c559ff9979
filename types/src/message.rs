//! Transactional messages as the API, the pages and the engine see them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{MessageId, TemplateId};

string_enum!(
    /// Where a transactional message is in its life. Queued (waiting, or waiting to retry) →
    /// sending (a delivery loop holds it) → sent or failed; a queued message can be cancelled.
    MessageStatus, invalid = "Unknown status: use one of queued, sending, sent, failed, cancelled.", default = Queued {
        Queued = "queued",
        Sending = "sending",
        Sent = "sent",
        Failed = "failed",
        Cancelled = "cancelled",
    }
);

impl MessageStatus {
    /// Whether a delivery loop may still hand it to SMTP: the states a cancel can stop.
    pub fn can_cancel(self) -> bool {
        self == MessageStatus::Queued
    }
}

/// A message as the API and the pages show it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Message {
    pub id: MessageId,
    pub idempotency_key: String,
    pub status: MessageStatus,
    pub to_email: String,
    pub to_name: String,
    pub from_email: String,
    pub from_name: String,
    pub subject: String,
    pub template_id: Option<TemplateId>,
    pub template_name: Option<String>,
    pub template_version: Option<i32>,
    /// What the caller sent with the message, returned as it came (a JSON object).
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub metadata: serde_json::Value,
    pub attempts: i32,
    /// When the next try is due, while it is queued.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub provider_id: Option<String>,
    pub smtp_reply: Option<String>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub opened_at: Option<DateTime<Utc>>,
    pub clicked_at: Option<DateTime<Utc>>,
    pub bounced_at: Option<DateTime<Utc>>,
    pub complained_at: Option<DateTime<Utc>>,
}

impl Message {
    /// The furthest thing that happened after it was sent, if anything: complained, bounced,
    /// clicked, opened or delivered.
    pub fn outcome(&self) -> Option<&'static str> {
        [
            (self.complained_at, "complained"),
            (self.bounced_at, "bounced"),
            (self.clicked_at, "clicked"),
            (self.opened_at, "opened"),
            (self.delivered_at, "delivered"),
        ]
        .into_iter()
        .find_map(|(at, what)| at.map(|_| what))
    }

    /// `Name <address>`, or the bare address when it has no name.
    pub fn recipient(&self) -> String {
        mailbox(&self.to_name, &self.to_email)
    }

    /// `Name <address>`, or the bare address when it has no name.
    pub fn sender(&self) -> String {
        mailbox(&self.from_name, &self.from_email)
    }

    /// The template and its version (`receipt v3`), or empty for inline content.
    pub fn template_label(&self) -> String {
        self.template_name.as_ref().map(|n| format!("{n} v{}", self.template_version.unwrap_or(1))).unwrap_or_default()
    }
}

fn mailbox(name: &str, email: &str) -> String {
    if name.is_empty() { email.to_string() } else { format!("{name} <{email}>") }
}

/// One thing that happened to a message (queued, sent, opened, bounced…).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct MessageEvent {
    pub kind: String,
    pub detail: String,
    pub occurred_at: DateTime<Utc>,
}

/// A message with its rendered content and history, for its page.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MessageDetail {
    pub message: Message,
    pub html: String,
    pub text: String,
    pub events: Vec<MessageEvent>,
}

/// The body of `POST /api/v1/messages`: a template or inline content, to one recipient.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    /// The recipient's address.
    pub to: String,
    #[serde(default)]
    pub to_name: String,
    /// Required with inline content; overrides the template's subject when given.
    #[serde(default)]
    pub subject: Option<String>,
    /// A transactional template's id or name.
    #[serde(default)]
    pub template: Option<String>,
    /// The template's variables (strict: a missing one is a 422).
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub variables: Option<serde_json::Value>,
    /// Inline MiniJinja content (with `variables`), instead of a template.
    #[serde(default)]
    pub html: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    /// The sender's address; defaults to the template's, then the workspace's transactional
    /// sender.
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub from_name: Option<String>,
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Send later (RFC 3339); past or absent means now.
    #[serde(default)]
    pub send_at: Option<DateTime<Utc>>,
    /// Anything the caller wants back with the message (a JSON object).
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub metadata: Option<serde_json::Value>,
    /// Open and click tracking; on unless false.
    #[serde(default)]
    pub tracking: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_in_any_case_and_only_queued_can_be_cancelled() {
        assert_eq!(" Sent ".parse::<MessageStatus>(), Ok(MessageStatus::Sent));
        assert!("bounced".parse::<MessageStatus>().is_err());
        let cancellable: Vec<_> = MessageStatus::ALL.iter().filter(|s| s.can_cancel()).collect();
        assert_eq!(cancellable, [&MessageStatus::Queued]);
    }
}
