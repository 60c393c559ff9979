//! The open/click firehose. Endpoints hand hits to a bounded in-memory channel and answer at
//! once; one flusher task writes them in batches (one `record_hits` call per batch, at least
//! every [`FLUSH_EVERY`]). A full channel drops the hit and counts it, so a loss is never
//! silent; shutdown drains the channel before returning.

use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::token::Target;
use crate::infra::db::Db;

/// Longest a hit waits in memory before its batch is written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(250);
/// Largest batch per round trip.
const MAX_BATCH: usize = 10_000;
/// Attempts per batch before its hits are counted as lost.
const WRITE_ATTEMPTS: u32 = 4;

#[derive(Clone, Copy, Debug)]
pub struct Hit {
    pub target: Target,
    /// `Some(link)` for a click.
    pub link: Option<i64>,
    pub prefetch: bool,
    pub at: DateTime<Utc>,
}

/// Counters for /metrics and the benchmark: accepted == stored + discarded + lost + in flight.
#[derive(Debug, Default)]
pub struct HitCounters {
    /// Handed to the channel.
    pub accepted: AtomicU64,
    /// Refused because the channel was full.
    pub dropped: AtomicU64,
    /// Rows written.
    pub stored: AtomicU64,
    /// Written batches' hits the database refused (campaign deleted, link not of the campaign).
    pub discarded: AtomicU64,
    /// Hits of batches that could not be written after every retry.
    pub lost: AtomicU64,
    pub batches: AtomicU64,
}

impl HitCounters {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// The sending side, cheap to clone into handlers.
#[derive(Clone, Debug)]
pub struct HitRecorder {
    tx: mpsc::Sender<Hit>,
    pub counters: Arc<HitCounters>,
}

/// The flusher task; [`Flusher::shutdown`] writes what is buffered and stops it.
pub struct Flusher {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl HitRecorder {
    /// Starts the flusher. `capacity` bounds the memory a burst can take (≈ 80 bytes a hit).
    pub fn start(db: Db, capacity: usize) -> (Self, Flusher) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let counters = Arc::new(HitCounters::default());
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(run(db, rx, stopped, counters.clone()));
        (Self { tx, counters }, Flusher { stop, task })
    }

    /// Never waits: a full buffer counts a drop.
    pub fn record(&self, hit: Hit) {
        match self.tx.try_send(hit) {
            Ok(()) => self.counters.accepted.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.counters.dropped.fetch_add(1, Ordering::Relaxed),
        };
    }
}

impl Flusher {
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "tracking flusher panicked");
        }
    }
}

async fn run(db: Db, mut rx: mpsc::Receiver<Hit>, mut stopped: oneshot::Receiver<()>, counters: Arc<HitCounters>) {
    let mut batch: Vec<Hit> = Vec::with_capacity(1024);
    loop {
        tokio::select! {
            first = rx.recv() => match first {
                Some(hit) => batch.push(hit),
                None => break,
            },
            _ = &mut stopped => break,
        }
        let deadline = tokio::time::Instant::now() + FLUSH_EVERY;
        let mut stopping = false;
        while batch.len() < MAX_BATCH {
            tokio::select! {
                next = rx.recv() => match next {
                    Some(hit) => batch.push(hit),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                _ = &mut stopped, if !stopping => { stopping = true; break; }
            }
        }
        write(&db, &mut batch, &counters).await;
        if stopping {
            break;
        }
    }
    // Shutting down: take everything still buffered (senders may live on in handlers).
    rx.close();
    while let Some(hit) = rx.recv().await {
        batch.push(hit);
        if batch.len() >= MAX_BATCH {
            write(&db, &mut batch, &counters).await;
        }
    }
    write(&db, &mut batch, &counters).await;
}

async fn write(db: &Db, batch: &mut Vec<Hit>, counters: &HitCounters) {
    if batch.is_empty() {
        return;
    }
    let n = batch.len();
    let mut tenants = Vec::with_capacity(n);
    let mut campaigns: Vec<Uuid> = Vec::with_capacity(n);
    let mut readers = Vec::with_capacity(n);
    let mut links = Vec::with_capacity(n);
    let mut clicks = Vec::with_capacity(n);
    let mut prefetch = Vec::with_capacity(n);
    let mut at = Vec::with_capacity(n);
    for h in batch.iter() {
        tenants.push(h.target.tenant.0);
        campaigns.push(h.target.campaign);
        readers.push(h.target.reader.unwrap_or(0));
        links.push(h.link.unwrap_or(0));
        clicks.push(h.link.is_some());
        prefetch.push(h.prefetch);
        at.push(h.at);
    }
    batch.clear();
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=WRITE_ATTEMPTS {
        let result: Result<i64, sqlx::Error> = sqlx::query_scalar("SELECT record_hits($1, $2, $3, $4, $5, $6, $7)")
            .bind(&tenants)
            .bind(&campaigns)
            .bind(&readers)
            .bind(&links)
            .bind(&clicks)
            .bind(&prefetch)
            .bind(&at)
            .fetch_one(db.pool())
            .await;
        match result {
            Ok(stored) => {
                let stored = stored.max(0) as u64;
                counters.stored.fetch_add(stored, Ordering::Relaxed);
                counters.discarded.fetch_add(n as u64 - stored.min(n as u64), Ordering::Relaxed);
                counters.batches.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) if attempt < WRITE_ATTEMPTS => {
                tracing::warn!(error = %e, attempt, hits = n, "writing tracking hits failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
            Err(e) => {
                tracing::error!(error = %e, hits = n, "writing tracking hits failed; counted as lost");
                counters.lost.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
}
