//! Campaign rows: drafts, edits, and the lifecycle transitions. Every transition is one
//! compare-and-set UPDATE whose WHERE names the expected state, so a double click, two tabs or
//! two API calls start one send (seed 002, layer 2).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::render::{BodyFormat, CampaignContent, CompiledCampaign};
use crate::audience::readers::AttributeCondition;
use crate::db::{Db, Tx};
use crate::domain::{Email, Role, TenantId};
use crate::error::{Error, Result};
use crate::jobs::Jobs;

#[derive(Clone, Debug, Serialize, Deserialize, sqlx::FromRow, PartialEq)]
pub struct Campaign {
    pub id: Uuid,
    pub name: String,
    pub subject: String,
    pub preheader: String,
    pub identity_id: Option<Uuid>,
    pub from_name: String,
    pub from_email: String,
    pub reply_to: String,
    pub list_ids: Vec<Uuid>,
    pub attribute_filter: String,
    pub body_format: String,
    pub body: String,
    pub status: String,
    pub scheduled_at: Option<DateTime<Utc>>,
    pub schedule_tz: String,
    pub spread_hours: Option<f64>,
    /// `on`, `anonymous` (counts without reader ids) or `off`.
    pub tracking: String,
    pub pause_reason: Option<String>,
    /// A recurring campaign's schedule ([`super::recurring::Recurrence`] as JSON); `None` for one-off sends.
    pub recurrence: Option<serde_json::Value>,
    /// Where per-reader data comes from: `none`, `api` or `url`.
    pub feed: String,
    pub feed_url: String,
    /// On an edition: the recurring campaign it was made from, and its slot.
    pub parent_id: Option<Uuid>,
    pub edition_slot: Option<DateTime<Utc>>,
    pub fanout_done: bool,
    pub recipients: i64,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

pub(crate) const COLUMNS: &str = "id, name, subject, preheader, identity_id, from_name, from_email, reply_to, list_ids,
    attribute_filter, body_format, body, status, scheduled_at, schedule_tz, spread_hours, tracking, pause_reason, recurrence,
    feed, feed_url, parent_id, edition_slot, fanout_done,
    recipients, started_at, finished_at, created_at, updated_at";

impl Campaign {
    pub fn content(&self) -> Result<CampaignContent> {
        Ok(CampaignContent {
            subject: self.subject.clone(),
            preheader: self.preheader.clone(),
            format: self.body_format.parse::<BodyFormat>().map_err(|_| Error::Invalid("unknown body format".into()))?,
            body: self.body.clone(),
        })
    }

    pub fn is_editable(&self) -> bool {
        matches!(self.status.as_str(), "draft" | "scheduled")
    }

    /// The attribute condition as written, parsed; `None` when empty.
    pub fn attribute_condition(&self) -> Result<Option<AttributeCondition>> {
        let raw = self.attribute_filter.trim();
        if raw.is_empty() { Ok(None) } else { AttributeCondition::parse(raw).map(Some) }
    }
}

/// Everything an author edits. Autosave sends the whole draft each time.
#[derive(Clone, Debug, Serialize, Deserialize, Default, PartialEq)]
pub struct CampaignInput {
    pub name: String,
    #[serde(default)]
    pub subject: String,
    #[serde(default)]
    pub preheader: String,
    #[serde(default)]
    pub identity_id: Option<Uuid>,
    #[serde(default)]
    pub from_name: String,
    #[serde(default)]
    pub from_email: String,
    #[serde(default)]
    pub reply_to: String,
    #[serde(default)]
    pub list_ids: Vec<Uuid>,
    #[serde(default)]
    pub attribute_filter: String,
    #[serde(default = "default_format")]
    pub body_format: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub spread_hours: Option<f64>,
    /// Open and click tracking: `on` (default), `anonymous` or `off`.
    #[serde(default = "default_tracking")]
    pub tracking: String,
    /// Makes this a recurring campaign: an edition at every slot of the schedule.
    #[serde(default)]
    pub recurrence: Option<super::recurring::Recurrence>,
    /// `none` (default), `api` (data pushed per reader) or `url` (fetched per reader).
    #[serde(default)]
    pub feed: String,
    /// With `feed = url`: `{email}` and `{reader_id}` are replaced per reader.
    #[serde(default)]
    pub feed_url: String,
}

fn default_format() -> String {
    "markdown".into()
}

pub fn default_tracking() -> String {
    "on".into()
}

pub const TRACKING_MODES: [&str; 3] = ["on", "anonymous", "off"];

/// Checks what can be checked while drafting. Header-bound fields must be one line.
fn validate(input: &CampaignInput) -> Result<()> {
    let one_line = |label: &str, v: &str, max: usize| {
        if v.chars().any(char::is_control) {
            Err(Error::Invalid(format!("The {label} must be one line.")))
        } else if v.chars().count() > max {
            Err(Error::Invalid(format!("The {label} may have at most {max} characters.")))
        } else {
            Ok(())
        }
    };
    let name = input.name.trim();
    if name.is_empty() {
        return Err(Error::Invalid("Give the campaign a name.".into()));
    }
    one_line("name", name, 200)?;
    one_line("subject", &input.subject, 300)?;
    one_line("preheader", &input.preheader, 300)?;
    one_line("sender name", &input.from_name, 100)?;
    if !input.from_email.trim().is_empty() {
        Email::parse(&input.from_email)?;
    }
    if !input.reply_to.trim().is_empty() {
        Email::parse(&input.reply_to)?;
    }
    if !input.attribute_filter.trim().is_empty() {
        AttributeCondition::parse(&input.attribute_filter)?;
    }
    input.body_format.parse::<BodyFormat>().map_err(|_| Error::Invalid("Choose Markdown or HTML.".into()))?;
    if input.body.len() > 1024 * 1024 {
        return Err(Error::Invalid("The body may be at most 1 MB.".into()));
    }
    if let Some(h) = input.spread_hours
        && !(h > 0.0 && h <= 168.0)
    {
        return Err(Error::Invalid("Spread the send over 0–168 hours.".into()));
    }
    if !input.tracking.is_empty() && !TRACKING_MODES.contains(&input.tracking.as_str()) {
        return Err(Error::Invalid("Tracking is on, anonymous or off.".into()));
    }
    if let Some(r) = &input.recurrence {
        r.validate()?;
    }
    super::recurring::validate_feed(&input.feed, &input.feed_url, input.recurrence.is_some())?;
    Ok(())
}

type CampaignQuery<'q> = sqlx::query::QueryAs<'q, sqlx::Postgres, Campaign, sqlx::postgres::PgArguments>;

/// Binds the editable fields as $3…$18, in the order both `create` and `update` name them.
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
        .bind(&input.body_format)
        .bind(&input.body)
        .bind(input.spread_hours)
        // Empty (a `Default` input) means the default.
        .bind(if input.tracking.is_empty() { "on" } else { input.tracking.as_str() })
        .bind(input.recurrence.as_ref().map(|r| serde_json::to_value(r).unwrap_or_default()))
        .bind(if input.feed.is_empty() { "none" } else { input.feed.as_str() })
        .bind(input.feed_url.trim())
}

pub async fn create(db: &Db, tenant: TenantId, role: Role, input: &CampaignInput) -> Result<Campaign> {
    role.require(Role::Author)?;
    validate(input)?;
    let mut tx = db.tenant_tx(tenant).await?;
    // The workspace's default sender fills in an empty one.
    let insert = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO campaigns (id, tenant_id, name, subject, preheader, identity_id, from_name, from_email, reply_to,
             list_ids, attribute_filter, body_format, body, spread_hours, tracking, recurrence, feed, feed_url)
         SELECT $1, $2, $3, $4, $5, $6, coalesce(nullif($7, ''), t.default_from_name),
                coalesce(nullif($8, ''), t.default_from_email), $9, $10, $11, $12, $13, $14, $15, $16, $17, $18
         FROM tenants t WHERE t.id = $2
         RETURNING {COLUMNS}"
    )))
    .bind(Uuid::new_v4())
    .bind(tenant);
    let campaign = bind_content(insert, input).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(campaign)
}

/// Saves a draft (or a scheduled campaign, which stays scheduled). A campaign that started
/// sending is frozen: 409.
pub async fn update(db: &Db, tenant: TenantId, role: Role, id: Uuid, input: &CampaignInput) -> Result<Campaign> {
    role.require(Role::Author)?;
    validate(input)?;
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval::guard_edit(&mut tx, tenant, role, id).await?;
    let update = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaigns SET name = $3, subject = $4, preheader = $5, identity_id = $6, from_name = $7, from_email = $8,
             reply_to = $9, list_ids = $10, attribute_filter = $11, body_format = $12, body = $13, spread_hours = $14,
             tracking = $15, recurrence = $16, feed = $17, feed_url = $18, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status IN ('draft', 'scheduled')
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

pub(crate) async fn get_in(tx: &mut Tx, tenant: TenantId, id: Uuid) -> Result<Campaign> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM campaigns WHERE tenant_id = $1 AND id = $2")))
        .bind(tenant)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(Error::NotFound)
}

pub async fn get(db: &Db, tenant: TenantId, id: Uuid) -> Result<Campaign> {
    let mut tx = db.tenant_tx(tenant).await?;
    let c = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(c)
}

pub async fn list(db: &Db, tenant: TenantId, limit: i64) -> Result<Vec<Campaign>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM campaigns WHERE tenant_id = $1 ORDER BY created_at DESC LIMIT $2"
    )))
    .bind(tenant)
    .bind(limit.clamp(1, 500))
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows)
}

/// Drafts only: anything that sent keeps its record.
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: Uuid) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("DELETE FROM campaigns WHERE tenant_id = $1 AND id = $2 AND status = 'draft'")
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
    let (postal, name): (String, String) = sqlx::query_as("SELECT postal_address, name FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?;
    if postal.trim().is_empty() {
        return Err(Error::Invalid(
            "Add your workspace's postal address in Settings first: the law requires it in every campaign.".into(),
        ));
    }
    if c.subject.trim().is_empty() {
        return Err(Error::Invalid("Write a subject first.".into()));
    }
    if c.from_email.trim().is_empty() {
        return Err(Error::Invalid("Choose a sender address first.".into()));
    }
    crate::sending_domains::require_verified_sender(tx, tenant, c.identity_id.is_some(), &c.from_email).await?;
    if c.list_ids.is_empty() {
        return Err(Error::Invalid("Choose at least one list to send to.".into()));
    }
    super::warmup::check_estimate(tx, tenant, c.id, &c.list_ids).await?;
    let known: i64 = sqlx::query_scalar("SELECT count(*) FROM lists WHERE tenant_id = $1 AND id = ANY($2)")
        .bind(tenant)
        .bind(&c.list_ids)
        .fetch_one(&mut **tx)
        .await?;
    if known != c.list_ids.len() as i64 {
        return Err(Error::Invalid("One of the chosen lists no longer exists.".into()));
    }
    c.attribute_condition()?;
    CompiledCampaign::compile(&c.content()?, &super::render::Workspace { name, postal_address: postal })
        .map_err(|e| Error::Invalid(format!("Fix the template first: {e}")))?;
    Ok(())
}

/// Starts sending now. Exactly one caller wins the draft/scheduled → sending transition; the
/// others get 409. The fan-out and delivery jobs are enqueued after the commit; should the
/// process die in between, the supervisor sees a sending campaign with no heartbeat and
/// enqueues them itself.
pub async fn send_now(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: Uuid) -> Result<Campaign> {
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
    let started: Option<Campaign> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaigns SET status = 'sending', started_at = now(), heartbeat_at = now(), pause_reason = NULL,
             updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status IN ('draft', 'scheduled')
         RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut *tx)
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
pub async fn schedule(
    db: &Db,
    tenant: TenantId,
    role: Role,
    id: Uuid,
    at: DateTime<Utc>,
    tz: &str,
) -> Result<Campaign> {
    role.require(Role::Author)?;
    if at <= Utc::now() {
        return Err(Error::Invalid("Choose a time in the future.".into()));
    }
    if tz.is_empty() || tz.len() > 64 || tz.chars().any(char::is_control) {
        return Err(Error::Invalid("Unknown time zone.".into()));
    }
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval::gate(&mut tx, tenant, role).await?;
    let current = get_in(&mut tx, tenant, id).await?;
    check_ready(&mut tx, tenant, &current).await?;
    let row: Option<Campaign> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaigns SET status = 'scheduled', scheduled_at = $3, schedule_tz = $4, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status IN ('draft', 'scheduled') RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(at)
    .bind(tz)
    .fetch_optional(&mut *tx)
    .await?;
    let c = row.ok_or_else(|| Error::Conflict("This campaign is already sending or was sent.".into()))?;
    tx.commit().await?;
    Ok(c)
}

/// One compare-and-set transition `from` → `to`; 409 with `conflict` when the campaign is not
/// in one of the `from` states.
async fn transition(
    db: &Db,
    tenant: TenantId,
    id: Uuid,
    from: &[&str],
    set: &str,
    conflict: &str,
) -> Result<(Campaign, Tx)> {
    let mut tx = db.tenant_tx(tenant).await?;
    let from: Vec<String> = from.iter().map(|s| s.to_string()).collect();
    let row: Option<Campaign> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaigns SET {set}, updated_at = now() WHERE tenant_id = $1 AND id = $2 AND status = ANY($3)
         RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(&from)
    .fetch_optional(&mut *tx)
    .await?;
    match row {
        Some(c) => Ok((c, tx)),
        None => {
            get_in(&mut tx, tenant, id).await?;
            Err(Error::Conflict(conflict.to_string()))
        }
    }
}

pub async fn unschedule(db: &Db, tenant: TenantId, role: Role, id: Uuid) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, mut tx) = transition(
        db,
        tenant,
        id,
        &["scheduled"],
        "status = 'draft', scheduled_at = NULL",
        "This campaign is not scheduled.",
    )
    .await?;
    super::approval::forget(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(c)
}

/// Stops new claims at once: the claim statement requires `status = 'sending'`.
pub async fn pause(db: &Db, tenant: TenantId, role: Role, id: Uuid, reason: &str) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let row: Option<Campaign> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE campaigns SET status = 'paused', pause_reason = $3, updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status = 'sending' RETURNING {COLUMNS}"
    )))
    .bind(tenant)
    .bind(id)
    .bind(reason)
    .fetch_optional(&mut *tx)
    .await?;
    let c = match row {
        Some(c) => c,
        None => {
            get_in(&mut tx, tenant, id).await?;
            return Err(Error::Conflict("Only a sending campaign can be paused.".into()));
        }
    };
    tx.commit().await?;
    Ok(c)
}

pub async fn resume(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: Uuid) -> Result<Campaign> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    super::approval::gate(&mut tx, tenant, role).await?;
    super::warmup::check_resume(&mut tx, tenant, id).await?;
    tx.commit().await?;
    let (c, tx) = transition(
        db,
        tenant,
        id,
        &["paused"],
        "status = 'sending', pause_reason = NULL, heartbeat_at = now()",
        "Only a paused campaign can be resumed.",
    )
    .await?;
    tx.commit().await?;
    jobs.kick_campaign(db, tenant, id, c.fanout_done).await?;
    Ok(c)
}

/// Ends a send: queued rows become `cancelled`; messages already handed to a connection finish.
pub async fn cancel(db: &Db, tenant: TenantId, role: Role, id: Uuid) -> Result<Campaign> {
    role.require(Role::Author)?;
    let (c, mut tx) = transition(
        db,
        tenant,
        id,
        &["sending", "paused"],
        "status = 'cancelled', finished_at = now()",
        "Only a sending or paused campaign can be cancelled.",
    )
    .await?;
    sqlx::query(
        "UPDATE sends SET status = 'cancelled', updated_at = now() WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'queued'",
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
pub async fn retry_failed(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: Uuid) -> Result<u64> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    // The campaign row lock orders this against `finish_if_done` (which takes it too): either
    // the send finished first and this reopens it, or these rows are queued before it looks.
    lock_in(&mut tx, tenant, id).await?;
    let c = get_in(&mut tx, tenant, id).await?;
    if !matches!(c.status.as_str(), "sent" | "sending" | "paused") {
        return Err(Error::Conflict("Only a campaign that has sent can retry its failures.".into()));
    }
    let n = sqlx::query(
        "UPDATE sends SET status = 'queued', attempts = 0, next_attempt_at = now(), reason = NULL, updated_at = now()
         WHERE tenant_id = $1 AND campaign_id = $2 AND status = 'failed' AND NOT hard_bounce",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if n > 0 && c.status == "sent" {
        super::tally::reopen(&mut tx, tenant, id, n as i64).await?;
        sqlx::query(
            "UPDATE campaigns SET status = 'sending', finished_at = NULL, heartbeat_at = now(), updated_at = now()
             WHERE tenant_id = $1 AND id = $2 AND status = 'sent'",
        )
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?;
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
async fn lock_in(tx: &mut Tx, tenant: TenantId, id: Uuid) -> Result<()> {
    sqlx::query("SELECT 1 FROM campaigns WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE")
        .bind(tenant)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// sending → sent, once the fan-out finished and no row is queued or in flight. "Done" is this
/// condition, never "the last claim came back empty" (listmonk #1931).
pub(crate) async fn finish_if_done(db: &Db, tenant: TenantId, id: Uuid) -> Result<bool> {
    let mut tx = db.tenant_tx(tenant).await?;
    // Idle loops ask this several times a second: look first without the lock.
    let looks_done: Option<bool> = sqlx::query_scalar(
        "SELECT c.status = 'sending' AND c.fanout_done
                AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'sending'))
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
         WHERE c.tenant_id = $1 AND c.id = $2 AND c.status = 'sending' AND c.fanout_done
           AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.campaign_id = c.id AND s.status IN ('queued', 'sending'))",
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
