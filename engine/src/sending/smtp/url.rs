use super::*;

// Server settings
// ---------------------------------------------------------------------------------------------

/// How the connection is encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain text (`smtp://host`, port 25 by default).
    None,
    /// STARTTLS when the server offers it, plain text otherwise (`smtp://host?tls=opportunistic`).
    Opportunistic,
    /// STARTTLS or fail (`smtp://host?tls=required`, port 587 by default).
    StartTls,
    /// TLS from the first byte (`smtps://host`, port 465 by default).
    Implicit,
}

/// Where to deliver: parsed from the same URLs as lettre's `from_url`.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpServer {
    pub host: String,
    pub port: u16,
    pub tls: TlsMode,
    /// User name and password, percent-decoded.
    pub credentials: Option<(String, String)>,
    /// The name we give in EHLO.
    pub helo: String,
    /// `Some` for a server a tenant named: only addresses and ports this policy permits are
    /// connected to. `None` for the operator's own (`HERALD_SMTP_URL`).
    pub egress: Option<crate::infra::egress::Egress>,
}

impl fmt::Debug for SmtpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpServer")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user.as_str()))
            .field("password", &self.credentials.as_ref().map(|_| "<redacted>"))
            .field("helo", &self.helo)
            .finish()
    }
}

impl SmtpServer {
    /// `smtp://user:pass@host:port`, `smtp://host:587?tls=required` (or `opportunistic`),
    /// `smtps://user:pass@host:465`; a path (`smtp://host/client.example`) sets the EHLO name.
    /// Errors never repeat the URL (it may hold a password).
    pub fn parse(url: &str) -> Result<Self, SmtpError> {
        let invalid = |why: String| SmtpError::new(SmtpErrorKind::Permanent, None, why, SmtpStage::Connect);
        let parsed = ::url::Url::parse(url.trim()).map_err(|e| invalid(format!("not a valid SMTP URL ({e})")))?;
        let host = match parsed.host() {
            Some(::url::Host::Domain(d)) if !d.is_empty() => d.to_string(),
            Some(::url::Host::Ipv4(ip)) => ip.to_string(),
            Some(::url::Host::Ipv6(ip)) => ip.to_string(),
            _ => return Err(invalid("the SMTP URL has no host".into())),
        };
        let tls_param = parsed.query_pairs().find(|(k, _)| k == "tls").map(|(_, v)| v.into_owned());
        let (tls, default_port) = match (parsed.scheme(), tls_param.as_deref()) {
            ("smtp", None | Some("none")) => (TlsMode::None, 25),
            ("smtp", Some("required")) => (TlsMode::StartTls, 587),
            ("smtp", Some("opportunistic")) => (TlsMode::Opportunistic, 587),
            ("smtps", _) => (TlsMode::Implicit, 465),
            ("smtp", Some(other)) => {
                return Err(invalid(format!("unknown tls={other} (use required or opportunistic)")));
            }
            (scheme, _) => return Err(invalid(format!("unknown scheme {scheme}: (use smtp:// or smtps://)"))),
        };
        let decode = |s: &str| {
            percent_decode(s).ok_or_else(|| invalid("the SMTP user name or password is not valid UTF-8".into()))
        };
        let credentials = match parsed.password() {
            Some(password) => Some((decode(parsed.username())?, decode(password)?)),
            None => None,
        };
        let path = parsed.path().trim_matches('/');
        let helo = if path.is_empty() { ClientId::default().to_string() } else { path.to_string() };
        if helo.is_empty() || helo.chars().any(|c| c.is_control() || c.is_whitespace() || c == '/') {
            return Err(invalid("the EHLO name in the SMTP URL is not a host name".into()));
        }
        Ok(Self { host, port: parsed.port().unwrap_or(default_port), tls, credentials, helo, egress: None })
    }
}

pub(super) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = bytes.get(i + 1..i + 3)
            && let Ok(hex) = std::str::from_utf8(hex)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

// ---------------------------------------------------------------------------------------------
