//! Resend to non-openers: of nine readers a campaign went to, the resend reaches
//! exactly those who did not open (a privacy proxy's open counted or not, as asked), click,
//! unsubscribe, bounce, complain or get suppressed since, and whose message was delivered; it is
//! a campaign of its own, linked both ways.

use reqwest::StatusCode;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

use herald_devtools::smtp_sink::{FaultAction, FaultRule, Faults};

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

#[tokio::test]
async fn a_resend_reaches_exactly_the_readers_who_did_not_open() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "resend@example.com", 9).await;
    let reader = |i: usize| format!("resend-r{i}@example.com");
    let (_, original) = api
        .post("/api/v1/campaigns", json!({"name": "Original", "subject": "News", "list_ids": [list], "body": "Hi"}))
        .await;
    let id = original["id"].as_str().expect("id").to_string();
    // Not sent yet: nothing to resend.
    let resend = format!("/api/v1/campaigns/{id}/resend");
    let (status, body) = api.post(&resend, json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    assert!(app.sink.wait_for_count(9, Duration::from_secs(10)).await);

    // What each reader did since: r1 opened, r2's open was a privacy proxy's, r3 clicked, r4
    // unsubscribed through the message, r5 bounced softly, r6 was suppressed, r7 did nothing,
    // r8 left the list, and r9's message was never delivered.
    let event = |i: usize, kind: &'static str, prefetch: bool| {
        let (pool, id, email) = (app.owner.clone(), id.clone(), reader(i));
        async move {
            sqlx::query(
                "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, prefetch)
                 SELECT tenant_id, campaign_id, reader_id, $3, $4 FROM sends WHERE campaign_id = $1::uuid AND email = $2",
            )
            .bind(&id)
            .bind(&email)
            .bind(kind)
            .bind(prefetch)
            .execute(&pool)
            .await
            .expect("event");
        }
    };
    event(1, "open", false).await;
    event(2, "open", true).await;
    event(3, "click", false).await;
    event(4, "unsubscribe", false).await;
    event(5, "bounce_soft", false).await;
    let (status, body) = api.post("/api/v1/suppressions", json!({"emails": [reader(6)]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let r8: i64 =
        sqlx::query_scalar("SELECT id FROM readers WHERE email = $1").bind(reader(8)).fetch_one(&app.owner).await?;
    let (status, body) =
        api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{r8}/subscriptions/{list}"), None).await;
    assert!(status.is_success(), "{status} {body}");
    sqlx::query("UPDATE sends SET status = 'failed' WHERE campaign_id = $1::uuid AND email = $2")
        .bind(&id)
        .bind(reader(9))
        .execute(&app.owner)
        .await?;

    // Machine opens not counted: r2 and r7, with r6 counted as skipped (suppressed).
    let (status, again) = api.post(&resend, json!({"subject": "Did you miss this?"})).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    let again_id = again["id"].as_str().expect("id").to_string();
    assert_eq!(again["resend_of"], id.as_str());
    assert_eq!(again["status"], "draft");
    assert_eq!(again["name"], "Original (to non-openers)");
    let (_, count) = api.get(&format!("/api/v1/campaigns/{again_id}/audience")).await;
    assert_eq!((count["eligible"].as_i64(), count["skipped"].as_i64()), (Some(2), Some(1)), "{count}");
    // Machine opens counted: r7 alone. A second resend of one original is made only when asked
    // for explicitly (its readers could get both).
    let (status, refused) = api.post(&resend, json!({"count_machine_opens": true})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let (status, strict) = api.post(&resend, json!({"count_machine_opens": true, "again": true})).await;
    assert_eq!(status, StatusCode::CREATED, "{strict}");
    assert_eq!(strict["subject"], "News", "the original's subject by default");
    let (_, count) = api.get(&format!("/api/v1/campaigns/{}/audience", strict["id"].as_str().expect("id"))).await;
    assert_eq!(count["eligible"], 1, "{count}");
    let (_, original) = api.get(&format!("/api/v1/campaigns/{id}")).await;
    assert_eq!(original["resends"], json!([again_id, strict["id"]]), "linked both ways");

    app.sink.clear().await;
    let (status, body) = api.post(&format!("/api/v1/campaigns/{again_id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stats = wait_for_status(&api, &again_id, "sent", Duration::from_secs(60)).await;
    assert_eq!(stats["sent"], 2, "{stats}");
    assert_eq!(stats["skipped"], 1, "{stats}");
    let got: BTreeSet<String> = app
        .sink
        .messages()
        .await
        .into_iter()
        .filter(|m| m.parse().subject == "Did you miss this?")
        .flat_map(|m| m.rcpt_to)
        .collect();
    assert_eq!(got, BTreeSet::from([reader(2), reader(7)]));
    // A campaign of its own: its own stats, and a resend of it works the same way.
    let (status, _) = api.get(&format!("/api/v1/campaigns/{again_id}/results")).await;
    assert_eq!(status, StatusCode::OK);
    Ok(())
}

/// A reader who opens the original while their resend waits for a retry gets no resend: the
/// claim asks again what the chunk asked. A second resend of the same original is refused
/// unless asked for, naming how many readers would get it twice.
#[tokio::test]
async fn a_reader_who_opens_before_their_resend_goes_out_gets_none_and_one_resend_is_the_rule() -> TestResult {
    let app = spawn_app_with(&[("HERALD_SEND_RETRY_BASE_SECONDS", "3")]).await;
    let (api, list) = workspace_with_readers(&app, "late-open@example.com", 2).await;
    let (_, original) = api
        .post("/api/v1/campaigns", json!({"name": "Original", "subject": "News", "list_ids": [list], "body": "Hi"}))
        .await;
    let id = original["id"].as_str().expect("id").to_string();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    assert!(app.sink.wait_for_count(2, Duration::from_secs(10)).await);
    app.sink.clear().await;

    let (status, resend) = api.post(&format!("/api/v1/campaigns/{id}/resend"), json!({"subject": "Again"})).await;
    assert_eq!(status, StatusCode::CREATED, "{resend}");
    let resend_id = resend["id"].as_str().expect("id").to_string();
    let (a, b) = ("late-open-r1@example.com", "late-open-r2@example.com");
    let first_fails = Faults::none()
        .with_rule(FaultRule::new(a, FaultAction::try_again_later()).times(1))
        .with_rule(FaultRule::new(b, FaultAction::try_again_later()).times(1));
    app.sink.set_faults(first_fails);
    let (status, body) = api.post(&format!("/api/v1/campaigns/{resend_id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for _ in 0..300 {
        if app.sink.faults_injected() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(app.sink.faults_injected(), 2, "both first attempts refused");
    // r1 opens the original now, while the resend waits for its retry.
    sqlx::query(
        "INSERT INTO events (tenant_id, campaign_id, reader_id, kind, prefetch)
         SELECT tenant_id, campaign_id, reader_id, 'open', false FROM sends WHERE campaign_id = $1::uuid AND email = $2",
    )
    .bind(&id)
    .bind(a)
    .execute(&app.owner)
    .await?;
    let stats = wait_for_status(&api, &resend_id, "sent", Duration::from_secs(60)).await;
    let got: BTreeSet<String> = app.sink.messages().await.into_iter().flat_map(|m| m.rcpt_to).collect();
    assert_eq!(got, BTreeSet::from([b.to_string()]), "{stats}");

    // One resend per original: a second is refused, naming who would get it twice, unless asked.
    let (status, refused) = api.post(&format!("/api/v1/campaigns/{id}/resend"), json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused.to_string().contains("1 reader"), "{refused}");
    let (status, second) = api.post(&format!("/api/v1/campaigns/{id}/resend"), json!({"again": true})).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    Ok(())
}

/// A sent block campaign duplicated into a draft with what was written (its blocks,
/// sender, lists, tracking), not its history; another workspace's id is a 404.
#[tokio::test]
async fn a_sent_campaign_is_duplicated_into_a_draft() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "duplicate@example.com", 2).await;
    let blocks = herald_types::BlockDocument::default().to_json();
    let (status, original) = api
        .post(
            "/api/v1/campaigns",
            json!({"name": "Spring", "subject": "Spring for {{ reader.name }}", "list_ids": [list],
                   "body_format": "blocks", "body": blocks, "tracking": "anonymous"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{original}");
    let id = original["id"].as_str().expect("id").to_string();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;

    let (status, copy) = api.post(&format!("/api/v1/campaigns/{id}/duplicate"), json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{copy}");
    assert_ne!(copy["id"], original["id"]);
    assert_eq!(copy["name"], "Spring (copy)");
    assert_eq!(copy["status"], "draft");
    for field in ["subject", "body_format", "body", "list_ids", "tracking", "from_email"] {
        assert_eq!(copy[field], original[field], "{field}");
    }
    assert_eq!((copy["recipients"].as_i64(), copy["started_at"].is_null()), (Some(0), true), "no history: {copy}");
    // The copy sends like any draft.
    let copy_id = copy["id"].as_str().expect("id").to_string();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{copy_id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &copy_id, "sent", Duration::from_secs(60)).await;
    assert!(app.sink.wait_for_count(4, Duration::from_secs(10)).await, "two readers, twice");

    let (other, _) = app.owner_with_workspace("other-duplicate@example.com", "Other").await;
    let other = Api::for_owner(&app, &other).await;
    let (status, _) = other.post(&format!("/api/v1/campaigns/{id}/duplicate"), json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    Ok(())
}
