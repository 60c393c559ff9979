//! The round's scene: the workspaces, lists, campaigns, automations and messages it builds
//! before the workers start, and what each should end as.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use herald_engine::{CampaignId, TenantId};
use herald_types::AutomationId;
use rand::Rng;
use rand::rngs::StdRng;
use uuid::Uuid;

use super::ChaosArgs;
use super::automations::{
    Signup, TriggerLeavers, broken_automation, signup_automation, trigger_leavers, welcome_automation,
};
use super::fixtures::{ab_campaign, create_campaign, insert_list, insert_list_into, insert_tenant, segment_campaign};
use super::resend::{Resend, resend_campaign};
use super::soft_failures::{refused_once, soft_failure_campaign};
use super::stage::Stage;
use crate::smtp_sink::Faults;

/// A campaign of the scene and what it should end as.
pub(super) struct SceneCampaign {
    pub(super) id: CampaignId,
    pub(super) tenant: TenantId,
    pub(super) name: &'static str,
    /// Reader addresses of its list.
    pub(super) readers: Vec<String>,
    /// Cancelled mid-send: at most one copy each, nothing left queued.
    pub(super) cancelled: bool,
    /// An automation's email step: it stays `sending` (the automation is live), and its
    /// readers are those the automation let in.
    pub(super) automation_step: bool,
}

/// What the checks compare the sink's mail with.
pub(super) struct Scene {
    pub(super) campaigns: Vec<SceneCampaign>,
    /// The two campaigns under one frequency cap (indexes into `campaigns`).
    pub(super) capped: (usize, usize),
    /// Transactional message id → recipient.
    pub(super) messages: HashMap<Uuid, String>,
    /// Address → when it was unsubscribed or suppressed (committed).
    pub(super) opted_out: HashMap<String, DateTime<Utc>>,
    /// The paused campaign (an index into `campaigns`), when the pause had committed and when
    /// the resume was asked for: in between only messages already on the wire may reach the
    /// server.
    pub(super) paused_campaign: usize,
    pub(super) pause_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// The A/B test (index into `campaigns`): each reader gets one message, of the version its
    /// send-log row names, and the rest gets the winner.
    pub(super) ab_test: usize,
    /// Address → when a reason to stop mailing it committed that is not an opt-out, and which:
    /// it left the list that started its automation, it opened the original of its resend. As
    /// for an opt-out, nothing may reach it more than 5 s later, and nothing is owed to it.
    pub(super) stopped: HashMap<String, (DateTime<Utc>, &'static str)>,
    /// The send that outlives its queue age (an index into `campaigns`): a row of it may expire
    /// once a retry failed too, never after a single attempt.
    pub(super) soft_failures: usize,
}

/// Everything the round set up before its workers start: the scene the checks read, and what
/// the sends, the faults and the settling act on.
pub(super) struct Setup {
    pub(super) scene: Scene,
    pub(super) main_tenant: TenantId,
    pub(super) capped_tenant: TenantId,
    /// Paused by hand mid-send, then resumed.
    pub(super) paused: CampaignId,
    /// Cancelled mid-send.
    pub(super) cancelled: CampaignId,
    /// Started by the workers' supervisor, with its readers (in the scene once scheduled).
    pub(super) scheduled: CampaignId,
    pub(super) sched_readers: Vec<String>,
    /// The daily recurring campaign, and the readers its one due edition must reach.
    pub(super) recurring: CampaignId,
    pub(super) edition_readers: Vec<String>,
    /// The A/B test.
    pub(super) ab: CampaignId,
    /// The welcome automation, its two mails, and the readers who enter it during the faults.
    pub(super) automation: AutomationId,
    pub(super) auto_steps: [CampaignId; 2],
    pub(super) auto_readers: Vec<String>,
    pub(super) leavers: TriggerLeavers,
    /// The send that outlives its queue age, and its readers refused once.
    pub(super) soft: CampaignId,
    pub(super) soft_refused: Vec<String>,
    /// The sink's faults as the fault phase starts: the base ones, and a 4xx for each refused
    /// reader's first attempt.
    pub(super) faults_now: Faults,
    pub(super) resend: Resend,
    /// What went wrong with the second resend, if anything.
    pub(super) second_resend: Option<String>,
    pub(super) broken: (AutomationId, Vec<CampaignId>),
    pub(super) signup: Signup,
}

/// Builds the scene on the stage's Postgres (one draw of `rng`: the A/B test's share).
pub(super) async fn build_scene(stage: &Stage, args: &ChaosArgs, rng: &mut StdRng) -> anyhow::Result<Setup> {
    let Stage { owner, db, jobs, sink, base_faults, .. } = stage;
    let main_tenant = insert_tenant(owner, "Chaos", None).await?;
    let capped_tenant = insert_tenant(owner, "Capped", Some(24)).await?;
    // A workspace whose automation fails every turn: the others' must not notice.
    let broken_tenant = insert_tenant(owner, "Broken", None).await?;
    // All send From chaos.test, verified as an operator would (no DKIM key is published, so
    // nothing is signed and the key's sealing secret does not matter).
    let operator = herald_engine::infra::tokens::Signer::new(b"chaos-operator");
    for tenant in [main_tenant, capped_tenant, broken_tenant] {
        herald_engine::sending::domains::mark_verified(db, &operator, tenant, "chaos.test").await?;
    }
    let n = args.readers.max(100);
    let (main_list, mut main_readers) = insert_list(owner, main_tenant, "r", n).await?;
    // Dead and rejected addresses among the living (an old import appended at the end, too).
    let (_, dead) = insert_list_into(owner, main_tenant, main_list, "dead", n / 50 + 100).await?;
    let (_, rejected) = insert_list_into(owner, main_tenant, main_list, "reject", 5).await?;
    main_readers.extend(dead.iter().cloned());
    main_readers.extend(rejected.iter().cloned());
    let (spread_list, spread_readers) = insert_list(owner, main_tenant, "spread", 30).await?;
    let (pause_list, pause_readers) = insert_list(owner, main_tenant, "pause", 600).await?;
    let (cancel_list, cancel_readers) = insert_list(owner, main_tenant, "cancel", 800).await?;
    let (cap_list, cap_readers) = insert_list(owner, capped_tenant, "cap", 200).await?;

    // A second target list overlapping the first: 50 of the main list's readers are on it too,
    // and each of them must get the campaign once all the same.
    let (overlap_list, overlap_readers) = insert_list(owner, main_tenant, "overlap", 20).await?;
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, reader_id, 'confirmed', now() FROM subscriptions WHERE list_id = $3 ORDER BY reader_id LIMIT 50",
    )
    .bind(main_tenant)
    .bind(overlap_list)
    .bind(main_list)
    .execute(owner)
    .await?;
    main_readers.extend(overlap_readers);
    let main = create_campaign(db, main_tenant, "Main", &[main_list, overlap_list]).await?;
    let spread = create_campaign(db, main_tenant, "Spread", &[spread_list]).await?;
    // Thirty readers over 20 seconds (below the editor's minimum; set directly).
    sqlx::query("UPDATE campaigns SET spread_hours = 20.0 / 3600 WHERE id = $1").bind(spread).execute(owner).await?;
    let paused = create_campaign(db, main_tenant, "Paused", &[pause_list]).await?;
    let cancelled = create_campaign(db, main_tenant, "Cancelled", &[cancel_list]).await?;
    let cap_a = create_campaign(db, capped_tenant, "Cap A", &[cap_list]).await?;
    let cap_b = create_campaign(db, capped_tenant, "Cap B", &[cap_list]).await?;
    // Started by the workers' supervisor when its time comes, not by a click.
    let (sched_list, sched_readers) = insert_list(owner, main_tenant, "sched", 200).await?;
    let scheduled = create_campaign(db, main_tenant, "Scheduled", &[sched_list]).await?;
    // A daily recurring campaign whose slot two minutes ago is due (its last edition two days
    // old): the supervisor makes that one edition, which must reach each reader once.
    let (edition_list, edition_readers) = insert_list(owner, main_tenant, "edition", 150).await?;
    let recurring = create_campaign(db, main_tenant, "Daily", &[edition_list]).await?;
    let (segment, segment_readers) = segment_campaign(owner, db, main_tenant).await?;
    let (ab, ab_readers) = ab_campaign(owner, db, main_tenant, rng.gen_range(10..=60)).await?;
    // An automation of two mails, live from the start; its readers enter in batches
    // during the faults.
    let (_, auto_readers) = insert_list(owner, main_tenant, "auto", 300).await?;
    let (automation, auto_steps) = welcome_automation(db, jobs, main_tenant).await?;
    // Each of these proves one rule under the same faults (see each helper).
    let leavers = trigger_leavers(owner, db, jobs, main_tenant).await?;
    let (soft, soft_readers, soft_refused) = soft_failure_campaign(owner, db, main_tenant).await?;
    // Until each refused reader's first attempt has failed (see `soft_refusals_done`).
    let faults_now = refused_once(base_faults.clone(), &soft_refused);
    sink.set_faults(faults_now.clone());
    let (resend, second_resend) = resend_campaign(owner, db, main_tenant).await?;
    let broken = broken_automation(owner, db, jobs, broken_tenant).await?;
    let signup = signup_automation(owner, db, jobs, main_tenant).await?;
    let scene = Scene {
        campaigns: vec![
            SceneCampaign {
                id: main,
                tenant: main_tenant,
                name: "Main",
                readers: main_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: spread,
                tenant: main_tenant,
                name: "Spread",
                readers: spread_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: paused,
                tenant: main_tenant,
                name: "Paused",
                readers: pause_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: cancelled,
                tenant: main_tenant,
                name: "Cancelled",
                readers: cancel_readers,
                cancelled: true,
                automation_step: false,
            },
            SceneCampaign {
                id: cap_a,
                tenant: capped_tenant,
                name: "Cap A",
                readers: cap_readers.clone(),
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: cap_b,
                tenant: capped_tenant,
                name: "Cap B",
                readers: cap_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: segment,
                tenant: main_tenant,
                name: "Segment",
                readers: segment_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: ab,
                tenant: main_tenant,
                name: "A/B",
                readers: ab_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: soft,
                tenant: main_tenant,
                name: "Soft failures",
                readers: soft_readers,
                cancelled: false,
                automation_step: false,
            },
            SceneCampaign {
                id: resend.id,
                tenant: main_tenant,
                name: "Resend",
                readers: resend.readers.clone(),
                cancelled: false,
                automation_step: false,
            },
        ],
        capped: (4, 5),
        messages: HashMap::new(),
        opted_out: HashMap::new(),
        paused_campaign: 2,
        pause_window: None,
        ab_test: 7,
        stopped: HashMap::new(),
        soft_failures: 8,
    };
    Ok(Setup {
        scene,
        main_tenant,
        capped_tenant,
        paused,
        cancelled,
        scheduled,
        sched_readers,
        recurring,
        edition_readers,
        ab,
        automation,
        auto_steps,
        auto_readers,
        leavers,
        soft,
        soft_refused,
        faults_now,
        resend,
        second_resend,
        broken,
        signup,
    })
}
