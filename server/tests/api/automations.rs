//! Automations: a welcome sequence over a controllable clock (each reader gets each
//! step once, in order, at its time), leaving on unsubscribe, re-entry rules, editing a live
//! automation, an API event's data in the mail, two schedulers at once, isolation, and a
//! scheduler shared fairly: one workspace's failing automation stops no other, and each
//! workspace gets its turn in a tick.
//!
//! The clock: the app's own scheduler runs on the real clock (steps due now go out on their
//! own); the tests move time forward by running `scheduler::tick` at a later instant, which is
//! what the scheduler compares every due time with.

use chrono::{Duration as Span, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;
use herald_engine::automations::scheduler;

fn email(subject: &str, body: &str) -> Value {
    json!({"action": {"kind": "email", "subject": subject, "body": body}})
}

fn wait(amount: u32, unit: &str) -> Value {
    json!({"action": {"kind": "wait", "amount": amount, "unit": unit}})
}

/// Runs the scheduler `ahead` from now, and lets delivery send what it queued.
async fn tick_at(app: &TestApp, ahead: Span) -> u64 {
    scheduler::tick(&app.app.db, &app.app.jobs, Utc::now() + ahead).await.expect("scheduler tick")
}

/// Subjects each address received, in the order they arrived.
async fn inbox(app: &TestApp) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut mails = app.sink.messages().await;
    mails.sort_by_key(|m| m.id);
    for m in mails {
        let subject = m.parse().subject;
        for to in m.rcpt_to {
            out.entry(to).or_default().push(subject.clone());
        }
    }
    out
}

/// Waits until `n` messages were caught, then a little more to see that no extra copy follows.
pub(crate) async fn expect_mail_count(app: &TestApp, n: u64) {
    assert!(app.sink.wait_for_count(n, Duration::from_secs(30)).await, "expected {n} messages");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(app.sink.messages().await.len() as u64, n, "no more than {n} messages");
}

/// The id of the reader with this address.
async fn reader_id(app: &TestApp, email: String) -> i64 {
    sqlx::query_scalar("SELECT id FROM readers WHERE email = $1")
        .bind(email)
        .fetch_one(&app.owner)
        .await
        .expect("reader")
}

pub(crate) async fn create_live(api: &Api, body: Value) -> String {
    let (status, a) = api.post("/api/v1/automations", body).await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    let id = a["id"].as_str().expect("id").to_string();
    let (status, live) = api.post(&format!("/api/v1/automations/{id}/start"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{live}");
    assert_eq!(live["status"], "live");
    id
}

#[tokio::test]
async fn a_welcome_sequence_sends_each_step_once_in_order_at_its_time() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "welcome@example.com", 1).await;
    let steps = json!([
        email("Welcome, {{ reader.name }}", "Glad you are here."),
        wait(2, "days"),
        email("Day two", "Here is what we write about."),
        wait(3, "days"),
        email("Day five", "Our best issues."),
    ]);
    let id = create_live(
        &api,
        json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list}, "steps": steps}),
    )
    .await;
    // Campaign routes cannot touch a step's campaign, and it is not listed among campaigns.
    let (_, a) = api.get(&format!("/api/v1/automations/{id}")).await;
    let first_campaign = a["steps"][0]["campaign_id"].as_str().expect("email step campaign").to_string();
    let (status, _) = api.post(&format!("/api/v1/campaigns/{first_campaign}/pause"), json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (_, campaigns) = api.get("/api/v1/campaigns").await;
    assert_eq!(campaigns["data"].as_array().map(Vec::len), Some(0), "{campaigns}");

    // Readers confirmed on the list enter (the app's own scheduler sends step 1 on its own).
    let readers: Vec<Value> =
        (1..=6).map(|i| json!({"email": format!("w{i}@example.com"), "name": format!("W{i}")})).collect();
    let (status, body) = api.post("/api/v1/readers/bulk", json!({"readers": readers, "lists": [list]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    expect_mail_count(&app, 6).await;
    assert_eq!(inbox(&app).await["w1@example.com"], vec!["Welcome, W1"]);

    // w6 unsubscribes mid-sequence: they leave at once, and get nothing more.
    let w6: i64 =
        sqlx::query_scalar("SELECT id FROM readers WHERE email = 'w6@example.com'").fetch_one(&app.owner).await?;
    let (status, body) =
        api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{w6}/subscriptions/{list}"), None).await;
    assert!(status.is_success(), "{status} {body}");
    let (_, runs) = api.get(&format!("/api/v1/readers/{w6}/automations")).await;
    assert_eq!(runs[0]["state"], "exited", "{runs}");
    assert_eq!(runs[0]["exit_reason"], "unsubscribed", "{runs}");

    // A day on: still waiting. Two days on: step 3 for the five who stayed.
    tick_at(&app, Span::days(1)).await;
    expect_mail_count(&app, 6).await;
    tick_at(&app, Span::days(2) + Span::minutes(1)).await;
    expect_mail_count(&app, 11).await;
    // Running the same instant again (a second scheduler, a retried tick) sends nothing more.
    tick_at(&app, Span::days(2) + Span::minutes(1)).await;
    expect_mail_count(&app, 11).await;
    tick_at(&app, Span::days(5) + Span::minutes(2)).await;
    expect_mail_count(&app, 16).await;

    let got = inbox(&app).await;
    for i in 1..=5 {
        let want = vec![format!("Welcome, W{i}"), "Day two".into(), "Day five".into()];
        assert_eq!(got[&format!("w{i}@example.com")], want, "reader {i}");
    }
    assert_eq!(got["w6@example.com"], vec!["Welcome, W6"]);

    // The report: six entered, five finished, one left; each step's figures.
    let (_, report) = api.get(&format!("/api/v1/automations/{id}/report")).await;
    assert_eq!(
        (report["entered"].as_i64(), report["finished"].as_i64(), report["exited"].as_i64()),
        (Some(6), Some(5), Some(1)),
        "{report}"
    );
    let entered: Vec<i64> =
        report["steps"].as_array().expect("steps").iter().map(|s| s["entered"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(entered, vec![6, 6, 5, 5, 5], "{report}");
    let sent: Vec<i64> =
        report["steps"].as_array().expect("steps").iter().map(|s| s["sent"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(sent, vec![6, 0, 5, 0, 5], "{report}");

    // Re-entry "once": confirming w6 again lets nobody in twice.
    let (status, body) = api.post(&format!("/api/v1/readers/{w6}/subscriptions"), json!({"lists": [list]})).await;
    assert!(status.is_success(), "{status} {body}");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM automation_runs WHERE reader_id = $1")
        .bind(w6)
        .fetch_one(&app.owner)
        .await?;
    assert_eq!(runs, 1);
    Ok(())
}

#[tokio::test]
async fn an_event_lets_a_reader_in_with_its_data_in_the_mail() -> TestResult {
    let app = spawn_app().await;
    let (api, _list) = workspace_with_readers(&app, "events@example.com", 2).await;
    create_live(
        &api,
        json!({"name": "Receipt", "trigger": {"kind": "event", "name": "order_placed"},
               "steps": [email("Order {{ event.order }}", "Thanks for order {{ event.order }} of {{ event.total }}.")]}),
    )
    .await;
    let reader: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE email = 'events-r1@example.com'")
        .fetch_one(&app.owner)
        .await?;
    let path = format!("/api/v1/readers/{reader}/events");
    let (status, body) = api.post(&path, json!({"name": "order placed"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) = api.post(&path, json!({"name": "order_placed", "data": [1, 2]})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, body) = api.post("/api/v1/readers/999999999/events", json!({"name": "order_placed"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = api.post(&path, json!({"name": "nobody_listens"})).await;
    assert_eq!((status, body["entered"].as_i64()), (StatusCode::OK, Some(0)), "{body}");

    let (status, body) =
        api.post(&path, json!({"name": "order_placed", "data": {"order": 1234, "total": "€12.50"}})).await;
    assert_eq!((status, body["entered"].as_i64()), (StatusCode::OK, Some(1)), "{body}");
    expect_mail_count(&app, 1).await;
    let mail = app.sink.messages().await.remove(0).parse();
    assert_eq!(mail.subject, "Order 1234");
    assert!(mail.text.unwrap_or_default().contains("Thanks for order 1234 of €12.50."));
    Ok(())
}

#[tokio::test]
async fn re_entry_follows_each_automations_rule() -> TestResult {
    let app = spawn_app().await;
    let (api, _list) = workspace_with_readers(&app, "reentry@example.com", 1).await;
    let reader: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE email = 'reentry-r1@example.com'")
        .fetch_one(&app.owner)
        .await?;
    for rule in ["once", "after_finish", "every_time"] {
        create_live(
            &api,
            json!({"name": rule, "reentry": rule, "trigger": {"kind": "event", "name": format!("go_{rule}")},
                   "steps": [wait(1, "hours"), email(&format!("{rule} {{{{ event.n }}}}"), "Hi")]}),
        )
        .await;
    }
    let fire = |rule: &'static str, n: i64| {
        let api = &api;
        async move {
            let (status, body) = api
                .post(
                    &format!("/api/v1/readers/{reader}/events"),
                    json!({"name": format!("go_{rule}"), "data": {"n": n}}),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body["entered"].as_i64().unwrap_or(-1)
        }
    };
    // Twice while the first run still waits.
    assert_eq!((fire("once", 1).await, fire("once", 2).await), (1, 0));
    assert_eq!((fire("after_finish", 1).await, fire("after_finish", 2).await), (1, 0));
    assert_eq!((fire("every_time", 1).await, fire("every_time", 2).await), (1, 1));
    // The hour passes: every run finishes, each with its own mail (and Message-ID).
    tick_at(&app, Span::hours(1) + Span::minutes(1)).await;
    expect_mail_count(&app, 4).await;
    // Again, after they finished.
    assert_eq!(fire("once", 3).await, 0);
    assert_eq!(fire("after_finish", 3).await, 1);
    assert_eq!(fire("every_time", 3).await, 1);
    tick_at(&app, Span::hours(1) + Span::minutes(1)).await;
    expect_mail_count(&app, 6).await;
    let mut subjects: Vec<String> = app.sink.messages().await.iter().map(|m| m.parse().subject).collect();
    subjects.sort();
    assert_eq!(
        subjects,
        ["after_finish 1", "after_finish 3", "every_time 1", "every_time 2", "every_time 3", "once 1"]
    );
    let ids: std::collections::BTreeSet<String> = app
        .sink
        .messages()
        .await
        .iter()
        .filter_map(|m| m.parse().headers.into_iter().find(|(k, _)| k.eq_ignore_ascii_case("message-id")).map(|h| h.1))
        .collect();
    assert_eq!(ids.len(), 6, "each run's mail has its own Message-ID: {ids:?}");
    Ok(())
}

#[tokio::test]
async fn editing_a_live_automation_moves_waiting_readers_as_the_author_chose() -> TestResult {
    let app = spawn_app().await;
    let (api, _list) = workspace_with_readers(&app, "editing@example.com", 3).await;
    let body = json!({"name": "Drip", "trigger": {"kind": "event", "name": "joined"},
                      "steps": [email("One", "1"), wait(1, "days"), email("Two", "2"), wait(1, "days"), email("Three", "3")]});
    let id = create_live(&api, body).await;
    let readers: Vec<i64> = sqlx::query_scalar("SELECT id FROM readers WHERE email LIKE 'editing-r%' ORDER BY id")
        .fetch_all(&app.owner)
        .await?;
    for r in &readers {
        let (status, body) = api.post(&format!("/api/v1/readers/{r}/events"), json!({"name": "joined"})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    expect_mail_count(&app, 3).await;
    let (_, a) = api.get(&format!("/api/v1/automations/{id}")).await;
    let steps = a["steps"].as_array().expect("steps").clone();
    let step = |i: usize, action: Value| json!({"id": steps[i]["id"], "action": action});
    // Remove the first wait (readers wait there now) and rename "Two": they go on to it at once.
    let edit = json!({"name": "Drip", "trigger": {"kind": "event", "name": "joined"}, "removed_step_readers": "next",
                      "steps": [step(0, steps[0]["action"].clone()), step(2, email("Two, edited", "2")["action"].clone()),
                                step(3, steps[3]["action"].clone()), step(4, steps[4]["action"].clone())]});
    let (status, edited) = api.put(&format!("/api/v1/automations/{id}"), edit).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["steps"].as_array().map(Vec::len), Some(4));
    assert_eq!(edited["steps"][1]["id"], steps[2]["id"], "step ids stay");
    tick_at(&app, Span::minutes(1)).await;
    expect_mail_count(&app, 6).await;
    // Now they wait at the second wait; remove it and the last email, letting them exit.
    let edit = json!({"name": "Drip", "trigger": {"kind": "event", "name": "joined"}, "removed_step_readers": "exit",
                      "steps": [step(0, steps[0]["action"].clone()), step(2, email("Two, edited", "2")["action"].clone())]});
    let (status, edited) = api.put(&format!("/api/v1/automations/{id}"), edit).await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    tick_at(&app, Span::days(3)).await;
    expect_mail_count(&app, 6).await;
    let (_, report) = api.get(&format!("/api/v1/automations/{id}/report")).await;
    assert_eq!(report["exited"], 3, "{report}");
    let subjects: Vec<String> = inbox(&app).await.remove("editing-r1@example.com").unwrap_or_default();
    assert_eq!(subjects, ["One", "Two, edited"]);

    // Archived: it cannot be edited or started again.
    let (status, _) = api.post(&format!("/api/v1/automations/{id}/archive"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = api.post(&format!("/api/v1/automations/{id}/start"), json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    Ok(())
}

#[tokio::test]
async fn schedulers_racing_over_the_same_readers_run_each_step_once() -> TestResult {
    let app = spawn_app().await;
    let n = 300;
    let (api, _list) = workspace_with_readers(&app, "racing@example.com", n).await;
    let id = create_live(
        &api,
        json!({"name": "Race", "trigger": {"kind": "event", "name": "race"},
               "steps": [wait(1, "hours"), email("Once", "Hi"), wait(1, "hours"), email("Twice", "Hi")]}),
    )
    .await;
    sqlx::query(
        "SELECT automation_enter('event', array_agg(tenant_id), array_agg('race'::text), array_agg(id), NULL)
         FROM readers WHERE email LIKE 'racing-r%'",
    )
    .execute(&app.owner)
    .await?;
    // Four schedulers at once, over each wait (the second waits for the first mails: a run's
    // next step waits for its last mail to be out).
    for hours in [1, 2] {
        let ticks = (0..4).map(|_| tick_at(&app, Span::hours(hours) + Span::minutes(1)));
        let moved: u64 = futures::future::join_all(ticks).await.into_iter().sum();
        assert_eq!(moved, 2 * n as u64, "each run's two due steps ran once, by one scheduler");
        expect_mail_count(&app, hours as u64 * n as u64).await;
    }
    let dup: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT email, campaign_id FROM sends s JOIN campaigns c ON c.id = s.campaign_id
                               WHERE c.automation_id::text = $1 GROUP BY 1, 2 HAVING count(*) > 1) d",
    )
    .bind(&id)
    .fetch_one(&app.owner)
    .await?;
    assert_eq!(dup, 0);
    Ok(())
}

#[tokio::test]
async fn automations_stay_in_their_workspace() -> TestResult {
    let app = spawn_app().await;
    let (a, _) = workspace_with_readers(&app, "iso-a@example.com", 1).await;
    let (b, _) = workspace_with_readers(&app, "iso-b@example.com", 1).await;
    let body = json!({"name": "Mine", "trigger": {"kind": "event", "name": "ping"}, "steps": [email("A's", "Hi")]});
    let id_a = create_live(&a, body.clone()).await;
    let id_b = create_live(
        &b,
        json!({"name": "B", "trigger": {"kind": "event", "name": "ping"}, "steps": [email("B's", "Hi")]}),
    )
    .await;
    for path in [
        format!("/api/v1/automations/{id_a}"),
        format!("/api/v1/automations/{id_a}/report"),
        format!("/api/v1/automations/{id_a}/runs"),
    ] {
        let (status, _) = b.get(&path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    for action in ["start", "pause", "archive"] {
        let (status, _) = b.post(&format!("/api/v1/automations/{id_a}/{action}"), json!({})).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{action}");
    }
    let (status, _) = b.put(&format!("/api/v1/automations/{id_a}"), body).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let reader_a: i64 =
        sqlx::query_scalar("SELECT id FROM readers WHERE email = 'iso-a-r1@example.com'").fetch_one(&app.owner).await?;
    // B cannot fire an event for A's reader; A's event enters only A's automation.
    let (status, _) = b.post(&format!("/api/v1/readers/{reader_a}/events"), json!({"name": "ping"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = a.post(&format!("/api/v1/readers/{reader_a}/events"), json!({"name": "ping"})).await;
    assert_eq!((status, body["entered"].as_i64()), (StatusCode::OK, Some(1)), "{body}");
    expect_mail_count(&app, 1).await;
    assert_eq!(app.sink.messages().await[0].parse().subject, "A's");
    let (_, report_b) = b.get(&format!("/api/v1/automations/{id_b}/report")).await;
    assert_eq!(report_b["entered"], 0);
    // A tag trigger names a tag of the workspace only.
    let (status, tag) = b.post(&format!("/api/v1/readers/{reader_a}/tags"), json!({"tags": ["x"]})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{tag}");
    Ok(())
}

#[tokio::test]
async fn a_branch_sends_openers_and_the_others_their_own_way() -> TestResult {
    let app = spawn_app().await;
    let (api, _list) = workspace_with_readers(&app, "branch@example.com", 4).await;
    let reader = |i: usize| format!("branch-r{i}@example.com");
    let id_of = |i: usize| reader_id(&app, reader(i));
    for i in [1, 3] {
        let (status, body) =
            api.post(&format!("/api/v1/readers/{}/tags", id_of(i).await), json!({"tags": ["VIP"]})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, tags) = api.get("/api/v1/tags").await;
    let vip = tags[0]["id"].clone();
    let branch = |condition: Value, if_yes: Value, if_no: Value| json!({"action": {"kind": "branch", "condition": condition, "if_yes": if_yes, "if_no": if_no}});
    let steps = json!([
        email("First", "Hi"),
        wait(1, "days"),
        branch(json!({"kind": "opened", "step": 0}), json!({"kind": "step", "index": 4}), json!({"kind": "next"})),
        email("Did you see this?", "Reminder"),
        email("Thanks for reading", "Thanks"),
        branch(json!({"kind": "has_tag", "tag_id": vip}), json!({"kind": "next"}), json!({"kind": "exit"})),
        email("VIP only", "Hello VIP"),
    ]);
    // A branch may only test an earlier mail and go forward.
    let (status, bad) = api
        .post("/api/v1/automations", json!({"name": "Bad", "trigger": {"kind": "event", "name": "b"},
            "steps": [branch(json!({"kind": "opened", "step": 1}), json!({"kind": "next"}), json!({"kind": "step", "index": 0})), email("x", "y")]}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    assert!(bad["fields"]["steps.0.condition"].is_string() && bad["fields"]["steps.0.if_no"].is_string(), "{bad}");

    let id =
        create_live(&api, json!({"name": "Nudge", "trigger": {"kind": "event", "name": "joined"}, "steps": steps}))
            .await;
    for i in 1..=4 {
        let (status, body) =
            api.post(&format!("/api/v1/readers/{}/events", id_of(i).await), json!({"name": "joined"})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    expect_mail_count(&app, 4).await;
    // r1 and r2 open "First"; r3's only open is a privacy proxy's, which does not count.
    let (_, a) = api.get(&format!("/api/v1/automations/{id}")).await;
    let first = a["steps"][0]["campaign_id"].as_str().expect("campaign").to_string();
    for (i, prefetch) in [(1, false), (2, false), (3, true)] {
        sqlx::query(
            "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, prefetch)
             SELECT tenant_id, $1::uuid, id, 'open', $3 FROM readers WHERE email = $2",
        )
        .bind(&first)
        .bind(reader(i))
        .bind(prefetch)
        .execute(&app.owner)
        .await?;
    }
    // A day on, a minute at a time until every run ended (a run's next step waits until its
    // last mail is out, so each pass moves a run at most past one mail).
    for minute in 1..=40 {
        tick_at(&app, Span::days(1) + Span::minutes(minute)).await;
        let waiting: i64 = sqlx::query_scalar("SELECT count(*) FROM automation_runs WHERE state = 'waiting'")
            .fetch_one(&app.owner)
            .await?;
        if waiting == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    expect_mail_count(&app, 12).await;
    let got = inbox(&app).await;
    assert_eq!(got[&reader(1)], ["First", "Thanks for reading", "VIP only"]);
    assert_eq!(got[&reader(2)], ["First", "Thanks for reading"]);
    assert_eq!(got[&reader(3)], ["First", "Did you see this?", "Thanks for reading", "VIP only"]);
    assert_eq!(got[&reader(4)], ["First", "Did you see this?", "Thanks for reading"]);
    let (_, report) = api.get(&format!("/api/v1/automations/{id}/report")).await;
    let entered: Vec<i64> =
        report["steps"].as_array().expect("steps").iter().map(|s| s["entered"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(entered, vec![4, 4, 4, 2, 4, 4, 2], "{report}");
    assert_eq!(report["finished"], 4, "{report}");
    Ok(())
}

#[tokio::test]
async fn periodic_triggers_let_in_new_segment_members_and_todays_anniversaries() -> TestResult {
    let app = spawn_app().await;
    let (api, _list) = workspace_with_readers(&app, "periodic@example.com", 3).await;
    let reader = |i: usize| format!("periodic-r{i}@example.com");
    let id_of = |i: usize| reader_id(&app, reader(i));
    // A segment of VIPs, r1 in it from the start.
    let tag = |i: usize| {
        let api = &api;
        async move {
            let (status, body) =
                api.post(&format!("/api/v1/readers/{}/tags", id_of(i).await), json!({"tags": ["VIP"]})).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    };
    tag(1).await;
    let (_, tags) = api.get("/api/v1/tags").await;
    let (status, segment) = api
        .post("/api/v1/segments", json!({"name": "VIPs", "definition": {"match": "all", "rules": [{"kind": "tag", "tag_id": tags[0]["id"], "has": true}]}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{segment}");
    // Birthdays: r2's is today (another year), r3's tomorrow.
    let (status, body) =
        api.post("/api/v1/fields", json!({"key": "birthday", "label": "Birthday", "kind": "date"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let today = Utc::now().date_naive();
    for (i, day) in [(2, today), (3, today + Span::days(1))] {
        let date = format!("1990-{}", day.format("%m-%d"));
        let (status, body) = api
            .send(
                reqwest::Method::PATCH,
                &format!("/api/v1/readers/{}", id_of(i).await),
                Some(json!({"attributes": {"birthday": date}})),
            )
            .await;
        assert!(status.is_success(), "{status} {body}");
    }
    let (status, bad) = api
        .post(
            "/api/v1/automations",
            json!({"name": "x", "trigger": {"kind": "date_anniversary", "field": "nope"}, "steps": [email("x", "y")]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    create_live(
        &api,
        json!({"name": "VIP welcome", "trigger": {"kind": "segment_entered", "segment_id": segment["id"]},
                             "steps": [email("Welcome to the VIPs", "Hi")]}),
    )
    .await;
    create_live(&api, json!({"name": "Birthday", "reentry": "every_time", "trigger": {"kind": "date_anniversary", "field": "birthday"},
                             "steps": [email("Happy birthday", "Hi")]}))
    .await;
    // The first check: the birthday today; r1, a VIP already, does not count as entering.
    tick_at(&app, Span::zero()).await;
    expect_mail_count(&app, 1).await;
    // r2 becomes a VIP: the next check (a minute on) lets them in; the birthday is not sent twice.
    tag(2).await;
    tick_at(&app, Span::seconds(61)).await;
    expect_mail_count(&app, 2).await;
    tick_at(&app, Span::seconds(125)).await;
    expect_mail_count(&app, 2).await;
    let got = inbox(&app).await;
    assert_eq!(got[&reader(2)], ["Happy birthday", "Welcome to the VIPs"]);
    assert!(!got.contains_key(&reader(1)) && !got.contains_key(&reader(3)), "{got:?}");
    Ok(())
}

/// A client that retries an event after a lost reply enters the reader once: the same key and
/// body answer the first response, another body under the key is refused, and copies sent at
/// the same moment enter once between them. Without a key, each call is a new event.
#[tokio::test]
async fn an_event_sent_again_with_its_idempotency_key_enters_once() -> TestResult {
    let app = spawn_app().await;
    let (api, _list) = workspace_with_readers(&app, "retries@example.com", 1).await;
    create_live(
        &api,
        json!({"name": "Receipt", "reentry": "every_time", "trigger": {"kind": "event", "name": "paid"},
               "steps": [email("Receipt {{ event.order }}", "Thanks.")]}),
    )
    .await;
    let reader = reader_id(&app, "retries-r1@example.com".into()).await;
    let url = format!("{}/api/v1/readers/{reader}/events", app.base);
    let post = |key: Option<&'static str>, order: i64| {
        let mut req = reqwest::Client::new()
            .post(&url)
            .bearer_auth(&api.key)
            .json(&json!({"name": "paid", "data": {"order": order}}));
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        async move {
            let res = req.send().await.expect("request");
            let status = res.status();
            (status, res.json::<Value>().await.unwrap_or_default())
        }
    };
    let (status, first) = post(Some("order-1"), 1).await;
    assert_eq!((status, first["entered"].as_i64()), (StatusCode::OK, Some(1)), "{first}");
    let (status, again) = post(Some("order-1"), 1).await;
    assert_eq!((status, &again), (StatusCode::OK, &first), "a replay answers the first response");
    let (status, other) = post(Some("order-1"), 2).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "the key with another body: {other}");
    // Five copies at once, one key: one entry.
    let copies = futures::future::join_all((0..5).map(|_| post(Some("order-3"), 3))).await;
    assert!(copies.iter().all(|(s, b)| *s == StatusCode::OK && b["entered"] == 1), "{copies:?}");
    // Without a key, a second call is a second event (re-entry "every time").
    assert_eq!(post(None, 4).await.1["entered"], 1);
    assert_eq!(post(None, 4).await.1["entered"], 1);
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM automation_runs WHERE reader_id = $1")
        .bind(reader)
        .fetch_one(&app.owner)
        .await?;
    assert_eq!(runs, 4, "order-1 once, order-3 once, and the two without a key");
    expect_mail_count(&app, 4).await;
    Ok(())
}

/// An archived automation's step campaign ends `cancelled`, not `sent`: a message a loop still
/// held when the automation was archived, given back afterwards, ends `cancelled` too instead
/// of waiting in the queue of a campaign no loop will ever send again.
#[tokio::test]
async fn a_row_given_back_after_its_automation_was_archived_is_cancelled_not_left_queued() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "archived@example.com", 0).await;
    let id = create_live(
        &api,
        json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list},
               "steps": [email("Welcome", "Hello")]}),
    )
    .await;
    let (status, body) =
        api.post("/api/v1/readers/bulk", json!({"readers": [{"email": "held@example.com"}], "lists": [list]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    expect_mail_count(&app, 1).await;
    let (_, a) = api.get(&format!("/api/v1/automations/{id}")).await;
    let campaign = a["steps"][0]["campaign_id"].as_str().expect("step campaign").to_string();
    // A loop holds a message of the step (as if claimed a moment before the archive).
    sqlx::query("UPDATE sends SET status = 'sending' WHERE campaign_id = $1::uuid")
        .bind(&campaign)
        .execute(&app.owner)
        .await?;
    let (status, body) = api.post(&format!("/api/v1/automations/{id}/archive"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let state: String = sqlx::query_scalar("SELECT status FROM campaigns WHERE id = $1::uuid")
        .bind(&campaign)
        .fetch_one(&app.owner)
        .await?;
    assert_eq!(state, "cancelled");
    // The loop gives the message back (a soft failure, a lost lease).
    sqlx::query("UPDATE sends SET status = 'queued' WHERE campaign_id = $1::uuid")
        .bind(&campaign)
        .execute(&app.owner)
        .await?;
    let row: String = sqlx::query_scalar("SELECT status FROM sends WHERE campaign_id = $1::uuid")
        .bind(&campaign)
        .fetch_one(&app.owner)
        .await?;
    assert_eq!(row, "cancelled");
    Ok(())
}

/// Lets each of `readers` (addresses) into the workspace's automations triggered by `event`;
/// each enters `per_reader` of them.
async fn fire_for(app: &TestApp, api: &Api, event: &str, readers: &[&str], per_reader: i64) {
    for email in readers {
        let r = reader_id(app, email.to_string()).await;
        let (status, body) = api.post(&format!("/api/v1/readers/{r}/events"), json!({"name": event})).await;
        assert_eq!((status, body["entered"].as_i64()), (StatusCode::OK, Some(per_reader)), "{body}");
    }
}

/// An automation's count of failed turns in a row, and its status.
async fn failures_and_status(app: &TestApp, id: &str) -> (i32, String) {
    sqlx::query_as("SELECT failures, status FROM automations WHERE id = $1::uuid")
        .bind(id)
        .fetch_one(&app.owner)
        .await
        .expect("automation")
}

/// Rewrites the zone of the automation's second step behind the API's back (the API checks it).
async fn set_second_step_zone(app: &TestApp, id: &str, zone: &str) -> TestResult {
    sqlx::query(
        "UPDATE automations SET steps = jsonb_set(steps, '{1,action,zone}', to_jsonb($2::text)) WHERE id = $1::uuid",
    )
    .bind(id)
    .bind(zone)
    .execute(&app.owner)
    .await?;
    Ok(())
}

/// One workspace's broken automation (a step's time zone the server does not know, as after a
/// tzdata update: its batches fail in `automation_advance`) stops neither the tick nor another
/// workspace's mail. After `PAUSE_AFTER_FAILURES` failing ticks it is paused with a reason in
/// plain words (the database's message stays in the logs); fixed and resumed, it carries on.
#[tokio::test]
async fn one_workspaces_failing_automation_does_not_stop_anothers() -> TestResult {
    let app = spawn_app().await;
    let (a, _) = workspace_with_readers(&app, "broken@example.com", 2).await;
    let (b, _) = workspace_with_readers(&app, "healthy@example.com", 2).await;
    let until_nine = json!({"action": {"kind": "wait_until", "time": "09:00", "zone": "Europe/Berlin"}});
    let id_a = create_live(
        &a,
        json!({"name": "Broken", "trigger": {"kind": "event", "name": "joined"},
               "steps": [wait(1, "hours"), until_nine, email("A's", "Hi")]}),
    )
    .await;
    let id_b = create_live(
        &b,
        json!({"name": "Healthy", "trigger": {"kind": "event", "name": "joined"},
               "steps": [wait(1, "hours"), email("B's", "Hi")]}),
    )
    .await;
    fire_for(&app, &a, "joined", &["broken-r1@example.com", "broken-r2@example.com"], 1).await;
    fire_for(&app, &b, "joined", &["healthy-r1@example.com", "healthy-r2@example.com"], 1).await;
    // Saving checks a zone; the server's tzdata can lose it later. Reaching the step now fails.
    set_second_step_zone(&app, &id_a, "Mars/Olympus").await?;

    // Two hours on: the tick goes on past A's failure, and B's readers get their mail.
    tick_at(&app, Span::hours(2)).await;
    expect_mail_count(&app, 2).await;
    let got = inbox(&app).await;
    assert_eq!(got["healthy-r1@example.com"], ["B's"]);
    assert_eq!(got["healthy-r2@example.com"], ["B's"]);
    assert_eq!(failures_and_status(&app, &id_a).await, (1, "live".to_string()));
    assert_eq!(failures_and_status(&app, &id_b).await, (0, "live".to_string()));

    // Two more failing ticks: paused, with a reason its author can act on.
    tick_at(&app, Span::hours(2)).await;
    assert_eq!(failures_and_status(&app, &id_a).await, (2, "live".to_string()));
    tick_at(&app, Span::hours(2)).await;
    let (status, body) = a.get(&format!("/api/v1/automations/{id_a}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "paused", "{body}");
    let reason = body["pause_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("Paused after 3 failed attempts in a row"), "{body}");
    let text = body.to_string();
    for database_words in ["not recognized", "database", "automation_advance", "ERROR"] {
        assert!(!text.contains(database_words), "the database's message reached the author: {text}");
    }
    // Paused, it is left alone: no more failures are counted, B is untouched.
    tick_at(&app, Span::hours(2)).await;
    assert_eq!(failures_and_status(&app, &id_a).await, (3, "paused".to_string()));
    let (_, body_b) = b.get(&format!("/api/v1/automations/{id_b}")).await;
    assert_eq!((&body_b["status"], &body_b["pause_reason"]), (&json!("live"), &Value::Null), "{body_b}");
    expect_mail_count(&app, 2).await;

    // Fixed and resumed: the count starts again, and A's readers go on to their mail.
    set_second_step_zone(&app, &id_a, "Europe/Berlin").await?;
    let (status, body) = a.post(&format!("/api/v1/automations/{id_a}/start"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["pause_reason"], Value::Null, "{body}");
    assert_eq!(failures_and_status(&app, &id_a).await, (0, "live".to_string()));
    tick_at(&app, Span::hours(2)).await;
    tick_at(&app, Span::days(2)).await;
    expect_mail_count(&app, 4).await;
    assert_eq!(inbox(&app).await["broken-r1@example.com"], ["A's"]);
    Ok(())
}

/// Each workspace gets a share of a tick. With none to spare (a zero budget) every workspace
/// still runs one batch a tick, and the automation served least recently goes first: a
/// workspace's second automation is not starved by its first, nor another workspace by both.
#[tokio::test]
async fn each_workspace_gets_a_turn_when_a_tick_has_no_time_to_spare() -> TestResult {
    let app = spawn_app().await;
    let (a, _) = workspace_with_readers(&app, "busy@example.com", 1).await;
    let (b, _) = workspace_with_readers(&app, "quiet@example.com", 1).await;
    for (api, name) in [(&a, "A1"), (&a, "A2"), (&b, "B1")] {
        create_live(
            api,
            json!({"name": name, "trigger": {"kind": "event", "name": "joined"},
                   "steps": [wait(1, "hours"), email(name, "Hi")]}),
        )
        .await;
    }
    fire_for(&app, &a, "joined", &["busy-r1@example.com"], 2).await;
    fire_for(&app, &b, "joined", &["quiet-r1@example.com"], 1).await;

    // Each run needs two batches (its wait, then its mail). A tick runs one batch per workspace:
    // 1. A's first automation's wait, B1's wait; 2. A's other automation's wait (never served
    // yet), B1's mail; 3. and 4. the mail of each of A's automations, the least recently served
    // first; then nothing is due.
    let at = Utc::now() + Span::hours(2);
    let mut steps = Vec::new();
    for tick in 1..=5 {
        let report = scheduler::tick_within(&app.app.db, &app.app.jobs, at, Duration::ZERO).await?;
        assert_eq!(report.failed, 0, "{report:?}");
        steps.push(report.steps);
        if tick == 2 {
            // B's reader has their mail before A's second automation was through.
            expect_mail_count(&app, 1).await;
            assert_eq!(inbox(&app).await["quiet-r1@example.com"], ["B1"]);
        }
    }
    assert_eq!(steps, [2, 2, 1, 1, 0]);
    expect_mail_count(&app, 3).await;
    let mut busy = inbox(&app).await.remove("busy-r1@example.com").unwrap_or_default();
    busy.sort();
    assert_eq!(busy, ["A1", "A2"]);
    Ok(())
}

/// A run's life reaches the workspace's webhook endpoints: `automation.entered`,
/// `automation.step_sent` for its email, `automation.exited` when it finishes.
#[tokio::test]
async fn a_runs_life_becomes_webhook_events() -> TestResult {
    let app = spawn_app().await;
    let (api, _list) = workspace_with_readers(&app, "hooked-run@example.com", 1).await;
    let (status, made) = api
        .post(
            "/api/v1/webhook-endpoints",
            json!({"url": "https://hooks.example/herald", "event_types": ["automation.*"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    create_live(
        &api,
        json!({"name": "Receipt", "trigger": {"kind": "event", "name": "paid"},
               "steps": [email("Receipt {{ event.order }}", "Thanks.")]}),
    )
    .await;
    let reader = reader_id(&app, "hooked-run-r1@example.com".into()).await;
    let (status, body) = api.post(&format!("/api/v1/readers/{reader}/events"), json!({"name": "paid"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The reader's receipt (the admins also get a mail about the new endpoint).
    app.sink.wait_for_recipient("hooked-run-r1@example.com", Duration::from_secs(30)).await.expect("the receipt");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        // One of each (they share a transaction's timestamp, so in no telling order).
        let types: Vec<String> =
            sqlx::query_scalar("SELECT type FROM outbound_events ORDER BY type").fetch_all(&app.owner).await?;
        if types == ["automation.entered", "automation.exited", "automation.step_sent"] {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{types:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let exited: Value = sqlx::query_scalar("SELECT data FROM outbound_events WHERE type = 'automation.exited'")
        .fetch_one(&app.owner)
        .await?;
    assert_eq!(
        (exited["reader"]["id"].as_i64(), exited["state"].as_str()),
        (Some(reader), Some("finished")),
        "{exited}"
    );
    Ok(())
}

/// Set up through the API alone, as an integration would: an automation's email steps take the
/// workspace's default sender, which `PATCH /api/v1/workspace` sets (before it, only the settings
/// page could, and the automation could not start).
#[tokio::test]
async fn a_workspace_set_up_through_the_api_alone_can_start_an_automation() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("api-only@example.com", "API only").await;
    let api = Api::for_owner(&app, &owner).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "News", "opt_in": "single"})).await;
    let (status, a) = api
        .post(
            "/api/v1/automations",
            json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list["id"]},
                   "steps": [email("Welcome", "Hello.")]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    let start = format!("/api/v1/automations/{}/start", a["id"].as_str().expect("id"));
    let (status, refused) = api.post(&start, json!({})).await;
    assert!(status.is_client_error(), "no sender yet: {status} {refused}");

    let (status, settings) = api
        .send(
            reqwest::Method::PATCH,
            "/api/v1/workspace",
            Some(json!({"postal_address": "1 Main Street, Lyon", "default_from_name": "The News",
                        "default_from_email": "news@api-only.test", "time_zone": "Europe/Paris"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{settings}");
    assert_eq!(
        (
            settings["default_from_email"].as_str(),
            settings["time_zone"].as_str(),
            settings["can_send_campaigns"].as_bool()
        ),
        (Some("news@api-only.test"), Some("Europe/Paris"), Some(true))
    );
    let (_, again) = api.get("/api/v1/workspace").await;
    assert_eq!((again["name"].as_str(), again["default_from_name"].as_str()), (Some("API only"), Some("The News")));
    let (status, bad) =
        api.send(reqwest::Method::PATCH, "/api/v1/workspace", Some(json!({"time_zone": "Mars/Olympus"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    app.verify_domain(&ws, "api-only.test").await;
    let (status, live) = api.post(&start, json!({})).await;
    assert_eq!((status, live["status"].as_str()), (StatusCode::OK, Some("live")), "{live}");
    Ok(())
}
