//! Readers (subscribers) as authors see them: search and filter with keyset pagination, the
//! detail page, edits, GDPR export and erasure.

use chrono::Utc;
use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::{Postgres, QueryBuilder};

use super::consent::{self, ConsentEvent, Origin};
use crate::domain::{Email, ListId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Db;

pub use herald_types::{Reader, ReaderPage, ReaderStatus, Subscription, SubscriptionStatus};

/// An attribute condition from the audience filter: `city = "Lyon"` or `plan in ["pro", "team"]`.
#[derive(Clone, Debug, PartialEq)]
pub enum AttributeCondition {
    Equals(String, Value),
    In(String, Vec<Value>),
}

impl AttributeCondition {
    /// Parses `key = <json>` or `key in [<json>, …]`. Keys are letters, digits, `_` and `-`.
    pub fn parse(raw: &str) -> Result<Self> {
        let bad = || Error::invalid("Write the condition as  city = \"Lyon\"  or  plan in [\"pro\", \"team\"].");
        let raw = raw.trim();
        let (key, rest, is_in) = if let Some((k, v)) = raw.split_once('=') {
            (k.trim(), v.trim(), false)
        } else {
            let lower = raw.to_lowercase();
            let at = lower.find(" in ").ok_or_else(bad)?;
            (raw[..at].trim(), raw[at + 4..].trim(), true)
        };
        let key = key.strip_prefix("attributes.").unwrap_or(key);
        if key.is_empty() || !key.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') {
            return Err(bad());
        }
        let value: Value = serde_json::from_str(rest).map_err(|_| bad())?;
        match (is_in, value) {
            (true, Value::Array(items)) if !items.is_empty() => Ok(Self::In(key.to_string(), items)),
            (false, v) if !v.is_array() && !v.is_object() => Ok(Self::Equals(key.to_string(), v)),
            _ => Err(bad()),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ReaderFilter {
    /// Matches email or name (case-insensitive substring).
    pub search: Option<String>,
    pub list: Option<ListId>,
    pub status: Option<ReaderStatus>,
    pub attribute: Option<AttributeCondition>,
    /// Readers with this tag (its name, any case).
    pub tag: Option<String>,
}

/// Appends the bound arguments of the `search_readers` SQL function (`engine/sql/readers.sql`) for this
/// filter: pattern, status, list, attribute conditions. The function runs outside row-level
/// security (so LIKE and `@>` can use their indexes) and confines itself to the transaction's
/// tenant; every filtered query in Herald goes through it, so there is one filter implementation.
fn push_filter_args(q: &mut QueryBuilder<Postgres>, f: &ReaderFilter) -> Result<()> {
    let pattern = f
        .search
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| format!("%{}%", s.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
    // `attributes @> {"k": v}` per accepted value, OR'ed: each uses the jsonb_path_ops GIN index.
    let attributes: Vec<Value> = match &f.attribute {
        None => Vec::new(),
        Some(AttributeCondition::Equals(k, v)) => vec![serde_json::json!({ k: v })],
        Some(AttributeCondition::In(k, vs)) => vs.iter().map(|v| serde_json::json!({ k: v })).collect(),
    };
    q.push_bind(pattern).push(", ").push_bind(f.status).push(", ").push_bind(f.list);
    q.push(", ").push_bind(attributes).push("::jsonb[]");
    Ok(())
}

/// The `p_tag` argument of `search_readers` (`engine/sql/readers.sql`), after the paging arguments.
fn push_tag_arg(q: &mut QueryBuilder<Postgres>, f: &ReaderFilter) {
    q.push_bind(f.tag.as_deref().map(str::trim).filter(|t| !t.is_empty()).map(str::to_string));
}

/// Appends `AND r.id IN (readers matching the filter)` to a query over `readers r`.
pub(crate) fn push_filter(q: &mut QueryBuilder<Postgres>, f: &ReaderFilter) -> Result<()> {
    q.push(" AND r.id IN (SELECT id FROM search_readers(");
    push_filter_args(q, f)?;
    q.push(", NULL, NULL, ");
    push_tag_arg(q, f);
    q.push("))");
    Ok(())
}

/// Newest first, `limit` per page, continuing below `before` (keyset pagination: every page
/// costs the same however deep it is).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn search(
    db: &Db,
    tenant: TenantId,
    f: &ReaderFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<ReaderPage> {
    let limit = limit.clamp(1, 500);
    let mut q = QueryBuilder::<Postgres>::new(
        "SELECT id, email, name, attributes, status, created_at, updated_at FROM search_readers(",
    );
    push_filter_args(&mut q, f)?;
    q.push(", ").push_bind(before).push(", ").push_bind((limit + 1) as i32).push(", ");
    push_tag_arg(&mut q, f);
    q.push(")");
    let mut tx = db.tenant_tx(tenant).await?;
    let mut readers: Vec<Reader> = q.build_query_as().fetch_all(&mut *tx).await?;
    tx.commit().await?;
    let next_before = if readers.len() as i64 > limit {
        readers.truncate(limit as usize);
        readers.last().map(|r| r.id)
    } else {
        None
    };
    Ok(ReaderPage { readers, next_before })
}

#[derive(Clone, Debug, Serialize)]
pub struct ReaderDetail {
    pub reader: Reader,
    pub subscriptions: Vec<Subscription>,
    pub consent: Vec<ConsentEvent>,
    pub suppressed: Option<super::suppressions::SuppressionReason>,
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn detail(db: &Db, tenant: TenantId, id: i64) -> Result<ReaderDetail> {
    let mut tx = db.tenant_tx(tenant).await?;
    let reader: Reader = sqlx::query_as(
        "SELECT id, email, name, attributes, status, created_at, updated_at FROM readers WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    let subscriptions = sqlx::query_as(
        "SELECT s.list_id, l.name AS list_name, s.status, s.created_at, s.confirmed_at, s.unsubscribed_at
         FROM subscriptions s JOIN lists l ON l.id = s.list_id WHERE s.tenant_id = $1 AND s.reader_id = $2 ORDER BY lower(l.name)",
    )
    .bind(tenant)
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    let consent = consent::for_reader(&mut tx, tenant, id).await?;
    let suppressed = super::suppressions::is_suppressed(&mut tx, tenant, &reader.email).await?;
    tx.commit().await?;
    Ok(ReaderDetail { reader, subscriptions, consent, suppressed })
}

/// Edits a reader's name and attributes (an object).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn update(
    db: &Db,
    tenant: TenantId,
    role: Role,
    id: i64,
    name: &str,
    attributes: Value,
    origin: &Origin,
) -> Result<Reader> {
    role.require(Role::Author)?;
    let Value::Object(attributes) = attributes else {
        return Err(Error::invalid("Attributes must be a JSON object, like {\"city\": \"Lyon\"}."));
    };
    if name.chars().any(char::is_control) || name.chars().count() > 200 {
        return Err(Error::invalid("The name must be one line of at most 200 characters."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    // Typed fields hold values of their type; a `null` leaves a field empty.
    let fields = super::fields::list_in(&mut tx, tenant).await?;
    let attributes: Map<String, Value> =
        super::fields::check_attributes(&fields, &attributes)?.into_iter().filter(|(_, v)| !v.is_null()).collect();
    let reader: Reader = sqlx::query_as(
        "UPDATE readers SET name = $3, attributes = $4, updated_at = now() WHERE tenant_id = $1 AND id = $2
         RETURNING id, email, name, attributes, status, created_at, updated_at",
    )
    .bind(tenant)
    .bind(id)
    .bind(name.trim())
    .bind(Value::Object(attributes))
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    consent::record(&mut tx, tenant, id, None, "profile_updated", origin).await?;
    tx.commit().await?;
    Ok(reader)
}

/// Adds one reader by hand (the author attests consent), optionally to lists as confirmed.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn add(
    db: &Db,
    tenant: TenantId,
    role: Role,
    email: &str,
    name: &str,
    lists: &[ListId],
    origin: &Origin,
) -> Result<i64> {
    role.require(Role::Author)?;
    let email = Email::parse(email)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let (id, _) = super::subscribe::upsert_reader(&mut tx, tenant, &email, name).await?;
    for list in lists {
        let n = sqlx::query(
            "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
             SELECT $1, l.id, $3, 'confirmed', now() FROM lists l WHERE l.tenant_id = $1 AND l.id = $2
             ON CONFLICT (list_id, reader_id) DO UPDATE SET status = 'confirmed', confirmed_at = now(), unsubscribed_at = NULL
             WHERE subscriptions.status <> 'confirmed'",
        )
        .bind(tenant)
        .bind(list)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n > 0 {
            consent::record(&mut tx, tenant, id, Some(*list), "subscribe", origin).await?;
        }
    }
    tx.commit().await?;
    Ok(id)
}

/// Takes a reader off one list (an author or API action), recorded in the ledger.
#[tracing::instrument(skip_all, fields(%tenant, %id, %list))]
pub async fn unsubscribe(db: &Db, tenant: TenantId, role: Role, id: i64, list: ListId, origin: &Origin) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query(
        "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now(), confirmation_nonce = NULL
         WHERE tenant_id = $1 AND reader_id = $2 AND list_id = $3 AND status <> 'unsubscribed'",
    )
    .bind(tenant)
    .bind(id)
    .bind(list)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n == 0 {
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM subscriptions WHERE tenant_id = $1 AND reader_id = $2 AND list_id = $3)",
        )
        .bind(tenant)
        .bind(id)
        .bind(list)
        .fetch_one(&mut *tx)
        .await?;
        if !exists {
            return Err(Error::NotFound);
        }
    } else {
        consent::record(&mut tx, tenant, id, Some(list), "unsubscribe", origin).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// What a bulk action applies to: chosen readers, or everyone matching a filter.
#[derive(Clone, Debug)]
pub enum Target {
    Ids(Vec<i64>),
    Filter(ReaderFilter),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BulkAction {
    /// Subscribe as confirmed (the author attests consent). Readers who left everything, and
    /// subscriptions someone unsubscribed from, are left alone.
    AddToList(ListId),
    RemoveFromList(ListId),
    /// Unsubscribe from everything and suppress (reason `unsubscribed_all`).
    UnsubscribeAll,
    /// Erase (admins only), as [`erase`] does one by one.
    Delete,
    /// Tag with a name (checked; a new name makes a new tag).
    AddTag(String),
    /// Take a tag off.
    RemoveTag(String),
}

/// Applies `action` to every reader in `target`, set-based (one statement per step, however many
/// readers). Returns how many readers it changed.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn bulk_action(
    db: &Db,
    tenant: TenantId,
    role: Role,
    target: &Target,
    action: &BulkAction,
    origin: &Origin,
) -> Result<u64> {
    role.require(if *action == BulkAction::Delete { Role::Admin } else { Role::Author })?;
    // The target's ids, fixed once and passed to each step below as an array (not a temporary
    // table: the runtime role may not create any, see `migrate::restrict_database`).
    let mut tx = db.tenant_tx(tenant).await?;
    let mut q = QueryBuilder::<Postgres>::new("SELECT r.id FROM readers r WHERE r.tenant_id = ");
    q.push_bind(tenant);
    match target {
        Target::Ids(ids) => {
            q.push(" AND r.id = ANY(").push_bind(ids.clone()).push(")");
        }
        Target::Filter(f) => push_filter(&mut q, f)?,
    }
    let ids: Vec<i64> = q.build_query_scalar().fetch_all(&mut *tx).await?;
    let n = ids.len();
    let (t, src, ip, ua, wording) =
        (tenant, &origin.source, origin.ip.as_deref(), origin.user_agent.as_deref(), origin.wording.as_deref());
    let changed = match action {
        BulkAction::AddTag(name) => super::tags::tag_in(&mut tx, t, &ids, &super::tags::check_names(&[name])?).await?,
        BulkAction::RemoveTag(name) => {
            super::tags::untag_in(&mut tx, t, &ids, &super::tags::check_names(&[name])?).await?
        }
        BulkAction::AddToList(list) => sqlx::query(
            "WITH new AS (
                INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
                SELECT $1, l.id, r.id, 'confirmed', now() FROM unnest($7::bigint[]) AS b(id) JOIN readers r ON r.id = b.id
                JOIN lists l ON l.tenant_id = $1 AND l.id = $2
                WHERE r.tenant_id = $1 AND r.status = 'active'
                ON CONFLICT (list_id, reader_id) DO UPDATE SET status = 'confirmed', confirmed_at = now()
                WHERE subscriptions.status = 'unconfirmed'
                RETURNING reader_id)
             INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, ip, user_agent, wording)
             SELECT $1, reader_id, $2, 'subscribe', $3, $4, $5, $6 FROM new",
        )
        .bind(t)
        .bind(list)
        .bind(src)
        .bind(ip)
        .bind(ua)
        .bind(wording)
        .bind(&ids)
        .execute(&mut *tx)
        .await?
        .rows_affected(),
        BulkAction::RemoveFromList(list) => sqlx::query(
            "WITH gone AS (
                UPDATE subscriptions s SET status = 'unsubscribed', unsubscribed_at = now(), confirmation_nonce = NULL
                FROM unnest($7::bigint[]) AS b(id) WHERE s.tenant_id = $1 AND s.list_id = $2 AND s.reader_id = b.id AND s.status <> 'unsubscribed'
                RETURNING s.reader_id)
             INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, ip, user_agent, wording)
             SELECT $1, reader_id, $2, 'unsubscribe', $3, $4, $5, $6 FROM gone",
        )
        .bind(t)
        .bind(list)
        .bind(src)
        .bind(ip)
        .bind(ua)
        .bind(wording)
        .bind(&ids)
        .execute(&mut *tx)
        .await?
        .rows_affected(),
        BulkAction::UnsubscribeAll => {
            sqlx::query(
                "UPDATE subscriptions s SET status = 'unsubscribed', unsubscribed_at = now(), confirmation_nonce = NULL
                 FROM unnest($2::bigint[]) AS b(id) WHERE s.tenant_id = $1 AND s.reader_id = b.id AND s.status <> 'unsubscribed'",
            )
            .bind(t)
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO suppressions (tenant_id, email_lower, reason, source)
                 SELECT $1, lower(r.email), 'unsubscribed_all', $2 FROM unnest($3::bigint[]) AS b(id) JOIN readers r ON r.id = b.id
                 ON CONFLICT (tenant_id, email_lower) DO NOTHING",
            )
            .bind(t)
            .bind(src)
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "WITH left_all AS (
                    UPDATE readers r SET status = 'unsubscribed', updated_at = now() FROM unnest($6::bigint[]) AS b(id)
                    WHERE r.tenant_id = $1 AND r.id = b.id AND r.status = 'active' RETURNING r.id)
                 INSERT INTO consent_events (tenant_id, reader_id, action, source, ip, user_agent, wording)
                 SELECT $1, id, 'unsubscribe_all', $2, $3, $4, $5 FROM left_all",
            )
            .bind(t)
            .bind(src)
            .bind(ip)
            .bind(ua)
            .bind(wording)
            .bind(&ids)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        }
        BulkAction::Delete => {
            sqlx::query("UPDATE consent_events e SET ip = NULL, user_agent = NULL FROM unnest($2::bigint[]) AS b(id) WHERE e.tenant_id = $1 AND e.reader_id = b.id")
                .bind(t)
                .bind(&ids)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM readers r USING unnest($2::bigint[]) AS b(id) WHERE r.tenant_id = $1 AND r.id = b.id")
                .bind(t)
                .bind(&ids)
                .execute(&mut *tx)
                .await?
                .rows_affected()
        }
    };
    tx.commit().await?;
    tracing::info!(targeted = n, changed, ?action, "bulk reader action");
    Ok(changed)
}

/// Everything Herald holds about one reader, as JSON (GDPR access request).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn export(db: &Db, tenant: TenantId, id: i64) -> Result<Value> {
    let d = detail(db, tenant, id).await?;
    Ok(serde_json::json!({
        "reader": d.reader,
        "subscriptions": d.subscriptions,
        "consent_history": d.consent,
        "suppressed": d.suppressed,
        "exported_at": Utc::now(),
    }))
}

/// Erases a reader (GDPR): the row and subscriptions go; ledger rows lose every personal detail;
/// a suppression entry, if any, stays (only the address hash-equivalent needed to keep not
/// mailing them: the lowercased address and the reason).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn erase(db: &Db, tenant: TenantId, role: Role, id: i64) -> Result<()> {
    role.require(Role::Admin)?;
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query("UPDATE consent_events SET ip = NULL, user_agent = NULL WHERE tenant_id = $1 AND reader_id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let n = sqlx::query("DELETE FROM readers WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 { Err(Error::NotFound) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_conditions_parse() {
        assert_eq!(
            AttributeCondition::parse(r#"city = "Lyon""#).ok(),
            Some(AttributeCondition::Equals("city".into(), "Lyon".into()))
        );
        assert_eq!(
            AttributeCondition::parse(r#"plan in ["pro", "team"]"#).ok(),
            Some(AttributeCondition::In("plan".into(), vec!["pro".into(), "team".into()]))
        );
        assert_eq!(
            AttributeCondition::parse("attributes.age = 42").ok(),
            Some(AttributeCondition::Equals("age".into(), 42.into()))
        );
        for bad in ["city", "= 1", "city = Lyon", "plan in []", "a b = 1", "x in 3"] {
            assert!(AttributeCondition::parse(bad).is_err(), "{bad}");
        }
    }
}
