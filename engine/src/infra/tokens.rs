//! HMAC-SHA256 signed tokens for links in mail (invites now; confirmations and unsubscribes
//! later). A token is `base64url(payload).base64url(mac)`; the payload names its purpose and
//! tenant so a token minted for one use or one workspace cannot be replayed for another.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Serialize, de::DeserializeOwned};
use sha2::Sha256;

use crate::error::{Error, Result};

#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(..)")
    }
}

#[derive(Serialize, serde::Deserialize)]
struct Envelope<T> {
    /// What the token is for, e.g. "invite".
    p: String,
    /// Expiry, unix seconds; 0 = never.
    e: i64,
    d: T,
}

impl Signer {
    pub fn new(key: &[u8]) -> Self {
        Self { key: key.to_vec() }
    }

    fn mac(&self, purpose: &str) -> Hmac<Sha256> {
        #[allow(clippy::unwrap_used)] // HMAC takes keys of any length
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).unwrap();
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac
    }

    /// A 32-byte key for `purpose`, derived from the server key (so one secret serves signing
    /// and sealing without the two uses ever sharing a key).
    pub(crate) fn derive_key(&self, purpose: &str) -> [u8; 32] {
        let mut mac = self.mac(&format!("derive-key:{purpose}"));
        mac.update(b"herald");
        mac.finalize().into_bytes().into()
    }

    /// Signs `data` for `purpose`, valid until `expires_at` (unix seconds; `None` = no expiry).
    pub fn sign<T: Serialize>(&self, purpose: &str, expires_at: Option<i64>, data: &T) -> String {
        let env = Envelope { p: purpose.to_string(), e: expires_at.unwrap_or(0), d: data };
        #[allow(clippy::unwrap_used)] // plain data structs always serialize
        let payload = serde_json::to_vec(&env).unwrap();
        let mut mac = self.mac(purpose);
        mac.update(&payload);
        format!("{}.{}", B64.encode(&payload), B64.encode(mac.finalize().into_bytes()))
    }

    /// Checks the signature, purpose and expiry. Any failure is `NotFound` (callers answer 404
    /// or a "link invalid" page) except expiry, which is `Invalid` with a message to show.
    pub fn verify<T: DeserializeOwned>(&self, purpose: &str, token: &str) -> Result<T> {
        let (payload_b64, mac_b64) = token.split_once('.').ok_or(Error::NotFound)?;
        let payload = B64.decode(payload_b64).map_err(|_| Error::NotFound)?;
        let tag = B64.decode(mac_b64).map_err(|_| Error::NotFound)?;
        let mut mac = self.mac(purpose);
        mac.update(&payload);
        mac.verify_slice(&tag).map_err(|_| Error::NotFound)?;
        let env: Envelope<T> = serde_json::from_slice(&payload).map_err(|_| Error::NotFound)?;
        if env.p != purpose {
            return Err(Error::NotFound);
        }
        if env.e != 0 && env.e < chrono::Utc::now().timestamp() {
            return Err(Error::invalid("This link has expired."));
        }
        Ok(env.d)
    }
}

/// 24 random bytes, base64url: an unguessable path segment (webhook URLs).
pub fn random_token() -> String {
    let mut bytes = [0u8; 24];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut bytes);
    B64.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_tampering() -> Result<()> {
        let s = Signer::new(b"k1");
        let t = s.sign("invite", None, &("a", 1));
        assert_eq!(s.verify::<(String, i32)>("invite", &t)?, ("a".into(), 1));
        assert!(matches!(s.verify::<(String, i32)>("unsubscribe", &t), Err(Error::NotFound)));
        assert!(matches!(Signer::new(b"k2").verify::<(String, i32)>("invite", &t), Err(Error::NotFound)));
        let mut forged = t.clone();
        forged.replace_range(0..1, if t.starts_with('e') { "f" } else { "e" });
        assert!(s.verify::<(String, i32)>("invite", &forged).is_err());
        assert!(s.verify::<(String, i32)>("invite", "garbage").is_err());
        let expired = s.sign("invite", Some(1), &("a", 1));
        assert!(matches!(s.verify::<(String, i32)>("invite", &expired), Err(Error::Invalid(_))));
        Ok(())
    }
}
