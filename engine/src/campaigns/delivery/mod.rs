//! Delivery: claim send-log rows, re-check them, send them, record the outcome.
//!
//! The guarantees, in the order a row meets them (docs/guarantee.md):
//! 1. **A slot.** A delivery loop first takes one of its campaign's delivery slots, a fenced
//!    [`Lease`] (at most the identity's connection count per campaign, across processes). Its
//!    token goes on every row the loop claims; every later write to a row is conditional on it.
//! 2. **Claim** (one transaction): `FOR UPDATE SKIP LOCKED` picks queued rows of a campaign that
//!    is still `sending`; the same transaction re-checks each reader (active, still confirmed on
//!    a target list, not suppressed, row not older than the workspace's max queue age plus any
//!    spread) and moves the reader's last-mailed time forward only if the frequency cap allows
//!    (remembering the old marks, so a row that ends unsent gives them back).
//! 3. **Arm, then send.** Before a message's data is written its row is *armed* in Postgres, in
//!    the same statement as earlier acknowledgements (a window of rows at a time). The SMTP
//!    client writes through the lease's [`Fence`]: once the process cannot prove it still owns
//!    the lease, or the campaign is paused or cancelled, no further byte goes out, and a
//!    transaction not past the end of its data is abandoned undelivered.
//! 4. **Acknowledge.** 250s are recorded in batches (`record_sent`), conditional on the token,
//!    retried through database outages until they land or the row is provably someone else's.
//!    A process that dies between a 250 and its record leaves armed rows: the reaper counts them
//!    as *ambiguous* and they are re-sent with the same deterministic Message-ID. That is the
//!    only path to a second copy.
//!
//! Failures: 4xx, timeouts and dropped connections are transient (requeued with exponential
//! backoff and jitter); 5xx is permanent (`failed`, with the reply); a 5xx "user unknown" at
//! RCPT is a hard bounce, suppresses the address and counts toward the bounce-rate guard (not the
//! consecutive-failure guard: it is the recipient's failure, not the server's).

use chrono::{DateTime, Utc};
use rand::Rng;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

use super::compose::{Composer, Reader, RenderedParts, Versions};
use super::fair_share::WorkspaceLoops;
use super::feed_fetch::NO_DATA;
use super::store::{self, Campaign, CampaignStatus, FeedSource};
use super::tally::DomainTally;
use crate::domain::{CampaignId, TenantId};
use crate::error::{Error, Result, persist};
use crate::infra::db::Db;
use crate::infra::egress::Egress;
use crate::infra::tokens::Signer;
use crate::sending::identities::{self, SmtpIdentity};
use crate::sending::lease::{Closed, Fence, Lease, LeaseFor};
use crate::sending::message::{self, CompiledCampaign};
use crate::sending::rate;
use crate::sending::smtp::{SmtpConnection, SmtpError, SmtpErrorKind};
use crate::tracking::links::LinkRegistry;

// The loop below (`deliver`, `Sender::run`, `Sender::send_one`) and its parts, each a room of
// its own: the claim and its re-checks, the slots and rates that pace it, recording outcomes,
// and the guards that pause a campaign.
mod claim;
mod health;
mod pace;
mod record;

use claim::*;
use health::*;
use pace::*;

/// Where a test can make a worker "crash" (abandon its batch without releasing anything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// The claim committed; nothing sent yet.
    AfterClaim,
    /// About to hand this message to SMTP.
    BeforeSmtp,
    /// The server said 250; the `sent` write has not happened.
    After250,
}

/// Returns true to crash at that point (for the send id given).
pub type FaultHook = Arc<dyn Fn(FaultPoint, i64) -> bool + Send + Sync>;

#[derive(Clone)]
pub struct DeliveryConfig {
    /// Unique per process (see [`crate::jobs::unique_worker_name`]); names its leases.
    pub worker_id: String,
    pub base_url: String,
    /// The identity used by campaigns that name none (`HERALD_SMTP_URL`).
    pub default_identity: SmtpIdentity,
    /// Where a workspace's own SMTP identity and feed URLs may connect (`HERALD_EGRESS_ALLOW`).
    pub egress: Egress,
    /// A delivery slot's lease. Renewed every half-second while the loop lives, so it only
    /// bounds how long a dead loop's rows wait for the reaper.
    pub lease: Duration,
    /// Rows per claim (also capped by the identity's burst).
    pub batch_size: u32,
    /// 250s recorded per statement (and rows armed ahead); see docs/guarantee.md for what this
    /// widens: a process killed with acknowledgements unrecorded re-sends at most this many.
    pub ack_batch: usize,
    pub max_attempts: i32,
    /// First retry delay; doubles per attempt, with ±50 % jitter, capped at `retry_max`.
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// Consecutive failed messages before the campaign pauses itself.
    pub pause_after_failures: u32,
    /// Connecting (TCP, TLS, EHLO, AUTH) and each SMTP command; the message data gets twice this.
    pub smtp_timeout: Duration,
    pub faults: Option<FaultHook>,
    /// This process's loops per workspace (`HERALD_SEND_WORKSPACE_LOOPS`), shared by every
    /// delivery job of the process.
    pub workspace_loops: Arc<WorkspaceLoops>,
}

impl std::fmt::Debug for DeliveryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeliveryConfig({})", self.worker_id)
    }
}

impl DeliveryConfig {
    pub fn new(worker_id: String, base_url: String, default_identity: SmtpIdentity) -> Self {
        Self {
            worker_id,
            base_url,
            default_identity,
            egress: Egress::default(),
            lease: Duration::from_secs(30),
            batch_size: 50,
            ack_batch: 16,
            max_attempts: 8,
            retry_base: Duration::from_secs(60),
            retry_max: Duration::from_secs(3 * 3600),
            pause_after_failures: 25,
            smtp_timeout: Duration::from_secs(30),
            faults: None,
            workspace_loops: WorkspaceLoops::unlimited(),
        }
    }

    fn fault(&self, point: FaultPoint, send: i64) -> Result<()> {
        match &self.faults {
            Some(hook) if hook(point, send) => {
                Err(Error::Unexpected(anyhow::anyhow!("fault injected at {point:?} for send {send}")))
            }
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct DeliveryContext {
    pub db: Db,
    pub signer: Signer,
    pub config: Arc<DeliveryConfig>,
}

/// A claimed row, with what rendering needs.
#[derive(Debug, sqlx::FromRow)]
struct Claimed {
    id: i64,
    reader_id: i64,
    email: String,
    name: String,
    attributes: Value,
    attempts: i32,
    skip: Option<String>,
    /// This reader's data for a recurring edition (pushed before the edition, or fetched).
    feed: Option<Value>,
    /// The A/B test version the row is sent (none: the campaign has no test).
    variant: Option<i16>,
    /// An automation step's run number for this reader (0 for a campaign): part of the Message-ID.
    entry: i32,
    /// The merged reader the Message-ID names instead of `reader_id` (a row moved by a merge
    /// while in flight): see `compose::Reader::message_reader`.
    message_reader_id: Option<i64>,
}

impl Claimed {
    fn reader(&self) -> Reader<'_> {
        Reader {
            id: self.reader_id,
            email: &self.email,
            name: &self.name,
            attributes: &self.attributes,
            feed: self.feed.as_ref(),
            entry: self.entry,
            message_reader: self.message_reader_id,
        }
    }
}

/// A 250 not yet recorded.
struct Ack {
    id: i64,
    email: String,
    reply: String,
    provider_id: Option<String>,
    at: DateTime<Utc>,
}

/// What the loop does after one message.
enum Next {
    Continue,
    /// The campaign paused itself.
    Stop,
    /// The fence closed before the message's data was complete: it was not delivered.
    Fenced(Closed),
}

/// A 250 waits at most this long for its batch before it is recorded.
const ACK_MAX_DELAY: Duration = Duration::from_millis(50);
/// How often an idle loop other than slot 0 asks whether its campaign is done.
const DONE_CHECK_EVERY: Duration = Duration::from_secs(2);

/// Is any queued row of campaign `$1` due? Answered from `sends_due_idx` (a partial index on queued rows) in a few
/// index pages however many rows are deferred. Public for the test that reads its plan.
pub const DUE_PROBE: &str = "SELECT EXISTS (SELECT 1 FROM sends
     WHERE campaign_id = $1 AND status = 'queued' AND next_attempt_at <= now())";
/// A queued row at or behind the cursor `$2` that is due now (see `retry_due_behind_cursor`).
pub const RETRY_DUE_BEHIND: &str = "SELECT EXISTS (SELECT 1 FROM sends
     WHERE campaign_id = $1 AND status = 'queued' AND id <= $2 AND next_attempt_at <= now())";
/// How long a delivery loop waits with nothing due before it gives its connection slot back.
const RELEASE_IDLE_SLOT_AFTER: Duration = Duration::from_secs(5);
/// How often domain tallies are added to the stats while sending.
const TALLY_EVERY: Duration = Duration::from_secs(5);

/// Everything a delivery job holds for one campaign.
struct Sender<'a> {
    cx: &'a DeliveryContext,
    tenant: TenantId,
    campaign: Campaign,
    /// Turns a claimed row into the message on the wire, as its A/B version.
    composers: Versions,
    /// The campaign's tracked links registered so far (empty when it does not track).
    links: LinkRegistry,
    identity: SmtpIdentity,
    max_queue_age_hours: i32,
    frequency_cap_hours: Option<i32>,
    /// This loop's delivery slot; its token fences every row the loop claims.
    lease: Lease,
    /// The delivery slot the lease holds: slot 0 asks whether the campaign is done whenever it
    /// idles, the others only every [`DONE_CHECK_EVERY`] (see [`Sender::idle`]).
    slot: i32,
    last_done_check: Instant,
    /// Since when this loop has found nothing to send (reset by every claim that finds rows).
    idle_since: Option<Instant>,
    /// The last pass claimed nothing: the next asks [`DUE_PROBE`] before claiming again.
    was_idle: bool,
    conn: Option<SmtpConnection>,
    consecutive_failures: u32,
    /// Claims start after the last row this loop claimed, so a claim does not walk the index
    /// entries of every row already sent (they stay in the partial index until vacuum: from
    /// the campaign's first row that walk made a send quadratic). A pass that finds nothing
    /// starts again from 0, which picks up retries and rows given back behind the cursor; so
    /// does a sweep that finds a retry due behind it ([`RETRY_DUE_BEHIND`]).
    cursor: i64,
    /// When this loop last looked for retries due behind its cursor.
    last_retry_sweep: Instant,
    /// 250s not yet recorded (at most `ack_batch`, at most [`ACK_MAX_DELAY`] old).
    acks: Vec<Ack>,
    /// When the current batch was claimed: its readers' eligibility was checked then.
    claimed_at: Instant,
    /// Rows armed in Postgres and not yet sent.
    armed: HashSet<i64>,
    last_tally: Instant,
    /// Hard bounces this loop saw since the last health check (no bounces, nothing to check).
    bounces_since_check: u32,
    tally: DomainTally,
    /// For editions whose per-reader data is fetched from a URL.
    feed_client: Option<reqwest::Client>,
    workspace: message::Workspace,
    slug: String,
    /// The campaign's `updated_at` when `composers` were made: an automation's email step is
    /// edited while it sends, and readers who reach it after the edit get the new mail.
    content_version: DateTime<Utc>,
}

/// Turns the campaign (each A/B version) into composers, or says why its template cannot be
/// sent (the campaign pauses itself with that).
async fn compose(
    cx: &DeliveryContext,
    tenant: TenantId,
    campaign: &Campaign,
    identity: &SmtpIdentity,
    workspace: &message::Workspace,
    slug: &str,
) -> Result<std::result::Result<Versions, String>> {
    let mut composers = Vec::with_capacity(super::ab_test::versions(campaign));
    for v in 0..super::ab_test::versions(campaign) {
        let version = super::ab_test::version(campaign, v);
        let turn = crate::sending::template_sandbox::Turn::background(tenant);
        let compiled = match CompiledCampaign::compile(&store::content(&version), workspace, turn).await? {
            Ok(c) => c,
            Err(e) => return Ok(Err(format!("The template has an error: {e}"))),
        };
        // A signer per version (the key is not shareable): the versions share the sender address.
        let dkim =
            crate::sending::domains::dkim_signer(&cx.db, &cx.signer, tenant, identity, &campaign.from_email).await?;
        let signer = cx.signer.clone();
        composers.push(Composer::new(compiled, tenant, version, slug, signer, &cx.config.base_url, dkim));
    }
    Ok(Ok(Versions::new(composers)))
}

/// Works on one campaign until it is done, paused or cancelled. Several of these run at once
/// (one SMTP connection each), at most one per delivery slot: a job that finds every slot
/// taken ends at once, so running the same job twice (or a supervisor's re-kick) is harmless.
#[tracing::instrument(skip_all, fields(%tenant, campaign = %campaign_id))]
pub async fn deliver(cx: &DeliveryContext, tenant: TenantId, campaign_id: CampaignId) -> Result<()> {
    // Held until this loop ends (see `fair_share`).
    let Some(_permit) = cx.config.workspace_loops.try_take(tenant) else {
        tracing::debug!(%tenant, campaign = %campaign_id, "workspace at its share of delivery loops");
        return Ok(());
    };
    let campaign = store::get(&cx.db, tenant, campaign_id).await?;
    if campaign.status != CampaignStatus::Sending {
        return Ok(());
    }
    let identity = identities::resolve(
        &cx.db,
        &cx.signer,
        tenant,
        campaign.identity_id,
        &cx.config.default_identity,
        &cx.config.egress,
    )
    .await?;
    let Some((lease, slot)) = take_slot_soon(cx, tenant, &campaign, &identity).await? else {
        return Ok(());
    };
    let mut tx = cx.db.tenant_tx(tenant).await?;
    let (ws_name, postal, slug, max_age, cap): (String, String, String, i32, Option<i32>) = sqlx::query_as(
        "SELECT name, postal_address, slug, max_queue_age_hours, frequency_cap_hours FROM tenants WHERE id = $1",
    )
    .bind(tenant)
    .fetch_one(&mut *tx)
    .await?;
    // A suspended account's workspace sends nothing, however its campaign got to `sending` (a
    // recurring edition, a job queued before the suspension).
    let suspended = crate::account_limits::require_not_suspended(&mut tx, tenant).await;
    tx.commit().await?;
    if let Err(Error::Refused(why)) = suspended {
        auto_pause(cx, tenant, campaign_id, &why).await?;
        lease.end().await;
        return Ok(());
    }
    suspended?;
    let workspace = message::Workspace { name: ws_name, postal_address: postal };
    let composers = match compose(cx, tenant, &campaign, &identity, &workspace, &slug).await? {
        Ok(c) => c,
        Err(why) => {
            auto_pause(cx, tenant, campaign_id, &why).await?;
            lease.end().await;
            return Ok(());
        }
    };
    let content_version = campaign.updated_at;
    let campaign_feed_is_url = campaign.feed == FeedSource::Url;
    let mut sender = Sender {
        cx,
        tenant,
        campaign,
        composers,
        links: LinkRegistry::default(),
        identity,
        max_queue_age_hours: max_age,
        frequency_cap_hours: cap,
        lease,
        slot,
        last_done_check: Instant::now(),
        idle_since: None,
        was_idle: false,
        claimed_at: Instant::now(),
        conn: None,
        consecutive_failures: 0,
        cursor: 0,
        last_retry_sweep: Instant::now(),
        acks: Vec::new(),
        armed: HashSet::new(),
        last_tally: Instant::now(),
        bounces_since_check: 0,
        feed_client: campaign_feed_is_url.then(|| super::feed_fetch::client(&cx.config.egress)),
        tally: DomainTally::default(),
        workspace,
        slug,
        content_version,
    };
    let result = sender.run().await;
    // What this loop counted since its last flush (a crash loses it; the final snapshot does not).
    if let Err(e) = sender.tally.flush(&cx.db, tenant, campaign_id).await {
        tracing::warn!(error = %e, "could not add delivery counts to the stats");
    }
    if let Some(conn) = sender.conn.take() {
        conn.quit().await;
    }
    match result {
        // Every row this loop claimed has its outcome: the slot is free at once.
        Ok(()) => sender.lease.end().await,
        // Rows may still carry the token: the lease expires and the reaper gives them back.
        Err(ref e) => tracing::warn!(error = ?e, campaign = %campaign_id, "delivery loop ended with an error"),
    }
    result
}

impl Sender<'_> {
    fn fence(&self) -> Fence {
        self.lease.fence().clone()
    }

    async fn run(&mut self) -> Result<()> {
        let cfg = self.cx.config.clone();
        let mut batch = cfg.batch_size.min(self.identity.burst).max(1);
        let mut last_health = Instant::now();
        let mut last_complaint_check = Instant::now();
        loop {
            if let Some(why) = self.fence().closed_because() {
                return self.on_fence_closed(why, &[]).await;
            }
            if let Some(hours) = self.campaign.spread_hours {
                // The spread rate is recipients over the window, known once the fan-out is done.
                match self.spread_rate(hours).await? {
                    SpreadRate::NotSending => return Ok(()),
                    SpreadRate::FanoutRunning => {
                        self.fence().sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                    // At most about a second's worth per batch, so the pacing stays even.
                    SpreadRate::PerSecond(rate) => batch = batch.min(rate.ceil().max(1.0) as u32),
                }
            }
            if self.was_idle && !self.anything_due().await? {
                if self.idle().await? {
                    return Ok(());
                }
                continue;
            }
            if self.cursor > 0 && self.last_retry_sweep.elapsed() >= self.retry_sweep_every() {
                self.last_retry_sweep = Instant::now();
                if self.retry_due_behind_cursor().await? {
                    self.cursor = 0;
                }
            }
            let mut rows = self.claim(batch as i64).await?;
            if rows.is_empty() && self.cursor > 0 {
                self.cursor = 0;
                rows = self.claim(batch as i64).await?;
            }
            self.was_idle = rows.is_empty();
            if !rows.is_empty() {
                self.idle_since = None;
            }
            if rows.is_empty() {
                if self.idle().await? {
                    return Ok(());
                }
                continue;
            }
            self.cursor = rows.iter().map(|r| r.id).max().unwrap_or(self.cursor);
            cfg.fault(FaultPoint::AfterClaim, rows[0].id)?;
            // Read after the claim: a row queued after an edit of its step was committed is
            // composed from the edited mail.
            if self.campaign.automation_id.is_some() && !self.follow_edits().await? {
                self.release(&rows).await?;
                return Ok(());
            }
            self.fetch_feeds(&mut rows).await;
            // Readers the feed had nothing for are skipped; failed fetches wait for a retry.
            let mut ready = Vec::with_capacity(rows.len());
            for row in rows {
                match row.skip.as_deref() {
                    None => ready.push(row),
                    Some(NO_DATA) => self.skip_row(&row, NO_DATA).await?,
                    Some(why) => {
                        let why = why.to_string();
                        self.retry_later(&row, &why, false).await?;
                    }
                }
            }
            // Tokens are taken for what was claimed (a loop that finds nothing takes none), and
            // waited for under the fence: a pause or cancel ends the wait at once.
            let (wait, connections_wanted) = self.reserve_tokens(ready.len() as u32).await?;
            if connections_wanted && self.above_bulk_share() {
                tracing::debug!(campaign = %self.campaign.id, "a campaign loop steps aside for priority mail");
                self.release(&ready).await?;
                return Ok(());
            }
            if !wait.is_zero()
                && let Some(why) = self.fence().sleep(wait).await
            {
                return self.on_fence_closed(why, &ready).await;
            }
            // One sandbox round trip for the batch; `render_bodies` answers once per row.
            let urls: Vec<String> =
                ready.iter().map(|row| self.composers.of(None).unsubscribe_url(row.reader_id)).collect();
            let readers: Vec<Reader<'_>> = ready.iter().map(Claimed::reader).collect();
            let variants: Vec<Option<i16>> = ready.iter().map(|row| row.variant).collect();
            let rendered = self.composers.render(&readers, &variants, &urls).await?;
            for (((i, row), parts), unsubscribe) in ready.iter().enumerate().zip(rendered).zip(urls) {
                if let Some(why) = self.fence().closed_because() {
                    return self.on_fence_closed(why, &ready[i..]).await;
                }
                let stale = self
                    .acks
                    .first()
                    .is_some_and(|a| (Utc::now() - a.at).to_std().unwrap_or_default() >= ACK_MAX_DELAY);
                if !self.armed.contains(&row.id) || self.acks.len() >= cfg.ack_batch.max(1) || stale {
                    let window = cfg.ack_batch.max(1);
                    let arm: Vec<i64> = ready[i..].iter().take(window).map(|r| r.id).collect();
                    self.flush(&arm).await?;
                    if !self.armed.contains(&row.id) {
                        tracing::warn!(send = row.id, "not armed: the row is no longer this loop's; not sent");
                        continue;
                    }
                }
                cfg.fault(FaultPoint::BeforeSmtp, row.id)?;
                match self.send_one(row, parts, unsubscribe).await? {
                    Next::Continue => {}
                    Next::Stop => {
                        self.flush(&[]).await?;
                        self.release(&ready[i + 1..]).await?;
                        return Ok(());
                    }
                    Next::Fenced(why) => return self.on_fence_closed(why, &ready[i..]).await,
                }
            }
            self.flush(&[]).await?;
            if self.last_tally.elapsed() >= TALLY_EVERY {
                self.last_tally = Instant::now();
                self.tally.flush(&self.cx.db, self.tenant, self.campaign.id).await?;
            }
            if self.bounces_since_check > 0 && last_health.elapsed() >= HEALTH_CHECK_EVERY {
                last_health = Instant::now();
                self.bounces_since_check = 0;
                if self.check_health().await? {
                    return Ok(());
                }
            }
            if last_complaint_check.elapsed() >= COMPLAINT_CHECK_EVERY {
                last_complaint_check = Instant::now();
                if self.check_complaints().await? {
                    return Ok(());
                }
            }
        }
    }

    /// An automation step's mail changed since this loop composed it: compose it again, so the
    /// next claim sends the new one. False when the new template cannot be sent (paused).
    async fn follow_edits(&mut self) -> Result<bool> {
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let updated: Option<DateTime<Utc>> =
            sqlx::query_scalar("SELECT updated_at FROM campaigns WHERE tenant_id = $1 AND id = $2")
                .bind(self.tenant)
                .bind(self.campaign.id)
                .fetch_optional(&mut *tx)
                .await?;
        tx.commit().await?;
        if updated.is_none_or(|u| u == self.content_version) {
            return Ok(true);
        }
        let fresh = store::get(&self.cx.db, self.tenant, self.campaign.id).await?;
        match compose(self.cx, self.tenant, &fresh, &self.identity, &self.workspace, &self.slug).await? {
            Ok(composers) => {
                self.content_version = fresh.updated_at;
                self.composers = composers;
                // Links are registered per campaign; the new mail's are added as it sends.
                self.campaign = fresh;
                Ok(true)
            }
            Err(why) => {
                auto_pause(self.cx, self.tenant, self.campaign.id, &why).await?;
                Ok(false)
            }
        }
    }

    /// Nothing claimable right now. Returns true when this job should end: the campaign is
    /// done, or no longer sending. Otherwise waits a little (retries due later, rows leased by
    /// other loops, a fan-out still writing). Writes nothing but the tallies: liveness is the
    /// lease, not a heartbeat.
    async fn idle(&mut self) -> Result<bool> {
        self.tally.flush(&self.cx.db, self.tenant, self.campaign.id).await?;
        // At the end of a send every loop idles at once, and the check walks the campaign's
        // queue (measured: 30 ms a call right after 100k rows went out, 2.1 s of Postgres's
        // 22 s in the benchmark). One loop asking is enough: the others learn that the
        // campaign is sent from their lease's renewal, which stops their fence. They still
        // ask now and then, in case slot 0 died and its lease has not been reaped yet.
        if self.slot == 0 || self.last_done_check.elapsed() >= DONE_CHECK_EVERY {
            self.last_done_check = Instant::now();
            if super::lifecycle::finish_if_done(&self.cx.db, self.tenant, self.campaign.id).await? {
                tracing::info!(campaign = %self.campaign.id, "campaign sent");
                return Ok(true);
            }
        }
        // Idle connections are closed rather than kept through a long backoff.
        if let Some(conn) = self.conn.take() {
            conn.quit().await;
        }
        // A loop with nothing due for a while gives its slot back: the slots are the sending
        // identity's, shared with every campaign (and, for the default server, every
        // workspace), and a send whose rows are all deferred (retries backing off, readers held
        // by the frequency cap) would otherwise hold them for as long as it waits. The
        // supervisor starts loops again once a row is due (`claim_unattended_campaigns`).
        if self.idle_since.get_or_insert_with(Instant::now).elapsed() >= RELEASE_IDLE_SLOT_AFTER {
            return Ok(true);
        }
        // Retries come due on their own schedule; a short poll (with jitter, so idle loops do
        // not wake together) finds them without scanning the queue for the next due time. The
        // lease's renewal reports a pause or cancel within a tick.
        let pause = Duration::from_millis(rand::thread_rng().gen_range(100..300));
        let pause = pause.min(self.cx.config.retry_base.max(Duration::from_millis(50)));
        Ok(self.fence().sleep(pause).await.is_some())
    }

    /// How often a loop looks behind its cursor for soft-failed rows due again: about as often
    /// as the first retry comes, within bounds.
    fn retry_sweep_every(&self) -> Duration {
        self.cx.config.retry_base.clamp(Duration::from_secs(1), Duration::from_secs(30))
    }

    /// Whether a row behind the cursor (one that failed softly, or was given back) is due now.
    /// A soft failure is retried on its own schedule, whatever the cursor does: in a long send
    /// the cursor would otherwise reach it only at the end of the whole send (days, at a slow
    /// rate), by when its queue age has run out after a single attempt.
    async fn retry_due_behind_cursor(&self) -> Result<bool> {
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let due: bool =
            sqlx::query_scalar(RETRY_DUE_BEHIND).bind(self.campaign.id).bind(self.cursor).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        Ok(due)
    }

    /// Whether any queued row of the campaign is due now: one probe of an index ordered by due
    /// time. An idle loop asks this every 100–300 ms; the claim itself walks the queue in id
    /// order and, when every row is deferred (retries backing off, readers waiting on the
    /// frequency cap), walked all of them each time to find none.
    async fn anything_due(&self) -> Result<bool> {
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let due: bool = sqlx::query_scalar(DUE_PROBE).bind(self.campaign.id).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        Ok(due)
    }

    /// Renders and sends one claimed row, and records the outcome (a 250 is recorded with the
    /// next batch; see [`Sender::flush`]).
    async fn send_one(&mut self, row: &Claimed, rendered: RenderedParts, unsubscribe: String) -> Result<Next> {
        let cfg = self.cx.config.clone();
        let parts = match rendered {
            Ok(r) => r,
            Err(e) => {
                self.fail(row, &format!("template error: {e}"), false, false, true).await?;
                return Ok(Next::Continue);
            }
        };
        let composer = self.composers.of(row.variant);
        let urls = composer.trackable_urls(&parts);
        self.links.ensure(&self.cx.db, self.tenant, self.campaign.id, &urls).await?;
        let raw = match composer.message(&row.reader(), parts, unsubscribe, |url| self.links.id(url)) {
            Ok(raw) => raw,
            Err(e) => {
                self.fail(row, &format!("could not build the message: {e}"), false, false, true).await?;
                return Ok(Next::Continue);
            }
        };
        let fence = self.fence();
        if self.conn.is_none() {
            let connect = SmtpConnection::connect(&self.identity.server, cfg.smtp_timeout);
            let connected = tokio::select! {
                c = connect => c,
                why = fence.closed() => return Ok(Next::Fenced(why)),
            };
            match connected {
                Ok(mut conn) => {
                    conn.set_timeouts(cfg.smtp_timeout, cfg.smtp_timeout * 2);
                    self.conn = Some(conn)
                }
                Err(e) => return self.on_smtp_error(row, e).await,
            }
        }
        // A reader who opted out since the claim is not mailed: once the claim's checks are
        // older than RECHECK_ELIGIBILITY (slow replies, a rate limit, a long batch), they are made
        // again for each message, right before its data goes out.
        if self.claimed_at.elapsed() >= RECHECK_ELIGIBILITY
            && let Some(reason) = self.not_eligible_now(row).await?
        {
            self.armed.remove(&row.id);
            self.skip_row(row, &reason).await?;
            return Ok(Next::Continue);
        }
        let Some(conn) = self.conn.as_mut() else { return Ok(Next::Continue) };
        let from = self.campaign.from_email.clone();
        match conn.send_fenced(&from, &row.email, &raw, &fence).await {
            Ok(reply) => {
                cfg.fault(FaultPoint::After250, row.id)?;
                self.consecutive_failures = 0;
                self.armed.remove(&row.id);
                self.acks.push(Ack {
                    id: row.id,
                    email: row.email.clone(),
                    provider_id: crate::sending::smtp::provider_id(&reply),
                    reply: truncate(&reply, 500),
                    at: Utc::now(),
                });
                Ok(Next::Continue)
            }
            Err(e) => {
                // A connection that failed is never reused (listmonk #1629).
                self.conn = None;
                if e.kind == SmtpErrorKind::Fenced {
                    return Ok(Next::Fenced(fence.closed_because().unwrap_or(Closed::LeaseLost)));
                }
                self.on_smtp_error(row, e).await
            }
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
