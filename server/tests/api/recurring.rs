//! Recurring personalised campaigns: one edition per slot (missed slots collapse into one),
//! each edition its own send with its own log, bodies personalised from each reader's pushed
//! or fetched data, and readers without data skipped and counted.

use axum::extract::Query;
use chrono::{Duration as Days, Timelike, Utc};
use herald_engine::campaigns::recurring;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

use herald_app::pages::settings::general::UpdateWorkspaceSettings;

use crate::helpers::*;

/// A workspace with one list of `emails`, and an API client.
async fn workspace(app: &TestApp, owner_email: &str, emails: &[&str]) -> (Api, String) {
    let (owner, ws) = app.owner_with_workspace(owner_email, "Digest Co").await;
    app.verify_domain(&ws, "digest.test").await;
    let r = owner
        .run(UpdateWorkspaceSettings {
            name: "Digest Co".into(),
            postal_address: "1 Main Street".into(),
            default_from_name: "Digest".into(),
            default_from_email: "digest@digest.test".into(),
            time_zone: None,
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    let api = Api::for_owner(app, &owner).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "Digest", "opt_in": "single"})).await;
    let list = list["id"].as_str().unwrap_or_default().to_string();
    let readers: Vec<Value> = emails.iter().map(|e| json!({"email": e})).collect();
    let (status, body) = api.post("/api/v1/readers/bulk", json!({"readers": readers, "lists": [list]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (api, list)
}

/// A daily slot twelve hours away from now, so the app's own supervisor (on the real clock)
/// never finds one due while the test runs.
fn far_slot() -> String {
    format!("{:02}:00", (Utc::now() + Days::hours(12)).hour())
}

async fn wait_sent(api: &Api, id: &str) -> Value {
    crate::campaigns_api::wait_for_status(api, id, "sent", Duration::from_secs(30)).await
}

#[tokio::test]
async fn editions_go_once_per_slot_with_each_readers_own_data() -> TestResult {
    let app = spawn_app().await;
    let emails = ["ann@example.com", "ben@example.com", "cat@example.com", "dan@example.com"];
    let (api, list) = workspace(&app, "digest-owner@example.com", &emails).await;
    let (status, c) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "New followers", "subject": "{{ feed.count }} new followers", "list_ids": [list],
                   "body": "Hello! New this week: {% for f in feed.followers %}{{ f }}; {% endfor %}",
                   "recurrence": {"every": "day", "time": far_slot(), "tz": "UTC"}, "feed": "api"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["id"].as_str().unwrap_or_default().to_string();
    // Data for three of the four readers (one by id, the rest by address), and one stranger.
    let ann_id: i64 =
        sqlx::query_scalar("SELECT id FROM readers WHERE email = 'ann@example.com'").fetch_one(&app.owner).await?;
    let (status, r) = api
        .put(&format!("/api/v1/campaigns/{id}/feed/{ann_id}"), json!({"count": 2, "followers": ["@zoe", "@yan"]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let (status, r) = api
        .put(
            &format!("/api/v1/campaigns/{id}/feed"),
            json!([{"reader": "ben@example.com", "data": {"count": 1, "followers": ["@xia"]}},
                   {"reader": "CAT@example.com", "data": {"count": 3, "followers": ["@a", "@b", "@c"]}},
                   {"reader": "nobody@example.com", "data": {"count": 9}},
                   {"reader": "ben@example.com", "data": "not an object"}]),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["stored"], 2, "{r}");
    assert_eq!(r["rejected"].as_array().map(Vec::len), Some(2), "{r}");

    let (status, started) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!((status, started["status"].as_str()), (StatusCode::OK, Some("recurring")), "{started}");
    let (db, jobs) = (&app.app.db, &app.app.jobs);
    // Nothing is due yet; the next slot makes one edition, and asking again makes none.
    assert!(recurring::make_due_editions(db, jobs, Utc::now()).await?.is_empty());
    let tomorrow = Utc::now() + Days::days(1);
    let first = recurring::make_due_editions(db, jobs, tomorrow).await?;
    assert_eq!(first.len(), 1);
    assert!(recurring::make_due_editions(db, jobs, tomorrow).await?.is_empty(), "one edition per slot");
    // Two supervisors racing on the same slot still make one.
    let later = tomorrow + Days::hours(1);
    let (a, b) =
        tokio::join!(recurring::make_due_editions(db, jobs, later), recurring::make_due_editions(db, jobs, later));
    assert_eq!(a?.len() + b?.len(), 0, "no new slot an hour later");

    let edition = first[0].to_string();
    let stats = wait_sent(&api, &edition).await;
    assert_eq!(stats["sent"], 3, "{stats}");
    let bodies: HashMap<String, String> = app
        .sink
        .messages()
        .await
        .into_iter()
        .map(|m| {
            (m.rcpt_to[0].clone(), {
                let p = m.parse();
                format!("{} | {}", p.subject, p.text.unwrap_or_default())
            })
        })
        .collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert!(bodies["ann@example.com"].starts_with("2 new followers"), "{bodies:?}");
    assert!(bodies["ann@example.com"].contains("@zoe; @yan;"), "{bodies:?}");
    assert!(bodies["ben@example.com"].contains("@xia;") && !bodies["ben@example.com"].contains("@zoe"), "{bodies:?}");
    assert!(bodies["cat@example.com"].starts_with("3 new followers"), "{bodies:?}");
    assert!(!bodies.contains_key("dan@example.com"), "no data, no email");

    // The report counts the reader without data; the data was consumed by this edition.
    let (_, editions) = api.get(&format!("/api/v1/campaigns/{id}/editions")).await;
    assert_eq!(editions.as_array().map(Vec::len), Some(1), "{editions}");
    assert_eq!((editions[0]["sent"].as_i64(), editions[0]["skipped_no_data"].as_i64()), (Some(3), Some(1)));
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM campaign_feed").fetch_one(&app.owner).await?;
    assert_eq!(left, 0);

    // Down for five days: one late edition for the newest slot, not five. Nobody has new data,
    // so everyone is skipped and nobody gets an empty email.
    app.sink.clear().await;
    let made = recurring::make_due_editions(db, jobs, tomorrow + Days::days(5)).await?;
    assert_eq!(made.len(), 1, "missed slots collapse into one edition");
    let stats = wait_sent(&api, &made[0].to_string()).await;
    assert_eq!(stats["sent"], 0, "{stats}");
    assert!(app.sink.messages().await.is_empty());
    let (_, editions) = api.get(&format!("/api/v1/campaigns/{id}/editions")).await;
    assert_eq!(editions.as_array().map(Vec::len), Some(2), "{editions}");
    assert_eq!(editions[0]["skipped_no_data"].as_i64(), Some(4));

    // Stopping makes it a draft again; no more editions.
    let (status, stopped) = api.post(&format!("/api/v1/campaigns/{id}/stop"), json!({})).await;
    assert_eq!((status, stopped["status"].as_str()), (StatusCode::OK, Some("draft")));
    assert!(recurring::make_due_editions(db, jobs, tomorrow + Days::days(30)).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn editions_can_fetch_each_readers_data_from_a_url() -> TestResult {
    // The author's data endpoint: JSON for two readers, 404 for the third.
    let feed = axum::Router::new().route(
        "/digest",
        axum::routing::get(|Query(q): Query<HashMap<String, String>>| async move {
            match q.get("email").map(String::as_str) {
                Some("eve@example.com") => (StatusCode::OK, axum::Json(json!({"top": "Rust 2026"}))),
                Some("fay@example.com") => (StatusCode::OK, axum::Json(json!({"top": "Postgres 19"}))),
                _ => (StatusCode::NOT_FOUND, axum::Json(json!(null))),
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let feed_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, feed).await });

    let app = spawn_app().await;
    let (api, list) =
        workspace(&app, "url-owner@example.com", &["eve@example.com", "fay@example.com", "gus@example.com"]).await;
    let (status, c) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Top story", "subject": "Today: {{ feed.top }}", "list_ids": [list], "body": "{{ feed.top }}",
                   "recurrence": {"every": "week", "weekdays": [1, 2, 3, 4, 5, 6, 7], "time": far_slot(), "tz": "Europe/Berlin"},
                   "feed": "url", "feed_url": format!("http://{feed_addr}/digest?email={{email}}")}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let id = c["id"].as_str().unwrap_or_default().to_string();
    let (status, _) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let made = recurring::make_due_editions(&app.app.db, &app.app.jobs, Utc::now() + Days::days(1)).await?;
    assert_eq!(made.len(), 1);
    let stats = wait_sent(&api, &made[0].to_string()).await;
    assert_eq!(stats["sent"], 2, "{stats}");
    let subjects: HashMap<String, String> =
        app.sink.messages().await.into_iter().map(|m| (m.rcpt_to[0].clone(), m.parse().subject)).collect();
    assert_eq!(subjects.get("eve@example.com").map(String::as_str), Some("Today: Rust 2026"));
    assert_eq!(subjects.get("fay@example.com").map(String::as_str), Some("Today: Postgres 19"));
    assert!(!subjects.contains_key("gus@example.com"));
    let (_, editions) = api.get(&format!("/api/v1/campaigns/{id}/editions")).await;
    assert_eq!(editions[0]["skipped_no_data"].as_i64(), Some(1), "{editions}");
    Ok(())
}
