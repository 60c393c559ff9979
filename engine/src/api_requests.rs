//! `Idempotency-Key` on the API's POST routes: the first request with a key runs, and every
//! later one with the same key gets the first one's answer back without running again.
//!
//! A key is claimed (inserted and committed) before its request runs, so a concurrent copy sees
//! it and waits for the answer instead of running too, and a later copy replays the answer.
//! The same key with a different request (another route or another body) is refused. A request
//! refused before it did anything, because Herald was busy or unavailable (429, 503), gives its
//! key back so a retry runs; every other answer, a 500 included, is kept and replayed, since a
//! request that failed part-way may have taken effect.
//!
//! Never twice, at the price of one honest gap: when the process dies while a request runs, the
//! key stays claimed without an answer, since whether the request took effect cannot be known.
//! A later copy is told so ([`Claim::Unfinished`]) rather than run a second time.

use std::time::Duration;

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Db;

/// How long a claimed key without an answer counts as still running. Longer than any request
/// runs (a 16 MiB bulk upsert takes seconds); after it, the request that claimed the key died.
pub const RUNNING_AT_MOST: Duration = Duration::from_secs(600);

/// Keys are kept at least this long (clients retry within minutes; Stripe keeps 24 hours).
const KEPT_FOR: &str = "7 days";

/// The answer stored for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAnswer {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// What a request with a key may do.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is this request's: run it, then [`answer`] or [`release`].
    Claimed,
    /// The same request ran before: answer this.
    Replay(StoredAnswer),
    /// The same request is running now (another connection, another process).
    Running,
    /// The same request was claimed and never answered: its process stopped while running it.
    Unfinished,
}

/// A key as clients send it: 1–255 printable ASCII characters.
pub fn check_key(key: &str) -> Result<&str> {
    let key = key.trim();
    if key.is_empty() || key.len() > 255 || !key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(Error::invalid("The Idempotency-Key must be 1–255 printable ASCII characters."));
    }
    Ok(key)
}

/// Claims `key` for the request whose fingerprint is `request_sha256`.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn claim(db: &Db, tenant: TenantId, key: &str, request_sha256: &str) -> Result<Claim> {
    let mut tx = db.tenant_tx(tenant).await?;
    let inserted = sqlx::query(
        "INSERT INTO api_requests (tenant_id, idempotency_key, request_sha256) VALUES ($1, $2, $3)
         ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
    )
    .bind(tenant)
    .bind(key)
    .bind(request_sha256)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 1 {
        sqlx::query("DELETE FROM api_requests WHERE tenant_id = $1 AND created_at < now() - $2::interval")
            .bind(tenant)
            .bind(KEPT_FOR)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        return Ok(Claim::Claimed);
    }
    type Row = (String, Option<i16>, Option<String>, Option<Vec<u8>>, bool);
    let (first, status, content_type, body, overdue): Row = sqlx::query_as(
        "SELECT request_sha256, status, content_type, body, created_at < now() - make_interval(secs => $3)
           FROM api_requests WHERE tenant_id = $1 AND idempotency_key = $2",
    )
    .bind(tenant)
    .bind(key)
    .bind(RUNNING_AT_MOST.as_secs_f64())
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    if first != request_sha256 {
        return Err(Error::Invalid(herald_types::Invalid::field(
            "Idempotency-Key",
            "This Idempotency-Key was used for a different request (another route or another body). \
             Use a new key for a new request, or resend exactly the first request to get its answer.",
        )));
    }
    Ok(match status {
        Some(status) => Claim::Replay(StoredAnswer {
            status: u16::try_from(status).unwrap_or(500),
            content_type,
            body: body.unwrap_or_default(),
        }),
        None if overdue => Claim::Unfinished,
        None => Claim::Running,
    })
}

/// Stores the answer to the request that claimed `key`.
#[tracing::instrument(skip_all, fields(%tenant, status = answer.status))]
pub async fn answer(db: &Db, tenant: TenantId, key: &str, answer: &StoredAnswer) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "UPDATE api_requests SET status = $3, content_type = $4, body = $5
          WHERE tenant_id = $1 AND idempotency_key = $2 AND status IS NULL",
    )
    .bind(tenant)
    .bind(key)
    .bind(i16::try_from(answer.status).unwrap_or(500))
    .bind(&answer.content_type)
    .bind(&answer.body)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Gives `key` back: its request was refused before it did anything, so a retry runs.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn release(db: &Db, tenant: TenantId, key: &str) -> Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query("DELETE FROM api_requests WHERE tenant_id = $1 AND idempotency_key = $2 AND status IS NULL")
        .bind(tenant)
        .bind(key)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
