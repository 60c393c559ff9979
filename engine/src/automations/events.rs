//! Reader events from the API (`POST /api/v1/readers/{id}/events`): a name and JSON data that
//! let the reader into the automations triggered by that name, the data kept on their run for
//! `{{ event.* }}` in its mail. Nothing else is stored: an event no automation waits for is
//! accepted and forgotten.
//!
//! With an idempotency key, an event is entered once however often it is sent: the key, the
//! request's hash and the answer are written in the entry's own transaction (`event_requests`),
//! so a retry after a lost reply answers the first response and enters nobody again, and two
//! concurrent copies wait on one another's insert of the key.

use herald_types::automation::{MAX_EVENT_DATA_BYTES, check_event_name};
use herald_types::{EventAccepted, Invalid, ReaderEventInput};
use sha2::{Digest, Sha256};

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Db;

#[tracing::instrument(skip_all, fields(%tenant, reader))]
pub async fn record(
    db: &Db,
    tenant: TenantId,
    reader: i64,
    input: &ReaderEventInput,
    idempotency_key: Option<&str>,
) -> Result<EventAccepted> {
    let mut problems = herald_types::Problems::default();
    let name = problems.take(check_event_name(&input.name).map_err(|e| e.at("name")));
    let data = match &input.data {
        serde_json::Value::Null => None,
        v @ serde_json::Value::Object(_) => Some(v),
        _ => {
            problems.add("data", "The data is a JSON object: {\"order\": 1234}.");
            None
        }
    };
    if data.is_some_and(|d| d.to_string().len() > MAX_EVENT_DATA_BYTES) {
        problems.add("data", format!("The data is larger than {} KiB.", MAX_EVENT_DATA_BYTES / 1024));
    }
    problems.into_result()?;
    let name = name.ok_or_else(|| Error::Invalid(Invalid::field("name", "Name the event.")))?;
    let key = idempotency_key.map(str::trim).filter(|k| !k.is_empty());
    if key.is_some_and(|k| k.len() > 255) {
        return Err(Error::invalid("The Idempotency-Key is at most 255 characters."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    if let Some(key) = key {
        let hash = hex::encode(Sha256::digest(
            serde_json::json!({"reader": reader, "name": name, "data": data}).to_string().as_bytes(),
        ));
        // A concurrent copy's insert of the same key makes this one wait for it to commit.
        let inserted = sqlx::query(
            "INSERT INTO event_requests (tenant_id, idempotency_key, request_sha256) VALUES ($1, $2, $3)
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
        )
        .bind(tenant)
        .bind(key)
        .bind(&hash)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            let (first_hash, response): (String, Option<sqlx::types::Json<EventAccepted>>) = sqlx::query_as(
                "SELECT request_sha256, response FROM event_requests WHERE tenant_id = $1 AND idempotency_key = $2",
            )
            .bind(tenant)
            .bind(key)
            .fetch_one(&mut *tx)
            .await?;
            if first_hash != hash {
                return Err(Error::Invalid(Invalid::field(
                    "Idempotency-Key",
                    "This Idempotency-Key was used for another event; use a new key for a new event.",
                )));
            }
            return response.map(|r| r.0).ok_or_else(|| Error::Conflict("This event is still being recorded.".into()));
        }
        sqlx::query("DELETE FROM event_requests WHERE tenant_id = $1 AND created_at < now() - interval '7 days'")
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
    }
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM readers WHERE tenant_id = $1 AND id = $2)")
        .bind(tenant)
        .bind(reader)
        .fetch_one(&mut *tx)
        .await?;
    if !exists {
        return Err(Error::NotFound);
    }
    let entered: i64 =
        sqlx::query_scalar("SELECT automation_enter('event', ARRAY[$1::uuid], ARRAY[$2], ARRAY[$3::bigint], $4)")
            .bind(tenant)
            .bind(&name)
            .bind(reader)
            .bind(data)
            .fetch_one(&mut *tx)
            .await?;
    let accepted = EventAccepted { entered };
    if let Some(key) = key {
        sqlx::query("UPDATE event_requests SET response = $3 WHERE tenant_id = $1 AND idempotency_key = $2")
            .bind(tenant)
            .bind(key)
            .bind(sqlx::types::Json(&accepted))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(accepted)
}
