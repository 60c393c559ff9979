//! Transactional messages through the real API, the real transactional stream and the SMTP sink:
//! idempotency under concurrent replays, 409 for a reused key, 422 for template errors and
//! suppressed addresses, the seed's backoff schedule walked with a controllable clock, and a
//! message queued in the middle of a large rate-limited campaign arriving within seconds.

use chrono::{DateTime, Timelike, Utc};
use herald_devtools::smtp_sink::{FaultAction, Faults};
use herald_engine::transactional::delivery::{Sender, TxDeliveryConfig, TxDeliveryContext};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald_app::pages::settings::general::UpdateWorkspaceSettings;

use crate::helpers::*;

/// An API client for a new workspace with a transactional sender and a `reset` template.
async fn workspace(app: &TestApp, owner_email: &str) -> Api {
    let (owner, ws) = app.owner_with_workspace(owner_email, "Tx Co").await;
    app.verify_domain(&ws, "tx.test").await;
    let api = Api::for_owner(app, &owner).await;
    let (status, body) = api
        .post(
            "/api/v1/templates",
            json!({"name": "reset", "from_email": "noreply@tx.test", "from_name": "Tx Co",
                   "subject": "Reset your password, {{ name }}",
                   "html": "<p>Hi {{ name }}, <a href=\"{{ url }}\">reset it here</a>.</p>",
                   "sample": {"name": "Ada", "url": "https://tx.test/r?t=1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["version"], 1);
    api
}

async fn wait_for_message_status(api: &Api, id: &str, want: &str) -> Value {
    api.wait_for_status(&format!("/api/v1/messages/{id}"), want, Duration::from_secs(20)).await
}

/// A transactional delivery context of the test's own (no background workers), with `config`.
pub(crate) fn tx_context(app: &TestApp, config: TxDeliveryConfig) -> TxDeliveryContext {
    TxDeliveryContext {
        db: app.app.db.clone(),
        signer: app.app.signer.clone(),
        config: Arc::new(config),
        wake: Arc::new(tokio::sync::Notify::new()),
    }
}

fn kinds(m: &Value) -> Vec<String> {
    m["events"]
        .as_array()
        .map(|a| a.iter().map(|e| e["kind"].as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn concurrent_replays_of_one_key_send_one_message_with_one_id() -> TestResult {
    let app = spawn_app().await;
    let api = workspace(&app, "tx-replay@example.com").await;
    let body = json!({"to": "ada@example.com", "template": "reset",
                      "variables": {"name": "Ada", "url": "https://tx.test/r?t=42"}, "metadata": {"user": 42}});
    // Twenty concurrent requests with one key and one body.
    let calls = (0..20).map(|_| api.send_message("reset-42-a", &body));
    let answers = futures::future::join_all(calls).await;
    let created = answers.iter().filter(|(s, _)| *s == StatusCode::CREATED).count();
    let replayed = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    assert_eq!((created, replayed), (1, 19), "{answers:?}");
    let ids: std::collections::BTreeSet<&str> = answers.iter().filter_map(|(_, b)| b["id"].as_str()).collect();
    assert_eq!(ids.len(), 1, "every answer names the same message: {ids:?}");
    let id = ids.into_iter().next().unwrap_or_default().to_string();

    let m = wait_for_message_status(&api, &id, "sent").await;
    assert_eq!(m["subject"], "Reset your password, Ada");
    assert_eq!(m["metadata"]["user"], 42);
    assert_eq!(m["template_name"], "reset");
    assert_eq!(kinds(&m)[..2], ["queued".to_string(), "sent".to_string()], "{m}");
    // A replay after the send still answers with the first message, status and all.
    let (status, again) = api.send_message("reset-42-a", &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((again["id"].as_str(), again["status"].as_str()), (Some(id.as_str()), Some("sent")));
    // Key order and whitespace do not make a body different.
    let reordered: Value = serde_json::from_str(
        r#"{"metadata": {"user": 42}, "variables": {"url": "https://tx.test/r?t=42", "name": "Ada"},
            "template": "reset", "to": "ada@example.com"}"#,
    )?;
    assert_eq!(api.send_message("reset-42-a", &reordered).await.0, StatusCode::OK);
    // The same key with another body: 422 (the API's convention), and nothing queued.
    let (status, err) = api
        .send_message(
            "reset-42-a",
            &json!({"to": "eve@example.com", "template": "reset",
        "variables": {"name": "Eve", "url": "https://x"}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(
        err["fields"]["Idempotency-Key"].as_str().unwrap_or("").contains("already used for a different request"),
        "{err}"
    );

    // Exactly one copy reached the sink, for as long as a duplicate could take to show up.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let copies: Vec<_> =
        app.sink.messages().await.into_iter().filter(|m| m.rcpt_to.iter().any(|r| r == "ada@example.com")).collect();
    assert_eq!(copies.len(), 1);
    let mail = copies[0].parse();
    let header = |name: &str| mail.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    assert!(header("Message-ID").unwrap_or_default().contains(&format!("msg.{id}@tx.test")), "{:?}", mail.headers);
    assert_eq!(header("List-Unsubscribe"), None, "transactional mail has no list to leave");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM messages").fetch_one(&app.owner).await?;
    assert_eq!(count, 1);

    // The open pixel and the rewritten link in the message as sent record events.
    let html = mail.html.unwrap_or_default();
    let pixel = html.split("src=\"").filter_map(|s| s.split('"').next()).find(|u| u.contains("/o/")).expect("pixel");
    let link = html.split("href=\"").filter_map(|s| s.split('"').next()).find(|u| u.contains("/c/")).expect("link");
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    assert_eq!(client.get(pixel).header("user-agent", "Thunderbird/128").send().await?.status(), StatusCode::OK);
    let res = client.get(link).send().await?;
    assert_eq!(res.status(), StatusCode::FOUND);
    assert_eq!(res.headers()["location"], "https://tx.test/r?t=42");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, m) = api.get(&format!("/api/v1/messages/{id}")).await;
        let k = kinds(&m);
        if k.contains(&"opened".to_string()) && k.contains(&"clicked".to_string()) {
            assert!(m["opened_at"].is_string() && m["clicked_at"].is_string(), "{m}");
            break;
        }
        assert!(Instant::now() < deadline, "no open and click events: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A forged message token is a 404, never a redirect.
    let forged = link.replace("/c/", "/c/x");
    assert_eq!(client.get(&forged).send().await?.status(), StatusCode::NOT_FOUND);

    // Search by recipient and by key; another workspace sees nothing.
    let (_, by_to) = api.get("/api/v1/messages?q=ada@").await;
    let (_, by_key) = api.get("/api/v1/messages?q=reset-42-a").await;
    assert_eq!((by_to["data"].as_array().map(Vec::len), by_key["data"].as_array().map(Vec::len)), (Some(1), Some(1)));
    let (other, other_id) = app.owner_with_workspace("tx-other@example.com", "Other Co").await;
    app.verify_domain(&other_id, "other.test").await;
    let other = Api::for_owner(&app, &other).await;
    assert_eq!(other.get(&format!("/api/v1/messages/{id}")).await.0, StatusCode::NOT_FOUND);
    let (_, theirs) = other.get("/api/v1/messages").await;
    assert_eq!(theirs["data"].as_array().map(Vec::len), Some(0));
    // The same key in another workspace is another message.
    let (status, _) = other
        .send_message(
            "reset-42-a",
            &json!({"to": "bob@example.com", "from": "a@other.test", "subject": "Hi", "text": "Hello"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    Ok(())
}

#[tokio::test]
async fn template_errors_and_suppressed_recipients_are_refused_at_request_time() -> TestResult {
    let app = spawn_app().await;
    let api = workspace(&app, "tx-errors@example.com").await;
    let send = |key: &'static str, body: Value| {
        let api = &api;
        async move { api.send_message(key, &body).await }
    };
    // A variable the template uses is missing: 422 naming the place.
    let (status, err) =
        send("k1", json!({"to": "a@example.com", "template": "reset", "variables": {"name": "A"}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(err["message"].as_str().unwrap_or("").starts_with("html, line 1"), "{err}");
    // Inline content with a syntax error, an unknown template, no key, no sender.
    let (status, err) =
        send("k2", json!({"to": "a@example.com", "from": "x@tx.test", "subject": "Hi {{ name", "text": "x"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(err["message"].as_str().unwrap_or("").contains("subject"), "{err}");
    let (status, _) = send("k3", json!({"to": "a@example.com", "template": "nope"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, err) = send("", json!({"to": "a@example.com", "template": "reset"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(err["message"].as_str().unwrap_or("").contains("Idempotency-Key"), "{err}");
    let (status, err) = send("k4", json!({"to": "a@example.com", "subject": "Hi", "text": "x"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(err["message"].as_str().unwrap_or("").contains("No sender"), "{err}");
    // A template that does not compile is refused when saved.
    let (status, _) = api.post("/api/v1/templates", json!({"name": "bad", "subject": "x", "html": "{% if %}"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // Suppressed for a bounce (or by hand): refused with the reason. Unsubscribed from
    // everything: transactional mail still goes.
    let ws: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM tenants WHERE name = 'Tx Co'").fetch_one(&app.owner).await?;
    for (email, reason) in [("bounced@example.com", "hard_bounce"), ("left@example.com", "unsubscribed_all")] {
        sqlx::query("INSERT INTO suppressions (tenant_id, email_lower, reason, source) VALUES ($1, $2, $3, 'test')")
            .bind(ws)
            .bind(email)
            .bind(reason)
            .execute(&app.owner)
            .await?;
    }
    let vars = json!({"name": "B", "url": "https://tx.test"});
    let (status, err) = send("k5", json!({"to": "Bounced@Example.com", "template": "reset", "variables": vars})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert!(err["message"].as_str().unwrap_or("").contains("suppressed because it hard-bounced"), "{err}");
    let (status, ok) = send("k6", json!({"to": "left@example.com", "template": "reset", "variables": vars})).await;
    assert_eq!(status, StatusCode::CREATED, "{ok}");
    assert!(app.sink.wait_for_recipient("left@example.com", Duration::from_secs(10)).await.is_some());
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM messages").fetch_one(&app.owner).await?;
    assert_eq!(count, 1, "only the accepted request made a message");

    // A 550 from the server: failed, suppressed, and the next request is refused.
    app.sink.set_faults(Faults::rule("gone@example.com", FaultAction::user_unknown()));
    let (_, m) = send("k7", json!({"to": "gone@example.com", "template": "reset", "variables": vars})).await;
    let m = wait_for_message_status(&api, m["id"].as_str().unwrap_or_default(), "failed").await;
    assert!(kinds(&m).contains(&"bounced".to_string()), "{m}");
    let (status, _) = send("k8", json!({"to": "gone@example.com", "template": "reset", "variables": vars})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    Ok(())
}

#[tokio::test]
async fn transient_failures_follow_the_backoff_schedule_then_fail() -> TestResult {
    // No background workers: the test drives the transactional sender with its own clock.
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let api = workspace(&app, "tx-backoff@example.com").await;
    app.sink.set_faults(Faults::rule("slow@example.com", FaultAction::try_again_later()));
    let vars = json!({"name": "S", "url": "https://tx.test"});
    let (status, m) =
        api.send_message("b1", &json!({"to": "slow@example.com", "template": "reset", "variables": vars})).await;
    assert_eq!(status, StatusCode::CREATED, "{m}");
    let id: uuid::Uuid = m["id"].as_str().unwrap_or_default().parse()?;

    // Whole seconds: Postgres keeps microseconds, and the waits are compared exactly.
    let start = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now) + chrono::Duration::seconds(1);
    let now: Arc<Mutex<DateTime<Utc>>> = Arc::new(Mutex::new(start));
    let clock_now = now.clone();
    let mut config = TxDeliveryConfig::new("backoff-test".into(), app.app.default_identity.clone());
    config.clock = Arc::new(move || *clock_now.lock().expect("clock"));
    let cx = tx_context(&app, config);
    let mut sender = Sender::new(&cx);
    let next_attempt = || async {
        sqlx::query_as::<_, (String, i32, DateTime<Utc>)>(
            "SELECT status, attempts, next_attempt_at FROM messages WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&app.owner)
        .await
    };
    let expected_waits = [60, 300, 1800, 7200, 28800];
    for (attempt, wait) in expected_waits.iter().enumerate() {
        let t = *now.lock().expect("clock");
        assert_eq!(sender.run_once().await?, 1, "attempt {} is due", attempt + 1);
        let (status, attempts, next) = next_attempt().await?;
        assert_eq!((status.as_str(), attempts), ("queued", attempt as i32 + 1));
        assert_eq!((next - t).num_seconds(), *wait, "wait after attempt {}", attempt + 1);
        // One second early: nothing is due.
        *now.lock().expect("clock") = next - chrono::Duration::seconds(1);
        assert_eq!(sender.run_once().await?, 0, "nothing before the next attempt time");
        *now.lock().expect("clock") = next;
    }
    assert_eq!(sender.run_once().await?, 1);
    let (status, attempts, _) = next_attempt().await?;
    assert_eq!((status.as_str(), attempts), ("failed", 6), "the sixth failure is final");
    let (_, m) = api.get(&format!("/api/v1/messages/{id}")).await;
    let k = kinds(&m);
    assert_eq!(k.iter().filter(|k| *k == "deferred").count(), 5, "{k:?}");
    assert_eq!(k.last().map(String::as_str), Some("failed"));
    assert!(m["last_error"].as_str().unwrap_or("").contains("gave up after 6 attempts"), "{m}");
    *now.lock().expect("clock") += chrono::Duration::days(2);
    assert_eq!(sender.run_once().await?, 0, "a failed message is never retried");

    // A message sent later is not claimed before its time; cancelled while queued, never sent.
    let later = Utc::now() + chrono::Duration::hours(1);
    let (_, m) = api
        .send_message(
            "b2",
            &json!({"to": "later@example.com", "template": "reset", "variables": vars, "send_at": later}),
        )
        .await;
    let later_id = m["id"].as_str().unwrap_or_default().to_string();
    *now.lock().expect("clock") = Utc::now();
    assert_eq!(sender.run_once().await?, 0);
    let (status, m) = api.post(&format!("/api/v1/messages/{later_id}/cancel"), json!({})).await;
    assert_eq!((status, m["status"].as_str()), (StatusCode::OK, Some("cancelled")));
    let (status, _) = api.post(&format!("/api/v1/messages/{later_id}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "only a queued message can be cancelled");
    *now.lock().expect("clock") = later + chrono::Duration::minutes(1);
    assert_eq!(sender.run_once().await?, 0);
    assert!(app.sink.messages().await.iter().all(|m| !m.rcpt_to.iter().any(|r| r == "later@example.com")));
    sender.close().await;
    Ok(())
}

#[tokio::test]
async fn a_running_campaign_does_not_delay_transactional_mail() -> TestResult {
    // The default identity sends 150 messages a second: 3,000 readers keep the campaign busy
    // for about 20 s, and its rate bucket stays empty the whole time.
    let app = spawn_app_with(&[("HERALD_SMTP_RATE", "150"), ("HERALD_SMTP_BURST", "20")]).await;
    let (owner, ws) = app.owner_with_workspace("tx-busy@example.com", "Busy Co").await;
    app.verify_domain(&ws, "busy.test").await;
    let r = owner
        .run(UpdateWorkspaceSettings {
            name: "Busy Co".into(),
            postal_address: "1 Main Street".into(),
            default_from_name: "Busy".into(),
            default_from_email: "news@busy.test".into(),
            time_zone: None,
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let api = Api::for_owner(&app, &owner).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "All", "opt_in": "single"})).await;
    let list = list["id"].as_str().unwrap_or_default().to_string();
    let readers: Vec<Value> = (0..3000).map(|i| json!({"email": format!("busy{i}@example.com")})).collect();
    let (status, body) = api.post("/api/v1/readers/bulk", json!({"readers": readers, "lists": [list]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, c) = api
        .post("/api/v1/campaigns", json!({"name": "Big", "subject": "Big", "list_ids": [list], "body": "Hello"}))
        .await;
    let campaign = c["id"].as_str().unwrap_or_default().to_string();
    let (status, _) = api.post(&format!("/api/v1/campaigns/{campaign}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(app.sink.wait_for_count(300, Duration::from_secs(30)).await, "the campaign is under way");

    let queued = Instant::now();
    let (status, m) = api
        .send_message(
            "busy-1",
            &json!({"to": "urgent@example.com", "from": "noreply@busy.test", "subject": "Your code",
                                         "text": "123456"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{m}");
    let arrived = app.sink.wait_for_recipient("urgent@example.com", Duration::from_secs(10)).await;
    let took = queued.elapsed();
    assert!(arrived.is_some(), "the transactional message never arrived");
    let (_, stats) = api.get(&format!("/api/v1/campaigns/{campaign}/stats")).await;
    eprintln!("transactional message arrived after {took:?}; campaign at {} of 3000", stats["sent"]);
    assert!(took < Duration::from_secs(3), "took {took:?} behind the campaign");
    assert_eq!(stats["status"], "sending", "the campaign was still sending: {stats}");
    Ok(())
}

#[tokio::test]
async fn a_message_whose_sending_identity_cannot_be_loaded_is_deferred_not_stranded() -> TestResult {
    // The identity's sealed SMTP URL cannot be opened (a rotated secret, a corrupt row): not an
    // SMTP answer, but an attempt that failed. It used to stay leased for ever, counted as
    // ambiguous at every reap.
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let api = workspace(&app, "tx-broken@example.com").await;
    let vars = json!({"name": "B", "url": "https://tx.test"});
    let (status, m) =
        api.send_message("broken-1", &json!({"to": "x@example.com", "template": "reset", "variables": vars})).await;
    assert_eq!(status, StatusCode::CREATED, "{m}");
    let id: uuid::Uuid = m["id"].as_str().unwrap_or_default().parse()?;
    let identity = uuid::Uuid::new_v4();
    sqlx::query(
        "WITH t AS (SELECT tenant_id FROM messages WHERE id = $2)
         INSERT INTO sending_identities (id, tenant_id, name, smtp_url_sealed, smtp_display)
         SELECT $1, tenant_id, 'Broken', 'not-a-sealed-value', 'smtp://broken' FROM t",
    )
    .bind(identity)
    .bind(id)
    .execute(&app.owner)
    .await?;
    sqlx::query(
        "UPDATE tenants SET transactional_identity_id = $1 WHERE id = (SELECT tenant_id FROM messages WHERE id = $2)",
    )
    .bind(identity)
    .bind(id)
    .execute(&app.owner)
    .await?;
    let cx = tx_context(&app, TxDeliveryConfig::new("broken-test".into(), app.app.default_identity.clone()));
    let mut sender = Sender::new(&cx);
    assert_eq!(sender.run_once().await?, 1);
    let (status, attempts, ambiguous, armed, error): (String, i32, i32, bool, Option<String>) =
        sqlx::query_as("SELECT status, attempts, ambiguous, armed, last_error FROM messages WHERE id = $1")
            .bind(id)
            .fetch_one(&app.owner)
            .await?;
    assert_eq!((status.as_str(), attempts, ambiguous, armed), ("queued", 1, 0, false));
    let error = error.unwrap_or_default();
    assert!(error.contains("could not be prepared"), "{error}");
    assert!(!error.contains("sealed") && !error.contains("SELECT"), "no internals in the message's error: {error}");
    sender.close().await;
    Ok(())
}

/// Replaying one message's open pixel in a burst cannot queue unbounded writes (each would hold
/// a pooled connection): a few are written at once, the rest are dropped and counted, and every
/// request still gets its pixel.
#[tokio::test]
async fn a_flood_of_transactional_pixels_is_bounded_and_counted() -> TestResult {
    let app = spawn_app().await;
    let api = workspace(&app, "tx-flood@example.com").await;
    let vars = json!({"name": "F", "url": "https://tx.test/f"});
    let (status, m) =
        api.send_message("flood-1", &json!({"to": "flood@example.com", "template": "reset", "variables": vars})).await;
    assert_eq!(status, StatusCode::CREATED, "{m}");
    let mail = app.sink.wait_for_recipient("flood@example.com", Duration::from_secs(10)).await.expect("sent");
    let html = mail.parse().html.unwrap_or_default();
    let pixel = html.split("src=\"").filter_map(|s| s.split('"').next()).find(|u| u.contains("/o/")).expect("pixel");

    const BURST: u64 = 400;
    let dropped_before = herald_engine::tracking::HitCounters::get(&app.hits.dropped);
    let client = reqwest::Client::new();
    let answers =
        futures::future::join_all((0..BURST).map(|_| client.get(pixel).header("user-agent", "Thunderbird/128").send()))
            .await;
    assert!(answers.iter().all(|r| r.as_ref().is_ok_and(|r| r.status() == StatusCode::OK)));

    let id: uuid::Uuid = m["id"].as_str().unwrap_or_default().parse()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let written: i64 =
            sqlx::query_scalar("SELECT count(*) FROM message_events WHERE message_id = $1 AND kind = 'opened'")
                .bind(id)
                .fetch_one(&app.owner)
                .await?;
        let dropped = herald_engine::tracking::HitCounters::get(&app.hits.dropped) - dropped_before;
        if written as u64 + dropped == BURST {
            assert!(dropped > 0, "{BURST} pixels at once, none dropped: the writes are not bounded");
            assert!(written > 0);
            break;
        }
        assert!(Instant::now() < deadline, "{written} written + {dropped} dropped != {BURST}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Once a message's data has gone out, it is never requeued as a failed attempt.
/// A 250 that Postgres refuses to record (not a lost connection: nothing to retry) used to send
/// the message back to the queue disarmed, so its second copy was counted nowhere. Now the row
/// stays armed, the loop gives up its lease, and the reaper counts the next copy as ambiguous;
/// both copies carry the same Message-ID.
#[tokio::test]
async fn a_250_that_cannot_be_recorded_is_left_armed_for_the_reaper_not_requeued_uncounted() -> TestResult {
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let api = workspace(&app, "tx-unrecorded@example.com").await;
    let vars = json!({"name": "U", "url": "https://tx.test"});
    let (status, m) =
        api.send_message("kept-1", &json!({"to": "kept@example.com", "template": "reset", "variables": vars})).await;
    assert_eq!(status, StatusCode::CREATED, "{m}");
    let id: uuid::Uuid = m["id"].as_str().unwrap_or_default().parse()?;
    // Postgres refuses the `sent` write, and only that one.
    for stmt in [
        "CREATE FUNCTION refuse_sent() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
        "CREATE TRIGGER refuse_sent BEFORE UPDATE ON messages FOR EACH ROW WHEN (NEW.status = 'sent') EXECUTE FUNCTION refuse_sent()",
    ] {
        sqlx::query(stmt).execute(&app.owner).await?;
    }
    let mut config = TxDeliveryConfig::new("unrecorded-test".into(), app.app.default_identity.clone());
    config.lease = Duration::from_secs(2);
    let cx = tx_context(&app, config);
    let mut sender = Sender::new(&cx);
    assert_eq!(sender.run_once().await?, 1);
    let row = || async {
        sqlx::query_as::<_, (String, bool, i32)>("SELECT status, armed, ambiguous FROM messages WHERE id = $1")
            .bind(id)
            .fetch_one(&app.owner)
            .await
    };
    let copies =
        || async { app.sink.deliveries().await.into_iter().filter(|d| d.rcpt_to == "kept@example.com").count() };
    assert_eq!(copies().await, 1);
    assert_eq!(row().await?, ("sending".into(), true, 0), "the delivered message must stay armed under its lease");

    sqlx::query("DROP TRIGGER refuse_sent ON messages").execute(&app.owner).await?;
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    sqlx::query("SELECT reap_expired_leases()").execute(&app.owner).await?;
    assert_eq!(row().await?, ("queued".into(), false, 1), "the reaper counts the armed row");
    assert_eq!(sender.run_once().await?, 1);
    assert_eq!(row().await?, ("sent".into(), false, 1));
    let ids: std::collections::BTreeSet<Option<String>> = app
        .sink
        .deliveries()
        .await
        .into_iter()
        .filter(|d| d.rcpt_to == "kept@example.com")
        .map(|d| d.message_id)
        .collect();
    assert_eq!((copies().await, ids.len()), (2, 1), "two copies, one Message-ID: {ids:?}");
    sender.close().await;
    Ok(())
}

/// `Anna@Exämple.com` and `anna@xn--exmple-cua.com` are one mailbox. Typed either
/// way it is one idempotent request (main at d7b2561 answered the second spelling 409, "a
/// different request"), one suppression (it answered 201 and mailed a suppressed mailbox), and
/// the message goes to the A-label.
#[tokio::test]
async fn one_mailbox_typed_two_ways_is_one_request_and_one_suppression() -> TestResult {
    let app = spawn_app().await;
    let api = workspace(&app, "tx-mailbox@example.com").await;
    let body =
        |to: &str| json!({"to": to, "template": "reset", "variables": {"name": "Anna", "url": "https://tx.test/r"}});
    let (status, first) = api.send_message("anna-1", &body("Anna@Exämple.com")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["to_email"], "anna@xn--exmple-cua.com");
    let (status, again) = api.send_message("anna-1", &body("ANNA@xn--exmple-cua.com")).await;
    assert_eq!(status, StatusCode::OK, "the same request typed another way: {again}");
    assert_eq!(again["id"], first["id"]);
    assert!(app.sink.wait_for_recipient("anna@xn--exmple-cua.com", Duration::from_secs(10)).await.is_some());

    let (status, added) =
        api.post("/api/v1/suppressions", json!({"emails": ["ANNA@EXÄMPLE.COM"], "reason": "manual"})).await;
    assert_eq!((status, added["suppressed"].as_i64()), (StatusCode::OK, Some(1)), "{added}");
    let (status, err) = api.send_message("anna-2", &body("anna@xn--exmple-cua.com")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a suppressed mailbox typed another way: {err}");
    let (_, listed) = api.get("/api/v1/suppressions?q=anna").await;
    let listed: Vec<&str> =
        listed["data"].as_array().into_iter().flatten().filter_map(|s| s["email_lower"].as_str()).collect();
    assert_eq!(listed, ["anna@xn--exmple-cua.com"]);
    // Removed under a third spelling (percent-encoded in the path, as a client sends it).
    let (status, _) = api.send(reqwest::Method::DELETE, "/api/v1/suppressions/Anna@Ex%C3%A4mple.com", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = api.send_message("anna-3", &body("anna@exämple.com")).await;
    assert_eq!(status, StatusCode::CREATED);
    Ok(())
}

/// Workspaces get a fair share of the transactional stream. A busy workspace queued
/// 40 messages, then a quiet one queued 3: the claim took the oldest first across workspaces
/// (main at d7b2561), so a batch of 10 was all the busy one's and the quiet one's waited behind
/// its whole backlog. Now every workspace's oldest go first, round-robin.
#[tokio::test]
async fn a_busy_workspace_does_not_hold_up_another_workspaces_transactional_mail() -> TestResult {
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    app.owner_with_workspace("tx-busy@example.com", "Busy Co").await;
    app.owner_with_workspace("tx-quiet@example.com", "Quiet Co").await;
    for (name, n, age) in [("Busy Co", 40, "10 minutes"), ("Quiet Co", 3, "1 second")] {
        sqlx::query(
            "INSERT INTO messages (id, tenant_id, idempotency_key, request_hash, to_email, from_email, subject, html,
                                   text_body, next_attempt_at, created_at)
             SELECT gen_random_uuid(), t.id, 'k' || g, 'h', replace(lower(t.name), ' ', '-') || g || '@example.com', 'app@example.com',
                    'Code', '<p>1</p>', '1', now() - $3::interval + g * interval '1 ms', now()
             FROM tenants t, generate_series(1, $2) g WHERE t.name = $1",
        )
        .bind(name)
        .bind(n)
        .bind(age)
        .execute(&app.owner)
        .await?;
    }
    let mut config = TxDeliveryConfig::new("fair-share-test".into(), app.app.default_identity.clone());
    config.batch_size = 10;
    let cx = tx_context(&app, config);
    let mut sender = Sender::new(&cx);
    assert_eq!(sender.run_once().await?, 10);
    let quiet = app.sink.deliveries().await.into_iter().filter(|d| d.rcpt_to.starts_with("quiet-co")).count();
    assert_eq!(quiet, 3, "the quiet workspace's messages go in the first batch");
    sender.close().await;
    Ok(())
}
