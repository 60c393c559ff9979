//! The scene's automations, each proving a rule under the faults: a welcome sequence whose
//! readers enter in batches, readers leaving the list that started theirs while its mail is
//! queued, another workspace's automation that fails every turn, and signup events sent twice
//! under one Idempotency-Key.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use herald_engine::jobs::Jobs;
use herald_engine::{CampaignId, Db, Role, TenantId};
use herald_types::AutomationId;
use sqlx::PgPool;
use uuid::Uuid;

use super::fixtures::insert_list;

/// A live automation: an event lets readers in; it mails them twice, one step after the other
/// (no wait: a wait's logic is the API tests' with their own clock; here the faults are what
/// matters). Returns it and its two steps' campaigns.
pub(super) async fn welcome_automation(
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
) -> anyhow::Result<(AutomationId, [CampaignId; 2])> {
    use herald_engine::automations::store as automations;
    let input: herald_types::AutomationInput = serde_json::from_value(serde_json::json!({
        "name": "Chaos welcome", "trigger": {"kind": "event", "name": "chaos"},
        "steps": [
            {"action": {"kind": "email", "subject": "Automation one", "body": "Hello {{ reader.email }}"}},
            {"action": {"kind": "email", "subject": "Automation two", "body": "Again, {{ reader.email }}"}}
        ]
    }))?;
    let a = automations::create(db, tenant, Role::Owner, &input).await?;
    automations::start(db, jobs, tenant, Role::Owner, a.id).await?;
    let step = |i: usize| a.steps.get(i).and_then(|s| s.campaign_id).context("an email step without a campaign");
    Ok((a.id, [step(0)?, step(1)?]))
}

/// Lets `addresses` into the automations the event `name` starts, as the API's event does for
/// each.
pub(super) async fn enter_automation(
    db: &Db,
    tenant: TenantId,
    name: &str,
    addresses: &[&String],
) -> anyhow::Result<()> {
    let mut tx = db.tenant_tx(tenant).await?;
    sqlx::query(
        "SELECT automation_enter('event', array_agg(tenant_id), array_agg($3::text), array_agg(id), NULL)
         FROM readers WHERE tenant_id = $1 AND lower(email) = ANY($2)",
    )
    .bind(tenant)
    .bind(addresses.iter().map(|a| a.as_str()).collect::<Vec<_>>())
    .bind(name)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// A live automation from its definition (the API's JSON); returns it and its email steps'
/// campaigns, in step order.
async fn live_automation(
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
    definition: serde_json::Value,
) -> anyhow::Result<(AutomationId, Vec<CampaignId>)> {
    use herald_engine::automations::store as automations;
    let input: herald_types::AutomationInput = serde_json::from_value(definition)?;
    let a = automations::create(db, tenant, Role::Owner, &input).await?;
    automations::start(db, jobs, tenant, Role::Owner, a.id).await?;
    Ok((a.id, a.steps.iter().filter_map(|s| s.campaign_id).collect()))
}

/// The readers an automation let in, each once however many runs they have.
pub(super) async fn automation_readers(owner: &PgPool, automation: AutomationId) -> anyhow::Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT lower(r.email) FROM automation_runs a JOIN readers r ON r.id = a.reader_id
         WHERE a.automation_id = $1",
    )
    .bind(automation)
    .fetch_all(owner)
    .await?)
}

/// How long the list automation's first mail stays held after its leavers left: longer than the
/// 5 s the checks allow, so that a copy the claim let through would be seen.
pub(super) const LEAVE_HOLD: Duration = Duration::from_secs(6);

/// An automation a list starts (two mails) whose 40 readers are confirmed on another list too. A
/// quarter of them leave the trigger list, and only it, while its first mail is queued for them:
/// the workspace may still mail them, this automation may not (the claim asks what the scheduler
/// asked, confirmed on the trigger's own list, not on any list).
pub(super) struct TriggerLeavers {
    tenant: TenantId,
    pub(super) automation: AutomationId,
    /// The trigger list.
    list: Uuid,
    pub(super) steps: [CampaignId; 2],
    pub(super) readers: Vec<String>,
    leavers: Vec<String>,
    leaver_ids: Vec<i64>,
}

pub(super) async fn trigger_leavers(
    owner: &PgPool,
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
) -> anyhow::Result<TriggerLeavers> {
    let (other, readers) = insert_list(owner, tenant, "leave", 40).await?;
    let (list, _) = insert_list(owner, tenant, "trigger", 0).await?;
    let (automation, steps) = live_automation(
        db,
        jobs,
        tenant,
        serde_json::json!({
            "name": "Chaos list welcome", "trigger": {"kind": "list_confirmed", "list_id": list},
            "steps": [
                {"action": {"kind": "email", "subject": "List one", "body": "Hello {{ reader.email }}"}},
                {"action": {"kind": "email", "subject": "List two", "body": "Again, {{ reader.email }}"}}
            ]
        }),
    )
    .await?;
    let steps: [CampaignId; 2] =
        steps.try_into().map_err(|_| anyhow::anyhow!("the list automation's two mails have no campaigns"))?;
    // Its first mail is held until after the leavers left (paused, as a guard pauses an
    // automation's mail: `lifecycle::pause` leaves that mail to its automation), so that it is
    // still queued for them when they leave, whatever the faults' timing.
    sqlx::query(
        "UPDATE campaigns SET status = 'paused', pause_reason = 'chaos: paused by hand', updated_at = now()
         WHERE id = $1 AND status = 'sending'",
    )
    .bind(steps[0])
    .execute(owner)
    .await?;
    // Confirmed on the trigger list as an import confirms them: its trigger lets them in.
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, reader_id, 'confirmed', now() FROM subscriptions WHERE list_id = $3",
    )
    .bind(tenant)
    .bind(list)
    .bind(other)
    .execute(owner)
    .await?;
    let leavers: Vec<String> = readers.iter().step_by(4).cloned().collect();
    let leaver_ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM readers WHERE tenant_id = $1 AND lower(email) = ANY($2)")
            .bind(tenant)
            .bind(&leavers)
            .fetch_all(owner)
            .await?;
    Ok(TriggerLeavers { tenant, automation, list, steps, readers, leavers, leaver_ids })
}

/// The leavers leave the trigger list, and only it (as `opt_out` unsubscribes, for one list),
/// once the automation's first mail is queued for each of them, and are noted in `stopped` with
/// when that committed. False while that mail is not queued for all of them yet. Tried again
/// after an error (a commit whose answer was lost changes nothing the second time, and the time
/// read then is later than the commit, which only widens the bound).
pub(super) async fn leave_trigger_list(
    owner: &PgPool,
    t: &TriggerLeavers,
    stopped: &mut HashMap<String, (DateTime<Utc>, &'static str)>,
) -> anyhow::Result<bool> {
    let queued: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sends WHERE campaign_id = $1 AND reader_id = ANY($2) AND status = 'queued'",
    )
    .bind(t.steps[0])
    .bind(&t.leaver_ids)
    .fetch_one(owner)
    .await?;
    if queued < t.leaver_ids.len() as i64 {
        return Ok(false);
    }
    sqlx::query(
        "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now()
         WHERE tenant_id = $1 AND list_id = $2 AND reader_id = ANY($3)",
    )
    .bind(t.tenant)
    .bind(t.list)
    .bind(&t.leaver_ids)
    .execute(owner)
    .await?;
    let at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(owner).await?;
    for address in &t.leavers {
        stopped.insert(address.clone(), (at, "left the automation's trigger list"));
    }
    Ok(true)
}

/// Lets the held first mail go, as resuming an automation's paused mail does.
pub(super) async fn release_held_step(owner: &PgPool, db: &Db, jobs: &Jobs, t: &TriggerLeavers) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE campaigns SET status = 'sending', pause_reason = NULL, heartbeat_at = now(), updated_at = now()
         WHERE id = $1 AND status = 'paused'",
    )
    .bind(t.steps[0])
    .execute(owner)
    .await?;
    jobs.kick_campaign(db, t.tenant, t.steps[0], true).await?;
    Ok(())
}

/// Another workspace's automation that fails every turn: its "wait until" names a zone Postgres
/// does not know (`Mars/Olympus`, written behind the editor's back, as a zone the server has
/// stopped knowing would be), so moving a reader to it raises. Its 20 readers enter at once,
/// tag themselves, and go no further. Returns it and its mail's campaigns.
pub(super) async fn broken_automation(
    owner: &PgPool,
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
) -> anyhow::Result<(AutomationId, Vec<CampaignId>)> {
    let (_, readers) = insert_list(owner, tenant, "broken", 20).await?;
    let tag = Uuid::new_v4();
    sqlx::query("INSERT INTO tags (tenant_id, id, name) VALUES ($1, $2, 'started')")
        .bind(tenant)
        .bind(tag)
        .execute(owner)
        .await?;
    let (automation, steps) = live_automation(
        db,
        jobs,
        tenant,
        serde_json::json!({
            "name": "Chaos broken zone", "trigger": {"kind": "event", "name": "broken"},
            "steps": [
                {"action": {"kind": "add_tag", "tag_id": tag}},
                {"action": {"kind": "wait_until", "time": "09:00", "zone": "Europe/Paris"}},
                {"action": {"kind": "email", "subject": "Never", "body": "Never sent, {{ reader.email }}"}}
            ]
        }),
    )
    .await?;
    sqlx::query(
        "UPDATE automations SET steps = jsonb_set(steps, '{1,action,zone}', '\"Mars/Olympus\"')
         WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(automation)
    .execute(owner)
    .await?;
    let everyone: Vec<&String> = readers.iter().collect();
    enter_automation(db, tenant, "broken", &everyone).await?;
    Ok((automation, steps))
}

/// An automation a signup event starts, one mail, at every event (so an event entered twice
/// would mail twice), and its 40 readers' ids and addresses.
pub(super) struct Signup {
    pub(super) automation: AutomationId,
    pub(super) step: CampaignId,
    pub(super) readers: Vec<(i64, String)>,
}

pub(super) async fn signup_automation(
    owner: &PgPool,
    db: &Db,
    jobs: &Jobs,
    tenant: TenantId,
) -> anyhow::Result<Signup> {
    let (list, _) = insert_list(owner, tenant, "signup", 40).await?;
    let (automation, steps) = live_automation(
        db,
        jobs,
        tenant,
        serde_json::json!({
            "name": "Chaos signup", "trigger": {"kind": "event", "name": "signup"}, "reentry": "every_time",
            "steps": [{"action": {"kind": "email", "subject": "Signed up", "body": "Welcome, {{ reader.email }}"}}]
        }),
    )
    .await?;
    let step = steps.first().copied().context("the signup mail has no campaign")?;
    let readers: Vec<(i64, String)> = sqlx::query_as(
        "SELECT r.id, lower(r.email) FROM readers r JOIN subscriptions s ON s.reader_id = r.id
         WHERE s.list_id = $1 ORDER BY r.id",
    )
    .bind(list)
    .fetch_all(owner)
    .await?;
    Ok(Signup { automation, step, readers })
}

/// Sends each reader's one signup event as an API client whose reply was lost sends it: twice
/// under one Idempotency-Key, the second copy after the first or both at once (`plan`: when,
/// after `started`, the reader, and whether at once). Through Postgres restarts a reader's pair
/// is sent again, under the same key, until a copy is accepted or `give_up`. Returns the readers
/// whose event was accepted.
pub(super) async fn send_events(
    db: Db,
    tenant: TenantId,
    mut plan: Vec<(Duration, i64, String, bool)>,
    started: Instant,
    give_up: Instant,
) -> Vec<String> {
    use herald_engine::automations::events::record;
    plan.sort_by_key(|p| p.0);
    let mut accepted = Vec::new();
    for (after, reader, address, at_once) in plan {
        tokio::time::sleep_until((started + after).into()).await;
        let input = herald_types::ReaderEventInput { name: "signup".into(), data: serde_json::json!({"plan": "pro"}) };
        let key = format!("chaos-signup-{reader}");
        loop {
            let ok = if at_once {
                let (a, b) = tokio::join!(
                    record(&db, tenant, reader, &input, Some(key.as_str())),
                    record(&db, tenant, reader, &input, Some(key.as_str()))
                );
                a.is_ok() || b.is_ok()
            } else {
                let first = record(&db, tenant, reader, &input, Some(key.as_str())).await;
                let again = record(&db, tenant, reader, &input, Some(key.as_str())).await;
                first.is_ok() || again.is_ok()
            };
            if ok {
                accepted.push(address);
                break;
            }
            if Instant::now() >= give_up {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    accepted
}
