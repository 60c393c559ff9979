//! The send engine against real Postgres and the project's SMTP sink: every eligible reader
//! exactly once, whatever fails. Each test drives fan-out and delivery itself (the app's own
//! workers are off) so it can crash workers at chosen points, then asserts on what the sink
//! received: one distinct Message-ID per eligible reader, nobody else.

use herald_devtools::smtp_sink::{FaultAction, FaultRule, Faults, MailSink, RandomFault};
use herald_engine::CampaignId;
use herald_engine::campaigns::delivery::{self, DeliveryConfig, DeliveryContext, FaultHook, FaultPoint};
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::store::{self, CampaignInput};
use herald_engine::campaigns::{fanout, progress};
use herald_engine::sending::identities::SmtpIdentity;
use herald_engine::sending::smtp::SmtpServer;
use herald_engine::{Error, Role, TenantId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use uuid::Uuid;

use crate::helpers::{TestApp, TestResult, spawn_app_with};

/// A workspace with one list of `n` confirmed readers, a sink, and delivery contexts.
pub struct SendHarness {
    pub app: TestApp,
    pub tenant: TenantId,
    pub list: Uuid,
    pub sink: MailSink,
    pub smtp: String,
}

impl SendHarness {
    pub async fn new(readers: usize) -> anyhow::Result<Self> {
        let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
        let (sink, addr) = MailSink::start("127.0.0.1:0").await?;
        let tenant = TenantId::new();
        sqlx::query(
            "INSERT INTO tenants (id, name, slug, postal_address, default_from_name, default_from_email)
             VALUES ($1, 'Sender Co', $2, '1 Main St, Lyon', 'Sender Co', 'news@sender.test')",
        )
        .bind(tenant)
        .bind(format!("sender-{}", &Uuid::new_v4().simple().to_string()[..8]))
        .execute(&app.owner)
        .await?;
        app.verify_domain(&tenant.to_string(), "sender.test").await;
        let h = Self { app, tenant, list: Uuid::nil(), sink, smtp: format!("smtp://{addr}") };
        let list = h.add_list("News", readers, "reader").await?;
        Ok(Self { list, ..h })
    }

    /// A list with `n` confirmed readers `{prefix}{i}@example.com`.
    pub async fn add_list(&self, name: &str, n: usize, prefix: &str) -> anyhow::Result<Uuid> {
        let list = Uuid::new_v4();
        sqlx::query("INSERT INTO lists (id, tenant_id, name, slug, opt_in) VALUES ($1, $2, $3, $4, 'single')")
            .bind(list)
            .bind(self.tenant)
            .bind(name)
            .bind(format!("{}-{}", name.to_lowercase(), &list.simple().to_string()[..6]))
            .execute(&self.app.owner)
            .await?;
        self.add_list_into(list, n, prefix).await?;
        Ok(list)
    }

    /// `n` more confirmed readers `{prefix}{i}@example.com` on an existing list.
    pub async fn add_list_into(&self, list: Uuid, n: usize, prefix: &str) -> anyhow::Result<()> {
        sqlx::query(
            "WITH r AS (
                 INSERT INTO readers (tenant_id, email, name)
                 SELECT $1, $3 || g || '@example.com', 'Reader ' || g FROM generate_series(1, $4) g
                 ON CONFLICT (tenant_id, lower(email)) DO UPDATE SET name = excluded.name
                 RETURNING id
             )
             INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
             SELECT $1, $2, id, 'confirmed', now() FROM r",
        )
        .bind(self.tenant)
        .bind(list)
        .bind(prefix)
        .bind(n as i32)
        .execute(&self.app.owner)
        .await?;
        Ok(())
    }

    /// The workspace's frequency cap: at most one campaign per reader in `hours`.
    pub async fn frequency_cap_hours(&self, hours: i32) -> anyhow::Result<()> {
        sqlx::query("UPDATE tenants SET frequency_cap_hours = $2 WHERE id = $1")
            .bind(self.tenant)
            .bind(hours)
            .execute(&self.app.owner)
            .await?;
        Ok(())
    }

    pub fn identity(&self, rate: f64, burst: u32) -> anyhow::Result<SmtpIdentity> {
        Ok(SmtpIdentity {
            bucket: format!("identity:test:{}", Uuid::new_v4()),
            server: SmtpServer::parse(&self.smtp)?,
            max_connections: 4,
            rate_per_second: rate,
            burst,
            dkim: None,
        })
    }

    /// A delivery context for one "process": its own worker id, fast retries, short lease.
    pub fn worker(&self, identity: &SmtpIdentity, faults: Option<FaultHook>) -> DeliveryContext {
        // An https public URL, as in production: RFC 8058's one-click header needs one.
        let mut config = DeliveryConfig::new(
            format!("test-worker-{}", Uuid::new_v4().simple()),
            "https://news.herald.test".into(),
            identity.clone(),
        );
        config.lease = Duration::from_secs(2);
        config.smtp_timeout = Duration::from_millis(500);
        config.retry_base = Duration::from_millis(50);
        config.retry_max = Duration::from_millis(400);
        config.batch_size = 20;
        config.max_attempts = 30;
        config.faults = faults;
        DeliveryContext { db: self.app.app.db.clone(), signer: self.app.app.signer.clone(), config: Arc::new(config) }
    }

    pub async fn campaign(&self, name: &str, lists: Vec<Uuid>) -> anyhow::Result<CampaignId> {
        let input = CampaignInput {
            name: name.into(),
            subject: format!("{name} for {{{{ reader.name }}}}"),
            from_email: "news@sender.test".into(),
            from_name: "Sender Co".into(),
            list_ids: lists.into_iter().map(Into::into).collect(),
            body: "Hello {{ reader.name }}!\n\n[Unsubscribe]({{ unsubscribe_url }})".into(),
            ..Default::default()
        };
        Ok(store::create(&self.app.app.db, self.tenant, Role::Owner, &input).await?.id)
    }

    /// Starts the campaign (the CAS) and writes its send log.
    pub async fn start(&self, campaign: CampaignId) -> anyhow::Result<()> {
        lifecycle::send_now(&self.app.app.db, &self.app.app.jobs, self.tenant, Role::Owner, campaign).await?;
        fanout::run(&self.app.app.db, self.tenant, campaign).await?;
        Ok(())
    }

    /// Runs `n` delivery loops at once until they all end.
    /// One delivery loop in the background, as a worker's job runs it.
    pub fn spawn_deliver(
        &self,
        cx: &DeliveryContext,
        campaign: CampaignId,
    ) -> tokio::task::JoinHandle<Result<(), Error>> {
        let (cx, tenant) = (cx.clone(), self.tenant);
        tokio::spawn(async move { delivery::deliver(&cx, tenant, campaign).await })
    }

    pub async fn deliver(&self, cx: &DeliveryContext, campaign: CampaignId, n: usize) -> Vec<Result<(), Error>> {
        let runs = (0..n).map(|_| delivery::deliver(cx, self.tenant, campaign));
        futures::future::join_all(runs).await
    }

    /// Requeues expired leases, as every process's supervisor does each second.
    pub async fn reap(&self) -> anyhow::Result<i64> {
        tokio::time::sleep(Duration::from_millis(2100)).await;
        Ok(sqlx::query_scalar("SELECT reap_expired_leases()").fetch_one(&self.app.owner).await?)
    }

    pub async fn status(&self, campaign: CampaignId) -> anyhow::Result<progress::Progress> {
        Ok(progress::progress(&self.app.app.db, self.tenant, campaign).await?)
    }

    /// Recipient → distinct Message-IDs received, and the total number of copies.
    pub async fn received(&self) -> (BTreeMap<String, BTreeSet<String>>, usize) {
        let deliveries = self.sink.deliveries().await;
        let mut by_rcpt: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for d in &deliveries {
            by_rcpt.entry(d.rcpt_to.clone()).or_default().insert(d.message_id.clone().unwrap_or_default());
        }
        (by_rcpt, deliveries.len())
    }

    /// Asserts every address in `expected` got exactly one distinct message and nobody else
    /// got anything. Returns the number of duplicate copies (same Message-ID) seen.
    pub async fn assert_exactly_once(&self, expected: &BTreeSet<String>) -> usize {
        let (by_rcpt, copies) = self.received().await;
        let got: BTreeSet<String> = by_rcpt.keys().cloned().collect();
        let missing: Vec<_> = expected.difference(&got).collect();
        let extra: Vec<_> = got.difference(expected).collect();
        assert!(
            missing.is_empty(),
            "{} readers got nothing, e.g. {:?}",
            missing.len(),
            missing.iter().take(5).collect::<Vec<_>>()
        );
        assert!(
            extra.is_empty(),
            "{} addresses got mail they should not have, e.g. {:?}",
            extra.len(),
            extra.iter().take(5).collect::<Vec<_>>()
        );
        for (rcpt, ids) in &by_rcpt {
            assert_eq!(ids.len(), 1, "{rcpt} received {} different messages: {ids:?}", ids.len());
        }
        copies - by_rcpt.len()
    }
}

pub fn addresses(prefix: &str, range: std::ops::RangeInclusive<usize>) -> BTreeSet<String> {
    range.map(|i| format!("{prefix}{i}@example.com")).collect()
}

#[tokio::test]
async fn concurrent_workers_and_duplicate_jobs_send_each_reader_once() -> TestResult {
    let h = SendHarness::new(300).await?;
    let campaign = h.campaign("Weekly", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    // Two "processes", each running the same delivery job three times over (apalis delivering
    // a job twice, or a supervisor re-enqueueing it).
    let (a, b) = (h.worker(&identity, None), h.worker(&identity, None));
    let (ra, rb) = tokio::join!(h.deliver(&a, campaign, 3), h.deliver(&b, campaign, 3));
    for r in ra.into_iter().chain(rb) {
        r?;
    }
    let duplicates = h.assert_exactly_once(&addresses("reader", 1..=300)).await;
    assert_eq!(duplicates, 0);
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent, p.queued, p.sending), ("sent", 300, 0, 0));
    // The message carries the deterministic id and the one-click headers.
    let m = h.sink.wait_for_recipient("reader7@example.com", Duration::from_secs(1)).await;
    let parsed = m.ok_or_else(|| anyhow::anyhow!("no mail"))?.parse();
    let header = |name: &str| parsed.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    let reader_id: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE email = 'reader7@example.com'")
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!(header("Message-ID").unwrap_or_default(), format!("<{campaign}.{reader_id}@sender.test>"));
    assert_eq!(header("List-Unsubscribe-Post").as_deref(), Some("List-Unsubscribe=One-Click"));
    assert!(header("List-Unsubscribe").unwrap_or_default().contains("/u/"));
    assert!(header("List-Id").is_some() && header("Feedback-ID").is_some());
    assert_eq!(parsed.subject, "Weekly for Reader 7");
    Ok(())
}

/// A worker that dies at `point` (once) loses nothing: its leased rows come back after the
/// lease and another worker finishes them. The crashing worker records its 250s `ack_batch` at
/// a time. Returns the extra copies the sink got and Herald's ambiguous count.
async fn crash_once_at(point: FaultPoint, ack_batch: usize) -> anyhow::Result<(usize, i64)> {
    let h = SendHarness::new(60).await?;
    let campaign = h.campaign("Crashy", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    // Crash once, after some mail went out: on the 25th message, or on the second claim.
    let trigger = if point == FaultPoint::AfterClaim { 1 } else { 24 };
    let seen = Arc::new(AtomicUsize::new(0));
    let hook: FaultHook = Arc::new(move |p, _send| p == point && seen.fetch_add(1, Ordering::SeqCst) == trigger);
    let mut crashing = h.worker(&identity, Some(hook));
    Arc::make_mut(&mut crashing.config).ack_batch = ack_batch;
    let results = h.deliver(&crashing, campaign, 1).await;
    assert!(results.iter().any(|r| r.is_err()), "the fault hook fired");
    assert_ne!(h.status(campaign).await?.status.as_str(), "sent");
    let reaped = h.reap().await?;
    assert!(reaped > 0, "the crashed worker's rows were leased and come back");
    let healthy = h.worker(&identity, None);
    for r in h.deliver(&healthy, campaign, 2).await {
        r?;
    }
    let duplicates = h.assert_exactly_once(&addresses("reader", 1..=60)).await;
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent), ("sent", 60));
    Ok((duplicates, p.ambiguous))
}

#[tokio::test]
async fn a_crash_after_the_claim_loses_nothing_and_counts_at_most_the_armed_window() -> TestResult {
    // The claim armed its first window (16 rows); nothing was sent. They are counted as "may
    // have been delivered" (an upper bound), the rest of the batch goes back silently.
    let (duplicates, ambiguous) = crash_once_at(FaultPoint::AfterClaim, 16).await?;
    assert_eq!(duplicates, 0);
    assert!(ambiguous <= 16, "{ambiguous}");
    let (duplicates, ambiguous) = crash_once_at(FaultPoint::AfterClaim, 1).await?;
    assert_eq!((duplicates, ambiguous), (0, 1));
    Ok(())
}

#[tokio::test]
async fn a_crash_before_smtp_loses_nothing_and_sends_nothing_twice() -> TestResult {
    // With every 250 recorded before the next message, nothing is re-sent; the one armed row
    // (the message about to go out) is the only one counted, as "may have been delivered".
    let (duplicates, ambiguous) = crash_once_at(FaultPoint::BeforeSmtp, 1).await?;
    assert_eq!((duplicates, ambiguous), (0, 1));
    Ok(())
}

#[tokio::test]
async fn a_crash_after_250_resends_only_that_message_with_the_same_message_id() -> TestResult {
    let (duplicates, ambiguous) = crash_once_at(FaultPoint::After250, 1).await?;
    // Exactly the one message whose 250 was not recorded went out twice, under one Message-ID
    // (assert_exactly_once checked the ids), and the report counts exactly it.
    assert_eq!((duplicates, ambiguous), (1, 1));
    Ok(())
}

#[tokio::test]
async fn a_crash_with_batched_acks_resends_at_most_one_batch_and_counts_every_copy() -> TestResult {
    for point in [FaultPoint::BeforeSmtp, FaultPoint::After250] {
        let (duplicates, ambiguous) = crash_once_at(point, 16).await?;
        // The 250s not yet recorded (fewer than one batch) are re-sent, each counted; the
        // count may exceed the copies by the armed rows that never reached SMTP.
        assert!(duplicates <= 16, "{point:?}: {duplicates} copies re-sent");
        assert!(ambiguous as usize >= duplicates, "{point:?}: {duplicates} copies, {ambiguous} counted");
        assert!(ambiguous <= 16, "{point:?}: {ambiguous} counted");
    }
    Ok(())
}

#[tokio::test]
async fn ten_percent_smtp_faults_are_retried_until_everyone_has_one_copy() -> TestResult {
    let h = SendHarness::new(200).await?;
    h.sink.set_faults(Faults {
        random: vec![RandomFault { rate: 0.10, action: FaultAction::RejectRcpt("451 4.3.0 Try again later".into()) }],
        ..Default::default()
    });
    let campaign = h.campaign("Flaky", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let cx = h.worker(&identity, None);
    for r in h.deliver(&cx, campaign, 4).await {
        r?;
    }
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=200)).await, 0);
    let retried: i64 = sqlx::query_scalar("SELECT count(*) FROM sends WHERE campaign_id = $1 AND attempts > 1")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    assert!(retried > 0, "some messages needed a retry");
    Ok(())
}

#[tokio::test]
async fn dropped_connections_mid_data_are_retried_on_a_fresh_connection() -> TestResult {
    let h = SendHarness::new(80).await?;
    h.sink.set_faults(Faults {
        random: vec![RandomFault { rate: 0.10, action: FaultAction::DropMidData }],
        ..Default::default()
    });
    let campaign = h.campaign("Drops", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 2).await {
        r?;
    }
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=80)).await, 0);
    Ok(())
}

#[tokio::test]
async fn hard_bounces_fail_and_suppress_permanent_errors_fail() -> TestResult {
    let h = SendHarness::new(0).await?;
    let list = h.add_list("Mixed", 10, "ok").await?;
    h.add_list("Bouncy", 1, "bounce").await?;
    h.add_list("Rejecty", 1, "reject").await?;
    // Put the bouncy readers on the target list too.
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status) SELECT tenant_id, $1, id, 'confirmed'
         FROM readers WHERE email LIKE 'bounce%' OR email LIKE 'reject%'",
    )
    .bind(list)
    .execute(&h.app.owner)
    .await?;
    h.sink.set_faults(Faults {
        rules: vec![
            FaultRule::new("bounce", FaultAction::RejectRcpt("550 5.1.1 User unknown".into())),
            FaultRule::new("reject", FaultAction::RejectData("554 5.7.1 Message rejected as spam".into())),
        ],
        ..Default::default()
    });
    let campaign = h.campaign("Bounces", vec![list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 1).await {
        r?;
    }
    assert_eq!(h.assert_exactly_once(&addresses("ok", 1..=10)).await, 0);
    let rows: Vec<(String, String, bool, Option<String>)> = sqlx::query_as(
        "SELECT email, status, hard_bounce, reason FROM sends WHERE campaign_id = $1 AND status <> 'sent' ORDER BY email",
    )
    .bind(campaign)
    .fetch_all(&h.app.owner)
    .await?;
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].0.as_str(), rows[0].1.as_str(), rows[0].2), ("bounce1@example.com", "failed", true));
    assert_eq!((rows[1].0.as_str(), rows[1].1.as_str(), rows[1].2), ("reject1@example.com", "failed", false));
    assert!(rows[1].3.as_deref().unwrap_or_default().contains("554"), "the reply is kept: {:?}", rows[1].3);
    let suppressed: Vec<(String, String)> =
        sqlx::query_as("SELECT email_lower, reason FROM suppressions WHERE tenant_id = $1")
            .bind(h.tenant)
            .fetch_all(&h.app.owner)
            .await?;
    assert_eq!(suppressed, vec![("bounce1@example.com".to_string(), "hard_bounce".to_string())]);
    assert_eq!(h.status(campaign).await?.status.as_str(), "sent");
    // The report names both failures, with their send status and the server's reply.
    let report = herald_engine::campaigns::progress::report(&h.app.app.db, h.tenant, campaign).await?;
    assert_eq!((report.progress.sent, report.progress.failed, report.progress.hard_bounces), (10, 2, 1));
    let failed: Vec<(&str, herald_engine::campaigns::progress::Failure)> =
        report.failures.iter().map(|f| (f.email.as_str(), f.clone())).collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed.iter().all(|(_, f)| f.status == herald_types::SendStatus::Failed), "{failed:?}");
    Ok(())
}

#[tokio::test]
async fn unsubscribes_and_suppressions_committed_mid_send_are_honoured() -> TestResult {
    let h = SendHarness::new(100).await?;
    let campaign = h.campaign("Leaving", vec![h.list]).await?;
    h.start(campaign).await?;
    // 20 messages a second, so the send takes ~5 s and the changes land mid-send.
    let identity = h.identity(20.0, 5)?;
    let cx = h.worker(&identity, None);
    let sending = tokio::spawn({
        let cx = cx.clone();
        let tenant = h.tenant;
        async move { delivery::deliver(&cx, tenant, campaign).await }
    });
    assert!(h.sink.wait_for_count(10, Duration::from_secs(10)).await);
    // reader99 unsubscribes from the list, reader100 is suppressed, reader98 leaves everything.
    sqlx::query(
        "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now()
         WHERE reader_id = (SELECT id FROM readers WHERE email = 'reader99@example.com')",
    )
    .execute(&h.app.owner)
    .await?;
    sqlx::query(
        "INSERT INTO suppressions (tenant_id, email_lower, reason) VALUES ($1, 'reader100@example.com', 'manual')",
    )
    .bind(h.tenant)
    .execute(&h.app.owner)
    .await?;
    sqlx::query("UPDATE readers SET status = 'unsubscribed' WHERE email = 'reader98@example.com'")
        .execute(&h.app.owner)
        .await?;
    let delivered_before = h.sink.accepted_count();
    assert!(delivered_before < 90, "the changes landed mid-send ({delivered_before} already sent)");
    sending.await??;
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=97)).await, 0);
    let p = h.status(campaign).await?;
    assert_eq!((p.sent, p.skipped), (97, 3));
    Ok(())
}

#[tokio::test]
async fn the_frequency_cap_lets_one_of_two_campaigns_reach_a_reader() -> TestResult {
    let h = SendHarness::new(40).await?;
    h.frequency_cap_hours(24).await?;
    let identity = h.identity(100_000.0, 1000)?;
    // Two campaigns fanned out before either sends: the cap is enforced at the claim.
    let first = h.campaign("First", vec![h.list]).await?;
    let second = h.campaign("Second", vec![h.list]).await?;
    h.start(first).await?;
    h.start(second).await?;
    let (a, b) = (h.worker(&identity, None), h.worker(&identity, None));
    let (ra, rb) = tokio::join!(h.deliver(&a, first, 2), h.deliver(&b, second, 2));
    for r in ra.into_iter().chain(rb) {
        r?;
    }
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=40)).await, 0);
    let (p1, p2) = (h.status(first).await?, h.status(second).await?);
    assert_eq!(p1.sent + p2.sent, 40);
    assert_eq!(p1.skipped + p2.skipped, 40);
    // A third campaign, fanned out after: skipped at fan-out, nothing queued.
    let third = h.campaign("Third", vec![h.list]).await?;
    h.start(third).await?;
    let p3 = h.status(third).await?;
    assert_eq!((p3.queued, p3.skipped), (0, 40));
    Ok(())
}

#[tokio::test]
async fn messages_queued_past_the_max_age_expire_instead_of_sending() -> TestResult {
    let h = SendHarness::new(30).await?;
    sqlx::query("UPDATE tenants SET max_queue_age_hours = 1 WHERE id = $1")
        .bind(h.tenant)
        .execute(&h.app.owner)
        .await?;
    let campaign = h.campaign("Stale", vec![h.list]).await?;
    h.start(campaign).await?;
    // An outage: half the rows were first tried two hours ago and have not got through since,
    // retried once already (one soft failure alone never expires a row).
    sqlx::query(
        "UPDATE sends SET first_claimed_at = now() - interval '2 hours', attempts = 2 WHERE campaign_id = $1 AND id % 2 = 0",
    )
        .bind(campaign)
        .execute(&h.app.owner)
        .await?;
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 1).await {
        r?;
    }
    let p = h.status(campaign).await?;
    assert_eq!(p.expired + p.sent, 30);
    assert!(p.expired >= 14, "half expired: {p:?}");
    assert_eq!(h.sink.accepted_count() as i64, p.sent);
    Ok(())
}

#[tokio::test]
async fn pause_stops_claims_resume_finishes_cancel_drops_the_rest() -> TestResult {
    let h = SendHarness::new(120).await?;
    let campaign = h.campaign("Pausable", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(40.0, 5)?;
    let cx = h.worker(&identity, None);
    let run = tokio::spawn({
        let (cx, tenant) = (cx.clone(), h.tenant);
        async move { delivery::deliver(&cx, tenant, campaign).await }
    });
    assert!(h.sink.wait_for_count(10, Duration::from_secs(10)).await);
    lifecycle::pause(&h.app.app.db, h.tenant, Role::Owner, campaign, "Paused by a test").await?;
    // Within a second no new claims happen: the batch in hand may finish, nothing after it.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after_pause = h.sink.accepted_count();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(h.sink.accepted_count(), after_pause, "no message went out while paused");
    run.await??;
    let p = h.status(campaign).await?;
    assert_eq!(p.status.as_str(), "paused");
    assert!(p.queued > 0);
    // Double resume: one wins.
    let db = &h.app.app.db;
    let jobs = &h.app.app.jobs;
    let (r1, r2) = tokio::join!(
        lifecycle::resume(db, jobs, h.tenant, Role::Owner, campaign),
        lifecycle::resume(db, jobs, h.tenant, Role::Owner, campaign)
    );
    assert!(r1.is_ok() != r2.is_ok(), "exactly one resume wins");
    let fast = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&fast, None), campaign, 2).await {
        r?;
    }
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=120)).await, 0);
    assert_eq!(h.status(campaign).await?.status.as_str(), "sent");

    // Cancel: the rest is cancelled and never sent.
    let other = h.campaign("Cancelled", vec![h.add_list("Other", 50, "other").await?]).await?;
    h.start(other).await?;
    lifecycle::cancel(db, h.tenant, Role::Owner, other).await?;
    for r in h.deliver(&h.worker(&fast, None), other, 1).await {
        r?;
    }
    let p = h.status(other).await?;
    assert_eq!((p.status.as_str(), p.cancelled, p.sent), ("cancelled", 50, 0));
    assert!(matches!(lifecycle::cancel(db, h.tenant, Role::Owner, other).await, Err(Error::Conflict(_))));
    Ok(())
}

#[tokio::test]
async fn a_double_click_starts_one_send() -> TestResult {
    let h = SendHarness::new(20).await?;
    let campaign = h.campaign("Once", vec![h.list]).await?;
    let db = &h.app.app.db;
    let jobs = &h.app.app.jobs;
    let results =
        futures::future::join_all((0..5).map(|_| lifecycle::send_now(db, jobs, h.tenant, Role::Owner, campaign))).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(results.iter().filter(|r| r.is_err()).all(|r| matches!(r, Err(Error::Conflict(_)))));
    // Fan-out twice at once (a duplicate job): one row per reader.
    let (a, b) = tokio::join!(fanout::run(db, h.tenant, campaign), fanout::run(db, h.tenant, campaign));
    assert_eq!(a? + b?, 20);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM sends WHERE campaign_id = $1")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!(rows, 20);
    Ok(())
}

#[tokio::test]
async fn readers_on_several_lists_and_ineligible_readers() -> TestResult {
    let h = SendHarness::new(10).await?;
    // Readers 1–10 are on both lists; 5 more only on the second.
    let second = h.add_list("Second", 15, "reader").await?;
    // Unconfirmed and blocklisted readers get nothing.
    sqlx::query("UPDATE subscriptions SET status = 'unconfirmed' WHERE reader_id IN (SELECT id FROM readers WHERE email IN ('reader11@example.com'))")
        .execute(&h.app.owner)
        .await?;
    sqlx::query("UPDATE readers SET status = 'blocklisted' WHERE email = 'reader12@example.com'")
        .execute(&h.app.owner)
        .await?;
    let campaign = h.campaign("Union", vec![h.list, second]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 2).await {
        r?;
    }
    let mut expected = addresses("reader", 1..=15);
    expected.remove("reader11@example.com");
    expected.remove("reader12@example.com");
    assert_eq!(h.assert_exactly_once(&expected).await, 0);
    Ok(())
}

#[tokio::test]
async fn the_fan_out_reaches_readers_on_both_sides_of_other_workspaces_ids() -> TestResult {
    let h = SendHarness::new(10).await?;
    // Reader ids are shared by every workspace: 300k ids of other tenants' readers sit between
    // this workspace's first ten readers and its next ten.
    sqlx::query("SELECT setval(pg_get_serial_sequence('readers', 'id'), (SELECT max(id) FROM readers) + 300000)")
        .execute(&h.app.owner)
        .await?;
    let later = h.add_list("Later", 10, "late").await?;
    sqlx::query("INSERT INTO subscriptions (tenant_id, list_id, reader_id, status) SELECT tenant_id, $1, id, 'confirmed' FROM readers WHERE email LIKE 'reader%'")
        .bind(later)
        .execute(&h.app.owner)
        .await?;
    let campaign = h.campaign("Gaps", vec![later]).await?;
    h.start(campaign).await?;
    // The gap costs no empty chunks: the cursor jumps to the next subscriber.
    let cursor: i64 = sqlx::query_scalar("SELECT fanout_cursor FROM campaigns WHERE id = $1")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    let first_late: i64 =
        sqlx::query_scalar("SELECT min(id) FROM readers WHERE email LIKE 'late%'").fetch_one(&h.app.owner).await?;
    // The last chunk started right before the first reader after the gap (stepping through the
    // gap from 0 would have ended on a multiple of the chunk size instead).
    assert_eq!(cursor, first_late - 1 + herald_engine::campaigns::fanout::CHUNK_IDS);
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 2).await {
        r?;
    }
    let mut expected = addresses("reader", 1..=10);
    expected.extend(addresses("late", 1..=10));
    assert_eq!(h.assert_exactly_once(&expected).await, 0);
    assert_eq!(h.status(campaign).await?.recipients, 20);
    Ok(())
}

/// A workspace whose SMTP server is a tarpit holds at most its share of a
/// process's delivery loops; the surplus jobs end at once, and another workspace's campaign is
/// delivered in full while the tarpit still holds its loops.
#[tokio::test]
async fn a_tarpit_workspace_cannot_hold_every_delivery_loop() -> TestResult {
    use herald_engine::campaigns::fair_share::WorkspaceLoops;
    let loops = WorkspaceLoops::new(2);
    let tarpit = SendHarness::new(20).await?;
    let other = SendHarness::new(20).await?;
    // Every reply of the tarpit's server takes longer than the SMTP timeout.
    tarpit.sink.set_faults(Faults::none().with_reply_delay(Duration::from_secs(3)));
    let in_process = |h: &SendHarness| -> anyhow::Result<DeliveryContext> {
        let mut cx = h.worker(&h.identity(100_000.0, 1000)?, None);
        Arc::get_mut(&mut cx.config).ok_or_else(|| anyhow::anyhow!("config shared"))?.workspace_loops = loops.clone();
        Ok(cx)
    };
    let stuck_campaign = tarpit.campaign("Stuck", vec![tarpit.list]).await?;
    tarpit.start(stuck_campaign).await?;
    let cx = in_process(&tarpit)?;
    let stuck: Vec<_> = (0..4)
        .map(|_| {
            let (cx, tenant) = (cx.clone(), tarpit.tenant);
            tokio::spawn(async move { delivery::deliver(&cx, tenant, stuck_campaign).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(loops.running(tarpit.tenant), 2, "the tarpit holds its share");
    assert_eq!(stuck.iter().filter(|t| t.is_finished()).count(), 2, "its surplus jobs ended at once");

    let campaign = other.campaign("Fine", vec![other.list]).await?;
    other.start(campaign).await?;
    let results = other.deliver(&in_process(&other)?, campaign, 2).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(other.assert_exactly_once(&addresses("reader", 1..=20)).await, 0);
    assert_eq!(loops.running(tarpit.tenant), 2, "the tarpit was still holding its loops meanwhile");
    assert_eq!(tarpit.sink.deliveries().await.len(), 0);
    for task in stuck {
        task.abort();
    }
    Ok(())
}

/// Views of a campaign still sending share one count of its send log, at most 2 s
/// old (the count is a scan: 722 ms at 1M rows, `bench scans`, and it was made per view, per
/// viewer). A second view right after the first does not count again; one after 2 s does; the
/// engine's own `progress` stays exact, and a campaign that stops sending is shown at once.
#[tokio::test]
async fn views_of_a_live_send_share_one_count_at_most_two_seconds_old() -> TestResult {
    let h = SendHarness::new(30).await?;
    let campaign = h.campaign("Watched", vec![h.list]).await?;
    h.start(campaign).await?;
    let db = &h.app.app.db;
    let first = progress::view(db, h.tenant, campaign).await?;
    assert_eq!((first.queued, first.sent), (30, 0), "{first:?}");
    sqlx::query(
        "UPDATE sends SET status = 'sent', sent_at = now()
         WHERE id IN (SELECT id FROM sends WHERE campaign_id = $1 ORDER BY id LIMIT 10)",
    )
    .bind(campaign)
    .execute(&h.app.owner)
    .await?;
    let again = progress::view(db, h.tenant, campaign).await?;
    assert_eq!((again.queued, again.sent), (30, 0), "the shared count, not a second scan");
    assert_eq!(h.status(campaign).await?.sent, 10, "progress() itself is exact");
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let later = progress::view(db, h.tenant, campaign).await?;
    assert_eq!((later.queued, later.sent), (20, 10), "{later:?}");
    lifecycle::pause(db, h.tenant, Role::Owner, campaign, "by hand").await?;
    assert_eq!(progress::view(db, h.tenant, campaign).await?.status.as_str(), "paused");
    Ok(())
}
