//! Postmark webhooks.
//!
//! Postmark does not sign webhook payloads. What it offers is HTTP Basic auth: the credentials
//! are put in the webhook URL (`https://user:pass@host/...`) and sent with every POST. So the
//! secret is "user:pass", compared in constant time, and there is no timestamp to bound: replays
//! are made harmless by deduplicating on `event_id` instead. Keep the URL https-only.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    EventKind, ProviderEvent, WebhookError, bad, ct_eq, detail, header, id_field, parse_rfc3339, require_secret,
    str_field, strip_angle, unauthorized,
};

pub(super) fn verify(
    headers: &HashMap<String, String>,
    body: &[u8],
    secret: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<ProviderEvent>, WebhookError> {
    let expected = require_secret(secret)?;
    let auth = header(headers, "authorization").ok_or_else(|| unauthorized("missing Authorization header"))?;
    let given = match auth.split_once(' ') {
        Some((scheme, creds)) if scheme.eq_ignore_ascii_case("basic") => B64.decode(creds.trim()).ok(),
        _ => None,
    }
    .ok_or_else(|| unauthorized("Authorization is not HTTP Basic"))?;
    if !ct_eq(&given, expected.as_bytes()) {
        return Err(unauthorized("wrong Postmark webhook credentials"));
    }
    parse(body, now)
}

pub(super) fn parse(body: &[u8], now: DateTime<Utc>) -> Result<Vec<ProviderEvent>, WebhookError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("Postmark body is not JSON: {e}")))?;
    if !v.is_object() {
        return Err(bad("Postmark body is not a JSON object"));
    }
    let required = |key: &str| id_field(&v, key).ok_or_else(|| bad(format!("Postmark {key} missing")));
    let time = |key: &str| str_field(&v, key).as_deref().and_then(parse_rfc3339).unwrap_or(now);
    let provider_id = str_field(&v, "MessageID");

    let (event_id, kind, email, at, text) = match str_field(&v, "RecordType").as_deref() {
        Some("Delivery") => {
            let recipient = required("Recipient")?;
            let id = format!("delivery:{}:{recipient}", required("MessageID")?);
            (id, EventKind::Delivered, recipient, time("DeliveredAt"), detail(&[str_field(&v, "Details").as_deref()]))
        }
        Some("Bounce") => {
            let bounce_type = str_field(&v, "Type").unwrap_or_default();
            // HardBounce and BadEmailAddress say the address is bad. Everything else (SoftBounce,
            // Transient, DnsError, AutoResponder, Blocked, ManuallyDeactivated...) is not
            // evidence about the address itself, so it counts as soft.
            let hard = matches!(bounce_type.as_str(), "HardBounce" | "BadEmailAddress");
            let text = detail(&[
                Some(&bounce_type),
                str_field(&v, "Description").as_deref(),
                str_field(&v, "Details").as_deref(),
            ]);
            let id = format!("bounce:{}", required("ID")?);
            (id, EventKind::Bounce { hard }, required("Email")?, time("BouncedAt"), text)
        }
        Some("SpamComplaint") => {
            let text = detail(&[str_field(&v, "Type").as_deref().or(Some("SpamComplaint"))]);
            let id = format!("complaint:{}", required("ID")?);
            (id, EventKind::Complaint, required("Email")?, time("BouncedAt"), text)
        }
        Some("SubscriptionChange") if v.get("SuppressSending").and_then(Value::as_bool) == Some(true) => {
            let changed_at = required("ChangedAt")?;
            let id = format!("subscription:{}:{changed_at}", required("MessageID")?);
            let text = detail(&[str_field(&v, "SuppressionReason").as_deref(), str_field(&v, "Origin").as_deref()]);
            (id, EventKind::Unsubscribe, required("Recipient")?, time("ChangedAt"), text)
        }
        // Open, Click, reactivations (SubscriptionChange with SuppressSending false)...
        _ => return Ok(Vec::new()),
    };
    Ok(vec![ProviderEvent {
        event_id,
        kind,
        email,
        message_id: message_id(&v),
        provider_id,
        at,
        detail: text,
        delivery_token: None,
    }])
}

/// Our Message-ID from the `Headers` array ([{"Name": "Message-ID", "Value": "<...>"}]), when
/// the payload includes it.
fn message_id(v: &Value) -> Option<String> {
    v.get("Headers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|h| str_field(h, "Name").is_some_and(|n| n.eq_ignore_ascii_case("Message-ID")))
        .and_then(|h| str_field(h, "Value"))
        .as_deref()
        .and_then(strip_angle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::tests::hdrs;

    /// From Postmark's webhook documentation.
    const BOUNCE: &str = r#"{
      "RecordType": "Bounce", "MessageStream": "outbound", "ID": 4323372036854775807,
      "Type": "HardBounce", "TypeCode": 1, "Name": "Hard bounce", "Tag": "Test",
      "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
      "Metadata": {"a_key": "a_value", "b_key": "b_value"}, "ServerID": 23,
      "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
      "Details": "Test bounce details", "Email": "john@example.com", "From": "sender@example.com",
      "BouncedAt": "2019-11-05T16:33:54.9070259Z", "DumpAvailable": true, "Inactive": true,
      "CanActivate": true, "Subject": "Test subject", "Content": "<Full dump of bounce>",
      "Headers": [{"Name": "Message-ID", "Value": "<p1.xyz@news.example.com>"}]
    }"#;
    const DELIVERY: &str = r#"{
      "RecordType": "Delivery", "ServerID": 23, "MessageStream": "outbound",
      "MessageID": "00000000-0000-0000-0000-000000000000", "Recipient": "john@example.com",
      "Tag": "welcome-email", "DeliveredAt": "2019-11-05T16:33:54.9070259Z",
      "Details": "Test delivery webhook details", "Metadata": {"a_key": "a_value"}
    }"#;
    const COMPLAINT: &str = r#"{
      "RecordType": "SpamComplaint", "MessageStream": "outbound", "ID": 42, "Type": "SpamComplaint",
      "TypeCode": 512, "Name": "Spam complaint", "Tag": "Test",
      "MessageID": "00000000-0000-0000-0000-000000000000", "Metadata": {}, "ServerID": 1234,
      "Description": "", "Details": "Test spam complaint details", "Email": "john@example.com",
      "From": "sender@example.com", "BouncedAt": "2019-11-05T16:33:54.9070259Z", "DumpAvailable": true,
      "Inactive": true, "CanActivate": false, "Subject": "Test subject", "Content": "<Abuse report dump>"
    }"#;
    const SUBSCRIPTION: &str = r#"{
      "RecordType": "SubscriptionChange", "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
      "ServerID": 123456, "MessageStream": "outbound", "ChangedAt": "2020-02-01T10:53:34.416071Z",
      "Recipient": "bounced-address@wildbit.com", "Origin": "Recipient", "SuppressSending": true,
      "SuppressionReason": "ManualSuppression", "Tag": "my-tag", "Metadata": {"example": "value"}
    }"#;

    fn basic(user_pass: &str) -> HashMap<String, String> {
        hdrs(&[("authorization", &format!("Basic {}", B64.encode(user_pass)))])
    }

    #[test]
    fn basic_auth() -> anyhow::Result<()> {
        let now = Utc::now();
        let body = DELIVERY.as_bytes();
        assert_eq!(verify(&basic("herald:s3cret"), body, Some("herald:s3cret"), now)?.len(), 1);
        assert_eq!(
            verify(
                &hdrs(&[("authorization", &format!("basic {}", B64.encode("herald:s3cret")))]),
                body,
                Some("herald:s3cret"),
                now
            )?
            .len(),
            1
        );
        let refused = [
            verify(&basic("herald:wrong"), body, Some("herald:s3cret"), now),
            verify(&basic("herald:s3cret2"), body, Some("herald:s3cret"), now),
            verify(&basic("herald:s3cret"), body, None, now),
            verify(&basic(""), body, Some(""), now),
            verify(&HashMap::new(), body, Some("herald:s3cret"), now),
            verify(&hdrs(&[("authorization", "Bearer herald:s3cret")]), body, Some("herald:s3cret"), now),
            verify(&hdrs(&[("authorization", "Basic %%%")]), body, Some("herald:s3cret"), now),
        ];
        for r in refused {
            assert!(matches!(r, Err(WebhookError::Unauthorized(_))), "{r:?}");
        }
        Ok(())
    }

    #[test]
    fn mapping() -> anyhow::Result<()> {
        let now = Utc::now();
        let one = |body: &str| -> anyhow::Result<ProviderEvent> {
            parse(body.as_bytes(), now)?.pop().ok_or_else(|| anyhow::anyhow!("no event"))
        };
        let at = parse_rfc3339("2019-11-05T16:33:54.9070259Z").ok_or_else(|| anyhow::anyhow!("t"))?;

        let b = one(BOUNCE)?;
        assert_eq!(b.kind, EventKind::Bounce { hard: true });
        assert_eq!(b.event_id, "bounce:4323372036854775807");
        assert_eq!(b.email, "john@example.com");
        assert_eq!(b.provider_id.as_deref(), Some("883953f4-6105-42a2-a16a-77a8eac79483"));
        assert_eq!(b.message_id.as_deref(), Some("p1.xyz@news.example.com"));
        assert_eq!(b.at, at);
        assert!(b.detail.starts_with("HardBounce: The server was unable"), "{}", b.detail);

        for (t, hard) in [("BadEmailAddress", true), ("SoftBounce", false), ("Transient", false), ("DnsError", false)] {
            let body = BOUNCE.replace("\"Type\": \"HardBounce\"", &format!("\"Type\": \"{t}\""));
            assert_eq!(one(&body)?.kind, EventKind::Bounce { hard }, "{t}");
        }

        let d = one(DELIVERY)?;
        assert_eq!(d.kind, EventKind::Delivered);
        assert_eq!(d.event_id, "delivery:00000000-0000-0000-0000-000000000000:john@example.com");
        assert_eq!(d.message_id, None);
        assert_eq!(d.at, at);

        let c = one(COMPLAINT)?;
        assert_eq!(c.kind, EventKind::Complaint);
        assert_eq!(c.event_id, "complaint:42");
        assert_eq!(c.email, "john@example.com");

        let s = one(SUBSCRIPTION)?;
        assert_eq!(s.kind, EventKind::Unsubscribe);
        assert_eq!(s.event_id, "subscription:883953f4-6105-42a2-a16a-77a8eac79483:2020-02-01T10:53:34.416071Z");
        assert_eq!(s.email, "bounced-address@wildbit.com");
        assert_eq!(s.detail, "ManualSuppression: Recipient");

        // Reactivation and opens are ignored.
        let reactivated = SUBSCRIPTION.replace("\"SuppressSending\": true", "\"SuppressSending\": false");
        assert!(parse(reactivated.as_bytes(), now)?.is_empty());
        assert!(parse(br#"{"RecordType":"Open","MessageID":"x","Recipient":"a@b.c"}"#, now)?.is_empty());

        // Missing ids or addresses, and non-objects, are bad requests.
        let no_id = BOUNCE.replace("\"ID\": 4323372036854775807,", "");
        assert!(matches!(parse(no_id.as_bytes(), now), Err(WebhookError::BadRequest(_))));
        let no_email = BOUNCE.replace("\"Email\": \"john@example.com\",", "");
        assert!(matches!(parse(no_email.as_bytes(), now), Err(WebhookError::BadRequest(_))));
        assert!(matches!(parse(b"[]", now), Err(WebhookError::BadRequest(_))));
        Ok(())
    }
}
