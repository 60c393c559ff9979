//! The SMTP client of the delivery workers: one connection, many messages, precise errors.
//!
//! Built on lettre's low-level [`AsyncSmtpConnection`], with the TCP (and TLS) stream opened
//! here rather than by lettre, for three reasons:
//!
//! - **Speed.** lettre 0.11.23 never sets `TCP_NODELAY`, and writes the end-of-data marker
//!   (`\r\n.\r\n`) as a write of its own. With Nagle on, that small write waits for the ACK of
//!   the body, which the server delays by 40 ms (it has nothing to say until it sees the marker):
//!   about 23 messages a second per connection. Our socket has `TCP_NODELAY`.
//! - **Knowing whether a message may have been delivered.** The stream records the last bytes
//!   written, so an error after the whole DATA went out (but before the reply) is told apart
//!   from one before: [`SmtpError::maybe_delivered`].
//! - **Showing the server's greeting** (banner and EHLO reply) for the "send test" button.
//!
//! The banner (and for STARTTLS, the plaintext EHLO and STARTTLS exchange) is read here, then
//! replayed to lettre, which sends EHLO (again, inside TLS), authenticates and speaks the
//! transaction. One connection sends one message at a time, one recipient per message.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::io::{AsyncRead as FuturesRead, AsyncWrite as FuturesWrite};
use lettre::Address;
use lettre::transport::smtp::Error as LettreError;
use lettre::transport::smtp::authentication::{Credentials, DEFAULT_MECHANISMS};
use lettre::transport::smtp::client::{AsyncSmtpConnection, AsyncTokioStream, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::{ClientId, Extension, MailBodyParameter, MailParameter};
use lettre::transport::smtp::response::{Response, Severity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::sending::lease::Fence;

/// lettre's stream type: deprecated as "not meant to be public", but it is the only way to run
/// lettre's TLS (and its certificate store) over a socket we opened.
#[allow(deprecated)]
type LettreStream = lettre::transport::smtp::client::AsyncNetworkStream;

/// Time allowed for MAIL FROM, RCPT TO and DATA, each.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed to write the message and get the server's reply to it.
pub const DEFAULT_DATA_TIMEOUT: Duration = Duration::from_secs(60);
const QUIT_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_REPLY_BYTES: usize = 64 * 1024;
const MAX_ADDRESS_BYTES: usize = 320;

// ---------------------------------------------------------------------------------------------
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
        let parsed = url::Url::parse(url.trim()).map_err(|e| invalid(format!("not a valid SMTP URL ({e})")))?;
        let host = match parsed.host() {
            Some(url::Host::Domain(d)) if !d.is_empty() => d.to_string(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
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

fn percent_decode(s: &str) -> Option<String> {
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
// Errors
// ---------------------------------------------------------------------------------------------

/// What the caller should do about a failed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmtpErrorKind {
    /// Try again later: 4xx replies, timeouts, dropped connections, TLS and network errors.
    Transient,
    /// Do not retry this message (5xx), but the address itself is not known to be bad.
    Permanent,
    /// The server says the mailbox does not exist: suppress the address.
    HardBounce,
    /// The sender's [`Fence`] closed before the end of the message data was written (its lease
    /// may be gone, or its campaign was paused or cancelled): the message was not delivered, and
    /// this sender must not record anything about it but a release.
    Fenced,
}

/// How far the SMTP conversation got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmtpStage {
    /// TCP, TLS, greeting, EHLO, STARTTLS.
    Connect,
    /// AUTH.
    Auth,
    MailFrom,
    RcptTo,
    /// The DATA command, the message, or a reply refusing the message: not delivered.
    Data,
    /// The whole message (with its end marker) was written but no final reply came: the
    /// server may have accepted it. See [`SmtpError::maybe_delivered`].
    AfterData,
}

impl fmt::Display for SmtpStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SmtpStage::Connect => "connecting",
            SmtpStage::Auth => "AUTH",
            SmtpStage::MailFrom => "MAIL FROM",
            SmtpStage::RcptTo => "RCPT TO",
            SmtpStage::Data => "DATA",
            SmtpStage::AfterData => "after the message data",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmtpError {
    pub kind: SmtpErrorKind,
    /// The server's reply code, when the error is a reply.
    pub code: Option<u16>,
    /// The server's reply text (enhanced status code first, when it sent one), or what went wrong.
    pub message: String,
    pub stage: SmtpStage,
}

impl SmtpError {
    pub fn new(kind: SmtpErrorKind, code: Option<u16>, message: impl Into<String>, stage: SmtpStage) -> Self {
        Self { kind, code, message: message.into(), stage }
    }

    /// An error made of a server reply, classified by [`classify`].
    pub fn from_reply(stage: SmtpStage, code: u16, text: &str) -> Self {
        Self::new(classify(code, text, stage), Some(code), text, stage)
    }

    fn transient(stage: SmtpStage, message: impl Into<String>) -> Self {
        Self::new(SmtpErrorKind::Transient, None, message, stage)
    }

    fn fenced(stage: SmtpStage) -> Self {
        Self::new(
            SmtpErrorKind::Fenced,
            None,
            "stopped before the end of the data (lease lost, or the send was paused)",
            stage,
        )
    }

    fn permanent(stage: SmtpStage, message: impl Into<String>) -> Self {
        Self::new(SmtpErrorKind::Permanent, None, message, stage)
    }

    /// True when the whole message was written and the connection failed (or timed out) before
    /// the server's reply: the server may have queued it. Retrying risks a duplicate; not
    /// retrying risks a loss. Record it as ambiguous either way.
    pub fn maybe_delivered(&self) -> bool {
        self.stage == SmtpStage::AfterData
    }

    pub fn is_hard_bounce(&self) -> bool {
        self.kind == SmtpErrorKind::HardBounce
    }

    pub fn is_transient(&self) -> bool {
        self.kind == SmtpErrorKind::Transient
    }
}

impl fmt::Display for SmtpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "{}: {code} {}", self.stage, self.message),
            None => write!(f, "{}: {}", self.stage, self.message),
        }
    }
}

impl std::error::Error for SmtpError {}

/// Classifies a negative reply: 4xx transient, 5xx permanent, and a 5xx that says the mailbox
/// does not exist a hard bounce.
///
/// A hard bounce is a 5xx at RCPT TO (or at the end of DATA: one recipient per message here)
/// whose enhanced status code is 5.1.1 (no such mailbox), 5.1.2 (no such domain), 5.1.3 (bad
/// address syntax) or 5.1.10 (null MX). Without an enhanced code, a 550/551/553 at RCPT TO whose
/// text says so ("user unknown", "no such user", "mailbox unavailable", "does not exist", ...).
/// An enhanced code other than those wins over the text: "550 5.7.1 mailbox unavailable" is a
/// policy refusal, not a bad address.
pub fn classify(code: u16, text: &str, stage: SmtpStage) -> SmtpErrorKind {
    match code {
        500..=599 => {}
        _ => return SmtpErrorKind::Transient,
    }
    if !matches!(stage, SmtpStage::RcptTo | SmtpStage::Data | SmtpStage::AfterData) {
        return SmtpErrorKind::Permanent;
    }
    let first = text.split_whitespace().next().unwrap_or("");
    if let Some(enhanced) = enhanced_code(first) {
        return if matches!(enhanced, "5.1.1" | "5.1.2" | "5.1.3" | "5.1.10") {
            SmtpErrorKind::HardBounce
        } else {
            SmtpErrorKind::Permanent
        };
    }
    const PHRASES: &[&str] = &[
        "user unknown",
        "unknown user",
        "no such user",
        "no such mailbox",
        "no such recipient",
        "mailbox unavailable",
        "mailbox not found",
        "mailbox does not exist",
        "does not exist",
        "recipient unknown",
        "unknown recipient",
        "invalid recipient",
        "invalid mailbox",
    ];
    if stage == SmtpStage::RcptTo && matches!(code, 550 | 551 | 553) {
        let lower = text.to_ascii_lowercase();
        if PHRASES.iter().any(|p| lower.contains(p)) {
            return SmtpErrorKind::HardBounce;
        }
    }
    SmtpErrorKind::Permanent
}

/// `5.1.1` from `5.1.1` (or `5.1.1:`): class.subject.detail, all digits.
fn enhanced_code(word: &str) -> Option<&str> {
    let word = word.trim_end_matches([':', ',', ';']);
    let mut parts = word.split('.');
    let ok = |p: Option<&str>, max: usize| {
        p.is_some_and(|p| !p.is_empty() && p.len() <= max && p.bytes().all(|b| b.is_ascii_digit()))
    };
    (ok(parts.next(), 1) && ok(parts.next(), 3) && ok(parts.next(), 3) && parts.next().is_none()).then_some(word)
}

/// Turns a lettre error into ours. `terminator_sent`: the end-of-data marker went out.
fn from_lettre(e: &LettreError, stage: SmtpStage, terminator_sent: bool) -> SmtpError {
    if let Some(code) = e.status() {
        let text = std::error::Error::source(e).map(|s| s.to_string()).unwrap_or_default();
        let stage = if stage == SmtpStage::AfterData { SmtpStage::Data } else { stage };
        return SmtpError::from_reply(stage, u16::from(code), &text);
    }
    if e.is_client() {
        // lettre refused before sending: no usable AUTH mechanism and the like.
        return SmtpError::permanent(stage, e.to_string());
    }
    // Network, TLS, an unparsable reply, or the connection closed ("incomplete response").
    let stage = if matches!(stage, SmtpStage::Data | SmtpStage::AfterData) && terminator_sent {
        SmtpStage::AfterData
    } else if stage == SmtpStage::AfterData {
        SmtpStage::Data
    } else {
        stage
    };
    let mut message = e.to_string();
    if stage == SmtpStage::AfterData {
        message.push_str(" (the message may have been delivered)");
    }
    SmtpError::transient(stage, message)
}

// ---------------------------------------------------------------------------------------------
// The stream handed to lettre
// ---------------------------------------------------------------------------------------------

/// The socket, plain or inside lettre's TLS.
#[derive(Debug)]
enum Io {
    Tcp(TcpStream),
    Tls(Box<LettreStream>),
}

impl Io {
    #[allow(deprecated)]
    async fn upgrade(self, host: &str) -> Result<Self, SmtpError> {
        let Io::Tcp(tcp) = self else { return Ok(self) };
        let params = TlsParameters::new(host.to_string())
            .map_err(|e| SmtpError::permanent(SmtpStage::Connect, format!("TLS set-up: {e}")))?;
        let mut stream = LettreStream::use_existing_tokio1(Box::new(tcp));
        stream
            .upgrade_tls(params)
            .await
            .map_err(|e| SmtpError::transient(SmtpStage::Connect, format!("TLS handshake: {e}")))?;
        Ok(Io::Tls(Box::new(stream)))
    }
}

impl AsyncRead for Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => {
                let dst = buf.initialize_unfilled();
                match FuturesRead::poll_read(Pin::new(&mut **s), cx, dst) {
                    Poll::Ready(Ok(n)) => {
                        buf.advance(n);
                        Poll::Ready(Ok(()))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => FuturesWrite::poll_write(Pin::new(&mut **s), cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => FuturesWrite::poll_flush(Pin::new(&mut **s), cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => FuturesWrite::poll_close(Pin::new(&mut **s), cx),
        }
    }
}

/// What the stream saw, shared between the stream (owned by lettre) and [`SmtpConnection`].
#[derive(Debug, Default)]
struct Tap {
    /// Writes that moved at least one byte.
    writes: AtomicU64,
    /// The last five bytes written, big-endian in the low 40 bits.
    tail: AtomicU64,
    /// What the server sent after lettre's first write (EHLO) and before its second.
    ehlo_reply: Mutex<Vec<u8>>,
    /// While a fenced send runs: no byte is written once it closes (see [`crate::sending::lease`]).
    fence: Mutex<Option<Fence>>,
}

/// `\r\n.\r\n` as [`Tap::tail`] holds it.
const END_OF_DATA: u64 = u64::from_be_bytes([0, 0, 0, b'\r', b'\n', b'.', b'\r', b'\n']);
const MAX_CAPTURE: usize = 16 * 1024;

impl Tap {
    fn wrote(&self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut tail = self.tail.load(Ordering::Relaxed);
        for &b in &data[data.len().saturating_sub(5)..] {
            tail = ((tail << 8) | u64::from(b)) & 0xff_ffff_ffff;
        }
        self.tail.store(tail, Ordering::Relaxed);
    }

    fn read(&self, data: &[u8]) {
        if !data.is_empty() && self.writes.load(Ordering::Relaxed) == 1 {
            let mut captured = self.ehlo_reply.lock().unwrap_or_else(PoisonError::into_inner);
            let room = MAX_CAPTURE.saturating_sub(captured.len());
            captured.extend_from_slice(&data[..data.len().min(room)]);
        }
    }

    /// The end-of-data marker was the last thing written. Right after the DATA command the tail
    /// is `ATA\r\n`, so this cannot be a previous message's marker.
    fn end_of_data_sent(&self) -> bool {
        self.tail.load(Ordering::Relaxed) == END_OF_DATA
    }
}

/// The stream lettre speaks over: replays what we already read (the banner), then reads and
/// writes the socket, telling the [`Tap`] what went by.
#[derive(Debug)]
struct TappedStream {
    io: Io,
    replay: Vec<u8>,
    replayed: usize,
    tap: Arc<Tap>,
}

impl AsyncRead for TappedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.replayed < this.replay.len() {
            let n = (this.replay.len() - this.replayed).min(buf.remaining());
            buf.put_slice(&this.replay[this.replayed..this.replayed + n]);
            this.replayed += n;
            if this.replayed == this.replay.len() {
                this.replay = Vec::new();
                this.replayed = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            this.tap.read(&buf.filled()[before..]);
        }
        poll
    }
}

impl AsyncWrite for TappedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // The fence is checked right before each write reaches the socket: the end-of-data
        // marker can only be written while the sender still owns the message.
        if this.tap.fence.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_some_and(|f| !f.is_open()) {
            return Poll::Ready(Err(io::Error::other("fenced: the sender no longer owns this message")));
        }
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            this.tap.wrote(&buf[..n.min(buf.len())]);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl AsyncTokioStream for TappedStream {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.io {
            Io::Tcp(s) => s.peer_addr(),
            Io::Tls(s) => s.peer_addr(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The connection
// ---------------------------------------------------------------------------------------------

/// One SMTP session, ready to send. Not shared: one message at a time.
pub struct SmtpConnection {
    conn: AsyncSmtpConnection,
    tap: Arc<Tap>,
    greeting: String,
    encrypted: bool,
    broken: bool,
    /// The server offers PIPELINING (RFC 2920): MAIL FROM, RCPT TO and DATA go out in one write
    /// and their replies are read together, one round trip where there were three.
    pipelining: bool,
    command_timeout: Duration,
    data_timeout: Duration,
}

impl fmt::Debug for SmtpConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpConnection")
            .field("server", &self.conn.server_info().to_string())
            .field("encrypted", &self.is_encrypted())
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}

impl SmtpConnection {
    /// Connects (TCP with `TCP_NODELAY`, TLS as the server's settings say), reads the greeting,
    /// says EHLO and authenticates. `timeout` bounds all of it.
    pub async fn connect(server: &SmtpServer, timeout: Duration) -> Result<Self, SmtpError> {
        match tokio::time::timeout(timeout, Self::open(server)).await {
            Ok(result) => result,
            Err(_) => Err(SmtpError::transient(
                SmtpStage::Connect,
                format!(
                    "no ready SMTP session with {}:{} within {} s",
                    server.host,
                    server.port,
                    timeout.as_secs_f32()
                ),
            )),
        }
    }

    async fn open(server: &SmtpServer) -> Result<Self, SmtpError> {
        let stage = SmtpStage::Connect;
        let tcp = open_tcp(&server.host, server.port, server.egress.as_ref()).await?;
        let mut io = Io::Tcp(tcp);
        if server.tls == TlsMode::Implicit {
            io = io.upgrade(&server.host).await?;
        }
        let mut buf = Vec::with_capacity(512);
        let (code, len) = read_reply(&mut io, &mut buf).await?;
        let banner: Vec<u8> = buf.drain(..len).collect();
        if code != 220 {
            return Err(SmtpError::from_reply(stage, code, reply_text(&banner).trim()));
        }
        if matches!(server.tls, TlsMode::StartTls | TlsMode::Opportunistic) {
            io.write_all(format!("EHLO {}\r\n", server.helo).as_bytes()).await.map_err(|e| io_error(stage, &e))?;
            let (code, len) = read_reply(&mut io, &mut buf).await?;
            let ehlo: Vec<u8> = buf.drain(..len).collect();
            let offers_starttls = code == 250 && offers(&String::from_utf8_lossy(&ehlo), "STARTTLS");
            if offers_starttls {
                io.write_all(b"STARTTLS\r\n").await.map_err(|e| io_error(stage, &e))?;
                let (code, len) = read_reply(&mut io, &mut buf).await?;
                if code != 220 {
                    return Err(SmtpError::from_reply(stage, code, reply_text(&buf[..len]).trim()));
                }
                // Anything the server sent after its 220 and before TLS is an injection attempt
                // (RFC 3207 §6): never let it reach the encrypted session.
                buf.clear();
                io = io.upgrade(&server.host).await?;
            } else if server.tls == TlsMode::StartTls {
                return Err(SmtpError::transient(stage, "the server does not offer STARTTLS (tls=required)"));
            }
        }
        let encrypted = matches!(io, Io::Tls(_));
        let tap = Arc::new(Tap::default());
        let mut replay = banner.clone();
        replay.extend_from_slice(&buf);
        let stream = TappedStream { io, replay, replayed: 0, tap: tap.clone() };
        let hello = ClientId::Domain(server.helo.clone());
        let mut conn = AsyncSmtpConnection::connect_with_transport(Box::new(stream), &hello)
            .await
            .map_err(|e| from_lettre(&e, stage, false))?;
        if let Some((user, password)) = &server.credentials {
            conn.auth(DEFAULT_MECHANISMS, &Credentials::new(user.clone(), password.clone()))
                .await
                .map_err(|e| from_lettre(&e, SmtpStage::Auth, false))?;
        }
        let ehlo = std::mem::take(&mut *tap.ehlo_reply.lock().unwrap_or_else(PoisonError::into_inner));
        let ehlo = reply_text(&ehlo);
        let greeting = format!("{}\n{}", reply_text(&banner).trim_end(), ehlo.trim_end());
        let pipelining = offers(&ehlo, "PIPELINING");
        Ok(Self {
            conn,
            tap,
            greeting: greeting.trim().to_string(),
            encrypted,
            broken: false,
            pipelining,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            data_timeout: DEFAULT_DATA_TIMEOUT,
        })
    }

    /// The server's banner and EHLO reply (inside TLS when there is TLS), one reply line a line,
    /// e.g. `220 mx.example ESMTP ready\n250-mx.example\n250-8BITMIME\n250 SIZE 26214400`.
    pub fn greeting(&self) -> &str {
        &self.greeting
    }

    /// Whether the session runs inside TLS (implicit or STARTTLS). lettre's own
    /// `is_encrypted` says false: to lettre our stream is "plain TCP", whatever is inside.
    pub fn is_encrypted(&self) -> bool {
        self.encrypted
    }

    /// Sets the time allowed for each command and for the message data with its reply
    /// (defaults [`DEFAULT_COMMAND_TIMEOUT`] and [`DEFAULT_DATA_TIMEOUT`]).
    pub fn set_timeouts(&mut self, command: Duration, data: Duration) {
        self.command_timeout = command;
        self.data_timeout = data;
    }

    /// False once an error left the session in an unknown state.
    pub fn is_usable(&self) -> bool {
        !self.broken && !self.conn.has_broken()
    }

    /// Sends one message to one recipient: MAIL FROM, RCPT TO, DATA, the message (line endings
    /// made CRLF, dot-stuffed, end marker added). Returns the server's final reply text, e.g.
    /// `2.0.0 OK queued as 17`. An empty `envelope_from` sends the null reverse-path (`<>`).
    ///
    /// Addresses with CR, LF, other control characters, spaces or angle brackets are refused
    /// before any byte goes out (SMTP command injection); so is a recipient lettre cannot parse.
    ///
    /// **After any error, discard the connection** (drop it, or [`quit`](Self::quit)) and open a
    /// new one: a half-done transaction leaves the server expecting something else ("503 sender
    /// already specified"). Sending again on a connection after an error fails at once.
    pub async fn send(&mut self, envelope_from: &str, rcpt_to: &str, raw_message: &[u8]) -> Result<String, SmtpError> {
        self.send_fenced(envelope_from, rcpt_to, raw_message, &Fence::always_open()).await
    }

    /// [`send`](Self::send) under a [`Fence`]: once the fence closes, no further byte is
    /// written and a transaction that has not written the end of its data is abandoned at once
    /// (an error of kind [`SmtpErrorKind::Fenced`]: not delivered). A transaction that has
    /// written it waits for the server's reply as usual: the message may already be delivered.
    pub async fn send_fenced(
        &mut self,
        envelope_from: &str,
        rcpt_to: &str,
        raw_message: &[u8],
        fence: &Fence,
    ) -> Result<String, SmtpError> {
        let (from, to) = envelope(envelope_from, rcpt_to)?;
        if !self.is_usable() {
            return Err(SmtpError::transient(SmtpStage::Connect, "this connection failed earlier; open a new one"));
        }
        if !fence.is_open() {
            return Err(SmtpError::fenced(SmtpStage::MailFrom));
        }
        *self.tap.fence.lock().unwrap_or_else(PoisonError::into_inner) = Some(fence.clone());
        let tap = self.tap.clone();
        let result = {
            let transaction = self.transaction(from, to, raw_message);
            tokio::pin!(transaction);
            tokio::select! {
                result = &mut transaction => result,
                _ = fence.closed() => {
                    if tap.end_of_data_sent() {
                        // Past the end of the data: only the reply is left to wait for.
                        transaction.await
                    } else {
                        Err(SmtpError::fenced(SmtpStage::Data))
                    }
                }
            }
        };
        *self.tap.fence.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let result = match result {
            // A write refused by the fence surfaces as an I/O error from lettre.
            Err(e) if !fence.is_open() && e.code.is_none() && !e.maybe_delivered() => Err(SmtpError::fenced(e.stage)),
            other => other,
        };
        if result.is_err() {
            self.broken = true;
        }
        result
    }

    async fn transaction(&mut self, from: Option<Address>, to: Address, raw: &[u8]) -> Result<String, SmtpError> {
        let info = self.conn.server_info();
        let mut params = Vec::new();
        if !raw.is_ascii() {
            if !info.supports_feature(Extension::EightBitMime) {
                return Err(SmtpError::permanent(
                    SmtpStage::MailFrom,
                    "the message has 8-bit content and the server does not offer 8BITMIME",
                ));
            }
            params.push(MailParameter::Body(MailBodyParameter::EightBitMime));
        }
        let ascii = |a: &Address| AsRef::<str>::as_ref(a).is_ascii();
        let utf8_addresses = !ascii(&to) || from.as_ref().is_some_and(|f| !ascii(f));
        if utf8_addresses {
            if !info.supports_feature(Extension::SmtpUtfEight) {
                return Err(SmtpError::permanent(
                    SmtpStage::RcptTo,
                    "the address is not ASCII and the server does not offer SMTPUTF8",
                ));
            }
            params.push(MailParameter::SmtpUtfEight);
        }
        let limit = self.command_timeout;
        let (mail, rcpt) = (Mail::new(from, params), Rcpt::new(to, Vec::new()));
        let reply = if self.pipelining {
            // One write, three replies read in order. A refusal of any of them fails the
            // transaction (and the connection is never reused), so the replies still in flight
            // after it do not matter.
            let envelope = format!("{mail}{rcpt}{Data}");
            let reply = timed(SmtpStage::MailFrom, limit, self.conn.command(envelope)).await?;
            expect_2xx(SmtpStage::MailFrom, &reply)?;
            let reply = timed(SmtpStage::RcptTo, limit, self.conn.read_response()).await?;
            expect_2xx(SmtpStage::RcptTo, &reply)?;
            timed(SmtpStage::Data, limit, self.conn.read_response()).await?
        } else {
            let reply = timed(SmtpStage::MailFrom, limit, self.conn.command(mail)).await?;
            expect_2xx(SmtpStage::MailFrom, &reply)?;
            let reply = timed(SmtpStage::RcptTo, limit, self.conn.command(rcpt)).await?;
            expect_2xx(SmtpStage::RcptTo, &reply)?;
            timed(SmtpStage::Data, limit, self.conn.command(Data)).await?
        };
        if !reply.has_code(354) {
            return Err(SmtpError::transient(
                SmtpStage::Data,
                format!("expected 354 after DATA, got {} {}", u16::from(reply.code()), joined(&reply)),
            ));
        }
        let body = data_body(raw);
        let reply = match tokio::time::timeout(self.data_timeout, self.conn.message(&body)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => return Err(from_lettre(&e, SmtpStage::Data, self.tap.end_of_data_sent())),
            Err(_) if self.tap.end_of_data_sent() => {
                return Err(SmtpError::transient(
                    SmtpStage::AfterData,
                    format!(
                        "no reply within {} s after the message data (the message may have been delivered)",
                        self.data_timeout.as_secs_f32()
                    ),
                ));
            }
            Err(_) => {
                return Err(SmtpError::transient(
                    SmtpStage::Data,
                    format!("could not write the message within {} s", self.data_timeout.as_secs_f32()),
                ));
            }
        };
        if reply.code().severity != Severity::PositiveCompletion {
            // A 3xx here is nonsense; whether the server kept the message is anyone's guess.
            return Err(SmtpError::new(
                SmtpErrorKind::Transient,
                Some(u16::from(reply.code())),
                format!("{} (unexpected reply to the message data; it may have been delivered)", joined(&reply)),
                SmtpStage::AfterData,
            ));
        }
        Ok(joined(&reply))
    }

    /// Says QUIT (waiting at most 5 s for the reply) and closes.
    pub async fn quit(mut self) {
        if self.is_usable() {
            let _ = tokio::time::timeout(QUIT_TIMEOUT, self.conn.quit()).await;
        }
    }
}

/// Checks and parses the envelope addresses. Nothing has been sent yet when this fails.
fn envelope(envelope_from: &str, rcpt_to: &str) -> Result<(Option<Address>, Address), SmtpError> {
    let from = if envelope_from.is_empty() {
        None
    } else {
        check_address(envelope_from, SmtpStage::MailFrom)?;
        Some(
            Address::from_str(envelope_from)
                .map_err(|e| SmtpError::permanent(SmtpStage::MailFrom, format!("invalid sender address: {e}")))?,
        )
    };
    check_address(rcpt_to, SmtpStage::RcptTo)?;
    let to = Address::from_str(rcpt_to)
        .map_err(|e| SmtpError::permanent(SmtpStage::RcptTo, format!("invalid recipient address: {e}")))?;
    Ok((from, to))
}

fn check_address(address: &str, stage: SmtpStage) -> Result<(), SmtpError> {
    if address.len() > MAX_ADDRESS_BYTES {
        return Err(SmtpError::permanent(stage, "the address is too long"));
    }
    if address.chars().any(|c| c.is_control() || c.is_whitespace() || c == '<' || c == '>') {
        return Err(SmtpError::permanent(
            stage,
            "the address contains control characters, spaces or angle brackets; refused before sending",
        ));
    }
    Ok(())
}

async fn timed<T>(
    stage: SmtpStage,
    limit: Duration,
    fut: impl Future<Output = Result<T, LettreError>>,
) -> Result<T, SmtpError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(from_lettre(&e, stage, false)),
        Err(_) => Err(SmtpError::transient(stage, format!("no reply within {} s", limit.as_secs_f32()))),
    }
}

fn expect_2xx(stage: SmtpStage, reply: &Response) -> Result<(), SmtpError> {
    if reply.code().severity == Severity::PositiveCompletion {
        Ok(())
    } else {
        Err(SmtpError::transient(stage, format!("unexpected reply {} {}", u16::from(reply.code()), joined(reply))))
    }
}

fn joined(reply: &Response) -> String {
    let mut out = String::new();
    for line in reply.message() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

/// The message as lettre must get it: CRLF line endings (a bare LF would let "\n.\n" end the
/// data early on lenient servers), and no final CRLF, because lettre always appends
/// `\r\n.\r\n` (a message ending in CRLF would otherwise grow an empty line). lettre does the
/// dot-stuffing.
fn data_body(raw: &[u8]) -> Cow<'_, [u8]> {
    let bare_lf = raw.iter().enumerate().any(|(i, &b)| b == b'\n' && (i == 0 || raw[i - 1] != b'\r'));
    if !bare_lf {
        return Cow::Borrowed(raw.strip_suffix(b"\r\n").unwrap_or(raw));
    }
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 32);
    for (i, &b) in raw.iter().enumerate() {
        if b == b'\n' && (i == 0 || raw[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(b);
    }
    if out.ends_with(b"\r\n") {
        out.truncate(out.len() - 2);
    }
    Cow::Owned(out)
}

async fn open_tcp(
    host: &str,
    port: u16,
    egress: Option<&crate::infra::egress::Egress>,
) -> Result<TcpStream, SmtpError> {
    let stage = SmtpStage::Connect;
    let addrs: Vec<std::net::SocketAddr> = match egress {
        // A tenant's server: only checked addresses, and the tenant learns nothing of the inside.
        Some(policy) => {
            let checked = async {
                policy.check_smtp_port(port)?;
                policy.resolve(host, port).await
            };
            checked.await.map_err(|refused| {
                tracing::info!(%host, port, %refused, "refused a tenant's SMTP destination");
                SmtpError::transient(stage, refused.generic())
            })?
        }
        None => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| SmtpError::transient(stage, format!("cannot resolve {host}: {e}")))?
            .collect(),
    };
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // The point of opening the socket ourselves: see the module documentation.
                stream.set_nodelay(true).map_err(|e| io_error(stage, &e))?;
                return Ok(stream);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => SmtpError::transient(stage, format!("cannot connect to {host}:{port}: {e}")),
        None => SmtpError::transient(stage, format!("{host} has no address")),
    })
}

/// Whether an EHLO reply (`250-host`, `250-KEYWORD params`…) offers the extension `keyword`.
fn offers(ehlo: &str, keyword: &str) -> bool {
    ehlo.lines().any(|l| l.get(4..).is_some_and(|k| k.trim().eq_ignore_ascii_case(keyword)))
}

fn io_error(stage: SmtpStage, e: &io::Error) -> SmtpError {
    SmtpError::transient(stage, format!("network error: {e}"))
}

fn reply_text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).replace("\r\n", "\n")
}

/// Reads one complete (possibly multi-line) reply into `buf`; returns its code and length.
async fn read_reply(io: &mut Io, buf: &mut Vec<u8>) -> Result<(u16, usize), SmtpError> {
    let stage = SmtpStage::Connect;
    let mut start = 0;
    loop {
        while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
            let line = &buf[start..start + nl + 1];
            let code = line
                .get(..3)
                .filter(|c| c.iter().all(u8::is_ascii_digit))
                .and_then(|c| std::str::from_utf8(c).ok())
                .and_then(|c| c.parse::<u16>().ok());
            let Some(code) = code else {
                return Err(SmtpError::transient(stage, "the server's reply is not SMTP"));
            };
            start += nl + 1;
            match line.get(3) {
                Some(b'-') => continue,
                Some(b' ' | b'\r' | b'\n') | None => return Ok((code, start)),
                Some(_) => return Err(SmtpError::transient(stage, "the server's reply is not SMTP")),
            }
        }
        if buf.len() > MAX_REPLY_BYTES {
            return Err(SmtpError::transient(stage, "the server's reply is too long"));
        }
        let n = io.read_buf(buf).await.map_err(|e| io_error(stage, &e))?;
        if n == 0 {
            return Err(SmtpError::transient(stage, "the server closed the connection"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Raw throughput
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct BlastReport {
    pub messages: usize,
    pub connections: usize,
    /// From the first connect to the last reply.
    pub elapsed: Duration,
    pub per_second: f64,
}

/// Sends `messages` copies of `raw` over `connections` parallel connections, with the same
/// client code the delivery workers use and nothing else (no database): the raw limit of a
/// server and this client. The first error stops the run.
pub async fn blast(
    server: &SmtpServer,
    connections: usize,
    messages: usize,
    envelope_from: &str,
    rcpt_to: &str,
    raw: &[u8],
) -> Result<BlastReport, SmtpError> {
    let connections = connections.clamp(1, messages.max(1));
    let remaining = Arc::new(AtomicUsize::new(messages));
    let raw: Arc<[u8]> = Arc::from(raw);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let (server, remaining, raw) = (server.clone(), remaining.clone(), raw.clone());
        let (from, to) = (envelope_from.to_string(), rcpt_to.to_string());
        tasks.spawn(async move {
            let mut conn = SmtpConnection::connect(&server, Duration::from_secs(30)).await?;
            let mut sent = 0usize;
            while remaining.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok() {
                conn.send(&from, &to, &raw).await?;
                sent += 1;
            }
            conn.quit().await;
            Ok::<usize, SmtpError>(sent)
        });
    }
    let mut sent = 0;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(n)) => sent += n,
            // Dropping the set aborts the other connections.
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(SmtpError::transient(SmtpStage::Connect, format!("a sending task failed: {e}"))),
        }
    }
    let elapsed = started.elapsed();
    Ok(BlastReport { messages: sent, connections, elapsed, per_second: sent as f64 / elapsed.as_secs_f64().max(1e-9) })
}

/// The provider's id for the message, when its 250 names one ("250 Ok: queued as 4B7D1", SES's
/// "250 Ok 0100018c…"): the last word, if it looks like an id rather than prose.
pub(crate) fn provider_id(reply: &str) -> Option<String> {
    let word = reply.split_whitespace().last()?.trim_matches(|c: char| matches!(c, '<' | '>' | '.' | ',' | ')' | '('));
    (word.len() >= 6 && word.len() <= 200 && word.chars().any(|c| c.is_ascii_digit()) && !word.contains('@'))
        .then(|| word.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smtp_sink::{FaultAction, FaultRule, Faults, MailSink};

    const FROM: &str = "bounces@herald.test";

    async fn sink() -> anyhow::Result<(MailSink, SmtpServer)> {
        let (sink, addr) = MailSink::start("127.0.0.1:0").await?;
        Ok((sink, SmtpServer::parse(&format!("smtp://{addr}"))?))
    }

    async fn connect(server: &SmtpServer) -> anyhow::Result<SmtpConnection> {
        Ok(SmtpConnection::connect(server, Duration::from_secs(5)).await?)
    }

    /// A ~2 KB message with a unique Message-ID.
    fn message(n: usize, to: &str) -> Vec<u8> {
        let mut m = format!(
            "From: Herald <{FROM}>\r\nTo: <{to}>\r\nSubject: Issue {n}\r\nMessage-ID: <{n}.blast@herald.test>\r\n\
             MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        );
        while m.len() < 2000 {
            m.push_str("The quick brown fox jumps over the lazy dog, again and again and again.\r\n");
        }
        m.into_bytes()
    }

    /// Sends one message on a fresh connection and returns the error.
    async fn fails(server: &SmtpServer, to: &str) -> anyhow::Result<SmtpError> {
        let mut conn = connect(server).await?;
        match conn.send(FROM, to, &message(0, to)).await {
            Ok(reply) => anyhow::bail!("{to} was accepted: {reply}"),
            Err(e) => Ok(e),
        }
    }

    #[test]
    fn smtp_urls_parse_like_lettre() -> anyhow::Result<()> {
        let s = SmtpServer::parse("smtp://mx.example.com")?;
        assert_eq!(
            (s.host.as_str(), s.port, s.tls, s.credentials.clone()),
            ("mx.example.com", 25, TlsMode::None, None)
        );
        let s = SmtpServer::parse("smtp://us%40er:p%40ss%3Aw%2Fd@relay.example:2587?tls=required")?;
        assert_eq!((s.port, s.tls), (2587, TlsMode::StartTls));
        assert_eq!(s.credentials, Some(("us@er".to_string(), "p@ss:w/d".to_string())));
        assert!(!format!("{s:?}").contains("p@ss"), "Debug shows the password: {s:?}");
        assert!(!format!("{s:?}").contains("p%40ss"));
        let s = SmtpServer::parse("smtp://relay.example?tls=opportunistic")?;
        assert_eq!((s.port, s.tls), (587, TlsMode::Opportunistic));
        let s = SmtpServer::parse("smtps://u:p@[::1]/client.herald.test")?;
        assert_eq!(
            (s.host.as_str(), s.port, s.tls, s.helo.as_str()),
            ("::1", 465, TlsMode::Implicit, "client.herald.test")
        );
        assert!(!SmtpServer::parse("smtp://localhost")?.helo.is_empty());
        for bad in ["http://x", "smtp://x?tls=maybe", "not a url", "smtp://"] {
            assert!(SmtpServer::parse(bad).is_err(), "{bad} parsed");
        }
        let e = SmtpServer::parse("ftp://user:hunter2@x").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!e.is_empty() && !e.contains("hunter2"), "{e}");
        Ok(())
    }

    #[test]
    fn smtp_replies_are_classified() {
        use SmtpErrorKind::*;
        use SmtpStage::*;
        let cases = [
            (421, "4.3.2 Service shutting down", RcptTo, Transient),
            (450, "4.2.1 Mailbox busy", RcptTo, Transient),
            (451, "4.3.0 Try again later", Data, Transient),
            (550, "5.1.1 User unknown", RcptTo, HardBounce),
            (550, "5.1.10 Recipient address has null MX", RcptTo, HardBounce),
            (550, "5.1.2 Bad destination system", RcptTo, HardBounce),
            (553, "5.1.3 Bad address syntax", RcptTo, HardBounce),
            (550, "Requested action not taken: mailbox unavailable", RcptTo, HardBounce),
            (550, "sorry, no such user here", RcptTo, HardBounce),
            (551, "User does not exist", RcptTo, HardBounce),
            (550, "5.7.1 mailbox unavailable: blocked for spam", RcptTo, Permanent),
            (554, "5.7.1 Relay access denied", RcptTo, Permanent),
            (552, "5.2.2 Mailbox full", RcptTo, Permanent),
            (550, "5.1.1 User unknown", MailFrom, Permanent),
            (550, "5.1.1 User unknown", Data, HardBounce),
            (550, "no such user", Data, Permanent),
            (554, "5.6.0 Message rejected", Data, Permanent),
        ];
        for (code, text, stage, want) in cases {
            assert_eq!(classify(code, text, stage), want, "{code} {text} at {stage}");
        }
    }

    #[tokio::test]
    async fn smtp_client_delivers_a_raw_message() -> anyhow::Result<()> {
        let (sink, server) = sink().await?;
        let mut conn = connect(&server).await?;
        assert!(conn.greeting().starts_with("220 herald-dev-catcher"), "{}", conn.greeting());
        assert!(conn.greeting().contains("250-8BITMIME"), "{}", conn.greeting());
        assert!(!conn.is_encrypted());
        // Bare LFs, lines starting with dots, a lone dot line, 8-bit text, a final CRLF.
        let raw = "Subject: dots\nMessage-ID: <x1@herald.test>\n\n.\n..two\r\n.\r\nünïcode\r\nend\r\n";
        let reply = conn.send(FROM, "Reader@Example.com", raw.as_bytes()).await?;
        assert!(reply.starts_with("2.0.0 OK queued as"), "{reply}");
        let got = sink.wait_for_recipient("reader@example.com", Duration::from_secs(5)).await;
        let got = got.ok_or_else(|| anyhow::anyhow!("no mail arrived"))?;
        assert_eq!(String::from_utf8(got.raw)?, raw.replace("\r\n", "\n").replace('\n', "\r\n"));
        assert_eq!(got.mail_from, FROM);
        // The connection is reusable, the null sender works, and so does an SMTPUTF8 address.
        conn.send("", "second@example.com", b"Subject: bounce\r\n\r\nhi").await?;
        conn.send(FROM, "J\u{fc}rgen@example.com", b"Subject: utf8\r\n\r\nhi").await?;
        conn.quit().await;
        let deliveries = sink.deliveries().await;
        assert_eq!(deliveries.len(), 3);
        assert_eq!(deliveries[0].rcpt_to, "reader@example.com");
        assert_eq!(deliveries[0].message_id.as_deref(), Some("x1@herald.test"));
        assert_eq!(deliveries[1].message_id, None);
        assert_eq!(deliveries[2].rcpt_to, "j\u{fc}rgen@example.com");
        Ok(())
    }

    #[tokio::test]
    async fn smtp_client_refuses_command_injection_before_sending() -> anyhow::Result<()> {
        let (sink, server) = sink().await?;
        let mut conn = connect(&server).await?;
        for (from, to) in [
            (FROM, "a@example.com\r\nRCPT TO:<b@example.com>"),
            (FROM, "a@example.com>\nDATA"),
            ("x@y.z\rRSET", "a@example.com"),
            (FROM, "a@exam\u{0}ple.com"),
            (FROM, "no-at-sign"),
        ] {
            let e = conn.send(from, to, b"Subject: x\r\n\r\nx").await.err();
            let e = e.ok_or_else(|| anyhow::anyhow!("{to:?} was sent"))?;
            assert_eq!(e.kind, SmtpErrorKind::Permanent, "{e}");
            assert!(!e.maybe_delivered());
        }
        // Nothing went out, so the connection is still good.
        assert!(conn.is_usable());
        conn.send(FROM, "a@example.com", b"Subject: x\r\n\r\nx").await?;
        assert_eq!(sink.accepted_count(), 1);
        assert_eq!(sink.deliveries().await.len(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn smtp_errors_are_classified_by_stage() -> anyhow::Result<()> {
        let (sink, server) = sink().await?;
        sink.set_faults(
            Faults::rule("busy", FaultAction::mailbox_busy())
                .with_rule(FaultRule::new("unknown", FaultAction::user_unknown()))
                .with_rule(FaultRule::new("policy", FaultAction::RejectRcpt("550 5.7.1 Relaying denied".into())))
                .with_rule(FaultRule::new("later", FaultAction::try_again_later()))
                .with_rule(FaultRule::new("content", FaultAction::RejectData("554 5.6.0 Content rejected".into())))
                .with_rule(FaultRule::new("midway", FaultAction::DropMidData))
                .with_rule(FaultRule::new("ambiguous", FaultAction::DropAfterData)),
        );

        let e = fails(&server, "busy@example.com").await?;
        assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Transient, Some(450), SmtpStage::RcptTo), "{e}");
        assert_eq!(e.to_string(), "RCPT TO: 450 4.2.1 Mailbox busy");

        let e = fails(&server, "Unknown@example.com").await?;
        assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::HardBounce, Some(550), SmtpStage::RcptTo), "{e}");
        assert!(e.message.contains("5.1.1 User unknown"), "{e}");

        let e = fails(&server, "policy@example.com").await?;
        assert_eq!((e.kind, e.code), (SmtpErrorKind::Permanent, Some(550)), "{e}");

        let e = fails(&server, "later@example.com").await?;
        assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Transient, Some(451), SmtpStage::Data), "{e}");
        assert!(!e.maybe_delivered());

        let e = fails(&server, "content@example.com").await?;
        assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Permanent, Some(554), SmtpStage::Data), "{e}");

        // The sink hangs up in the middle of the data. For a small message the client has
        // usually written everything already, so it cannot tell this from a drop after the data.
        let e = fails(&server, "midway@example.com").await?;
        assert_eq!((e.kind, e.code), (SmtpErrorKind::Transient, None), "{e}");
        assert!(matches!(e.stage, SmtpStage::Data | SmtpStage::AfterData), "{e}");

        // Stored, then hung up without the 250: ambiguous.
        let e = fails(&server, "ambiguous@example.com").await?;
        assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Transient, None, SmtpStage::AfterData), "{e}");
        assert!(e.maybe_delivered(), "{e}");

        assert_eq!(sink.faults_injected(), 7);
        let delivered: Vec<String> = sink.deliveries().await.into_iter().map(|d| d.rcpt_to).collect();
        assert_eq!(delivered, ["ambiguous@example.com"]);

        // A connection that failed is refused at once, without bytes on the wire.
        let mut conn = connect(&server).await?;
        assert!(conn.send(FROM, "busy@example.com", b"x").await.is_err());
        assert!(!conn.is_usable());
        let e = conn.send(FROM, "fine@example.com", b"x").await.err();
        assert!(e.is_some_and(|e| e.kind == SmtpErrorKind::Transient && !e.maybe_delivered()));
        assert_eq!(sink.accepted_count(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn smtp_connection_errors_are_transient() -> anyhow::Result<()> {
        // Nothing listens on a port we just freed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let server = SmtpServer::parse(&format!("smtp://127.0.0.1:{port}"))?;
        let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
        let e = e.ok_or_else(|| anyhow::anyhow!("connected to a closed port"))?;
        assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");

        // A server that accepts and never says anything: the connect timeout.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let server = SmtpServer::parse(&format!("smtp://{}", silent.local_addr()?))?;
        let e = SmtpConnection::connect(&server, Duration::from_millis(300)).await.err();
        let e = e.ok_or_else(|| anyhow::anyhow!("connected to a silent server"))?;
        assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");

        // STARTTLS required but not offered (the sink has no TLS).
        let (_sink, addr) = MailSink::start("127.0.0.1:0").await?;
        let server = SmtpServer::parse(&format!("smtp://{addr}?tls=required"))?;
        let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
        assert!(e.is_some_and(|e| e.stage == SmtpStage::Connect && e.message.contains("STARTTLS")));
        // Opportunistic: falls back to plain text.
        let server = SmtpServer::parse(&format!("smtp://{addr}?tls=opportunistic"))?;
        let mut conn = connect(&server).await?;
        conn.send(FROM, "plain@example.com", b"Subject: x\r\n\r\nx").await?;
        // Credentials in the URL: the sink takes any.
        let server = SmtpServer::parse(&format!("smtp://user:secret@{addr}"))?;
        let mut conn = connect(&server).await?;
        conn.send(FROM, "authed@example.com", b"Subject: x\r\n\r\nx").await?;
        // Implicit TLS to a plain-text server: the handshake fails, transiently.
        let server = SmtpServer::parse(&format!("smtps://{addr}"))?;
        let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
        let e = e.ok_or_else(|| anyhow::anyhow!("TLS to a plain server worked"))?;
        assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");
        assert!(e.message.contains("TLS"), "{e}");
        Ok(())
    }

    /// A server that offers STARTTLS, says go ahead, then sends plain text where TLS should be.
    async fn fake_starttls_server() -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<Vec<String>>)> {
        use tokio::io::AsyncBufReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            let Ok((stream, _)) = listener.accept().await else { return seen };
            let (read, mut write) = stream.into_split();
            let mut read = tokio::io::BufReader::new(read);
            let _ = write.write_all(b"220-fake.test ESMTP\r\n220 second banner line\r\n").await;
            let mut line = String::new();
            while read.read_line(&mut line).await.unwrap_or(0) > 0 {
                seen.push(line.trim_end().to_string());
                let reply: &[u8] = if line.starts_with("EHLO") {
                    b"250-fake.test\r\n250-PIPELINING\r\n250 STARTTLS\r\n"
                } else if line.starts_with("STARTTLS") {
                    b"220 2.0.0 go ahead\r\nthis is not TLS\r\n"
                } else {
                    b"500 what\r\n"
                };
                let starttls = line.starts_with("STARTTLS");
                line.clear();
                if write.write_all(reply).await.is_err() || starttls {
                    break;
                }
            }
            // Let the client read the garbage before the hang-up.
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen
        });
        Ok((addr, task))
    }

    /// A server that answers RCPT TO after `rcpt_delay`, and records whether the end of a
    /// message's data ever reached it.
    async fn slow_rcpt_server(rcpt_delay: Duration) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<bool>)> {
        use tokio::io::AsyncBufReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let Ok((stream, _)) = listener.accept().await else { return false };
            let (read, mut write) = stream.into_split();
            let mut read = tokio::io::BufReader::new(read);
            let _ = write.write_all(b"220 slow.test ESMTP\r\n").await;
            let (mut line, mut in_data) = (String::new(), false);
            while read.read_line(&mut line).await.unwrap_or(0) > 0 {
                let reply: &[u8] = if in_data {
                    if line == ".\r\n" {
                        return true;
                    }
                    b""
                } else if line.starts_with("EHLO") {
                    b"250-slow.test\r\n250 8BITMIME\r\n"
                } else if line.starts_with("RCPT") {
                    tokio::time::sleep(rcpt_delay).await;
                    b"250 2.1.5 OK\r\n"
                } else if line.starts_with("DATA") {
                    in_data = true;
                    b"354 go ahead\r\n"
                } else {
                    b"250 2.0.0 OK\r\n"
                };
                line.clear();
                if write.write_all(reply).await.is_err() {
                    break;
                }
            }
            false
        });
        Ok((addr, task))
    }

    /// A server that offers PIPELINING and answers nothing of a transaction until MAIL FROM,
    /// RCPT TO and DATA have all arrived: a client that waits for each reply stalls against it.
    /// Returns the number of reads the three commands took.
    async fn pipelining_server() -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<anyhow::Result<usize>>)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await?;
            stream.write_all(b"220 pipe.test ESMTP\r\n").await?;
            let mut seen = Vec::new();
            async fn read(seen: &mut Vec<u8>, stream: &mut tokio::net::TcpStream) -> anyhow::Result<()> {
                let mut buf = [0u8; 4096];
                let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await??;
                anyhow::ensure!(n > 0, "the client hung up");
                seen.extend_from_slice(&buf[..n]);
                Ok(())
            }
            while !seen.ends_with(b"\r\n") {
                read(&mut seen, &mut stream).await?;
            }
            stream.write_all(b"250-pipe.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n").await?;
            seen.clear();
            let mut reads = 0;
            while !String::from_utf8_lossy(&seen).contains("DATA\r\n") {
                read(&mut seen, &mut stream).await?;
                reads += 1;
            }
            let text = String::from_utf8_lossy(&seen).to_string();
            anyhow::ensure!(text.starts_with("MAIL FROM:") && text.contains("RCPT TO:"), "got {text:?}");
            stream.write_all(b"250 2.1.0 OK\r\n250 2.1.5 OK\r\n354 go ahead\r\n").await?;
            seen.clear();
            while !seen.ends_with(b"\r\n.\r\n") {
                read(&mut seen, &mut stream).await?;
            }
            stream.write_all(b"250 2.0.0 OK queued as 7\r\n").await?;
            Ok(reads)
        });
        Ok((addr, task))
    }

    #[tokio::test]
    async fn smtp_pipelines_the_envelope_when_the_server_offers_it() -> anyhow::Result<()> {
        let (addr, server) = pipelining_server().await?;
        let mut conn = connect(&SmtpServer::parse(&format!("smtp://{addr}"))?).await?;
        let reply = tokio::time::timeout(
            Duration::from_secs(5),
            conn.send("a@herald.test", "b@example.com", &message(1, "b@example.com")),
        )
        .await
        .map_err(|_| anyhow::anyhow!("the client waited for a reply to each command"))??;
        assert!(reply.contains("queued as 7"), "{reply}");
        // MAIL FROM, RCPT TO and DATA went out in one write (one read on loopback).
        assert_eq!(server.await??, 1);
        Ok(())
    }

    #[tokio::test]
    async fn a_closed_fence_stops_a_transaction_before_the_end_of_its_data() -> anyhow::Result<()> {
        // The fence closes while the server sits on RCPT TO: the client gives up at once, and
        // the server never sees the end of the data (the message cannot have been delivered).
        let (addr, server) = slow_rcpt_server(Duration::from_millis(1_500)).await?;
        let mut conn = connect(&SmtpServer::parse(&format!("smtp://{addr}"))?).await?;
        let fence = Fence::until(Instant::now() + Duration::from_millis(300));
        let started = Instant::now();
        let e = conn.send_fenced("a@herald.test", "b@example.com", &message(1, "b@example.com"), &fence).await;
        let e = e.err().ok_or_else(|| anyhow::anyhow!("the fenced send went through"))?;
        assert_eq!(e.kind, SmtpErrorKind::Fenced, "{e}");
        assert!(!e.maybe_delivered());
        assert!(started.elapsed() < Duration::from_millis(1_000), "it waited for the server: {:?}", started.elapsed());
        drop(conn);
        assert!(!server.await?, "the end of the data reached the server");
        // A fence already closed sends nothing at all.
        let (sink, server) = sink().await?;
        let mut conn = connect(&server).await?;
        let closed = Fence::until(Instant::now());
        let e = conn.send_fenced("a@herald.test", "c@example.com", &message(2, "c@example.com"), &closed).await;
        assert_eq!(e.err().map(|e| e.kind), Some(SmtpErrorKind::Fenced));
        assert_eq!(sink.accepted_count(), 0);
        Ok(())
    }

    #[tokio::test]
    async fn a_fence_closing_after_the_end_of_the_data_still_waits_for_the_reply() -> anyhow::Result<()> {
        // The data is complete when the fence closes; the server may already have the message,
        // so the client waits for its reply rather than pretending nothing happened.
        let (sink, server) = sink().await?;
        sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(600)));
        let mut conn = connect(&server).await?;
        let fence = Fence::until(Instant::now() + Duration::from_millis(200));
        let reply = conn.send_fenced("a@herald.test", "d@example.com", &message(3, "d@example.com"), &fence).await?;
        assert!(reply.contains("queued"), "{reply}");
        assert_eq!(sink.accepted_count(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn smtp_starttls_is_negotiated_before_tls() -> anyhow::Result<()> {
        for mode in ["required", "opportunistic"] {
            let (addr, task) = fake_starttls_server().await?;
            let server = SmtpServer::parse(&format!("smtp://{addr}/client.herald.test?tls={mode}"))?;
            let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
            let e = e.ok_or_else(|| anyhow::anyhow!("a TLS session with a plain-text server"))?;
            assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");
            assert!(e.message.contains("TLS handshake"), "{e}");
            assert_eq!(task.await?, ["EHLO client.herald.test", "STARTTLS"]);
        }
        Ok(())
    }

    #[tokio::test]
    async fn smtp_faults_can_fire_once_then_let_through() -> anyhow::Result<()> {
        let (sink, server) = sink().await?;
        sink.set_faults(Faults::none().with_rule(FaultRule::new("flaky", FaultAction::try_again_later()).times(1)));
        let e = fails(&server, "flaky@example.com").await?;
        assert_eq!(e.code, Some(451));
        let mut conn = connect(&server).await?;
        conn.send(FROM, "flaky@example.com", &message(1, "flaky@example.com")).await?;
        // Random faults: all, none, some.
        sink.set_faults(Faults::random(1.0, FaultAction::mailbox_busy()));
        assert_eq!(fails(&server, "any@example.com").await?.code, Some(450));
        sink.set_faults(Faults::random(0.0, FaultAction::mailbox_busy()));
        conn.send(FROM, "any@example.com", &message(2, "any@example.com")).await?;
        sink.set_faults(Faults::random(0.5, FaultAction::try_again_later()));
        let (mut ok, mut failed) = (0, 0);
        for n in 0..100 {
            match conn.send(FROM, "r@example.com", &message(n, "r@example.com")).await {
                Ok(_) => ok += 1,
                Err(e) => {
                    assert_eq!(e.code, Some(451), "{e}");
                    failed += 1;
                    conn = connect(&server).await?;
                }
            }
        }
        assert!(ok > 0 && failed > 0, "{ok} sent, {failed} failed");
        assert_eq!(sink.accepted_count(), 2 + ok);
        Ok(())
    }

    #[tokio::test]
    async fn smtp_client_sends_200_messages_over_one_connection() -> anyhow::Result<()> {
        let (sink, server) = sink().await?;
        let mut conn = connect(&server).await?;
        let started = Instant::now();
        for n in 0..200 {
            let to = format!("reader{n}@example.com");
            conn.send(FROM, &to, &message(n, &to)).await?;
        }
        let elapsed = started.elapsed();
        conn.quit().await;
        assert!(sink.wait_for_count(200, Duration::from_secs(5)).await);
        let deliveries = sink.deliveries().await;
        assert_eq!(deliveries.len(), 200);
        let ids: std::collections::HashSet<_> = deliveries.iter().filter_map(|d| d.message_id.clone()).collect();
        assert_eq!(ids.len(), 200);
        assert!(ids.contains("199.blast@herald.test"));
        eprintln!("one connection: 200 messages in {elapsed:?} ({:.0}/s)", 200.0 / elapsed.as_secs_f64());
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn smtp_blast_delivers_every_message() -> anyhow::Result<()> {
        let (sink, server) = sink().await?;
        let raw = message(0, "blast@example.com");
        let report = blast(&server, 16, 2000, FROM, "blast@example.com", &raw).await?;
        assert_eq!(report.messages, 2000);
        assert_eq!(sink.accepted_count(), 2000);
        // The ring keeps the last 2000 in full; the record keeps everything.
        assert_eq!(sink.messages().await.len(), 2000);
        let more = blast(&server, 4, 100, FROM, "blast@example.com", &raw).await?;
        assert_eq!(more.messages, 100);
        assert_eq!(sink.messages().await.len(), MailSink::CAPACITY);
        assert_eq!(sink.deliveries().await.len(), 2100);
        eprintln!(
            "blast: {} messages of {} bytes over {} connections in {:?} ({:.0}/s)",
            report.messages,
            raw.len(),
            report.connections,
            report.elapsed,
            report.per_second
        );
        Ok(())
    }

    /// `cargo test -p herald-engine smtp_blast_benchmark -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a benchmark: run by hand"]
    async fn smtp_blast_benchmark() -> anyhow::Result<()> {
        let (sink, server) = sink().await?;
        let raw = message(0, "blast@example.com");
        for (connections, messages) in [(1, 5_000), (4, 20_000), (16, 50_000)] {
            sink.clear().await;
            let r = blast(&server, connections, messages, FROM, "blast@example.com", &raw).await?;
            assert_eq!(sink.accepted_count(), messages as u64);
            eprintln!("{connections:>2} connections: {messages} messages in {:?}: {:.0}/s", r.elapsed, r.per_second);
        }
        Ok(())
    }
}
