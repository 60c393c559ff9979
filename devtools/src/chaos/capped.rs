//! Two campaigns under one frequency cap: the first is held mid-send (paused, then resumed, or
//! cancelled, by the seed's choice) once some of its readers have had a 4xx, and the second
//! starts about then. The readers the first still held must go to the second, once; nobody may
//! get neither (`checks::check_frequency_cap`).

use std::time::{Duration, Instant};

use herald_engine::campaigns::lifecycle;
use herald_engine::{CampaignId, Role, TenantId};
use rand::Rng;
use rand::rngs::StdRng;

use super::RoundReport;
use super::scene::Setup;
use super::stage::Stage;

/// How long the first campaign may take to meet a 4xx before it is held anyway.
const HOLD_BY: Duration = Duration::from_secs(20);

pub(super) struct CappedPair {
    tenant: TenantId,
    first: CampaignId,
    second: CampaignId,
    /// Cancelled when held (else paused, and resumed `resume_after` later).
    cancel: bool,
    hold_by: Instant,
    held_at: Option<Instant>,
    start_after: Duration,
    started: bool,
    resume_after: Duration,
    resumed: bool,
}

impl CappedPair {
    pub(super) fn plan(setup: &Setup, rng: &mut StdRng) -> Self {
        let scene = &setup.scene;
        Self {
            tenant: setup.capped_tenant,
            first: scene.campaigns[scene.capped.0].id,
            second: scene.campaigns[scene.capped.1].id,
            cancel: rng.gen_bool(0.5),
            hold_by: Instant::now() + HOLD_BY,
            held_at: None,
            start_after: Duration::from_millis(rng.gen_range(0..1_500)),
            started: false,
            resume_after: Duration::from_millis(rng.gen_range(2_000..6_000)),
            resumed: false,
        }
    }

    /// What is due: the hold once a reader of the first has had a 4xx (or its time ran out), the
    /// second's start, the first's resume.
    pub(super) async fn step(&mut self, now: Instant, stage: &Stage, setup: &mut Setup, report: &mut RoundReport) {
        if self.held_at.is_none() && (now >= self.hold_by || self.soft_failed(stage).await) {
            self.hold(stage, setup, report).await;
        }
        let Some(held_at) = self.held_at else { return };
        if !self.started && now >= held_at + self.start_after {
            self.started = start_once(stage, self.tenant, self.second).await;
        }
        if !self.cancel && !self.resumed && now >= held_at + self.resume_after {
            self.resumed =
                lifecycle::resume(&stage.db, &stage.jobs, self.tenant, Role::Owner, self.first).await.is_ok()
                    || self.status(stage, self.first).await.is_some_and(|s| s != "paused");
        }
    }

    /// After the fault phase: whatever is not done yet, done (each tried for up to a minute).
    pub(super) async fn finish(&mut self, stage: &Stage, setup: &mut Setup, report: &mut RoundReport) {
        let by = Instant::now() + Duration::from_secs(60);
        while !(self.held_at.is_some() && self.started && (self.cancel || self.resumed)) && Instant::now() < by {
            // A moment when everything is due.
            let due = Instant::now() + HOLD_BY + self.start_after + self.resume_after;
            self.step(due, stage, setup, report).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Whether a reader of the first campaign has had a soft failure and is not sent yet.
    async fn soft_failed(&self, stage: &Stage) -> bool {
        self.held_after_4xx(stage).await.is_some_and(|n| n > 0)
    }

    async fn held_after_4xx(&self, stage: &Stage) -> Option<i64> {
        sqlx::query_scalar("SELECT count(*) FROM sends WHERE campaign_id = $1 AND status <> 'sent' AND attempts > 0")
            .bind(self.first)
            .fetch_one(&stage.owner)
            .await
            .ok()
    }

    async fn hold(&mut self, stage: &Stage, setup: &mut Setup, report: &mut RoundReport) {
        let (db, tenant, first) = (&stage.db, self.tenant, self.first);
        let held = if self.cancel {
            lifecycle::cancel(db, tenant, Role::Owner, first).await.is_ok()
                || self.status(stage, first).await.is_some_and(|s| s == "cancelled")
        } else {
            lifecycle::pause(db, tenant, Role::Owner, first, "chaos: paused by hand").await.is_ok()
                || self.status(stage, first).await.is_some_and(|s| s == "paused")
        };
        if !held {
            return;
        }
        self.held_at = Some(Instant::now());
        if self.cancel {
            setup.scene.campaigns[setup.scene.capped.0].cancelled = true;
        }
        *report.faults.entry(if self.cancel { "capped cancel" } else { "capped pause" }).or_default() += 1;
        let n = self.held_after_4xx(stage).await.unwrap_or(0);
        *report.faults.entry("capped reader held after a 4xx").or_default() += usize::try_from(n).unwrap_or(0);
    }

    async fn status(&self, stage: &Stage, id: CampaignId) -> Option<String> {
        sqlx::query_scalar("SELECT status::text FROM campaigns WHERE id = $1")
            .bind(id)
            .fetch_one(&stage.owner)
            .await
            .ok()
    }
}

/// Starts a draft campaign; true once it has left the draft (a start whose answer a restart lost
/// counts: asking again would be refused).
async fn start_once(stage: &Stage, tenant: TenantId, id: CampaignId) -> bool {
    if lifecycle::send_now(&stage.db, &stage.jobs, tenant, Role::Owner, id).await.is_ok() {
        return true;
    }
    let status: Result<String, _> =
        sqlx::query_scalar("SELECT status::text FROM campaigns WHERE id = $1").bind(id).fetch_one(&stage.owner).await;
    status.is_ok_and(|s| s != "draft")
}
