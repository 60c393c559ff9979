//! Templates that try to exhaust the process: memory bombs through every entry point a tenant
//! can reach (campaign send check, the editor's preview, transactional templates and inline
//! messages, the per-reader render in delivery). Each must be refused within seconds with a
//! clear message, while this process — which runs the server — stays small.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

/// 16 bytes doubled 35 times: 512 GiB as one string, in about 150 instructions.
fn doubling_bomb() -> String {
    let mut t = String::from("{% set a = \"0123456789abcdef\" %}");
    for _ in 0..35 {
        t.push_str("{% set a = a ~ a %}");
    }
    t.push_str("{{ a | length }}");
    t
}

/// A list that holds the previous one twice, 40 deep: a few hundred bytes until it is turned into
/// a string, then 2^40 copies of "x".
fn sharing_bomb() -> String {
    let mut t = String::from("{% set a = [\"x\"] %}");
    for _ in 0..40 {
        t.push_str("{% set a = [a, a] %}");
    }
    t.push_str("{{ (a ~ \"\") | length }}");
    t
}

/// A repeat just under MiniJinja's own 100 MB cap, then doubled: short enough for a subject.
fn repeat_bomb() -> String {
    "{% set a = 'x' * 9 ** 8 %}{% set a = a ~ a %}{% set a = a ~ a %}{% set a = a ~ a %}{{ a | length }}".into()
}

/// The peak resident memory of this process (which is also the server's), in MiB.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

fn message(body: &Value) -> String {
    body["message"].as_str().unwrap_or_default().to_string()
}

/// Generous next to the ~0.1 s measured, because the suite runs many tests at once on two cores.
const QUICKLY: Duration = Duration::from_secs(3);

#[tokio::test]
async fn memory_bombs_are_refused_at_every_entry_point_and_the_server_stays_small() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "bomb-owner@example.com", 1).await;

    // Campaigns: the send check test-renders the templates.
    for (field, bomb) in [("body", doubling_bomb()), ("subject", repeat_bomb())] {
        let mut draft = json!({"name": "Bomb", "subject": "Hi", "list_ids": [list], "body": "Hello"});
        draft[field] = Value::String(bomb);
        let (status, created) = api.post("/api/v1/campaigns", draft).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().expect("id");
        let started = Instant::now();
        let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {body}");
        assert!(message(&body).contains(&format!("{field}: the template needs more than 256 MB of memory")), "{body}");
        assert!(started.elapsed() < QUICKLY, "{field}: took {:?}", started.elapsed());
    }

    // Transactional: inline content, and a saved template used by name.
    let started = Instant::now();
    let (status, body) = api
        .send_message(
            "bomb-inline",
            &json!({"to": "a@example.com", "from": "x@campaign.test", "subject": "Hi", "html": doubling_bomb()}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(message(&body).contains("needs more than 256 MB of memory"), "{body}");
    assert!(started.elapsed() < QUICKLY, "took {:?}", started.elapsed());
    let (status, body) = api
        .post(
            "/api/v1/templates",
            json!({"name": "bomb", "from_email": "x@campaign.test", "subject": "Hi", "text_body": sharing_bomb()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "saving only parses: {body}");
    let (status, body) = api.send_message("bomb-template", &json!({"to": "a@example.com", "template": "bomb"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // This bomb grows by printing (about 128 MB of text before the next doubling fails), so on a
    // slow machine the child's 5 s limit can stop it first: either limit is the refusal.
    let refusal = message(&body);
    assert!(
        refusal.contains("needs more than 256 MB of memory")
            || refusal.contains("rendering took longer than 5 seconds"),
        "{body}"
    );

    // Output that grows within bounds per step but past the cap in total: refused as it is
    // written, not after.
    let (status, body) = api
        .send_message(
            "big-output",
            &json!({"to": "a@example.com", "from": "x@campaign.test", "subject": "Hi",
                    "text": "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(message(&body).contains("larger than 2 MB"), "{body}");

    // Delivery: a bomb that only goes off for one reader passes the send check and fails that
    // reader alone; the others are delivered.
    let (status, body) = api
        .post("/api/v1/readers", json!({"email": "trigger@example.com", "attributes": {"bomb": true}, "lists": [list]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let body_template = format!("Hello{{% if reader.attributes.bomb %}}{}{{% endif %}}", doubling_bomb());
    let (status, created) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Targeted", "subject": "Hi", "list_ids": [list], "body": body_template}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    assert!(app.sink.wait_for_recipient("bomb-owner-r1@example.com", Duration::from_secs(10)).await.is_some());
    let (status, reason): (String, Option<String>) = sqlx::query_as(
        "SELECT status, reason FROM sends WHERE campaign_id = $1::uuid AND email = 'trigger@example.com'",
    )
    .bind(&id)
    .fetch_one(&app.owner)
    .await?;
    assert_eq!(status, "failed");
    assert!(reason.unwrap_or_default().contains("needs more than 256 MB of memory"));

    // Before the sandbox, the first bomb alone took this process to its death.
    let peak = peak_rss_mib();
    assert!(peak < 1024, "peak RSS {peak} MiB");
    Ok(())
}
