//! Batch upserts of readers: the API's bulk endpoint and (next) the CSV import share this path.
//! One round trip per batch with `unnest` arrays; addresses are merged on their lowercased form,
//! so replaying a batch (an API retry, a re-run import) changes nothing the second time.

pub use herald_types::{BulkOutcome, Existing, ReaderInput};
use herald_types::{Field, Rejected};
use serde_json::Value;
use std::collections::HashMap;

use super::consent::Origin;
use crate::domain::{Email, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::Tx;

/// One address's rows of a batch, merged.
struct Merged {
    email: String,
    name: String,
    attributes: serde_json::Map<String, Value>,
    tags: Vec<String>,
}

/// A batch's valid rows, merged by address.
struct Batch {
    /// The lowercased addresses, in the order of their first rows.
    order: Vec<String>,
    merged: HashMap<String, Merged>,
    /// Repeats merged into an earlier row, which count as updates.
    repeats_applied: u64,
}

/// One row's values, checked.
struct Checked {
    email: Email,
    attributes: serde_json::Map<String, Value>,
    tags: Vec<String>,
}

/// Upserts `rows` and subscribes the created/updated readers to `lists` as confirmed (the caller
/// attests consent; one ledger row per new subscription, with `origin`).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn upsert(
    tx: &mut Tx,
    tenant: TenantId,
    rows: &[ReaderInput],
    lists: &[crate::domain::ListId],
    existing: Existing,
    origin: &Origin,
) -> Result<BulkOutcome> {
    let mut out = BulkOutcome::default();
    // Values of typed fields are checked and normalised row by row (a bad one makes its row
    // invalid, with the field named); other attributes pass as they come.
    let fields = super::fields::list_in(tx, tenant).await?;
    let batch = merge(rows, &fields, existing, &mut out);
    if batch.order.is_empty() {
        return Ok(out);
    }
    let touched = insert_readers(tx, tenant, &batch, existing).await?;
    out.created = touched.iter().filter(|t| t.1).count() as u64;
    out.updated = touched.len() as u64 - out.created + batch.repeats_applied;
    out.skipped += (batch.order.len() - touched.len()) as u64;
    out.reader_ids = touched.iter().map(|t| t.0).collect();
    tag_readers(tx, tenant, &touched, &batch.merged).await?;
    if !lists.is_empty() && !touched.is_empty() {
        subscribe_confirmed(tx, tenant, &touched, lists, origin).await?;
    }
    Ok(out)
}

/// Checks the rows, noting the invalid ones in `out`, and merges those for one address.
fn merge(rows: &[ReaderInput], fields: &[Field], existing: Existing, out: &mut BulkOutcome) -> Batch {
    // Rows that repeated an address earlier in the batch and were merged into it.
    let mut repeats_applied = 0u64;
    // Merge duplicates inside the batch (Postgres cannot upsert one row twice in a statement).
    let mut order: Vec<String> = Vec::new();
    let mut merged: HashMap<String, Merged> = HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        let Checked { email, attributes: attrs, tags } = match check_row(row, fields) {
            Ok(checked) => checked,
            Err(reason) => {
                out.invalid.push(Rejected { index: i, reason });
                continue;
            }
        };
        // Names from spreadsheets may hold line breaks (a quoted cell): keep them one line.
        let name = row
            .name
            .split(char::is_control)
            .filter(|s| !s.trim().is_empty())
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        let key = email.lowercase();
        match merged.get_mut(&key) {
            // A later row for the same address is what a later batch would do with it, so the
            // summary says what happened: with "update" its values win and it counts as an
            // update; with "leave unchanged" the first row stands and it is skipped, untouched.
            Some(m) => match existing {
                Existing::Update => {
                    if !name.is_empty() {
                        m.name = name.chars().take(200).collect();
                    }
                    m.attributes.extend(attrs);
                    m.tags.extend(tags);
                    repeats_applied += 1;
                }
                Existing::Skip => out.skipped += 1,
            },
            None => {
                order.push(key.clone());
                let name = name.chars().take(200).collect();
                merged.insert(key, Merged { email: email.to_string(), name, attributes: attrs, tags });
            }
        }
    }
    Batch { order, merged, repeats_applied }
}

/// A row's address, attributes and tags, checked; or why the row is invalid.
fn check_row(row: &ReaderInput, fields: &[Field]) -> std::result::Result<Checked, String> {
    let email = Email::parse(&row.email).map_err(|e| e.to_string())?;
    let attributes = match &row.attributes {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(m)) => super::fields::check_attributes(fields, m).map_err(|e| e.to_string())?,
        Some(_) => return Err("attributes must be an object".into()),
    };
    let tags = if row.tags.is_empty() {
        Vec::new()
    } else {
        super::tags::check_names(&row.tags).map_err(|e| e.to_string())?
    };
    Ok(Checked { email, attributes, tags })
}

/// Inserts (or, with `existing` set to update, merges) the batch's readers in one statement:
/// each touched reader's id, whether it was new, and its address.
async fn insert_readers(
    tx: &mut Tx,
    tenant: TenantId,
    batch: &Batch,
    existing: Existing,
) -> Result<Vec<(i64, bool, String)>> {
    let mut emails = Vec::with_capacity(batch.order.len());
    let mut names = Vec::with_capacity(batch.order.len());
    let mut attrs = Vec::with_capacity(batch.order.len());
    for key in &batch.order {
        let Merged { email: e, name: n, attributes: a, .. } = &batch.merged[key];
        emails.push(e.clone());
        names.push(n.clone());
        attrs.push(Value::Object(a.clone()));
    }
    let conflict = match existing {
        Existing::Update => {
            "DO UPDATE SET name = CASE WHEN excluded.name <> '' THEN excluded.name ELSE readers.name END,
                           attributes = readers.attributes || excluded.attributes, updated_at = now()"
        }
        Existing::Skip => "DO NOTHING",
    };
    let touched: Vec<(i64, bool, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO readers (tenant_id, email, name, attributes)
         SELECT $1, e, n, a FROM unnest($2::text[], $3::text[], $4::jsonb[]) AS t(e, n, a)
         ON CONFLICT (tenant_id, lower(email)) {conflict}
         RETURNING id, (xmax = 0) AS inserted, email"
    )))
    .bind(tenant)
    .bind(&emails)
    .bind(&names)
    .bind(&attrs)
    .fetch_all(&mut **tx)
    .await?;
    Ok(touched)
}

/// Adds the batch's tags to the readers it touched.
async fn tag_readers(
    tx: &mut Tx,
    tenant: TenantId,
    touched: &[(i64, bool, String)],
    merged: &HashMap<String, Merged>,
) -> Result<()> {
    // Tags for the readers this batch created or updated (a skipped reader is left as it was).
    let tagging: Vec<(i64, String)> = touched
        .iter()
        .filter_map(|(id, _, email)| {
            // Keyed as above (Rust's lowercase, not Postgres's `lower`).
            let key = Email::parse(email).ok()?.lowercase();
            merged.get(&key).map(|m| (*id, &m.tags))
        })
        .flat_map(|(id, tags)| tags.iter().map(move |t| (id, t.clone())))
        .collect();
    super::tags::tag_pairs_in(tx, tenant, &tagging).await?;
    Ok(())
}

/// Subscribes the touched readers to `lists` as confirmed, with a consent row per new subscription.
async fn subscribe_confirmed(
    tx: &mut Tx,
    tenant: TenantId,
    touched: &[(i64, bool, String)],
    lists: &[crate::domain::ListId],
    origin: &Origin,
) -> Result<()> {
    let ids: Vec<i64> = touched.iter().map(|t| t.0).collect();
    sqlx::query(
        "WITH new AS (
                INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
                SELECT $1, l.id, rd.id, 'confirmed', now()
                FROM readers rd CROSS JOIN lists l
                -- Readers who left everything are not put back on lists by an import or API call.
                WHERE rd.tenant_id = $1 AND rd.id = ANY($2) AND rd.status = 'active'
                  AND l.tenant_id = $1 AND l.id = ANY($3)
                ON CONFLICT (list_id, reader_id) DO UPDATE SET status = 'confirmed', confirmed_at = now(), unsubscribed_at = NULL
                WHERE subscriptions.status = 'unconfirmed'
                RETURNING list_id, reader_id
             )
             INSERT INTO consent_events (tenant_id, reader_id, list_id, action, source, ip, user_agent, wording)
             SELECT $1, reader_id, list_id, 'subscribe', $4, $5, $6, $7 FROM new",
    )
    .bind(tenant)
    .bind(&ids)
    .bind(lists)
    .bind(&origin.source)
    .bind(origin.ip.as_deref())
    .bind(origin.user_agent.as_deref())
    .bind(origin.wording.as_deref())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Checks a bulk request's size before any work.
pub fn check_size(n: usize, max: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::invalid("Send at least one reader."));
    }
    if n > max {
        return Err(Error::invalid(format!(
            "At most {max} readers per request; split the rest into further requests."
        )));
    }
    Ok(())
}
