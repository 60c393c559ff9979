//! Verifies and parses email-provider webhook deliveries (deliveries, bounces, complaints,
//! unsubscribes) into normalized [`ProviderEvent`]s.
//!
//! Pure on purpose: no database and no HTTP server. The route that receives the POST passes the
//! raw body, the headers and the identity's configured secret to [`verify`]; it decides what to
//! do with the events (suppress addresses, count bounces, deduplicate on `event_id`).
//!
//! Why verification always comes first and parsing second: a webhook URL is public, so anyone
//! who learns it can POST "this address bounced" and make us suppress real subscribers. Nothing
//! from a payload is trusted, or even interpreted beyond what the signature check needs, until
//! the provider's proof of origin holds. Any failure returns an error and no events at all, so a
//! half-verified delivery can never leak partial results.
//!
//! Each provider proves origin differently:
//! - Amazon SES publishes through SNS, which signs each message with an RSA key whose certificate
//!   is fetched from a URL *in the message itself*. That URL is the weak point, so it is checked
//!   against a host pattern before anything is fetched (see [`WebhookConfig::sns_trusted_host`]).
//! - SendGrid signs with ECDSA P-256; we hold only its public key.
//! - Mailgun and Herald's generic format use HMAC-SHA256 over a timestamp and the payload.
//! - Postmark has no signature, only the HTTP Basic credentials embedded in the webhook URL.
//!
//! Signed timestamps are bounded in age (and in how far they may lie in the future) so a captured
//! delivery cannot be replayed days later; within the window, replays are harmless because
//! callers deduplicate on `event_id`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

mod generic;
mod mailgun;
mod postmark;
mod sendgrid;
mod ses;

pub use generic::sign_generic;
pub use ses::{CertCache, topic_arn as sns_topic_arn};

/// Largest body we look at. Provider batches are far smaller (SendGrid caps a batch at a few
/// hundred events); the caller limits the request body too.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How far in the future a signed timestamp may be: senders' clocks drift a little.
const MAX_FUTURE_SKEW_SECS: i64 = 5 * 60;

/// Longest `detail` we keep: provider diagnostics can carry whole SMTP transcripts.
const MAX_DETAIL_CHARS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    Ses,
    SendGrid,
    Postmark,
    Mailgun,
    Generic,
}

impl Provider {
    /// Every provider, in the order the UI lists them.
    pub const ALL: [Provider; 5] =
        [Provider::Ses, Provider::SendGrid, Provider::Postmark, Provider::Mailgun, Provider::Generic];

    /// Parses the URL/database form ("ses", "sendgrid", "postmark", "mailgun", "generic").
    pub fn parse(s: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.as_str() == s)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Provider::Ses => "ses",
            Provider::SendGrid => "sendgrid",
            Provider::Postmark => "postmark",
            Provider::Mailgun => "mailgun",
            Provider::Generic => "generic",
        }
    }

    /// Human name for the UI.
    pub fn label(&self) -> &'static str {
        match self {
            Provider::Ses => "Amazon SES",
            Provider::SendGrid => "SendGrid",
            Provider::Postmark => "Postmark",
            Provider::Mailgun => "Mailgun",
            Provider::Generic => "Generic (Herald signature)",
        }
    }

    /// What the identity's webhook secret field must hold for this provider (shown in the UI).
    pub fn secret_hint(&self) -> &'static str {
        match self {
            Provider::Ses => {
                "Not used: SNS messages are verified with Amazon's signing certificate. Subscribe the \
                 webhook URL to the SNS topic that receives your SES notifications; Herald confirms the \
                 subscription itself."
            }
            Provider::SendGrid => {
                "The verification key of SendGrid's Signed Event Webhook (the base64 public key shown \
                 under Mail Settings > Event Webhook > Signature Verification; PEM also accepted)."
            }
            Provider::Postmark => {
                "\"user:password\": the HTTP Basic credentials you put in the Postmark webhook URL \
                 (https://user:password@host/...)."
            }
            Provider::Mailgun => "Mailgun's HTTP webhook signing key (Sending > Webhooks > HTTP webhook signing key).",
            Provider::Generic => {
                "A shared secret: the sender signs each POST with X-Herald-Signature: \
                 t=<unix seconds>,v1=<hex HMAC-SHA256(secret, \"<t>.\" + body)>."
            }
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    Delivered,
    Bounce { hard: bool },
    Complaint,
    Unsubscribe,
}

#[derive(Debug, Clone)]
pub struct ProviderEvent {
    /// The provider's unique id for this event, for idempotency (redeliveries carry the same id).
    pub event_id: String,
    pub kind: EventKind,
    /// Recipient address, as the provider reports it.
    pub email: String,
    /// RFC Message-ID as we sent it, without angle brackets, when the payload carries it.
    pub message_id: Option<String>,
    /// The provider's own message id, when present.
    pub provider_id: Option<String>,
    pub at: DateTime<Utc>,
    /// Short human text: bounce type and diagnostic, complaint feedback type...
    pub detail: String,
    /// A value the provider signs once per delivery (Mailgun's signature token): a second
    /// delivery carrying it is a replay, even with other event data, and is not applied.
    pub delivery_token: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Verified {
    /// May be empty when the payload only has event types we ignore (opens, clicks, "processed"...).
    Events(Vec<ProviderEvent>),
    /// SES/SNS: the caller GETs this URL to confirm the subscription. Already checked to be on
    /// the trusted SNS host pattern.
    SubscriptionConfirmation { subscribe_url: url::Url },
}

#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// SNS certificate / SubscribeURL host pattern, e.g. "sns.*.amazonaws.com", where `*` matches
    /// exactly ONE DNS label of `[a-z0-9-]`.
    ///
    /// Never a suffix match: "*.amazonaws.com" would accept `bucket.s3.amazonaws.com`, a host
    /// anyone can put a file on, and then an attacker could sign forged "bounces" with their own
    /// key and point SigningCertURL at their own certificate. Tests set "127.0.0.1".
    pub sns_trusted_host: String,
    /// Only for tests: also accept http:// certificate and subscribe URLs (production requires
    /// https, which is what authenticates the certificate: SNS certificates are not chained to a
    /// CA we check, the TLS connection to Amazon's host is the trust anchor).
    pub sns_allow_http: bool,
    /// Max age of a signed timestamp for SendGrid, Mailgun and generic deliveries (10 minutes by
    /// default). SNS uses its own fixed hour: its retries keep the original signed timestamp.
    pub max_age: chrono::Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            sns_trusted_host: "sns.*.amazonaws.com".to_string(),
            sns_allow_http: false,
            max_age: chrono::Duration::minutes(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// Bad or missing signature/credentials, untrusted certificate URL, stale timestamp.
    #[error("webhook not authenticated: {0}")]
    Unauthorized(String),
    /// The payload cannot be parsed (or is too large).
    #[error("bad webhook payload: {0}")]
    BadRequest(String),
    /// Fetching the SNS signing certificate failed.
    #[error("webhook certificate fetch failed: {0}")]
    Upstream(String),
}

/// Verifies a webhook delivery and parses it into events.
///
/// `headers`: lower-cased header name -> value. `secret`: the identity's configured webhook
/// secret (meaning per provider: see [`Provider::secret_hint`]). `now`: the clock, injected so
/// tests can check timestamp windows. `sns_topic`: the SNS topic an SES webhook is pinned to.
#[tracing::instrument(skip_all, fields(?provider))]
#[allow(clippy::too_many_arguments)]
pub async fn verify(
    provider: Provider,
    headers: &HashMap<String, String>,
    body: &[u8],
    secret: Option<&str>,
    cfg: &WebhookConfig,
    certs: &CertCache,
    now: DateTime<Utc>,
    sns_topic: Option<&str>,
) -> Result<Verified, WebhookError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(bad(format!("body larger than {MAX_BODY_BYTES} bytes")));
    }
    let verified = match provider {
        Provider::Ses => ses::verify(body, cfg, certs, now, sns_topic).await?,
        Provider::SendGrid => Verified::Events(sendgrid::verify(headers, body, secret, cfg, now)?),
        Provider::Postmark => Verified::Events(postmark::verify(headers, body, secret, now)?),
        Provider::Mailgun => Verified::Events(mailgun::verify(body, secret, cfg, now)?),
        Provider::Generic => Verified::Events(generic::verify(headers, body, secret, cfg, now)?),
    };
    match verified {
        Verified::Events(events) => Ok(Verified::Events(check_events(events)?)),
        other => Ok(other),
    }
}

/// Every event needs an id (idempotency) and an address (what it is about); one bad event makes
/// the whole delivery bad, so the provider retries or alerts instead of us half-applying it.
fn check_events(mut events: Vec<ProviderEvent>) -> Result<Vec<ProviderEvent>, WebhookError> {
    for (i, e) in events.iter_mut().enumerate() {
        e.email = e.email.trim().to_string();
        e.event_id = e.event_id.trim().to_string();
        if e.email.is_empty() {
            return Err(bad(format!("event {i} has no recipient address")));
        }
        if e.event_id.is_empty() {
            return Err(bad(format!("event {i} has no event id")));
        }
    }
    Ok(events)
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the providers
// ---------------------------------------------------------------------------------------------

fn unauthorized(msg: impl Into<String>) -> WebhookError {
    WebhookError::Unauthorized(msg.into())
}

fn bad(msg: impl Into<String>) -> WebhookError {
    WebhookError::BadRequest(msg.into())
}

/// A header by lower-cased name; tolerates callers that did not lower-case the map.
fn header<'a>(headers: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .or_else(|| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

/// The configured secret, or Unauthorized: an identity without a secret cannot authenticate
/// anything, and accepting unsigned deliveries would defeat the point.
fn require_secret(secret: Option<&str>) -> Result<&str, WebhookError> {
    secret.map(str::trim).filter(|s| !s.is_empty()).ok_or_else(|| unauthorized("no webhook secret configured"))
}

/// Refuses timestamps older than `max_age` or more than a few minutes in the future.
fn check_fresh(ts: DateTime<Utc>, now: DateTime<Utc>, max_age: chrono::Duration) -> Result<(), WebhookError> {
    if now - ts > max_age {
        return Err(unauthorized(format!("signed timestamp {ts} is too old")));
    }
    if ts - now > chrono::Duration::seconds(MAX_FUTURE_SKEW_SECS) {
        return Err(unauthorized(format!("signed timestamp {ts} is in the future")));
    }
    Ok(())
}

/// Unix seconds (as signed by the provider) to a time; Unauthorized when unparsable, because a
/// timestamp is part of what is signed.
fn signed_unix_time(s: &str) -> Result<DateTime<Utc>, WebhookError> {
    s.trim()
        .parse::<i64>()
        .ok()
        .and_then(|secs| DateTime::from_timestamp(secs, 0))
        .ok_or_else(|| unauthorized(format!("invalid signed timestamp {s:?}")))
}

/// True when `sig_hex` is the hex HMAC-SHA256 of the concatenated `parts` under `key`. The
/// comparison is constant-time (`Mac::verify_slice`).
fn hmac_sha256_hex_matches(key: &[u8], parts: &[&[u8]], sig_hex: &str) -> bool {
    let Ok(sig) = hex::decode(sig_hex.trim()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return false;
    };
    for p in parts {
        mac.update(p);
    }
    mac.verify_slice(&sig).is_ok()
}

/// Constant-time equality that also hides the length of the expected value (both sides are
/// hashed first).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    Sha256::digest(a).ct_eq(&Sha256::digest(b)).into()
}

/// A JSON string field, trimmed, when present and non-empty.
fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// An id field that providers send either as a string or as a number.
fn id_field(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Strips the angle brackets of a Message-ID: we store `id@host`, providers echo `<id@host>`.
fn strip_angle(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s.strip_prefix('<').unwrap_or(s);
    let s = s.strip_suffix('>').unwrap_or(s);
    Some(s.trim().to_string()).filter(|s| !s.is_empty())
}

fn parse_rfc3339(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s.trim()).ok().map(|t| t.with_timezone(&Utc))
}

/// Joins the non-empty parts with ": " and caps the length.
fn detail(parts: &[Option<&str>]) -> String {
    let joined = parts.iter().flatten().map(|s| s.trim()).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(": ");
    truncate(&joined, MAX_DETAIL_CHARS)
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn hdrs(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn provider_names_round_trip() {
        for p in Provider::ALL {
            assert_eq!(Provider::parse(p.as_str()), Some(p));
            assert!(!p.label().is_empty());
            assert!(!p.secret_hint().is_empty());
        }
        assert_eq!(Provider::parse("sendgrid"), Some(Provider::SendGrid));
        assert_eq!(Provider::parse("SES"), None);
        assert_eq!(Provider::parse("smtp"), None);
        assert_eq!(Provider::Ses.label(), "Amazon SES");
    }

    #[test]
    fn default_config() {
        let c = WebhookConfig::default();
        assert_eq!(c.sns_trusted_host, "sns.*.amazonaws.com");
        assert!(!c.sns_allow_http);
        assert_eq!(c.max_age, chrono::Duration::minutes(10));
    }

    #[test]
    fn helpers() {
        assert_eq!(strip_angle(" <a.b@c> "), Some("a.b@c".to_string()));
        assert_eq!(strip_angle("a.b@c"), Some("a.b@c".to_string()));
        assert_eq!(strip_angle("<>"), None);
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hé", 2), "hé");
        assert_eq!(detail(&[Some("Permanent"), None, Some(" "), Some("550 no")]), "Permanent: 550 no");
        assert!(ct_eq(b"u:p", b"u:p"));
        assert!(!ct_eq(b"u:p", b"u:q"));
        assert!(!ct_eq(b"u:p", b"u:pp"));
        let now = Utc::now();
        let age = chrono::Duration::minutes(10);
        assert!(check_fresh(now - chrono::Duration::minutes(9), now, age).is_ok());
        assert!(check_fresh(now - chrono::Duration::minutes(11), now, age).is_err());
        assert!(check_fresh(now + chrono::Duration::minutes(4), now, age).is_ok());
        assert!(check_fresh(now + chrono::Duration::minutes(6), now, age).is_err());
        let h = hdrs(&[("X-Herald-Signature", " v ")]);
        assert_eq!(header(&h, "x-herald-signature"), Some("v"));
    }

    #[tokio::test]
    async fn oversized_body_is_bad_request() {
        let body = vec![b' '; MAX_BODY_BYTES + 1];
        let r = verify(
            Provider::Generic,
            &HashMap::new(),
            &body,
            Some("s"),
            &WebhookConfig::default(),
            &CertCache::new(),
            Utc::now(),
            None,
        )
        .await;
        assert!(matches!(r, Err(WebhookError::BadRequest(_))), "{r:?}");
    }

    #[test]
    fn events_need_id_and_email() {
        let e = ProviderEvent {
            event_id: "e1".into(),
            kind: EventKind::Delivered,
            email: " a@b.c ".into(),
            message_id: None,
            provider_id: None,
            at: Utc::now(),
            detail: String::new(),
            delivery_token: None,
        };
        let ok = check_events(vec![e.clone()]);
        assert!(matches!(ok.as_deref(), Ok([x]) if x.email == "a@b.c"));
        let mut no_mail = e.clone();
        no_mail.email = " ".into();
        assert!(matches!(check_events(vec![e.clone(), no_mail]), Err(WebhookError::BadRequest(_))));
        let mut no_id = e;
        no_id.event_id = String::new();
        assert!(matches!(check_events(vec![no_id]), Err(WebhookError::BadRequest(_))));
    }
}

/// The fuzz target's way in (`fuzz/fuzz_targets/webhooks.rs`): the first byte picks a parser,
/// the rest is the body. Each provider's parser runs on it as it would after a valid signature
/// (a workspace's generic webhook is signed with the workspace's own secret, so any body can
/// reach it), the generic endpoint runs end to end with a correct signature, and SES's envelope,
/// notification and certificate parsers get it too. Panics are the bugs.
#[cfg(feature = "fuzzing")]
pub fn fuzz(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    let now = Utc::now();
    match which % 6 {
        0 => {
            let _ = sendgrid::parse(body, now).and_then(check_events);
        }
        1 => {
            let _ = postmark::parse(body, now).and_then(check_events);
        }
        2 => {
            if let Ok(v) = serde_json::from_slice::<Value>(body) {
                let _ = mailgun::parse(&v, now);
            }
        }
        3 => {
            let _ = generic::parse(body, now).and_then(check_events);
            let secret = "fuzzing-secret";
            let t = now.timestamp();
            let headers = HashMap::from([("x-herald-signature".to_string(), generic::sign_generic(secret, t, body))]);
            let cfg = WebhookConfig::default();
            let certs = CertCache::new();
            let _ = futures::executor::block_on(verify(
                Provider::Generic,
                &headers,
                body,
                Some(secret),
                &cfg,
                &certs,
                now,
                None,
            ));
        }
        4 => {
            let _ = ses::topic_arn(body);
            if let Ok(env) = serde_json::from_slice::<ses::SnsEnvelope>(body) {
                let _ = ses::string_to_sign(&env);
            }
            let _ = ses::parse_notification(&String::from_utf8_lossy(body), "fuzz", now);
        }
        _ => {
            let _ = ses::parse_cert(body);
        }
    }
}
