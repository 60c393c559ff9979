//! Amazon SES notifications delivered through SNS.
//!
//! SNS signs every message with RSA (PKCS#1 v1.5, SHA1 for SignatureVersion 1, SHA256 for 2) and
//! names the signing certificate by URL *inside the message*. The signature is therefore only as
//! good as our check of that URL: anyone can sign a forged message with their own key and point
//! SigningCertURL at their own certificate. So the URL must be https (the TLS connection to
//! Amazon's host is what vouches for the certificate; SNS certificates are not checked against a
//! CA here) and its host must match `WebhookConfig::sns_trusted_host` label by label, where `*`
//! stands for exactly one label shaped like an AWS region name (`us-east-1`, `us-gov-west-1`).
//! A suffix match such as "ends with .amazonaws.com" is not enough: `bucket.s3.amazonaws.com`
//! and friends serve customer-controlled files, and so would `sns.s3.amazonaws.com` (an S3
//! bucket named "sns") if `*` took any label. The same rule applies
//! to the SubscribeURL we hand back to the caller to GET.
//!
//! The check happens before any network access, so a forged message cannot make us fetch
//! arbitrary URLs (no SSRF through SigningCertURL), and redirects are not followed.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chrono::{DateTime, Utc};
use rsa::RsaPublicKey;
use rsa::pkcs1v15::Pkcs1v15Sign;
use rsa::pkcs8::DecodePublicKey;
use serde::Deserialize;
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use url::Url;
use x509_cert::Certificate;
use x509_cert::der::{DecodePem, Encode};

use super::{
    EventKind, ProviderEvent, Verified, WebhookConfig, WebhookError, bad, check_fresh, detail, parse_rfc3339,
    str_field, strip_angle, unauthorized,
};

/// SNS keeps the original signed Timestamp when it retries, so its window is wider than the
/// HMAC providers'.
const SNS_MAX_AGE_SECS: i64 = 60 * 60;
/// Certificates kept in memory. SNS uses one per region and rotates rarely.
const CACHE_ENTRIES: usize = 64;
/// A PEM certificate is a couple of KB; anything much larger is not one.
const MAX_CERT_BYTES: usize = 64 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Deserialize)]
pub(super) struct SnsEnvelope {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "MessageId")]
    message_id: String,
    #[serde(rename = "Token")]
    token: Option<String>,
    #[serde(rename = "TopicArn")]
    topic_arn: String,
    #[serde(rename = "Subject")]
    subject: Option<String>,
    #[serde(rename = "Message")]
    message: String,
    #[serde(rename = "Timestamp")]
    timestamp: String,
    #[serde(rename = "SignatureVersion")]
    signature_version: String,
    #[serde(rename = "Signature")]
    signature: String,
    #[serde(rename = "SigningCertURL")]
    signing_cert_url: String,
    #[serde(rename = "SubscribeURL")]
    subscribe_url: Option<String>,
}

/// `pinned_topic`: the topic this webhook has heard from before (see [`topic_arn`]). Amazon signs
/// every topic's messages alike, so without it anyone with an AWS account and this webhook's URL
/// could subscribe it to a topic of their own and send "bounces" signed by Amazon itself.
pub(super) async fn verify(
    body: &[u8],
    cfg: &WebhookConfig,
    certs: &CertCache,
    now: DateTime<Utc>,
    pinned_topic: Option<&str>,
) -> Result<Verified, WebhookError> {
    let env: SnsEnvelope = serde_json::from_slice(body).map_err(|e| bad(format!("not an SNS message: {e}")))?;

    // Everything that can be refused without the network is refused first.
    let hash_sha256 = match env.signature_version.as_str() {
        "1" => false,
        "2" => true,
        v => return Err(unauthorized(format!("unsupported SNS SignatureVersion {v:?}"))),
    };
    let cert_url = trusted_url(&env.signing_cert_url, cfg, "SigningCertURL")?;
    if !cert_url.path().ends_with(".pem") {
        return Err(unauthorized("SigningCertURL is not a .pem file"));
    }
    let sent = parse_rfc3339(&env.timestamp).ok_or_else(|| unauthorized("invalid SNS Timestamp"))?;
    check_fresh(sent, now, chrono::Duration::seconds(SNS_MAX_AGE_SECS))?;
    let to_sign = string_to_sign(&env)?;
    let signature = B64.decode(env.signature.trim()).map_err(|_| unauthorized("SNS Signature is not base64"))?;

    let cert = certs.get(&cert_url, cfg).await?;
    if now < cert.not_before || now > cert.not_after {
        return Err(unauthorized("SNS signing certificate is not valid at this time"));
    }
    let checked = if hash_sha256 {
        cert.key.verify(Pkcs1v15Sign::new::<Sha256>(), &Sha256::digest(&to_sign), &signature)
    } else {
        cert.key.verify(Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(&to_sign), &signature)
    };
    checked.map_err(|_| unauthorized("SNS signature does not match"))?;
    if let Some(pinned) = pinned_topic
        && pinned != env.topic_arn
    {
        return Err(unauthorized(format!("SNS topic {:?} is not the one this webhook is pinned to", env.topic_arn)));
    }

    match env.kind.as_str() {
        "SubscriptionConfirmation" => {
            let raw = env.subscribe_url.as_deref().unwrap_or_default();
            let subscribe_url = trusted_url(raw, cfg, "SubscribeURL")?;
            Ok(Verified::SubscriptionConfirmation { subscribe_url })
        }
        "Notification" => Ok(Verified::Events(parse_notification(&env.message, &env.message_id, sent)?)),
        // UnsubscribeConfirmation: authentic, but nothing to record.
        _ => Ok(Verified::Events(Vec::new())),
    }
}

/// The `TopicArn` of an SNS message (read again after [`verify`] accepted it, to pin it).
pub fn topic_arn(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<SnsEnvelope>(body).ok().map(|e| e.topic_arn)
}

/// The canonical string SNS signs: selected fields as "Key\nValue\n", in this fixed order.
pub(super) fn string_to_sign(env: &SnsEnvelope) -> Result<Vec<u8>, WebhookError> {
    let mut fields: Vec<(&str, &str)> = vec![("Message", &env.message), ("MessageId", &env.message_id)];
    match env.kind.as_str() {
        "Notification" => {
            if let Some(subject) = &env.subject {
                fields.push(("Subject", subject));
            }
            fields.push(("Timestamp", &env.timestamp));
        }
        "SubscriptionConfirmation" | "UnsubscribeConfirmation" => {
            let url = env.subscribe_url.as_deref().ok_or_else(|| bad("SNS confirmation without SubscribeURL"))?;
            let token = env.token.as_deref().ok_or_else(|| bad("SNS confirmation without Token"))?;
            fields.extend([("SubscribeURL", url), ("Timestamp", &env.timestamp), ("Token", token)]);
        }
        other => return Err(bad(format!("unknown SNS message Type {other:?}"))),
    }
    fields.extend([("TopicArn", env.topic_arn.as_str()), ("Type", env.kind.as_str())]);
    let mut out = Vec::new();
    for (k, v) in fields {
        for part in [k, "\n", v, "\n"] {
            out.extend_from_slice(part.as_bytes());
        }
    }
    Ok(out)
}

/// Parses `raw` and checks it is allowed as an SNS URL: https (or http when the config allows
/// it, for tests), no credentials, host matching the trusted pattern.
fn trusted_url(raw: &str, cfg: &WebhookConfig, what: &str) -> Result<Url, WebhookError> {
    let url = Url::parse(raw.trim()).map_err(|_| unauthorized(format!("{what} is not a URL")))?;
    let scheme_ok = url.scheme() == "https" || (cfg.sns_allow_http && url.scheme() == "http");
    if !scheme_ok {
        return Err(unauthorized(format!("{what} must use https")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(unauthorized(format!("{what} must not carry credentials")));
    }
    match url.host_str() {
        Some(host) if host_matches(&cfg.sns_trusted_host, host) => Ok(url),
        _ => Err(unauthorized(format!("{what} is not on a trusted SNS host"))),
    }
}

/// Matches `host` against `pattern` label by label (case-insensitive): same number of labels,
/// `*` matching exactly one label shaped like an AWS region ([`is_region_name`]). Deliberately
/// no suffix or multi-label wildcard (see the module docs).
pub(super) fn host_matches(pattern: &str, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let pattern: Vec<&str> = pattern.trim().split('.').collect();
    let labels: Vec<&str> = host.split('.').collect();
    pattern.len() == labels.len()
        && pattern
            .iter()
            .zip(&labels)
            .all(|(p, l)| if *p == "*" { is_region_name(l) } else { !p.is_empty() && p.eq_ignore_ascii_case(l) })
}

/// `us-east-1`, `ap-southeast-2`, `us-gov-west-1`, `eu-central-2`: two letters, one or more
/// words, a number, joined by dashes. Not `s3`, `s3-website`, `sqs` or a bucket name.
fn is_region_name(label: &str) -> bool {
    let parts: Vec<&str> = label.split('-').collect();
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else { return false };
    parts.len() >= 3
        && first.len() == 2
        && first.bytes().all(|b| b.is_ascii_lowercase())
        && !last.is_empty()
        && last.bytes().all(|b| b.is_ascii_digit())
        && parts[1..parts.len() - 1].iter().all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
}

/// Turns the SES notification carried in an SNS Message into events. Works for both SES
/// formats: identity notifications (`notificationType`) and event publishing (`eventType`).
pub(super) fn parse_notification(
    message: &str,
    sns_message_id: &str,
    sns_time: DateTime<Utc>,
) -> Result<Vec<ProviderEvent>, WebhookError> {
    let v: Value =
        serde_json::from_str(message).map_err(|e| bad(format!("SNS Message is not an SES notification: {e}")))?;
    let kind = str_field(&v, "notificationType").or_else(|| str_field(&v, "eventType")).unwrap_or_default();
    let mail = v.get("mail").cloned().unwrap_or(Value::Null);
    let provider_id = str_field(&mail, "messageId");
    let message_id = our_message_id(&mail);

    // (recipient, kind, detail) per event, and the event's own timestamp.
    let (section, items): (&Value, Vec<(String, EventKind, String)>) = match kind.as_str() {
        "Bounce" => {
            let b = section(&v, "bounce")?;
            let bounce_type = str_field(b, "bounceType");
            let hard = bounce_type.as_deref() == Some("Permanent");
            let sub_type = str_field(b, "bounceSubType");
            let kind_text = match (&bounce_type, &sub_type) {
                (Some(t), Some(s)) => Some(format!("{t}/{s}")),
                (t, s) => t.clone().or_else(|| s.clone()),
            };
            let items = recipients(b, "bouncedRecipients")
                .map(|r| {
                    let diag = str_field(r, "diagnosticCode").or_else(|| str_field(r, "status"));
                    let text = detail(&[kind_text.as_deref(), diag.as_deref()]);
                    (str_field(r, "emailAddress").unwrap_or_default(), EventKind::Bounce { hard }, text)
                })
                .collect();
            (b, items)
        }
        "Complaint" => {
            let c = section(&v, "complaint")?;
            let feedback = str_field(c, "complaintFeedbackType")
                .or_else(|| str_field(c, "complaintSubType"))
                .unwrap_or_else(|| "complaint".to_string());
            let text = detail(&[Some(&feedback)]);
            let items = recipients(c, "complainedRecipients")
                .map(|r| (str_field(r, "emailAddress").unwrap_or_default(), EventKind::Complaint, text.clone()))
                .collect();
            (c, items)
        }
        "Delivery" => {
            let d = section(&v, "delivery")?;
            let text = detail(&[str_field(d, "smtpResponse").as_deref()]);
            let items = d
                .get("recipients")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| (r.as_str().unwrap_or_default().to_string(), EventKind::Delivered, text.clone()))
                .collect();
            (d, items)
        }
        // Send, Open, Click, Reject, DeliveryDelay, AmazonSnsSubscriptionSucceeded...
        _ => return Ok(Vec::new()),
    };

    let at = str_field(section, "timestamp").as_deref().and_then(parse_rfc3339).unwrap_or(sns_time);
    let several = items.len() > 1;
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, (email, kind, detail))| ProviderEvent {
            event_id: if several { format!("{sns_message_id}:{i}") } else { sns_message_id.to_string() },
            kind,
            email,
            message_id: message_id.clone(),
            provider_id: provider_id.clone(),
            at,
            detail,
            delivery_token: None,
        })
        .collect())
}

fn section<'a>(v: &'a Value, key: &str) -> Result<&'a Value, WebhookError> {
    v.get(key).filter(|s| s.is_object()).ok_or_else(|| bad(format!("SES notification without {key:?}")))
}

fn recipients<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// The Message-ID we set, from the original headers (when SES included them) or the parsed
/// common headers.
fn our_message_id(mail: &Value) -> Option<String> {
    let from_headers = mail.get("headers").and_then(Value::as_array).into_iter().flatten().find_map(|h| {
        let name = str_field(h, "name")?;
        if name.eq_ignore_ascii_case("Message-ID") { str_field(h, "value") } else { None }
    });
    from_headers
        .or_else(|| mail.get("commonHeaders").and_then(|c| str_field(c, "messageId")))
        .as_deref()
        .and_then(strip_angle)
}

/// A parsed SNS signing certificate: its RSA key and validity window.
#[derive(Debug)]
pub(super) struct SigningCert {
    key: RsaPublicKey,
    not_before: DateTime<Utc>,
    not_after: DateTime<Utc>,
}

#[derive(Debug, Default)]
struct Entries {
    by_url: HashMap<String, Arc<SigningCert>>,
    /// Insertion order, oldest first, for eviction.
    order: VecDeque<String>,
}

/// Fetches SNS signing certificates by URL and keeps the parsed keys in memory (bounded to 64
/// entries, oldest evicted first). URLs are checked against [`WebhookConfig`] before any fetch;
/// responses over 64 KB and redirects are refused; the fetch times out after 5 seconds.
#[derive(Debug)]
pub struct CertCache {
    client: Option<reqwest::Client>,
    /// Certificate URLs are on the operator's trusted SNS host, and still go through the egress
    /// policy like every other fetch (`crate::infra::egress`).
    egress: crate::infra::egress::Egress,
    entries: Mutex<Entries>,
}

impl Default for CertCache {
    fn default() -> Self {
        Self::new()
    }
}

impl CertCache {
    pub fn new() -> Self {
        Self::with_egress(&crate::infra::egress::Egress::default())
    }

    /// No redirects: the checked host is the only one fetched from.
    pub fn with_egress(egress: &crate::infra::egress::Egress) -> Self {
        let client = Some(egress.http_client(FETCH_TIMEOUT, 0, "Herald SNS certificates"));
        Self { client, egress: egress.clone(), entries: Mutex::new(Entries::default()) }
    }

    async fn get(&self, url: &Url, cfg: &WebhookConfig) -> Result<Arc<SigningCert>, WebhookError> {
        // Checked here as well as by the caller, so no path can fetch an untrusted URL.
        let url = trusted_url(url.as_str(), cfg, "SigningCertURL")?;
        if let Some(cert) = self.lock().by_url.get(url.as_str()) {
            return Ok(cert.clone());
        }
        let pem = self.fetch(&url).await?;
        let cert = Arc::new(parse_cert(&pem)?);
        let mut entries = self.lock();
        if !entries.by_url.contains_key(url.as_str()) {
            while entries.order.len() >= CACHE_ENTRIES {
                if let Some(old) = entries.order.pop_front() {
                    entries.by_url.remove(&old);
                }
            }
            entries.order.push_back(url.to_string());
        }
        entries.by_url.insert(url.to_string(), cert.clone());
        Ok(cert)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn fetch(&self, url: &Url) -> Result<Vec<u8>, WebhookError> {
        let upstream = |e: String| WebhookError::Upstream(format!("{url}: {e}"));
        let client = self.client.as_ref().ok_or_else(|| upstream("no HTTP client".into()))?;
        if !self.egress.permits_url(url) {
            return Err(upstream("the address is not one Herald may fetch from".into()));
        }
        let mut resp = client.get(url.clone()).send().await.map_err(|e| upstream(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(upstream(format!("HTTP {}", resp.status())));
        }
        if resp.content_length().is_some_and(|n| n > MAX_CERT_BYTES as u64) {
            return Err(upstream("certificate larger than 64 KB".into()));
        }
        let mut buf = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| upstream(e.to_string()))? {
            if buf.len() + chunk.len() > MAX_CERT_BYTES {
                return Err(upstream("certificate larger than 64 KB".into()));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    }
}

pub(super) fn parse_cert(pem: &[u8]) -> Result<SigningCert, WebhookError> {
    let upstream = |what: &str| WebhookError::Upstream(format!("SNS signing certificate: {what}"));
    let cert = Certificate::from_pem(pem).map_err(|_| upstream("not a PEM X.509 certificate"))?;
    let spki = cert.tbs_certificate.subject_public_key_info.to_der().map_err(|_| upstream("bad public key"))?;
    let key = RsaPublicKey::from_public_key_der(&spki).map_err(|_| upstream("not an RSA key"))?;
    let validity = cert.tbs_certificate.validity;
    let time = |t: x509_cert::time::Time| {
        i64::try_from(t.to_unix_duration().as_secs()).ok().and_then(|s| DateTime::from_timestamp(s, 0))
    };
    Ok(SigningCert {
        key,
        not_before: time(validity.not_before).ok_or_else(|| upstream("bad notBefore"))?,
        not_after: time(validity.not_after).ok_or_else(|| upstream("bad notAfter"))?,
    })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rsa::RsaPrivateKey;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use x509_cert::builder::{Builder, CertificateBuilder, Profile};
    use x509_cert::der::EncodePem;
    use x509_cert::der::pem::LineEnding;
    use x509_cert::name::Name;
    use x509_cert::serial_number::SerialNumber;
    use x509_cert::spki::SubjectPublicKeyInfoOwned;
    use x509_cert::time::Validity;

    use super::*;
    use crate::webhooks::{Provider, verify as verify_any};

    const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:ses-notifications";

    /// One RSA key and self-signed certificate for all tests (key generation is the slow part).
    fn signer() -> &'static (RsaPrivateKey, String) {
        static KEY: OnceLock<(RsaPrivateKey, String)> = OnceLock::new();
        KEY.get_or_init(|| {
            let key = RsaPrivateKey::new(&mut rand::thread_rng(), 1024).expect("rsa key");
            (key.clone(), self_signed_pem(key))
        })
    }

    fn self_signed_pem(key: RsaPrivateKey) -> String {
        let signing_key = rsa::pkcs1v15::SigningKey::<Sha256>::new(key.clone());
        let spki = SubjectPublicKeyInfoOwned::from_key(key.to_public_key()).expect("spki");
        let day = Duration::from_secs(24 * 3600);
        let now = std::time::SystemTime::now();
        let validity = Validity {
            not_before: x509_cert::time::Time::try_from(now - day).expect("time"),
            not_after: x509_cert::time::Time::try_from(now + day).expect("time"),
        };
        let subject = Name::from_str("CN=sns.amazonaws.com,O=Test").expect("name");
        let builder =
            CertificateBuilder::new(Profile::Root, SerialNumber::from(7u32), validity, subject, spki, &signing_key)
                .expect("builder");
        let cert = builder.build::<rsa::pkcs1v15::Signature>().expect("certificate");
        cert.to_pem(LineEnding::LF).expect("pem")
    }

    /// A tiny HTTP/1.1 server on 127.0.0.1 serving `files` by path; counts requests.
    async fn serve(files: Vec<(&'static str, String)>) -> anyhow::Result<(String, Arc<AtomicUsize>)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let files = Arc::new(files);
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let files = files.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut n = 0;
                    while n < buf.len() {
                        match sock.read(&mut buf[n..]).await {
                            Ok(0) | Err(_) => break,
                            Ok(k) => n += k,
                        }
                        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                    let head = String::from_utf8_lossy(&buf[..n]);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let resp = match files.iter().find(|(p, _)| *p == path) {
                        Some((_, body)) => format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/x-pem-file\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                        None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
                    };
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Ok((base, hits))
    }

    fn test_cfg() -> WebhookConfig {
        WebhookConfig { sns_trusted_host: "127.0.0.1".into(), sns_allow_http: true, ..WebhookConfig::default() }
    }

    fn ts(t: DateTime<Utc>) -> String {
        t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
    }

    fn sign(version: &str, data: &str) -> String {
        let key = &signer().0;
        let sig = if version == "2" {
            key.sign(Pkcs1v15Sign::new::<Sha256>(), &Sha256::digest(data.as_bytes()))
        } else {
            key.sign(Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(data.as_bytes()))
        };
        B64.encode(sig.expect("sign"))
    }

    /// A signed SNS Notification envelope. The string to sign is spelled out here independently
    /// of `string_to_sign`, so a mistake there makes these tests fail.
    fn notification(version: &str, message: &str, cert_url: &str, at: DateTime<Utc>, subject: Option<&str>) -> Value {
        let id = "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324";
        let t = ts(at);
        let mut to_sign = format!("Message\n{message}\nMessageId\n{id}\n");
        if let Some(s) = subject {
            to_sign.push_str(&format!("Subject\n{s}\n"));
        }
        to_sign.push_str(&format!("Timestamp\n{t}\nTopicArn\n{TOPIC}\nType\nNotification\n"));
        let mut v = serde_json::json!({
            "Type": "Notification",
            "MessageId": id,
            "TopicArn": TOPIC,
            "Message": message,
            "Timestamp": t,
            "SignatureVersion": version,
            "Signature": sign(version, &to_sign),
            "SigningCertURL": cert_url,
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=x"
        });
        if let Some(s) = subject {
            v["Subject"] = Value::String(s.to_string());
        }
        v
    }

    fn confirmation(kind: &str, subscribe_url: &str, cert_url: &str, at: DateTime<Utc>) -> Value {
        let id = "165545c9-2a5c-472c-8df2-7ff2be2b3b1b";
        let token = "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736";
        let message = format!(
            "You have chosen to subscribe to the topic {TOPIC}.\nTo confirm the subscription, visit the SubscribeURL included in this message."
        );
        let t = ts(at);
        let to_sign = format!(
            "Message\n{message}\nMessageId\n{id}\nSubscribeURL\n{subscribe_url}\nTimestamp\n{t}\nToken\n{token}\nTopicArn\n{TOPIC}\nType\n{kind}\n"
        );
        serde_json::json!({
            "Type": kind,
            "MessageId": id,
            "Token": token,
            "TopicArn": TOPIC,
            "Message": message,
            "SubscribeURL": subscribe_url,
            "Timestamp": t,
            "SignatureVersion": "1",
            "Signature": sign("1", &to_sign),
            "SigningCertURL": cert_url
        })
    }

    /// SES bounce notification (identity notification format), from the SES developer guide.
    fn ses_bounce(recipients: &[&str]) -> String {
        let recips: Vec<Value> = recipients
            .iter()
            .map(|r| {
                serde_json::json!({
                    "emailAddress": r, "action": "failed", "status": "5.1.1",
                    "diagnosticCode": format!("smtp; 550 5.1.1 <{r}>... User unknown")
                })
            })
            .collect();
        serde_json::json!({
            "notificationType": "Bounce",
            "bounce": {
                "bounceType": "Permanent",
                "reportingMTA": "dns; email.example.com",
                "bouncedRecipients": recips,
                "bounceSubType": "General",
                "timestamp": "2016-01-27T14:59:38.237Z",
                "feedbackId": "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa068a-000000",
                "remoteMtaIp": "127.0.2.0"
            },
            "mail": {
                "timestamp": "2016-01-27T14:59:38.237Z",
                "source": "john@example.com",
                "sourceArn": "arn:aws:ses:us-east-1:888888888888:identity/example.com",
                "sourceIp": "127.0.3.0",
                "sendingAccountId": "123456789012",
                "messageId": "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000",
                "destination": recipients,
                "headersTruncated": false,
                "headers": [
                    {"name": "From", "value": "\"John Doe\" <john@example.com>"},
                    {"name": "To", "value": "\"Jane Doe\" <jane@example.com>"},
                    {"name": "Message-ID", "value": "<h1.abc@news.example.com>"},
                    {"name": "Subject", "value": "Hello"}
                ],
                "commonHeaders": {
                    "from": ["\"John Doe\" <john@example.com>"],
                    "date": "Wed, 27 Jan 2016 14:05:45 +0000",
                    "to": ["\"Jane Doe\" <jane@example.com>"],
                    "messageId": "<h1.abc@news.example.com>",
                    "subject": "Hello"
                }
            }
        })
        .to_string()
    }

    async fn run(
        env: &Value,
        cfg: &WebhookConfig,
        certs: &CertCache,
        now: DateTime<Utc>,
    ) -> Result<Verified, WebhookError> {
        run_pinned(env, cfg, certs, now, None).await
    }

    async fn run_pinned(
        env: &Value,
        cfg: &WebhookConfig,
        certs: &CertCache,
        now: DateTime<Utc>,
        pinned: Option<&str>,
    ) -> Result<Verified, WebhookError> {
        let body = serde_json::to_vec(env).expect("json");
        verify_any(Provider::Ses, &HashMap::new(), &body, None, cfg, certs, now, pinned).await
    }

    fn events(r: Result<Verified, WebhookError>) -> Vec<ProviderEvent> {
        match r {
            Ok(Verified::Events(e)) => e,
            other => panic!("expected events, got {other:?}"),
        }
    }

    #[test]
    fn host_pattern() {
        let p = "sns.*.amazonaws.com";
        assert!(host_matches(p, "sns.us-east-1.amazonaws.com"));
        assert!(host_matches(p, "SNS.EU-WEST-3.amazonaws.COM"));
        assert!(!host_matches(p, "sns.us-east-1.amazonaws.com.evil.com"));
        assert!(!host_matches(p, "x.sns.us-east-1.amazonaws.com"));
        assert!(!host_matches(p, "s3.amazonaws.com"));
        assert!(!host_matches(p, "bucket.s3.amazonaws.com"));
        assert!(!host_matches(p, "sns.amazonaws.com"));
        assert!(!host_matches(p, "sns..amazonaws.com"));
        assert!(!host_matches(p, "sns.us_east.amazonaws.com"));
        // An S3 bucket named "sns" is not SNS.
        assert!(!host_matches(p, "sns.s3.amazonaws.com"));
        assert!(!host_matches(p, "sns.s3-website.amazonaws.com"));
        assert!(!host_matches(p, "sns.my-bucket.amazonaws.com"));
        assert!(host_matches(p, "sns.us-gov-west-1.amazonaws.com"));
        assert!(host_matches(p, "sns.ap-southeast-2.amazonaws.com"));
        assert!(!host_matches(p, "sns.us-east-1.amazonaws.com."));
        assert!(!host_matches(p, "evil.example"));
        assert!(host_matches("127.0.0.1", "127.0.0.1"));
        assert!(!host_matches("127.0.0.1", "127.0.0.10"));
        assert!(!host_matches("", ""));
    }

    #[test]
    fn cert_url_rules() {
        let cfg = WebhookConfig::default();
        let good = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem";
        assert!(trusted_url(good, &cfg, "u").is_ok());
        assert!(trusted_url("http://sns.us-east-1.amazonaws.com/x.pem", &cfg, "u").is_err());
        assert!(trusted_url("https://bucket.s3.amazonaws.com/x.pem", &cfg, "u").is_err());
        assert!(trusted_url("https://u:p@sns.us-east-1.amazonaws.com/x.pem", &cfg, "u").is_err());
        assert!(trusted_url("not a url", &cfg, "u").is_err());
    }

    #[tokio::test]
    async fn notification_v1_and_v2_bounce() -> anyhow::Result<()> {
        let (base, hits) = serve(vec![("/cert.pem", signer().1.clone())]).await?;
        let (cfg, certs, now) =
            (test_cfg(), CertCache::with_egress(&crate::infra::egress::Egress::allow_loopback()), Utc::now());
        let msg = ses_bounce(&["jane@example.com"]);
        for version in ["1", "2"] {
            let env =
                notification(version, &msg, &format!("{base}/cert.pem"), now - chrono::Duration::minutes(2), None);
            let evs = events(run(&env, &cfg, &certs, now).await);
            assert_eq!(evs.len(), 1, "v{version}");
            let e = &evs[0];
            assert_eq!(e.kind, EventKind::Bounce { hard: true });
            assert_eq!(e.email, "jane@example.com");
            assert_eq!(e.event_id, "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324");
            assert_eq!(e.message_id.as_deref(), Some("h1.abc@news.example.com"));
            assert_eq!(e.provider_id.as_deref(), Some("00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000"));
            assert_eq!(e.at, parse_rfc3339("2016-01-27T14:59:38.237Z").expect("time"));
            assert!(e.detail.contains("Permanent/General") && e.detail.contains("550 5.1.1"), "{}", e.detail);
        }
        // The certificate is fetched once and then served from the cache.
        assert_eq!(hits.load(Ordering::SeqCst), 1);

        // With a Subject, which is then part of the signed string.
        let env =
            notification("2", &msg, &format!("{base}/cert.pem"), now, Some("Amazon SES Email Event Notification"));
        assert_eq!(events(run(&env, &cfg, &certs, now).await).len(), 1);
        Ok(())
    }

    /// Amazon signs every topic's messages: a webhook pinned to one topic refuses another's,
    /// signature and all, and the topic can be read back to pin it.
    #[tokio::test]
    async fn another_topic_is_refused_once_pinned() -> anyhow::Result<()> {
        let (base, _hits) = serve(vec![("/cert.pem", signer().1.clone())]).await?;
        let (cfg, certs, now) =
            (test_cfg(), CertCache::with_egress(&crate::infra::egress::Egress::allow_loopback()), Utc::now());
        let env = notification("2", &ses_bounce(&["jane@example.com"]), &format!("{base}/cert.pem"), now, None);
        assert_eq!(topic_arn(&serde_json::to_vec(&env)?).as_deref(), Some(TOPIC));
        assert_eq!(events(run_pinned(&env, &cfg, &certs, now, Some(TOPIC)).await).len(), 1);
        let other = "arn:aws:sns:us-east-1:999999999999:attacker";
        let r = run_pinned(&env, &cfg, &certs, now, Some(other)).await;
        assert!(matches!(r, Err(WebhookError::Unauthorized(ref why)) if why.contains("pinned")), "{r:?}");
        Ok(())
    }

    #[tokio::test]
    async fn tampering_is_refused() -> anyhow::Result<()> {
        let (base, _hits) = serve(vec![("/cert.pem", signer().1.clone())]).await?;
        let (cfg, certs, now) =
            (test_cfg(), CertCache::with_egress(&crate::infra::egress::Egress::allow_loopback()), Utc::now());
        let url = format!("{base}/cert.pem");
        let env = notification("1", &ses_bounce(&["jane@example.com"]), &url, now, None);

        let mut tampered = env.clone();
        tampered["Message"] = Value::String(ses_bounce(&["victim@example.com"]));
        assert!(matches!(run(&tampered, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));

        // Same signature claimed as version 2: the hash differs, so it must not verify.
        let mut other_version = env.clone();
        other_version["SignatureVersion"] = Value::String("2".into());
        assert!(matches!(run(&other_version, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));

        let mut unknown_version = env.clone();
        unknown_version["SignatureVersion"] = Value::String("3".into());
        assert!(matches!(run(&unknown_version, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));

        // A subject injected into a message signed without one.
        let mut with_subject = env.clone();
        with_subject["Subject"] = Value::String("x".into());
        assert!(matches!(run(&with_subject, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));

        // The untampered original still passes (the refusals above were not for another reason).
        assert_eq!(events(run(&env, &cfg, &certs, now).await).len(), 1);

        // Signed by another key whose certificate is also on the trusted host: refused.
        let other = RsaPrivateKey::new(&mut rand::thread_rng(), 1024)?;
        let (base2, _) = serve(vec![("/other.pem", self_signed_pem(other))]).await?;
        let mut wrong_cert = env.clone();
        wrong_cert["SigningCertURL"] = Value::String(format!("{base2}/other.pem"));
        assert!(matches!(run(&wrong_cert, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));
        Ok(())
    }

    #[tokio::test]
    async fn untrusted_cert_urls_are_refused_without_fetching() -> anyhow::Result<()> {
        let (base, hits) = serve(vec![("/cert.pem", signer().1.clone()), ("/cert.txt", signer().1.clone())]).await?;
        let certs = CertCache::with_egress(&crate::infra::egress::Egress::allow_loopback());
        let now = Utc::now();
        let msg = ses_bounce(&["jane@example.com"]);
        let port = base.rsplit(':').next().unwrap_or_default();

        let cases = [
            // Wrong host for the test pattern ("localhost" resolves to the same server).
            (test_cfg(), format!("http://localhost:{port}/cert.pem")),
            (test_cfg(), "http://evil.example/cert.pem".to_string()),
            // Not a .pem path.
            (test_cfg(), format!("{base}/cert.txt")),
            // https only with the default config, even on the right host.
            (
                WebhookConfig { sns_trusted_host: "127.0.0.1".into(), ..WebhookConfig::default() },
                format!("{base}/cert.pem"),
            ),
            // Attacker-controlled hosts under amazonaws.com against the default pattern.
            (WebhookConfig::default(), "https://bucket.s3.amazonaws.com/cert.pem".to_string()),
            (WebhookConfig::default(), "https://sns.us-east-1.amazonaws.com.evil.com/cert.pem".to_string()),
        ];
        for (cfg, url) in cases {
            let env = notification("1", &msg, &url, now, None);
            let r = run(&env, &cfg, &certs, now).await;
            assert!(matches!(r, Err(WebhookError::Unauthorized(_))), "{url}: {r:?}");
        }
        assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing may be fetched");
        Ok(())
    }

    /// A trusted host pattern that names an inside address still goes through the egress
    /// policy: with the production default nothing is fetched from loopback.
    #[tokio::test]
    async fn cert_fetches_go_through_the_egress_policy() -> anyhow::Result<()> {
        let (base, hits) = serve(vec![("/cert.pem", signer().1.clone())]).await?;
        let (cfg, certs, now) = (test_cfg(), CertCache::new(), Utc::now());
        let env = notification("1", &ses_bounce(&["jane@example.com"]), &format!("{base}/cert.pem"), now, None);
        let r = run(&env, &cfg, &certs, now).await;
        assert!(matches!(r, Err(WebhookError::Upstream(_))), "{r:?}");
        assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing may be fetched");
        Ok(())
    }

    #[tokio::test]
    async fn fetch_failures_are_upstream() -> anyhow::Result<()> {
        let big = format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", "A".repeat(70 * 1024));
        let (base, _hits) = serve(vec![("/big.pem", big), ("/junk.pem", "hello".to_string())]).await?;
        let (cfg, certs, now) =
            (test_cfg(), CertCache::with_egress(&crate::infra::egress::Egress::allow_loopback()), Utc::now());
        let msg = ses_bounce(&["jane@example.com"]);
        for path in ["/big.pem", "/junk.pem", "/missing.pem"] {
            let env = notification("1", &msg, &format!("{base}{path}"), now, None);
            let r = run(&env, &cfg, &certs, now).await;
            assert!(matches!(r, Err(WebhookError::Upstream(_))), "{path}: {r:?}");
        }
        Ok(())
    }

    #[tokio::test]
    async fn stale_or_future_timestamp_is_refused() -> anyhow::Result<()> {
        let (base, _hits) = serve(vec![("/cert.pem", signer().1.clone())]).await?;
        let (cfg, certs, now) =
            (test_cfg(), CertCache::with_egress(&crate::infra::egress::Egress::allow_loopback()), Utc::now());
        let url = format!("{base}/cert.pem");
        let msg = ses_bounce(&["jane@example.com"]);
        let fresh = notification("2", &msg, &url, now - chrono::Duration::minutes(59), None);
        assert_eq!(events(run(&fresh, &cfg, &certs, now).await).len(), 1);
        let stale = notification("2", &msg, &url, now - chrono::Duration::minutes(61), None);
        assert!(matches!(run(&stale, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));
        let future = notification("2", &msg, &url, now + chrono::Duration::minutes(6), None);
        assert!(matches!(run(&future, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));
        // The certificate is only valid for a day around the real clock.
        let later = now + chrono::Duration::days(2);
        let outside_cert = notification("2", &msg, &url, later, None);
        assert!(matches!(run(&outside_cert, &cfg, &certs, later).await, Err(WebhookError::Unauthorized(_))));
        Ok(())
    }

    #[tokio::test]
    async fn subscription_confirmation_returns_url() -> anyhow::Result<()> {
        let (base, _hits) = serve(vec![("/cert.pem", signer().1.clone())]).await?;
        let (cfg, certs, now) =
            (test_cfg(), CertCache::with_egress(&crate::infra::egress::Egress::allow_loopback()), Utc::now());
        let url = format!("{base}/cert.pem");
        let subscribe = format!("{base}/?Action=ConfirmSubscription&TopicArn={TOPIC}&Token=2336412f37");
        let env = confirmation("SubscriptionConfirmation", &subscribe, &url, now);
        match run(&env, &cfg, &certs, now).await {
            Ok(Verified::SubscriptionConfirmation { subscribe_url }) => {
                assert_eq!(subscribe_url.as_str(), Url::parse(&subscribe)?.as_str());
            }
            other => panic!("expected a subscription confirmation, got {other:?}"),
        }

        // A signed confirmation whose SubscribeURL points elsewhere is refused.
        let evil =
            confirmation("SubscriptionConfirmation", "http://evil.example/?Action=ConfirmSubscription", &url, now);
        assert!(matches!(run(&evil, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));

        // Tampered SubscribeURL (still on the trusted host): signature fails.
        let mut tampered = env.clone();
        tampered["SubscribeURL"] = Value::String(format!("{base}/?Action=Other"));
        assert!(matches!(run(&tampered, &cfg, &certs, now).await, Err(WebhookError::Unauthorized(_))));

        let unsub = confirmation("UnsubscribeConfirmation", &subscribe, &url, now);
        assert!(events(run(&unsub, &cfg, &certs, now).await).is_empty());
        Ok(())
    }

    #[test]
    fn ses_mapping() -> anyhow::Result<()> {
        let sns_time = parse_rfc3339("2024-05-01T10:00:00Z").ok_or_else(|| anyhow::anyhow!("time"))?;

        // Several bounced recipients: one event each, ids suffixed with the index.
        let evs = parse_notification(&ses_bounce(&["a@example.com", "b@example.com"]), "mid", sns_time)?;
        assert_eq!(evs.iter().map(|e| e.event_id.as_str()).collect::<Vec<_>>(), ["mid:0", "mid:1"]);
        assert_eq!(evs[1].email, "b@example.com");

        // Event publishing format, transient bounce, no original headers.
        let soft = serde_json::json!({
            "eventType": "Bounce",
            "bounce": {
                "bounceType": "Transient", "bounceSubType": "MailboxFull",
                "bouncedRecipients": [{"emailAddress": "full@example.com", "status": "4.2.2"}],
                "timestamp": "2017-08-05T00:41:02.669Z", "feedbackId": "01000157c44f053b"
            },
            "mail": {
                "timestamp": "2017-08-05T00:40:02.012Z", "source": "Sender <sender@example.com>",
                "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
                "destination": ["full@example.com"], "headersTruncated": false,
                "commonHeaders": {"from": ["Sender <sender@example.com>"], "messageId": "<x1@news.example.com>", "subject": "Hi"}
            }
        });
        let evs = parse_notification(&soft.to_string(), "mid2", sns_time)?;
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].kind, EventKind::Bounce { hard: false });
        assert_eq!(evs[0].event_id, "mid2");
        assert_eq!(evs[0].message_id.as_deref(), Some("x1@news.example.com"));
        assert_eq!(evs[0].detail, "Transient/MailboxFull: 4.2.2");

        let undetermined = soft.to_string().replace("Transient", "Undetermined");
        assert_eq!(parse_notification(&undetermined, "m", sns_time)?[0].kind, EventKind::Bounce { hard: false });

        let complaint = serde_json::json!({
            "notificationType": "Complaint",
            "complaint": {
                "userAgent": "AnyCompany Feedback Loop (V0.01)",
                "complainedRecipients": [{"emailAddress": "richard@example.com"}],
                "complaintFeedbackType": "abuse",
                "arrivalDate": "2016-01-27T14:59:38.237Z",
                "timestamp": "2016-01-27T14:59:38.237Z",
                "feedbackId": "000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000"
            },
            "mail": {"messageId": "000001378603176d-5a4b5ad9-6f30-4198-a8c3-b1eb0c270a1d-000000", "destination": ["richard@example.com"]}
        });
        let evs = parse_notification(&complaint.to_string(), "m3", sns_time)?;
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].kind, EventKind::Complaint);
        assert_eq!(evs[0].email, "richard@example.com");
        assert_eq!(evs[0].detail, "abuse");
        assert_eq!(evs[0].message_id, None);

        let delivery = serde_json::json!({
            "eventType": "Delivery",
            "mail": {"messageId": "EXAMPLEf3f73d99b-c63fb06f-d263-41f8-a0fb-d0dc67d56c07-000000"},
            "delivery": {
                "timestamp": "2016-10-19T23:21:04.133Z", "processingTimeMillis": 11893,
                "recipients": ["recipient@example.com"],
                "smtpResponse": "250 2.6.0 Message received", "reportingMTA": "mta.example.com"
            }
        });
        let evs = parse_notification(&delivery.to_string(), "m4", sns_time)?;
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].kind, EventKind::Delivered);
        assert_eq!(evs[0].email, "recipient@example.com");
        assert_eq!(evs[0].detail, "250 2.6.0 Message received");
        assert_eq!(evs[0].at, parse_rfc3339("2016-10-19T23:21:04.133Z").ok_or_else(|| anyhow::anyhow!("t"))?);

        // Ignored types, and the SES test message sent when a topic is attached.
        let open =
            serde_json::json!({"eventType": "Open", "mail": {}, "open": {"timestamp": "2017-08-09T22:00:19.652Z"}});
        assert!(parse_notification(&open.to_string(), "m5", sns_time)?.is_empty());
        let setup = r#"{"notificationType":"AmazonSnsSubscriptionSucceeded","message":"You have successfully subscribed your Amazon SNS topic"}"#;
        assert!(parse_notification(setup, "m6", sns_time)?.is_empty());

        // Without its own timestamp an event takes the SNS one; non-JSON is a bad request.
        let mut no_ts = delivery.clone();
        no_ts["delivery"].as_object_mut().map(|d| d.remove("timestamp"));
        assert_eq!(parse_notification(&no_ts.to_string(), "m7", sns_time)?[0].at, sns_time);
        assert!(matches!(parse_notification("hello", "m8", sns_time), Err(WebhookError::BadRequest(_))));
        assert!(matches!(
            parse_notification(r#"{"notificationType":"Bounce"}"#, "m9", sns_time),
            Err(WebhookError::BadRequest(_))
        ));
        Ok(())
    }
}
