//! Fenced leases: how a sending loop owns the rows it claims, and stops owning them safely.
//!
//! Every sending loop holds one row in `leases` (migration 0015). Its token is the **fencing
//! token**: the rows the loop claims carry it, and every later write to them (sent, failed,
//! retry, skip, release) is conditional on it, so a loop that lost its lease cannot touch rows
//! another loop now owns.
//!
//! A [`Lease`] is renewed by a task of its own every [`RENEW_EVERY`], independent of the send
//! loop (a loop stuck in a minute-long SMTP reply keeps its lease). The process also keeps a
//! [`Fence`] per lease: open while the lease is provably valid in Postgres. Renewal requests are
//! timed from *before* they are sent, so when Postgres answers, the lease runs at least until
//! `sent + lease`, and the fence is kept open only until `sent + lease − margin`. A process that
//! cannot renew (Postgres down, the process starved) sees its fence close while the lease is
//! still valid; the SMTP client refuses to write another byte through a closed fence
//! ([`crate::sending::smtp::SmtpConnection::send_fenced`]), so the end of DATA of a message can
//! only ever be written while its row is still owned. The reaper can only hand a row to another
//! loop after its lease expired in Postgres, which is later still.
//!
//! The same renewal reports the status of the lease's campaign: a pause or cancel closes the
//! fence as *stopped* within one tick, which aborts any transaction not yet past the end of its
//! DATA and makes the loop give its batch back.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::domain::{CampaignId, TenantId};
use crate::error::Result;
use crate::infra::db::Db;

/// How often a held lease is renewed (and its campaign's status looked at).
pub const RENEW_EVERY: Duration = Duration::from_millis(500);

/// What a lease is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseFor {
    /// A delivery loop's slot on a campaign (0 … connections − 1).
    Delivery { tenant: TenantId, campaign: CampaignId, slot: i32 },
    /// A campaign's fan-out.
    Fanout { tenant: TenantId, campaign: CampaignId },
    /// A transactional sending loop.
    Transactional,
}

/// Why a fence closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The lease may be gone (not renewed in time, or Postgres said it is).
    LeaseLost,
    /// The campaign is no longer sending (paused, cancelled, finished).
    Stopped,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn to_ticks(t: Instant) -> u64 {
    t.saturating_duration_since(epoch()).as_micros() as u64
}

#[derive(Debug)]
struct FenceState {
    /// Microseconds after [`epoch`] until which the lease is known to be valid.
    valid_until: AtomicU64,
    lost: AtomicBool,
    stopped: AtomicBool,
    changed: Notify,
}

/// The process's view of one lease: may this loop still put a message on the wire?
#[derive(Clone, Debug)]
pub struct Fence(Arc<FenceState>);

impl Fence {
    fn new(valid_until: Instant) -> Self {
        Fence(Arc::new(FenceState {
            valid_until: AtomicU64::new(to_ticks(valid_until)),
            lost: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            changed: Notify::new(),
        }))
    }

    /// A fence that never closes (tests and tools that send without a lease).
    pub fn always_open() -> Self {
        Self::new(Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600))
    }

    /// A fence that closes at `deadline` as if its lease had not been renewed (tests).
    pub fn until(deadline: Instant) -> Self {
        Self::new(deadline)
    }

    /// Why the fence is closed, or `None` while it is open.
    pub fn closed_because(&self) -> Option<Closed> {
        if self.0.stopped.load(Ordering::Acquire) {
            Some(Closed::Stopped)
        } else if self.0.lost.load(Ordering::Acquire)
            || to_ticks(Instant::now()) >= self.0.valid_until.load(Ordering::Acquire)
        {
            Some(Closed::LeaseLost)
        } else {
            None
        }
    }

    pub fn is_open(&self) -> bool {
        self.closed_because().is_none()
    }

    /// Resolves once the fence is closed.
    pub async fn closed(&self) -> Closed {
        loop {
            let notified = self.0.changed.notified();
            if let Some(why) = self.closed_because() {
                return why;
            }
            let until = epoch() + Duration::from_micros(self.0.valid_until.load(Ordering::Acquire));
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = notified => {}
            }
        }
    }

    /// Sleeps for `d` unless the fence closes first (then returns why).
    pub async fn sleep(&self, d: Duration) -> Option<Closed> {
        tokio::select! {
            _ = tokio::time::sleep(d) => self.closed_because(),
            why = self.closed() => Some(why),
        }
    }

    fn extend(&self, until: Instant) {
        self.0.valid_until.fetch_max(to_ticks(until), Ordering::AcqRel);
        self.0.changed.notify_waiters();
    }

    fn lose(&self) {
        self.0.lost.store(true, Ordering::Release);
        self.0.changed.notify_waiters();
    }

    fn stop(&self) {
        self.0.stopped.store(true, Ordering::Release);
        self.0.changed.notify_waiters();
    }
}

/// A held lease. Dropping it stops the renewal (the lease then expires and the reaper gives its
/// rows back); [`Lease::end`] gives it up at once after a clean finish.
#[derive(Debug)]
pub struct Lease {
    pub token: i64,
    fence: Fence,
    renewer: tokio::task::JoinHandle<()>,
    db: Db,
}

impl Lease {
    /// Gives the lease up without touching the database (it may be unreachable): the fence
    /// closes at once, renewal stops, and the reaper takes the rows back once the lease expires,
    /// counting the armed ones as ambiguous.
    pub fn abandon(self) {
        self.fence.lose();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// How long the fence stays open after the last renewal was sent: the lease minus a margin
/// (for clock-rate differences and the time between a fence check and the write it allows).
fn fence_span(lease: Duration) -> Duration {
    lease.saturating_sub((lease / 5).clamp(Duration::from_millis(200), Duration::from_secs(5)))
}

impl Lease {
    /// Takes a lease, or `None` when the slot is held by a live loop.
    pub async fn acquire(db: &Db, what: LeaseFor, owner: &str, lease: Duration) -> Result<Option<Lease>> {
        let (campaign, slot) = match what {
            LeaseFor::Delivery { campaign, slot, .. } => (Some(campaign), Some(slot)),
            LeaseFor::Fanout { campaign, .. } => (Some(campaign), Some(-1)),
            LeaseFor::Transactional => (None, None),
        };
        let asked = Instant::now();
        // An expired lease on the slot is taken over only by the reaper (it must give the rows
        // back first), so a conflict is always "someone holds it" or "not reaped yet".
        let token: Option<i64> = sqlx::query_scalar(
            "INSERT INTO leases (owner, campaign_id, slot, expires_at)
             VALUES ($1, $2, $3, now() + make_interval(secs => $4))
             ON CONFLICT (campaign_id, slot) WHERE slot IS NOT NULL DO NOTHING
             RETURNING token",
        )
        .bind(owner)
        .bind(campaign)
        .bind(slot)
        .bind(lease.as_secs_f64())
        .fetch_optional(db.pool())
        .await?;
        let Some(token) = token else { return Ok(None) };
        let fence = Fence::new(asked + fence_span(lease));
        let renewer = tokio::spawn(renew(db.clone(), token, fence.clone(), lease));
        Ok(Some(Lease { token, fence, renewer, db: db.clone() }))
    }

    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Gives the lease up after a clean finish (every row it claimed has its outcome).
    pub async fn end(self) {
        self.renewer.abort();
        if let Err(e) =
            sqlx::query("DELETE FROM leases WHERE token = $1").bind(self.token).execute(self.db.pool()).await
        {
            tracing::debug!(error = %e, token = self.token, "could not end a lease; it expires on its own");
        }
    }
}

/// The renewal task: every tick, extend the lease in Postgres and, on success, the fence; a
/// lease Postgres no longer has closes the fence at once; a campaign no longer sending stops it.
async fn renew(db: Db, token: i64, fence: Fence, lease: Duration) {
    let mut tick = tokio::time::interval(RENEW_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let asked = Instant::now();
        let answer: std::result::Result<Option<(i64, Option<String>)>, _> = tokio::time::timeout(
            fence_span(lease).saturating_sub(RENEW_EVERY).max(RENEW_EVERY),
            sqlx::query_as("SELECT token, campaign_status FROM renew_leases($1, $2)")
                .bind(vec![token])
                .bind(lease.as_secs_f64())
                .fetch_optional(db.pool()),
        )
        .await
        .map_err(|_| ())
        .and_then(|r| r.map_err(|e| tracing::debug!(error = %e, token, "lease renewal failed")));
        match answer {
            Ok(Some((_, status))) => {
                fence.extend(asked + fence_span(lease));
                if status.is_some_and(|s| s != "sending") {
                    fence.stop();
                }
            }
            Ok(None) => {
                tracing::warn!(token, "lease lost: Postgres no longer has it");
                fence.lose();
                return;
            }
            // Not renewed: the fence closes on its own once the last renewal's span runs out.
            Err(()) => {}
        }
    }
}

/// Every loop of one process shares the process's name in its leases' `owner`.
pub fn owner(worker: &str, what: &str) -> String {
    format!("{worker}/{what}")
}
