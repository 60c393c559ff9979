//! Egress: the one policy for every connection a tenant can aim (feed URLs, SMTP identities,
//! and what comes next). A tenant names a host; Herald resolves it, keeps only addresses on the
//! public internet (or ones the operator allowed by name, `HERALD_EGRESS_ALLOW`), and connects
//! to an address it checked, so a name that resolves to a public address at check time and to
//! 127.0.0.1 at connect time (DNS rebinding) gets nowhere. What a tenant learns when a
//! destination is refused or unreachable is generic: no banners, statuses or error texts of
//! the inside.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// Ports a tenant's SMTP identity may use: SMTP, submission over TLS, submission, and the
/// common alternative submission port.
pub const SMTP_PORTS: [u16; 4] = [25, 465, 587, 2525];

/// Which private destinations the operator allows; everything public is allowed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Egress {
    allowed: Arc<Vec<IpNet>>,
    /// Any port for SMTP identities (tests and relays on unusual ports, when the operator says so).
    any_smtp_port: bool,
}

impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nets: Vec<String> = self.allowed.iter().map(ToString::to_string).collect();
        write!(f, "Egress(allowed: [{}], any SMTP port: {})", nets.join(", "), self.any_smtp_port)
    }
}

/// Why a destination was refused. Shown to operators in logs; tenants get [`Refused::generic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Every address of the name is inside (loopback, private, link-local, metadata, …).
    Internal(String),
    Port(u16),
    Unresolvable(String),
}

impl Refused {
    /// What the tenant is told.
    pub fn generic(&self) -> &'static str {
        match self {
            Refused::Port(_) => "this port is not allowed; use 25, 465, 587 or 2525",
            Refused::Internal(_) | Refused::Unresolvable(_) => "the address could not be reached",
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Internal(host) => write!(f, "{host} resolves only to addresses tenants may not reach"),
            Refused::Port(p) => write!(f, "port {p} is not an SMTP submission port"),
            Refused::Unresolvable(host) => write!(f, "{host} could not be resolved"),
        }
    }
}

impl Egress {
    /// `setting` is `HERALD_EGRESS_ALLOW`: comma-separated addresses or CIDR ranges
    /// (`10.0.0.5`, `192.168.1.0/24`, `::1`), and optionally `any-smtp-port`.
    pub fn from_setting(setting: &str) -> Result<Self, String> {
        let mut allowed = Vec::new();
        let mut any_smtp_port = false;
        for item in setting.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "any-smtp-port" {
                any_smtp_port = true;
                continue;
            }
            let net = item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("HERALD_EGRESS_ALLOW: `{item}` is not an address or a CIDR range"))?;
            allowed.push(net);
        }
        Ok(Self { allowed: Arc::new(allowed), any_smtp_port })
    }

    /// Tests: loopback allowed, any SMTP port (their sinks and servers listen on 127.0.0.1).
    pub fn allow_loopback() -> Self {
        Self::from_setting("127.0.0.0/8,::1,any-smtp-port").expect("valid")
    }

    pub fn permits(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allowed.iter().any(|net| net.contains(&ip))
    }

    pub fn check_smtp_port(&self, port: u16) -> Result<(), Refused> {
        if self.any_smtp_port || SMTP_PORTS.contains(&port) { Ok(()) } else { Err(Refused::Port(port)) }
    }

    /// Resolves `host` and keeps the addresses this policy permits (in the resolver's order).
    /// Connect only to what this returns.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((host, port))
                .await
                .map_err(|_| Refused::Unresolvable(host.to_string()))?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(Refused::Unresolvable(host.to_string()));
        }
        let permitted: Vec<SocketAddr> = addrs.into_iter().filter(|a| self.permits(a.ip())).collect();
        if permitted.is_empty() {
            return Err(Refused::Internal(host.to_string()));
        }
        Ok(permitted)
    }

    /// An HTTP client for tenant-chosen URLs: every name is resolved through this policy (so
    /// redirects are checked too), URLs naming an address are checked before the request and at
    /// each redirect, no proxy from the environment is used, and at most `redirects` are followed.
    pub fn http_client(&self, timeout: std::time::Duration, redirects: usize, user_agent: &str) -> reqwest::Client {
        let policy = self.clone();
        let redirect = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > redirects {
                attempt.error("too many redirects")
            } else if !policy.permits_url(attempt.url()) {
                attempt.error("a redirect led to an address tenants may not reach")
            } else {
                attempt.follow()
            }
        });
        reqwest::Client::builder()
            .timeout(timeout)
            .redirect(redirect)
            .no_proxy()
            .dns_resolver(Arc::new(self.clone()))
            .user_agent(user_agent)
            .build()
            .unwrap_or_default()
    }

    /// False for URLs that are not http(s), or that name an address this policy refuses. Names
    /// are checked when the client resolves them.
    pub fn permits_url(&self, url: &url::Url) -> bool {
        if !matches!(url.scheme(), "http" | "https") {
            return false;
        }
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.permits(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.permits(IpAddr::V6(ip)),
            Some(url::Host::Domain(d)) => {
                !d.eq_ignore_ascii_case("localhost") || self.permits(Ipv4Addr::LOCALHOST.into())
            }
            None => false,
        }
    }
}

impl reqwest::dns::Resolve for Egress {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.clone();
        Box::pin(async move {
            let addrs = policy
                .resolve(name.as_str(), 0)
                .await
                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(RefusedError(e)) })?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[derive(Debug)]
struct RefusedError(Refused);

impl fmt::Display for RefusedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for RefusedError {}

/// Addresses on the public internet: not loopback, private (RFC 1918, unique local), link-local
/// (the cloud metadata services live there), CGNAT, multicast, broadcast, documentation,
/// benchmarking or reserved ranges; IPv4 inside IPv6 (mapped, compatible, NAT64, 6to4) is judged
/// as the IPv4 address it carries.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || a >= 240
        // 100.64.0.0/10: carrier-grade NAT (and some clouds' internal services).
        || (a == 100 && (64..128).contains(&b))
        // 192.0.0.0/24: IETF protocol assignments; 198.18.0.0/15: benchmarking.
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19)))
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // ::a.b.c.d (IPv4-compatible, deprecated) and 64:ff9b::/96 (NAT64) carry an IPv4 address.
    if (s[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified())
        || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
    {
        let o = ip.octets();
        return is_public_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    // 2002::/16: 6to4, the IPv4 address in bits 16–48.
    if s[0] == 0x2002 {
        return is_public_v4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8));
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // fc00::/7 unique local, fe80::/10 link-local, fec0::/10 site-local (deprecated).
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // 64:ff9b:1::/48: local-use NAT64 (RFC 8215), translated to whatever IPv4 the local
        // translator maps it to (often the inside), so never public.
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
        // 2001:db8::/32 documentation, 100::/64 discard.
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn the_inside_is_not_public() {
        for inside in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::808:808",
            "64:ff9b:1:ffff::1",
            "2002:7f00:1::1",
            "fd00:ec2::254",
        ] {
            assert!(!is_public(ip(inside)), "{inside} must not be public");
        }
        for outside in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"] {
            assert!(is_public(ip(outside)), "{outside} is public");
        }
    }

    #[test]
    fn the_operator_allows_named_destinations() {
        let egress = Egress::from_setting("192.168.1.0/24, 10.0.0.5").expect("valid");
        assert!(egress.permits(ip("192.168.1.20")));
        assert!(egress.permits(ip("10.0.0.5")));
        assert!(!egress.permits(ip("10.0.0.6")));
        assert!(!egress.permits(ip("127.0.0.1")));
        assert!(Egress::from_setting("not-an-address").is_err());
        assert_eq!(egress.check_smtp_port(8025), Err(Refused::Port(8025)));
        assert!(egress.check_smtp_port(587).is_ok());
    }

    #[tokio::test]
    async fn names_resolving_inside_are_refused() {
        let egress = Egress::default();
        assert!(matches!(egress.resolve("localhost", 25).await, Err(Refused::Internal(_))));
        assert!(matches!(egress.resolve("127.0.0.1", 25).await, Err(Refused::Internal(_))));
        assert!(matches!(egress.resolve("[::1]", 25).await, Err(Refused::Internal(_))));
        let allowed = Egress::allow_loopback();
        let resolved = allowed.resolve("127.0.0.1", 25).await.expect("allowed");
        assert_eq!(resolved, vec![SocketAddr::from(([127, 0, 0, 1], 25))]);
    }

    /// A one-route HTTP server on 0.0.0.0 (so 127.0.0.2 reaches it too): `/data` answers JSON,
    /// anything else redirects to `/data` on `redirect_host`.
    async fn http_server(redirect_host: &'static str) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    let request = String::from_utf8_lossy(&buf[..n]);
                    let reply = if request.starts_with("GET /data") {
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 16\r\nconnection: close\r\n\r\n{\"inside\": true}".to_string()
                    } else {
                        format!(
                            "HTTP/1.1 302 Found\r\nlocation: http://{redirect_host}:{port}/data\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        )
                    };
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        port
    }

    async fn fetch(egress: &Egress, url: &str) -> crate::campaigns::feed_fetch::Fetched {
        let client = crate::campaigns::feed_fetch::client(egress);
        crate::campaigns::feed_fetch::fetch(&client, egress, url).await
    }

    #[tokio::test]
    async fn a_feed_url_inside_is_refused_until_the_operator_allows_it() {
        use crate::campaigns::feed_fetch::Fetched;
        let port = http_server("127.0.0.2").await;
        let inside = format!("http://127.0.0.1:{port}/data");
        let refused = Fetched::Failed("the feed URL could not be reached".into());
        assert_eq!(fetch(&Egress::default(), &inside).await, refused);
        assert_eq!(fetch(&Egress::default(), &format!("http://localhost:{port}/data")).await, refused);
        let allowed = Egress::from_setting("127.0.0.1").expect("valid");
        assert_eq!(fetch(&allowed, &inside).await, Fetched::Data(serde_json::json!({"inside": true})));
        // Allowed to the first hop, not to where it redirects (127.0.0.2 is loopback too).
        let redirecting = format!("http://127.0.0.1:{port}/elsewhere");
        assert_eq!(fetch(&allowed, &redirecting).await, refused);
        let both = Egress::from_setting("127.0.0.0/8").expect("valid");
        assert_eq!(fetch(&both, &redirecting).await, Fetched::Data(serde_json::json!({"inside": true})));
    }

    #[tokio::test]
    async fn an_smtp_identity_inside_is_refused_until_the_operator_allows_it() {
        use crate::sending::smtp::{SmtpConnection, SmtpServer};
        let (_sink, addr) = herald_devtools::smtp_sink::MailSink::start("127.0.0.1:0").await.expect("sink");
        let mut server = SmtpServer::parse(&format!("smtp://{addr}")).expect("url");
        let connect = |server: SmtpServer| async move {
            SmtpConnection::connect(&server, std::time::Duration::from_secs(5)).await.map(|c| c.greeting().to_string())
        };
        // The operator's own server (`HERALD_SMTP_URL`) is not subject to the policy.
        assert!(connect(server.clone()).await.is_ok());
        server.egress = Some(Egress::default());
        let e = connect(server.clone()).await.expect_err("refused");
        // A sink on a test port: the port is refused before the address is looked at.
        assert!(e.to_string().contains("this port is not allowed"), "{e}");
        server.egress = Some(Egress::from_setting("any-smtp-port").expect("valid"));
        let e = connect(server.clone()).await.expect_err("refused");
        assert!(e.to_string().contains("the address could not be reached"), "{e}");
        assert!(!e.to_string().contains("127.0.0.1"), "the tenant learns nothing of the inside: {e}");
        server.egress = Some(Egress::allow_loopback());
        assert!(connect(server).await.is_ok());
    }
}
