//! Token buckets shared by every worker process, kept in Postgres as GCRA: one "theoretical
//! arrival time" (TAT) per key. Taking `n` tokens is a single UPDATE that reserves them and
//! says how long to wait before using them, so workers never race and never need a lock held
//! across the wait. Workers take a batch of tokens at a time (one round trip per batch).

use std::time::Duration;

use crate::error::Result;
use crate::infra::db::Db;

/// Reserves `n` tokens from `key` (rate `per_second`, up to `burst` at once) and returns how
/// long the caller must wait before sending them.
pub async fn reserve(db: &Db, key: &str, n: u32, per_second: f64, burst: u32) -> Result<Duration> {
    if n == 0 || per_second.is_nan() || per_second <= 0.0 {
        return Ok(Duration::ZERO);
    }
    let interval = 1.0 / per_second;
    // The new TAT moves forward by n·T from max(TAT, now), so an idle bucket refills up to
    // `burst`. The batch may start once its last token conforms: TAT_new − burst·T ≤ now. (A
    // fresh bucket therefore releases `burst`, not `burst + n`, at once.) RETURNING sees the
    // new row. No cap on the wait: a slow spread may wait hours between messages, and callers
    // wait under their lease's fence, so a pause still ends the wait at once.
    let wait_seconds: f64 = sqlx::query_scalar(
        "INSERT INTO rate_buckets AS b (key, tat) VALUES ($1, now() + make_interval(secs => $2 * $3))
         ON CONFLICT (key) DO UPDATE SET tat = greatest(b.tat, now()) + make_interval(secs => $2 * $3)
         RETURNING greatest(0, extract(epoch FROM (b.tat - make_interval(secs => $2 * $4) - now())))::float8",
    )
    .bind(key)
    .bind(interval)
    .bind(n as f64)
    .bind(burst.max(1) as f64)
    .fetch_one(db.pool())
    .await?;
    Ok(Duration::from_secs_f64(wait_seconds.max(0.0)))
}

/// Takes `n` tokens from `key` only if they may be used now; otherwise takes nothing and returns
/// how long until they could be (for refusals the caller shows, where a queue would be wrong).
pub async fn try_take(db: &Db, key: &str, n: u32, per_second: f64, burst: u32) -> Result<Option<Duration>> {
    if n == 0 || per_second.is_nan() || per_second <= 0.0 {
        return Ok(None);
    }
    let interval = 1.0 / per_second;
    let taken: Option<i32> = sqlx::query_scalar(
        "INSERT INTO rate_buckets AS b (key, tat) VALUES ($1, now() + make_interval(secs => $2 * $3))
         ON CONFLICT (key) DO UPDATE SET tat = greatest(b.tat, now()) + make_interval(secs => $2 * $3)
         WHERE greatest(b.tat, now()) + make_interval(secs => $2 * $3) - make_interval(secs => $2 * $4) <= now()
         RETURNING 1",
    )
    .bind(key)
    .bind(interval)
    .bind(n as f64)
    .bind(burst.max(1) as f64)
    .fetch_optional(db.pool())
    .await?;
    if taken.is_some() {
        return Ok(None);
    }
    let wait_seconds: f64 = sqlx::query_scalar(
        "SELECT greatest(0, extract(epoch FROM (greatest(tat, now()) + make_interval(secs => $2 * ($3 - $4)) - now())))::float8
         FROM rate_buckets WHERE key = $1",
    )
    .bind(key)
    .bind(interval)
    .bind(n as f64)
    .bind(burst.max(1) as f64)
    .fetch_optional(db.pool())
    .await?
    .unwrap_or(0.0);
    Ok(Some(Duration::from_secs_f64(wait_seconds.max(1.0))))
}

/// What one request left of a bucket it was counted against ([`take_one`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Allowance {
    /// Whether this request was within the rate (and so counted).
    pub allowed: bool,
    /// Requests that may still be made at once.
    pub remaining: u32,
    /// Until the bucket is full again.
    pub reset: Duration,
    /// When refused: until one request is allowed again.
    pub retry_after: Duration,
}

/// Counts one request against `key` (`burst` at once, refilled at `per_second`) if it fits,
/// in one statement, and says what is left: the numbers the IETF `RateLimit` header fields show.
pub async fn take_one(db: &Db, key: &str, per_second: f64, burst: u32) -> Result<Allowance> {
    let interval = 1.0 / per_second.max(f64::MIN_POSITIVE);
    let burst = burst.max(1) as f64;
    // `ahead`: how far the bucket's TAT is past now, in seconds, after this request (or as it
    // stands, when refused). A request fits when, with it, the TAT stays within burst·T of now.
    let (allowed, ahead): (bool, f64) = sqlx::query_as(
        "WITH taken AS (
             INSERT INTO rate_buckets AS b (key, tat) VALUES ($1, now() + make_interval(secs => $2))
             ON CONFLICT (key) DO UPDATE SET tat = greatest(b.tat, now()) + make_interval(secs => $2)
             WHERE greatest(b.tat, now()) + make_interval(secs => $2) - make_interval(secs => $2 * $3) <= now()
             RETURNING tat
         )
         SELECT true, extract(epoch FROM (tat - now()))::float8 FROM taken
         UNION ALL
         SELECT false, greatest(0, extract(epoch FROM (tat - now())))::float8 FROM rate_buckets
          WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM taken)",
    )
    .bind(key)
    .bind(interval)
    .bind(burst)
    .fetch_one(db.pool())
    .await?;
    let remaining = ((burst * interval - ahead) / interval).floor().max(0.0) as u32;
    let retry_after = if allowed { 0.0 } else { (ahead + interval - burst * interval).max(0.0) };
    Ok(Allowance {
        allowed,
        remaining,
        reset: Duration::from_secs_f64(ahead.max(0.0)),
        retry_after: Duration::from_secs_f64(retry_after),
    })
}

/// The share of an identity's rate, and of its connections, that campaigns keep while mail a
/// reader waits for (an automation step, a transactional message) has work: the rest is that
/// mail's, so a welcome never waits behind a million-reader campaign on a slow identity.
pub const BULK_SHARE: f64 = 0.8;

/// How long one sign of such work keeps its share reserved: longer than the supervisor takes to
/// start an unattended campaign again (15 s), so a campaign that stepped aside is not back on
/// the connection before the priority mail that asked for it.
const PRIORITY_DEMAND_SECONDS: f64 = 30.0;

/// The connections of `connections` a campaign may hold while priority mail waits for one: four
/// fifths, rounded down (with one connection, none: the campaign steps aside until the
/// priority mail is out).
pub fn bulk_connections(connections: u32) -> u32 {
    (f64::from(connections) * BULK_SHARE).floor() as u32
}

/// The demand row of an identity's connections (its rate's is the bucket's own name):
/// transactional mail needs no connection slot, so only an automation's loop asks for one.
fn connections_key(key: &str) -> String {
    format!("{key}#connections")
}

async fn note_demand(db: &Db, demand_key: &str) -> Result<()> {
    sqlx::query(
        "INSERT INTO priority_demand (identity_key, until) VALUES ($1, now() + make_interval(secs => $2))
         ON CONFLICT (identity_key) DO UPDATE SET until = EXCLUDED.until",
    )
    .bind(demand_key)
    .bind(PRIORITY_DEMAND_SECONDS)
    .execute(db.pool())
    .await?;
    Ok(())
}

/// Notes that priority mail found every connection of the identity `key` taken, so a campaign
/// above its share gives one up.
pub async fn note_connection_demand(db: &Db, key: &str) -> Result<()> {
    note_demand(db, &connections_key(key)).await
}

/// Whether priority mail waits for a connection of the identity `key` now.
pub async fn connections_wanted(db: &Db, key: &str) -> Result<bool> {
    Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM priority_demand WHERE identity_key = $1 AND until > now())")
        .bind(connections_key(key))
        .fetch_one(db.pool())
        .await?)
}

/// [`reserve`] for priority mail: the same bucket, and its demand noted in the same statement.
pub async fn reserve_priority(db: &Db, key: &str, n: u32, per_second: f64, burst: u32) -> Result<Duration> {
    if n == 0 || per_second.is_nan() || per_second <= 0.0 {
        note_demand(db, key).await?;
        return Ok(Duration::ZERO);
    }
    let wait_seconds: f64 = sqlx::query_scalar(
        "WITH demand AS (
             INSERT INTO priority_demand (identity_key, until) VALUES ($1, now() + make_interval(secs => $5))
             ON CONFLICT (identity_key) DO UPDATE SET until = EXCLUDED.until
         )
         INSERT INTO rate_buckets AS b (key, tat) VALUES ($1, now() + make_interval(secs => $2 * $3))
         ON CONFLICT (key) DO UPDATE SET tat = greatest(b.tat, now()) + make_interval(secs => $2 * $3)
         RETURNING greatest(0, extract(epoch FROM (b.tat - make_interval(secs => $2 * $4) - now())))::float8",
    )
    .bind(key)
    .bind(1.0 / per_second)
    .bind(n as f64)
    .bind(burst.max(1) as f64)
    .bind(PRIORITY_DEMAND_SECONDS)
    .fetch_one(db.pool())
    .await?;
    Ok(Duration::from_secs_f64(wait_seconds.max(0.0)))
}

/// A campaign's tokens: how long to wait for them, and whether priority mail waits for one of
/// the identity's connections.
#[derive(Clone, Copy, Debug)]
pub struct BulkReservation {
    pub wait: Duration,
    pub connections_wanted: bool,
}

/// [`reserve`] for a campaign: while priority mail has work on the identity, the tokens also
/// come from a second bucket (`<key>:bulk`) at [`BULK_SHARE`] of the rate, so the identity's
/// bucket keeps the rest free for that mail.
pub async fn reserve_bulk(db: &Db, key: &str, n: u32, per_second: f64, burst: u32) -> Result<BulkReservation> {
    if n == 0 || per_second.is_nan() || per_second <= 0.0 {
        return Ok(BulkReservation { wait: Duration::ZERO, connections_wanted: connections_wanted(db, key).await? });
    }
    let interval = 1.0 / per_second;
    let (wait_seconds, connections_wanted): (f64, bool) = sqlx::query_as(
        "WITH demand AS (
             SELECT EXISTS (SELECT 1 FROM priority_demand WHERE identity_key = $1 AND until > now()) AS wanted
         ),
         whole AS (
             INSERT INTO rate_buckets AS b (key, tat) VALUES ($1, now() + make_interval(secs => $2 * $3))
             ON CONFLICT (key) DO UPDATE SET tat = greatest(b.tat, now()) + make_interval(secs => $2 * $3)
             RETURNING greatest(0, extract(epoch FROM (b.tat - make_interval(secs => $2 * $4) - now())))::float8 AS wait
         ),
         share AS (
             INSERT INTO rate_buckets AS b (key, tat)
             SELECT $1 || ':bulk', now() + make_interval(secs => $5 * $3) FROM demand WHERE demand.wanted
             ON CONFLICT (key) DO UPDATE SET tat = greatest(b.tat, now()) + make_interval(secs => $5 * $3)
             RETURNING greatest(0, extract(epoch FROM (b.tat - make_interval(secs => $5 * $4) - now())))::float8 AS wait
         )
         SELECT greatest((SELECT wait FROM whole), coalesce((SELECT wait FROM share), 0))::float8,
                EXISTS (SELECT 1 FROM priority_demand WHERE identity_key = $6 AND until > now())",
    )
    .bind(key)
    .bind(interval)
    .bind(n as f64)
    .bind(burst.max(1) as f64)
    .bind(interval / BULK_SHARE)
    .bind(connections_key(key))
    .fetch_one(db.pool())
    .await?;
    Ok(BulkReservation { wait: Duration::from_secs_f64(wait_seconds.max(0.0)), connections_wanted })
}
