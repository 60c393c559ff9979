//! SendGrid Event Webhook, with "Signed Event Webhook" enabled.
//!
//! SendGrid signs `timestamp || raw body` with ECDSA P-256/SHA-256 and sends the DER signature in
//! base64. We are given only the public verification key, so a leaked Herald database cannot be
//! used to forge SendGrid events. The timestamp is inside the signature and bounded in age, so a
//! captured batch cannot be replayed later.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chrono::{DateTime, Utc};
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::DecodePublicKey;
use serde_json::Value;

use super::{
    EventKind, ProviderEvent, WebhookConfig, WebhookError, bad, check_fresh, detail, header, require_secret,
    signed_unix_time, str_field, strip_angle, unauthorized,
};

const SIGNATURE_HEADER: &str = "x-twilio-email-event-webhook-signature";
const TIMESTAMP_HEADER: &str = "x-twilio-email-event-webhook-timestamp";

pub(super) fn verify(
    headers: &HashMap<String, String>,
    body: &[u8],
    secret: Option<&str>,
    cfg: &WebhookConfig,
    now: DateTime<Utc>,
) -> Result<Vec<ProviderEvent>, WebhookError> {
    let key = verifying_key(require_secret(secret)?)?;
    let sig = header(headers, SIGNATURE_HEADER).ok_or_else(|| unauthorized("missing SendGrid signature header"))?;
    let ts = header(headers, TIMESTAMP_HEADER).ok_or_else(|| unauthorized("missing SendGrid timestamp header"))?;
    check_fresh(signed_unix_time(ts)?, now, cfg.max_age)?;
    let sig = B64
        .decode(sig)
        .ok()
        .and_then(|der| Signature::from_der(&der).ok())
        .ok_or_else(|| unauthorized("SendGrid signature is not a base64 DER ECDSA signature"))?;
    let mut signed = Vec::with_capacity(ts.len() + body.len());
    signed.extend_from_slice(ts.as_bytes());
    signed.extend_from_slice(body);
    key.verify(&signed, &sig).map_err(|_| unauthorized("SendGrid signature does not match"))?;
    parse(body, now)
}

/// The verification key as SendGrid shows it (base64 DER SubjectPublicKeyInfo), or PEM.
fn verifying_key(secret: &str) -> Result<VerifyingKey, WebhookError> {
    let key = if secret.starts_with("-----BEGIN") {
        VerifyingKey::from_public_key_pem(secret).ok()
    } else {
        let compact: String = secret.chars().filter(|c| !c.is_whitespace()).collect();
        B64.decode(compact).ok().and_then(|der| VerifyingKey::from_public_key_der(&der).ok())
    };
    key.ok_or_else(|| unauthorized("the configured SendGrid verification key is not a P-256 public key"))
}

pub(super) fn parse(body: &[u8], now: DateTime<Utc>) -> Result<Vec<ProviderEvent>, WebhookError> {
    let batch: Vec<Value> =
        serde_json::from_slice(body).map_err(|e| bad(format!("SendGrid body is not a JSON array of events: {e}")))?;
    let mut events = Vec::new();
    for e in &batch {
        let event = str_field(e, "event").unwrap_or_default();
        let reason = str_field(e, "reason");
        let (kind, text) = match event.as_str() {
            "delivered" => (EventKind::Delivered, detail(&[str_field(e, "response").as_deref()])),
            "bounce" => {
                // SendGrid's "bounce" event has type "bounce" (the address is bad) or "blocked"
                // (the receiving server refused this message, e.g. for reputation).
                let kind = str_field(e, "type").unwrap_or_else(|| "bounce".to_string());
                let text = detail(&[
                    Some(&kind),
                    str_field(e, "bounce_classification").as_deref(),
                    str_field(e, "status").as_deref(),
                    reason.as_deref(),
                ]);
                (EventKind::Bounce { hard: kind != "blocked" }, text)
            }
            // Dropped for a known-bad address counts as a hard bounce; other drops (spam content,
            // unsubscribed address, our own "Invalid SMTPAPI header"...) are not about the address.
            "dropped" if reason.as_deref().is_some_and(dropped_for_bad_address) => {
                (EventKind::Bounce { hard: true }, detail(&[Some("dropped"), reason.as_deref()]))
            }
            "spamreport" => (EventKind::Complaint, "spamreport".to_string()),
            "unsubscribe" => (EventKind::Unsubscribe, "unsubscribe".to_string()),
            "group_unsubscribe" => {
                let group = e.get("asm_group_id").map(|g| format!("group {g}"));
                (EventKind::Unsubscribe, detail(&[Some("group_unsubscribe"), group.as_deref()]))
            }
            // processed, deferred, open, click, group_resubscribe, other drops...
            _ => continue,
        };
        events.push(ProviderEvent {
            event_id: str_field(e, "sg_event_id").unwrap_or_default(),
            kind,
            email: str_field(e, "email").unwrap_or_default(),
            message_id: str_field(e, "smtp-id").as_deref().and_then(strip_angle),
            provider_id: str_field(e, "sg_message_id"),
            at: e.get("timestamp").and_then(Value::as_i64).and_then(|t| DateTime::from_timestamp(t, 0)).unwrap_or(now),
            detail: text,
            delivery_token: None,
        });
    }
    Ok(events)
}

fn dropped_for_bad_address(reason: &str) -> bool {
    reason.contains("Bounced Address") || (reason.contains("Invalid") && !reason.contains("SMTPAPI"))
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer;
    use p256::pkcs8::{EncodePublicKey, LineEnding};

    use super::*;
    use crate::webhooks::tests::hdrs;

    const SAMPLE: &str = r#"[
      {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"processed","category":"cat facts","sg_event_id":"rbtnWrG1DVDGGGFHFyun0A==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000"},
      {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"deferred","category":"cat facts","sg_event_id":"t7LEShmowp86DTdUW8M-GQ==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","response":"400 try again later","attempt":"5"},
      {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"delivered","category":"cat facts","sg_event_id":"rWVYmVk90MjZJ9iohOBa3w==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","response":"250 OK"},
      {"email":"example@test.com","timestamp":1513299569,"event":"open","sg_machine_open":false,"category":"cat facts","sg_event_id":"FOTFFO0ecsBE-zxFXfs6WA==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","useragent":"Mozilla/4.0","ip":"255.255.255.255"},
      {"email":"example@test.com","timestamp":1513299569,"event":"click","category":"cat facts","sg_event_id":"kCAi1KttyQdEKHhdC-nuEA==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","useragent":"Mozilla/4.0","ip":"255.255.255.255","url":"http://www.sendgrid.com/"},
      {"email":"hard@test.com","timestamp":1513299570,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","bounce_classification":"Invalid Address","event":"bounce","category":"cat facts","sg_event_id":"6g4ZI7SA-xmRDv57GoPIPw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","reason":"500 unknown recipient","status":"5.0.0","type":"bounce"},
      {"email":"blocked@test.com","timestamp":1513299571,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","bounce_classification":"Reputation","event":"bounce","category":"cat facts","sg_event_id":"bl0ck3d-xmRDv57GoPIPw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","reason":"550 blocked for spam","status":"5.7.1","type":"blocked"},
      {"email":"dropped@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"dropped","category":"cat facts","sg_event_id":"zmzJhfJgAfUSOW80yEbPyw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","reason":"Bounced Address","status":"5.0.0"},
      {"email":"unsub@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"dropped","category":"cat facts","sg_event_id":"d2pp3d-AfUSOW80yEbPyw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","reason":"Unsubscribed Address","status":"5.0.0"},
      {"email":"example@test.com","timestamp":1513299569,"event":"spamreport","category":"cat facts","sg_event_id":"37nvH5QBz858KGVYCM4uOA==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000"},
      {"email":"example@test.com","timestamp":1513299569,"event":"unsubscribe","category":"cat facts","sg_event_id":"zz_BjPgU_5pS-J8vlfB1sg==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000"},
      {"email":"example@test.com","timestamp":1513299569,"smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","event":"group_unsubscribe","category":"cat facts","sg_event_id":"ahSCB7xYcXFb-hEaawsPRw==","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000","useragent":"Mozilla/4.0","ip":"255.255.255.255","url":"http://www.sendgrid.com/","asm_group_id":10}
    ]"#;

    fn key() -> (SigningKey, String) {
        let sk = SigningKey::random(&mut rand::thread_rng());
        let der = sk.verifying_key().to_public_key_der().expect("der");
        (sk, B64.encode(der.as_bytes()))
    }

    fn signed_headers(sk: &SigningKey, ts: i64, body: &[u8]) -> HashMap<String, String> {
        let mut msg = ts.to_string().into_bytes();
        msg.extend_from_slice(body);
        let sig: Signature = sk.sign(&msg);
        hdrs(&[(SIGNATURE_HEADER, &B64.encode(sig.to_der().as_bytes())), (TIMESTAMP_HEADER, &ts.to_string())])
    }

    fn is_unauthorized<T: std::fmt::Debug>(r: Result<T, WebhookError>) -> bool {
        matches!(r, Err(WebhookError::Unauthorized(_)))
    }

    #[test]
    fn signature_checks() -> anyhow::Result<()> {
        let (sk, public) = key();
        let cfg = WebhookConfig::default();
        let now = Utc::now();
        let t = now.timestamp() - 30;
        let body = SAMPLE.as_bytes();
        let h = signed_headers(&sk, t, body);

        assert_eq!(verify(&h, body, Some(&public), &cfg, now)?.len(), 7);

        // PEM form of the same key.
        let pem = sk.verifying_key().to_public_key_pem(LineEnding::LF)?;
        assert_eq!(verify(&h, body, Some(&pem), &cfg, now)?.len(), 7);

        // Tampered body.
        let tampered = SAMPLE.replace("hard@test.com", "victim@test.com");
        assert!(is_unauthorized(verify(&h, tampered.as_bytes(), Some(&public), &cfg, now)));

        // Signed timestamp replaced by a fresher one.
        let mut moved = h.clone();
        moved.insert(TIMESTAMP_HEADER.into(), (t + 1).to_string());
        assert!(is_unauthorized(verify(&moved, body, Some(&public), &cfg, now)));

        // Stale and future timestamps, even when properly signed.
        let stale = signed_headers(&sk, now.timestamp() - 11 * 60, body);
        assert!(is_unauthorized(verify(&stale, body, Some(&public), &cfg, now)));
        let future = signed_headers(&sk, now.timestamp() + 6 * 60, body);
        assert!(is_unauthorized(verify(&future, body, Some(&public), &cfg, now)));

        // Another key.
        let (_, other_public) = key();
        assert!(is_unauthorized(verify(&h, body, Some(&other_public), &cfg, now)));

        // Missing pieces.
        assert!(is_unauthorized(verify(&h, body, None, &cfg, now)));
        assert!(is_unauthorized(verify(&h, body, Some("not a key"), &cfg, now)));
        assert!(is_unauthorized(verify(&hdrs(&[(TIMESTAMP_HEADER, &t.to_string())]), body, Some(&public), &cfg, now)));
        let garbage = hdrs(&[(SIGNATURE_HEADER, "bm90IGEgc2ln"), (TIMESTAMP_HEADER, &t.to_string())]);
        assert!(is_unauthorized(verify(&garbage, body, Some(&public), &cfg, now)));

        // Signed but not an array of events.
        let obj = br#"{"event":"delivered"}"#;
        let h = signed_headers(&sk, t, obj);
        assert!(matches!(verify(&h, obj, Some(&public), &cfg, now), Err(WebhookError::BadRequest(_))));
        Ok(())
    }

    #[test]
    fn mapping() -> anyhow::Result<()> {
        let now = Utc::now();
        let evs = parse(SAMPLE.as_bytes(), now)?;
        let kinds: Vec<(&str, EventKind)> = evs.iter().map(|e| (e.email.as_str(), e.kind.clone())).collect();
        assert_eq!(
            kinds,
            [
                ("example@test.com", EventKind::Delivered),
                ("hard@test.com", EventKind::Bounce { hard: true }),
                ("blocked@test.com", EventKind::Bounce { hard: false }),
                ("dropped@test.com", EventKind::Bounce { hard: true }),
                ("example@test.com", EventKind::Complaint),
                ("example@test.com", EventKind::Unsubscribe),
                ("example@test.com", EventKind::Unsubscribe),
            ]
        );
        let hard = &evs[1];
        assert_eq!(hard.event_id, "6g4ZI7SA-xmRDv57GoPIPw==");
        assert_eq!(hard.message_id.as_deref(), Some("14c5d75ce93.dfd.64b469@ismtpd-555"));
        assert_eq!(
            hard.provider_id.as_deref(),
            Some("14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000")
        );
        assert_eq!(hard.at, DateTime::from_timestamp(1513299570, 0).ok_or_else(|| anyhow::anyhow!("t"))?);
        assert!(hard.detail.contains("500 unknown recipient"), "{}", hard.detail);
        assert_eq!(evs[4].message_id, None);
        assert_eq!(evs[6].detail, "group_unsubscribe: group 10");

        assert!(dropped_for_bad_address("Invalid"));
        assert!(!dropped_for_bad_address("Invalid SMTPAPI header"));
        assert!(!dropped_for_bad_address("Spam Content (if spam checker app enabled)"));

        // Only ignored types: no events, no error.
        assert!(parse(br#"[{"event":"open","email":"a@b.c"}]"#, now)?.is_empty());
        assert!(parse(b"[]", now)?.is_empty());
        assert!(matches!(parse(b"nope", now), Err(WebhookError::BadRequest(_))));
        Ok(())
    }

    #[tokio::test]
    async fn event_without_id_makes_the_delivery_bad() -> anyhow::Result<()> {
        let (sk, public) = key();
        let now = Utc::now();
        let body = br#"[{"email":"a@b.c","timestamp":1513299569,"event":"delivered","sg_event_id":"x"},{"email":"a@b.c","event":"bounce","type":"bounce"}]"#;
        let h = signed_headers(&sk, now.timestamp(), body);
        let r = crate::webhooks::verify(
            crate::webhooks::Provider::SendGrid,
            &h,
            body,
            Some(&public),
            &WebhookConfig::default(),
            &crate::webhooks::CertCache::new(),
            now,
            None,
        )
        .await;
        assert!(matches!(r, Err(WebhookError::BadRequest(_))), "{r:?}");
        Ok(())
    }
}
