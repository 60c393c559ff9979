//! Secrets at rest (SMTP credentials, DKIM keys): sealed with ChaCha20-Poly1305 under a key
//! derived from the server secret. A sealed value is `v1.base64(nonce || ciphertext)`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;

use crate::error::{Error, Result};
use crate::infra::tokens::Signer;

const PURPOSE: &str = "seal-v1";

fn cipher(signer: &Signer) -> ChaCha20Poly1305 {
    ChaCha20Poly1305::new(Key::from_slice(&signer.derive_key(PURPOSE)))
}

pub fn seal(signer: &Signer, plaintext: &str) -> String {
    let mut nonce = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut nonce);
    #[allow(clippy::unwrap_used)] // encryption into a Vec cannot fail
    let ct = cipher(signer).encrypt(Nonce::from_slice(&nonce), plaintext.as_bytes()).unwrap();
    let mut out = nonce.to_vec();
    out.extend_from_slice(&ct);
    format!("v1.{}", B64.encode(out))
}

/// Fails (without detail) when the value was sealed under another server secret or altered.
pub fn open(signer: &Signer, sealed: &str) -> Result<String> {
    let broken =
        || Error::Unexpected(anyhow::anyhow!("a sealed secret could not be opened (was HERALD_SECRET changed?)"));
    let raw = sealed.strip_prefix("v1.").and_then(|b| B64.decode(b).ok()).ok_or_else(broken)?;
    if raw.len() < 12 {
        return Err(broken());
    }
    let (nonce, ct) = raw.split_at(12);
    let pt = cipher(signer).decrypt(Nonce::from_slice(nonce), ct).map_err(|_| broken())?;
    String::from_utf8(pt).map_err(|_| broken())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() -> anyhow::Result<()> {
        let s = Signer::new(b"k1");
        let sealed = seal(&s, "smtp://u:p@h");
        assert!(!sealed.contains("u:p"));
        assert_eq!(open(&s, &sealed)?, "smtp://u:p@h");
        assert!(open(&Signer::new(b"k2"), &sealed).is_err());
        let mut bad = sealed.clone();
        bad.pop();
        bad.push('A');
        assert!(open(&s, &bad).is_err() || open(&s, &bad)? != "smtp://u:p@h");
        Ok(())
    }
}
