//! A soft failure early in a long send is retried on its own schedule, not when the loop's
//! cursor comes round at the end of the send, and one soft failure never expires a reader for
//! age.

use herald_devtools::smtp_sink::{FaultAction, FaultRule, Faults};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

#[tokio::test]
async fn an_early_soft_failure_in_a_long_send_is_retried_on_its_schedule_not_expired() -> TestResult {
    // Ten a second: 120 readers take twelve seconds, and the first reader's retry is due after
    // about three.
    let app = spawn_app_with(&[
        ("HERALD_SEND_RETRY_BASE_SECONDS", "3"),
        ("HERALD_SMTP_RATE", "10"),
        ("HERALD_SMTP_BURST", "1"),
    ])
    .await;
    let (api, list) = workspace_with_readers(&app, "long@example.com", 120).await;
    let first = "long-r1@example.com";
    app.sink.set_faults(Faults::none().with_rule(FaultRule::new(first, FaultAction::try_again_later()).times(1)));
    let (_, campaign) = api
        .post("/api/v1/campaigns", json!({"name": "Long", "subject": "Long", "list_ids": [list], "body": "Hi"}))
        .await;
    let id = campaign["id"].as_str().expect("id").to_string();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for _ in 0..400 {
        if app.sink.faults_injected() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(app.sink.faults_injected(), 1, "the first attempt was refused");
    // Its queue age has run out (as if the send had run for two days since its first claim).
    sqlx::query(
        "UPDATE sends SET first_claimed_at = now() - interval '49 hours' WHERE campaign_id = $1::uuid AND email = $2",
    )
    .bind(&id)
    .bind(first)
    .execute(&app.owner)
    .await?;

    let stats = wait_for_status(&api, &id, "sent", Duration::from_secs(120)).await;
    let (status, reason): (String, Option<String>) =
        sqlx::query_as("SELECT status, reason FROM sends WHERE campaign_id = $1::uuid AND email = $2")
            .bind(&id)
            .bind(first)
            .fetch_one(&app.owner)
            .await?;
    assert_eq!(status, "sent", "{reason:?} {stats}");
    let mut mails = app.sink.messages().await;
    mails.sort_by_key(|m| m.id);
    let order: Vec<String> = mails.iter().flat_map(|m| m.rcpt_to.clone()).collect();
    assert_eq!(order.len(), 120, "each reader once");
    let at = order.iter().position(|to| to == first).expect("the first reader got it");
    assert!(at < 80, "retried on its schedule, not when the cursor came round: delivered {at}th of 120");
    Ok(())
}
