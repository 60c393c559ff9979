//! Tags on readers: a workspace's own names for groups of readers, added and removed
//! by hand on the reader page, in bulk on the readers list, through the API, from an import
//! column, and later by automations. Segments and automations read them.
//!
//! Names are case-insensitively unique per workspace: "VIP" and "vip" are one tag, shown as it
//! was first written (a rename changes that). Tagging names tags, creating the ones that do not
//! exist yet, so a typo makes a new tag; the tags page lists them with their counts to rename
//! or delete. Every statement is set-based: tagging everyone matching a filter is one insert.

use herald_types::Invalid;
pub use herald_types::{Tag, TagId};

use crate::domain::{Role, TenantId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::{Db, Tx};

/// More tags than anyone can use in a segment editor; bounds what one workspace can make.
pub const MAX_TAGS_PER_WORKSPACE: i64 = 1_000;

/// Checked names: trimmed, one line, 1–50 characters, no commas (commas separate tags in an
/// import column and in the bulk form), each once whatever its case.
pub fn check_names<S: AsRef<str>>(names: &[S]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let name = herald_types::check_tag_name(name.as_ref())
            .map_err(|e| Error::Invalid(Invalid::field("tags", e.to_string())))?;
        if !out.iter().any(|n| n.to_lowercase() == name.to_lowercase()) {
            out.push(name);
        }
    }
    if out.is_empty() {
        return Err(Error::Invalid(Invalid::field("tags", "Name at least one tag.")));
    }
    Ok(out)
}

/// The workspace's tags, by name, with how many readers carry each.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<Tag>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let tags = sqlx::query_as(
        "SELECT t.id, t.name, (SELECT count(*) FROM reader_tags rt WHERE rt.tenant_id = $1 AND rt.tag_id = t.id) AS readers
         FROM tags t WHERE t.tenant_id = $1 ORDER BY lower(t.name)",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(tags)
}

/// One reader's tags, by name (empty for a reader of another workspace: row security).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn of_reader(db: &Db, tenant: TenantId, reader: i64) -> Result<Vec<String>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let names = of_reader_in(&mut tx, tenant, reader).await?;
    tx.commit().await?;
    Ok(names)
}

pub(crate) async fn of_reader_in(tx: &mut Tx, tenant: TenantId, reader: i64) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT t.name FROM reader_tags rt JOIN tags t ON t.tenant_id = rt.tenant_id AND t.id = rt.tag_id
         WHERE rt.tenant_id = $1 AND rt.reader_id = $2 ORDER BY lower(t.name)",
    )
    .bind(tenant)
    .bind(reader)
    .fetch_all(&mut **tx)
    .await?)
}

/// The ids of `names` (checked), creating those the workspace does not have yet.
async fn ensure(tx: &mut Tx, tenant: TenantId, names: &[String]) -> Result<Vec<uuid::Uuid>> {
    let existing: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tags WHERE tenant_id = $1").bind(tenant).fetch_one(&mut **tx).await?;
    // Case is folded by Postgres throughout (`lower`), as the unique index folds it.
    let new: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT lower(n)) FROM unnest($2::text[]) AS n
         WHERE NOT EXISTS (SELECT 1 FROM tags WHERE tenant_id = $1 AND lower(name) = lower(n))",
    )
    .bind(tenant)
    .bind(names)
    .fetch_one(&mut **tx)
    .await?;
    if new > 0 && existing + new > MAX_TAGS_PER_WORKSPACE {
        return Err(Error::Invalid(Invalid::field(
            "tags",
            format!("A workspace can have at most {MAX_TAGS_PER_WORKSPACE} tags: delete some on the Tags page first."),
        )));
    }
    sqlx::query(
        "INSERT INTO tags (tenant_id, id, name) SELECT $1, gen_random_uuid(), n FROM unnest($2::text[]) AS n
         ON CONFLICT (tenant_id, lower(name)) DO NOTHING",
    )
    .bind(tenant)
    .bind(names)
    .execute(&mut **tx)
    .await?;
    Ok(sqlx::query_scalar(
        "SELECT id FROM tags WHERE tenant_id = $1 AND lower(name) IN (SELECT lower(n) FROM unnest($2::text[]) AS n)",
    )
    .bind(tenant)
    .bind(names)
    .fetch_all(&mut **tx)
    .await?)
}

/// Tags `readers` (ids of this workspace's readers; others are ignored) with `names`, creating
/// the tags that do not exist. Returns how many (reader, tag) pairs were new.
pub(crate) async fn tag_in(tx: &mut Tx, tenant: TenantId, readers: &[i64], names: &[String]) -> Result<u64> {
    if readers.is_empty() || names.is_empty() {
        return Ok(0);
    }
    let tags = ensure(tx, tenant, names).await?;
    Ok(sqlx::query(
        "INSERT INTO reader_tags (tenant_id, tag_id, reader_id)
         SELECT $1, t.id, r.id FROM unnest($2::uuid[]) AS t(id)
         CROSS JOIN unnest($3::bigint[]) AS b(id) JOIN readers r ON r.tenant_id = $1 AND r.id = b.id
         ON CONFLICT DO NOTHING",
    )
    .bind(tenant)
    .bind(&tags)
    .bind(readers)
    .execute(&mut **tx)
    .await?
    .rows_affected())
}

/// Tags each reader with its own names (`(reader, name)` pairs: an import's or a bulk request's
/// rows), creating the tags that do not exist. Returns how many pairs were new.
pub(crate) async fn tag_pairs_in(tx: &mut Tx, tenant: TenantId, pairs: &[(i64, String)]) -> Result<u64> {
    if pairs.is_empty() {
        return Ok(0);
    }
    let names: Vec<String> = pairs.iter().map(|(_, n)| n.clone()).collect();
    ensure(tx, tenant, &check_names(&names)?).await?;
    let readers: Vec<i64> = pairs.iter().map(|(r, _)| *r).collect();
    Ok(sqlx::query(
        "INSERT INTO reader_tags (tenant_id, tag_id, reader_id)
         SELECT $1, t.id, p.r FROM unnest($2::bigint[], $3::text[]) AS p(r, n)
         JOIN tags t ON t.tenant_id = $1 AND lower(t.name) = lower(p.n)
         JOIN readers rd ON rd.tenant_id = $1 AND rd.id = p.r
         ON CONFLICT DO NOTHING",
    )
    .bind(tenant)
    .bind(&readers)
    .bind(&names)
    .execute(&mut **tx)
    .await?
    .rows_affected())
}

/// Removes `names` from `readers`. Names that are no tag are nothing to remove. Returns how
/// many (reader, tag) pairs went.
pub(crate) async fn untag_in(tx: &mut Tx, tenant: TenantId, readers: &[i64], names: &[String]) -> Result<u64> {
    Ok(sqlx::query(
        "DELETE FROM reader_tags rt USING tags t
         WHERE rt.tenant_id = $1 AND t.tenant_id = $1 AND t.id = rt.tag_id
           AND lower(t.name) IN (SELECT lower(n) FROM unnest($2::text[]) AS n) AND rt.reader_id = ANY($3)",
    )
    .bind(tenant)
    .bind(names)
    .bind(readers)
    .execute(&mut **tx)
    .await?
    .rows_affected())
}

/// Adds `names` to one reader (the reader page, the API) and returns its tags after.
#[tracing::instrument(skip_all, fields(%tenant, reader))]
pub async fn add_to_reader(
    db: &Db,
    tenant: TenantId,
    role: Role,
    reader: i64,
    names: &[String],
) -> Result<Vec<String>> {
    change_reader(db, tenant, role, reader, names, true).await
}

/// Removes `names` from one reader and returns its tags after.
#[tracing::instrument(skip_all, fields(%tenant, reader))]
pub async fn remove_from_reader(
    db: &Db,
    tenant: TenantId,
    role: Role,
    reader: i64,
    names: &[String],
) -> Result<Vec<String>> {
    change_reader(db, tenant, role, reader, names, false).await
}

async fn change_reader(
    db: &Db,
    tenant: TenantId,
    role: Role,
    reader: i64,
    names: &[String],
    add: bool,
) -> Result<Vec<String>> {
    role.require(Role::Author)?;
    let names = check_names(names)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM readers WHERE tenant_id = $1 AND id = $2)")
        .bind(tenant)
        .bind(reader)
        .fetch_one(&mut *tx)
        .await?;
    if !exists {
        return Err(Error::NotFound);
    }
    if add {
        tag_in(&mut tx, tenant, &[reader], &names).await?;
    } else {
        untag_in(&mut tx, tenant, &[reader], &names).await?;
    }
    let after = of_reader_in(&mut tx, tenant, reader).await?;
    tx.commit().await?;
    Ok(after)
}

/// Renames a tag; a name another tag has is a `Conflict` (delete one, or rename it first).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn rename(db: &Db, tenant: TenantId, role: Role, id: TagId, name: &str) -> Result<Tag> {
    role.require(Role::Author)?;
    let name = herald_types::check_tag_name(name).map_err(|e| Error::Invalid(Invalid::field("name", e.to_string())))?;
    let mut tx = db.tenant_tx(tenant).await?;
    let renamed = sqlx::query_as(
        "UPDATE tags t SET name = $3 WHERE t.tenant_id = $1 AND t.id = $2
         RETURNING t.id, t.name, (SELECT count(*) FROM reader_tags rt WHERE rt.tenant_id = $1 AND rt.tag_id = t.id) AS readers",
    )
    .bind(tenant)
    .bind(id)
    .bind(&name)
    .fetch_optional(&mut *tx)
    .await;
    let tag = match renamed {
        Ok(Some(tag)) => tag,
        Ok(None) => return Err(Error::NotFound),
        Err(e) if is_unique_violation(&e, "tags_tenant_name_key") => {
            return Err(Error::Conflict(format!("Another tag is called “{name}”.")));
        }
        Err(e) => return Err(e.into()),
    };
    tx.commit().await?;
    Ok(tag)
}

/// Deletes a tag and takes it off every reader.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: TagId) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("DELETE FROM tags WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(Error::NotFound);
    }
    tx.commit().await?;
    Ok(())
}
