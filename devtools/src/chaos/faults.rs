//! The fault phase: a timeline of actions scripted at moments the seed draws (a pause and its
//! resume, cancels, "retry failed", the A/B test's winner, automation entries, opt-outs, the
//! leavers, opens of a resent original), and random faults between them (SIGKILL and SIGSTOP of
//! workers, partitions, Postgres restarts and terminated backends, slow SMTP replies, late
//! transactional messages), until the fault phase ends; then what the script left undone.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use herald_engine::Role;
use herald_engine::campaigns::lifecycle;
use rand::Rng;
use rand::rngs::StdRng;
use tokio::task::JoinHandle;

use super::automations::{LEAVE_HOLD, enter_automation, leave_trigger_list, release_held_step, send_events};
use super::capped::CappedPair;
use super::fixtures::{end_ab_test, insert_message, opt_out};
use super::resend::open_original;
use super::scene::Setup;
use super::soft_failures::soft_refusals_done;
use super::stage::Stage;
use super::workers::Workers;
use super::{ChaosArgs, LEASE_SECONDS, RoundReport, SLOW_REPLY_MAX};
use crate::smtp_sink::Faults;

/// When each scripted action comes (drawn from the seed), whether it came, and the sink's
/// faults now.
pub(super) struct Timeline {
    fault_until: Instant,
    pause_at: Instant,
    resume_at: Instant,
    paused_done: bool,
    resumed_done: bool,
    /// When the pause had committed.
    paused_at: Option<DateTime<Utc>>,
    cancel_at: Instant,
    cancel_done: bool,
    retry_at: Instant,
    retry_done: bool,
    opt_out_at: Instant,
    opt_out_done: bool,
    capped: CappedPair,
    ab_pick_at: Instant,
    ab_by_hand: bool,
    ab_done: bool,
    /// When each batch of the welcome automation's readers enters, in order.
    enter_at: Vec<Instant>,
    entered_batches: usize,
    auto_opt_out_at: Instant,
    auto_opt_out_done: bool,
    /// The signup events' sender: returns the readers whose event was accepted.
    events_sent: JoinHandle<Vec<String>>,
    leave_at: Instant,
    /// When the leavers left.
    left: Option<Instant>,
    leave_resumed: bool,
    open_at: Instant,
    opened_done: bool,
    /// Whether the soft-failure send's readers are still refused their first attempt.
    soft_refusing: bool,
    soft_refusing_by: Instant,
    faults_now: Faults,
    /// The end of a spell of slow replies.
    slow_until: Option<Instant>,
    next_fault: Instant,
}

/// What the fault phase leaves to the settling.
pub(super) struct FaultsOver {
    /// Whether the A/B test's winner was chosen, or its window made to end.
    pub(super) ab_done: bool,
    /// The signup events' sender: returns the readers whose event was accepted.
    pub(super) events_sent: JoinHandle<Vec<String>>,
}

impl Timeline {
    /// Draws the script's moments from `rng` (in the order the round has always drawn them) and
    /// starts sending the signup events.
    pub(super) fn plan(args: &ChaosArgs, stage: &Stage, setup: &Setup, rng: &mut StdRng) -> Self {
        let fault_until = Instant::now() + Duration::from_secs(args.fault_seconds);
        let pause_at = Instant::now() + Duration::from_millis(rng.gen_range(300..2_000));
        let resume_at = pause_at + Duration::from_millis(rng.gen_range(2_000..6_000));
        let cancel_at = Instant::now() + Duration::from_millis(rng.gen_range(300..2_500));
        // "Retry failed" on the main campaign while it is still sending (its 5xx rows go again).
        let retry_at = Instant::now() + Duration::from_millis(rng.gen_range(3_000..8_000));
        let opt_out_at = Instant::now() + Duration::from_millis(rng.gen_range(300..3_000));
        let capped = CappedPair::plan(setup, rng);
        // The A/B test's winner: chosen by hand (this process, through Postgres restarts) or by the
        // workers' supervisor once the window is made to end (workers killed mid-choice).
        let ab_pick_at = Instant::now() + Duration::from_millis(rng.gen_range(1_000..10_000));
        let ab_by_hand = rng.gen_bool(0.5);
        // The automation's readers enter in six batches at random moments (as six imports would),
        // and ten of them opt out at another.
        let mut enter_at: Vec<Instant> = (0..6)
            .map(|_| Instant::now() + Duration::from_millis(rng.gen_range(200..args.fault_seconds.max(4) * 700)))
            .collect();
        enter_at.sort();
        let auto_opt_out_at = Instant::now() + Duration::from_millis(rng.gen_range(1_000..5_000));
        // One signup event per reader at a random moment, each sent twice under its key (one copy
        // after the other, or both at once), beside the faults.
        let plan: Vec<(Duration, i64, String, bool)> = setup
            .signup
            .readers
            .iter()
            .map(|(id, address)| {
                let after = Duration::from_millis(rng.gen_range(200..args.fault_seconds.max(4) * 700));
                (after, *id, address.clone(), rng.gen_bool(0.5))
            })
            .collect();
        let events_sent = tokio::spawn(send_events(
            stage.events_db.clone(),
            setup.main_tenant,
            plan,
            Instant::now(),
            fault_until + Duration::from_secs(60),
        ));
        // The leavers leave at a random moment once their first mail is queued (and held); it is
        // resumed `LEAVE_HOLD` later.
        let leave_at = Instant::now() + Duration::from_millis(rng.gen_range(1_000..4_000));
        // Readers of the resend open the original while the spread still holds their copies.
        let open_at = Instant::now() + Duration::from_millis(rng.gen_range(3_000..8_000));
        let soft_refusing_by = Instant::now() + Duration::from_secs(20);
        let next_fault = Instant::now() + Duration::from_millis(rng.gen_range(500..2_000));
        Self {
            fault_until,
            pause_at,
            resume_at,
            paused_done: false,
            resumed_done: false,
            paused_at: None,
            cancel_at,
            cancel_done: false,
            retry_at,
            retry_done: false,
            opt_out_at,
            opt_out_done: false,
            capped,
            ab_pick_at,
            ab_by_hand,
            ab_done: false,
            enter_at,
            entered_batches: 0,
            auto_opt_out_at,
            auto_opt_out_done: false,
            events_sent,
            leave_at,
            left: None,
            leave_resumed: false,
            open_at,
            opened_done: false,
            soft_refusing: true,
            soft_refusing_by,
            faults_now: setup.faults_now.clone(),
            slow_until: None,
            next_fault,
        }
    }

    /// Faults, until the fault phase ends: every tick, the scripted actions that are due, and
    /// now and then a random fault. Then what the script left undone.
    pub(super) async fn run(
        mut self,
        stage: &Stage,
        workers: &mut Workers,
        setup: &mut Setup,
        report: &mut RoundReport,
        rng: &mut StdRng,
    ) -> anyhow::Result<FaultsOver> {
        let sink = &stage.sink;
        while Instant::now() < self.fault_until {
            tokio::time::sleep(Duration::from_millis(100)).await;
            workers.ensure_all()?;
            let now = Instant::now();
            self.campaign_actions(now, stage, setup, report).await?;
            self.reader_actions(now, stage, setup, report).await?;
            if let Some(until) = self.slow_until
                && now >= until
            {
                self.slow_until = None;
                sink.set_faults(self.faults_now.clone());
            }
            if now < self.next_fault {
                continue;
            }
            self.next_fault = now + Duration::from_millis(rng.gen_range(500..3_000));
            let result = self.random_fault(now, stage, workers, setup, report, rng).await;
            match result {
                Ok(what) => *report.faults.entry(what).or_default() += 1,
                // The pool reconnects after a restart; a failed fault is only noted.
                Err(e) => eprintln!("chaos: a fault could not be injected: {e:#}"),
            }
        }
        self.finish(stage, workers, setup, report).await
    }

    /// The scripted actions on campaigns that are due: the pause and its resume, "retry
    /// failed", the cancels, the A/B test's winner.
    async fn campaign_actions(
        &mut self,
        now: Instant,
        stage: &Stage,
        setup: &mut Setup,
        report: &mut RoundReport,
    ) -> anyhow::Result<()> {
        let Stage { owner, db, jobs, .. } = stage;
        if !self.paused_done && now >= self.pause_at {
            self.paused_done = true;
            if lifecycle::pause(db, setup.main_tenant, Role::Owner, setup.paused, "chaos: paused by hand").await.is_ok()
            {
                *report.faults.entry("pause").or_default() += 1;
                // Committed before `pause` returned.
                self.paused_at = Some(Utc::now());
            }
        }
        if self.paused_done && !self.resumed_done && now >= self.resume_at {
            self.resumed_done = true;
            setup.scene.pause_window = self.paused_at.map(|at| (at, Utc::now()));
            let _ = lifecycle::resume(db, jobs, setup.main_tenant, Role::Owner, setup.paused).await;
        }
        self.capped.step(now, stage, setup, report).await;
        if !self.retry_done && now >= self.retry_at {
            self.retry_done = true;
            let main = setup.scene.campaigns[0].id;
            if lifecycle::retry_failed(db, jobs, setup.main_tenant, Role::Owner, main).await.is_ok() {
                *report.faults.entry("retry_failed").or_default() += 1;
            }
        }
        if !self.cancel_done && now >= self.cancel_at {
            self.cancel_done = true;
            lifecycle::cancel(db, setup.main_tenant, Role::Owner, setup.cancelled).await?;
            *report.faults.entry("cancel").or_default() += 1;
        }
        if !self.ab_done && now >= self.ab_pick_at {
            self.ab_done = end_ab_test(db, jobs, owner, setup.main_tenant, setup.ab, self.ab_by_hand).await;
            if self.ab_done {
                *report
                    .faults
                    .entry(if self.ab_by_hand { "winner by hand" } else { "winner by window" })
                    .or_default() += 1;
            }
        }
        Ok(())
    }

    /// The scripted actions on readers that are due: automation entries, opt-outs, the end of the
    /// soft-failure send's refusals, the leavers, opens of the resent original.
    async fn reader_actions(
        &mut self,
        now: Instant,
        stage: &Stage,
        setup: &mut Setup,
        report: &mut RoundReport,
    ) -> anyhow::Result<()> {
        let Stage { owner, db, jobs, sink, .. } = stage;
        if self.entered_batches < self.enter_at.len() && now >= self.enter_at[self.entered_batches] {
            let batch: Vec<&String> = setup.auto_readers.iter().skip(self.entered_batches * 50).take(50).collect();
            // Through Postgres restarts a batch may fail, and is tried again (one that committed
            // unseen lets nobody in twice: the re-entry rule is "once").
            if enter_automation(db, setup.main_tenant, "chaos", &batch).await.is_ok() {
                self.entered_batches += 1;
                *report.faults.entry("automation entries").or_default() += 1;
            }
        }
        if !self.auto_opt_out_done && now >= self.auto_opt_out_at {
            self.auto_opt_out_done = true;
            for (i, address) in setup.auto_readers.iter().step_by(30).take(10).enumerate() {
                let at = opt_out(owner, setup.main_tenant, address, i % 2 == 0).await?;
                setup.scene.opted_out.insert(address.clone(), at);
            }
        }
        if !self.opt_out_done && now >= self.opt_out_at {
            self.opt_out_done = true;
            let living: Vec<&String> = setup.scene.campaigns[0].readers.iter().filter(|a| a.starts_with('r')).collect();
            for (i, address) in living.iter().step_by((living.len() / 30).max(1)).take(30).enumerate() {
                let at = opt_out(owner, setup.main_tenant, address, i % 3 == 0).await?;
                setup.scene.opted_out.insert((*address).clone(), at);
            }
            *report.faults.entry("unsubscribes").or_default() += 1;
        }
        if self.soft_refusing
            && (now >= self.soft_refusing_by
                || soft_refusals_done(owner, setup.soft, &setup.soft_refused).await.unwrap_or(false))
        {
            // Each refused reader's 4xx came: the rules go, or a later change of the faults
            // (which counts `times` afresh) would refuse them a second time.
            self.soft_refusing = false;
            self.faults_now = stage.base_faults.clone();
            sink.set_faults(match self.slow_until {
                Some(_) => self.faults_now.clone().with_random_reply_delay(SLOW_REPLY_MAX),
                None => self.faults_now.clone(),
            });
        }
        if self.left.is_none() && now >= self.leave_at {
            match leave_trigger_list(owner, &setup.leavers, &mut setup.scene.stopped).await {
                Ok(true) => {
                    self.left = Some(Instant::now());
                    *report.faults.entry("trigger-list leavers").or_default() += 1;
                }
                // Their first mail is not queued yet: the next tick.
                Ok(false) => {}
                Err(e) => eprintln!("chaos: the leavers could not leave yet: {e:#}"),
            }
        }
        if !self.leave_resumed && self.left.is_some_and(|t| now >= t + LEAVE_HOLD) {
            self.leave_resumed = release_held_step(owner, db, jobs, &setup.leavers).await.is_ok();
        }
        if !self.opened_done && now >= self.open_at {
            match open_original(owner, setup.main_tenant, &setup.resend, 10, &mut setup.scene.stopped).await {
                Ok(true) => {
                    self.opened_done = true;
                    *report.faults.entry("opens of a resent original").or_default() += 1;
                }
                // The resend's fan-out has not written its rows yet: the next tick.
                Ok(false) => {}
                Err(e) => eprintln!("chaos: could not open the original yet: {e:#}"),
            }
        }
        Ok(())
    }

    /// One random fault (or a late transactional message); returns its name for the report.
    async fn random_fault(
        &mut self,
        now: Instant,
        stage: &Stage,
        workers: &mut Workers,
        setup: &mut Setup,
        report: &RoundReport,
        rng: &mut StdRng,
    ) -> anyhow::Result<&'static str> {
        let Stage { owner, sink, .. } = stage;
        let roll: u32 = rng.gen_range(0..100);
        Ok(match roll {
            0..=29 => {
                let slot = rng.gen_range(0..workers.slots.len());
                workers.kill(slot).await;
                tokio::time::sleep(Duration::from_millis(rng.gen_range(0..1_500))).await;
                workers.spawn(slot)?;
                "sigkill"
            }
            30..=34 => {
                // One worker cut off from Postgres for longer than its lease; the rest not.
                let slot = rng.gen_range(0..workers.links.len());
                workers.links[slot]
                    .cut_for(Duration::from_millis(rng.gen_range(LEASE_SECONDS * 1_200..LEASE_SECONDS * 2_500)));
                "partition"
            }
            35..=44 => {
                stage.pg.restart_immediate().await?;
                "pg restart"
            }
            45..=64 => {
                sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'herald_app'")
                    .execute(owner)
                    .await?;
                "pg_terminate_backend"
            }
            65..=79 => {
                // Replies slower than the lease, for a few seconds.
                sink.set_faults(self.faults_now.clone().with_random_reply_delay(SLOW_REPLY_MAX));
                self.slow_until = Some(now + Duration::from_millis(rng.gen_range(2_000..6_000)));
                "slow smtp"
            }
            80..=89 => {
                // Frozen for longer than the lease, mid-whatever it was doing.
                let slot = rng.gen_range(0..workers.slots.len());
                workers
                    .freeze(slot, Duration::from_millis(rng.gen_range(LEASE_SECONDS * 1_200..LEASE_SECONDS * 2_500)));
                "sigstop"
            }
            _ => {
                let i = rng.gen_range(0..60);
                let to = format!("tx-late{}-{i}@chaos.test", report.faults.values().sum::<usize>());
                let id = insert_message(owner, setup.main_tenant, &to).await?;
                setup.scene.messages.insert(id, to);
                "transactional"
            }
        })
    }

    /// After the fault phase: what the script left undone, done.
    async fn finish(
        mut self,
        stage: &Stage,
        workers: &mut Workers,
        setup: &mut Setup,
        report: &mut RoundReport,
    ) -> anyhow::Result<FaultsOver> {
        let Stage { owner, db, jobs, .. } = stage;
        if !self.resumed_done {
            setup.scene.pause_window = self.paused_at.map(|at| (at, Utc::now()));
            let _ = lifecycle::resume(db, jobs, setup.main_tenant, Role::Owner, setup.paused).await;
        }
        if !self.cancel_done {
            lifecycle::cancel(db, setup.main_tenant, Role::Owner, setup.cancelled).await?;
        }
        let entering_by = Instant::now() + Duration::from_secs(60);
        while self.entered_batches < self.enter_at.len() && Instant::now() < entering_by {
            let batch: Vec<&String> = setup.auto_readers.iter().skip(self.entered_batches * 50).take(50).collect();
            match enter_automation(db, setup.main_tenant, "chaos", &batch).await {
                Ok(()) => self.entered_batches += 1,
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }

        self.capped.finish(stage, setup, report).await;
        // Leavers who have not left yet (an answer lost to the last fault) leave now; then the list
        // automation's first mail, held until `LEAVE_HOLD` after they left, goes out.
        let resume_by = Instant::now() + Duration::from_secs(60);
        while !self.leave_resumed && Instant::now() < resume_by {
            workers.ensure_all()?;
            if self.left.is_none()
                && leave_trigger_list(owner, &setup.leavers, &mut setup.scene.stopped).await.unwrap_or(false)
            {
                self.left = Some(Instant::now());
            }
            if self.left.is_some_and(|t| t.elapsed() >= LEAVE_HOLD) {
                self.leave_resumed = release_held_step(owner, db, jobs, &setup.leavers).await.is_ok();
            }
            if !self.leave_resumed {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        // Likewise readers' opens of the resent original (nothing to do once the resend has no copy
        // left to hold back).
        let opening_by = Instant::now() + Duration::from_secs(30);
        while !self.opened_done && Instant::now() < opening_by {
            match open_original(owner, setup.main_tenant, &setup.resend, 10, &mut setup.scene.stopped).await {
                Ok(true) => self.opened_done = true,
                Ok(false) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        Ok(FaultsOver { ab_done: self.ab_done, events_sent: self.events_sent })
    }
}
