//! Warm-up: a new workspace's campaigns reach at most its daily limit of readers,
//! refused up front when the lists are too big, paused before any mail goes out when a scheduled
//! send turns out too big, and an operator raises the limit from the command line.

use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

async fn workspace_of_list(app: &TestApp, list: &str) -> anyhow::Result<(herald_engine::TenantId, String)> {
    let (id, slug): (uuid::Uuid, String) =
        sqlx::query_as("SELECT t.id, t.slug FROM lists l JOIN tenants t ON t.id = l.tenant_id WHERE l.id = $1::uuid")
            .bind(list)
            .fetch_one(&app.owner)
            .await?;
    Ok((id.to_string().parse()?, slug))
}

async fn draft(api: &Api, list: &str, name: &str) -> String {
    let (status, c) = api.post("/api/v1/campaigns", json!({"name": name, "subject": "s", "list_ids": [list]})).await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    c["id"].as_str().expect("id").to_string()
}

#[tokio::test]
async fn a_new_workspace_starts_at_the_default_limit() -> TestResult {
    let app = spawn_app().await;
    let (_, list) = workspace_with_readers(&app, "warm-default@example.com", 1).await;
    let (tenant, _) = workspace_of_list(&app, &list).await?;
    let limit: Option<i32> = sqlx::query_scalar("SELECT campaign_mail_per_day FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&app.owner)
        .await?;
    assert_eq!(limit, Some(10_000));
    Ok(())
}

#[tokio::test]
async fn sends_over_the_daily_limit_are_refused_until_an_operator_raises_it() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "warm-owner@example.com", 5).await;
    let (tenant, slug) = workspace_of_list(&app, &list).await?;
    herald_engine::campaigns::warmup::set_limit(&app.app.db, tenant, Some(8)).await?;

    // Five of eight: sent.
    let first = draft(&api, &list, "First").await;
    let (status, body) = api.post(&format!("/api/v1/campaigns/{first}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &first, "sent", Duration::from_secs(60)).await;

    // Five more would make ten: refused, saying why and what to do, now and as a schedule.
    let second = draft(&api, &list, "Second").await;
    let (status, body) = api.post(&format!("/api/v1/campaigns/{second}/send"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let said = body.to_string();
    assert!(
        said.contains("warming up") && said.contains("8 readers a day") && said.contains("5 were mailed"),
        "{said}"
    );
    let at = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let (status, _) = api.post(&format!("/api/v1/campaigns/{second}/schedule"), json!({"at": at})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // The operator raises it.
    let (ok, out, err) =
        crate::cli::herald(&app, &["admin", "set-limits", "--workspace", &slug, "--campaign-mail-per-day", "20"], "");
    assert!(ok, "{out} {err}");
    let (status, body) = api.post(&format!("/api/v1/campaigns/{second}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &second, "sent", Duration::from_secs(60)).await;
    assert_eq!(app.sink.deliveries().await.len(), 10);
    Ok(())
}

#[tokio::test]
async fn a_scheduled_send_over_the_limit_pauses_before_any_mail_and_resumes_once_raised() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "warm-sched@example.com", 5).await;
    let (tenant, _) = workspace_of_list(&app, &list).await?;
    let id = draft(&api, &list, "Later").await;
    let at = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/schedule"), json!({"at": at})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Lowered after it was scheduled: the start goes through no check, the fan-out does.
    herald_engine::campaigns::warmup::set_limit(&app.app.db, tenant, Some(3)).await?;
    let stats = wait_for_status(&api, &id, "paused", Duration::from_secs(60)).await;
    let (_, c) = api.get(&format!("/api/v1/campaigns/{id}")).await;
    assert!(c["pause_reason"].as_str().unwrap_or_default().contains("warming up"), "{c} {stats}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(app.sink.deliveries().await.len(), 0, "nothing went out");

    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    herald_engine::campaigns::warmup::set_limit(&app.app.db, tenant, None).await?;
    let (status, body) = api.post(&format!("/api/v1/campaigns/{id}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for_status(&api, &id, "sent", Duration::from_secs(60)).await;
    assert_eq!(app.sink.deliveries().await.len(), 5);
    Ok(())
}
