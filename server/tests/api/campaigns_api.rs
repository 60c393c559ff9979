//! Campaigns end to end through the real pipeline: the REST API, apalis jobs on Postgres, the
//! supervisor, real SMTP into the sink, and a `herald worker` process killed with SIGKILL.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use herald_app::pages::campaigns::editor::{GetCampaign, SaveCampaign};
use herald_app::pages::settings::general::UpdateWorkspaceSettings;
use herald_types::{CampaignId, CampaignInput};

use crate::helpers::*;
use crate::sending::{SendHarness, addresses};

/// An API client for a new workspace with a postal address and one list of `n` readers.
pub(crate) async fn workspace_with_readers(app: &TestApp, owner_email: &str, n: usize) -> (Api, String) {
    let local = owner_email.split('@').next().unwrap_or(owner_email);
    let (owner, ws) = app.owner_with_workspace(owner_email, &format!("Campaign Co {local}")).await;
    let r = owner
        .run(UpdateWorkspaceSettings {
            name: "Campaign Co".into(),
            postal_address: "1 Main Street, Lyon".into(),
            default_from_name: "Campaign Co".into(),
            default_from_email: "news@campaign.test".into(),
            time_zone: None,
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let api = Api::for_owner(app, &owner).await;
    let (status, list) = api.post("/api/v1/lists", json!({"name": "Weekly", "opt_in": "single"})).await;
    assert_eq!(status, StatusCode::CREATED, "{list}");
    let list_id = list["id"].as_str().expect("list id").to_string();
    if n > 0 {
        let readers: Vec<Value> =
            (1..=n).map(|i| json!({"email": format!("{local}-r{i}@example.com"), "name": format!("R{i}")})).collect();
        let (status, body) = api.post("/api/v1/readers/bulk", json!({"readers": readers, "lists": [list_id]})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["created"], n, "{body}");
    }
    app.verify_domain(&ws, "campaign.test").await;
    (api, list_id)
}

/// The campaign's stats once its status is `want`.
pub(crate) async fn wait_for_status(api: &Api, id: &str, want: &str, timeout: Duration) -> Value {
    api.wait_for_status(&format!("/api/v1/campaigns/{id}/stats"), want, timeout).await
}

#[tokio::test]
async fn a_campaign_sent_through_the_api_reaches_each_reader_once() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "api-owner@example.com", 25).await;
    let (status, draft) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Hello", "subject": "Hi {{ reader.name }}", "list_ids": [list],
                   "body": "Hello {{ reader.name | default(\"friend\") }}"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{draft}");
    let id = draft["id"].as_str().expect("id").to_string();
    assert_eq!(draft["from_email"], "news@campaign.test", "the workspace's default sender fills in");
    // Two concurrent send calls: one send.
    let send = format!("/api/v1/campaigns/{id}/send");
    let (a, b) = tokio::join!(api.post(&send, json!({})), api.post(&send, json!({})));
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [StatusCode::OK, StatusCode::CONFLICT], "{} / {}", a.1, b.1);
    let stats = wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    assert_eq!(stats["sent"], 25, "{stats}");
    // Editing a sent campaign is refused.
    let (status, _) =
        api.send(reqwest::Method::PUT, &format!("/api/v1/campaigns/{id}"), Some(json!({"name": "x"}))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, report) = api.get(&format!("/api/v1/campaigns/{id}/report")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["failures"], json!([]));
    // Exactly one copy each in the app's own mail catcher.
    let deliveries = app.sink.deliveries().await;
    let campaign_mail: Vec<_> = deliveries.iter().filter(|d| d.rcpt_to.contains("-r")).collect();
    let rcpts: BTreeSet<String> = campaign_mail.iter().map(|d| d.rcpt_to.clone()).collect();
    assert_eq!((campaign_mail.len(), rcpts.len()), (25, 25));
    let m = app.sink.wait_for_recipient("api-owner-r3@example.com", Duration::from_secs(1)).await;
    let parsed = m.expect("mail to r3").parse();
    assert_eq!(parsed.subject, "Hi R3");
    assert!(parsed.text.unwrap_or_default().contains("1 Main Street, Lyon"), "the postal address is in every message");
    Ok(())
}

#[tokio::test]
async fn campaigns_are_404_across_workspaces_and_validated() -> TestResult {
    let app = spawn_app().await;
    let (a, list) = workspace_with_readers(&app, "a-owner@example.com", 1).await;
    let (b, _) = workspace_with_readers(&app, "b-owner@example.com", 1).await;
    let (_, draft) = a.post("/api/v1/campaigns", json!({"name": "Mine", "subject": "s", "list_ids": [list]})).await;
    let id = draft["id"].as_str().expect("id").to_string();
    for path in ["", "/stats", "/report"] {
        assert_eq!(b.get(&format!("/api/v1/campaigns/{id}{path}")).await.0, StatusCode::NOT_FOUND);
    }
    for action in ["send", "pause", "resume", "cancel", "retry-failed", "unschedule"] {
        let (status, body) = b.post(&format!("/api/v1/campaigns/{id}/{action}"), json!({})).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{action}: {body}");
    }
    // B cannot send to A's list either: the list is unknown in B's workspace.
    let (_, theirs) = b.post("/api/v1/campaigns", json!({"name": "Sneaky", "subject": "s", "list_ids": [list]})).await;
    let theirs = theirs["id"].as_str().expect("id").to_string();
    let (status, body) = b.post(&format!("/api/v1/campaigns/{theirs}/send"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // Header injection and template errors are refused with a clear message.
    let (status, body) = a.post("/api/v1/campaigns", json!({"name": "Bad", "subject": "Hi\r\nBcc: x@y.z"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (_, broken) =
        a.post("/api/v1/campaigns", json!({"name": "Broken", "subject": "s", "list_ids": [list], "body": "Hi\n{{ reader.name | nosuchfilter }}"})).await;
    let broken = broken["id"].as_str().expect("id").to_string();
    let (status, body) = a.post(&format!("/api/v1/campaigns/{broken}/send"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body["message"].as_str().unwrap_or_default().contains("line 2"), "{body}");
    // Scheduling in the past is refused; in the future it waits.
    let (status, _) = a.post(&format!("/api/v1/campaigns/{id}/schedule"), json!({"at": "2001-01-01T00:00:00Z"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, c) = a
        .post(
            &format!("/api/v1/campaigns/{id}/schedule"),
            json!({"at": "2099-01-01T09:00:00+01:00", "timezone": "Europe/Paris"}),
        )
        .await;
    assert_eq!((status, c["status"].as_str()), (StatusCode::OK, Some("scheduled")));
    let (status, c) = a.post(&format!("/api/v1/campaigns/{id}/unschedule"), json!({})).await;
    assert_eq!((status, c["status"].as_str()), (StatusCode::OK, Some("draft")));
    Ok(())
}

/// Every wrong field comes back at once, keyed by the name it has in the input, from the REST API
/// and from the editor's autosave alike (one contract, one set of checks); choices outside their
/// set are refused before anything is stored.
#[tokio::test]
async fn invalid_campaign_fields_are_named_through_the_api_and_the_editor() -> TestResult {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("fields-owner@example.com", "Fields Co").await;
    let api = Api::for_owner(&app, &owner).await;
    let wrong = json!({"name": " ", "subject": "Hi\nthere", "from_email": "not-an-address", "spread_hours": 500,
                       "attribute_filter": "city ==", "feed": "api"});
    let (status, body) = api.post("/api/v1/campaigns", wrong.clone()).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid")), "{body}");
    for field in ["name", "subject", "from_email", "spread_hours", "attribute_filter", "feed"] {
        assert!(body["fields"][field].is_string(), "{field} not named: {body}");
    }
    assert_eq!(body["fields"]["name"], "Give the campaign a name.");
    let (status, body) = api.post("/api/v1/campaigns", json!({"name": "x", "tracking": "sometimes"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let (status, draft) = api.post("/api/v1/campaigns", json!({"name": "Fine"})).await;
    assert_eq!(status, StatusCode::CREATED, "{draft}");
    assert_eq!((draft["body_format"].as_str(), draft["tracking"].as_str()), (Some("markdown"), Some("on")));
    let id = draft["id"].as_str().expect("id").to_string();
    let (status, body) = api.put(&format!("/api/v1/campaigns/{id}"), wrong).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // The editor's autosave: nothing is saved, and each message is filed under its field.
    let campaign: CampaignId = id.parse()?;
    let input = CampaignInput {
        name: "Renamed".into(),
        reply_to: "nope".into(),
        feed_url: "x".into(),
        ..CampaignInput::default()
    };
    let saved = owner.run(SaveCampaign { id: campaign, input }).await;
    assert!(saved.ok(), "{:?}", saved.result);
    let saved = saved.value();
    let errors = saved.errors.clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field.as_deref(), Some("reply_to"));
    assert!(saved.updated_at.is_none());
    let (_, unchanged) = api.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(unchanged["name"], "Fine");
    let input = CampaignInput { name: "Renamed".into(), ..CampaignInput::default() };
    let saved = owner.run(SaveCampaign { id: campaign, input }).await;
    assert!(saved.result.as_ref().is_ok_and(|s| s.errors.is_empty()), "{:?}", saved.result);
    let (_, renamed) = api.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(renamed["name"], "Renamed");
    assert!(saved.value().warnings.is_empty());

    // A merge-tag typo is saved (it is not an error) and named beside its field, with the name
    // meant; the editor loads the same warnings after a reload.
    let input = CampaignInput {
        name: "Renamed".into(),
        subject: "Hi {{ reader.nmae }}".into(),
        body: "{{ reader.name }} from {{ reader.city }}".into(),
        ..CampaignInput::default()
    };
    let saved = owner.run(SaveCampaign { id: campaign, input }).await.value();
    assert!(saved.errors.is_empty() && saved.updated_at.is_some(), "{saved:?}");
    let warned: Vec<_> =
        saved.warnings.iter().map(|w| (w.field.as_deref().unwrap_or_default(), w.message.as_str())).collect();
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert!(warned[0].0 == "subject" && warned[0].1.contains("Did you mean “reader.name”?"), "{warned:?}");
    assert!(warned[1].0 == "body" && warned[1].1.contains("reader.attributes.city"), "{warned:?}");
    let loaded = owner.run(GetCampaign { id: campaign }).await.value();
    assert_eq!(loaded.warnings, saved.warnings);
    // A malformed id names nothing.
    // raw: a forged id string, which the typed `CampaignId` argument cannot carry.
    let r = owner.call("get_campaign", &[("id", "not-an-id")]).await;
    assert!(r.status.is_client_error(), "{:?}", r.status);
    Ok(())
}

/// A draft written before the workspace had a default sender takes it when one is
/// set (it was stuck at "Choose a sender address first"), and an empty sender is filled on
/// save; a From address whose domain is not verified is named beside the field as it is typed,
/// not only at send time.
#[tokio::test]
async fn drafts_take_the_default_sender_and_an_unverified_from_is_named_while_typed() -> TestResult {
    use herald_app::pages::campaigns::preview::TestSendCampaign;
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("early@example.com", "Early Co").await;
    let api = Api::for_owner(&app, &owner).await;
    let (_, draft) = api.post("/api/v1/campaigns", json!({"name": "Early", "subject": "Hi"})).await;
    let id: CampaignId = draft["id"].as_str().expect("id").parse()?;
    assert_eq!(draft["from_email"], "");
    let r = owner.run(TestSendCampaign { id, addresses: "early@example.com".into() }).await;
    assert!(r.message().contains("Choose a sender address first"), "{:?}", r.result);

    let settings = |from: &str| UpdateWorkspaceSettings {
        name: "Early Co".into(),
        postal_address: "1 Main Street".into(),
        default_from_name: "Early News".into(),
        default_from_email: from.into(),
        time_zone: None,
    };
    assert!(owner.run(settings("news@early.test")).await.ok());
    let (_, filled) = api.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(
        (filled["from_name"].as_str(), filled["from_email"].as_str()),
        (Some("Early News"), Some("news@early.test"))
    );
    // The domain is not verified: the editor's save names it beside the From field…
    let input = CampaignInput { name: "Early".into(), subject: "Hi".into(), ..CampaignInput::default() };
    let saved = owner.run(SaveCampaign { id, input: input.clone() }).await.value();
    assert_eq!(
        saved.sender,
        Some(("Early News".to_string(), "news@early.test".to_string())),
        "an empty sender was not filled"
    );
    let from: Vec<_> = saved.warnings.iter().filter(|w| w.field.as_deref() == Some("from_email")).collect();
    assert!(
        from.len() == 1 && from[0].message.contains("early.test is not a verified sending domain"),
        "{:?}",
        saved.warnings
    );
    // …until it is verified; then the test send goes out.
    app.verify_domain(&ws, "early.test").await;
    let saved = owner.run(SaveCampaign { id, input }).await.value();
    assert!(saved.warnings.is_empty(), "{:?}", saved.warnings);
    let r = owner.run(TestSendCampaign { id, addresses: "early@example.com".into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    Ok(())
}

#[tokio::test]
async fn a_scheduled_campaign_sends_when_due_exactly_once() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "sched-owner@example.com", 5).await;
    let (_, draft) = api.post("/api/v1/campaigns", json!({"name": "Later", "subject": "s", "list_ids": [list]})).await;
    let id = draft["id"].as_str().expect("id").to_string();
    let at = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/schedule"), json!({"at": at})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    let n = app.sink.deliveries().await.iter().filter(|d| d.rcpt_to.contains("-r")).count();
    assert_eq!(n, 5);
    Ok(())
}

fn worker_process(h: &SendHarness) -> tokio::process::Child {
    worker_from(h, std::path::Path::new(env!("CARGO_BIN_EXE_herald")))
}

/// `herald worker` started from `program` (a copy of the binary, for a test that deletes it).
fn worker_from(h: &SendHarness, program: &std::path::Path) -> tokio::process::Child {
    tokio::process::Command::new(program)
        .arg("worker")
        .env("DATABASE_URL", &h.app.db_url)
        .env("HERALD_ENV", "development")
        .env("HERALD_SECRET_KEY", "test-secret-key-that-is-long-enough-0123456789")
        .env("HERALD_SMTP_URL", &h.smtp)
        .env("HERALD_DEV_SMTP_BIND", "127.0.0.1:0")
        .env("HERALD_BASE_URL", &h.app.base)
        .env("HERALD_DATA_DIR", std::env::temp_dir().join("herald-worker-test"))
        .env("HERALD_SEND_LEASE_SECONDS", "3")
        .env("HERALD_SEND_RETRY_BASE_SECONDS", "0.2")
        .env("HERALD_SEND_BATCH", "10")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("herald worker starts")
}

/// A worker whose binary was replaced under it (a deploy, a package upgrade) cannot start its
/// template sandbox: that says nothing about the template or the readers, so it must fail none
/// of them. Before, each reader of every batch it claimed ended `failed` with "template error:
/// templates cannot be rendered right now" and never got the mail (found by the chaos suite when
/// a rebuild replaced its binary mid-run).
#[tokio::test]
async fn a_worker_that_cannot_start_its_template_sandbox_fails_no_reader() -> TestResult {
    let h = SendHarness::new(40).await?;
    let campaign = h.campaign("Sandbox gone", vec![h.list]).await?;
    herald_engine::campaigns::lifecycle::send_now(
        &h.app.app.db,
        &h.app.app.jobs,
        h.tenant,
        herald_engine::Role::Owner,
        campaign,
    )
    .await?;
    let doomed = std::env::temp_dir().join(format!("herald-doomed-{}", uuid::Uuid::new_v4()));
    std::fs::copy(env!("CARGO_BIN_EXE_herald"), &doomed)?;
    let mut first = worker_from(&h, &doomed);
    // Running, and its executable gone: each sandbox child it tries to start fails.
    std::fs::remove_file(&doomed)?;
    let counts = "SELECT count(*), count(*) FILTER (WHERE status = 'failed') FROM sends WHERE campaign_id = $1";
    // It fans the campaign out (no template needed), then tries to send.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (rows, _): (i64, i64) = sqlx::query_as(counts).bind(campaign).fetch_one(&h.app.owner).await?;
        if rows == 40 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the worker without a sandbox did not fan the campaign out");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Time to claim and render several batches (it failed every row it claimed within this).
    tokio::time::sleep(Duration::from_secs(5)).await;
    first.kill().await?;
    let (_, failed): (i64, i64) = sqlx::query_as(counts).bind(campaign).fetch_one(&h.app.owner).await?;
    assert_eq!(failed, 0, "readers failed because no sandbox could start");
    assert_eq!(h.sink.accepted_count(), 0, "nothing could be rendered, so nothing went out");
    // A worker that can render sends each of them once.
    let mut second = worker_process(&h);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while h.status(campaign).await?.status.as_str() != "sent" {
        assert!(tokio::time::Instant::now() < deadline, "the send finished: {:?}", h.status(campaign).await?);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    second.kill().await?;
    let duplicates = h.assert_exactly_once(&addresses("reader", 1..=40)).await;
    assert_eq!(duplicates, 0);
    Ok(())
}

#[tokio::test]
async fn a_worker_process_killed_with_sigkill_mid_send_loses_nothing() -> TestResult {
    let h = SendHarness::new(300).await?;
    // Slow replies, so the kill lands mid-send.
    h.sink.set_faults(herald_devtools::smtp_sink::Faults::none().with_reply_delay(Duration::from_millis(3)));
    let campaign = h.campaign("Killed", vec![h.list]).await?;
    herald_engine::campaigns::lifecycle::send_now(
        &h.app.app.db,
        &h.app.app.jobs,
        h.tenant,
        herald_engine::Role::Owner,
        campaign,
    )
    .await?;
    let mut first = worker_process(&h);
    assert!(h.sink.wait_for_count(40, Duration::from_secs(60)).await, "the first worker started sending");
    first.kill().await?; // SIGKILL: no cleanup, leases and apalis jobs left behind
    let at_kill = h.sink.accepted_count();
    assert!(at_kill < 300, "killed mid-send ({at_kill} sent)");
    let mut second = worker_process(&h);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if h.status(campaign).await?.status.as_str() == "sent" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the restarted worker finished the send: {:?}",
            h.status(campaign).await?
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    second.kill().await?;
    let duplicates = h.assert_exactly_once(&addresses("reader", 1..=300)).await;
    let p = h.status(campaign).await?;
    // Only a message in flight at the kill can arrive twice, and then under the same Message-ID.
    assert!(duplicates as i64 <= p.ambiguous, "{duplicates} duplicates, {} ambiguous", p.ambiguous);
    eprintln!(
        "SIGKILL test: killed after {at_kill} messages; {duplicates} duplicate copies (same Message-ID); {} rows re-sent as ambiguous",
        p.ambiguous
    );
    Ok(())
}

#[tokio::test]
async fn campaigns_are_searched_and_filtered_by_status_and_day() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "filter-owner@example.com", 1).await;
    for (name, subject) in [("Spring issue", "Tulips"), ("Summer issue", "Sun"), ("100%_off", "Sale")] {
        let (status, c) =
            api.post("/api/v1/campaigns", json!({"name": name, "subject": subject, "list_ids": [list]})).await;
        assert_eq!(status, StatusCode::CREATED, "{c}");
    }
    let names = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c["name"].as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let (_, all) = api.get("/api/v1/campaigns").await;
    assert_eq!(names(&all).len(), 3);
    // Name or subject, ignoring case; `%` and `_` are plain characters.
    let (_, found) = api.get("/api/v1/campaigns?q=TULIP").await;
    assert_eq!(names(&found), ["Spring issue"]);
    let (_, found) = api.get("/api/v1/campaigns?q=%25_").await;
    assert_eq!(names(&found), ["100%_off"]);
    let (_, found) = api.get("/api/v1/campaigns?q=issue&status=draft&limit=1").await;
    assert_eq!(names(&found).len(), 1);
    let (_, none) = api.get("/api/v1/campaigns?status=sent").await;
    assert_eq!(names(&none).len(), 0);
    let today = chrono::Utc::now().date_naive();
    let (_, found) = api.get(&format!("/api/v1/campaigns?from={today}&to={today}")).await;
    assert_eq!(names(&found).len(), 3);
    let (_, none) = api.get(&format!("/api/v1/campaigns?to={}", today - chrono::Duration::days(1))).await;
    assert_eq!(names(&none).len(), 0);
    // Bad values are named.
    let (status, bad) = api.get("/api/v1/campaigns?status=shipped&from=yesterday").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    assert!(bad["fields"]["status"].is_string() && bad["fields"]["from"].is_string(), "{bad}");
    // In the document, with its parameters.
    let (_, doc) = api.get("/api/v1/openapi.json").await;
    let op = &doc["paths"]["/api/v1/campaigns"]["get"];
    assert_eq!(op["operationId"], "listCampaigns");
    let params: Vec<&str> =
        op["parameters"].as_array().map(|a| a.iter().filter_map(|p| p["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(params, ["q", "status", "from", "to", "limit", "cursor"]);
    Ok(())
}
