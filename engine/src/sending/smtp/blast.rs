use super::*;

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
