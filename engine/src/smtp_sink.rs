//! The dev mail catcher: a small SMTP server that keeps what it receives in memory.
//!
//! `herald serve` runs it in dev mode (shown at `/dev/inbox`), and the tests use it as the real
//! SMTP peer the project owns: mail goes out through lettre over TCP and lands here.

use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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

#[derive(Debug, Default)]
struct Inner {
    messages: RwLock<VecDeque<CaughtMail>>,
    next_id: AtomicU64,
    arrived: Notify,
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

    pub async fn clear(&self) {
        self.inner.messages.write().await.clear();
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

    async fn store(&self, mail_from: String, rcpt_to: Vec<String>, raw: Vec<u8>) -> u64 {
        let id = self.inner.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let mut messages = self.inner.messages.write().await;
        if messages.len() >= Self::CAPACITY {
            messages.pop_front();
        }
        messages.push_back(CaughtMail { id, received_at: Utc::now(), mail_from, rcpt_to, raw });
        drop(messages);
        self.inner.arrived.notify_waiters();
        id
    }

    async fn serve(&self, stream: TcpStream) -> std::io::Result<()> {
        stream.set_nodelay(true)?;
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        write.write_all(b"220 herald-dev-catcher ESMTP ready\r\n").await?;
        let mut mail_from = String::new();
        let mut rcpt_to: Vec<String> = Vec::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            if read_line(&mut read, &mut line).await? == 0 {
                return Ok(());
            }
            let text = String::from_utf8_lossy(&line);
            let cmd = text.trim_end();
            let upper = cmd.to_ascii_uppercase();
            let reply: &[u8] = if upper.starts_with("EHLO") {
                b"250-herald-dev-catcher\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250-AUTH PLAIN LOGIN\r\n250 SIZE 26214400\r\n"
            } else if upper.starts_with("HELO") {
                b"250 herald-dev-catcher\r\n"
            } else if upper.starts_with("AUTH") {
                // Any credentials are accepted: this is a sink for development and tests.
                b"235 2.7.0 Authentication succeeded\r\n"
            } else if upper.starts_with("MAIL FROM:") {
                mail_from = angle_addr(&cmd[10..]);
                rcpt_to.clear();
                b"250 2.1.0 OK\r\n"
            } else if upper.starts_with("RCPT TO:") {
                rcpt_to.push(angle_addr(&cmd[8..]));
                b"250 2.1.5 OK\r\n"
            } else if upper == "DATA" {
                if rcpt_to.is_empty() {
                    b"503 5.5.1 RCPT first\r\n"
                } else {
                    write.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n").await?;
                    let raw = read_data(&mut read).await?;
                    let Some(raw) = raw else {
                        write.write_all(b"552 5.3.4 Message too big\r\n").await?;
                        continue;
                    };
                    let id = self.store(std::mem::take(&mut mail_from), std::mem::take(&mut rcpt_to), raw).await;
                    write.write_all(format!("250 2.0.0 OK queued as {id}\r\n").as_bytes()).await?;
                    continue;
                }
            } else if upper == "RSET" {
                mail_from.clear();
                rcpt_to.clear();
                b"250 2.0.0 OK\r\n"
            } else if upper == "NOOP" {
                b"250 2.0.0 OK\r\n"
            } else if upper == "QUIT" {
                write.write_all(b"221 2.0.0 Bye\r\n").await?;
                return Ok(());
            } else {
                b"502 5.5.2 Command not implemented\r\n"
            };
            write.write_all(reply).await?;
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

fn angle_addr(s: &str) -> String {
    let s = s.trim();
    let inner = s.strip_prefix('<').and_then(|r| r.split_once('>')).map(|(a, _)| a).unwrap_or(s);
    inner.split_whitespace().next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mail::{Mailer, OutgoingMail};

    #[tokio::test]
    async fn lettre_delivers_to_the_sink_over_tcp() -> anyhow::Result<()> {
        let (sink, addr) = MailSink::start("127.0.0.1:0").await?;
        let mailer = Mailer::from_url(&format!("smtp://{addr}"), "Herald <noreply@herald.test>")?;
        let mail = OutgoingMail {
            to: "Reader@Example.com".into(),
            subject: "Hello ünïcode".into(),
            html: "<p>Hi <b>there</b></p>\n.\n..dots".into(),
            text: "Hi there\n.\n..dots".into(),
        };
        mailer.send(&mail).await?;
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
        };
        assert!(mailer.send(&mail).await.is_err());
        mail.subject = "ok".into();
        mail.to = "a@example.com\r\nRCPT TO:<b@example.com>".into();
        assert!(mailer.send(&mail).await.is_err());
        Ok(())
    }
}
