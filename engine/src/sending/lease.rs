//! Fenced leases: how a sending loop owns the rows it claims, and stops owning them safely.
//!
//! Every sending loop holds one row in `leases` (`renew_leases` and `reap_expired_leases` in `engine/sql/sending.sql`). Its token is the **fencing
//! token**: the rows the loop claims carry it, and every later write to them (sent, failed,
//! retry, skip, release) is conditional on it, so a loop that lost its lease cannot touch rows
//! another loop now owns.
//!
//! A [`Lease`] is renewed every [`RENEW_EVERY`] by the process's renewal task ([`Renewals`]: all
//! its leases in one statement, on a connection of its own), independent of the send loops (a loop
//! stuck in a minute-long SMTP reply keeps its lease, and so does one waiting for the pool). The
//! process also keeps a [`Fence`] per lease: open while the lease is provably valid in Postgres.
//! Renewal requests are timed from *before* they are sent, so when Postgres answers, the lease runs
//! at least until `sent + lease`, and the fence is kept open only until `sent + lease − margin`. A
//! process that cannot renew (Postgres down, the process starved) sees its fence close while the
//! lease is still valid; the SMTP client refuses to write another byte through a closed fence
//! ([`crate::sending::smtp::SmtpConnection::send_fenced`]), so the end of DATA of a message can
//! only ever be written while its row is still owned. The reaper can only hand a row to another
//! loop after its lease expired in Postgres, which is later still.
//!
//! The same renewal reports the status of the lease's campaign: a pause or cancel closes the
//! fence as *stopped* within one tick, which aborts any transaction not yet past the end of its
//! DATA and makes the loop give its batch back.

use std::collections::{BTreeMap, HashMap};
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
pub enum LeaseFor<'a> {
    /// A delivery loop's slot on a campaign (0 … connections − 1), and one of the slots of the
    /// identity it sends through (`identity`, its rate-bucket name; `connections` of them), so
    /// the identity's connection limit holds across all its campaigns. Priority mail (an
    /// automation's step) takes the highest free identity slot, campaigns the lowest, so the
    /// slots a campaign gives up for it are the ones it takes (see `rate::bulk_connections`).
    Delivery { tenant: TenantId, campaign: CampaignId, slot: i32, identity: &'a str, connections: u32, priority: bool },
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
    /// The identity connection slot it holds (delivery leases).
    pub identity_slot: Option<i32>,
    fence: Fence,
    renewals: Arc<Renewals>,
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
        self.renewals.forget(self.token);
    }
}

/// How long the fence stays open after the last renewal was sent: the lease minus a margin
/// (for clock-rate differences and the time between a fence check and the write it allows).
fn fence_span(lease: Duration) -> Duration {
    lease.saturating_sub((lease / 5).clamp(Duration::from_millis(200), Duration::from_secs(5)))
}

impl Lease {
    /// Takes a lease, or `None` when the slot is held by a live loop.
    pub async fn acquire(db: &Db, what: LeaseFor<'_>, owner: &str, lease: Duration) -> Result<Option<Lease>> {
        let (campaign, slot, identity, connections, priority) = match what {
            LeaseFor::Delivery { campaign, slot, identity, connections, priority, .. } => {
                (Some(campaign), Some(slot), Some(identity), connections.max(1), priority)
            }
            LeaseFor::Fanout { campaign, .. } => (Some(campaign), Some(-1), None, 1, false),
            LeaseFor::Transactional => (None, None, None, 1, false),
        };
        let asked = Instant::now();
        // An expired lease on the slot is taken over only by the reaper (it must give the rows
        // back first), so a conflict is always "someone holds it" or "not reaped yet". A
        // delivery lease takes the lowest free slot of its identity too; two loops racing for
        // one conflict on the unique index, and the loser ends as if every slot were held.
        let taken: Option<(i64, Option<i32>)> = sqlx::query_as(
            "INSERT INTO leases (owner, campaign_id, slot, identity_key, identity_slot, expires_at)
             SELECT $1, $2, $3, $5, CASE WHEN $5::text IS NOT NULL THEN g END, now() + make_interval(secs => $4)
             FROM generate_series(0, $6 - 1) g
             WHERE $5::text IS NULL
                OR NOT EXISTS (SELECT 1 FROM leases l WHERE l.identity_key = $5 AND l.identity_slot = g)
             ORDER BY CASE WHEN $7 THEN -g ELSE g END LIMIT 1
             ON CONFLICT DO NOTHING
             RETURNING token, identity_slot",
        )
        .bind(owner)
        .bind(campaign)
        .bind(slot)
        .bind(lease.as_secs_f64())
        .bind(identity)
        .bind(connections as i32)
        .bind(priority)
        .fetch_optional(db.pool())
        .await?;
        let Some((token, identity_slot)) = taken else { return Ok(None) };
        let fence = Fence::new(asked + fence_span(lease));
        let renewals = db.shared::<Renewals>();
        renewals.hold(db, token, fence.clone(), lease);
        Ok(Some(Lease { token, identity_slot, fence, renewals, db: db.clone() }))
    }

    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Gives the lease up after a clean finish (every row it claimed has its outcome).
    pub async fn end(self) {
        self.renewals.forget(self.token);
        if let Err(e) =
            sqlx::query("DELETE FROM leases WHERE token = $1").bind(self.token).execute(self.db.pool()).await
        {
            tracing::debug!(error = %e, token = self.token, "could not end a lease; it expires on its own");
        }
    }
}

/// The leases of one process (one [`Db`]), renewed together: every tick, one statement for all
/// of them on a connection of their own. Renewed one by one on the shared pool, they competed
/// with the loops' own queries: with the pool saturated (a slow database, an import), the
/// renewals waited, the fences closed and every loop gave up its lease at once.
#[derive(Debug, Default)]
pub struct Renewals {
    held: std::sync::Mutex<HashMap<i64, Held>>,
    started: AtomicBool,
}

#[derive(Debug)]
struct Held {
    fence: Fence,
    lease: Duration,
}

impl Renewals {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Held>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Renews `token` from now on; the first lease starts the process's renewal task.
    fn hold(self: &Arc<Self>, db: &Db, token: i64, fence: Fence, lease: Duration) {
        self.held().insert(token, Held { fence, lease });
        if !self.started.swap(true, Ordering::AcqRel) {
            // The task keeps the connection settings, not the pool: it ends when the pool goes.
            tokio::spawn(renew_all(db.pool().connect_options(), Arc::downgrade(self)));
        }
    }

    fn forget(&self, token: i64) {
        self.held().remove(&token);
    }
}

/// The renewal task: every tick, extend the held leases in Postgres and, for each one renewed,
/// its fence; a lease Postgres no longer has closes its fence at once; a campaign no longer
/// sending stops it. Ends with the pool.
async fn renew_all(options: Arc<sqlx::postgres::PgConnectOptions>, renewals: std::sync::Weak<Renewals>) {
    let mut conn: Option<sqlx::PgConnection> = None;
    let mut tick = tokio::time::interval(RENEW_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(held) = renewals.upgrade() else { return };
        // Leases of one length are renewed by one statement (a process uses one length).
        let mut by_length: BTreeMap<Duration, Vec<(i64, Fence)>> = BTreeMap::new();
        for (token, h) in held.held().iter() {
            by_length.entry(h.lease).or_default().push((*token, h.fence.clone()));
        }
        if by_length.is_empty() {
            // No loop holds a lease: an idle process keeps no connection for it.
            conn = None;
            continue;
        }
        for (lease, leases) in by_length {
            let asked = Instant::now();
            let tokens: Vec<i64> = leases.iter().map(|(t, _)| *t).collect();
            let answer = tokio::time::timeout(
                fence_span(lease).saturating_sub(RENEW_EVERY).max(RENEW_EVERY),
                renew_on(&options, &mut conn, &tokens, lease),
            )
            .await;
            let renewed: HashMap<i64, Option<String>> = match answer {
                Ok(Ok(rows)) => rows.into_iter().collect(),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "lease renewal failed");
                    conn = None;
                    continue;
                }
                // Cut off mid-statement: the connection's state is unknown, so it goes.
                Err(_) => {
                    conn = None;
                    continue;
                }
            };
            // Not renewed in time: each fence closes on its own once its last span runs out.
            for (token, fence) in leases {
                match renewed.get(&token) {
                    Some(status) => {
                        fence.extend(asked + fence_span(lease));
                        if status.as_deref().is_some_and(|s| s != "sending") {
                            fence.stop();
                        }
                    }
                    None => {
                        tracing::warn!(token, "lease lost: Postgres no longer has it");
                        fence.lose();
                        held.forget(token);
                    }
                }
            }
        }
    }
}

/// One renewal statement on the renewals' own connection (opened, or opened again, as needed).
async fn renew_on(
    options: &sqlx::postgres::PgConnectOptions,
    conn: &mut Option<sqlx::PgConnection>,
    tokens: &[i64],
    lease: Duration,
) -> Result<Vec<(i64, Option<String>)>> {
    use sqlx::Connection;
    if conn.is_none() {
        *conn = Some(sqlx::PgConnection::connect_with(options).await?);
    }
    let Some(c) = conn.as_mut() else { return Ok(Vec::new()) };
    Ok(sqlx::query_as("SELECT token, campaign_status FROM renew_leases($1, $2)")
        .bind(tokens)
        .bind(lease.as_secs_f64())
        .fetch_all(c)
        .await?)
}

/// Every loop of one process shares the process's name in its leases' `owner`.
pub fn owner(worker: &str, what: &str) -> String {
    format!("{worker}/{what}")
}
