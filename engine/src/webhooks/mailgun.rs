//! Mailgun webhooks (the JSON format: `{"signature": {...}, "event-data": {...}}`).
//!
//! Mailgun puts its proof in the body: `signature` is the hex HMAC-SHA256 of `timestamp + token`
//! under the account's webhook signing key. Note what that does *not* cover: the event data. A
//! valid signature block could in principle be lifted onto different event data, which is why
//! the timestamp window matters more here than elsewhere, and why callers deduplicate on the
//! event id. Subaccount events also carry `parent-signature`, made with the primary account's
//! key; either one matching the configured key is accepted.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    EventKind, ProviderEvent, WebhookConfig, WebhookError, bad, check_fresh, detail, hmac_sha256_hex_matches, id_field,
    require_secret, signed_unix_time, str_field, strip_angle, unauthorized,
};

pub(super) fn verify(
    body: &[u8],
    secret: Option<&str>,
    cfg: &WebhookConfig,
    now: DateTime<Utc>,
) -> Result<Vec<ProviderEvent>, WebhookError> {
    let key = require_secret(secret)?;
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("Mailgun body is not JSON: {e}")))?;
    let sig = v.get("signature").filter(|s| s.is_object()).ok_or_else(|| unauthorized("missing Mailgun signature"))?;
    // Sent as a string, documented as an int: accept both.
    let timestamp = id_field(sig, "timestamp").ok_or_else(|| unauthorized("missing Mailgun signature timestamp"))?;
    let token = str_field(sig, "token").ok_or_else(|| unauthorized("missing Mailgun signature token"))?;
    check_fresh(signed_unix_time(&timestamp)?, now, cfg.max_age)?;
    let parts: [&[u8]; 2] = [timestamp.as_bytes(), token.as_bytes()];
    let matches = ["signature", "parent-signature"]
        .iter()
        .filter_map(|k| str_field(sig, k))
        .any(|s| hmac_sha256_hex_matches(key.as_bytes(), &parts, &s));
    if !matches {
        return Err(unauthorized("Mailgun signature does not match"));
    }
    let data = v.get("event-data").filter(|d| d.is_object()).ok_or_else(|| bad("Mailgun body without event-data"))?;
    // Mailgun asks receivers to honour each token once: the signature covers the token, not the
    // event data, so a replay could carry other data under a valid signature.
    Ok(parse(data, now).into_iter().map(|e| ProviderEvent { delivery_token: Some(token.clone()), ..e }).collect())
}

pub(super) fn parse(e: &Value, now: DateTime<Utc>) -> Option<ProviderEvent> {
    let status = e.get("delivery-status").cloned().unwrap_or(Value::Null);
    let status_text = || {
        let code = status.get("code").map(|c| c.to_string());
        let text = str_field(&status, "description")
            .or_else(|| str_field(&status, "message"))
            .or_else(|| str_field(e, "reason"));
        (code, text)
    };
    let (kind, text) = match str_field(e, "event")?.as_str() {
        "delivered" => {
            let (code, text) = status_text();
            (EventKind::Delivered, detail(&[code.as_deref(), text.as_deref()]))
        }
        "failed" => {
            let hard = match str_field(e, "severity").as_deref() {
                Some("permanent") => true,
                Some("temporary") => false,
                _ => return None,
            };
            let (code, text) = status_text();
            let severity = if hard { "permanent" } else { "temporary" };
            (EventKind::Bounce { hard }, detail(&[Some(severity), code.as_deref(), text.as_deref()]))
        }
        "complained" => (EventKind::Complaint, "complained".to_string()),
        "unsubscribed" => (EventKind::Unsubscribe, "unsubscribed".to_string()),
        // accepted, rejected, opened, clicked, stored...
        _ => return None,
    };
    // Mailgun keeps the Message-ID we set (it only makes one up when there is none), so it is
    // both our id and the provider's.
    let message_id = e.get("message").and_then(|m| m.get("headers")).and_then(|h| {
        h.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case("message-id")).and_then(|(_, v)| v.as_str())
    });
    let message_id = message_id.and_then(strip_angle);
    let at = e
        .get("timestamp")
        .and_then(Value::as_f64)
        .and_then(|t| DateTime::from_timestamp(t.trunc() as i64, (t.fract() * 1e9) as u32))
        .unwrap_or(now);
    Some(ProviderEvent {
        event_id: str_field(e, "id").unwrap_or_default(),
        kind,
        email: str_field(e, "recipient").unwrap_or_default(),
        provider_id: message_id.clone(),
        message_id,
        at,
        detail: text,
        delivery_token: None,
    })
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    use super::*;

    const KEY: &str = "key-7e55d003b4f5d2c6a1c5f6b1a2c3d4e5";

    fn hmac_hex(key: &str, data: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("hmac");
        mac.update(data.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// A signed delivery around `event_data` (the JSON of Mailgun's documented samples).
    fn signed(event_data: &str, ts: i64, key: &str) -> String {
        let token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0";
        let sig = hmac_hex(key, &format!("{ts}{token}"));
        format!(
            r#"{{"signature": {{"timestamp": "{ts}", "token": "{token}", "signature": "{sig}"}}, "event-data": {event_data}}}"#
        )
    }

    const FAILED_PERMANENT: &str = r#"{
      "event": "failed", "id": "G9Bn5sl1TC6nu79C8C0bwg", "timestamp": 1521233195.375624,
      "log-level": "error", "severity": "permanent", "reason": "suppress-bounce",
      "envelope": {"sender": "bob@sandbox.mailgun.org", "transport": "smtp", "targets": "alice@example.com"},
      "flags": {"is-routed": false, "is-authenticated": true, "is-system-test": false, "is-test-mode": false},
      "delivery-status": {"attempt-no": 1, "message": "", "code": 605, "description": "Not delivering to previously bounced address", "session-seconds": 0.0},
      "message": {"headers": {"to": "Alice <alice@example.com>", "message-id": "20130503182626.18666.16540@sandbox.mailgun.org", "from": "Bob <bob@sandbox.mailgun.org>", "subject": "Test permanent_fail webhook"}, "attachments": [], "size": 111},
      "recipient": "alice@example.com", "recipient-domain": "example.com",
      "storage": {"url": "https://se.api.mailgun.net/v3/domains/sandbox.mailgun.org/messages/message_key", "key": "message_key"},
      "campaigns": [], "tags": ["my_tag_1", "my_tag_2"], "user-variables": {"my_var_1": "Mailgun Variable #1"}
    }"#;

    const DELIVERED: &str = r#"{
      "id": "CPgfbmQMTCKtHW6uIWtuVe", "timestamp": 1521472262.908181, "log-level": "info", "event": "delivered",
      "delivery-status": {"tls": true, "mx-host": "smtp-in.example.com", "code": 250, "description": "", "session-seconds": 0.43, "utf8": true, "attempt-no": 1, "message": "OK", "certificate-verified": true},
      "flags": {"is-routed": false, "is-authenticated": true, "is-system-test": false, "is-test-mode": false},
      "envelope": {"transport": "smtp", "sender": "bob@sandbox.mailgun.org", "sending-ip": "209.61.154.250", "targets": "alice@example.com"},
      "message": {"headers": {"to": "Alice <alice@example.com>", "message-id": "<20130503182626.18666.16540@news.example.com>", "from": "Bob <bob@sandbox.mailgun.org>", "subject": "Test delivered webhook"}, "attachments": [], "size": 111},
      "recipient": "alice@example.com", "recipient-domain": "example.com", "campaigns": [], "tags": ["my_tag_1"], "user-variables": {}
    }"#;

    const TEMPORARY: &str = r#"{
      "event": "failed", "id": "Fs7-5t81S2ms-nhQ7iVGNg", "timestamp": 1521233195.375624, "severity": "temporary", "reason": "generic",
      "delivery-status": {"attempt-no": 1, "message": "4.2.2 The email account that you tried to reach is over quota.", "code": 452, "description": "", "session-seconds": 1.2},
      "message": {"headers": {"message-id": "t1@news.example.com"}},
      "recipient": "full@example.com"
    }"#;

    const COMPLAINED: &str = r#"{
      "id": "-Agny091SquKnsrW2NEKUA", "timestamp": 1521233123.501324, "log-level": "warn", "event": "complained",
      "envelope": {"sending-ip": "173.193.210.33"}, "flags": {"is-test-mode": false},
      "message": {"headers": {"to": "Alice <alice@example.com>", "message-id": "20110215055645.25246.63817@sandbox.mailgun.org", "from": "Bob <bob@sandbox.mailgun.org>", "subject": "Test complained webhook"}, "attachments": [], "size": 111},
      "recipient": "alice@example.com", "campaigns": [], "tags": [], "user-variables": {}
    }"#;

    const UNSUBSCRIBED: &str = r#"{
      "id": "Ase7i2zsRYeDXztHGENqRA", "timestamp": 1521243339.873676, "log-level": "info", "event": "unsubscribed",
      "message": {"headers": {"message-id": "20130503182626.18666.16540@sandbox.mailgun.org"}},
      "recipient": "alice@example.com", "geolocation": {"country": "US"}, "tags": [], "ip": "50.56.129.169",
      "client-info": {"client-type": "browser"}, "user-variables": {}
    }"#;

    #[test]
    fn signature_checks() -> anyhow::Result<()> {
        let cfg = WebhookConfig::default();
        let now = Utc::now();
        let t = now.timestamp() - 60;
        let body = signed(FAILED_PERMANENT, t, KEY);
        assert_eq!(verify(body.as_bytes(), Some(KEY), &cfg, now)?.len(), 1);

        let is_unauthorized =
            |r: Result<Vec<ProviderEvent>, WebhookError>| matches!(r, Err(WebhookError::Unauthorized(_)));
        // Tampered signature block (token changed), wrong key, no key.
        let tampered = body.replace("a8ce0edb2dd8301dee6c", "b8ce0edb2dd8301dee6c");
        assert!(is_unauthorized(verify(tampered.as_bytes(), Some(KEY), &cfg, now)));
        let timestamp_moved = body.replacen(&format!("\"{t}\""), &format!("\"{}\"", t + 1), 1);
        assert!(is_unauthorized(verify(timestamp_moved.as_bytes(), Some(KEY), &cfg, now)));
        assert!(is_unauthorized(verify(body.as_bytes(), Some("key-other"), &cfg, now)));
        assert!(is_unauthorized(verify(body.as_bytes(), None, &cfg, now)));
        // Stale and future timestamps, properly signed.
        let stale = signed(FAILED_PERMANENT, now.timestamp() - 11 * 60, KEY);
        assert!(is_unauthorized(verify(stale.as_bytes(), Some(KEY), &cfg, now)));
        let future = signed(FAILED_PERMANENT, now.timestamp() + 6 * 60, KEY);
        assert!(is_unauthorized(verify(future.as_bytes(), Some(KEY), &cfg, now)));
        // No signature block at all.
        let unsigned = format!(r#"{{"event-data": {FAILED_PERMANENT}}}"#);
        assert!(is_unauthorized(verify(unsigned.as_bytes(), Some(KEY), &cfg, now)));
        assert!(matches!(verify(b"not json", Some(KEY), &cfg, now), Err(WebhookError::BadRequest(_))));

        // A subaccount event verified by the parent account's key.
        let token = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0";
        let child = hmac_hex("key-child", &format!("{t}{token}"));
        let parent = hmac_hex(KEY, &format!("{t}{token}"));
        let sub = format!(
            r#"{{"signature": {{"timestamp": {t}, "token": "{token}", "signature": "{child}", "parent-signature": "{parent}"}}, "event-data": {DELIVERED}}}"#
        );
        assert_eq!(verify(sub.as_bytes(), Some(KEY), &cfg, now)?.len(), 1);
        assert!(is_unauthorized(verify(sub.as_bytes(), Some("key-other"), &cfg, now)));
        Ok(())
    }

    #[test]
    fn mapping() -> anyhow::Result<()> {
        let now = Utc::now();
        let one = |s: &str| -> anyhow::Result<ProviderEvent> {
            parse(&serde_json::from_str(s)?, now).ok_or_else(|| anyhow::anyhow!("no event"))
        };
        let f = one(FAILED_PERMANENT)?;
        assert_eq!(f.kind, EventKind::Bounce { hard: true });
        assert_eq!(f.event_id, "G9Bn5sl1TC6nu79C8C0bwg");
        assert_eq!(f.email, "alice@example.com");
        assert_eq!(f.message_id.as_deref(), Some("20130503182626.18666.16540@sandbox.mailgun.org"));
        assert_eq!(f.at.timestamp(), 1521233195);
        assert_eq!(f.detail, "permanent: 605: Not delivering to previously bounced address");

        let t = one(TEMPORARY)?;
        assert_eq!(t.kind, EventKind::Bounce { hard: false });
        assert!(t.detail.contains("over quota"), "{}", t.detail);

        let d = one(DELIVERED)?;
        assert_eq!(d.kind, EventKind::Delivered);
        assert_eq!(d.message_id.as_deref(), Some("20130503182626.18666.16540@news.example.com"));
        assert_eq!(d.provider_id, d.message_id);

        assert_eq!(one(COMPLAINED)?.kind, EventKind::Complaint);
        assert_eq!(one(UNSUBSCRIBED)?.kind, EventKind::Unsubscribe);

        let opened = r#"{"event": "opened", "id": "x", "recipient": "a@b.c", "timestamp": 1521243339.8}"#;
        assert!(one(opened).is_err());
        Ok(())
    }

    #[tokio::test]
    async fn event_without_recipient_makes_the_delivery_bad() {
        let now = Utc::now();
        let data = r#"{"event": "delivered", "id": "x1", "timestamp": 1521472262.9}"#;
        let body = signed(data, now.timestamp(), KEY);
        let r = crate::webhooks::verify(
            crate::webhooks::Provider::Mailgun,
            &std::collections::HashMap::new(),
            body.as_bytes(),
            Some(KEY),
            &WebhookConfig::default(),
            &crate::webhooks::CertCache::new(),
            now,
            None,
        )
        .await;
        assert!(matches!(r, Err(WebhookError::BadRequest(_))), "{r:?}");
    }
}
