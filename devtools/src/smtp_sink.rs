//! The dev mail catcher: a small SMTP server that keeps what it receives in memory.
//!
//! `herald serve` runs it in dev mode (shown at `/dev/inbox`), and the tests use it as the real
//! SMTP peer the project owns: mail goes out through lettre over TCP and lands here.
//!
//! It is also the load-test sink (`herald dev smtp-sink`): besides the last
//! [`CAPACITY`](MailSink::CAPACITY) messages in full, it keeps a record of every message it
//! accepted ([`MailSink::deliveries`], recipient and Message-ID, never truncated), and it can
//! misbehave on purpose ([`MailSink::set_faults`]): refuse recipients, refuse messages, drop the
//! connection in the middle of the data or after accepting it, slow down.

use chrono::{DateTime, Utc};
use rand::Rng;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, RwLock};

const MAX_MESSAGE_BYTES: usize = 25 * 1024 * 1024;
const MAX_LINE_BYTES: usize = 64 * 1024;

#[derive(Clone, Debug)]
pub struct CaughtMail {
    pub id: u64,
    pub received_at: DateTime<Utc>,
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    pub raw: Vec<u8>,
}

/// The parts of a caught message worth showing.
#[derive(Clone, Debug, Default)]
pub struct ParsedMail {
    pub subject: String,
    pub from: String,
    pub to: String,
    pub html: Option<String>,
    pub text: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl CaughtMail {
    pub fn parse(&self) -> ParsedMail {
        let Some(msg) = mail_parser::MessageParser::default().parse(&self.raw) else {
            return ParsedMail { text: Some(String::from_utf8_lossy(&self.raw).into_owned()), ..Default::default() };
        };
        let addr = |a: Option<&mail_parser::Address>| {
            a.map(|a| a.iter().filter_map(|x| x.address().map(str::to_string)).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        };
        ParsedMail {
            subject: msg.subject().unwrap_or_default().to_string(),
            from: addr(msg.from()),
            to: addr(msg.to()),
            html: msg.body_html(0).map(|s| s.into_owned()),
            text: msg.body_text(0).map(|s| s.into_owned()),
            headers: msg.headers_raw().map(|(name, value)| (name.to_string(), value.trim().to_string())).collect(),
        }
    }
}

/// One accepted message for one recipient (a message to several recipients is several records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The message's sequence id (as in [`CaughtMail::id`] and the `250 ... queued as` reply).
    pub id: u64,
    /// The RCPT TO address, lowercased.
    pub rcpt_to: String,
    /// The Message-ID header's value without the angle brackets, if the message has one.
    pub message_id: Option<String>,
    /// When the server replied 250 (or, for a fault that keeps the message, gave up replying).
    pub received_at: DateTime<Utc>,
    /// When the end of the message's data arrived: the last moment its sender could have held it
    /// back. A slow server's 250 can come much later ([`Faults::with_random_reply_delay`]).
    pub data_end_at: DateTime<Utc>,
}

/// What a fault does to a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// Reply to RCPT TO with this line (e.g. `550 5.1.1 User unknown`): the recipient is refused.
    RejectRcpt(String),
    /// Read the whole message, then reply with this line instead of 250 (e.g. `451 4.3.0 Try
    /// again later`). The message is not kept.
    RejectData(String),
    /// Read part of the message, then close the connection without a reply. Not kept.
    DropMidData,
    /// Keep the message as accepted, then close the connection without sending the 250: the
    /// client cannot know it was delivered (an ambiguous delivery).
    DropAfterData,
}

impl FaultAction {
    /// `450 4.2.1 Mailbox busy` at RCPT TO.
    pub fn mailbox_busy() -> Self {
        Self::RejectRcpt("450 4.2.1 Mailbox busy".into())
    }

    /// `550 5.1.1 User unknown` at RCPT TO: a hard bounce.
    pub fn user_unknown() -> Self {
        Self::RejectRcpt("550 5.1.1 User unknown".into())
    }

    /// `451 4.3.0 Try again later` after the data.
    pub fn try_again_later() -> Self {
        Self::RejectData("451 4.3.0 Try again later".into())
    }

    fn reply(&self) -> Option<&str> {
        match self {
            Self::RejectRcpt(r) | Self::RejectData(r) => Some(r),
            Self::DropMidData | Self::DropAfterData => None,
        }
    }
}

/// A fault for recipients containing `pattern` (case-insensitive; empty matches everyone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    pub pattern: String,
    pub action: FaultAction,
    /// Fire only for the first N matching recipients (counted at RCPT TO), then let them through:
    /// "fail the first attempt, then succeed".
    pub times: Option<u32>,
}

impl FaultRule {
    pub fn new(pattern: impl Into<String>, action: FaultAction) -> Self {
        Self { pattern: pattern.into(), action, times: None }
    }

    /// Only the first `n` times.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }
}

/// A fault for a random fraction `rate` (0 to 1) of the messages that no rule caught.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomFault {
    pub rate: f64,
    pub action: FaultAction,
}

/// How the sink misbehaves. Rules are tried in order, the first match wins; the random fault
/// applies to messages no rule matched. The default is a well-behaved sink.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    pub rules: Vec<FaultRule>,
    /// A mix of random faults: each message draws once, and falls into at most one of them
    /// (their rates add up; the rest pass).
    pub random: Vec<RandomFault>,
    /// Wait this long before replying to each message's data (a slow server).
    pub reply_delay: Option<Duration>,
    /// Plus a uniformly random extra wait up to this long (a server whose speed varies).
    pub reply_delay_max: Option<Duration>,
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// Recipients containing `pattern` get `action`.
    pub fn rule(pattern: impl Into<String>, action: FaultAction) -> Self {
        Self::default().with_rule(FaultRule::new(pattern, action))
    }

    /// A fraction `rate` of the messages get `action`.
    pub fn random(rate: f64, action: FaultAction) -> Self {
        Self::default().with_random(rate, action)
    }

    pub fn with_rule(mut self, rule: FaultRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Adds a random fault to the mix.
    pub fn with_random(mut self, rate: f64, action: FaultAction) -> Self {
        self.random.push(RandomFault { rate, action });
        self
    }

    /// Each reply to a message's data waits a random time up to `max` (on top of `reply_delay`).
    pub fn with_random_reply_delay(mut self, max: Duration) -> Self {
        self.reply_delay_max = Some(max);
        self
    }

    pub fn with_reply_delay(mut self, delay: Duration) -> Self {
        self.reply_delay = Some(delay);
        self
    }

    /// Checks the rate and that every reply is a single 4xx or 5xx line.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(r) = self.random.iter().find(|r| !(0.0..=1.0).contains(&r.rate)) {
            return Err(format!("the failure rate must be between 0 and 1, not {}", r.rate));
        }
        let total: f64 = self.random.iter().map(|r| r.rate).sum();
        if total > 1.0 {
            return Err(format!("the random failure rates add up to {total}, more than 1"));
        }
        let actions = self.rules.iter().map(|r| &r.action).chain(self.random.iter().map(|r| &r.action));
        for reply in actions.filter_map(FaultAction::reply) {
            let b = reply.as_bytes();
            let coded = b.len() >= 3 && matches!(b[0], b'4' | b'5') && b[1..3].iter().all(u8::is_ascii_digit);
            if !coded || b.get(3).is_some_and(|&c| c != b' ') || reply.chars().any(char::is_control) {
                return Err(format!("`{reply}` is not an SMTP error reply like `451 4.3.0 Try again later`"));
            }
        }
        Ok(())
    }
}

/// The faults in force, with how often each rule has fired.
#[derive(Debug, Default)]
struct ActiveFaults {
    faults: Faults,
    fired: Vec<AtomicU32>,
}

impl ActiveFaults {
    fn new(mut faults: Faults) -> Self {
        for rule in &mut faults.rules {
            rule.pattern = rule.pattern.to_lowercase();
        }
        let fired = faults.rules.iter().map(|_| AtomicU32::new(0)).collect();
        Self { faults, fired }
    }

    fn is_empty(&self) -> bool {
        self.faults.rules.is_empty() && self.faults.random.is_empty()
    }

    /// The fault for this recipient (lowercased), if any; counts it.
    fn pick(&self, rcpt: &str) -> Option<FaultAction> {
        for (rule, fired) in self.faults.rules.iter().zip(&self.fired) {
            if !rcpt.contains(&rule.pattern) {
                continue;
            }
            if let Some(max) = rule.times
                && fired.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).is_err()
            {
                continue;
            }
            return Some(rule.action.clone());
        }
        let mut draw = rand::thread_rng().r#gen::<f64>();
        for random in &self.faults.random {
            if draw < random.rate {
                return Some(random.action.clone());
            }
            draw -= random.rate;
        }
        None
    }
}

#[derive(Debug, Default)]
struct Inner {
    messages: RwLock<VecDeque<CaughtMail>>,
    next_id: AtomicU64,
    arrived: Notify,
    /// Every accepted message since the start (or [`MailSink::clear`]).
    deliveries: Mutex<Vec<Delivery>>,
    accepted: AtomicU64,
    faults: std::sync::RwLock<Arc<ActiveFaults>>,
    faults_injected: AtomicU64,
}

/// A message's state between MAIL FROM and the end of DATA.
#[derive(Default)]
struct Transaction {
    mail_from: String,
    rcpt_to: Vec<String>,
    /// A fault chosen at RCPT TO that acts on the data.
    fault: Option<FaultAction>,
}

#[derive(Clone, Debug, Default)]
pub struct MailSink {
    inner: Arc<Inner>,
}

impl MailSink {
    /// How many messages are kept; older ones are dropped first.
    pub const CAPACITY: usize = 2000;

    /// Listens on `addr` (port 0 picks one) and serves SMTP until the process ends.
    pub async fn start(addr: &str) -> std::io::Result<(Self, SocketAddr)> {
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let sink = Self::default();
        let accept_sink = sink.clone();
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let sink = accept_sink.clone();
                        tokio::spawn(async move {
                            if let Err(e) = sink.serve(stream).await {
                                tracing::debug!(error = %e, "dev mail catcher connection ended");
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "dev mail catcher accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok((sink, local))
    }

    /// Newest first.
    pub async fn messages(&self) -> Vec<CaughtMail> {
        self.inner.messages.read().await.iter().rev().cloned().collect()
    }

    pub async fn get(&self, id: u64) -> Option<CaughtMail> {
        self.inner.messages.read().await.iter().find(|m| m.id == id).cloned()
    }

    /// Forgets the kept messages and the delivery record ([`accepted_count`](Self::accepted_count)
    /// starts again from 0; ids keep growing).
    pub async fn clear(&self) {
        self.inner.messages.write().await.clear();
        let mut deliveries = self.inner.deliveries.lock().unwrap_or_else(PoisonError::into_inner);
        deliveries.clear();
        self.inner.accepted.store(0, Ordering::SeqCst);
    }

    /// Forgets one message as if it had never arrived (its deliveries and its count too): for
    /// tests that set up accounts, whose sign-up mail is not what they count.
    pub async fn discard(&self, id: u64) {
        let mut messages = self.inner.messages.write().await;
        let before = messages.len();
        messages.retain(|m| m.id != id);
        let mut deliveries = self.inner.deliveries.lock().unwrap_or_else(PoisonError::into_inner);
        deliveries.retain(|d| d.id != id);
        if messages.len() < before {
            self.inner.accepted.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Every message accepted since the start (or `clear`), one record a recipient, oldest first.
    /// Unlike [`messages`](Self::messages), never truncated.
    pub async fn deliveries(&self) -> Vec<Delivery> {
        self.inner.deliveries.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Messages accepted since the start (or `clear`), including those dropped after the data
    /// ([`FaultAction::DropAfterData`]).
    pub fn accepted_count(&self) -> u64 {
        self.inner.accepted.load(Ordering::SeqCst)
    }

    /// Waits up to `timeout` until [`accepted_count`](Self::accepted_count) reaches `n`.
    pub async fn wait_for_count(&self, n: u64, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.arrived.notified();
            if self.accepted_count() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.accepted_count() >= n;
            }
        }
    }

    /// Replaces the faults, effective for the next command of every connection.
    pub fn set_faults(&self, faults: Faults) {
        let active = Arc::new(ActiveFaults::new(faults));
        *self.inner.faults.write().unwrap_or_else(PoisonError::into_inner) = active;
    }

    /// How many faults fired (refused recipients, refused or dropped messages).
    pub fn faults_injected(&self) -> u64 {
        self.inner.faults_injected.load(Ordering::SeqCst)
    }

    fn faults(&self) -> Arc<ActiveFaults> {
        self.inner.faults.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn count_fault(&self) {
        self.inner.faults_injected.fetch_add(1, Ordering::Relaxed);
    }

    /// Waits up to `timeout` for a message addressed to `rcpt` (case-insensitive).
    pub async fn wait_for_recipient(&self, rcpt: &str, timeout: Duration) -> Option<CaughtMail> {
        let rcpt = rcpt.to_lowercase();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.arrived.notified();
            if let Some(m) = self
                .inner
                .messages
                .read()
                .await
                .iter()
                .rev()
                .find(|m| m.rcpt_to.iter().any(|r| r.to_lowercase() == rcpt))
            {
                return Some(m.clone());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    async fn store(&self, mail_from: String, rcpt_to: Vec<String>, raw: Vec<u8>, data_end_at: DateTime<Utc>) -> u64 {
        let id = self.inner.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let received_at = Utc::now();
        let message_id = message_id(&raw);
        let mut messages = self.inner.messages.write().await;
        if messages.len() >= Self::CAPACITY {
            messages.pop_front();
        }
        {
            let mut deliveries = self.inner.deliveries.lock().unwrap_or_else(PoisonError::into_inner);
            for rcpt in &rcpt_to {
                let rcpt_to = rcpt.to_lowercase();
                deliveries.push(Delivery { id, rcpt_to, message_id: message_id.clone(), received_at, data_end_at });
            }
            self.inner.accepted.fetch_add(1, Ordering::SeqCst);
        }
        messages.push_back(CaughtMail { id, received_at, mail_from, rcpt_to, raw });
        drop(messages);
        self.inner.arrived.notify_waiters();
        id
    }

    async fn serve(&self, stream: TcpStream) -> std::io::Result<()> {
        stream.set_nodelay(true)?;
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        write.write_all(b"220 herald-dev-catcher ESMTP ready\r\n").await?;
        let mut tx = Transaction::default();
        let mut line = Vec::new();
        let mut owned_reply;
        // Replies wait here while the client's pipelined commands (RFC 2920) are still being
        // read, and go out in one write once nothing more is buffered.
        let mut out: Vec<u8> = Vec::with_capacity(256);
        macro_rules! reply {
            ($bytes:expr) => {{
                out.extend_from_slice($bytes);
                if read.buffer().is_empty() {
                    write.write_all(&out).await?;
                    out.clear();
                }
            }};
        }
        loop {
            line.clear();
            if read_line(&mut read, &mut line).await? == 0 {
                return Ok(());
            }
            let text = String::from_utf8_lossy(&line);
            let cmd = text.trim_end();
            let verb = cmd.chars().take(10).collect::<String>().to_ascii_uppercase();
            let reply: &[u8] = if verb.starts_with("EHLO") {
                b"250-herald-dev-catcher\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250-AUTH PLAIN LOGIN\r\n250 SIZE 26214400\r\n"
            } else if verb.starts_with("HELO") {
                b"250 herald-dev-catcher\r\n"
            } else if verb.starts_with("AUTH") {
                // Any credentials are accepted: this is a sink for development and tests.
                b"235 2.7.0 Authentication succeeded\r\n"
            } else if verb.starts_with("MAIL FROM:") {
                tx = Transaction { mail_from: angle_addr(&cmd[10..]), ..Transaction::default() };
                b"250 2.1.0 OK\r\n"
            } else if verb.starts_with("RCPT TO:") {
                let rcpt = angle_addr(&cmd[8..]);
                let faults = self.faults();
                let fault = if faults.is_empty() { None } else { faults.pick(&rcpt.to_lowercase()) };
                match fault {
                    Some(FaultAction::RejectRcpt(r)) => {
                        self.count_fault();
                        owned_reply = format!("{}\r\n", r.trim());
                        owned_reply.as_bytes()
                    }
                    Some(data_fault) => {
                        tx.fault.get_or_insert(data_fault);
                        tx.rcpt_to.push(rcpt);
                        b"250 2.1.5 OK\r\n"
                    }
                    None => {
                        tx.rcpt_to.push(rcpt);
                        b"250 2.1.5 OK\r\n"
                    }
                }
            } else if verb == "DATA" {
                if tx.rcpt_to.is_empty() {
                    b"503 5.5.1 RCPT first\r\n"
                } else {
                    reply!(b"354 End data with <CR><LF>.<CR><LF>\r\n");
                    let tx = std::mem::take(&mut tx);
                    if tx.fault == Some(FaultAction::DropMidData) {
                        self.count_fault();
                        read_some_data(&mut read, 1024).await?;
                        return Ok(());
                    }
                    let raw = read_data(&mut read).await?;
                    let data_end_at = Utc::now();
                    let Some(raw) = raw else {
                        reply!(b"552 5.3.4 Message too big\r\n");
                        continue;
                    };
                    let faults = self.faults();
                    let extra = faults.faults.reply_delay_max.map(|max| max.mul_f64(rand::random::<f64>()));
                    let delay = faults.faults.reply_delay.unwrap_or_default() + extra.unwrap_or_default();
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    match tx.fault {
                        Some(FaultAction::RejectData(r)) => {
                            self.count_fault();
                            reply!(format!("{}\r\n", r.trim()).as_bytes());
                        }
                        Some(FaultAction::DropAfterData) => {
                            self.count_fault();
                            self.store(tx.mail_from, tx.rcpt_to, raw, data_end_at).await;
                            return Ok(());
                        }
                        _ => {
                            let id = self.store(tx.mail_from, tx.rcpt_to, raw, data_end_at).await;
                            reply!(format!("250 2.0.0 OK queued as {id}\r\n").as_bytes());
                        }
                    }
                    continue;
                }
            } else if verb == "RSET" {
                tx = Transaction::default();
                b"250 2.0.0 OK\r\n"
            } else if verb == "NOOP" {
                b"250 2.0.0 OK\r\n"
            } else if verb == "QUIT" {
                out.extend_from_slice(b"221 2.0.0 Bye\r\n");
                write.write_all(&out).await?;
                return Ok(());
            } else {
                b"502 5.5.2 Command not implemented\r\n"
            };
            reply!(reply);
        }
    }
}

async fn read_line<R: AsyncBufReadExt + Unpin>(read: &mut R, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let n = read.read_until(b'\n', buf).await?;
    if buf.len() > MAX_LINE_BYTES {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "line too long"));
    }
    Ok(n)
}

/// Reads a DATA section up to the lone "." line, undoing dot-stuffing. `None` when too big
/// (the rest is still consumed so the session stays in sync).
async fn read_data<R: AsyncBufReadExt + Unpin>(read: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut raw = Vec::new();
    let mut too_big = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        if read.read_until(b'\n', &mut line).await? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "eof in DATA"));
        }
        if line == b".\r\n" || line == b".\n" {
            return Ok(if too_big { None } else { Some(raw) });
        }
        let content = if line.starts_with(b"..") { &line[1..] } else { &line[..] };
        if raw.len() + content.len() > MAX_MESSAGE_BYTES {
            too_big = true;
        } else if !too_big {
            raw.extend_from_slice(content);
        }
    }
}

/// Reads at least `at_least` bytes of a DATA section (or all of it, if shorter).
async fn read_some_data<R: AsyncBufReadExt + Unpin>(read: &mut R, at_least: usize) -> std::io::Result<()> {
    let mut seen = 0;
    let mut line = Vec::new();
    while seen < at_least {
        line.clear();
        if read.read_until(b'\n', &mut line).await? == 0 || line == b".\r\n" || line == b".\n" {
            break;
        }
        seen += line.len();
    }
    Ok(())
}

/// The Message-ID header's value, without angle brackets: a scan of the header lines only.
fn message_id(raw: &[u8]) -> Option<String> {
    const NAME: &[u8] = b"message-id:";
    let mut value: Option<Vec<u8>> = None;
    for line in raw.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(v) = &mut value {
            // A folded header continues on lines starting with white space.
            if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
                v.extend_from_slice(line);
                continue;
            }
            break;
        }
        if line.is_empty() {
            break;
        }
        if line.len() >= NAME.len() && line[..NAME.len()].eq_ignore_ascii_case(NAME) {
            value = Some(line[NAME.len()..].to_vec());
        }
    }
    let value = String::from_utf8_lossy(&value?).trim().to_string();
    let value = value.strip_prefix('<').and_then(|v| v.strip_suffix('>')).unwrap_or(&value).trim();
    (!value.is_empty()).then(|| value.to_string())
}

fn angle_addr(s: &str) -> String {
    let s = s.trim();
    let inner = s.strip_prefix('<').and_then(|r| r.split_once('>')).map(|(a, _)| a).unwrap_or(s);
    inner.split_whitespace().next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_engine::sending::mail::{Mailer, OutgoingMail};

    #[tokio::test]
    async fn lettre_delivers_to_the_sink_over_tcp() -> anyhow::Result<()> {
        let (sink, addr) = MailSink::start("127.0.0.1:0").await?;
        let mailer = Mailer::from_url(&format!("smtp://{addr}"), "Herald <noreply@herald.test>")?;
        let mail = OutgoingMail {
            to: "Reader@Example.com".into(),
            subject: "Hello ünïcode".into(),
            html: "<p>Hi <b>there</b></p>\n.\n..dots".into(),
            text: "Hi there\n.\n..dots".into(),
            ..Default::default()
        };
        mailer.send(&mail, None).await?;
        let got = sink.wait_for_recipient("reader@example.com", Duration::from_secs(5)).await;
        let got = got.ok_or_else(|| anyhow::anyhow!("no mail arrived"))?;
        let parsed = got.parse();
        assert_eq!(parsed.subject, "Hello ünïcode");
        assert!(parsed.html.unwrap_or_default().contains("<b>there</b>"));
        assert!(parsed.text.unwrap_or_default().contains("..dots"));
        assert_eq!(got.mail_from, "noreply@herald.test");
        Ok(())
    }

    #[tokio::test]
    async fn header_injection_is_refused_before_smtp() -> anyhow::Result<()> {
        let (_sink, addr) = MailSink::start("127.0.0.1:0").await?;
        let mailer = Mailer::from_url(&format!("smtp://{addr}"), "noreply@herald.test")?;
        let mut mail = OutgoingMail {
            to: "a@example.com".into(),
            subject: "x\r\nBcc: b@example.com".into(),
            html: String::new(),
            text: String::new(),
            ..Default::default()
        };
        assert!(mailer.send(&mail, None).await.is_err());
        mail.subject = "ok".into();
        mail.to = "a@example.com\r\nRCPT TO:<b@example.com>".into();
        assert!(mailer.send(&mail, None).await.is_err());
        Ok(())
    }

    #[test]
    fn smtp_sink_finds_the_message_id() {
        assert_eq!(message_id(b"Subject: x\r\nMessage-ID: <a.1@x.test>\r\n\r\nbody").as_deref(), Some("a.1@x.test"));
        assert_eq!(message_id(b"message-id:\r\n  <folded@x.test>\r\nTo: y\r\n\r\n").as_deref(), Some("folded@x.test"));
        assert_eq!(message_id(b"MESSAGE-ID: bare@x.test\n\n").as_deref(), Some("bare@x.test"));
        assert_eq!(message_id(b"Subject: x\r\n\r\nMessage-ID: <in-body@x.test>\r\n"), None);
        assert_eq!(message_id(b"X-Message-ID: <no@x.test>\r\n\r\n"), None);
        assert_eq!(message_id(b""), None);
    }

    #[test]
    fn smtp_sink_faults_are_validated() {
        assert!(Faults::random(0.1, FaultAction::try_again_later()).validate().is_ok());
        assert!(Faults::rule("x", FaultAction::user_unknown()).validate().is_ok());
        assert!(Faults::random(1.5, FaultAction::DropMidData).validate().is_err());
        assert!(Faults::rule("x", FaultAction::RejectRcpt("250 OK".into())).validate().is_err());
        assert!(Faults::rule("x", FaultAction::RejectData("451 a\r\n250 b".into())).validate().is_err());
        assert!(Faults::rule("x", FaultAction::RejectData("45".into())).validate().is_err());
    }

    #[tokio::test]
    async fn smtp_sink_counts_and_clears() -> anyhow::Result<()> {
        let (sink, addr) = MailSink::start("127.0.0.1:0").await?;
        let mailer = Mailer::from_url(&format!("smtp://{addr}"), "noreply@herald.test")?;
        let mail = |to: &str| OutgoingMail {
            to: to.into(),
            subject: "s".into(),
            html: "h".into(),
            text: "t".into(),
            ..Default::default()
        };
        assert!(!sink.wait_for_count(1, Duration::from_millis(50)).await);
        mailer.send(&mail("One@Example.com"), None).await?;
        assert!(sink.wait_for_count(1, Duration::from_secs(5)).await);
        let d = sink.deliveries().await;
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].rcpt_to, "one@example.com");
        sink.clear().await;
        assert_eq!((sink.accepted_count(), sink.deliveries().await.len(), sink.messages().await.len()), (0, 0, 0));
        // Faults change while the sink runs.
        sink.set_faults(Faults::rule("two", FaultAction::user_unknown()));
        assert!(mailer.send(&mail("two@example.com"), None).await.is_err());
        sink.set_faults(Faults::none());
        mailer.send(&mail("two@example.com"), None).await?;
        assert_eq!(sink.accepted_count(), 1);
        assert!(sink.get(d[0].id).await.is_none());
        Ok(())
    }
}
