//! The Standard Webhooks signature (<https://www.standardwebhooks.com>): headers `webhook-id`,
//! `webhook-timestamp` (integer seconds) and `webhook-signature`, `v1,` + base64 of
//! HMAC-SHA256 over `id.timestamp.body`, keyed with the decoded bytes of the `whsec_` secret;
//! several signatures (a rotation's old and new secrets) are separated by a space. Written here
//! rather than taken from a crate: the scheme is these few lines, and the tests check Herald's
//! output with the specification's own library, not with this code.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

/// An event's id as receivers see it (`webhook-id` and the payload's `id`).
pub fn event_id(id: Uuid) -> String {
    format!("evt_{}", id.simple())
}

pub fn parse_event_id(s: &str) -> Option<Uuid> {
    Uuid::parse_str(s.strip_prefix("evt_")?).ok()
}

/// One `v1,<signature>` for `secret` (`whsec_…`); `None` for a secret that is not one.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = B64.decode(secret.strip_prefix("whsec_")?).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!("v1,{}", B64.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: one signature per secret, space-separated.
pub fn signature_header(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets.iter().filter_map(|s| sign(s, id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example in the specification's reference implementations' tests.
    #[test]
    fn matches_the_specifications_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).expect("signs");
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn every_secret_signs_and_ids_round_trip() {
        let h =
            signature_header(&["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_AAAA", "not-a-secret"], "a", 1, b"x");
        assert_eq!(h.split(' ').count(), 2);
        let id = Uuid::new_v4();
        assert_eq!(parse_event_id(&event_id(id)), Some(id));
    }
}
