//! Automation rows: drafts, edits (also of a live automation) and the lifecycle
//! draft → live ⇄ paused → archived. Each transition is one compare-and-set UPDATE, in the same
//! transaction as what it does to the step campaigns, so two clicks make one change.

use std::collections::HashMap;

use herald_types::{
    Automation, AutomationId, AutomationInput, AutomationStatus, AutomationStepId, BodyFormat, BranchCondition,
    CampaignId, CampaignStatus, Reentry, RemovedStepReaders, Step, StepAction, Trigger,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::{Role, TenantId};
use crate::error::{Error, Result};
use crate::infra::db::{Db, Tx};
use crate::jobs::Jobs;

/// Automations per workspace.
pub const MAX_AUTOMATIONS: i64 = 200;

/// A step as `automations.steps` holds it: an email's content is its campaign's row, so the
/// stored action is only `{"kind": "email"}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct StoredStep {
    id: AutomationStepId,
    action: Value,
    #[serde(default)]
    campaign_id: Option<CampaignId>,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: AutomationId,
    name: String,
    status: AutomationStatus,
    trigger_kind: String,
    trigger_key: String,
    reentry: Reentry,
    cap_exempt: bool,
    pause_reason: Option<String>,
    warmup_limit_reached: Option<i64>,
    steps: sqlx::types::Json<Vec<StoredStep>>,
    active: i64,
    created_at: chrono::DateTime<chrono::Utc>,
    updated_at: chrono::DateTime<chrono::Utc>,
}

const COLUMNS: &str =
    "a.id, a.name, a.status, a.trigger_kind, a.trigger_key, a.reentry, a.cap_exempt, a.pause_reason, a.steps,
    CASE WHEN a.status = 'live' AND automation_mail_allowance(a.tenant_id) <= 0
         THEN (SELECT t.campaign_mail_per_day::bigint FROM tenants t WHERE t.id = a.tenant_id) END AS warmup_limit_reached,
    (SELECT count(*) FROM automation_runs r WHERE r.tenant_id = a.tenant_id AND r.automation_id = a.id
       AND r.state = 'waiting') AS active,
    a.created_at, a.updated_at";

/// An email step's content, from its campaign row.
#[derive(sqlx::FromRow)]
struct EmailContent {
    id: CampaignId,
    subject: String,
    preheader: String,
    body_format: BodyFormat,
    body: String,
}

async fn load(tx: &mut Tx, tenant: TenantId, rows: Vec<Row>) -> Result<Vec<Automation>> {
    let ids: Vec<AutomationId> = rows.iter().map(|r| r.id).collect();
    let emails: Vec<EmailContent> = sqlx::query_as(
        "SELECT id, subject, preheader, body_format, body FROM campaigns WHERE tenant_id = $1 AND automation_id = ANY($2)",
    )
    .bind(tenant)
    .bind(&ids)
    .fetch_all(&mut **tx)
    .await?;
    let emails: HashMap<CampaignId, EmailContent> = emails.into_iter().map(|e| (e.id, e)).collect();
    rows.into_iter()
        .map(|r| {
            let steps = r
                .steps
                .0
                .into_iter()
                .map(|s| {
                    let action = match s.campaign_id.and_then(|c| emails.get(&c)) {
                        Some(e) => StepAction::Email {
                            subject: e.subject.clone(),
                            preheader: e.preheader.clone(),
                            body_format: e.body_format,
                            body: e.body.clone(),
                        },
                        None => serde_json::from_value(s.action).map_err(|e| {
                            Error::Unexpected(anyhow::anyhow!("automation {}: a step is unreadable: {e}", r.id))
                        })?,
                    };
                    Ok(Step { id: s.id, action, campaign_id: s.campaign_id })
                })
                .collect::<Result<Vec<Step>>>()?;
            let trigger = Trigger::from_kind_and_key(&r.trigger_kind, &r.trigger_key).ok_or_else(|| {
                Error::Unexpected(anyhow::anyhow!("automation {}: unknown trigger {}", r.id, r.trigger_kind))
            })?;
            Ok(Automation {
                id: r.id,
                name: r.name,
                status: r.status,
                trigger,
                reentry: r.reentry,
                cap_exempt: r.cap_exempt,
                pause_reason: r.pause_reason,
                warmup_limit_reached: r.warmup_limit_reached,
                steps,
                active: r.active,
                created_at: r.created_at,
                updated_at: r.updated_at,
            })
        })
        .collect()
}

/// The workspace's automations, archived last, then by name.
#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn list(db: &Db, tenant: TenantId) -> Result<Vec<Automation>> {
    let mut tx = db.tenant_tx(tenant).await?;
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM automations a WHERE a.tenant_id = $1 ORDER BY a.status = 'archived', lower(a.name)"
    )))
    .bind(tenant)
    .fetch_all(&mut *tx)
    .await?;
    let out = load(&mut tx, tenant, rows).await?;
    tx.commit().await?;
    Ok(out)
}

pub(crate) async fn get_in(tx: &mut Tx, tenant: TenantId, id: AutomationId) -> Result<Automation> {
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM automations a WHERE a.tenant_id = $1 AND a.id = $2"
    )))
    .bind(tenant)
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    let row = row.ok_or(Error::NotFound)?;
    Ok(load(tx, tenant, vec![row]).await?.remove(0))
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn get(db: &Db, tenant: TenantId, id: AutomationId) -> Result<Automation> {
    let mut tx = db.tenant_tx(tenant).await?;
    let a = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(a)
}

/// Something an automation names that must exist in the workspace (or, for a zone, in Postgres).
enum Reference<'a> {
    List(uuid::Uuid),
    Tag(uuid::Uuid),
    Segment(uuid::Uuid),
    /// A custom field, of this kind when one is given.
    Field(&'a str, Option<&'static str>),
    /// An IANA time zone.
    Zone(&'a str),
}

impl Reference<'_> {
    async fn exists(&self, tx: &mut Tx, tenant: TenantId) -> Result<bool> {
        let (sql, id): (&'static str, Option<uuid::Uuid>) = match self {
            Reference::List(id) => ("SELECT EXISTS (SELECT 1 FROM lists WHERE tenant_id = $1 AND id = $2)", Some(*id)),
            Reference::Tag(id) => ("SELECT EXISTS (SELECT 1 FROM tags WHERE tenant_id = $1 AND id = $2)", Some(*id)),
            Reference::Segment(id) => {
                ("SELECT EXISTS (SELECT 1 FROM segments WHERE tenant_id = $1 AND id = $2)", Some(*id))
            }
            Reference::Field(key, kind) => {
                return Ok(sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM fields WHERE tenant_id = $1 AND key = $2 AND ($3::text IS NULL OR kind = $3))",
                )
                .bind(tenant)
                .bind(key.trim())
                .bind(*kind)
                .fetch_one(&mut **tx)
                .await?);
            }
            Reference::Zone(zone) => {
                return Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1)")
                    .bind(zone.trim())
                    .fetch_one(&mut **tx)
                    .await?);
            }
        };
        Ok(sqlx::query_scalar(sql).bind(tenant).bind(id).fetch_one(&mut **tx).await?)
    }
}

/// The trigger's list, tag, segment or field, and every list, tag, segment, field or zone a step
/// names, must be the workspace's (or Postgres's): said beside the field that names them.
async fn check_references(tx: &mut Tx, tenant: TenantId, input: &AutomationInput) -> Result<()> {
    let mut wanted: Vec<(String, Reference<'_>, &str)> = Vec::new();
    let trigger = match &input.trigger {
        Trigger::ListConfirmed { list_id } => {
            Some(("list_id", Reference::List(list_id.0), "Choose a list of this workspace."))
        }
        Trigger::TagAdded { tag_id } => Some(("tag_id", Reference::Tag(tag_id.0), "Choose a tag of this workspace.")),
        Trigger::Event { .. } => None,
        Trigger::SegmentEntered { segment_id } => {
            Some(("segment_id", Reference::Segment(segment_id.0), "Choose a segment of this workspace."))
        }
        Trigger::DateAnniversary { field } => {
            Some(("field", Reference::Field(field, Some("date")), "Choose a date field of this workspace."))
        }
    };
    wanted.extend(trigger.map(|(field, r, message)| (format!("trigger.{field}"), r, message)));
    for (i, step) in input.steps.iter().enumerate() {
        let at = |field: &str| format!("steps.{i}.{field}");
        match &step.action {
            StepAction::AddTag { tag_id } | StepAction::RemoveTag { tag_id } => {
                wanted.push((at("tag_id"), Reference::Tag(tag_id.0), "Choose a tag of this workspace."))
            }
            StepAction::Subscribe { list_id } | StepAction::Unsubscribe { list_id } => {
                wanted.push((at("list_id"), Reference::List(list_id.0), "Choose a list of this workspace."))
            }
            StepAction::WaitUntil { zone, zone_field, .. } => {
                // No zone: the workspace's, which Settings checked.
                if !zone.trim().is_empty() {
                    wanted.push((at("zone"), Reference::Zone(zone), "Choose a time zone such as Europe/Berlin."));
                }
                if let Some(field) = zone_field {
                    wanted.push((at("zone_field"), Reference::Field(field, None), "Choose a field of this workspace."));
                }
            }
            StepAction::Branch { condition, .. } => {
                let reference = match condition {
                    BranchCondition::HasTag { tag_id } => (Reference::Tag(tag_id.0), "Choose a tag of this workspace."),
                    BranchCondition::InSegment { segment_id } => {
                        (Reference::Segment(segment_id.0), "Choose a segment of this workspace.")
                    }
                    BranchCondition::FieldIs { field, .. } => {
                        (Reference::Field(field, None), "Choose a field of this workspace.")
                    }
                    BranchCondition::Opened { .. } | BranchCondition::Clicked { .. } => continue,
                };
                wanted.push((at("condition"), reference.0, reference.1));
            }
            StepAction::Email { .. } | StepAction::Wait { .. } | StepAction::Exit => {}
        }
    }
    let mut problems = herald_types::Problems::default();
    for (key, reference, message) in wanted {
        if !reference.exists(tx, tenant).await? {
            problems.add(&key, message);
        }
    }
    Ok(problems.into_result()?)
}

#[tracing::instrument(skip_all, fields(%tenant))]
pub async fn create(db: &Db, tenant: TenantId, role: Role, input: &AutomationInput) -> Result<Automation> {
    role.require(Role::Author)?;
    input.validate()?;
    let mut tx = db.tenant_tx(tenant).await?;
    check_references(&mut tx, tenant, input).await?;
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM automations WHERE tenant_id = $1 AND status <> 'archived'")
            .bind(tenant)
            .fetch_one(&mut *tx)
            .await?;
    if count >= MAX_AUTOMATIONS {
        return Err(Error::Refused(format!("A workspace can have at most {MAX_AUTOMATIONS} automations.")));
    }
    let id = AutomationId::new();
    let (kind, key) = input.trigger.kind_and_key();
    sqlx::query(
        "INSERT INTO automations (tenant_id, id, name, trigger_kind, trigger_key, reentry, cap_exempt)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(tenant)
    .bind(id)
    .bind(input.name.trim())
    .bind(kind)
    .bind(&key)
    .bind(input.reentry)
    .bind(input.cap_exempt)
    .execute(&mut *tx)
    .await?;
    write_steps(&mut tx, tenant, id, AutomationStatus::Draft, &[], input).await?;
    let a = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(a)
}

/// Replaces the name, trigger, rules and steps. On a live or paused automation, readers keep
/// their place at steps that stay (their ids), reach changed steps as changed, and those
/// waiting at a removed step go on with the step that followed it or exit, as the input says.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn update(
    db: &Db,
    tenant: TenantId,
    role: Role,
    id: AutomationId,
    input: &AutomationInput,
) -> Result<Automation> {
    role.require(Role::Author)?;
    input.validate()?;
    let mut tx = db.tenant_tx(tenant).await?;
    // The scheduler's batches hold this row FOR SHARE: an edit waits for one, and the next one
    // sees the new steps.
    let status: Option<AutomationStatus> =
        sqlx::query_scalar("SELECT status FROM automations WHERE tenant_id = $1 AND id = $2 FOR UPDATE")
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let status = status.ok_or(Error::NotFound)?;
    if status == AutomationStatus::Archived {
        return Err(Error::Conflict("This automation is archived and can no longer be edited.".into()));
    }
    check_references(&mut tx, tenant, input).await?;
    let old = get_in(&mut tx, tenant, id).await?;
    // What an admin turned on is what goes out: in a workspace that requires approval, an edit by
    // a member who could not turn the automation on takes it off (live → paused) until an admin
    // starts it again. Its step campaigns pause with it, which also holds step mail already
    // queued, since that mail is composed from the step's current text when it is claimed.
    let mut status = status;
    if status == AutomationStatus::Live
        && !role.can_administer()
        && crate::campaigns::approval_rule::required_in(&mut tx, tenant).await?
    {
        transition(&mut tx, tenant, id, &[AutomationStatus::Live], AutomationStatus::Paused).await?;
        pause_step_campaigns(&mut tx, tenant, id, EDITED_NEEDS_APPROVAL).await?;
        status = AutomationStatus::Paused;
    }
    let (kind, key) = input.trigger.kind_and_key();
    if old.trigger != input.trigger {
        // A new segment is seen afresh: whoever is in it at its first check does not count.
        sqlx::query("UPDATE automations SET checked_at = NULL WHERE tenant_id = $1 AND id = $2")
            .bind(tenant)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM automation_segment_members WHERE tenant_id = $1 AND automation_id = $2")
            .bind(tenant)
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query(
        "UPDATE automations SET name = $3, trigger_kind = $4, trigger_key = $5, reentry = $6, cap_exempt = $7,
                updated_at = now()
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(id)
    .bind(input.name.trim())
    .bind(kind)
    .bind(&key)
    .bind(input.reentry)
    .bind(input.cap_exempt)
    .execute(&mut *tx)
    .await?;
    write_steps(&mut tx, tenant, id, status, &old.steps, input).await?;
    let a = get_in(&mut tx, tenant, id).await?;
    // A live automation sends its new or changed steps at once: they pass the checks `start`
    // makes, or the edit is refused.
    if status == AutomationStatus::Live {
        check_email_steps(&mut tx, tenant, &a).await?;
    }
    tx.commit().await?;
    Ok(a)
}

/// Why an automation paused itself when an author edited it in a workspace that requires approval.
const EDITED_NEEDS_APPROVAL: &str = "Edited by a member who cannot turn it on: an admin or the owner must start it again (this workspace requires approval for sends).";

/// Pauses the automation's sending step campaigns with `reason` (their queued mail waits).
async fn pause_step_campaigns(tx: &mut Tx, tenant: TenantId, automation: AutomationId, reason: &str) -> Result<()> {
    sqlx::query("UPDATE automations SET pause_reason = $3 WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(automation)
        .bind(reason)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'paused', pause_reason = $3, updated_at = now()
         WHERE tenant_id = $1 AND automation_id = $2 AND status = 'sending'",
    )
    .bind(tenant)
    .bind(automation)
    .bind(reason)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The checks a send makes (sender, postal address, template), for each email step, with the
/// failing step named.
async fn check_email_steps(tx: &mut Tx, tenant: TenantId, automation: &Automation) -> Result<()> {
    crate::account_limits::require_not_suspended(tx, tenant).await?;
    let campaigns = step_campaigns(tx, tenant, automation.id).await?;
    for (i, step) in automation.steps.iter().enumerate() {
        let Some(c) = step.campaign_id.and_then(|c| campaigns.iter().find(|x| x.id == c)) else { continue };
        let checked = async {
            let workspace = crate::campaigns::readiness::check_sender(tx, tenant, c).await?;
            crate::campaigns::readiness::check_template(tenant, c, &workspace).await
        };
        match checked.await {
            Ok(()) => {}
            Err(Error::Invalid(e)) => {
                let message = e.errors.first().map(|f| f.message.clone()).unwrap_or_default();
                return Err(Error::invalid(format!("Step {} ({}): {message}", i + 1, step.action.summary())));
            }
            Err(other) => return Err(other),
        }
    }
    Ok(())
}

/// Saves `input`'s steps over `old`: ids kept where the input names an existing step, new ones
/// made; an email step's campaign made or updated; removed steps' waiting readers moved on (or
/// out) and their campaigns closed.
async fn write_steps(
    tx: &mut Tx,
    tenant: TenantId,
    automation: AutomationId,
    status: AutomationStatus,
    old: &[Step],
    input: &AutomationInput,
) -> Result<()> {
    let mut stored: Vec<StoredStep> = Vec::with_capacity(input.steps.len());
    for step in &input.steps {
        let previous = step.id.and_then(|id| old.iter().find(|o| o.id == id));
        let id = previous.map(|p| p.id).unwrap_or_default();
        let campaign_id = match &step.action {
            StepAction::Email { subject, preheader, body_format, body } => {
                let campaign = match previous.and_then(|p| p.campaign_id) {
                    Some(c) => c,
                    None => create_step_campaign(tx, tenant, automation, status, input).await?,
                };
                sqlx::query(
                    "UPDATE campaigns SET name = left($3, 200), subject = $4, preheader = $5, body_format = $6, body = $7,
                            cap_exempt = $8, updated_at = now()
                     WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant)
                .bind(campaign)
                .bind(format!("{} · {}", input.name.trim(), subject.trim()))
                .bind(subject)
                .bind(preheader)
                .bind(body_format)
                .bind(body)
                .bind(input.cap_exempt)
                .execute(&mut **tx)
                .await?;
                Some(campaign)
            }
            _ => None,
        };
        let action = match &step.action {
            StepAction::Email { .. } => serde_json::json!({"kind": "email"}),
            other => serde_json::to_value(other).map_err(|e| Error::Unexpected(e.into()))?,
        };
        stored.push(StoredStep { id, action, campaign_id });
    }
    // Readers waiting at a removed step: on to the next step that stays, or out.
    let kept: Vec<AutomationStepId> = stored.iter().map(|s| s.id).collect();
    for (i, removed) in old.iter().enumerate().filter(|(_, s)| !kept.contains(&s.id)) {
        let next = old[i + 1..].iter().find(|s| kept.contains(&s.id)).map(|s| s.id);
        match (input.removed_step_readers, next) {
            (RemovedStepReaders::Next, Some(next)) => {
                let next_step = &stored[kept.iter().position(|k| *k == next).unwrap_or_default()];
                sqlx::query(
                    "UPDATE automation_runs SET step_id = $4, due_at = automation_step_due($5, now(), tenant_id, reader_id)
                     WHERE tenant_id = $1 AND automation_id = $2 AND step_id = $3 AND state = 'waiting'",
                )
                .bind(tenant)
                .bind(automation)
                .bind(removed.id)
                .bind(next)
                .bind(serde_json::to_value(next_step).map_err(|e| Error::Unexpected(e.into()))?)
                .execute(&mut **tx)
                .await?;
            }
            (why, _) => {
                let reason = if why == RemovedStepReaders::Exit { "its step was removed" } else { "finished" };
                let state = if why == RemovedStepReaders::Exit { "exited" } else { "finished" };
                sqlx::query(
                    "UPDATE automation_runs SET state = $4, step_id = NULL, due_at = NULL, ended_at = now(),
                            exit_reason = CASE WHEN $4 = 'exited' THEN $5 END
                     WHERE tenant_id = $1 AND automation_id = $2 AND step_id = $3 AND state = 'waiting'",
                )
                .bind(tenant)
                .bind(automation)
                .bind(removed.id)
                .bind(state)
                .bind(reason)
                .execute(&mut **tx)
                .await?;
            }
        }
        if let Some(campaign) = removed.campaign_id {
            close_step_campaign(tx, tenant, campaign).await?;
        }
    }
    sqlx::query("UPDATE automations SET steps = $3 WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(automation)
        .bind(sqlx::types::Json(&stored))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A new email step's campaign: the workspace's default sender, tracking on, `sending` at once
/// when the automation is live (so its first reader is not held up).
async fn create_step_campaign(
    tx: &mut Tx,
    tenant: TenantId,
    automation: AutomationId,
    status: AutomationStatus,
    input: &AutomationInput,
) -> Result<CampaignId> {
    let id = CampaignId::new();
    let campaign_status = match status {
        AutomationStatus::Live => CampaignStatus::Sending,
        AutomationStatus::Paused => CampaignStatus::Paused,
        _ => CampaignStatus::Draft,
    };
    sqlx::query(
        "INSERT INTO campaigns (id, tenant_id, name, subject, from_name, from_email, list_ids, automation_id, cap_exempt,
             status, fanout_done, started_at, heartbeat_at)
         SELECT $1, $2, left($3, 200), '', t.default_from_name, t.default_from_email, '{}', $4, $5, $6, true,
                CASE WHEN $6 = 'draft' THEN NULL ELSE now() END, now()
         FROM tenants t WHERE t.id = $2",
    )
    .bind(id)
    .bind(tenant)
    .bind(input.name.trim())
    .bind(automation)
    .bind(input.cap_exempt)
    .bind(campaign_status)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

/// A removed (or archived) email step's campaign: a draft goes; one that sent keeps its record,
/// `cancelled` from now on, with what was still queued cancelled. Not `sent`: a message a loop
/// still holds may be given back later, and in a cancelled campaign it ends `cancelled`
/// (`sends_never_queued_in_cancelled`) instead of waiting in a queue no loop will ever read.
async fn close_step_campaign(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<()> {
    sqlx::query("DELETE FROM campaigns WHERE tenant_id = $1 AND id = $2 AND status = 'draft'")
        .bind(tenant)
        .bind(campaign)
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "UPDATE sends SET status = 'cancelled', reason = 'the automation step was removed', updated_at = now()
         WHERE tenant_id = $1 AND campaign_id = $2 AND status IN ('queued', 'held')",
    )
    .bind(tenant)
    .bind(campaign)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'cancelled', finished_at = now(), updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status IN ('sending', 'paused')",
    )
    .bind(tenant)
    .bind(campaign)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Drafts only: an automation that ran keeps its record (archive it).
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn delete(db: &Db, tenant: TenantId, role: Role, id: AutomationId) -> Result<()> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let n = sqlx::query("DELETE FROM automations WHERE tenant_id = $1 AND id = $2 AND status = 'draft'")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        get_in(&mut tx, tenant, id).await?;
        return Err(Error::Conflict("Only a draft can be deleted; archive an automation that ran.".into()));
    }
    tx.commit().await?;
    Ok(())
}

/// The compare-and-set every transition is: `None` when the automation is in none of `from`.
async fn transition(
    tx: &mut Tx,
    tenant: TenantId,
    id: AutomationId,
    from: &[AutomationStatus],
    to: AutomationStatus,
) -> Result<bool> {
    let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
    let n = sqlx::query(
        "UPDATE automations SET status = $3, updated_at = now() WHERE tenant_id = $1 AND id = $2 AND status = ANY($4)",
    )
    .bind(tenant)
    .bind(id)
    .bind(to)
    .bind(&from)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if n == 0 {
        get_in(tx, tenant, id).await?;
    }
    Ok(n > 0)
}

/// The step campaigns of `automation`.
async fn step_campaigns(
    tx: &mut Tx,
    tenant: TenantId,
    automation: AutomationId,
) -> Result<Vec<crate::campaigns::store::Campaign>> {
    let ids: Vec<CampaignId> =
        sqlx::query_scalar("SELECT id FROM campaigns WHERE tenant_id = $1 AND automation_id = $2")
            .bind(tenant)
            .bind(automation)
            .fetch_all(&mut **tx)
            .await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(crate::campaigns::store::get_in(tx, tenant, id).await?);
    }
    Ok(out)
}

/// draft or paused → live: readers start entering, and waiting ones move on. Every email step
/// must be sendable — the same checks as a campaign's send (sender, postal address, template),
/// and in a workspace that requires approval only an admin may turn one on.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn start(db: &Db, jobs: &Jobs, tenant: TenantId, role: Role, id: AutomationId) -> Result<Automation> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    let current = get_in(&mut tx, tenant, id).await?;
    if current.steps.is_empty() {
        return Err(Error::invalid("Add a step first."));
    }
    if !role.can_administer() && crate::campaigns::approval_rule::required_in(&mut tx, tenant).await? {
        return Err(Error::Refused(
            "This workspace requires an admin's approval for sends: ask an admin or the owner to turn this automation on."
                .into(),
        ));
    }
    check_email_steps(&mut tx, tenant, &current).await?;
    let campaigns = step_campaigns(&mut tx, tenant, id).await?;
    use AutomationStatus::{Draft, Live, Paused};
    if !transition(&mut tx, tenant, id, &[Draft, Paused], Live).await? {
        return Err(Error::Conflict("This automation is already live, or archived.".into()));
    }
    // Resumed: the scheduler's count of its failed turns in a row starts again.
    sqlx::query("UPDATE automations SET pause_reason = NULL, failures = 0 WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE campaigns SET status = 'sending', fanout_done = true, pause_reason = NULL,
                started_at = coalesce(started_at, now()), heartbeat_at = now(), updated_at = now()
         WHERE tenant_id = $1 AND automation_id = $2 AND status IN ('draft', 'paused')",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    let a = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    // Mail queued before a pause goes out again.
    for c in campaigns {
        jobs.kick_campaign(db, tenant, c.id, true).await?;
    }
    Ok(a)
}

/// live → paused: nobody enters, nobody moves on, and its mail stops within a message.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn pause(db: &Db, tenant: TenantId, role: Role, id: AutomationId) -> Result<Automation> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    if !transition(&mut tx, tenant, id, &[AutomationStatus::Live], AutomationStatus::Paused).await? {
        return Err(Error::Conflict("Only a live automation can be paused.".into()));
    }
    sqlx::query(
        "UPDATE campaigns SET status = 'paused', pause_reason = 'The automation is paused.', updated_at = now()
         WHERE tenant_id = $1 AND automation_id = $2 AND status = 'sending'",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    let a = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(a)
}

/// live → paused by the scheduler, when the automation failed turn after turn: its step
/// campaigns pause with it, and `reason` (plain words, never the database's message) tells its
/// author what to look at. False when it was no longer live.
pub(crate) async fn pause_failing(tx: &mut Tx, tenant: TenantId, id: AutomationId, reason: &str) -> Result<bool> {
    if !transition(tx, tenant, id, &[AutomationStatus::Live], AutomationStatus::Paused).await? {
        return Ok(false);
    }
    pause_step_campaigns(tx, tenant, id, reason).await?;
    Ok(true)
}

/// → archived, for good: waiting readers leave, queued mail is cancelled, the record stays.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn archive(db: &Db, tenant: TenantId, role: Role, id: AutomationId) -> Result<Automation> {
    role.require(Role::Author)?;
    let mut tx = db.tenant_tx(tenant).await?;
    use AutomationStatus::{Archived, Draft, Live, Paused};
    if !transition(&mut tx, tenant, id, &[Draft, Live, Paused], Archived).await? {
        return Err(Error::Conflict("This automation is already archived.".into()));
    }
    sqlx::query(
        "UPDATE automation_runs SET state = 'exited', step_id = NULL, due_at = NULL, ended_at = now(),
                exit_reason = 'the automation was archived'
         WHERE tenant_id = $1 AND automation_id = $2 AND state = 'waiting'",
    )
    .bind(tenant)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    for c in step_campaigns(&mut tx, tenant, id).await? {
        close_step_campaign(&mut tx, tenant, c.id).await?;
    }
    let a = get_in(&mut tx, tenant, id).await?;
    tx.commit().await?;
    Ok(a)
}
