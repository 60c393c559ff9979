//! Delivery checks a reader again with the condition that let them in, not a looser one: a
//! reader whose step mail (or a campaign with segments) soft-failed once, and who then left the
//! list that brought them, gets nothing when the row is tried again, even while still confirmed
//! on another of the workspace's lists. A reader the condition still holds gets the retry.

use herald_devtools::smtp_sink::{FaultAction, FaultRule, Faults};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

/// Soft-fails the first attempt to each of `addresses`, so their rows wait for a retry.
fn first_attempt_fails(addresses: &[&str]) -> Faults {
    addresses
        .iter()
        .fold(Faults::none(), |f, a| f.with_rule(FaultRule::new(*a, FaultAction::try_again_later()).times(1)))
}

async fn reader_id(app: &TestApp, email: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM readers WHERE email = $1")
        .bind(email)
        .fetch_one(&app.owner)
        .await
        .expect("reader")
}

async fn list(api: &Api, name: &str) -> String {
    let (status, list) = api.post("/api/v1/lists", json!({"name": name, "opt_in": "single"})).await;
    assert_eq!(status, StatusCode::CREATED, "{list}");
    list["id"].as_str().expect("list id").to_string()
}

async fn add(api: &Api, email: &str, lists: &[&str]) {
    let (status, body) = api.post("/api/v1/readers/bulk", json!({"readers": [{"email": email}], "lists": lists})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn leave(app: &TestApp, api: &Api, email: &str, list: &str) {
    let id = reader_id(app, email).await;
    let (status, body) =
        api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{id}/subscriptions/{list}"), None).await;
    assert!(status.is_success(), "{status} {body}");
}

/// Waits for the sink to have refused `n` first attempts.
async fn wait_for_faults(app: &TestApp, n: u64) {
    for _ in 0..300 {
        if app.sink.faults_injected() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the sink refused {} first attempts, want {n}", app.sink.faults_injected());
}

async fn recipients(app: &TestApp) -> Vec<String> {
    let mut out: Vec<String> = app.sink.messages().await.into_iter().flat_map(|m| m.rcpt_to).collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_reader_who_leaves_the_trigger_list_gets_no_step_mail_still_queued() -> TestResult {
    // Retries come a few seconds after a soft failure: time enough to leave the list first.
    let app = spawn_app_with(&[("HERALD_SEND_RETRY_BASE_SECONDS", "3")]).await;
    let (api, trigger) = workspace_with_readers(&app, "leaver@example.com", 0).await;
    let other = list(&api, "Another list").await;
    let (status, a) = api
        .post(
            "/api/v1/automations",
            json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": trigger},
                   "steps": [{"action": {"kind": "email", "subject": "Welcome", "body": "Hello"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    let id = a["id"].as_str().expect("id");
    let (status, live) = api.post(&format!("/api/v1/automations/{id}/start"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{live}");

    app.sink.set_faults(first_attempt_fails(&["goes@example.com", "stays@example.com"]));
    add(&api, "goes@example.com", &[&trigger, &other]).await;
    add(&api, "stays@example.com", &[&trigger, &other]).await;
    wait_for_faults(&app, 2).await;
    // Left the trigger list through an ordinary unsubscribe; still confirmed on the other one.
    leave(&app, &api, "goes@example.com", &trigger).await;

    assert!(app.sink.wait_for_count(1, Duration::from_secs(30)).await, "the retry for the reader who stayed");
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(recipients(&app).await, vec!["stays@example.com".to_string()]);
    let (status, reason): (String, Option<String>) = sqlx::query_as(
        "SELECT s.status, s.reason FROM sends s JOIN readers r ON r.id = s.reader_id WHERE r.email = 'goes@example.com'",
    )
    .fetch_one(&app.owner)
    .await?;
    assert_eq!((status.as_str(), reason.as_deref()), ("skipped", Some("unsubscribed")));
    Ok(())
}

#[tokio::test]
async fn a_campaign_with_lists_and_segments_retries_only_readers_its_audience_still_holds() -> TestResult {
    let app = spawn_app_with(&[("HERALD_SEND_RETRY_BASE_SECONDS", "3")]).await;
    let (api, news) = workspace_with_readers(&app, "audience@example.com", 0).await;
    let other = list(&api, "Another list").await;
    // The audience: confirmed on News, or tagged VIP (and confirmed somewhere).
    for email in ["plain@example.com", "vip@example.com"] {
        add(&api, email, &[&news, &other]).await;
    }
    let vip = reader_id(&app, "vip@example.com").await;
    let (status, body) = api.post(&format!("/api/v1/readers/{vip}/tags"), json!({"tags": ["VIP"]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, tags) = api.get("/api/v1/tags").await;
    let (status, segment) = api
        .post(
            "/api/v1/segments",
            json!({"name": "VIPs", "definition": {"match": "all", "rules": [{"kind": "tag", "tag_id": tags[0]["id"], "has": true}]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{segment}");
    let (status, campaign) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Mixed", "subject": "News", "body": "Hi", "list_ids": [news], "segment_ids": [segment["id"]]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{campaign}");
    let id = campaign["id"].as_str().expect("id").to_string();

    app.sink.set_faults(first_attempt_fails(&["plain@example.com", "vip@example.com"]));
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_faults(&app, 2).await;
    // Both leave News: the VIP is still in the audience through the segment, the other is not.
    leave(&app, &api, "plain@example.com", &news).await;
    leave(&app, &api, "vip@example.com", &news).await;

    let stats: Value = wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(recipients(&app).await, vec!["vip@example.com".to_string()], "{stats}");
    let reason: Option<String> = sqlx::query_scalar(
        "SELECT s.reason FROM sends s JOIN readers r ON r.id = s.reader_id WHERE r.email = 'plain@example.com'",
    )
    .fetch_one(&app.owner)
    .await?;
    assert_eq!(reason.as_deref(), Some("left the audience"));
    Ok(())
}
