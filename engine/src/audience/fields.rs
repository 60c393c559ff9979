//! Custom fields: a workspace's typed reader fields, and the check every write of a
//! reader's attributes goes through (the reader page, the API, the bulk endpoint, imports), so a
//! number field never holds "twelve" and a date field only ISO days. A value of the wrong type is
//! refused with an error keyed by the field (`attributes.<key>`); attributes that are no field
//! are kept as they come (the API's free-form attributes predate fields).

use serde_json::{Map, Value};

pub use herald_types::{Field, FieldInput, FieldKind};
use herald_types::{Invalid, Problems};

use crate::domain::{Role, TenantId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::{Db, Tx};

type FieldRow = (String, String, String, sqlx::types::Json<Vec<String>>);

fn field_of((key, label, kind, choices): FieldRow) -> Result<Field> {
    Ok(Field { key, label, kind: kind.parse()?, choices: choices.0 })
}

/// The workspace's fields, in their order.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<Field>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let fields = list_in(&mut tx, tenant).await?;
    tx.commit().await?;
    Ok(fields)
}

pub(crate) async fn list_in(tx: &mut Tx, tenant: TenantId) -> Result<Vec<Field>> {
    let rows: Vec<FieldRow> =
        sqlx::query_as("SELECT key, label, kind, choices FROM fields WHERE tenant_id = $1 ORDER BY position, key")
            .bind(tenant)
            .fetch_all(&mut **tx)
            .await?;
    rows.into_iter().map(field_of).collect()
}

/// Adds a field. Its key is taken (409) if another field has it.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create(db: &Db, tenant: TenantId, role: Role, input: &FieldInput) -> Result<Field> {
    role.require(Role::Author)?;
    input.validate()?;
    let mut tx = db.tenant_tx(tenant).await?;
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM fields WHERE tenant_id = $1").bind(tenant).fetch_one(&mut *tx).await?;
    if count as usize >= herald_types::field::MAX_FIELDS {
        return Err(Error::invalid(format!(
            "A workspace can have at most {} fields.",
            herald_types::field::MAX_FIELDS
        )));
    }
    let choices: Vec<String> = input.choices.iter().map(|c| c.trim().to_string()).collect();
    let row = sqlx::query_as(
        "INSERT INTO fields (tenant_id, key, label, kind, choices, position)
         VALUES ($1, $2, $3, $4, $5, (SELECT coalesce(max(position), 0) + 1 FROM fields WHERE tenant_id = $1))
         RETURNING key, label, kind, choices",
    )
    .bind(tenant)
    .bind(&input.key)
    .bind(input.label.trim())
    .bind(input.kind.as_str())
    .bind(sqlx::types::Json(&choices))
    .fetch_one(&mut *tx)
    .await;
    let field = match row {
        Ok(row) => field_of(row)?,
        Err(e) if is_unique_violation(&e, "fields_pkey") => {
            return Err(Error::Invalid(Invalid::field(
                "key",
                format!("A field with the key {} exists already.", input.key),
            )));
        }
        Err(e) => return Err(e.into()),
    };
    tx.commit().await?;
    Ok(field)
}

/// Changes a field's label and choices; its key and type stay (values are stored by them).
#[tracing::instrument(skip_all, fields(%tenant, key))]
pub async fn update(db: &Db, tenant: TenantId, role: Role, key: &str, input: &FieldInput) -> Result<Field> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let current = list_in(&mut tx, tenant).await?.into_iter().find(|f| f.key == key).ok_or(Error::NotFound)?;
    if input.kind != current.kind {
        return Err(Error::Invalid(Invalid::field("kind", "A field's type cannot change: add a new field instead.")));
    }
    FieldInput { key: key.to_string(), ..input.clone() }.validate()?;
    let choices: Vec<String> = input.choices.iter().map(|c| c.trim().to_string()).collect();
    let row = sqlx::query_as(
        "UPDATE fields SET label = $3, choices = $4 WHERE tenant_id = $1 AND key = $2 RETURNING key, label, kind, choices",
    )
    .bind(tenant)
    .bind(key)
    .bind(input.label.trim())
    .bind(sqlx::types::Json(&choices))
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    field_of(row)
}

/// Deletes a field and its value on every reader.
#[tracing::instrument(skip_all, fields(%tenant, key))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, key: &str) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("DELETE FROM fields WHERE tenant_id = $1 AND key = $2")
        .bind(tenant)
        .bind(key)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(Error::NotFound);
    }
    sqlx::query(
        "UPDATE readers SET attributes = attributes - $2, updated_at = now() WHERE tenant_id = $1 AND attributes ? $2",
    )
    .bind(tenant)
    .bind(key)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// `attributes` with every field's value checked and normalised (`"12"` → `12` for a number);
/// a `null` (no value) passes. Problems are keyed `attributes.<key>`, all at once.
pub fn check_attributes(
    fields: &[Field],
    attributes: &Map<String, Value>,
) -> std::result::Result<Map<String, Value>, Invalid> {
    let mut problems = Problems::default();
    let mut out = Map::new();
    for (key, value) in attributes {
        match fields.iter().find(|f| &f.key == key) {
            Some(_) if value.is_null() => {
                out.insert(key.clone(), Value::Null);
            }
            Some(field) => match field.check(value) {
                Ok(v) => {
                    out.insert(key.clone(), v);
                }
                Err(why) => problems.add(&format!("attributes.{key}"), why),
            },
            None => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    problems.into_result().map(|()| out)
}
