//! The transactional stream: the same sending engine as campaigns (sending identities, the
//! shared GCRA buckets, the SMTP client and its error classes, DKIM, suppressions, the reaper's
//! leases and Message-ID rule), fed from the `messages` queue instead of a send log.
//!
//! It stays out of a campaign's way and a campaign stays out of its way: its own loops (so a
//! million-reader campaign holding every delivery job never delays a password reset), its own
//! rate bucket (`tx:` + the identity's), and the workspace's transactional identity. It ignores
//! the marketing frequency cap; suppressed addresses (bounces, complaints, the blocklist) are
//! refused, readers' unsubscribes are not.
//!
//! Retries follow the seed: 1 min, 5 min, 30 min, 2 h, 8 h, then the message fails. The clock is
//! injectable so tests can walk that schedule without waiting hours.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::messages::MessageStatus::{Failed, Queued, Sending, Sent};
use super::messages::{MessageId, transition};
use crate::domain::TenantId;
use crate::error::{Error, Result, persist};
use crate::infra::db::Db;
use crate::infra::tokens::Signer;
use crate::sending::identities::{self, SmtpIdentity};
use crate::sending::lease::{Lease, LeaseFor};
use crate::sending::message::{self, DkimSigner, Envelope, Rendered};
use crate::sending::rate;
use crate::sending::smtp::{SmtpConnection, SmtpError, SmtpErrorKind};

/// Waits after the 1st … 5th failed attempt; the 6th failure is final.
pub const BACKOFF: [Duration; 5] = [
    Duration::from_secs(60),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(8 * 3600),
];

/// The wait before the next attempt after `attempts` failed ones, or `None` to give up.
pub fn retry_delay(attempts: i32) -> Option<Duration> {
    retry_delay_in(&BACKOFF, attempts)
}

/// [`retry_delay`] on another schedule (`HERALD_TRANSACTIONAL_BACKOFF`).
pub fn retry_delay_in(schedule: &[Duration], attempts: i32) -> Option<Duration> {
    usize::try_from(attempts).ok().and_then(|n| n.checked_sub(1)).and_then(|i| schedule.get(i).copied())
}

/// Now, as the sender sees it (tests move it).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

#[derive(Clone)]
pub struct TxDeliveryConfig {
    /// Unique per process; names the loops' leases.
    pub worker_id: String,
    /// The identity for workspaces that chose none.
    pub default_identity: SmtpIdentity,
    /// Where a workspace's own SMTP identity may connect (`HERALD_EGRESS_ALLOW`).
    pub egress: crate::infra::egress::Egress,
    /// Each loop's lease (renewed every half-second while the loop lives; see [`crate::sending::lease`]).
    pub lease: Duration,
    /// Messages per claim.
    pub batch_size: i32,
    /// Sending loops (SMTP connections) per process.
    pub loops: usize,
    pub smtp_timeout: Duration,
    /// How often an idle loop looks for due messages queued by other processes.
    pub poll: Duration,
    /// Waits after each failed attempt; one more failure is final (the seed's [`BACKOFF`]).
    pub backoff: Vec<Duration>,
    pub clock: Clock,
}

impl std::fmt::Debug for TxDeliveryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TxDeliveryConfig({})", self.worker_id)
    }
}

impl TxDeliveryConfig {
    pub fn new(worker_id: String, default_identity: SmtpIdentity) -> Self {
        Self {
            worker_id,
            default_identity,
            egress: Default::default(),
            lease: Duration::from_secs(30),
            batch_size: 20,
            loops: 2,
            smtp_timeout: Duration::from_secs(30),
            poll: Duration::from_millis(250),
            backoff: BACKOFF.to_vec(),
            clock: Arc::new(Utc::now),
        }
    }
}

#[derive(Clone, Debug)]
pub struct TxDeliveryContext {
    pub db: Db,
    pub signer: Signer,
    pub config: Arc<TxDeliveryConfig>,
    pub wake: Arc<tokio::sync::Notify>,
}

/// Runs the sending loops until `stop` turns true.
#[tracing::instrument(skip_all)]
pub async fn run(cx: TxDeliveryContext, stop: tokio::sync::watch::Receiver<bool>) {
    let loops: Vec<_> = (0..cx.config.loops.max(1))
        .map(|_| {
            let cx = cx.clone();
            let mut stop = stop.clone();
            tokio::spawn(async move {
                let mut sender = Sender::new(&cx);
                loop {
                    if *stop.borrow() {
                        break;
                    }
                    let worked = match sender.run_once().await {
                        Ok(n) => n > 0,
                        Err(e) => {
                            tracing::warn!(error = ?e, "transactional sending pass failed");
                            false
                        }
                    };
                    if worked {
                        continue;
                    }
                    // Idle: wait for this process's enqueue, another process's (by polling), or stop.
                    let jitter = Duration::from_millis(rand::random::<u64>() % 100);
                    tokio::select! {
                        _ = cx.wake.notified() => {}
                        _ = tokio::time::sleep(cx.config.poll + jitter) => {}
                        _ = stop.wait_for(|s| *s) => break,
                    }
                }
                sender.close().await;
            })
        })
        .collect();
    for l in loops {
        let _ = l.await;
    }
}

/// A workspace's sending setup, cached for a short while per loop.
struct WorkspaceSender {
    identity: SmtpIdentity,
    /// By the From address's domain: the identity's key, or the verified sending domain's.
    dkim: HashMap<String, Option<DkimSigner>>,
    slug: String,
    loaded: Instant,
}

const WORKSPACE_TTL: Duration = Duration::from_secs(30);

/// One sending loop: its SMTP connection (kept while the next message uses the same identity).
pub struct Sender<'a> {
    cx: &'a TxDeliveryContext,
    conn: Option<(String, SmtpConnection)>,
    workspaces: HashMap<TenantId, WorkspaceSender>,
    /// This loop's lease, taken on the first pass and again after it is lost.
    lease: Option<Lease>,
}

#[derive(Debug, sqlx::FromRow)]
struct Claimed {
    id: MessageId,
    tenant_id: TenantId,
    attempts: i32,
    skip: Option<String>,
    /// The lease token it was claimed under (every write is conditional on it).
    #[sqlx(default)]
    token: i64,
}

#[derive(Debug, sqlx::FromRow)]
struct Content {
    to_email: String,
    to_name: String,
    from_email: String,
    from_name: String,
    reply_to: String,
    subject: String,
    html: String,
    text_body: String,
}

impl<'a> Sender<'a> {
    pub fn new(cx: &'a TxDeliveryContext) -> Self {
        Self { cx, conn: None, workspaces: HashMap::new(), lease: None }
    }

    #[tracing::instrument(skip_all)]
    pub async fn close(&mut self) {
        if let Some((_, conn)) = self.conn.take() {
            conn.quit().await;
        }
        if let Some(lease) = self.lease.take() {
            lease.end().await;
        }
    }

    /// The loop's lease, (re)taken when it has none or lost it.
    async fn lease(&mut self) -> Result<(i64, crate::sending::lease::Fence)> {
        if self.lease.as_ref().is_some_and(|l| !l.fence().is_open()) {
            // Lost (or Postgres was unreachable too long): whatever it still covers is the
            // reaper's now. A fresh lease gets a fresh token.
            self.lease = None;
        }
        if self.lease.is_none() {
            let owner = crate::sending::lease::owner(&self.cx.config.worker_id, "transactional");
            self.lease = Lease::acquire(&self.cx.db, LeaseFor::Transactional, &owner, self.cx.config.lease).await?;
        }
        let lease = self.lease.as_ref().ok_or_else(|| Error::Unexpected(anyhow::anyhow!("no transactional lease")))?;
        Ok((lease.token, lease.fence().clone()))
    }

    /// Claims the due messages (up to a batch) and sends them. Returns how many it claimed.
    #[tracing::instrument(skip_all)]
    pub async fn run_once(&mut self) -> Result<usize> {
        let cfg = self.cx.config.clone();
        let now = (cfg.clock)();
        let (token, fence) = self.lease().await?;
        let claimed: Vec<Claimed> =
            sqlx::query_as("SELECT id, tenant_id, attempts, skip FROM claim_messages($1, $2, $3)")
                .bind(token)
                .bind(cfg.batch_size)
                .bind(now)
                .fetch_all(self.cx.db.pool())
                .await?;
        let n = claimed.len();
        let mut rest = claimed.into_iter().map(|c| Claimed { token, ..c });
        while let Some(m) = rest.next() {
            if !fence.is_open() {
                // The lease may be gone: give the rest back (conditional on the token).
                for m in std::iter::once(m).chain(rest.by_ref()) {
                    self.release(&m).await?;
                }
                break;
            }
            if let Err(e) = self.send(&m).await {
                // Not an SMTP answer (the identity or DKIM key could not be loaded, the database
                // failed): an attempt that failed, retried on the seed's schedule like a 4xx, so
                // the message can neither stay leased for ever nor be counted as ambiguous.
                tracing::warn!(error = ?e, message = %m.id, "transactional message could not be processed");
                let failure = SmtpError::new(
                    SmtpErrorKind::Transient,
                    None,
                    "the message could not be prepared for sending (see the server log)",
                    crate::sending::smtp::SmtpStage::Connect,
                );
                if let Err(e) = self.on_error(&m, failure).await {
                    tracing::warn!(error = ?e, message = %m.id, "could not record the failure; the reaper will requeue it");
                }
            }
        }
        Ok(n)
    }

    async fn send(&mut self, m: &Claimed) -> Result<()> {
        if let Some(why) = &m.skip {
            return self.finish_failed(m, &format!("not sent: the address is {why}"), "failed", false).await;
        }
        let tenant = m.tenant_id;
        let mut tx = self.cx.db.tenant_tx(tenant).await?;
        let content: Content = sqlx::query_as(
            "SELECT to_email, to_name, from_email, from_name, reply_to, subject, html, text_body
             FROM messages WHERE tenant_id = $1 AND id = $2",
        )
        .bind(tenant)
        .bind(m.id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        let ws = self.workspace_for(tenant, &content.from_email).await?;
        let bucket = format!("tx:{}", ws.identity.bucket);
        let (server, rate_per_second, burst) =
            (ws.identity.server.clone(), ws.identity.rate_per_second, ws.identity.burst);
        let domain = content.from_email.rsplit_once('@').map(|(_, d)| d.to_string()).unwrap_or_else(|| "herald".into());
        let envelope = Envelope {
            from_name: content.from_name,
            from_email: content.from_email.clone(),
            reply_to: (!content.reply_to.is_empty()).then_some(content.reply_to),
            to_email: content.to_email.clone(),
            to_name: content.to_name,
            // Deterministic: a re-send after a crash carries the same id, so receivers deduplicate.
            message_id: format!("msg.{}@{domain}", m.id),
            list_unsubscribe_url: String::new(),
            list_unsubscribe_mailto: None,
            list_id: String::new(),
            feedback_id: format!("tx:{}:herald", ws.slug),
        };
        let rendered = Rendered { subject: content.subject, html: content.html, text: content.text_body };
        let dkim = ws.dkim.get(&domain.to_ascii_lowercase()).and_then(Option::as_ref);
        let raw = match message::build_message(&rendered, &envelope, dkim) {
            Ok(raw) => raw,
            Err(e) => {
                return self.finish_failed(m, &format!("could not build the message: {e}"), "failed", false).await;
            }
        };
        let fence = match &self.lease {
            Some(l) => l.fence().clone(),
            None => return Err(Error::Unexpected(anyhow::anyhow!("no transactional lease"))),
        };
        // Priority mail: while it has work, campaigns on the same identity keep to their share.
        let wait = rate::reserve_priority(&self.cx.db, &bucket, 1, rate_per_second, burst).await?;
        if !wait.is_zero() && fence.sleep(wait).await.is_some() {
            return self.release(m).await;
        }
        if self.conn.as_ref().is_some_and(|(b, _)| *b != bucket)
            && let Some((_, old)) = self.conn.take()
        {
            old.quit().await;
        }
        if self.conn.is_none() {
            let timeout = self.cx.config.smtp_timeout;
            match SmtpConnection::connect(&server, timeout).await {
                Ok(mut conn) => {
                    conn.set_timeouts(timeout, timeout * 2);
                    self.conn = Some((bucket.clone(), conn))
                }
                Err(e) => return self.on_error(m, e).await,
            }
        }
        // Armed before the data goes out: if this process dies before recording the outcome,
        // the reaper counts the message as ambiguous (and only then).
        let (db, tenant) = (&self.cx.db, m.tenant_id);
        let armed = persist("arm a message", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            let armed = sqlx::query(
                "UPDATE messages SET armed = true WHERE tenant_id = $1 AND id = $2 AND lease_token = $3 AND status = 'sending'",
            )
            .bind(tenant)
            .bind(m.id)
            .bind(m.token)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            Ok(armed == 1)
        })
        .await?;
        if !armed {
            // Given back (and perhaps claimed again) while this loop's clock still trusted its
            // lease: the message is no longer this loop's, so it is not sent from here.
            tracing::warn!(message = %m.id, "not armed: the message is no longer this loop's; not sent");
            return Ok(());
        }
        let Some((_, conn)) = self.conn.as_mut() else { return Ok(()) };
        match conn.send_fenced(&content.from_email, &content.to_email, &raw, &fence).await {
            Ok(reply) => {
                if let Err(e) = self.record_sent(m, &reply).await {
                    // The data went out. Requeueing it (as a failed attempt would be) would send a
                    // copy nobody counted, or mark a delivered message failed. The row stays armed
                    // under this loop's lease, which is given up so the reaper takes the row back
                    // at once and counts it ambiguous: its next copy carries the same Message-ID.
                    tracing::error!(error = ?e, message = %m.id, "a 250 could not be recorded; left armed for the reaper");
                    if let Some(lease) = self.lease.take() {
                        lease.abandon();
                    }
                }
                Ok(())
            }
            Err(e) => {
                // A connection that failed is never reused.
                self.conn = None;
                if e.kind == SmtpErrorKind::Fenced {
                    return self.release(m).await;
                }
                self.on_error(m, e).await
            }
        }
    }

    async fn workspace(&mut self, tenant: TenantId) -> Result<&WorkspaceSender> {
        let fresh = self.workspaces.get(&tenant).is_some_and(|w| w.loaded.elapsed() < WORKSPACE_TTL);
        if !fresh {
            let mut tx = self.cx.db.tenant_tx(tenant).await?;
            let (identity_id, slug): (Option<crate::domain::IdentityId>, String) =
                sqlx::query_as("SELECT transactional_identity_id, slug FROM tenants WHERE id = $1")
                    .bind(tenant)
                    .fetch_one(&mut *tx)
                    .await?;
            tx.commit().await?;
            let identity = identities::resolve(
                &self.cx.db,
                &self.cx.signer,
                tenant,
                identity_id,
                &self.cx.config.default_identity,
                &self.cx.config.egress,
            )
            .await?;
            self.workspaces
                .insert(tenant, WorkspaceSender { identity, dkim: HashMap::new(), slug, loaded: Instant::now() });
        }
        self.workspaces.get(&tenant).ok_or_else(|| Error::Unexpected(anyhow::anyhow!("workspace cache")))
    }

    /// The workspace's sending setup with the DKIM signer for `from_email` loaded.
    async fn workspace_for(&mut self, tenant: TenantId, from_email: &str) -> Result<&WorkspaceSender> {
        let domain = from_email.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()).unwrap_or_default();
        let identity = self.workspace(tenant).await?.identity.clone();
        let known = self.workspaces.get(&tenant).is_some_and(|w| w.dkim.contains_key(&domain));
        if !known {
            let signer =
                crate::sending::domains::dkim_signer(&self.cx.db, &self.cx.signer, tenant, &identity, from_email)
                    .await?;
            if let Some(ws) = self.workspaces.get_mut(&tenant) {
                ws.dkim.insert(domain, signer);
            }
        }
        self.workspaces.get(&tenant).ok_or_else(|| Error::Unexpected(anyhow::anyhow!("workspace cache")))
    }

    /// Records the 250, retried through database outages. Conditional on the token; a message
    /// the reaper gave back but nobody claimed again still carries it, and is recorded (it did
    /// go out) without counting as ambiguous.
    async fn record_sent(&mut self, m: &Claimed, reply: &str) -> Result<()> {
        let (db, reply) = (&self.cx.db, &truncate(reply, 500));
        let provider = &crate::sending::smtp::provider_id(reply);
        persist("record a 250", || async move {
            let mut tx = db.tenant_tx(m.tenant_id).await?;
            // A message the reaper gave back (queued) but nobody claimed again still carries
            // the token: it went out, so it is recorded, and its ambiguity is taken back.
            transition(
                &mut tx,
                m.tenant_id,
                m.id,
                (&[Sending, Queued], Sent),
                Some(m.token),
                (
                    "sent_at = now(), smtp_reply = $6, provider_id = $7, last_error = NULL, armed = false,
                     ambiguous = ambiguous - (status = 'queued' AND ambiguous > 0)::int",
                    |q| q.bind(reply).bind(provider),
                ),
                Some(("sent", reply)),
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn on_error(&mut self, m: &Claimed, e: SmtpError) -> Result<()> {
        let reply = truncate(&e.to_string(), 500);
        match e.kind {
            SmtpErrorKind::HardBounce => {
                let db = &self.cx.db;
                persist("suppress a bounced address", || async move {
                    let mut tx = db.tenant_tx(m.tenant_id).await?;
                    let email: String =
                        sqlx::query_scalar("SELECT to_email FROM messages WHERE tenant_id = $1 AND id = $2")
                            .bind(m.tenant_id)
                            .bind(m.id)
                            .fetch_one(&mut *tx)
                            .await?;
                    crate::audience::suppressions::add_in(
                        &mut tx,
                        m.tenant_id,
                        &email,
                        crate::audience::suppressions::SuppressionReason::HardBounce,
                        "transactional message",
                    )
                    .await?;
                    sqlx::query(
                        "UPDATE messages SET bounced_at = now() WHERE tenant_id = $1 AND id = $2 AND lease_token = $3",
                    )
                    .bind(m.tenant_id)
                    .bind(m.id)
                    .bind(m.token)
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(())
                })
                .await?;
                self.finish_failed(m, &reply, "bounced", false).await
            }
            SmtpErrorKind::Permanent => self.finish_failed(m, &reply, "failed", false).await,
            SmtpErrorKind::Fenced => self.release(m).await,
            SmtpErrorKind::Transient => match retry_delay_in(&self.cx.config.backoff, m.attempts) {
                None => {
                    let why = format!("gave up after {} attempts: {reply}", m.attempts);
                    self.finish_failed(m, &why, "failed", e.maybe_delivered()).await
                }
                Some(delay) => {
                    let next = (self.cx.config.clock)()
                        + chrono::Duration::from_std(delay).unwrap_or_else(|_| chrono::Duration::hours(8));
                    let (db, reply) = (&self.cx.db, &reply);
                    let maybe = i32::from(e.maybe_delivered());
                    persist("defer a message", || async move {
                        let mut tx = db.tenant_tx(m.tenant_id).await?;
                        let detail =
                            format!("attempt {} failed: {reply}; next attempt in {}", m.attempts, human(delay));
                        transition(
                            &mut tx,
                            m.tenant_id,
                            m.id,
                            (&[Sending], Queued),
                            Some(m.token),
                            ("next_attempt_at = $6, last_error = $7, ambiguous = ambiguous + $8, armed = false", |q| {
                                q.bind(next).bind(reply).bind(maybe)
                            }),
                            Some(("deferred", &detail)),
                        )
                        .await?;
                        tx.commit().await?;
                        Ok(())
                    })
                    .await
                }
            },
        }
    }

    /// Ends the message as failed; `kind` is the event recorded (`failed` or `bounced`).
    /// `maybe_delivered`: the last attempt's data was complete and no reply came (ambiguous).
    async fn finish_failed(&self, m: &Claimed, reason: &str, kind: &str, maybe_delivered: bool) -> Result<()> {
        let db = &self.cx.db;
        persist("fail a message", || async move {
            let mut tx = db.tenant_tx(m.tenant_id).await?;
            transition(
                &mut tx,
                m.tenant_id,
                m.id,
                (&[Sending, Queued], Failed),
                Some(m.token),
                ("last_error = $6, armed = false, ambiguous = ambiguous + $7", |q| {
                    q.bind(reason).bind(i32::from(maybe_delivered))
                }),
                Some((kind, reason)),
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Gives a message back untouched (no attempt counted).
    async fn release(&self, m: &Claimed) -> Result<()> {
        let db = &self.cx.db;
        persist("release a message", || async move {
            let mut tx = db.tenant_tx(m.tenant_id).await?;
            let also = "attempts = greatest(attempts - 1, 0), armed = false";
            transition(&mut tx, m.tenant_id, m.id, (&[Sending], Queued), Some(m.token), (also, |q| q), None).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 { format!("{} h", s / 3600) } else { format!("{} min", s / 60) }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_is_the_seeds() {
        let mins: Vec<Option<u64>> = (0..=6).map(|a| retry_delay(a).map(|d| d.as_secs() / 60)).collect();
        assert_eq!(mins, vec![None, Some(1), Some(5), Some(30), Some(120), Some(480), None]);
    }
}
