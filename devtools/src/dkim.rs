//! Checks a DKIM signature the way a receiving server does (RFC 6376 §6.1.3), for tests: the
//! engine's unit tests check its signer with it, and the server's tests check delivered mail
//! against the DNS record a workspace published.
//!
//! The canonicalization is the engine's own (a unit test proves it on RFC 8463's example, signed
//! by a third party); the signatures are checked here with the `rsa` crate for RSA and ring's
//! verifier for Ed25519, not through the signer's code.

use anyhow::Context as _;
use base64::Engine as _;
use herald_engine::sending::message::{field_name, header_fields, relaxed_body, relaxed_header, split_message};

/// A public key to check a DKIM signature with.
pub enum PublicKey {
    /// SubjectPublicKeyInfo DER, as a DNS record's `p=` carries it.
    Rsa(Vec<u8>),
    /// The 32-byte key.
    Ed25519(Vec<u8>),
}

impl PublicKey {
    /// The key of a DKIM TXT record: `v=DKIM1; k=rsa; p=…` (`k` defaults to RSA).
    pub fn from_record(record: &str) -> anyhow::Result<Self> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(tag(record, "p").context("no p= in the record")?.replace(' ', ""))?;
        Ok(match tag(record, "k").unwrap_or("rsa") {
            "rsa" => PublicKey::Rsa(bytes),
            "ed25519" => PublicKey::Ed25519(bytes),
            other => anyhow::bail!("unknown key type {other}"),
        })
    }
}

/// The value of tag `name` in a tag list (`a=b; c=d`), without surrounding whitespace.
pub fn tag<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.split(';').map(str::trim).find_map(|t| t.strip_prefix(name)?.trim_start().strip_prefix('=')).map(str::trim)
}

/// Checks the `DKIM-Signature` with selector `selector` on the message `raw`: the body hash,
/// the signed header fields picked bottom-up, and the signature over them and the signature
/// header with its `b=` value emptied.
pub fn verify(raw: &[u8], selector: &str, key: &PublicKey) -> anyhow::Result<()> {
    use rsa::pkcs8::DecodePublicKey;
    use rsa::signature::Verifier;
    let b64 = base64::engine::general_purpose::STANDARD;
    let (headers, body) = split_message(raw);
    let fields = header_fields(headers);
    let unfold = |field: &[u8]| String::from_utf8_lossy(field).split_whitespace().collect::<Vec<_>>().join(" ");
    let signature = fields
        .iter()
        .copied()
        .find(|f| {
            let value = unfold(f);
            field_name(f).eq_ignore_ascii_case("DKIM-Signature")
                && value.split_once(':').and_then(|(_, tags)| tag(tags, "s")) == Some(selector)
        })
        .context("no DKIM-Signature with that selector")?;
    let value = unfold(signature);
    let value = value.split_once(':').context("no colon")?.1;
    let decode = |name: &str| -> anyhow::Result<Vec<u8>> {
        Ok(b64.decode(tag(value, name).with_context(|| format!("no {name}="))?.replace(' ', ""))?)
    };
    let body_hash = ring::digest::digest(&ring::digest::SHA256, &relaxed_body(body));
    anyhow::ensure!(body_hash.as_ref() == decode("bh")?.as_slice(), "the body hash does not match");

    let mut signed = Vec::new();
    let mut used = vec![false; fields.len()];
    for name in tag(value, "h").context("no h=")?.split(':').map(str::trim) {
        let picked = (0..fields.len()).rev().find(|&i| !used[i] && field_name(fields[i]).eq_ignore_ascii_case(name));
        if let Some(i) = picked {
            used[i] = true;
            relaxed_header(&mut signed, fields[i]);
            signed.extend_from_slice(b"\r\n");
        }
    }
    let emptied: Vec<String> = String::from_utf8(signature.to_vec())?
        .split(';')
        .map(|t| match t.trim_start().strip_prefix("b=") {
            Some(_) => format!("{}b=", &t[..t.len() - t.trim_start().len()]),
            None => t.to_string(),
        })
        .collect();
    relaxed_header(&mut signed, emptied.join(";").as_bytes());
    let sig = decode("b")?;
    match key {
        PublicKey::Rsa(spki) => {
            let key =
                rsa::pkcs1v15::VerifyingKey::<rsa::sha2::Sha256>::new(rsa::RsaPublicKey::from_public_key_der(spki)?);
            key.verify(&signed, &rsa::pkcs1v15::Signature::try_from(sig.as_slice())?)?;
        }
        // RFC 8463 §3: Ed25519 signs the SHA-256 hash of the data.
        PublicKey::Ed25519(public) => {
            let hash = ring::digest::digest(&ring::digest::SHA256, &signed);
            ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public)
                .verify(hash.as_ref(), &sig)
                .map_err(|_| anyhow::anyhow!("the Ed25519 signature does not verify"))?;
        }
    }
    Ok(())
}
