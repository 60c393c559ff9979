//! A/B tests: the split's proportions over 10k readers and its stability when a chunk
//! is written again, the winner by each metric (machine opens not counted), the checks keyed by
//! field, and a test sent over SMTP whose rest gets the winner — each reader one message, of
//! the version its send-log row names. Crashes during the choice are the chaos suite's round.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;
use herald_types::{CampaignId, TenantId};

/// A draft A/B campaign to `list`: versions A (the campaign's own), then one per `subjects`.
async fn ab_campaign(api: &Api, list: &str, subjects: &[&str], percent: u8, metric: &str) -> String {
    let variants: Vec<Value> = subjects.iter().map(|s| json!({"subject": s})).collect();
    let (status, c) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Test", "subject": "Version A", "list_ids": [list], "body": "Hello",
                   "ab_test": {"variants": variants, "test_percent": percent, "metric": metric, "window_hours": 4}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    c["id"].as_str().expect("id").to_string()
}

async fn tenant_of(app: &TestApp, campaign: &str) -> TenantId {
    sqlx::query_scalar("SELECT tenant_id FROM campaigns WHERE id = $1::uuid")
        .bind(campaign)
        .fetch_one(&app.owner)
        .await
        .expect("campaign's workspace")
}

/// Writes the send log as a send would, without delivery: the campaign is marked paused (the
/// fan-out runs for a paused send, the supervisor starts no delivery for one).
async fn fan_out_paused(app: &TestApp, campaign: &str) {
    sqlx::query("UPDATE campaigns SET status = 'paused', started_at = now() WHERE id = $1::uuid")
        .bind(campaign)
        .execute(&app.owner)
        .await
        .expect("paused");
    let id: CampaignId = campaign.parse().expect("campaign id");
    herald_engine::campaigns::fanout::run(&app.app.db, tenant_of(app, campaign).await, id).await.expect("fan-out");
}

/// (reader, status, variant, ab_rest) of every row of the campaign.
async fn rows(app: &TestApp, campaign: &str) -> Vec<(i64, String, Option<i16>, bool)> {
    sqlx::query_as(
        "SELECT reader_id, status, variant, ab_rest FROM sends WHERE campaign_id = $1::uuid ORDER BY reader_id",
    )
    .bind(campaign)
    .fetch_all(&app.owner)
    .await
    .expect("send log")
}

#[tokio::test]
async fn the_split_gives_each_version_its_share_and_a_rerun_chooses_the_same() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "ab-split@example.com", 1).await;
    let tenant: TenantId =
        sqlx::query_scalar("SELECT tenant_id FROM lists WHERE id = $1::uuid").bind(&list).fetch_one(&app.owner).await?;
    sqlx::query(
        "WITH r AS (INSERT INTO readers (tenant_id, email) SELECT $1, 'split' || g || '@example.com'
                    FROM generate_series(2, 10000) g RETURNING id)
         INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2::uuid, id, 'confirmed', now() FROM r",
    )
    .bind(tenant)
    .bind(&list)
    .execute(&app.owner)
    .await?;
    let id = ab_campaign(&api, &list, &["Version B", "Version C"], 20, "opens").await;
    fan_out_paused(&app, &id).await;
    let first = rows(&app, &id).await;
    assert_eq!(first.len(), 10_000, "one row per reader");
    let test: Vec<_> = first.iter().filter(|r| !r.3).collect();
    let held = first.iter().filter(|r| r.1 == "held").count();
    // 20 % of 10k: 2000, standard deviation 40; ±200 is five of them.
    assert!((1800..=2200).contains(&test.len()), "test share {} of 10000", test.len());
    assert_eq!(held + test.len(), 10_000, "every reader outside the test waits for the winner");
    assert!(first.iter().filter(|r| r.3).all(|r| r.1 == "held" && r.2.is_none()), "held rows have no version yet");
    for v in 0..3 {
        let n = test.iter().filter(|r| r.2 == Some(v)).count();
        // A third of the share each (about 667, standard deviation about 21).
        assert!((test.len() / 3).abs_diff(n) <= 110, "version {v}: {n} of {}", test.len());
    }
    assert!(test.iter().all(|r| r.1 == "queued"), "the test share is queued at once");
    // A chunk written again (a crash after its rows were lost) chooses the same for everyone.
    sqlx::query("DELETE FROM sends WHERE campaign_id = $1::uuid AND reader_id % 7 = 0")
        .bind(&id)
        .execute(&app.owner)
        .await?;
    sqlx::query("UPDATE campaigns SET fanout_done = false, fanout_cursor = 0 WHERE id = $1::uuid")
        .bind(&id)
        .execute(&app.owner)
        .await?;
    fan_out_paused(&app, &id).await;
    assert_eq!(rows(&app, &id).await, first, "the same split after the re-run");

    // Picking the winner releases every held reader with it, once.
    let pick = format!("/api/v1/campaigns/{id}/pick-winner");
    let (status, body) = api.post(&pick, json!({"variant": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["winner"], 2);
    assert_eq!(body["held"], 0);
    let after = rows(&app, &id).await;
    for (before, now) in first.iter().zip(&after) {
        if before.3 {
            assert_eq!((now.1.as_str(), now.2), ("queued", Some(2)), "reader {}", now.0);
        } else {
            assert_eq!(before, now, "a test reader keeps its version");
        }
    }
    let (status, _) = api.post(&pick, json!({"variant": 2})).await;
    assert_eq!(status, StatusCode::OK, "the same winner again changes nothing");
    assert_eq!(rows(&app, &id).await, after);
    let (status, body) = api.post(&pick, json!({"variant": 1})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = api.post(&pick, json!({"variant": 3})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "there is no version D: {body}");
    assert_eq!(body["fields"]["variant"], "Choose a version from A to C.");
    Ok(())
}

#[tokio::test]
async fn the_window_ends_with_the_best_version_by_its_metric() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "ab-metric@example.com", 60).await;
    let by_opens = ab_campaign(&api, &list, &["B", "C"], 50, "opens").await;
    let by_clicks = ab_campaign(&api, &list, &["B", "C"], 50, "clicks").await;
    for id in [&by_opens, &by_clicks] {
        fan_out_paused(&app, id).await;
        // The test share was sent; every reader of A opened through a privacy proxy (machine
        // opens: counted, A would tie with B and win as the earlier version), every reader of B
        // opened, and every reader of C clicked, twice (once counted).
        sqlx::query("UPDATE sends SET status = 'sent', sent_at = now() WHERE campaign_id = $1::uuid AND NOT ab_rest")
            .bind(id)
            .execute(&app.owner)
            .await?;
        let event = |variant: i16, kind: &'static str, prefetch: bool, readers: i64| {
            let pool = app.owner.clone();
            let id = id.to_string();
            async move {
                sqlx::query(
                    "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, prefetch)
                     SELECT s.tenant_id, s.campaign_id, s.reader_id, $3, $4 FROM sends s
                     WHERE s.campaign_id = $1::uuid AND s.variant = $2 AND NOT s.ab_rest ORDER BY s.reader_id LIMIT $5",
                )
                .bind(&id)
                .bind(variant)
                .bind(kind)
                .bind(prefetch)
                .bind(readers)
                .execute(&pool)
                .await
                .expect("events");
            }
        };
        event(0, "open", true, 1000).await;
        event(1, "open", false, 1000).await;
        event(2, "click", false, 1000).await;
        event(2, "click", false, 1000).await;
        // The window still open: the app's own supervisor must not decide before the check below.
        sqlx::query(
            "UPDATE campaigns SET status = 'sending', ab_decide_at = now() + interval '1 hour' WHERE id = $1::uuid",
        )
        .bind(id)
        .execute(&app.owner)
        .await?;
    }
    // Results before the window ends: side by side, no winner.
    let (status, before) = api.get(&format!("/api/v1/campaigns/{by_opens}/ab-test")).await;
    assert_eq!(status, StatusCode::OK, "{before}");
    assert!(before["winner"].is_null(), "{before}");
    assert_eq!(before["variants"].as_array().map(Vec::len), Some(3), "{before}");
    assert_eq!(before["variants"][0]["unique_opens"], 0, "machine opens do not count: {before}");
    // Now the window ends.
    for id in [&by_opens, &by_clicks] {
        sqlx::query("UPDATE campaigns SET ab_decide_at = now() - interval '1 second' WHERE id = $1::uuid")
            .bind(id)
            .execute(&app.owner)
            .await?;
    }
    herald_engine::worker::supervise_once(&app.app.db, &app.app.jobs).await?;
    for (id, want) in [(&by_opens, 1), (&by_clicks, 2)] {
        let (_, r) = api.get(&format!("/api/v1/campaigns/{id}/ab-test")).await;
        assert_eq!(r["winner"], want, "{r}");
        assert_eq!(r["held"], 0, "{r}");
        let rest = rows(&app, id).await.into_iter().filter(|r| r.3).collect::<Vec<_>>();
        assert!(!rest.is_empty() && rest.iter().all(|r| r.2 == Some(want)), "the rest gets version {want}");
    }
    Ok(())
}

#[tokio::test]
async fn an_ab_test_is_checked_field_by_field() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "ab-checks@example.com", 1).await;
    let (status, body) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "T", "subject": "A", "list_ids": [list], "tracking": "anonymous",
                   "ab_test": {"variants": [{"subject": ""}], "test_percent": 0, "window_hours": 100}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    for f in ["ab_test.variants.1.subject", "ab_test.test_percent", "ab_test.window_hours", "ab_test"] {
        assert!(body["fields"][f].is_string(), "{f} in {body}");
    }
    // A version whose template does not compile stops the send with its name.
    let (_, c) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "T", "subject": "A", "list_ids": [list],
                   "ab_test": {"variants": [{"subject": "B {{ reader.name"}], "test_percent": 20, "window_hours": 2}}),
        )
        .await;
    let (status, body) =
        api.post(&format!("/api/v1/campaigns/{}/send", c["id"].as_str().expect("id")), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.to_string().contains("version B"), "{body}");
    // No test, no results; no winner before the send.
    let (_, plain) = api.post("/api/v1/campaigns", json!({"name": "P", "subject": "P", "list_ids": [list]})).await;
    let (status, _) = api.get(&format!("/api/v1/campaigns/{}/ab-test", plain["id"].as_str().expect("id"))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let draft = ab_campaign(&api, &list, &["B"], 20, "clicks").await;
    let (status, _) = api.post(&format!("/api/v1/campaigns/{draft}/pick-winner"), json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    Ok(())
}

#[tokio::test]
async fn each_reader_gets_one_version_and_the_rest_the_winner() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "ab-send@example.com", 40).await;
    let id = ab_campaign(&api, &list, &["Version B"], 50, "opens").await;
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The test share goes out; the rest waits while the campaign is sending.
    let test_share: usize = loop {
        let (_, r) = api.get(&format!("/api/v1/campaigns/{id}/ab-test")).await;
        let readers: i64 =
            r["variants"].as_array().expect("variants").iter().map(|v| v["readers"].as_i64().unwrap_or(0)).sum();
        let sent: i64 =
            r["variants"].as_array().expect("variants").iter().map(|v| v["sent"].as_i64().unwrap_or(0)).sum();
        if readers > 0 && sent == readers {
            assert_eq!(readers + r["held"].as_i64().unwrap_or(0), 40, "{r}");
            break readers as usize;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(app.sink.wait_for_count(test_share as u64, Duration::from_secs(20)).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(app.sink.accepted_count(), test_share as u64, "nothing for the rest before the winner");
    let (_, stats) = api.get(&format!("/api/v1/campaigns/{id}/stats")).await;
    assert_eq!(stats["status"], "sending", "{stats}");
    assert_eq!(stats["held"], 40 - test_share as i64, "{stats}");

    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/pick-winner"), json!({"variant": 1})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    let versions: HashMap<String, Option<i16>> =
        sqlx::query_as("SELECT email, variant FROM sends WHERE campaign_id = $1::uuid AND status = 'sent'")
            .bind(&id)
            .fetch_all(&app.owner)
            .await?
            .into_iter()
            .collect();
    assert_eq!(versions.len(), 40);
    let mut got: HashMap<String, usize> = HashMap::new();
    for mail in app.sink.messages().await {
        let to = mail.rcpt_to.first().cloned().unwrap_or_default();
        *got.entry(to.clone()).or_default() += 1;
        let want = match versions.get(&to) {
            Some(Some(1)) => "Version B",
            Some(Some(0)) => "Version A",
            other => panic!("{to}: no version recorded ({other:?})"),
        };
        assert_eq!(mail.parse().subject, want, "{to} got the version its row names");
    }
    assert_eq!(got.len(), 40, "every reader got mail");
    assert!(got.values().all(|&n| n == 1), "one message each: {got:?}");
    let rest_b = versions.values().filter(|v| **v == Some(1)).count();
    assert!(rest_b >= 40 - test_share, "the rest got the winner");
    Ok(())
}
