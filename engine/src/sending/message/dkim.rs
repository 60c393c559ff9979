use super::*;

/// Headers covered by the signature. Ones a message lacks are signed as absent, so they cannot
/// be added in transit (RFC 6376 §5.4); Gmail requires both List-Unsubscribe headers covered.
pub(super) const DKIM_HEADERS: &[&str] = &[
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "Reply-To",
    "List-Unsubscribe",
    "List-Unsubscribe-Post",
    "List-Id",
    "Feedback-ID",
    "MIME-Version",
    // Not Content-Type: lettre keeps a multipart's Content-Type with the body, not among the
    // message headers its signer reads, so it would be signed as absent and fail verification.
];

/// A DKIM key with its selector and domain: relaxed/relaxed, SHA-256, RSA or Ed25519.
pub struct DkimSigner {
    selector: String,
    domain: String,
    algorithm: DkimSigningAlgorithm,
    pub(super) config: DkimConfig,
}

impl fmt::Debug for DkimSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkimSigner")
            .field("selector", &self.selector)
            .field("domain", &self.domain)
            .field("algorithm", &self.algorithm.to_string())
            .finish_non_exhaustive()
    }
}

impl DkimSigner {
    /// `private_key_pem` is an RSA key (PKCS#1 `BEGIN RSA PRIVATE KEY` or PKCS#8
    /// `BEGIN PRIVATE KEY`, as `openssl genrsa` writes), an Ed25519 PKCS#8 key (`openssl genpkey
    /// -algorithm ed25519`), or a bare base64 32-byte Ed25519 seed.
    pub fn new(selector: &str, domain: &str, private_key_pem: &str) -> Result<Self> {
        let selector = selector.trim();
        let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.split('.')
                    .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)))
        };
        if !label_ok(selector) {
            return Err(Error::invalid(format!("the DKIM selector {selector:?} is not valid")));
        }
        if !label_ok(&domain) || !domain.contains('.') {
            return Err(Error::invalid(format!("the DKIM domain {domain:?} is not valid")));
        }
        let (key, algorithm) = parse_dkim_key(private_key_pem)?;
        let signing_key = DkimSigningKey::new(&key, algorithm).map_err(|_| invalid_key())?;
        let headers = DKIM_HEADERS.iter().map(|&h| HeaderName::new_from_ascii_str(h)).collect();
        let config = DkimConfig::new(
            selector.to_string(),
            domain.clone(),
            signing_key,
            headers,
            DkimCanonicalization { header: DkimCanonicalizationType::Relaxed, body: DkimCanonicalizationType::Relaxed },
        );
        Ok(DkimSigner { selector: selector.to_string(), domain, algorithm, config })
    }

    pub fn selector(&self) -> &str {
        &self.selector
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }
}

pub(super) fn invalid_key() -> Error {
    Error::invalid("the DKIM private key is not a valid unencrypted PEM RSA or Ed25519 key")
}

/// Turns the accepted key forms into what lettre takes: PKCS#1 PEM for RSA, base64 seed for
/// Ed25519. The DER is read by the `rsa` crate's PKCS#1 and PKCS#8 decoders.
pub(super) fn parse_dkim_key(pem: &str) -> Result<(String, DkimSigningAlgorithm)> {
    use base64::Engine as _;
    use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
    use rsa::pkcs8::der::Decode;
    use rsa::pkcs8::der::asn1::OctetStringRef;
    use rsa::pkcs8::{LineEnding, ObjectIdentifier, PrivateKeyInfo, SecretDocument};
    const RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
    const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

    let pem = pem.trim();
    let b64 = base64::engine::general_purpose::STANDARD;
    let rsa_pem = |key: rsa::RsaPrivateKey| {
        key.to_pkcs1_pem(LineEnding::LF).map(|pem| pem.to_string()).map_err(|_| invalid_key())
    };
    if pem.starts_with("-----BEGIN RSA PRIVATE KEY-----") {
        let key = rsa::RsaPrivateKey::from_pkcs1_pem(pem).map_err(|_| invalid_key())?;
        return Ok((rsa_pem(key)?, DkimSigningAlgorithm::Rsa));
    }
    if pem.starts_with("-----BEGIN PRIVATE KEY-----") {
        let (label, der) = SecretDocument::from_pem(pem).map_err(|_| invalid_key())?;
        if label != "PRIVATE KEY" {
            return Err(invalid_key());
        }
        let info = PrivateKeyInfo::try_from(der.as_bytes()).map_err(|_| invalid_key())?;
        if info.algorithm.oid == RSA {
            let key = rsa::RsaPrivateKey::try_from(info).map_err(|_| invalid_key())?;
            return Ok((rsa_pem(key)?, DkimSigningAlgorithm::Rsa));
        }
        if info.algorithm.oid == ED25519 {
            // CurvePrivateKey ::= OCTET STRING (the 32-byte seed), inside privateKey.
            let seed = OctetStringRef::from_der(info.private_key).map_err(|_| invalid_key())?;
            if seed.as_bytes().len() != 32 {
                return Err(invalid_key());
            }
            return Ok((b64.encode(seed.as_bytes()), DkimSigningAlgorithm::Ed25519));
        }
        return Err(Error::invalid("the DKIM private key must be RSA or Ed25519"));
    }
    match b64.decode(pem) {
        Ok(seed) if seed.len() == 32 => Ok((pem.to_string(), DkimSigningAlgorithm::Ed25519)),
        _ => Err(invalid_key()),
    }
}
