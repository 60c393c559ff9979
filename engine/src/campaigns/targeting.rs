//! Who a campaign with segments targets: its target lists and segments, less its exclusion, as
//! one condition tree for the database's segment compiler (`segment_where` in `engine/sql/segments.sql`).

use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::TenantId;
use crate::error::{Error, Result};
use crate::infra::db::Tx;
use herald_types::segment::Definition;

/// The tree: any of (confirmed on a target list, matches a target segment), and not the
/// excluded segment. The segments' definitions are read now; the fan-out stores the tree on
/// the campaign at its first chunk, so a segment edited mid-send changes nothing.
pub(crate) async fn tree(
    tx: &mut Tx,
    tenant: TenantId,
    lists: &[Uuid],
    segments: &[Uuid],
    exclude: Option<Uuid>,
) -> Result<Value> {
    let wanted: Vec<Uuid> = segments.iter().copied().chain(exclude).collect();
    let stored: Vec<(Uuid, String, sqlx::types::Json<Definition>)> =
        sqlx::query_as("SELECT id, name, definition FROM segments WHERE tenant_id = $1 AND id = ANY($2)")
            .bind(tenant)
            .bind(&wanted)
            .fetch_all(&mut **tx)
            .await?;
    // Each checked again against the workspace as it is now: a field deleted and made again
    // with another type, a tag or list deleted, must stop the send here with a message, not
    // fail every chunk of its fan-out.
    let mut definitions: Vec<(Uuid, Value)> = Vec::new();
    for (id, name, definition) in stored {
        let checked = match crate::audience::segments::check_definition(tx, tenant, &definition.0).await {
            Ok(d) => d,
            Err(Error::Invalid(_)) => {
                return Err(Error::invalid(format!(
                    "The segment “{name}” names a list, tag, field or campaign that changed or no longer exists: edit it first."
                )));
            }
            Err(e) => return Err(e),
        };
        definitions.push((id, serde_json::to_value(&checked).map_err(|e| Error::Unexpected(e.into()))?));
    }
    let definition = |id: Uuid| {
        definitions
            .iter()
            .find(|(d, _)| *d == id)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| Error::invalid("One of the chosen segments no longer exists."))
    };
    let mut sources: Vec<Value> =
        lists.iter().map(|l| json!({"kind": "list", "list_id": l, "state": "subscribed"})).collect();
    for s in segments {
        sources.push(definition(*s)?);
    }
    let mut rules = vec![json!({"match": "any", "rules": sources})];
    if let Some(x) = exclude {
        rules.push(json!({"not": definition(x)?}));
    }
    Ok(json!({"match": "all", "rules": rules}))
}
