use super::*;

use base64::Engine as _;
use ring::signature::{Ed25519KeyPair, RsaKeyPair};

/// Headers covered by the signature, as the `h=` tag names them. Ones a message lacks are signed as absent, so they cannot
/// be added in transit (RFC 6376 §5.4); Gmail requires both List-Unsubscribe headers covered.
pub(super) const DKIM_HEADERS: &[&str] = &[
    "from",
    "to",
    "subject",
    "date",
    "message-id",
    "reply-to",
    "list-unsubscribe",
    "list-unsubscribe-post",
    "list-id",
    "feedback-id",
    "mime-version",
    "content-type",
];

/// A DKIM key with its selector and domain: relaxed/relaxed, SHA-256, RSA or Ed25519.
///
/// Signed with ring rather than through lettre: Herald writes the message's wire form itself
/// ([`build_message`]), and ring's RSA is several times faster than the pure-Rust one lettre
/// signs with (RSA signing was the whole cost of a signed send). Relaxed canonicalization is a
/// few lines (RFC 6376 §3.4.2, §3.4.4); a test checks it against RFC 8463's signed example.
pub struct DkimSigner {
    selector: String,
    domain: String,
    key: SigningKey,
    /// The `h=` tag's value, [`DKIM_HEADERS`] joined.
    signed_headers: String,
}

enum SigningKey {
    Rsa(RsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

impl SigningKey {
    fn algorithm(&self) -> &'static str {
        match self {
            SigningKey::Rsa(_) => "rsa-sha256",
            SigningKey::Ed25519(_) => "ed25519-sha256",
        }
    }
}

impl fmt::Debug for DkimSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkimSigner")
            .field("selector", &self.selector)
            .field("domain", &self.domain)
            .field("algorithm", &self.key.algorithm())
            .finish_non_exhaustive()
    }
}

impl DkimSigner {
    /// `private_key_pem` is an RSA key of 2048 to 8192 bits (PKCS#1 `BEGIN RSA PRIVATE KEY` or
    /// PKCS#8 `BEGIN PRIVATE KEY`, as `openssl genrsa` writes), an Ed25519 PKCS#8 key (`openssl
    /// genpkey -algorithm ed25519`), or a bare base64 32-byte Ed25519 seed.
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
        let key = match parse_dkim_key(private_key_pem)? {
            DkimKeyBytes::RsaPkcs1Der(der) => SigningKey::Rsa(RsaKeyPair::from_der(&der).map_err(|_| {
                Error::invalid("the DKIM RSA key must have 2048 to 8192 bits (RFC 8301 retires shorter keys)")
            })?),
            DkimKeyBytes::Ed25519Seed(seed) => {
                SigningKey::Ed25519(Ed25519KeyPair::from_seed_unchecked(&seed).map_err(|_| invalid_key())?)
            }
        };
        Ok(DkimSigner { selector: selector.to_string(), domain, key, signed_headers: DKIM_HEADERS.join(":") })
    }

    pub fn selector(&self) -> &str {
        &self.selector
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// `message` (complete, CRLF line endings) with its `DKIM-Signature` header on top.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>> {
        let mut signed = self.signature_header(message)?;
        signed.extend_from_slice(message);
        Ok(signed)
    }

    /// The `DKIM-Signature` header (folded, ending in CRLF) to put on top of `message`, a
    /// complete message with CRLF line endings.
    pub(super) fn signature_header(&self, message: &[u8]) -> Result<Vec<u8>> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let (headers, body) = split_message(message);
        let body_hash = ring::digest::digest(&ring::digest::SHA256, &relaxed_body(body));
        let mut header = format!(
            "DKIM-Signature: v=1; a={}; c=relaxed/relaxed; d={}; s={};\r\n t={}; h={};\r\n bh={};\r\n b=",
            self.key.algorithm(),
            self.domain,
            self.selector,
            chrono::Utc::now().timestamp(),
            self.signed_headers,
            b64.encode(body_hash.as_ref()),
        )
        .into_bytes();

        // What is signed: the signed headers present (absent ones add nothing), then this
        // header with an empty b=, without its final line break (RFC 6376 §3.7).
        let fields = header_fields(headers);
        let mut signed = Vec::with_capacity(1024);
        for name in DKIM_HEADERS {
            if let Some(field) = fields.iter().rev().find(|f| field_name(f).eq_ignore_ascii_case(name)) {
                relaxed_header(&mut signed, field);
                signed.extend_from_slice(b"\r\n");
            }
        }
        relaxed_header(&mut signed, &header);
        let signature = match &self.key {
            SigningKey::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&ring::signature::RSA_PKCS1_SHA256, &ring::rand::SystemRandom::new(), &signed, &mut signature)
                    .map_err(|_| Error::Unexpected(anyhow::anyhow!("RSA signing failed")))?;
                signature
            }
            // RFC 8463 §3: Ed25519 signs the SHA-256 hash of the data.
            SigningKey::Ed25519(key) => {
                key.sign(ring::digest::digest(&ring::digest::SHA256, &signed).as_ref()).as_ref().to_vec()
            }
        };
        for (i, chunk) in b64.encode(signature).as_bytes().chunks(72).enumerate() {
            if i > 0 {
                header.extend_from_slice(b"\r\n ");
            }
            header.extend_from_slice(chunk);
        }
        header.extend_from_slice(b"\r\n");
        Ok(header)
    }
}

/// The header block (each field ending in CRLF) and the body of a message.
pub fn split_message(message: &[u8]) -> (&[u8], &[u8]) {
    match message.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => (&message[..at + 2], &message[at + 4..]),
        None => (message, &[]),
    }
}

/// The header fields of a header block, each with its folded lines and without its final CRLF.
pub fn header_fields(headers: &[u8]) -> Vec<&[u8]> {
    let mut fields = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < headers.len() {
        if headers[i] == b'\r' && headers[i + 1] == b'\n' {
            let continued = matches!(headers.get(i + 2), Some(b' ' | b'\t'));
            if !continued {
                fields.push(&headers[start..i]);
                start = i + 2;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    if start < headers.len() {
        fields.push(&headers[start..]);
    }
    fields
}

pub fn field_name(field: &[u8]) -> &str {
    let name = field.iter().position(|&b| b == b':').map_or(field, |colon| &field[..colon]);
    std::str::from_utf8(name).unwrap_or("").trim_end_matches([' ', '\t'])
}

/// Relaxed header canonicalization (RFC 6376 §3.4.2): the name lowercased, the value unfolded,
/// runs of whitespace made one space, no whitespace around the colon or at the end.
pub fn relaxed_header(out: &mut Vec<u8>, field: &[u8]) {
    let colon = field.iter().position(|&b| b == b':').unwrap_or(field.len());
    out.extend(field_name(field).bytes().map(|b| b.to_ascii_lowercase()));
    out.push(b':');
    let value = field.get(colon + 1..).unwrap_or_default();
    let mut space = false;
    let mut started = false;
    for &b in value {
        match b {
            b'\r' | b'\n' => {}
            b' ' | b'\t' => space = started,
            _ => {
                if space {
                    out.push(b' ');
                    space = false;
                }
                out.push(b);
                started = true;
            }
        }
    }
}

/// Relaxed body canonicalization (RFC 6376 §3.4.4): runs of whitespace made one space, none at
/// the end of a line, no empty lines at the end, and a final CRLF unless the body is empty.
pub fn relaxed_body(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 2);
    let mut empty_lines = 0;
    let mut canonical = Vec::with_capacity(256);
    let mut lines = body.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        // The text after a final CRLF is not a line.
        if lines.peek().is_none() && line.is_empty() {
            break;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        canonical.clear();
        let mut space = false;
        for &b in line {
            if b == b' ' || b == b'\t' {
                space = true;
            } else {
                if space {
                    canonical.push(b' ');
                    space = false;
                }
                canonical.push(b);
            }
        }
        if canonical.is_empty() {
            empty_lines += 1;
            continue;
        }
        for _ in 0..empty_lines {
            out.extend_from_slice(b"\r\n");
        }
        empty_lines = 0;
        out.extend_from_slice(&canonical);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub(super) fn invalid_key() -> Error {
    Error::invalid("the DKIM private key is not a valid unencrypted PEM RSA or Ed25519 key")
}

/// A private key's bytes, in the forms ring takes.
pub(super) enum DkimKeyBytes {
    RsaPkcs1Der(Vec<u8>),
    Ed25519Seed([u8; 32]),
}

/// Reads the accepted key forms; the DER is read by the `rsa` crate's PKCS#1 and PKCS#8
/// decoders (ring reads PKCS#1 only, and no PKCS#8 Ed25519 key without its public half).
pub(super) fn parse_dkim_key(pem: &str) -> Result<DkimKeyBytes> {
    use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
    use rsa::pkcs8::der::Decode;
    use rsa::pkcs8::der::asn1::OctetStringRef;
    use rsa::pkcs8::{ObjectIdentifier, PrivateKeyInfo, SecretDocument};
    const RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
    const ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

    let pem = pem.trim();
    let b64 = base64::engine::general_purpose::STANDARD;
    let rsa_der = |key: rsa::RsaPrivateKey| {
        key.to_pkcs1_der().map(|der| DkimKeyBytes::RsaPkcs1Der(der.as_bytes().to_vec())).map_err(|_| invalid_key())
    };
    let seed = |bytes: &[u8]| bytes.try_into().map(DkimKeyBytes::Ed25519Seed).map_err(|_| invalid_key());
    if pem.starts_with("-----BEGIN RSA PRIVATE KEY-----") {
        return rsa_der(rsa::RsaPrivateKey::from_pkcs1_pem(pem).map_err(|_| invalid_key())?);
    }
    if pem.starts_with("-----BEGIN PRIVATE KEY-----") {
        let (label, der) = SecretDocument::from_pem(pem).map_err(|_| invalid_key())?;
        if label != "PRIVATE KEY" {
            return Err(invalid_key());
        }
        let info = PrivateKeyInfo::try_from(der.as_bytes()).map_err(|_| invalid_key())?;
        if info.algorithm.oid == RSA {
            return rsa_der(rsa::RsaPrivateKey::try_from(info).map_err(|_| invalid_key())?);
        }
        if info.algorithm.oid == ED25519 {
            // CurvePrivateKey ::= OCTET STRING (the 32-byte seed), inside privateKey.
            let octets = OctetStringRef::from_der(info.private_key).map_err(|_| invalid_key())?;
            return seed(octets.as_bytes());
        }
        return Err(Error::invalid("the DKIM private key must be RSA or Ed25519"));
    }
    match b64.decode(pem) {
        Ok(bytes) => seed(&bytes),
        Err(_) => Err(invalid_key()),
    }
}
