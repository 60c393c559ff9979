//! The raw limit of an SMTP server and Herald's client: the same client code the delivery
//! workers use, and nothing else (no database, one message copied).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use herald_engine::sending::smtp::{SmtpConnection, SmtpServer};

#[derive(Clone, Debug)]
pub struct BlastReport {
    pub messages: usize,
    pub connections: usize,
    /// From the first connect to the last reply.
    pub elapsed: Duration,
    pub per_second: f64,
}

/// Sends `messages` copies of `raw` over `connections` parallel connections. The first error
/// stops the run.
pub async fn blast(
    server: &SmtpServer,
    connections: usize,
    messages: usize,
    envelope_from: &str,
    rcpt_to: &str,
    raw: &[u8],
) -> anyhow::Result<BlastReport> {
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
            Ok::<usize, anyhow::Error>(sent)
        });
    }
    let mut sent = 0;
    while let Some(joined) = tasks.join_next().await {
        // Returning drops the set, which aborts the other connections.
        sent += joined.context("a sending task failed")??;
    }
    let elapsed = started.elapsed();
    Ok(BlastReport { messages: sent, connections, elapsed, per_second: sent as f64 / elapsed.as_secs_f64().max(1e-9) })
}

/// A plain-text message of about 2 KB from `from` to `to`, with Message-ID `<n.blast@herald.test>`:
/// what the blast, the benchmarks and the SMTP client's tests send.
pub fn sample_message(from: &str, n: usize, to: &str) -> Vec<u8> {
    let mut m = format!(
        "From: Herald <{from}>\r\nTo: <{to}>\r\nSubject: Issue {n}\r\nMessage-ID: <{n}.blast@herald.test>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
    );
    while m.len() < 2000 {
        m.push_str("The quick brown fox jumps over the lazy dog, again and again and again.\r\n");
    }
    m.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smtp_sink::MailSink;

    const FROM: &str = "bounces@herald.test";

    async fn sink() -> anyhow::Result<(MailSink, SmtpServer)> {
        let (sink, addr) = MailSink::start("127.0.0.1:0").await?;
        Ok((sink, SmtpServer::parse(&format!("smtp://{addr}"))?))
    }

    fn message(n: usize, to: &str) -> Vec<u8> {
        sample_message(FROM, n, to)
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

    /// `cargo test -p herald-devtools smtp_blast_benchmark -- --ignored --nocapture`
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
