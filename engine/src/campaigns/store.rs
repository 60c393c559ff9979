//! Campaign rows: drafts, edits, and the lifecycle transitions. Every transition is one
//! compare-and-set UPDATE whose WHERE names the expected state, so a double click, two tabs or
//! two API calls start one send (seed 002, layer 2).

use chrono::{DateTime, Utc};

use crate::audience::readers::AttributeCondition;
use crate::domain::{CampaignId, Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::jobs::Jobs;
use crate::sending::message::{CampaignContent, CompiledCampaign};

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
    problems.check(problems_at(super::recurring::validate_feed_url(input), "feed_url")?);
    Ok(problems.into_result()?)
}

/// Splits an engine check's outcome: its validation problems, filed under `field`, to collect
/// with the others; any other error to return as it is.
fn problems_at(r: Result<()>, field: &str) -> Result<std::result::Result<(), herald_types::Invalid>> {
    match r {
        Err(Error::Invalid(e)) => Ok(Err(e.at(field))),
        other => other.map(Ok),
    }
}

type CampaignQuery<'q> = sqlx::query::QueryAs<'q, sqlx::Postgres, Campaign, sqlx::postgres::PgArguments>;

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
async fn segments_exist(
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
    super::approval::guard_edit(&mut tx, tenant, role, id).await?;
    check_identity(&mut tx, tenant, input).await?;
    check_segments(&mut tx, tenant, input).await?;
    // As at creation, the workspace's default sender fills in an empty one: a draft written
    // before the default was set must not be stuck at "Choose a sender address first" (issue 35).
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
    super::approval::withdraw_pending(&mut tx, tenant, id).await?;
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
/// one, issue 34): its content, sender, audience, tracking and A/B versions, named "… (copy)";
/// not its schedule, repetition, feed or history. An automation's mail is not a campaign to copy.
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
         ORDER BY created_at DESC LIMIT $2"
    )))
    .bind(tenant)
    .bind(q.limit.clamp(1, 500))
    .bind(words)
    .bind(q.status.map(CampaignStatus::as_str))
    .bind(q.from)
    .bind(q.to)
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

/// Everything that must hold before a send may start; the messages say what to fix.
pub(crate) async fn check_ready(tx: &mut Tx, tenant: TenantId, c: &Campaign) -> Result<()> {
    let workspace = check_sender(tx, tenant, c).await?;
    if c.list_ids.is_empty() && c.segment_ids.is_empty() {
        return Err(Error::invalid("Choose at least one list or segment to send to."));
    }
    // Segments' readers are counted as the fan-out writes them (`warmup::pause_if_over`).
    super::warmup::check_estimate(tx, tenant, c.id, &c.list_ids).await?;
    if !segments_exist(tx, tenant, &c.segment_ids, c.exclude_segment_id).await? {
        return Err(Error::invalid("One of the chosen segments no longer exists."));
    }
    if !c.segment_ids.is_empty() || c.exclude_segment_id.is_some() {
        // Each segment must still fit the workspace (the fan-out builds the same tree).
        let ids = |v: &[herald_types::SegmentId]| v.iter().map(|s| s.0).collect::<Vec<_>>();
        let lists: Vec<uuid::Uuid> = c.list_ids.iter().map(|l| l.0).collect();
        super::audience::tree(tx, tenant, &lists, &ids(&c.segment_ids), c.exclude_segment_id.map(|s| s.0)).await?;
    }
    let known: i64 = sqlx::query_scalar("SELECT count(*) FROM lists WHERE tenant_id = $1 AND id = ANY($2)")
        .bind(tenant)
        .bind(&c.list_ids)
        .fetch_one(&mut **tx)
        .await?;
    if known != c.list_ids.len() as i64 {
        return Err(Error::invalid("One of the chosen lists no longer exists."));
    }
    attribute_condition(c)?;
    check_template(tenant, c, &workspace).await
}

/// What any mail of the workspace needs before it may go out — a campaign's or an automation
/// step's: the account not suspended, a postal address, a subject, a verified sender. Returns
/// the workspace as the templates name it.
pub(crate) async fn check_sender(
    tx: &mut Tx,
    tenant: TenantId,
    c: &Campaign,
) -> Result<crate::sending::message::Workspace> {
    crate::account_limits::require_not_suspended(tx, tenant).await?;
    let (postal, name): (String, String) = sqlx::query_as("SELECT postal_address, name FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?;
    if postal.trim().is_empty() {
        return Err(Error::invalid(
            "Add your workspace's postal address in Settings first: the law requires it in every campaign.",
        ));
    }
    if c.subject.trim().is_empty() {
        return Err(Error::invalid("Write a subject first."));
    }
    if c.from_email.trim().is_empty() {
        return Err(Error::invalid("Choose a sender address first."));
    }
    crate::sending::domains::require_verified_sender(tx, tenant, c.identity_id.is_some(), &c.from_email).await?;
    Ok(crate::sending::message::Workspace { name, postal_address: postal })
}

/// The campaign's templates (every A/B version's) compile.
pub(crate) async fn check_template(
    tenant: TenantId,
    c: &Campaign,
    workspace: &crate::sending::message::Workspace,
) -> Result<()> {
    let turn = crate::sending::template_sandbox::Turn::request(tenant);
    CompiledCampaign::compile(&content(c), workspace, turn)
        .await?
        .map_err(|e| Error::invalid(format!("Fix the template first: {e}")))?;
    super::ab_test::check_versions(c, workspace, tenant).await?;
    Ok(())
}

/// Starts sending now. Exactly one caller wins the draft/scheduled → sending transition; the
/// others get 409. The fan-out and delivery jobs are enqueued after the commit; should the
/// process die in between, the supervisor sees a sending campaign with no heartbeat and
/// enqueues them itself.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn send_now(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval::gate(&mut tx, tenant, role).await?;
    let current = get_in(&mut tx, tenant, id).await?;
    if current.recurrence.is_some() {
        // "Send" on a recurring campaign starts its schedule; each slot sends an edition.
        tx.commit().await?;
        return super::recurring::start(db, tenant, role, id).await;
    }
    check_ready(&mut tx, tenant, &current).await?;
    use CampaignStatus::{Draft, Scheduled, Sending};
    let started = transition(
        &mut tx,
        tenant,
        id,
        &[Draft, Scheduled],
        Sending,
        "started_at = now(), heartbeat_at = now(), pause_reason = NULL",
        |q| q,
    )
    .await?;
    let Some(campaign) = started else {
        return Err(Error::Conflict("This campaign is already sending or was sent.".into()));
    };
    tx.commit().await?;
    jobs.kick_campaign(db, tenant, id, false).await?;
    Ok(campaign)
}

/// Schedules a draft (or moves a schedule). `at` must be in the future; `tz` is kept so the
/// editor shows the time as the author chose it.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn schedule(
    db: &Db,
    tenant: TenantId,
    role: Role,
    id: CampaignId,
    at: DateTime<Utc>,
    tz: &str,
) -> Result<Campaign> {
    role.require(Role::Author)?;
    if at <= Utc::now() {
        return Err(Error::invalid("Choose a time in the future."));
    }
    if tz.is_empty() || tz.len() > 64 || tz.chars().any(char::is_control) {
        return Err(Error::invalid("Unknown time zone."));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval::gate(&mut tx, tenant, role).await?;
    let current = get_in(&mut tx, tenant, id).await?;
    check_ready(&mut tx, tenant, &current).await?;
    use CampaignStatus::{Draft, Scheduled};
    let row =
        transition(&mut tx, tenant, id, &[Draft, Scheduled], Scheduled, "scheduled_at = $5, schedule_tz = $6", |q| {
            q.bind(at).bind(tz)
        })
        .await?;
    let c = row.ok_or_else(|| Error::Conflict("This campaign is already sending or was sent.".into()))?;
    tx.commit().await?;
    Ok(c)
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

/// [`transition`] for the lifecycle calls: 404 when the campaign does not exist, 409 with
/// `conflict` when it is in another state. Returns the open transaction for follow-up writes.
async fn transition_or_conflict<'q>(
    db: &Db,
    tenant: TenantId,
    id: CampaignId,
    (from, to): (&'q [CampaignStatus], CampaignStatus),
    (also, bind_also): (&str, impl FnOnce(CampaignQuery<'q>) -> CampaignQuery<'q>),
    conflict: &str,
) -> Result<(Campaign, Tx)> {
    let mut tx = db.tenant_tx(tenant).await?;
    match transition(&mut tx, tenant, id, from, to, also, bind_also).await? {
        Some(c) => Ok((c, tx)),
        None => {
            get_in(&mut tx, tenant, id).await?;
            Err(Error::Conflict(conflict.to_string()))
        }
    }
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn unschedule(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, mut tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Scheduled], CampaignStatus::Draft),
        ("scheduled_at = NULL", |q| q),
        "This campaign is not scheduled.",
    )
    .await?;
    super::approval::forget(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(c)
}

/// Stops new claims at once: the claim statement requires `status = 'sending'`.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn pause(db: &Db, tenant: TenantId, role: Role, id: CampaignId, reason: &str) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Sending], CampaignStatus::Paused),
        ("pause_reason = $5", |q| q.bind(reason)),
        "Only a sending campaign can be paused.",
    )
    .await?;
    tx.commit().await?;
    Ok(c)
}

#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn resume(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval::gate(&mut tx, tenant, role).await?;
    crate::account_limits::require_not_suspended(&mut tx, tenant).await?;
    super::warmup::check_resume(&mut tx, tenant, id).await?;
    tx.commit().await?;
    let (c, tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Paused], CampaignStatus::Sending),
        ("pause_reason = NULL, heartbeat_at = now()", |q| q),
        "Only a paused campaign can be resumed.",
    )
    .await?;
    tx.commit().await?;
    jobs.kick_campaign(db, tenant, id, c.fanout_done).await?;
    Ok(c)
}

/// Ends a send: queued rows (and those held for an A/B test's winner) become `cancelled`; messages already handed to a connection finish.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn cancel(db: &Db, tenant: TenantId, role: Role, id: CampaignId) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, mut tx) = transition_or_conflict(
        db,
        tenant,
        id,
        (&[CampaignStatus::Sending, CampaignStatus::Paused], CampaignStatus::Cancelled),
        ("finished_at = now()", |q| q),
        "Only a sending or paused campaign can be cancelled.",
    )
    .await?;
    sqlx::query(
        "UPDATE sends SET status = 'cancelled', updated_at = now() WHERE tenant_id = $1 AND campaign_id = $2 AND status IN ('queued', 'held')",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    // No frozen figures here: messages in flight still finish after this.
    tx.commit().await?;
    Ok(c)
}

/// Puts failed messages (not hard bounces, which are suppressed) back in the queue and sends
/// again. Returns how many were requeued.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn retry_failed(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: CampaignId) -> Result<u64> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    // The campaign row lock orders this against `finish_if_done` (which takes it too): either
    // the send finished first and this reopens it, or these rows are queued before it looks.
    lock_in(&mut tx, tenant, id).await?;
    let c = get_in(&mut tx, tenant, id).await?;
    if !matches!(c.status, CampaignStatus::Sent | CampaignStatus::Sending | CampaignStatus::Paused) {
        return Err(Error::Conflict("Only a campaign that has sent can retry its failures.".into()));
    }
    let n = sqlx::query(
        "UPDATE sends SET status = 'queued', attempts = 0, next_attempt_at = now(), reason = NULL,
                first_claimed_at = NULL, updated_at = now()
         WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'failed' AND NOT hard_bounce",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n > 0 && c.status == CampaignStatus::Sent {
        super::tally::reopen(&mut tx, tenant, id, n as i64).await?;
        use CampaignStatus::{Sending, Sent};
        transition(&mut tx, tenant, id, &[Sent], Sending, "finished_at = NULL, heartbeat_at = now()", |q| q).await?;
    }
    tx.commit().await?;
    if n > 0 {
        jobs.kick_campaign(db, tenant, id, true).await?;
    }
    Ok(n)
}

/// Takes the campaign row's lock for the rest of the transaction. NO KEY UPDATE, like an UPDATE
/// of the row takes: it orders the callers among themselves without blocking the foreign-key
/// checks of rows that reference the campaign (a delivery loop adding its tallies holds the
/// stats row and then needs one; FOR UPDATE here made that a deadlock).
async fn lock_in(tx: &mut Tx, tenant: TenantId, id: CampaignId) -> Result<()> {
    sqlx::query("SELECT 1 FROM campaigns WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE")
        .bind(tenant)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A step's campaign paused itself (its template broke, its mail kept failing, the bounce rate):
/// the whole automation pauses, saying why, so nobody moves on towards mail that cannot go out.
/// False when `campaign` is not an automation's step.
pub(crate) async fn pause_automation_of(db: &Db, tenant: TenantId, campaign: CampaignId, reason: &str) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    let automation: Option<Option<herald_types::AutomationId>> =
        sqlx::query_scalar("SELECT automation_id FROM campaigns WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(campaign)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(Some(automation)) = automation else { return Ok(false) };
    sqlx::query(
        "UPDATE automations SET status = 'paused', pause_reason = $3, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status = 'live'",
    )
    .bind(tenant)
    .bind(automation)
    .bind(reason)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'paused', pause_reason = $3, updated_at = now()
         WHERE tenant_id = $1 AND automation_id = $2 AND status = 'sending'",
    )
    .bind(tenant)
    .bind(automation)
    .bind(reason)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    tracing::warn!(%automation, reason, "automation paused itself");
    Ok(true)
}

/// sending → sent, once the fan-out finished and no row is queued, held for an A/B test's
/// winner, or in flight. "Done" is this
/// condition, never "the last claim came back empty" (listmonk #1931).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub(crate) async fn finish_if_done(db: &Db, tenant: TenantId, id: CampaignId) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    // Idle loops ask this several times a second: look first without the lock.
    let looks_done: Option<bool> = sqlx::query_scalar(
        "SELECT c.status = 'sending' AND c.fanout_done AND c.automation_id IS NULL
                AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'held', 'sending'))
         FROM campaigns c WHERE c.tenant_id = $1 AND c.id = $2",
    )
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    if looks_done != Some(true) {
        tx.commit().await?;
        return Ok(false);
    }
    // Then lock, and look again: the check below runs on a snapshot taken after the lock, so it
    // sees rows a concurrent "retry failed" queued before releasing the lock (an UPDATE's
    // re-check after waiting for a lock would reuse its older snapshot for the NOT EXISTS).
    lock_in(&mut tx, tenant, id).await?;
    let n = sqlx::query(
        "UPDATE campaigns c SET status = 'sent', finished_at = now(), updated_at = now()
         WHERE c.tenant_id = $1 AND c.id = $2 AND c.status = 'sending' AND c.fanout_done AND c.automation_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'held', 'sending'))",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n > 0 {
        super::tally::snapshot_final(&mut tx, tenant, id).await?;
    }
    tx.commit().await?;
    Ok(n > 0)
}
