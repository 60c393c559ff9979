//! Delivery: claim send-log rows, re-check them, send them, record the outcome.
//!
//! The guarantees, in the order a row meets them (README, "The guarantee and its window"):
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

use super::feed_fetch::NO_DATA;
use chrono::{DateTime, Utc};
use rand::Rng;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

use super::compose::{Composer, Reader, RenderedParts, Versions};
use super::fair_share::WorkspaceLoops;
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
    /// 250s recorded per statement (and rows armed ahead); see the README for what this
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

enum SpreadRate {
    NotSending,
    FanoutRunning,
    PerSecond(f64),
}

/// What the loop does after one message.
enum Next {
    Continue,
    /// The campaign paused itself.
    Stop,
    /// The fence closed before the message's data was complete: it was not delivered.
    Fenced(Closed),
}

/// Bounce and complaint rates above these pause the campaign (after `MIN_SAMPLE` outcomes).
const MAX_HARD_BOUNCE_RATE: f64 = 0.05;
const MIN_SAMPLE: i64 = 100;
const HEALTH_CHECK_EVERY: Duration = Duration::from_secs(5);
/// Gmail's bulk-sender limit is a 0.3 % spam rate; complaints arrive by webhook, after the
/// message, so they are checked on a timer against the messages sent so far.
const MAX_COMPLAINT_RATE: f64 = 0.003;
const MIN_COMPLAINT_SAMPLE: i64 = 1000;
const COMPLAINT_CHECK_EVERY: Duration = Duration::from_secs(30);
/// A 250 waits at most this long for its batch before it is recorded.
const ACK_MAX_DELAY: Duration = Duration::from_millis(50);
/// How often an idle loop other than slot 0 asks whether its campaign is done.
const DONE_CHECK_EVERY: Duration = Duration::from_secs(2);

/// Is any queued row of campaign `$1` due? Answered from `sends_due_idx` (a partial index on queued rows) in a few
/// index pages however many rows are deferred. Public for the test that reads its plan.
pub const DUE_PROBE: &str = "SELECT EXISTS (SELECT 1 FROM sends
     WHERE campaign_id = $1 AND status = 'queued' AND next_attempt_at <= now())";
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
    /// starts again from 0, which picks up retries and rows given back behind the cursor.
    cursor: i64,
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

/// Why a claimed row's reader may not be mailed now (SQL, NULL when they may): the claim's test
/// and the one made again before a late message ([`RECHECK_ELIGIBILITY`]). `s` is the send row,
/// `r` its reader; the arguments are the placeholders of the tenant and of the campaign's lists.
macro_rules! not_eligible {
    ($tenant:literal, $lists:literal) => {
        concat!(
            "CASE WHEN r.status <> 'active' THEN 'reader ' || r.status
                  WHEN NOT EXISTS (SELECT 1 FROM subscriptions x WHERE x.reader_id = s.reader_id
                                   AND (",
            $lists,
            "::uuid[] IS NULL OR x.list_id = ANY(",
            $lists,
            ")) AND x.status = 'confirmed') THEN 'unsubscribed'
                  WHEN EXISTS (SELECT 1 FROM suppressions x WHERE x.tenant_id = ",
            $tenant,
            "
                               AND x.email_lower = lower(r.email)) THEN 'suppressed'
             END"
        )
    };
}
/// The lists a reader must still be confirmed on to be mailed: the campaign's, or — when
/// segments bring readers in (`None`) — any of the workspace's.
/// An automation's step campaign has no lists of its own: its readers were let in by their
/// trigger, and must still be confirmed on one of the workspace's lists (the scheduler checks
/// the trigger's own list before it queues the row).
fn consent_lists(c: &Campaign) -> Option<&[crate::domain::ListId]> {
    if c.segment_ids.is_empty() && c.automation_id.is_none() { Some(&c.list_ids) } else { None }
}

/// How old a claim's checks of its readers may be when a message's data goes out: older, they
/// are made again for that message, so nobody is mailed more than about this long (plus one
/// SMTP transaction) after their unsubscribe or suppression committed.
const RECHECK_ELIGIBILITY: Duration = Duration::from_secs(1);

/// What the frequency cap decided for a claim's readers (see `Sender::apply_cap`).
#[derive(Default)]
struct CapDecision {
    /// Readers whose marks moved to this campaign, with the marks they had.
    moved: std::collections::HashMap<i64, (Option<DateTime<Utc>>, Option<Uuid>)>,
    /// Readers held by another campaign's row that is not final yet.
    deferred: HashSet<i64>,
    /// Readers another campaign has mailed within the cap.
    skipped: HashSet<i64>,
}

/// A reader's frequency-cap marks, as a claim finds them under the reader's row lock.
#[derive(sqlx::FromRow)]
struct CapMark {
    reader: i64,
    at: Option<DateTime<Utc>>,
    campaign: Option<Uuid>,
    /// `at` is within the cap's window.
    within: bool,
    /// The status of the row of `campaign` for this reader, if it has one.
    other: Option<String>,
}

/// [`take_slot`], and for priority mail a few more tries a second apart: a campaign holding the
/// connection it needs gives it up after its current message.
async fn take_slot_soon(
    cx: &DeliveryContext,
    tenant: TenantId,
    campaign: &Campaign,
    identity: &SmtpIdentity,
) -> Result<Option<(Lease, i32)>> {
    const PRIORITY_TRIES: u32 = 10;
    for _ in 1..PRIORITY_TRIES {
        match take_slot(cx, tenant, campaign, identity).await? {
            None if campaign.automation_id.is_some() => tokio::time::sleep(Duration::from_secs(1)).await,
            taken => return Ok(taken),
        }
    }
    take_slot(cx, tenant, campaign, identity).await
}

/// Takes the first free delivery slot of the campaign (its lease and number), or `None` when
/// all are held, or every connection of the identity is in use (by this campaign or others).
/// An automation step's mail is priority mail: when it finds every connection taken, it says so,
/// and a campaign's loop above its share gives one up (`Sender::above_bulk_share`).
async fn take_slot(
    cx: &DeliveryContext,
    tenant: TenantId,
    campaign: &Campaign,
    identity: &SmtpIdentity,
) -> Result<Option<(Lease, i32)>> {
    let connections = identity.max_connections.max(1);
    let priority = campaign.automation_id.is_some();
    for slot in 0..connections as i32 {
        let owner = crate::sending::lease::owner(&cx.config.worker_id, &format!("deliver:{}:{slot}", campaign.id));
        let what = LeaseFor::Delivery {
            tenant,
            campaign: campaign.id,
            slot,
            identity: &identity.bucket,
            connections,
            priority,
        };
        if let Some(lease) = Lease::acquire(&cx.db, what, &owner, cx.config.lease).await? {
            // A campaign does not start on a connection it would give up at once.
            let share = rate::bulk_connections(connections) as i32;
            if !priority
                && lease.identity_slot.is_some_and(|s| s >= share)
                && rate::connections_wanted(&cx.db, &identity.bucket).await?
            {
                lease.end().await;
                return Ok(None);
            }
            return Ok(Some((lease, slot)));
        }
    }
    if priority {
        rate::note_connection_demand(&cx.db, &identity.bucket).await?;
    }
    Ok(None)
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

    /// The fence closed with `unsent` rows of the batch still ours (none of them is past the end
    /// of its data). Records what is known, gives the rest back, and ends the loop.
    async fn on_fence_closed(&mut self, why: Closed, unsent: &[Claimed]) -> Result<()> {
        // Both writes are conditional on the token: harmless if the lease is gone.
        self.flush(&[]).await?;
        self.release(unsent).await?;
        match why {
            Closed::Stopped => Ok(()),
            Closed::LeaseLost => Err(Error::Unexpected(anyhow::anyhow!(
                "the delivery lease could not be renewed; stopped before the end of any message's data"
            ))),
        }
    }

    /// Takes tokens from the identity's bucket (an automation's as priority mail, a campaign's
    /// within its share while priority mail has work) and, for a spread campaign, from its own.
    /// Returns the wait and whether priority mail waits for one of the identity's connections.
    async fn reserve_tokens(&self, n: u32) -> Result<(Duration, bool)> {
        let db = &self.cx.db;
        let (bucket, identity_rate, burst) =
            (&self.identity.bucket, self.identity.rate_per_second, self.identity.burst);
        let (mut wait, connections_wanted) = if self.campaign.automation_id.is_some() {
            (rate::reserve_priority(db, bucket, n, identity_rate, burst).await?, false)
        } else {
            let r = rate::reserve_bulk(db, bucket, n, identity_rate, burst).await?;
            (r.wait, r.connections_wanted)
        };
        if let (Some(hours), true) = (self.campaign.spread_hours, self.campaign.fanout_done) {
            let per_second = (self.campaign.recipients.max(1) as f64) / (hours * 3600.0);
            let key = format!("campaign:{}", self.campaign.id);
            wait = wait.max(rate::reserve(db, &key, n, per_second, 1).await?);
        }
        Ok((wait, connections_wanted))
    }

    /// This campaign loop holds an identity connection above the campaigns' share (the slots
    /// priority mail takes first): while priority mail has work, it gives it up.
    fn above_bulk_share(&self) -> bool {
        let share = rate::bulk_connections(self.identity.max_connections.max(1)) as i32;
        self.lease.identity_slot.is_some_and(|slot| slot >= share)
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

    /// The spread campaign's pace, once its fan-out has counted the recipients.
    async fn spread_rate(&mut self, hours: f64) -> Result<SpreadRate> {
        if !self.campaign.fanout_done {
            let fresh = store::get(&self.cx.db, self.tenant, self.campaign.id).await?;
            if fresh.status != CampaignStatus::Sending {
                return Ok(SpreadRate::NotSending);
            }
            self.campaign = fresh;
            if !self.campaign.fanout_done {
                return Ok(SpreadRate::FanoutRunning);
            }
        }
        Ok(SpreadRate::PerSecond(self.campaign.recipients.max(1) as f64 / (hours * 3600.0)))
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

    async fn claim(&mut self, n: i64) -> Result<Vec<Claimed>> {
        let token = self.lease.token;
        let (tenant, campaign) = (self.tenant, self.campaign.id);
        // The queue age counts from the row's first claim (`first_claimed_at`, set by `claim_messages` in `engine/sql/sending.sql`): waiting its turn
        // behind the rate, a spread or a pause costs none; only failing to get through does.
        let max_age_secs = self.max_queue_age_hours as f64 * 3600.0;
        let mut tx = self.cx.db.tenant_tx(tenant).await?;
        self.claimed_at = Instant::now();
        let mut rows: Vec<Claimed> = sqlx::query_as(concat!(
            "WITH lease AS (
                 SELECT token FROM leases WHERE token = $7 AND expires_at > clock_timestamp() FOR KEY SHARE
             ), picked AS (
                 SELECT s.id FROM sends s
                 WHERE s.campaign_id = $2 AND s.status = 'queued' AND s.next_attempt_at <= now() AND s.id > $6
                   AND EXISTS (SELECT 1 FROM campaigns c WHERE c.tenant_id = $1 AND c.id = $2 AND c.status = 'sending')
                   AND EXISTS (SELECT 1 FROM lease)
                 ORDER BY s.id LIMIT $3
                 FOR UPDATE SKIP LOCKED
             )
             SELECT s.id, s.reader_id, s.email, r.name, r.attributes, s.attempts, s.feed, s.variant, s.entry,
                    CASE WHEN s.first_claimed_at < now() - make_interval(secs => $5) THEN 'expired'
                         ELSE ",
            not_eligible!("$1", "$4"),
            "
                    END AS skip
             FROM picked JOIN sends s ON s.id = picked.id JOIN readers r ON r.id = s.reader_id
             ORDER BY s.id"
        ))
        .bind(tenant)
        .bind(campaign)
        .bind(n)
        .bind(consent_lists(&self.campaign))
        .bind(max_age_secs)
        .bind(self.cursor)
        .bind(token)
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(rows);
        }
        // The frequency cap, read at every claim (the author may change it mid-send), applied
        // atomically: row locks on readers serialise two campaigns claiming the same reader.
        // With no cap the readers are not touched at all: rewriting every reader row per
        // campaign (and their search indexes) would cost more than the send itself. The cap
        // therefore counts mail sent after it was switched on.
        self.frequency_cap_hours = sqlx::query_scalar("SELECT frequency_cap_hours FROM tenants WHERE id = $1")
            .bind(tenant)
            .fetch_one(&mut *tx)
            .await?;
        let candidates: Vec<i64> = rows.iter().filter(|r| r.skip.is_none()).map(|r| r.reader_id).collect();
        let cap = match self.frequency_cap_hours {
            Some(hours) if !candidates.is_empty() && !self.campaign.cap_exempt => {
                self.apply_cap(&mut tx, &candidates, hours).await?
            }
            _ => CapDecision::default(),
        };
        if !cap.deferred.is_empty() {
            // Another campaign holds these readers with a row that may still be sent or given
            // back: they wait for it (still queued, no attempt counted) instead of losing both.
            let ids: Vec<i64> = rows.iter().filter(|r| cap.deferred.contains(&r.reader_id)).map(|r| r.id).collect();
            sqlx::query(
                "UPDATE sends SET next_attempt_at = now() + make_interval(secs => $3),
                        reason = 'waiting for another campaign (frequency cap)', updated_at = now()
                 WHERE tenant_id = $1 AND id = ANY($2) AND status = 'queued'",
            )
            .bind(tenant)
            .bind(&ids)
            .bind(self.cx.config.retry_base.as_secs_f64())
            .execute(&mut *tx)
            .await?;
            rows.retain(|r| !cap.deferred.contains(&r.reader_id));
        }
        for row in rows.iter_mut() {
            if row.skip.is_none() && cap.skipped.contains(&row.reader_id) {
                row.skip = Some("frequency cap".into());
            }
        }
        let previous = cap.moved;
        let (skipped, claimed): (Vec<Claimed>, Vec<Claimed>) = rows.into_iter().partition(|r| r.skip.is_some());
        if !skipped.is_empty() {
            let ids: Vec<i64> = skipped.iter().map(|r| r.id).collect();
            let reasons: Vec<String> = skipped.iter().map(|r| r.skip.clone().unwrap_or_default()).collect();
            sqlx::query(
                "UPDATE sends s SET status = CASE WHEN x.reason = 'expired' THEN 'expired' ELSE 'skipped' END,
                        reason = x.reason, updated_at = now()
                 FROM unnest($2::bigint[], $3::text[]) AS x(id, reason) WHERE s.tenant_id = $1 AND s.id = x.id",
            )
            .bind(tenant)
            .bind(&ids)
            .bind(&reasons)
            .execute(&mut *tx)
            .await?;
        }
        if !claimed.is_empty() {
            let ids: Vec<i64> = claimed.iter().map(|r| r.id).collect();
            let prev_at: Vec<Option<DateTime<Utc>>> =
                claimed.iter().map(|r| previous.get(&r.reader_id).and_then(|p| p.0)).collect();
            let prev_campaign: Vec<Option<Uuid>> =
                claimed.iter().map(|r| previous.get(&r.reader_id).and_then(|p| p.1)).collect();
            let moved: Vec<bool> = claimed.iter().map(|r| previous.contains_key(&r.reader_id)).collect();
            // The first window of rows is armed by the claim itself (no row version of its own;
            // rows that end without SMTP are disarmed by the write that ends them).
            let window = self.cx.config.ack_batch.max(1);
            let arm: Vec<bool> = (0..ids.len()).map(|i| i < window).collect();
            // Claimed only under a lease that is live now: the statements above may have waited
            // (reader rows locked by an import, a saturated pool) past its end. The lease row is
            // held since the first statement (KEY SHARE), so the reaper cannot delete it between
            // this check and the commit; a lease that ran out meanwhile claims nothing.
            let claimed_now = sqlx::query(
                "UPDATE sends s SET status = 'sending', lease_token = $3, armed = x.arm, attempts = s.attempts + 1,
                        first_claimed_at = coalesce(s.first_claimed_at, now()),
                        cap_prev_at = CASE WHEN s.cap_moved THEN s.cap_prev_at ELSE x.prev_at END,
                        cap_prev_campaign = CASE WHEN s.cap_moved THEN s.cap_prev_campaign ELSE x.prev_campaign END,
                        cap_moved = s.cap_moved OR x.moved, updated_at = now()
                 FROM unnest($2::bigint[], $4::timestamptz[], $5::uuid[], $6::bool[], $7::bool[])
                      AS x(id, prev_at, prev_campaign, arm, moved)
                 WHERE s.tenant_id = $1 AND s.id = x.id
                   AND EXISTS (SELECT 1 FROM leases l WHERE l.token = $3 AND l.expires_at > clock_timestamp())",
            )
            .bind(tenant)
            .bind(&ids)
            .bind(token)
            .bind(&prev_at)
            .bind(&prev_campaign)
            .bind(&arm)
            .bind(&moved)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if claimed_now < ids.len() as u64 {
                // Nothing of this claim stands: the skips and the readers' cap marks roll back
                // with it, and the loop's renewal finds the lease gone.
                tx.rollback().await?;
                return Ok(Vec::new());
            }
            tx.commit().await?;
            self.armed.extend(ids.iter().take(window));
            return Ok(claimed);
        }
        tx.commit().await?;
        Ok(claimed)
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

    /// Why `row`'s reader may not be mailed now (unsubscribed, suppressed, blocklisted or
    /// erased since the claim), or `None`.
    async fn not_eligible_now(&self, row: &Claimed) -> Result<Option<String>> {
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let reason: Option<Option<String>> = sqlx::query_scalar(concat!(
            "SELECT ",
            not_eligible!("$1", "$3"),
            " FROM sends s JOIN readers r ON r.id = s.reader_id WHERE s.tenant_id = $1 AND s.id = $2"
        ))
        .bind(self.tenant)
        .bind(row.id)
        .bind(consent_lists(&self.campaign))
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(reason.unwrap_or_else(|| Some("reader erased".into())))
    }

    /// Records the pending 250s and arms `arm` (the next rows to be sent), in one statement
    /// conditional on the lease token, retried through connection failures until it lands.
    async fn flush(&mut self, arm: &[i64]) -> Result<()> {
        let arm: Vec<i64> = arm.iter().copied().filter(|id| !self.armed.contains(id)).collect();
        if self.acks.is_empty() && arm.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = self.acks.iter().map(|a| a.id).collect();
        let replies: Vec<&str> = self.acks.iter().map(|a| a.reply.as_str()).collect();
        let provider_ids: Vec<Option<&str>> = self.acks.iter().map(|a| a.provider_id.as_deref()).collect();
        let at: Vec<DateTime<Utc>> = self.acks.iter().map(|a| a.at).collect();
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        let (ids, replies, provider_ids, at, arm_ref) = (&ids, &replies, &provider_ids, &at, &arm);
        let outcomes: Vec<(i64, String)> = persist("record 250s", || async move {
            Ok(sqlx::query_as("SELECT id, outcome FROM record_sent($1, $2, $3, $4, $5, $6, $7)")
                .bind(tenant)
                .bind(token)
                .bind(ids)
                .bind(replies)
                .bind(provider_ids)
                .bind(at)
                .bind(arm_ref)
                .fetch_all(db.pool())
                .await?)
        })
        .await?;
        let (armed, recorded): (Vec<_>, Vec<_>) = outcomes.into_iter().partition(|(_, outcome)| outcome == "armed");
        let recorded: HashSet<i64> = recorded.into_iter().map(|(id, _)| id).collect();
        for ack in self.acks.drain(..) {
            if recorded.contains(&ack.id) {
                self.tally.sent(&ack.email);
            } else {
                // Another loop claimed the row after this lease was lost; its copy is counted.
                tracing::warn!(send = ack.id, "a 250 for a row this loop no longer owns (counted as ambiguous)");
            }
        }
        // Only the rows Postgres armed: one it did not arm was given back (and perhaps claimed
        // by another loop) while this loop's clock still trusted its lease; it is not sent.
        self.armed.extend(armed.into_iter().map(|(id, _)| id));
        Ok(())
    }

    async fn on_smtp_error(&mut self, row: &Claimed, e: SmtpError) -> Result<Next> {
        let cfg = self.cx.config.clone();
        let reason = truncate(&e.to_string(), 500);
        self.armed.remove(&row.id);
        // A hard bounce is the recipient's failure, not the server's: it counts toward the
        // bounce-rate guard, never toward the consecutive-failure guard.
        if e.kind != SmtpErrorKind::HardBounce {
            self.consecutive_failures += 1;
        }
        match e.kind {
            SmtpErrorKind::HardBounce => {
                self.bounces_since_check += 1;
                self.fail(row, &reason, true, false, false).await?
            }
            SmtpErrorKind::Permanent => self.fail(row, &reason, false, false, false).await?,
            SmtpErrorKind::Transient | SmtpErrorKind::Fenced if row.attempts >= cfg.max_attempts => {
                let why = format!("gave up after {} attempts: {reason}", row.attempts);
                self.fail(row, &why, false, e.maybe_delivered(), false).await?
            }
            SmtpErrorKind::Transient | SmtpErrorKind::Fenced => {
                self.retry_later(row, &reason, e.maybe_delivered()).await?
            }
        }
        if self.consecutive_failures >= cfg.pause_after_failures {
            let why = format!(
                "Paused after {} failed messages in a row. The last error: {reason}",
                self.consecutive_failures
            );
            auto_pause(self.cx, self.tenant, self.campaign.id, &why).await?;
            return Ok(Next::Stop);
        }
        Ok(Next::Continue)
    }

    /// Puts a row back in the queue with exponential backoff and jitter, or fails it once it used
    /// up its attempts. `maybe_delivered`: the data was complete and no reply came.
    async fn retry_later(&mut self, row: &Claimed, reason: &str, maybe_delivered: bool) -> Result<()> {
        let cfg = self.cx.config.clone();
        if row.attempts >= cfg.max_attempts {
            let why = format!("gave up after {} attempts: {reason}", row.attempts);
            return self.fail(row, &why, false, maybe_delivered, false).await;
        }
        let exp = cfg.retry_base.as_secs_f64() * 2f64.powi((row.attempts - 1).clamp(0, 20));
        let jitter = rand::thread_rng().gen_range(0.5..1.5);
        let delay = (exp * jitter).min(cfg.retry_max.as_secs_f64());
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        persist("requeue a message", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            sqlx::query(
                "UPDATE sends SET status = 'queued', next_attempt_at = now() + make_interval(secs => $3), reason = $4,
                        ambiguous = ambiguous + $5, armed = false, updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 AND lease_token = $6 AND status = 'sending'",
            )
            .bind(tenant)
            .bind(row.id)
            .bind(delay)
            .bind(reason)
            .bind(i32::from(maybe_delivered))
            .bind(token)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Ends a claimed row without sending it (an edition's reader with no data); the reader's
    /// frequency-cap marks go back to what they were.
    async fn skip_row(&self, row: &Claimed, reason: &str) -> Result<()> {
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        persist("skip a message", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            self.give_back_cap(&mut tx, &[row.id]).await?;
            sqlx::query(
                "UPDATE sends SET status = 'skipped', reason = $3, armed = false, updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 AND lease_token = $4 AND status = 'sending'",
            )
            .bind(tenant)
            .bind(row.id)
            .bind(reason)
            .bind(token)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Readers of these rows (still this lease's, not sent) get back the frequency-cap marks
    /// they had before this campaign first claimed them, unless another campaign has moved
    /// them since. Whatever the cap is now: a row claimed under a cap gives back what it took.
    async fn give_back_cap(&self, tx: &mut crate::infra::db::Tx, ids: &[i64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "WITH back AS (
                 UPDATE sends s SET cap_moved = false
                 WHERE s.tenant_id = $1 AND s.id = ANY($2) AND s.lease_token = $3 AND s.status = 'sending' AND s.cap_moved
                 RETURNING s.reader_id, s.cap_prev_at, s.cap_prev_campaign
             )
             UPDATE readers r SET last_campaign_at = b.cap_prev_at, last_campaign_id = b.cap_prev_campaign
             FROM back b WHERE r.tenant_id = $1 AND r.id = b.reader_id AND r.last_campaign_id = $4",
        )
        .bind(self.tenant)
        .bind(ids)
        .bind(self.lease.token)
        .bind(self.campaign.id)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Decides, under the readers' row locks, which candidates this claim may mail (their marks
    /// move to this campaign), which must wait and which are skipped for good. A reader mailed
    /// by another campaign within `hours` is skipped only once that campaign's row for them is
    /// `sent` (or gone); while it may still be sent or given back, the reader waits. A row of
    /// the other campaign that ended unsent no longer holds the reader.
    async fn apply_cap(&self, tx: &mut crate::infra::db::Tx, readers: &[i64], hours: i32) -> Result<CapDecision> {
        let marks: Vec<CapMark> = sqlx::query_as(
            "SELECT r.id AS reader, r.last_campaign_at AS at, r.last_campaign_id AS campaign,
                    coalesce(r.last_campaign_at > now() - make_interval(hours => $3::int), false) AS within,
                    (SELECT x.status FROM sends x WHERE x.reader_id = r.id AND x.campaign_id = r.last_campaign_id
                     ORDER BY x.entry DESC LIMIT 1) AS other
             FROM readers r WHERE r.tenant_id = $1 AND r.id = ANY($2) ORDER BY r.id FOR NO KEY UPDATE OF r",
        )
        .bind(self.tenant)
        .bind(readers)
        .bind(hours)
        .fetch_all(&mut **tx)
        .await?;
        let mut decision = CapDecision::default();
        let mut moving = Vec::new();
        for CapMark { reader, at, campaign: last, within, other } in marks {
            let held_by_other = at.is_some() && last != Some(self.campaign.id.0) && within;
            match (held_by_other, other.as_deref()) {
                (false, _) | (true, Some("failed" | "skipped" | "cancelled" | "expired")) => {
                    if last != Some(self.campaign.id.0) {
                        decision.moved.insert(reader, (at, last));
                        moving.push(reader);
                    }
                }
                (true, Some("queued" | "sending")) => {
                    decision.deferred.insert(reader);
                }
                (true, _) => {
                    decision.skipped.insert(reader);
                }
            }
        }
        if !moving.is_empty() {
            sqlx::query(
                "UPDATE readers SET last_campaign_at = now(), last_campaign_id = $3 WHERE tenant_id = $1 AND id = ANY($2)",
            )
            .bind(self.tenant)
            .bind(&moving)
            .bind(self.campaign.id)
            .execute(&mut **tx)
            .await?;
        }
        Ok(decision)
    }

    /// For an edition fed from a URL: fetches the claimed readers' data, a few at a time. A row
    /// without data gets `skip = NO_DATA`; a failed fetch gets the reason to retry later.
    async fn fetch_feeds(&self, rows: &mut [Claimed]) {
        let Some(client) = &self.feed_client else { return };
        let requests: Vec<(i64, String)> = rows
            .iter()
            .filter(|r| r.feed.is_none())
            .map(|r| (r.id, super::feed_fetch::url_for(&self.campaign.feed_url, &r.email, r.reader_id)))
            .collect();
        if requests.is_empty() {
            return;
        }
        let mut fetched = super::feed_fetch::fetch_all(client, &self.cx.config.egress, requests).await;
        for row in rows.iter_mut() {
            match fetched.remove(&row.id) {
                Some(super::feed_fetch::Fetched::Data(v)) => row.feed = Some(v),
                Some(super::feed_fetch::Fetched::NoData) => row.skip = Some(NO_DATA.into()),
                Some(super::feed_fetch::Fetched::Failed(why)) => row.skip = Some(why),
                None => {}
            }
        }
    }

    /// Marks a row failed; a hard bounce also suppresses the address in this workspace and is
    /// recorded as a bounce event (the same path a provider's bounce webhook takes).
    /// `maybe_delivered`: the last attempt's data was complete and no reply came (ambiguous).
    /// `unsent`: it failed before SMTP, so the reader's frequency-cap marks go back.
    async fn fail(
        &mut self,
        row: &Claimed,
        reason: &str,
        hard_bounce: bool,
        maybe_delivered: bool,
        unsent: bool,
    ) -> Result<()> {
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        let source = format!("campaign “{}”", self.campaign.name);
        let source = &source;
        let this = &*self;
        let changed = persist("fail a message", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            if unsent {
                this.give_back_cap(&mut tx, &[row.id]).await?;
            }
            let changed = sqlx::query(
                "UPDATE sends SET status = 'failed', reason = $3, hard_bounce = $4, ambiguous = ambiguous + $5,
                        armed = false, updated_at = now()
                 WHERE tenant_id = $1 AND id = $2 AND lease_token = $6 AND status IN ('sending', 'queued')",
            )
            .bind(tenant)
            .bind(row.id)
            .bind(reason)
            .bind(hard_bounce)
            .bind(i32::from(maybe_delivered))
            .bind(token)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if hard_bounce {
                crate::audience::suppressions::add_in(
                    &mut tx,
                    tenant,
                    &row.email,
                    crate::audience::suppressions::SuppressionReason::HardBounce,
                    source,
                )
                .await?;
                if changed > 0 {
                    crate::events::record_sync_bounce(&mut tx, tenant, this.campaign.id, row.reader_id, reason).await?;
                }
            }
            tx.commit().await?;
            Ok(changed)
        })
        .await?;
        if changed > 0 {
            self.tally.failed(&row.email, hard_bounce);
        }
        Ok(())
    }

    /// Gives rows back to the queue untouched (no attempt counted, frequency-cap marks back).
    async fn release(&mut self, rows: &[Claimed]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        for id in &ids {
            self.armed.remove(id);
        }
        let (db, tenant, token) = (&self.cx.db, self.tenant, self.lease.token);
        let this = &*self;
        let ids = &ids;
        persist("release messages", || async move {
            let mut tx = db.tenant_tx(tenant).await?;
            this.give_back_cap(&mut tx, ids).await?;
            sqlx::query(
                "UPDATE sends SET status = 'queued', attempts = greatest(attempts - 1, 0), armed = false,
                        first_claimed_at = CASE WHEN attempts <= 1 THEN NULL ELSE first_claimed_at END, updated_at = now()
                 WHERE tenant_id = $1 AND id = ANY($2) AND lease_token = $3 AND status = 'sending'",
            )
            .bind(tenant)
            .bind(ids)
            .bind(token)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Pauses the campaign when hard bounces pass 5 % of outcomes (after a minimum sample).
    /// Returns true when it paused.
    async fn check_health(&mut self) -> Result<bool> {
        let over = |outcomes: i64, bounces: i64| {
            outcomes >= MIN_SAMPLE && (bounces as f64) / (outcomes as f64) > MAX_HARD_BOUNCE_RATE
        };
        // First the campaign's counters: one row, where counting the send log walked every row
        // of the campaign every 5 s in every loop once a single address had bounced. Bounces are
        // counted there at once and sends every few seconds (each loop's tally), so the lag can
        // only overstate the rate: below the limit there, below it in fact.
        self.tally.flush(&self.cx.db, self.tenant, self.campaign.id).await?;
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let counters: Option<(i64, i64)> = sqlx::query_as(
            "SELECT sent + failed, hard_bounces FROM campaign_stats WHERE tenant_id = $1 AND campaign_id = $2",
        )
        .bind(self.tenant)
        .bind(self.campaign.id)
        .fetch_optional(&mut *tx)
        .await?;
        if !counters.is_some_and(|(outcomes, bounces)| over(outcomes, bounces)) {
            tx.commit().await?;
            return Ok(false);
        }
        // Over the limit by the counters: confirm on the send log before pausing anyone's send.
        let (outcomes, bounces): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE status IN ('sent', 'failed')), count(*) FILTER (WHERE hard_bounce)
             FROM sends WHERE tenant_id = $1 AND campaign_id = $2",
        )
        .bind(self.tenant)
        .bind(self.campaign.id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        if over(outcomes, bounces) {
            let why = format!(
                "Paused: {bounces} of {outcomes} messages hard-bounced ({:.1} %, the limit is {:.0} %). Check the list's quality before resuming.",
                100.0 * bounces as f64 / outcomes as f64,
                100.0 * MAX_HARD_BOUNCE_RATE
            );
            auto_pause(self.cx, self.tenant, self.campaign.id, &why).await?;
            return Ok(true);
        }
        Ok(false)
    }
}

impl Sender<'_> {
    /// Pauses the campaign when provider-reported complaints pass Gmail's 0.3 %. One row read.
    async fn check_complaints(&self) -> Result<bool> {
        let mut tx = self.cx.db.tenant_tx(self.tenant).await?;
        let row: Option<(i64, i64)> =
            sqlx::query_as("SELECT complaints, sent FROM campaign_stats WHERE tenant_id = $1 AND campaign_id = $2")
                .bind(self.tenant)
                .bind(self.campaign.id)
                .fetch_optional(&mut *tx)
                .await?;
        tx.commit().await?;
        let Some((complaints, sent)) = row else { return Ok(false) };
        if sent >= MIN_COMPLAINT_SAMPLE && (complaints as f64) / (sent as f64) > MAX_COMPLAINT_RATE {
            let why = format!(
                "Paused: {complaints} spam complaints for {sent} messages ({:.2} %, Gmail's limit is 0.3 %). Check how these readers subscribed before resuming.",
                100.0 * complaints as f64 / sent as f64
            );
            auto_pause(self.cx, self.tenant, self.campaign.id, &why).await?;
            return Ok(true);
        }
        Ok(false)
    }
}

async fn auto_pause(cx: &DeliveryContext, tenant: TenantId, campaign: CampaignId, reason: &str) -> Result<()> {
    tracing::warn!(%campaign, reason, "campaign paused itself");
    if super::lifecycle::pause_automation_of(&cx.db, tenant, campaign, reason).await? {
        return Ok(());
    }
    match super::lifecycle::pause(&cx.db, tenant, crate::domain::Role::Owner, campaign, reason).await {
        Ok(_) | Err(Error::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
