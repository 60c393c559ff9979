//! Lists: named groups of readers, each with an opt-in mode and a visibility.

use crate::domain::{ListId, Role, Slug, TenantId};
use crate::error::{Context, Error, Result, is_unique_violation};
use crate::infra::db::Db;

pub use herald_types::{List, ListInput, ListWithCounts, OptIn, Visibility};

const COLUMNS: &str = "id, name, slug, description, opt_in, visibility, created_at";

fn slug_taken(e: sqlx::Error, slug: &Slug) -> Error {
    if is_unique_violation(&e, "lists_tenant_id_slug_key") {
        Error::Conflict(format!("Another list already uses the address “{slug}”."))
    } else {
        e.into()
    }
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create(db: &Db, tenant: TenantId, role: Role, input: &ListInput) -> Result<List> {
    role.require(Role::Author)?;
    let (name, slug) = input.check()?;
    let mut tx = db.tenant_tx(tenant).await.context("creating a list")?;
    let list = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO lists (id, tenant_id, name, slug, description, opt_in, visibility)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    )))
    .bind(ListId::new())
    .bind(tenant)
    .bind(name)
    .bind(slug.as_str())
    .bind(input.description.trim())
    .bind(input.opt_in)
    .bind(input.visibility)
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| slug_taken(e, &slug))?;
    tx.commit().await.context("creating a list")?;
    Ok(list)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn update(db: &Db, tenant: TenantId, role: Role, id: ListId, input: &ListInput) -> Result<List> {
    role.require(Role::Author)?;
    let (name, slug) = input.check()?;
    let mut tx = db.tenant_tx(tenant).await.context("updating a list")?;
    let list = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE lists SET name = $3, slug = $4, description = $5, opt_in = $6, visibility = $7, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(name)
    .bind(slug.as_str())
    .bind(input.description.trim())
    .bind(input.opt_in)
    .bind(input.visibility)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| slug_taken(e, &slug))?
    .ok_or(Error::NotFound)?;
    tx.commit().await.context("updating a list")?;
    Ok(list)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: ListId) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await.context("deleting a list")?;
    let n = sqlx::query("DELETE FROM lists WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await
        .context("deleting a list")?
        .rows_affected();
    tx.commit().await.context("deleting a list")?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn get(db: &Db, tenant: TenantId, id: ListId) -> Result<List> {
    let mut tx = db.tenant_tx(tenant).await.context("loading a list")?;
    let list =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM lists WHERE tenant_id = $1 AND id = $2")))
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .context("loading a list")?
            .ok_or(Error::NotFound)?;
    tx.commit().await.context("loading a list")?;
    Ok(list)
}

/// Every list with its subscription counts, by name. The counts are kept by a trigger on
/// `subscriptions` (`list_counts_apply` in `engine/sql/tracking.sql`), so this costs the same at ten readers or ten million.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn with_counts(db: &Db, tenant: TenantId) -> Result<Vec<ListWithCounts>> {
    let mut tx = db.tenant_tx(tenant).await.context("listing lists with their counts")?;
    let rows = sqlx::query_as(
        "SELECT l.id, l.name, l.slug, l.description, l.opt_in, l.visibility, l.created_at,
                coalesce(sum(c.n) FILTER (WHERE c.status = 'confirmed'), 0)::bigint AS confirmed,
                coalesce(sum(c.n) FILTER (WHERE c.status = 'unconfirmed'), 0)::bigint AS unconfirmed,
                coalesce(sum(c.n) FILTER (WHERE c.status = 'unsubscribed'), 0)::bigint AS unsubscribed
         FROM lists l LEFT JOIN list_counts c ON c.list_id = l.id
         WHERE l.tenant_id = $1
         GROUP BY l.id ORDER BY lower(l.name)",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await
    .context("listing lists with their counts")?;
    tx.commit().await.context("listing lists with their counts")?;
    Ok(rows)
}

/// The lists offered on the hosted subscribe page and the preference center.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn public(db: &Db, tenant: TenantId) -> Result<Vec<List>> {
    let mut tx = db.tenant_tx(tenant).await.context("listing public lists")?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM lists WHERE tenant_id = $1 AND visibility = 'public' ORDER BY lower(name)"
    )))
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await
    .context("listing public lists")?;
    tx.commit().await.context("listing public lists")?;
    Ok(rows)
}
