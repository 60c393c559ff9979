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
