//! Reader events from the API (`POST /api/v1/readers/{id}/events`): a name and JSON data that
//! let the reader into the automations triggered by that name, the data kept on their run for
//! `{{ event.* }}` in its mail. Nothing else is stored: an event no automation waits for is
//! accepted and forgotten.

use herald_types::automation::{MAX_EVENT_DATA_BYTES, check_event_name};
use herald_types::{EventAccepted, Invalid, ReaderEventInput};

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Db;

#[tracing::instrument(skip_all, fields(%tenant, reader))]
pub async fn record(db: &Db, tenant: TenantId, reader: i64, input: &ReaderEventInput) -> Result<EventAccepted> {
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
    let mut tx = db.tenant_tx(tenant).await?;
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
    tx.commit().await?;
    Ok(EventAccepted { entered })
}
