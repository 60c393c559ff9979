//! Send engine v2: each clause of the guarantee (docs/guarantee.md) with a
//! test that tries to break it, in-process against real Postgres and the real SMTP sink. The
//! chaos suite (`chaos.rs`) tries them all at once with real processes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use herald_devtools::smtp_sink::{FaultAction, FaultRule, Faults};
use herald_engine::Role;
use herald_engine::campaigns::delivery::{FaultHook, FaultPoint};
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::{delivery, store};
use herald_engine::sending::rate;
use uuid::Uuid;

use crate::sending::{SendHarness, addresses};

type TestResult = anyhow::Result<()>;

/// Gives expired leases back every 200 ms, as every process's supervisor does each second.
fn reaper(h: &SendHarness) -> tokio::task::JoinHandle<()> {
    let owner = h.app.owner.clone();
    tokio::spawn(async move {
        loop {
            let _ = sqlx::query("SELECT reap_expired_leases()").execute(&owner).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

#[tokio::test]
async fn an_smtp_server_slower_than_the_lease_gets_no_second_copy() -> TestResult {
    // The measured defect: replies slower than the lease, no crash, and a reaper hands the rows
    // to a second worker while the first is still in its SMTP transaction. Renewed leases keep
    // them with their owner.
    let h = SendHarness::new(12).await?;
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(2_600)));
    let campaign = h.campaign("Slow", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let reap = reaper(&h);
    let (mut a, mut b) = (h.worker(&identity, None), h.worker(&identity, None));
    for cx in [&mut a, &mut b] {
        // The lease is 2 s; each message takes 2.6 s; three messages per claim.
        Arc::make_mut(&mut cx.config).batch_size = 3;
        Arc::make_mut(&mut cx.config).smtp_timeout = Duration::from_secs(5);
    }
    let (ra, rb) = tokio::join!(h.deliver(&a, campaign, 2), h.deliver(&b, campaign, 2));
    reap.abort();
    for r in ra.into_iter().chain(rb) {
        r?;
    }
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=12)).await, 0, "no second copy");
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent, p.ambiguous), ("sent", 12, 0));
    Ok(())
}

#[tokio::test]
async fn a_pause_stops_the_wire_within_a_second_and_a_cancel_leaves_nothing_queued() -> TestResult {
    let h = SendHarness::new(400).await?;
    // 150 ms per message, four loops, claims of 20: a claimed batch lasts 3 s.
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(150)));
    let campaign = h.campaign("Stoppable", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let cx = h.worker(&identity, None);
    let sending = {
        let (cx, tenant) = (cx.clone(), h.tenant);
        tokio::spawn(async move {
            futures::future::join_all((0..4).map(|_| delivery::deliver(&cx, tenant, campaign))).await
        })
    };
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    lifecycle::pause(&h.app.app.db, h.tenant, Role::Owner, campaign, "by hand").await?;
    let paused_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let after_a_second = h.sink.accepted_count();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(h.sink.accepted_count(), after_a_second, "a message went out more than a second after the pause");
    // The loops ended by themselves, having given their batches back.
    let results = tokio::time::timeout(Duration::from_secs(5), sending).await??;
    assert!(paused_at.elapsed() < Duration::from_secs(9));
    for r in results {
        r?;
    }
    let p = h.status(campaign).await?;
    assert_eq!(p.sending, 0, "nothing stays claimed by a paused campaign: {p:?}");
    assert!(p.sent < 400 && p.queued > 0, "{p:?}");
    // Resume, let it run a little, then cancel while batches are in flight.
    lifecycle::resume(&h.app.app.db, &h.app.app.jobs, h.tenant, Role::Owner, campaign).await?;
    let sending = {
        let (cx, tenant) = (cx.clone(), h.tenant);
        tokio::spawn(async move {
            futures::future::join_all((0..4).map(|_| delivery::deliver(&cx, tenant, campaign))).await
        })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    lifecycle::cancel(&h.app.app.db, h.tenant, Role::Owner, campaign).await?;
    for r in tokio::time::timeout(Duration::from_secs(5), sending).await?? {
        r?;
    }
    // Whatever was given back after the cancel (released batches) ended cancelled, not queued.
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.queued, p.sending), ("cancelled", 0, 0), "{p:?}");
    assert_eq!(p.sent + p.cancelled, 400, "{p:?}");
    let sink_count = h.sink.accepted_count() as i64;
    assert_eq!(sink_count, p.sent, "Herald's count matches the sink's");
    // Settled, the cancelled send's figures were frozen by that look: later views
    // read one row instead of the send log, and say the same.
    let frozen: bool = sqlx::query_scalar("SELECT final_counts IS NOT NULL FROM campaign_stats WHERE campaign_id = $1")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    assert!(frozen, "a settled cancelled campaign keeps its final counts");
    let again = h.status(campaign).await?;
    assert_eq!((again.sent, again.cancelled, again.queued), (p.sent, p.cancelled, 0));
    Ok(())
}

#[tokio::test]
async fn rows_given_back_unsent_give_the_reader_back_to_the_frequency_cap() -> TestResult {
    let h = SendHarness::new(60).await?;
    h.frequency_cap_hours(24).await?;
    // The first campaign claims a batch (moving every claimed reader's cap), sends slowly, and
    // is paused: the rest of its batch goes back, and so does the cap of those readers.
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(200)));
    let first = h.campaign("First", vec![h.list]).await?;
    let second = h.campaign("Second", vec![h.list]).await?;
    h.start(first).await?;
    h.start(second).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let mut cx = h.worker(&identity, None);
    Arc::make_mut(&mut cx.config).batch_size = 60;
    let sending = h.spawn_deliver(&cx, first);
    tokio::time::sleep(Duration::from_millis(900)).await;
    lifecycle::pause(&h.app.app.db, h.tenant, Role::Owner, first, "by hand").await?;
    sending.await??;
    let reached_by_first = h.status(first).await?.sent;
    assert!(reached_by_first > 0 && reached_by_first < 60, "{reached_by_first}");
    h.sink.set_faults(Faults::none());
    for r in h.deliver(&h.worker(&identity, None), second, 2).await {
        r?;
    }
    // Everyone got exactly one of the two: the readers the paused campaign had claimed but not
    // mailed were not held back by it.
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=60)).await, 0);
    let p2 = h.status(second).await?;
    assert_eq!(p2.sent, 60 - reached_by_first, "{p2:?}");
    Ok(())
}

#[tokio::test]
async fn a_run_of_unknown_users_is_the_bounce_guards_business_not_the_failure_guards() -> TestResult {
    // An old import appended at the end: 40 dead addresses in a row after 1,000 good ones
    // (3.8 %: under the 5 % bounce-rate guard). 25 failures in a row used to pause the send.
    let h = SendHarness::new(1000).await?;
    h.add_list_into(h.list, 40, "dead").await?;
    h.sink.set_faults(Faults::none().with_rule(FaultRule::new("dead", FaultAction::user_unknown())));
    let campaign = h.campaign("Old import", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 2).await {
        r?;
    }
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent, p.failed, p.hard_bounces), ("sent", 1000, 40, 40), "{p:?}");
    let suppressed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM suppressions WHERE tenant_id = $1 AND reason = 'hard_bounce' AND email_lower LIKE 'dead%'",
    )
    .bind(h.tenant)
    .fetch_one(&h.app.owner)
    .await?;
    assert_eq!(suppressed, 40);
    Ok(())
}

#[tokio::test]
async fn a_maybe_delivered_last_attempt_is_counted_as_ambiguous() -> TestResult {
    let h = SendHarness::new(5).await?;
    // reader1's server keeps the message and hangs up before the 250, every time.
    h.sink.set_faults(Faults::none().with_rule(FaultRule::new("reader1@", FaultAction::DropAfterData)));
    let campaign = h.campaign("Ambiguous", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let mut cx = h.worker(&identity, None);
    Arc::make_mut(&mut cx.config).max_attempts = 3;
    for r in h.deliver(&cx, campaign, 1).await {
        r?;
    }
    let (status, ambiguous, attempts, reason): (String, i32, i32, Option<String>) = sqlx::query_as(
        "SELECT status, ambiguous, attempts, reason FROM sends WHERE campaign_id = $1 AND email = 'reader1@example.com'",
    )
    .bind(campaign)
    .fetch_one(&h.app.owner)
    .await?;
    let copies = h.sink.deliveries().await.iter().filter(|d| d.rcpt_to == "reader1@example.com").count();
    // Every attempt may have been delivered (the sink has every copy), and each is counted.
    assert_eq!((status.as_str(), ambiguous, copies), ("failed", attempts, attempts as usize), "{reason:?}");
    Ok(())
}

#[tokio::test]
async fn retry_failed_racing_the_end_of_a_send_never_strands_a_row() -> TestResult {
    for round in 0..5 {
        let h = SendHarness::new(30).await?;
        let campaign = h.campaign(&format!("Race {round}"), vec![h.list]).await?;
        h.start(campaign).await?;
        let identity = h.identity(100_000.0, 1000)?;
        let cx = h.worker(&identity, None);
        h.sink.set_faults(
            Faults::none().with_rule(FaultRule::new("reader3", FaultAction::RejectData("554 5.7.1 No".into()))),
        );
        let sending = h.spawn_deliver(&cx, campaign);
        // Retry the failures while the send may be finishing (several times, at varying moments).
        for i in 0..10 {
            tokio::time::sleep(Duration::from_millis(15 * i)).await;
            let _ = lifecycle::retry_failed(&h.app.app.db, &h.app.app.jobs, h.tenant, Role::Owner, campaign).await;
        }
        sending.await??;
        h.sink.set_faults(Faults::none());
        // Whatever the order, the campaign is either still sending (and a loop finishes it) or
        // sent with nothing queued.
        for r in h.deliver(&cx, campaign, 1).await {
            r?;
        }
        let p = h.status(campaign).await?;
        assert_eq!(p.queued + p.sending, 0, "round {round}: rows stranded in a {} campaign: {p:?}", p.status);
        assert_eq!(p.status.as_str(), "sent");
    }
    Ok(())
}

#[tokio::test]
async fn a_fresh_rate_bucket_releases_its_burst_and_not_more() -> TestResult {
    let h = SendHarness::new(1).await?;
    let key = format!("test:{}", Uuid::new_v4());
    let db = &h.app.app.db;
    // 10 per second, burst 10: the first 10 go at once, the next 10 wait about a second.
    assert_eq!(rate::reserve(db, &key, 10, 10.0, 10).await?, Duration::ZERO);
    let wait = rate::reserve(db, &key, 10, 10.0, 10).await?;
    assert!(wait >= Duration::from_millis(900) && wait <= Duration::from_millis(1_100), "{wait:?}");
    // A slow spread (one message an hour) waits an hour, not a capped shorter time.
    let slow = format!("test:{}", Uuid::new_v4());
    rate::reserve(db, &slow, 1, 1.0 / 7200.0, 1).await?;
    let wait = rate::reserve(db, &slow, 1, 1.0 / 7200.0, 1).await?;
    assert!(wait >= Duration::from_secs(7_100), "{wait:?}");
    Ok(())
}

/// While priority mail (an automation step, a transactional message) has work on an identity,
/// a campaign's tokens come at four fifths of the identity's rate; without it, at the full rate.
#[tokio::test]
async fn campaigns_keep_to_four_fifths_of_the_rate_while_priority_mail_has_work() -> TestResult {
    let h = SendHarness::new(1).await?;
    let db = &h.app.app.db;
    // 10 a second, burst 10: each further batch of 10 waits a second more, or 1.25 s at 8 a second.
    let last_wait = |key: String| async move {
        let mut wait = Duration::ZERO;
        for _ in 0..8 {
            wait = rate::reserve_bulk(db, &key, 10, 10.0, 10).await.expect("reserve").wait;
        }
        wait
    };
    let alone = last_wait(format!("test:{}", Uuid::new_v4())).await;
    assert!(alone >= Duration::from_millis(6_800) && alone <= Duration::from_millis(7_200), "{alone:?}");
    let shared = format!("test:{}", Uuid::new_v4());
    rate::reserve_priority(db, &shared, 1, 10.0, 10).await?;
    let beside_priority = last_wait(shared.clone()).await;
    assert!(
        beside_priority >= Duration::from_millis(8_550) && beside_priority <= Duration::from_millis(9_000),
        "{beside_priority:?}"
    );
    // Only an automation waiting for a connection makes a campaign give one up.
    assert!(!rate::reserve_bulk(db, &shared, 1, 10.0, 10).await?.connections_wanted);
    rate::note_connection_demand(db, &shared).await?;
    assert!(rate::reserve_bulk(db, &shared, 1, 10.0, 10).await?.connections_wanted);
    assert_eq!((rate::bulk_connections(1), rate::bulk_connections(2), rate::bulk_connections(10)), (0, 1, 8));
    Ok(())
}

#[tokio::test]
async fn a_spread_send_does_not_expire_its_own_tail() -> TestResult {
    let h = SendHarness::new(20).await?;
    sqlx::query("UPDATE tenants SET max_queue_age_hours = 1 WHERE id = $1")
        .bind(h.tenant)
        .execute(&h.app.owner)
        .await?;
    let campaign = h.campaign("Week-long spread", vec![h.list]).await?;
    sqlx::query("UPDATE campaigns SET spread_hours = 168 WHERE id = $1").bind(campaign).execute(&h.app.owner).await?;
    h.start(campaign).await?;
    // Three days into a week-long spread, the tail has waited 72 h (the max age is 1 h): it is
    // the engine's own pacing, not an outage.
    sqlx::query("UPDATE sends SET created_at = now() - interval '72 hours' WHERE campaign_id = $1")
        .bind(campaign)
        .execute(&h.app.owner)
        .await?;
    let identity = h.identity(100_000.0, 1000)?;
    // Only the age matters here: the pace is made fast (20 a second) by claiming more recipients.
    sqlx::query("UPDATE campaigns SET recipients = 20 * 168 * 3600 WHERE id = $1")
        .bind(campaign)
        .execute(&h.app.owner)
        .await?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 1).await {
        r?;
    }
    let p = h.status(campaign).await?;
    assert_eq!((p.expired, p.sent), (0, 20), "{p:?}");
    Ok(())
}

/// The queue age counts from a row's first claim, not from the fan-out. Two
/// million readers through an identity at 10/s take 55.6 h; counted from the fan-out (48 h by
/// default) the last 272k of them expired unsent. Simulated on the clock: the tail of such a
/// send, fanned out 56 h ago and reached only now, is sent; rows that have been failing since
/// their first claim 49 h ago still expire (the outage rule the max age exists for).
#[tokio::test]
async fn a_throttled_send_does_not_expire_its_tail_but_rows_failing_for_days_do() -> TestResult {
    let h = SendHarness::new(20).await?;
    let campaign = h.campaign("Two million at ten a second", vec![h.list]).await?;
    h.start(campaign).await?;
    sqlx::query("UPDATE sends SET created_at = now() - interval '56 hours' WHERE campaign_id = $1")
        .bind(campaign)
        .execute(&h.app.owner)
        .await?;
    sqlx::query(
        "UPDATE sends SET first_claimed_at = now() - interval '49 hours', attempts = 3
         WHERE id IN (SELECT id FROM sends WHERE campaign_id = $1 ORDER BY id LIMIT 5)",
    )
    .bind(campaign)
    .execute(&h.app.owner)
    .await?;
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), campaign, 1).await {
        r?;
    }
    let p = h.status(campaign).await?;
    assert_eq!((p.expired, p.sent), (5, 15), "{p:?}");
    Ok(())
}

/// An idle loop asks "anything due?" every 100–300 ms. Answered by the claim, that
/// walked every deferred row of the queue in id order; the probe it asks first reads a few index
/// pages. Read off its plan, as the runtime role, with 9,000 rows (under the warm-up limit) all
/// deferred.
#[tokio::test]
async fn an_idle_loop_finds_nothing_due_without_walking_the_deferred_rows() -> TestResult {
    let h = SendHarness::new(9_000).await?;
    let campaign = h.campaign("All deferred", vec![h.list]).await?;
    h.start(campaign).await?;
    sqlx::query("UPDATE sends SET next_attempt_at = now() + interval '1 hour' WHERE campaign_id = $1")
        .bind(campaign)
        .execute(&h.app.owner)
        .await?;
    sqlx::query("ANALYZE sends").execute(&h.app.owner).await?;
    // The first probe after that update visits the rows' old index entries once and marks them
    // dead (as the loops' first idle pass would); the plan read is of the probe every idle loop
    // then repeats.
    let mut tx = h.app.app.db.tenant_tx(h.tenant).await?;
    sqlx::query(herald_engine::campaigns::delivery::DUE_PROBE).bind(campaign).execute(&mut *tx).await?;
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {}",
        herald_engine::campaigns::delivery::DUE_PROBE
    )))
    .bind(campaign)
    .fetch_one(&mut *tx)
    .await?;
    tx.rollback().await?;
    let top = &plan[0]["Plan"];
    let pages = top["Shared Hit Blocks"].as_i64().unwrap_or(i64::MAX) + top["Shared Read Blocks"].as_i64().unwrap_or(0);
    assert!(plan.to_string().contains("sends_due_idx"), "{plan}");
    assert!(pages <= 20, "the probe read {pages} pages: {plan}");
    Ok(())
}

/// An identity's connection limit holds across its campaigns. Two campaigns through
/// one identity that allows 2 connections, each offered 3 delivery jobs at once (and again, as
/// the supervisor would, until both are sent): never more than 2 delivery leases between them
/// (main at d7b2561 held 4, 2 per campaign), and every reader gets each campaign once.
#[tokio::test]
async fn an_identitys_connection_limit_holds_across_its_campaigns() -> TestResult {
    let h = SendHarness::new(60).await?;
    let (first, second) = (h.campaign("First", vec![h.list]).await?, h.campaign("Second", vec![h.list]).await?);
    h.start(first).await?;
    h.start(second).await?;
    let mut identity = h.identity(100_000.0, 1000)?;
    identity.max_connections = 2;
    // Slow replies, so the loops of both campaigns are alive at the same time.
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(20)));
    let cx = h.worker(&identity, None);
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (owner, done) = (h.app.owner.clone(), done.clone());
        async move {
            let mut most = 0_i64;
            while !done.load(Ordering::SeqCst) {
                let held: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM leases WHERE campaign_id IN ($1, $2) AND slot >= 0")
                        .bind(first)
                        .bind(second)
                        .fetch_one(&owner)
                        .await
                        .unwrap_or(0);
                most = most.max(held);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most
        }
    });
    for _ in 0..100 {
        let jobs = [first, second].into_iter().flat_map(|c| [c; 3]).map(|c| delivery::deliver(&cx, h.tenant, c));
        for r in futures::future::join_all(jobs).await {
            r?;
        }
        if h.status(first).await?.status.is_finished() && h.status(second).await?.status.is_finished() {
            break;
        }
    }
    done.store(true, Ordering::SeqCst);
    let most = sampler.await?;
    assert!((1..=2).contains(&most), "{most} delivery leases on an identity that allows 2 connections");
    for c in [first, second] {
        assert_eq!(h.status(c).await?.sent, 60);
    }
    assert_eq!(h.sink.accepted_count(), 120);
    Ok(())
}

#[tokio::test]
async fn a_loop_that_finds_nothing_takes_no_tokens() -> TestResult {
    // The measured defect: tokens were taken before the claim, so loops idling over rows not
    // yet due burned the identity's rate, and the rows waited for tokens nobody had used.
    let h = SendHarness::new(10).await?;
    let campaign = h.campaign("Later", vec![h.list]).await?;
    h.start(campaign).await?;
    let later = |secs: f64| {
        sqlx::query("UPDATE sends SET next_attempt_at = now() + make_interval(secs => $2) WHERE campaign_id = $1")
            .bind(campaign)
            .bind(secs)
            .execute(&h.app.owner)
    };
    // Every row waits for a retry a minute away: the loop idles (a pass every 100–300 ms).
    later(60.0).await?;
    // 10 a second, burst 10, claims of 10: a pass that took tokens would push the bucket a
    // second further each time.
    let identity = h.identity(10.0, 10)?;
    let mut cx = h.worker(&identity, None);
    Arc::make_mut(&mut cx.config).batch_size = 10;
    Arc::make_mut(&mut cx.config).retry_base = Duration::from_millis(300);
    let sending = h.spawn_deliver(&cx, campaign);
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let buckets: i64 = sqlx::query_scalar("SELECT count(*) FROM rate_buckets WHERE key = $1")
        .bind(&identity.bucket)
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!((buckets, h.sink.accepted_count()), (0, 0), "two seconds of idling took tokens");
    // The rows come due: the whole burst is there for them.
    later(0.0).await?;
    let due = Instant::now();
    assert!(h.sink.wait_for_count(10, Duration::from_secs(5)).await, "the due rows went out");
    assert!(due.elapsed() < Duration::from_millis(900), "the burst waited {:?}", due.elapsed());
    tokio::time::timeout(Duration::from_secs(10), sending).await???;
    assert_eq!(h.status(campaign).await?.sent, 10);
    Ok(())
}

#[tokio::test]
async fn re_kicks_never_run_more_loops_than_the_identity_has_connections() -> TestResult {
    // Every re-kick used to start another `max_connections` loops. Twelve delivery jobs for a
    // campaign whose identity allows two connections: two loops send, the others end at once.
    let h = SendHarness::new(60).await?;
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(20)));
    let campaign = h.campaign("Two at a time", vec![h.list]).await?;
    h.start(campaign).await?;
    let mut identity = h.identity(100_000.0, 1000)?;
    identity.max_connections = 2;
    let cx = h.worker(&identity, None);
    let sending = {
        let (cx, tenant) = (cx.clone(), h.tenant);
        tokio::spawn(async move {
            futures::future::join_all((0..12).map(|_| delivery::deliver(&cx, tenant, campaign))).await
        })
    };
    let mut most = 0;
    while !sending.is_finished() {
        let live: i64 = sqlx::query_scalar("SELECT count(*) FROM leases WHERE campaign_id = $1 AND slot >= 0")
            .bind(campaign)
            .fetch_one(&h.app.owner)
            .await?;
        most = most.max(live);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for r in sending.await? {
        r?;
    }
    assert!((1..=2).contains(&most), "{most} delivery loops at once");
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=60)).await, 0);
    Ok(())
}

#[tokio::test]
async fn a_reader_whose_message_fails_to_render_is_given_back_to_the_frequency_cap() -> TestResult {
    // The claim moves each reader's frequency-cap mark; a row that then ends unsent (here: the
    // template fails for readers without an `items` attribute) must move it back, or those
    // readers are held back from every other campaign for a day.
    let h = SendHarness::new(20).await?;
    h.frequency_cap_hours(24).await?;
    sqlx::query(
        "UPDATE readers SET attributes = '{\"items\": [1, 2]}' WHERE tenant_id = $1 AND email ~ '^reader([1-9]|10)@'",
    )
    .bind(h.tenant)
    .execute(&h.app.owner)
    .await?;
    let input = herald_types::CampaignInput {
        name: "Counts".into(),
        subject: "Your items".into(),
        from_email: "news@sender.test".into(),
        from_name: "Sender Co".into(),
        list_ids: vec![h.list.into()],
        body: "You have {{ reader.attributes.items | length }} items.\n\n[Unsubscribe]({{ unsubscribe_url }})".into(),
        ..Default::default()
    };
    let counts = store::create(&h.app.app.db, h.tenant, Role::Owner, &input).await?.id;
    h.start(counts).await?;
    let identity = h.identity(100_000.0, 1000)?;
    for r in h.deliver(&h.worker(&identity, None), counts, 1).await {
        r?;
    }
    let p = h.status(counts).await?;
    assert_eq!((p.sent, p.failed), (10, 10), "{p:?}");
    let other = h.campaign("Other", vec![h.list]).await?;
    h.start(other).await?;
    for r in h.deliver(&h.worker(&identity, None), other, 1).await {
        r?;
    }
    // The ten readers the failed renders had claimed got the other campaign; the ten who got
    // the first one are inside the cap.
    let p = h.status(other).await?;
    assert_eq!(p.sent, 10, "{p:?}");
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=20)).await, 0);
    Ok(())
}

/// A fault hook that freezes its loop just before a message goes to SMTP (blocking its thread,
/// as a stalled process would) until `go` is set, and sets `reached` when it gets there.
fn hold_before_smtp(reached: Arc<AtomicBool>, go: Arc<AtomicBool>) -> FaultHook {
    Arc::new(move |point, _| {
        if point == FaultPoint::BeforeSmtp {
            reached.store(true, Ordering::SeqCst);
            // Bounded, so that a failing test ends instead of holding a runtime thread for ever.
            let deadline = Instant::now() + Duration::from_secs(20);
            while !go.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        false
    })
}

/// Runs one delivery loop on a thread and runtime of its own, with its own connection pool, as
/// a separate process would: its fault hook can then freeze it (lease renewals included)
/// without stalling the test or the other loop.
fn deliver_apart(
    h: &SendHarness,
    cx: delivery::DeliveryContext,
    campaign: herald_engine::CampaignId,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let url = herald_engine::infra::db::runtime_url(&h.app.db_url, None)?;
    let tenant = h.tenant;
    Ok(std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async move {
            let cx = delivery::DeliveryContext { db: herald_engine::Db::connect(&url, 4).await?, ..cx };
            Ok(delivery::deliver(&cx, tenant, campaign).await?)
        })
    }))
}

/// Waits (without blocking the test's runtime) for a loop started by [`deliver_apart`].
async fn join_apart(handle: std::thread::JoinHandle<anyhow::Result<()>>) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !handle.is_finished() {
        anyhow::ensure!(Instant::now() < deadline, "a delivery loop did not end within 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.join().map_err(|_| anyhow::anyhow!("a delivery loop panicked"))?
}

async fn wait_for(flag: &AtomicBool, what: &str) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !flag.load(Ordering::SeqCst) {
        anyhow::ensure!(Instant::now() < deadline, "{what} did not happen within 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_loop_that_lost_its_row_cannot_fail_it_under_the_loop_now_sending_it() -> TestResult {
    // Defence in depth behind the fence: every write of a loop is conditional on its token.
    // The fence is bypassed on purpose here: loop A is frozen just before its SMTP transaction
    // while its row is handed to loop B (as the reaper does after an expiry). A wakes, sends,
    // and the server rejects A's copy. A's `failed` must not land on the row B is delivering:
    // B's 250 would then go unrecorded and a delivered message would read "failed".
    let h = SendHarness::new(1).await?;
    let rejected_once = FaultRule::new("reader1@", FaultAction::RejectData("554 5.7.1 Rejected".into())).times(1);
    h.sink.set_faults(Faults::none().with_rule(rejected_once));
    let campaign = h.campaign("Fenced writes", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let flag = || Arc::new(AtomicBool::new(false));
    let (a_reached, a_go, b_reached, b_go) = (flag(), flag(), flag(), flag());
    let mut a = h.worker(&identity, Some(hold_before_smtp(a_reached.clone(), a_go.clone())));
    let mut b = h.worker(&identity, Some(hold_before_smtp(b_reached.clone(), b_go.clone())));
    // A lease long enough that a frozen loop's fence stays open through the freeze.
    for cx in [&mut a, &mut b] {
        Arc::make_mut(&mut cx.config).lease = Duration::from_secs(30);
    }
    let run_a = deliver_apart(&h, a, campaign)?;
    wait_for(&a_reached, "A's claim").await?;
    // The reaper's give-back while A lives: queued again, A's token left on the row.
    sqlx::query("UPDATE sends SET status = 'queued', armed = false WHERE campaign_id = $1")
        .bind(campaign)
        .execute(&h.app.owner)
        .await?;
    let run_b = deliver_apart(&h, b, campaign)?;
    wait_for(&b_reached, "B's claim").await?;
    a_go.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.sink.faults_injected() == 0 {
        anyhow::ensure!(Instant::now() < deadline, "A's copy never reached the server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Time for A's `failed` write, then B sends.
    tokio::time::sleep(Duration::from_millis(500)).await;
    b_go.store(true, Ordering::SeqCst);
    join_apart(run_b).await?;
    join_apart(run_a).await?;
    let (status, reason): (String, Option<String>) =
        sqlx::query_as("SELECT status, reason FROM sends WHERE campaign_id = $1")
            .bind(campaign)
            .fetch_one(&h.app.owner)
            .await?;
    assert_eq!((status.as_str(), h.sink.accepted_count()), ("sent", 1), "{reason:?}");
    assert_eq!(h.status(campaign).await?.status.as_str(), "sent");
    Ok(())
}

#[tokio::test]
async fn a_250_whose_record_loses_its_connection_is_recorded_on_a_new_one() -> TestResult {
    // The measured defect: the 250's write returned the database error, so a dropped connection
    // turned a delivered message into a re-send. Here the `sent` write is made to wait on a row
    // lock, its backend is terminated mid-statement, and it must land once the lock goes.
    let h = SendHarness::new(1).await?;
    let campaign = h.campaign("Acknowledged", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let (reached, go) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let mut cx = h.worker(&identity, Some(hold_before_smtp(reached.clone(), go.clone())));
    Arc::make_mut(&mut cx.config).ack_batch = 1;
    Arc::make_mut(&mut cx.config).lease = Duration::from_secs(30);
    let run = deliver_apart(&h, cx, campaign)?;
    wait_for(&reached, "the claim").await?;
    // Hold the row: the 250's write will wait for it.
    let mut holder = h.app.owner.begin().await?;
    sqlx::query("SELECT id FROM sends WHERE campaign_id = $1 FOR UPDATE").bind(campaign).execute(&mut *holder).await?;
    go.store(true, Ordering::SeqCst);
    assert!(h.sink.wait_for_count(1, Duration::from_secs(10)).await, "the message went out");
    // The write is waiting on the lock: drop its connection under it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let terminated: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%record_sent%') t",
        )
        .fetch_one(&h.app.owner)
        .await?;
        if terminated > 0 {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the 250's write never waited on the row");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.commit().await?;
    join_apart(run).await?;
    let (status, ambiguous): (String, i32) =
        sqlx::query_as("SELECT status, ambiguous FROM sends WHERE campaign_id = $1")
            .bind(campaign)
            .fetch_one(&h.app.owner)
            .await?;
    assert_eq!((status.as_str(), ambiguous, h.sink.accepted_count()), ("sent", 0, 1));
    Ok(())
}

/// A claim that waits past its lease (reader rows locked by an import, renewals
/// stalled) must not commit rows under a token the reaper has already deleted: those rows stayed
/// `sending` for ever and the campaign never finished. The loop here "crashes" right after its
/// claim commits, as a killed process would, so nothing of its own gives the rows back.
#[tokio::test]
async fn a_claim_that_outlives_its_lease_strands_no_row() -> TestResult {
    let h = SendHarness::new(20).await?;
    // With a frequency cap the claim locks the readers' rows, so an import holding them stalls it.
    h.frequency_cap_hours(24).await?;
    let campaign = h.campaign("Waited", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let crash_after_claim: FaultHook = Arc::new(|point, _| matches!(point, FaultPoint::AfterClaim));
    let crashing = h.worker(&identity, Some(crash_after_claim));

    let mut import = h.app.owner.begin().await?;
    sqlx::query("SELECT id FROM readers WHERE tenant_id = $1 FOR UPDATE").bind(h.tenant).execute(&mut *import).await?;
    let first = h.spawn_deliver(&crashing, campaign);
    let waiting = Instant::now();
    loop {
        let blocked: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_locks WHERE NOT granted").fetch_one(&h.app.owner).await?;
        if blocked > 0 {
            break;
        }
        assert!(waiting.elapsed() < Duration::from_secs(10), "the claim never waited on the readers' rows");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its lease runs out meanwhile (as when renewals stall), and the reaper runs.
    sqlx::query("UPDATE leases SET expires_at = now() - interval '1 second' WHERE campaign_id = $1 AND slot >= 0")
        .bind(campaign)
        .execute(&h.app.owner)
        .await?;
    sqlx::query("SELECT reap_expired_leases()").execute(&h.app.owner).await?;
    import.commit().await?;
    let _ = tokio::time::timeout(Duration::from_secs(10), first).await?;

    // A healthy loop and the reaper finish the campaign: every reader exactly once.
    let reap = reaper(&h);
    let healthy = h.worker(&identity, None);
    let finished = tokio::time::timeout(Duration::from_secs(20), h.deliver(&healthy, campaign, 1)).await;
    reap.abort();
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent, p.sending, p.queued), ("sent", 20, 0, 0), "{p:?}");
    assert!(finished.is_ok(), "the campaign never finished: {p:?}");
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=20)).await, 0);
    Ok(())
}

/// The reaper's side: a `sending` row whose lease no longer exists at all (its
/// claim committed after the reaper deleted the lease) goes back to the queue, counted as
/// ambiguous only if it was armed.
#[tokio::test]
async fn the_reaper_gives_back_rows_whose_lease_is_gone() -> TestResult {
    let h = SendHarness::new(4).await?;
    let campaign = h.campaign("Orphans", vec![h.list]).await?;
    h.start(campaign).await?;
    sqlx::query(
        "UPDATE sends SET status = 'sending', lease_token = -42, armed = (reader_id % 2 = 0), attempts = 1,
                first_claimed_at = now() - interval '1 hour'
         WHERE campaign_id = $1",
    )
    .bind(campaign)
    .execute(&h.app.owner)
    .await?;
    let reaped: i64 = sqlx::query_scalar("SELECT reap_expired_leases()").fetch_one(&h.app.owner).await?;
    assert_eq!(reaped, 4);
    let (queued, ambiguous): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'queued'), sum(ambiguous)::bigint FROM sends WHERE campaign_id = $1",
    )
    .bind(campaign)
    .fetch_one(&h.app.owner)
    .await?;
    assert_eq!(queued, 4);
    assert_eq!(ambiguous, 2, "only the armed rows count");
    // A row that never reached SMTP was not attempted: its claim and its queue age are undone,
    // as when a loop gives its batch back; an armed one keeps both.
    let rows: Vec<(bool, i32, bool)> = sqlx::query_as(
        "SELECT armed_before, attempts, first_claimed_at IS NOT NULL
         FROM (SELECT reader_id % 2 = 0 AS armed_before, attempts, first_claimed_at FROM sends WHERE campaign_id = $1) x
         ORDER BY 1",
    )
    .bind(campaign)
    .fetch_all(&h.app.owner)
    .await?;
    assert_eq!(rows, vec![(false, 0, false), (false, 0, false), (true, 1, true), (true, 1, true)]);
    Ok(())
}

/// A message is sent only once Postgres confirms its arm. Rows given back (and
/// claimed by another loop) while this loop's clock still trusted its lease — a VM pause, a
/// clock step — used to be sent anyway: a copy on a row nobody counted. Here the rows beyond the
/// claim's first armed window are taken from under the loop (another token) mid-batch.
#[tokio::test]
async fn a_row_whose_arm_is_not_confirmed_is_not_sent() -> TestResult {
    let h = SendHarness::new(6).await?;
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(400)));
    let campaign = h.campaign("Armed", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let mut cx = h.worker(&identity, None);
    Arc::make_mut(&mut cx.config).batch_size = 6;
    Arc::make_mut(&mut cx.config).ack_batch = 2;
    let mut first = h.spawn_deliver(&cx, campaign);
    let waiting = Instant::now();
    let taken = loop {
        // As soon as the batch is claimed, its unarmed rows change hands.
        let taken = sqlx::query(
            "UPDATE sends SET lease_token = -7 WHERE campaign_id = $1 AND status = 'sending' AND NOT armed",
        )
        .bind(campaign)
        .execute(&h.app.owner)
        .await?
        .rows_affected();
        if taken > 0 {
            break taken;
        }
        assert!(waiting.elapsed() < Duration::from_secs(10), "the batch was never claimed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(taken, 4, "a batch of 6 with its first window of 2 armed");
    let _ = tokio::time::timeout(Duration::from_secs(5), &mut first).await;
    first.abort();
    assert_eq!(h.sink.accepted_count(), 2, "only the two armed rows may have gone out");

    // The reaper gives the taken rows back (their token has no lease); a loop sends them once.
    let reap = reaper(&h);
    let finished = tokio::time::timeout(Duration::from_secs(20), h.deliver(&cx, campaign, 1)).await;
    reap.abort();
    assert!(finished.is_ok(), "the campaign never finished");
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=6)).await, 0);
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent, p.ambiguous), ("sent", 6, 0), "{p:?}");
    Ok(())
}

/// The frequency cap loses no reader. Campaign A claims every reader (moving their
/// cap marks) and its process dies; campaign B used to skip them all for good ("frequency
/// cap"), and when A was then cancelled nobody got anything. B now waits while A's rows may
/// still be sent; the reaper gives back the marks of A's rows that never reached SMTP; once A's
/// rows end unsent, B mails everyone, once.
#[tokio::test]
async fn a_reader_held_by_a_campaign_that_ends_unsent_gets_the_other_campaign() -> TestResult {
    let h = SendHarness::new(10).await?;
    h.frequency_cap_hours(24).await?;
    let a = h.campaign("A", vec![h.list]).await?;
    let b = h.campaign("B", vec![h.list]).await?;
    h.start(a).await?;
    h.start(b).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let crash_after_claim: FaultHook = Arc::new(|point, _| matches!(point, FaultPoint::AfterClaim));
    let mut crashing = h.worker(&identity, Some(crash_after_claim));
    // The claim arms its first four rows; the other six never reach SMTP.
    Arc::make_mut(&mut crashing.config).ack_batch = 4;
    let _ = h.deliver(&crashing, a, 1).await;
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM readers WHERE last_campaign_id = $1")
        .bind(a)
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!(held, 10);

    // B meets readers held by A's rows that are still in flight: it waits, it does not skip.
    let healthy = h.worker(&identity, None);
    let _ = tokio::time::timeout(Duration::from_secs(3), h.deliver(&healthy, b, 1)).await;
    let p = h.status(b).await?;
    assert_eq!((p.sent, p.skipped), (0, 0), "B must wait for A's rows, not skip their readers: {p:?}");

    // A is cancelled; its lease runs out and the reaper ends its rows (cancelled) and gives the
    // six unarmed rows' readers their marks back (the armed four may have been delivered).
    lifecycle::cancel(&h.app.app.db, h.tenant, Role::Owner, a).await?;
    h.reap().await?;
    let still_held: i64 = sqlx::query_scalar("SELECT count(*) FROM readers WHERE last_campaign_id = $1")
        .bind(a)
        .fetch_one(&h.app.owner)
        .await?;
    assert_eq!(still_held, 4, "the reaper gives back the marks of rows that never reached SMTP");

    let finished = tokio::time::timeout(Duration::from_secs(20), h.deliver(&healthy, b, 1)).await;
    assert!(finished.is_ok(), "B never finished");
    let p = h.status(b).await?;
    assert_eq!((p.status.as_str(), p.sent), ("sent", 10), "{p:?}");
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=10)).await, 0);
    Ok(())
}

/// How the first capped campaign ends before the second one starts.
#[derive(Clone, Copy, Debug)]
enum Ended {
    Paused,
    Cancelled,
}

/// The frequency cap at fan-out looks at the other campaign's row, not only at the reader's
/// mark. Campaign A claims every reader (their marks move to A), gets a 4xx for each (the rows
/// wait for a retry), and is then paused or cancelled; B starts. B used to skip them all at its
/// fan-out ("frequency cap"), so a cancelled A left everyone with neither campaign, and a paused
/// one made B wait for A for ever. Now B mails each reader once; a resumed A then skips them.
async fn a_capped_campaign_ended_after_soft_failures_leaves_its_readers_to_the_other(how: Ended) -> TestResult {
    let h = SendHarness::new(6).await?;
    h.frequency_cap_hours(24).await?;
    let a = h.campaign("A", vec![h.list]).await?;
    h.start(a).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let cx = h.worker(&identity, None);
    h.sink.set_faults(Faults::random(1.0, FaultAction::try_again_later()));
    let sending = h.spawn_deliver(&cx, a);
    assert!(
        tokio::time::timeout(Duration::from_secs(10), async {
            while h.sink.faults_injected() < 6 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .is_ok(),
        "A's first attempts were refused"
    );
    match how {
        Ended::Paused => {
            lifecycle::pause(&h.app.app.db, h.tenant, Role::Owner, a, "paused by hand").await?;
        }
        Ended::Cancelled => {
            lifecycle::cancel(&h.app.app.db, h.tenant, Role::Owner, a).await?;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), sending).await;
    h.sink.set_faults(Faults::none());

    let b = h.campaign("B", vec![h.list]).await?;
    h.start(b).await?;
    let finished = tokio::time::timeout(Duration::from_secs(30), h.deliver(&h.worker(&identity, None), b, 1)).await;
    assert!(finished.is_ok(), "B never finished ({how:?})");
    let p = h.status(b).await?;
    assert_eq!((p.status.as_str(), p.sent, p.skipped), ("sent", 6, 0), "{how:?}: {p:?}");
    if let Ended::Paused = how {
        lifecycle::resume(&h.app.app.db, &h.app.app.jobs, h.tenant, Role::Owner, a).await?;
        let finished = tokio::time::timeout(Duration::from_secs(30), h.deliver(&h.worker(&identity, None), a, 1)).await;
        assert!(finished.is_ok(), "the resumed A never finished");
        let p = h.status(a).await?;
        assert_eq!((p.sent, p.skipped), (0, 6), "the resumed A skips readers B mailed: {p:?}");
    }
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=6)).await, 0);
    Ok(())
}

#[tokio::test]
async fn a_capped_campaign_paused_after_soft_failures_does_not_hold_its_readers_from_the_other() -> TestResult {
    a_capped_campaign_ended_after_soft_failures_leaves_its_readers_to_the_other(Ended::Paused).await
}

#[tokio::test]
async fn a_capped_campaign_cancelled_after_soft_failures_does_not_hold_its_readers_from_the_other() -> TestResult {
    a_capped_campaign_ended_after_soft_failures_leaves_its_readers_to_the_other(Ended::Cancelled).await
}

/// A saturated pool does not cost the loops their leases. Renewals used to take a
/// connection from the shared pool like every query: with the pool held for longer than the
/// lease, every fence closed and every loop gave its batch up at once. A process's leases are
/// now renewed together on a connection of their own.
#[tokio::test]
async fn a_saturated_pool_does_not_cost_a_loop_its_lease() -> TestResult {
    let h = SendHarness::new(12).await?;
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(300)));
    let campaign = h.campaign("Saturated", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    // A 2-second lease.
    let cx = h.worker(&identity, None);
    let sending = h.spawn_deliver(&cx, campaign);
    assert!(h.sink.wait_for_count(1, Duration::from_secs(10)).await, "the send started");
    let token: i64 = sqlx::query_scalar("SELECT token FROM leases WHERE campaign_id = $1 AND slot >= 0")
        .bind(campaign)
        .fetch_one(&h.app.owner)
        .await?;
    // Every connection of the loop's pool, held for two and a half leases.
    let pool = h.app.app.db.pool();
    let mut held = Vec::new();
    for _ in 0..pool.options().get_max_connections() {
        held.push(pool.acquire().await?);
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let alive: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM leases WHERE token = $1 AND expires_at > now())")
            .bind(token)
            .fetch_one(&h.app.owner)
            .await?;
    drop(held);
    assert!(alive, "the loop's lease ran out while the pool was saturated");
    tokio::time::timeout(Duration::from_secs(30), sending).await???;
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent, p.ambiguous), ("sent", 12, 0), "{p:?}");
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=12)).await, 0);
    Ok(())
}

/// A reader who unsubscribes while their message waits in a claimed batch is not
/// mailed. The claim checked everyone; with replies this slow the batch takes 6 s, and the last
/// reader's unsubscribe commits after the claim. Once a claim is a second old its checks are made
/// again for each message, right before its data goes out.
#[tokio::test]
async fn an_unsubscribe_committed_after_the_claim_stops_that_readers_message() -> TestResult {
    let h = SendHarness::new(10).await?;
    h.sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(600)));
    let campaign = h.campaign("Late leaver", vec![h.list]).await?;
    h.start(campaign).await?;
    let identity = h.identity(100_000.0, 1000)?;
    let mut cx = h.worker(&identity, None);
    Arc::make_mut(&mut cx.config).batch_size = 10;
    let sending = h.spawn_deliver(&cx, campaign);
    assert!(h.sink.wait_for_count(1, Duration::from_secs(10)).await, "the batch is under way");
    let claimed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sends WHERE campaign_id = $1 AND status IN ('sending', 'sent')")
            .bind(campaign)
            .fetch_one(&h.app.owner)
            .await?;
    assert_eq!(claimed, 10, "the whole batch was claimed before the unsubscribe");
    sqlx::query(
        "UPDATE subscriptions SET status = 'unsubscribed', unsubscribed_at = now()
         WHERE reader_id = (SELECT id FROM readers WHERE email = 'reader10@example.com')",
    )
    .execute(&h.app.owner)
    .await?;
    tokio::time::timeout(Duration::from_secs(30), sending).await???;
    assert_eq!(h.assert_exactly_once(&addresses("reader", 1..=9)).await, 0);
    let p = h.status(campaign).await?;
    assert_eq!((p.status.as_str(), p.sent, p.skipped), ("sent", 9, 1), "{p:?}");
    Ok(())
}
