//! Campaign rows: drafts, edits, look-ups, and the one compare-and-set [`transition`] every state
//! change is made of. The sends themselves (start, schedule, pause, resume, cancel, finish) are
//! in `lifecycle`, the checks before a send in `readiness`; this module imports neither, so the
//! features built on campaigns (A/B tests, approval, recurring editions, warm-up) can use the
//! rows without importing the lifecycle that uses them.

use crate::audience::readers::AttributeCondition;
use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::sending::message::CampaignContent;

pub use herald_types::{BodyFormat, Campaign, CampaignInput, CampaignStatus, FeedSource, TrackingMode};

pub(crate) const COLUMNS: &str = "id, name, subject, preheader, identity_id, from_name, from_email, reply_to, list_ids,
    attribute_filter, segment_ids, exclude_segment_id, body_format, body, status, scheduled_at, schedule_tz, spread_hours, tracking, pause_reason, recurrence,
    feed, feed_url, parent_id, edition_slot, ab_test, ab_winner, resend_of, resend_machine_opens,
    ARRAY(SELECT r.id FROM campaigns r WHERE r.tenant_id = campaigns.tenant_id AND r.resend_of = campaigns.id
          ORDER BY r.created_at) AS resends,
    automation_id, cap_exempt, fanout_done,
    recipients, started_at, finished_at, created_at, updated_at";

/// What the renderer needs of a campaign.
pub fn content(c: &Campaign) -> CampaignContent {
    CampaignContent {
        subject: c.subject.clone(),
        preheader: c.preheader.clone(),
        format: c.body_format,
        body: c.body.clone(),
    }
}

/// The attribute condition as written, parsed; `None` when empty.
pub fn attribute_condition(c: &Campaign) -> Result<Option<AttributeCondition>> {
    let raw = c.attribute_filter.trim();
    if raw.is_empty() { Ok(None) } else { AttributeCondition::parse(raw).map(Some) }
}

/// The contract's checks (every field at once), plus what only the engine can parse: the
/// audience condition and the feed URL.
fn validate(input: &CampaignInput) -> Result<()> {
    let mut problems = herald_types::Problems::default();
    problems.check(input.validate());
    if !input.attribute_filter.trim().is_empty() {
        problems.check(problems_at(AttributeCondition::parse(&input.attribute_filter).map(drop), "attribute_filter")?);
    }
    problems.check(problems_at(validate_feed_url(input), "feed_url")?);
    Ok(problems.into_result()?)
}

/// Splits an engine check's outcome: its validation problems, filed under `field`, to collect
/// with the others; any other error to return as it is.
/// The feed URL must parse as http(s) once `{email}` and `{reader_id}` are filled in (the
/// contract checks the rest of the feed choice).
pub(super) fn validate_feed_url(input: &CampaignInput) -> Result<()> {
    if input.feed == FeedSource::Url {
        let probe = input.feed_url.trim().replace("{email}", "a%40b.example").replace("{reader_id}", "1");
        let parsed = url::Url::parse(&probe).map_err(|_| Error::invalid("The feed URL is not a valid URL."))?;
        if !matches!(parsed.scheme(), "https" | "http") {
            return Err(Error::invalid("The feed URL must be http or https."));
        }
    }
    Ok(())
}

fn problems_at(r: Result<()>, field: &str) -> Result<std::result::Result<(), herald_types::Invalid>> {
    match r {
        Err(Error::Invalid(e)) => Ok(Err(e.at(field))),
        other => other.map(Ok),
    }
}

pub(crate) type CampaignQuery<'q> = sqlx::query::QueryAs<'q, sqlx::Postgres, Campaign, sqlx::postgres::PgArguments>;

/// Binds the editable fields as $3…$21, in the order both `create` and `update` name them.
fn bind_content<'q>(q: CampaignQuery<'q>, input: &'q CampaignInput) -> CampaignQuery<'q> {
    q.bind(input.name.trim())
        .bind(&input.subject)
        .bind(&input.preheader)
        .bind(input.identity_id)
        .bind(input.from_name.trim())
        .bind(input.from_email.trim())
        .bind(input.reply_to.trim())
        .bind(&input.list_ids)
        .bind(input.attribute_filter.trim())
        .bind(input.body_format)
        .bind(&input.body)
        .bind(input.spread_hours)
        .bind(input.tracking)
        .bind(input.recurrence.as_ref().map(sqlx::types::Json))
        .bind(input.feed)
        .bind(input.feed_url.trim())
        .bind(dedup(&input.segment_ids))
        .bind(input.exclude_segment_id)
        .bind(input.ab_test.as_ref().map(sqlx::types::Json))
}

fn dedup<T: PartialEq + Copy>(ids: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(ids.len());
    for id in ids {
        if !out.contains(id) {
            out.push(*id);
        }
    }
    out
}

/// The campaign's sending identity must be one of this workspace's (the foreign key, which leads
/// with tenant_id, is the backstop; this gives the author a message beside the field).
async fn check_identity(tx: &mut Tx, tenant: TenantId, input: &CampaignInput) -> Result<()> {
    let Some(id) = input.identity_id else { return Ok(()) };
    let known: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM sending_identities WHERE tenant_id = $1 AND id = $2)")
            .bind(tenant)
            .bind(id)
            .fetch_one(&mut **tx)
            .await?;
    if known {
        Ok(())
    } else {
        Err(Error::Invalid(herald_types::Invalid::new("That sending identity does not exist.").at("identity_id")))
    }
}

/// Whether every targeted and the excluded segment are the workspace's.
pub(super) async fn segments_exist(
    tx: &mut Tx,
    tenant: TenantId,
    segments: &[herald_types::SegmentId],
    exclude: Option<herald_types::SegmentId>,
) -> Result<bool> {
    let wanted: Vec<herald_types::SegmentId> = segments.iter().copied().chain(exclude).collect();
    let known: i64 = sqlx::query_scalar("SELECT count(*) FROM segments WHERE tenant_id = $1 AND id = ANY($2)")
        .bind(tenant)
        .bind(&wanted)
        .fetch_one(&mut **tx)
        .await?;
    Ok(known == dedup(&wanted).len() as i64)
}

/// The chosen segments must be the workspace's, beside the field that names them.
async fn check_segments(tx: &mut Tx, tenant: TenantId, input: &CampaignInput) -> Result<()> {
    if !segments_exist(tx, tenant, &input.segment_ids, None).await? {
        return Err(Error::Invalid(herald_types::Invalid::field("segment_ids", "Choose segments of this workspace.")));
    }
    if !segments_exist(tx, tenant, &[], input.exclude_segment_id).await? {
        return Err(Error::Invalid(herald_types::Invalid::field(
            "exclude_segment_id",
            "Choose a segment of this workspace.",
        )));
    }
    Ok(())
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create(db: &Db, tenant: TenantId, role: Role, input: &CampaignInput) -> Result<Campaign> {
    role.require(Role::Author)?;
    validate(input)?;
    let mut tx = db.tenant_tx(tenant).await?;
    check_identity(&mut tx, tenant, input).await?;
    check_segments(&mut tx, tenant, input).await?;
    // The workspace's default sender fills in an empty one.
    let insert = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO campaigns (id, tenant_id, name, subject, preheader, identity_id, from_name, from_email, reply_to,
             list_ids, attribute_filter, body_format, body, spread_hours, tracking, recurrence, feed, feed_url,
             segment_ids, exclude_segment_id, ab_test)
         SELECT $1, $2, $3, $4, $5, $6, coalesce(nullif($7, ''), t.default_from_name),
                coalesce(nullif($8, ''), t.default_from_email), $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
                $21
         FROM tenants t WHERE t.id = $2
         RETURNING {COLUMNS}"
    )))
    .bind(CampaignId::new())
    .bind(tenant);
    let campaign = bind_content(insert, input).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(campaign)
}

/// Saves a draft (or a scheduled campaign, which stays scheduled). A campaign that started
/// sending is frozen: 409.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn update(db: &Db, tenant: TenantId, role: Role, id: CampaignId, input: &CampaignInput) -> Result<Campaign> {
    role.require(Role::Author)?;
    validate(input)?;
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval_rule::guard_edit(&mut tx, tenant, role, id).await?;
    check_identity(&mut tx, tenant, input).await?;
    check_segments(&mut tx, tenant, input).await?;
    // As at creation, the workspace's default sender fills in an empty one: a draft written
    // before the default was set must not be stuck at "Choose a sender address first".
    let update = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaigns SET name = $3, subject = $4, preheader = $5, identity_id = $6,
             from_name = coalesce(nullif($7, ''), (SELECT default_from_name FROM tenants WHERE id = $1)),
             from_email = coalesce(nullif($8, ''), (SELECT default_from_email FROM tenants WHERE id = $1)),
             reply_to = $9, list_ids = $10, attribute_filter = $11, body_format = $12, body = $13, spread_hours = $14,
             tracking = $15, recurrence = $16, feed = $17, feed_url = $18, segment_ids = $19, exclude_segment_id = $20,
             ab_test = $21, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status IN ('draft', 'scheduled') AND automation_id IS NULL
         RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id);
    let updated: Option<Campaign> = bind_content(update, input).fetch_optional(&mut *tx).await?;
    let campaign = match updated {
        Some(c) => c,
        None => {
            get_in(&mut tx, tenant, id).await?;
            return Err(Error::Conflict("This campaign has started sending and can no longer be edited.".into()));
        }
    };
    super::approval_rule::withdraw_pending(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(campaign)
}

pub(crate) async fn get_in(tx: &mut Tx, tenant: TenantId, id: CampaignId) -> Result<Campaign> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM campaigns WHERE tenant_id = $1 AND id = $2")))
        .bind(tenant)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(Error::NotFound)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn get(db: &Db, tenant: TenantId, id: CampaignId) -> Result<Campaign> {
    let mut tx = db.tenant_tx(tenant).await?;
    let c = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(c)
}

/// A new draft with what the author wrote in `id`, in any state (a sent campaign is the usual
/// one): its content, sender, audience, tracking and A/B versions, named "… (copy)";
/// not its schedule, repetition, feed or history. An automation's mail is not a campaign to copy.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn duplicate(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let original = get(db, tenant, id).await?;
    if original.automation_id.is_some() {
        return Err(Error::NotFound);
    }
    let name: String = format!("{} (copy)", original.name.trim()).chars().take(200).collect();
    let input = CampaignInput {
        name,
        subject: original.subject,
        preheader: original.preheader,
        identity_id: original.identity_id,
        from_name: original.from_name,
        from_email: original.from_email,
        reply_to: original.reply_to,
        list_ids: original.list_ids,
        attribute_filter: original.attribute_filter,
        segment_ids: original.segment_ids,
        exclude_segment_id: original.exclude_segment_id,
        body_format: original.body_format,
        body: original.body,
        spread_hours: original.spread_hours,
        tracking: original.tracking,
        recurrence: None,
        feed: FeedSource::None,
        feed_url: String::new(),
        ab_test: original.ab_test,
    };
    create(db, tenant, role, &input).await
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId, limit: i64) -> Result<Vec<Campaign>> {
    search(db, tenant, &herald_types::CampaignQuery { limit, ..Default::default() }).await
}

/// The campaigns a filter lets through, newest first: words in the name or subject (a `%` or
/// `_` in them is a plain character), a status, and a range of days — the day a campaign was
/// sent or started, else the day it is scheduled for, else the day it was made (UTC).
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn search(db: &Db, tenant: TenantId, q: &herald_types::CampaignQuery) -> Result<Vec<Campaign>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let words = q.words.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM campaigns
         WHERE tenant_id = $1 AND automation_id IS NULL
           AND ($3 = '' OR name ILIKE '%' || $3 || '%' OR subject ILIKE '%' || $3 || '%')
           AND ($4::text IS NULL OR status = $4)
           AND ($5::date IS NULL OR coalesce(started_at, scheduled_at, created_at) >= $5::date::timestamp AT TIME ZONE 'UTC')
           AND ($6::date IS NULL OR coalesce(started_at, scheduled_at, created_at) < ($6::date + 1)::timestamp AT TIME ZONE 'UTC')
           AND ($7::timestamptz IS NULL OR (created_at, id) < ($7, $8))
         ORDER BY created_at DESC, id DESC LIMIT $2"
    )))
    .bind(tenant)
    .bind(q.limit.clamp(1, 501))
    .bind(words)
    .bind(q.status.map(CampaignStatus::as_str))
    .bind(q.from)
    .bind(q.to)
    .bind(q.after.map(|a| a.0))
    .bind(q.after.map(|a| a.1))
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Drafts only: anything that sent keeps its record.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query(
        "DELETE FROM campaigns WHERE tenant_id = $1 AND id = $2 AND status = 'draft' AND automation_id IS NULL",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n == 0 {
        get_in(&mut tx, tenant, id).await?;
        return Err(Error::Conflict("Only drafts can be deleted.".into()));
    }
    tx.commit().await?;
    Ok(())
}

/// The one way a campaign changes state (an automation's step campaigns excepted: they follow
/// their automation, see `crate::automations`): a compare-and-set UPDATE to `to` that matches only in one
/// of the `from` states, so of two racing callers exactly one moves it. `also` sets more columns
/// in the same statement; its placeholders start at `$5`, bound by `bind_also`. `None`: the
/// campaign is not in a `from` state (or does not exist).
pub(crate) async fn transition<'q>(
    tx: &mut Tx,
    tenant: TenantId,
    id: CampaignId,
    from: &'q [CampaignStatus],
    to: CampaignStatus,
    also: &str,
    bind_also: impl FnOnce(CampaignQuery<'q>) -> CampaignQuery<'q>,
) -> Result<Option<Campaign>> {
    let also = if also.is_empty() { String::new() } else { format!("{also}, ") };
    let update = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaigns SET status = $3, {also}updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status = ANY($4) AND automation_id IS NULL RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(to)
    .bind(from);
    Ok(bind_also(update).fetch_optional(&mut **tx).await?)
}

/// Takes the campaign row's lock for the rest of the transaction. NO KEY UPDATE, like an UPDATE
/// of the row takes: it orders the callers among themselves without blocking the foreign-key
/// checks of rows that reference the campaign (a delivery loop adding its tallies holds the
/// stats row and then needs one; FOR UPDATE here made that a deadlock).
pub(super) async fn lock_in(tx: &mut Tx, tenant: TenantId, id: CampaignId) -> Result<()> {
    sqlx::query("SELECT 1 FROM campaigns WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE")
        .bind(tenant)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
