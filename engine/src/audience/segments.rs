//! Saved segments: named condition trees over a workspace's readers, counted live in
//! the editor and targeted (or excluded) by campaigns.
//!
//! A tree is checked here against the workspace (its lists, tags, fields and campaigns exist;
//! each field condition fits the field's type) and stored normalised (a choice as the choice is
//! spelt, a number as a number, a domain in lowercase), so the database compares like with like.
//! The database compiles and evaluates it (`segment_readers`, `segment_count` in `engine/sql/segments.sql`):
//! outside row security, so every condition can use its index, with the workspace read from the
//! transaction, never from the tree.

use serde_json::Value;

pub use herald_types::segment::{Condition, Definition, Group, Rule, SegmentReader};
use herald_types::{Field, Invalid};
pub use herald_types::{Segment, SegmentId, SegmentInput};

use crate::audience::fields;
use crate::domain::{Role, TenantId};
use crate::error::{Error, Result, is_unique_violation};
use crate::infra::db::{Db, Tx};

/// Segments per workspace.
pub const MAX_SEGMENTS: i64 = 200;

type SegmentRow = (SegmentId, String, sqlx::types::Json<Definition>, chrono::DateTime<chrono::Utc>);

fn segment_of((id, name, definition, updated_at): SegmentRow) -> Segment {
    Segment { id, name, definition: definition.0, updated_at }
}

/// The workspace's segments, by name.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<Segment>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows: Vec<SegmentRow> = sqlx::query_as(
        "SELECT id, name, definition, updated_at FROM segments WHERE tenant_id = $1 ORDER BY lower(name)",
    )
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(segment_of).collect())
}

pub(crate) async fn get_in(tx: &mut Tx, tenant: TenantId, id: SegmentId) -> Result<Segment> {
    let row: Option<SegmentRow> =
        sqlx::query_as("SELECT id, name, definition, updated_at FROM segments WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?;
    row.map(segment_of).ok_or(Error::NotFound)
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn get(db: &Db, tenant: TenantId, id: SegmentId) -> Result<Segment> {
    let mut tx = db.tenant_tx(tenant).await?;
    let s = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(s)
}

/// Adds a segment; a name taken (in any case) is 409.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create(db: &Db, tenant: TenantId, role: Role, input: &SegmentInput) -> Result<Segment> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let definition = check(&mut tx, tenant, input).await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM segments WHERE tenant_id = $1")
        .bind(tenant)
        .fetch_one(&mut *tx)
        .await?;
    if count >= MAX_SEGMENTS {
        return Err(Error::invalid(format!("A workspace can have at most {MAX_SEGMENTS} segments.")));
    }
    let row: SegmentRow = sqlx::query_as(
        "INSERT INTO segments (tenant_id, id, name, definition) VALUES ($1, $2, $3, $4)
         RETURNING id, name, definition, updated_at",
    )
    .bind(tenant)
    .bind(SegmentId::new())
    .bind(input.name.trim())
    .bind(sqlx::types::Json(&definition))
    .fetch_one(&mut *tx)
    .await
    .map_err(name_taken)?;
    tx.commit().await?;
    Ok(segment_of(row))
}

/// Replaces a segment's name and tree. A send already running keeps the tree it started with.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn update(db: &Db, tenant: TenantId, role: Role, id: SegmentId, input: &SegmentInput) -> Result<Segment> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let definition = check(&mut tx, tenant, input).await?;
    let row: Option<SegmentRow> = sqlx::query_as(
        "UPDATE segments SET name = $3, definition = $4, updated_at = now() WHERE tenant_id = $1 AND id = $2
         RETURNING id, name, definition, updated_at",
    )
    .bind(tenant)
    .bind(id)
    .bind(input.name.trim())
    .bind(sqlx::types::Json(&definition))
    .fetch_optional(&mut *tx)
    .await
    .map_err(name_taken)?;
    let row = row.ok_or(Error::NotFound)?;
    tx.commit().await?;
    Ok(segment_of(row))
}

fn name_taken(e: sqlx::Error) -> Error {
    if is_unique_violation(&e, "segments_tenant_name_key") {
        Error::Invalid(Invalid::field("name", "Another segment has this name."))
    } else {
        e.into()
    }
}

/// Deletes a segment no campaign still to send targets or excludes (409 names the campaign).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: SegmentId) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    get_in(&mut tx, tenant, id).await?;
    let user: Option<String> = sqlx::query_scalar(
        "SELECT name FROM campaigns WHERE tenant_id = $1 AND ($2 = ANY(segment_ids) OR exclude_segment_id = $2)
           AND status NOT IN ('sent', 'cancelled') LIMIT 1",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(name) = user {
        return Err(Error::Conflict(format!("The campaign “{name}” uses this segment: change its audience first.")));
    }
    let automation: Option<String> = sqlx::query_scalar(
        "SELECT name FROM automations WHERE tenant_id = $1 AND status <> 'archived'
           AND steps @> jsonb_build_array(jsonb_build_object('action',
                 jsonb_build_object('condition', jsonb_build_object('segment_id', $2::text)))) LIMIT 1",
    )
    .bind(tenant)
    .bind(id.to_string())
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(name) = automation {
        return Err(Error::Conflict(format!(
            "The automation “{name}” branches on this segment: change that step first."
        )));
    }
    sqlx::query("DELETE FROM segments WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Live counts and previews asked for one at a time (the segment editor, the API's count
/// routes), per workspace and shared by every process: each can read all of the workspace's
/// readers, so a steady few per second with room for an editor's burst of edits, and a clear
/// "wait" past that instead of one workspace's loop of counts keeping Postgres busy for all.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn take_count_allowance(db: &Db, tenant: TenantId) -> Result<()> {
    const PER_SECOND: f64 = 10.0;
    const BURST: u32 = 60;
    match crate::sending::rate::try_take(db, &format!("segment-counts:{tenant}"), 1, PER_SECOND, BURST).await? {
        None => Ok(()),
        Some(wait) => Err(Error::Busy {
            message: "Too many counts in this workspace at once; the numbers come back in a moment.".into(),
            retry_after_secs: wait.as_secs().max(1),
        }),
    }
}

/// How many of the workspace's readers match `definition` (checked first, so the editor's
/// live count shows a problem beside its condition instead of a number).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn count(db: &Db, tenant: TenantId, definition: &Definition) -> Result<i64> {
    let mut tx = db.tenant_tx(tenant).await?;
    let definition = check_definition(&mut tx, tenant, definition).await?;
    let n = count_in(&mut tx, &definition).await?;
    tx.commit().await?;
    Ok(n)
}

pub(crate) async fn count_in(tx: &mut Tx, definition: &Definition) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT segment_count($1)").bind(sqlx::types::Json(definition)).fetch_one(&mut **tx).await?)
}

/// How many readers match `definition`, and the newest `limit` of them: one check of the tree
/// and one transaction for the editor's live count and list.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn preview(
    db: &Db,
    tenant: TenantId,
    definition: &Definition,
    limit: i64,
) -> Result<(i64, Vec<SegmentReader>)> {
    let mut tx = db.tenant_tx(tenant).await?;
    let definition = check_definition(&mut tx, tenant, definition).await?;
    let count = count_in(&mut tx, &definition).await?;
    let rows = sqlx::query_as(
        "SELECT r.id, r.email, r.name FROM segment_readers($2, NULL, NULL, $3) AS m(id)
         JOIN readers r ON r.tenant_id = $1 AND r.id = m.id ORDER BY r.id DESC",
    )
    .bind(tenant)
    .bind(sqlx::types::Json(&definition))
    .bind(limit.clamp(1, 100) as i32)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok((count, rows))
}

/// The input's checks, then the tree's against the workspace; the tree as stored.
async fn check(tx: &mut Tx, tenant: TenantId, input: &SegmentInput) -> Result<Definition> {
    let fields = fields::list_in(tx, tenant).await?;
    let mut problems = herald_types::Problems::default();
    problems.check(input.validate(&fields));
    problems.check(references(tx, tenant, &input.definition).await?);
    problems.into_result()?;
    Ok(normalised(&input.definition, &fields))
}

pub(crate) async fn check_definition(tx: &mut Tx, tenant: TenantId, definition: &Definition) -> Result<Definition> {
    let fields = fields::list_in(tx, tenant).await?;
    let mut problems = herald_types::Problems::default();
    problems.check(definition.validate(&fields));
    problems.check(references(tx, tenant, definition).await?);
    problems.into_result()?;
    Ok(normalised(definition, &fields))
}

/// Each list, tag and campaign a condition names must be the workspace's; problems keyed by
/// where the condition is (`rules.1.conditions.0.list_id`).
async fn references(
    tx: &mut Tx,
    tenant: TenantId,
    definition: &Definition,
) -> Result<std::result::Result<(), Invalid>> {
    let mut problems = herald_types::Problems::default();
    for (path, condition) in paths(definition) {
        let (table, id, part, what) = match condition {
            Condition::List { list_id, .. } => ("lists", list_id.0, "list_id", "Choose one of the workspace's lists."),
            Condition::Tag { tag_id, .. } => ("tags", tag_id.0, "tag_id", "Choose one of the workspace's tags."),
            Condition::Opened { campaign_id: Some(c), .. } | Condition::Clicked { campaign_id: Some(c), .. } => {
                ("campaigns", c.0, "campaign_id", "Choose one of the workspace's campaigns.")
            }
            _ => continue,
        };
        // `table` is one of three fixed names above.
        let known: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT EXISTS (SELECT 1 FROM {table} WHERE tenant_id = $1 AND id = $2)"
        )))
        .bind(tenant)
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
        if !known {
            problems.add(&format!("{path}.{part}"), what);
        }
    }
    Ok(problems.into_result())
}

/// Every condition with its path in the tree (`rules.0`, `rules.1.conditions.2`).
fn paths(definition: &Definition) -> Vec<(String, &Condition)> {
    let mut out = Vec::new();
    for (i, rule) in definition.rules.iter().enumerate() {
        match rule {
            Rule::Condition(c) => out.push((format!("rules.{i}"), c)),
            Rule::Group(g) => {
                out.extend(g.conditions.iter().enumerate().map(|(j, c)| (format!("rules.{i}.conditions.{j}"), c)))
            }
        }
    }
    out
}

/// The tree with its values as the database compares them: field values as the field stores
/// them (a choice spelt as the choice, a number in plain form, yes/no as `true`/`false`), a
/// domain in lowercase without `@`.
fn normalised(definition: &Definition, fields: &[Field]) -> Definition {
    let fix = |c: &Condition| -> Condition {
        match c {
            Condition::Field { key, op, value, value2, days } => {
                let field = fields.iter().find(|f| &f.key == key);
                let plain = |raw: &str| -> String {
                    match field.map(|f| f.parse_text(raw)) {
                        Some(Ok(Some(Value::String(s)))) => s,
                        Some(Ok(Some(v))) => v.to_string(),
                        _ => raw.trim().to_string(),
                    }
                };
                let compares_text =
                    matches!(op, herald_types::segment::FieldOp::Contains | herald_types::segment::FieldOp::StartsWith);
                let (value, value2) =
                    if compares_text { (value.clone(), value2.clone()) } else { (plain(value), plain(value2)) };
                Condition::Field { key: key.clone(), op: *op, value, value2, days: *days }
            }
            Condition::SignedUp { op, value, days } => Condition::SignedUp {
                op: *op,
                value: herald_types::segment::parse_day(value)
                    .map_or_else(|| value.trim().to_string(), |d| d.format("%Y-%m-%d").to_string()),
                days: *days,
            },
            Condition::EmailDomain { domain, is } => {
                Condition::EmailDomain { domain: domain.trim().trim_start_matches('@').to_lowercase(), is: *is }
            }
            other => other.clone(),
        }
    };
    Definition {
        match_: definition.match_,
        rules: definition
            .rules
            .iter()
            .map(|r| match r {
                Rule::Condition(c) => Rule::Condition(fix(c)),
                Rule::Group(g) => {
                    Rule::Group(Group { match_: g.match_, conditions: g.conditions.iter().map(fix).collect() })
                }
            })
            .collect(),
    }
}
