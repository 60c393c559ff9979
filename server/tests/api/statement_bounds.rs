//! One workspace cannot hold the database for everyone: a request's statements are bounded
//! (a runaway segment count ends with a clear 503 and no database text, while other requests
//! go on), background work keeps its own, larger bound, and live counts are rate limited per
//! workspace.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;
use herald_engine::error::Error;
use herald_engine::infra::db::interactive;

/// 20 groups of 20 "city contains …" conditions, each group met only by its last one: every
/// reader's row is read 400 times.
fn heavy_definition() -> Value {
    let groups: Vec<Value> = (0..20)
        .map(|g| {
            let conditions: Vec<Value> = (0..20)
                .map(|c| {
                    let value = if c == 19 { "town".to_string() } else { format!("x{g}-{c}") };
                    json!({"kind": "field", "key": "city", "op": "contains", "value": value})
                })
                .collect();
            json!({"match": "any", "conditions": conditions})
        })
        .collect();
    json!({"match": "all", "rules": groups})
}

#[tokio::test]
async fn a_runaway_count_ends_with_a_clear_answer_and_other_requests_go_on() -> TestResult {
    let app = spawn_app_with(&[("HERALD_INTERACTIVE_STATEMENT_TIMEOUT_MS", "300")]).await;
    let (api, _list) = workspace_with_readers(&app, "bounded@example.com", 1).await;
    let (status, body) = api.post("/api/v1/fields", json!({"key": "city", "label": "City", "kind": "text"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let tenant: uuid::Uuid = sqlx::query_scalar("SELECT tenant_id FROM readers LIMIT 1").fetch_one(&app.owner).await?;
    sqlx::query(
        "INSERT INTO readers (tenant_id, email, attributes)
         SELECT $1, 'many' || g || '@example.com', jsonb_build_object('city', 'town number ' || g)
         FROM generate_series(1, 40000) g",
    )
    .bind(tenant)
    .execute(&app.owner)
    .await?;
    sqlx::query("ANALYZE readers").execute(&app.owner).await?;

    let started = std::time::Instant::now();
    let (status, body) = api.post("/api/v1/segments/count", heavy_definition()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let text = body.to_string();
    assert!(text.contains("took longer than Herald allows"), "{text}");
    for leak in ["statement", "canceling", "timeout", "SQL", "database error"] {
        assert!(!text.contains(leak), "database text reached the caller: {text}");
    }
    assert!(started.elapsed() < Duration::from_secs(10), "ended by its bound, not by finishing");
    // The same connection pool answers the next request at once.
    let (status, lists) = api.get("/api/v1/lists").await;
    assert_eq!(status, StatusCode::OK, "{lists}");

    // The bound is the request's: the same statement outside a request (the workers' work)
    // runs to its end under the larger background bound.
    let db = app.app.db.clone();
    let tenant_id = herald_engine::domain::TenantId(tenant);
    let sleep = |db: herald_engine::infra::db::Db| async move {
        let mut tx = db.tenant_tx(tenant_id).await?;
        sqlx::query("SELECT pg_sleep(0.6)").execute(&mut *tx).await?;
        tx.commit().await?;
        Ok::<(), Error>(())
    };
    match interactive(Duration::from_millis(300), sleep(db.clone())).await {
        Err(Error::Unavailable(_)) => {}
        other => panic!("a request's statement past its bound: {other:?}"),
    }
    sleep(db).await.map_err(|e| anyhow::anyhow!("background statement: {e:?}"))?;
    Ok(())
}

#[tokio::test]
async fn live_counts_are_rate_limited_per_workspace() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "counting@example.com", 2).await;
    let (other, other_list) = workspace_with_readers(&app, "elsewhere@example.com", 2).await;
    let tree = json!({"match": "all", "rules": [{"kind": "list", "list_id": list, "state": "subscribed"}]});
    let mut refused = None;
    for _ in 0..200 {
        let res = reqwest::Client::new()
            .post(format!("{}/api/v1/segments/count", app.base))
            .bearer_auth(&api.key)
            .json(&tree)
            .send()
            .await?;
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(res.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string));
            break;
        }
        assert_eq!(res.status(), StatusCode::OK);
    }
    let retry_after = refused.expect("200 counts in a row were all answered");
    assert!(retry_after.is_some(), "a refusal says when to come back");
    // Another workspace's counts are not held up by this one's.
    let (status, body) = other.get("/api/v1/segments").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let theirs = json!({"match": "all", "rules": [{"kind": "list", "list_id": other_list, "state": "subscribed"}]});
    let (status, body) = other.post("/api/v1/segments/count", theirs).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    Ok(())
}
