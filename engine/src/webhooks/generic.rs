//! Herald's own webhook format, for relays and providers without a dedicated parser.
//!
//! The sender signs the exact bytes it POSTs, together with a timestamp, so neither can be
//! changed and a captured delivery stops being accepted once it is older than the allowed age:
//!
//! ```text
//! X-Herald-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>
//! ```
//!
//! Several `v1=` entries may be sent (one per secret while rotating); one match is enough.
//!
//! The body is one JSON object or an array of them:
//!
//! ```json
//! {"event_id": "evt_123", "type": "bounce", "bounce_type": "hard", "email": "a@example.com",
//!  "message_id": "<id@host>", "provider_id": "abc", "timestamp": "2024-05-01T10:00:00Z",
//!  "detail": "550 5.1.1 user unknown"}
//! ```
//!
//! `type` is one of delivered, bounce, complaint, unsubscribe; `bounce_type` is hard (default)
//! or soft; `message_id`, `provider_id`, `timestamp` (RFC 3339) and `detail` are optional. Unlike
//! the provider formats, unknown types are refused rather than ignored: this format is ours, so a
//! typo ("bounced") should fail loudly instead of silently dropping bounces.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;

use super::{
    EventKind, ProviderEvent, WebhookConfig, WebhookError, bad, check_fresh, detail, header, hmac_sha256_hex_matches,
    parse_rfc3339, require_secret, signed_unix_time, strip_angle, unauthorized,
};

const SIGNATURE_HEADER: &str = "x-herald-signature";

/// The `X-Herald-Signature` header value for `body` sent at unix time `t`.
pub fn sign_generic(secret: &str, t: i64, body: &[u8]) -> String {
    #[allow(clippy::unwrap_used)] // HMAC takes keys of any length
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

pub(super) fn verify(
    headers: &HashMap<String, String>,
    body: &[u8],
    secret: Option<&str>,
    cfg: &WebhookConfig,
    now: DateTime<Utc>,
) -> Result<Vec<ProviderEvent>, WebhookError> {
    let secret = require_secret(secret)?;
    let value = header(headers, SIGNATURE_HEADER).ok_or_else(|| unauthorized("missing X-Herald-Signature header"))?;
    let mut t = None;
    let mut sigs = Vec::new();
    for part in value.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = Some(v.trim()),
            Some(("v1", v)) => sigs.push(v.trim()),
            _ => {}
        }
    }
    let t = t.ok_or_else(|| unauthorized("X-Herald-Signature without t="))?;
    check_fresh(signed_unix_time(t)?, now, cfg.max_age)?;
    let parts: [&[u8]; 3] = [t.as_bytes(), b".", body];
    if !sigs.iter().any(|s| hmac_sha256_hex_matches(secret.as_bytes(), &parts, s)) {
        return Err(unauthorized("X-Herald-Signature does not match"));
    }
    parse(body, now)
}

#[derive(Deserialize)]
struct GenericEvent {
    event_id: String,
    #[serde(rename = "type")]
    kind: String,
    bounce_type: Option<String>,
    email: String,
    message_id: Option<String>,
    provider_id: Option<String>,
    timestamp: Option<String>,
    detail: Option<String>,
}

pub(super) fn parse(body: &[u8], now: DateTime<Utc>) -> Result<Vec<ProviderEvent>, WebhookError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("body is not JSON: {e}")))?;
    let items = match v {
        Value::Array(items) => items,
        obj @ Value::Object(_) => vec![obj],
        _ => return Err(bad("body must be an event object or an array of them")),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let e: GenericEvent = serde_json::from_value(item).map_err(|err| bad(format!("event {i}: {err}")))?;
            let kind = match (e.kind.as_str(), e.bounce_type.as_deref()) {
                ("delivered", _) => EventKind::Delivered,
                ("bounce", None | Some("hard")) => EventKind::Bounce { hard: true },
                ("bounce", Some("soft")) => EventKind::Bounce { hard: false },
                ("bounce", Some(other)) => return Err(bad(format!("event {i}: unknown bounce_type {other:?}"))),
                ("complaint", _) => EventKind::Complaint,
                ("unsubscribe", _) => EventKind::Unsubscribe,
                (other, _) => return Err(bad(format!("event {i}: unknown type {other:?}"))),
            };
            let at = match e.timestamp.as_deref() {
                Some(ts) => parse_rfc3339(ts).ok_or_else(|| bad(format!("event {i}: timestamp is not RFC 3339")))?,
                None => now,
            };
            Ok(ProviderEvent {
                event_id: e.event_id,
                kind,
                email: e.email,
                message_id: e.message_id.as_deref().and_then(strip_angle),
                provider_id: e.provider_id.map(|p| p.trim().to_string()).filter(|p| !p.is_empty()),
                at,
                detail: detail(&[e.detail.as_deref()]),
                delivery_token: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::tests::hdrs;
    use crate::webhooks::{CertCache, Provider, Verified, verify as verify_any};

    const SECRET: &str = "whsec_test_0123456789";

    async fn run(
        headers: &HashMap<String, String>,
        body: &[u8],
        secret: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<ProviderEvent>, WebhookError> {
        let r = verify_any(
            Provider::Generic,
            headers,
            body,
            secret,
            &WebhookConfig::default(),
            &CertCache::new(),
            now,
            None,
        )
        .await;
        match r? {
            Verified::Events(e) => Ok(e),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn is_unauthorized(r: Result<Vec<ProviderEvent>, WebhookError>) -> bool {
        matches!(r, Err(WebhookError::Unauthorized(_)))
    }

    #[test]
    fn signature_format() {
        // Known-answer: HMAC-SHA256("secret", "1700000000.{}"), computed independently
        // (printf '1700000000.{}' | openssl dgst -sha256 -hmac secret).
        assert_eq!(
            sign_generic("secret", 1_700_000_000, b"{}"),
            "t=1700000000,v1=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163"
        );
    }

    #[tokio::test]
    async fn signature_checks() -> anyhow::Result<()> {
        let now = Utc::now();
        let body =
            br#"{"event_id":"evt_1","type":"bounce","email":"a@example.com","message_id":"<m1@news.example.com>"}"#;
        let t = now.timestamp() - 30;
        let good = hdrs(&[(SIGNATURE_HEADER, &sign_generic(SECRET, t, body))]);
        let evs = run(&good, body, Some(SECRET), now).await?;
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].kind, EventKind::Bounce { hard: true });
        assert_eq!(evs[0].message_id.as_deref(), Some("m1@news.example.com"));

        // Tampered body, wrong secret, no secret, missing header.
        let tampered =
            br#"{"event_id":"evt_1","type":"bounce","email":"b@example.com","message_id":"<m1@news.example.com>"}"#;
        assert!(is_unauthorized(run(&good, tampered, Some(SECRET), now).await));
        assert!(is_unauthorized(run(&good, body, Some("other"), now).await));
        assert!(is_unauthorized(run(&good, body, None, now).await));
        assert!(is_unauthorized(run(&HashMap::new(), body, Some(SECRET), now).await));
        // Timestamp swapped without re-signing.
        let sig = sign_generic(SECRET, t, body);
        let moved = sig.replace(&format!("t={t}"), &format!("t={}", t + 1));
        assert!(is_unauthorized(run(&hdrs(&[(SIGNATURE_HEADER, &moved)]), body, Some(SECRET), now).await));
        // Stale and future, properly signed.
        let stale = hdrs(&[(SIGNATURE_HEADER, &sign_generic(SECRET, now.timestamp() - 11 * 60, body))]);
        assert!(is_unauthorized(run(&stale, body, Some(SECRET), now).await));
        let future = hdrs(&[(SIGNATURE_HEADER, &sign_generic(SECRET, now.timestamp() + 6 * 60, body))]);
        assert!(is_unauthorized(run(&future, body, Some(SECRET), now).await));
        // Malformed header values.
        for v in ["v1=abc", &format!("t={t}"), &format!("t=abc,v1={}", &sig[sig.len() - 64..])] {
            assert!(is_unauthorized(run(&hdrs(&[(SIGNATURE_HEADER, v)]), body, Some(SECRET), now).await), "{v}");
        }
        // Rotation: an extra v1 for another secret does not hurt.
        let rotated = format!("{sig},v1={}", "00".repeat(32));
        assert_eq!(run(&hdrs(&[(SIGNATURE_HEADER, &rotated)]), body, Some(SECRET), now).await?.len(), 1);
        Ok(())
    }

    #[test]
    fn mapping() -> anyhow::Result<()> {
        let now = Utc::now();
        let body = br#"[
          {"event_id": "e1", "type": "delivered", "email": "a@example.com", "provider_id": "p-1", "timestamp": "2024-05-01T10:00:00+02:00"},
          {"event_id": "e2", "type": "bounce", "bounce_type": "soft", "email": "b@example.com", "detail": "452 mailbox full"},
          {"event_id": "e3", "type": "bounce", "bounce_type": "hard", "email": "c@example.com"},
          {"event_id": "e4", "type": "complaint", "email": "d@example.com"},
          {"event_id": "e5", "type": "unsubscribe", "email": "e@example.com", "extra": "ignored"}
        ]"#;
        let evs = parse(body, now)?;
        let kinds: Vec<EventKind> = evs.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            kinds,
            [
                EventKind::Delivered,
                EventKind::Bounce { hard: false },
                EventKind::Bounce { hard: true },
                EventKind::Complaint,
                EventKind::Unsubscribe
            ]
        );
        assert_eq!(evs[0].at, parse_rfc3339("2024-05-01T08:00:00Z").ok_or_else(|| anyhow::anyhow!("t"))?);
        assert_eq!(evs[0].provider_id.as_deref(), Some("p-1"));
        assert_eq!(evs[1].at, now);
        assert_eq!(evs[1].detail, "452 mailbox full");

        for bad_body in [
            &br#"{"event_id": "e1", "type": "bounced", "email": "a@example.com"}"#[..],
            br#"{"event_id": "e1", "type": "bounce", "bounce_type": "medium", "email": "a@example.com"}"#,
            br#"{"type": "delivered", "email": "a@example.com"}"#,
            br#"{"event_id": "e1", "type": "delivered"}"#,
            br#"{"event_id": "e1", "type": "delivered", "email": "a@example.com", "timestamp": "yesterday"}"#,
            br#""delivered""#,
            b"nope",
        ] {
            assert!(
                matches!(parse(bad_body, now), Err(WebhookError::BadRequest(_))),
                "{}",
                String::from_utf8_lossy(bad_body)
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn empty_ids_are_refused_after_verification() {
        let now = Utc::now();
        let body = br#"{"event_id": " ", "type": "delivered", "email": "a@example.com"}"#;
        let h = hdrs(&[(SIGNATURE_HEADER, &sign_generic(SECRET, now.timestamp(), body))]);
        assert!(matches!(run(&h, body, Some(SECRET), now).await, Err(WebhookError::BadRequest(_))));
    }
}
