//! `Idempotency-Key` on the API's POST routes: a repeat answers the first response and runs
//! nothing; the same key with another request is refused; concurrent copies make one resource; a
//! client that hangs up does not strand its key; a request that never finished is not run
//! again. (Every POST route is walked in `access.rs`.)

use std::time::Duration;

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

async fn post_with_key(api: &Api, path: &str, key: &str, body: &Value) -> (StatusCode, bool, Value) {
    let res = api
        .client
        .post(format!("{}{path}", api.base))
        .bearer_auth(&api.key)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .expect("request");
    let replayed = res.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    (status, replayed, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn lists_named(app: &TestApp, name: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM lists WHERE name = $1")
        .bind(name)
        .fetch_one(&app.owner)
        .await
        .expect("count")
}

#[tokio::test]
async fn concurrent_copies_of_a_create_make_one_resource_and_share_its_answer() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("o@example.com", "Keys").await;
    let api = Api::for_owner(&app, &owner).await;
    let body = json!({"name": "Once"});
    let answers =
        futures::future::join_all((0..8).map(|_| post_with_key(&api, "/api/v1/lists", "list-once", &body))).await;
    let (first_status, _, first_body) = &answers[0];
    assert_eq!(*first_status, StatusCode::CREATED, "{first_body}");
    for (status, _, body) in &answers {
        assert_eq!((status, body), (first_status, first_body), "every copy gets the one answer");
    }
    assert_eq!(answers.iter().filter(|(_, replayed, _)| !replayed).count(), 1, "one copy ran, the rest replayed");
    assert_eq!(lists_named(&app, "Once").await, 1);

    // Later, and written differently (spacing, key order): still the first answer.
    let (status, replayed, again) =
        post_with_key(&api, "/api/v1/lists", "list-once", &json!({ "name" : "Once" })).await;
    assert_eq!((status, replayed, &again), (StatusCode::CREATED, true, first_body));
    assert_eq!(lists_named(&app, "Once").await, 1);
}

#[tokio::test]
async fn a_key_used_for_another_request_is_refused_and_keys_are_per_workspace() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("o@example.com", "Keys").await;
    let api = Api::for_owner(&app, &owner).await;
    let (status, _, _) = post_with_key(&api, "/api/v1/lists", "k1", &json!({"name": "First"})).await;
    assert_eq!(status, StatusCode::CREATED);

    let (status, _, body) = post_with_key(&api, "/api/v1/lists", "k1", &json!({"name": "Second"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["fields"]["Idempotency-Key"].as_str().is_some_and(|m| m.contains("different request")), "{body}");
    let (status, _, body) = post_with_key(&api, "/api/v1/segments", "k1", &json!({"name": "First"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "another route: {body}");
    assert_eq!(lists_named(&app, "Second").await, 0);

    let (status, _, body) = post_with_key(&api, "/api/v1/lists", "naïve", &json!({"name": "Third"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "not ASCII: {body}");
    assert_eq!(lists_named(&app, "Third").await, 0);

    // Another workspace's "k1" is its own.
    let (other_owner, _) = app.owner_with_workspace("p@example.com", "Others").await;
    let other = Api::for_owner(&app, &other_owner).await;
    let (status, replayed, body) = post_with_key(&other, "/api/v1/lists", "k1", &json!({"name": "First"})).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false), "{body}");
    assert_eq!(lists_named(&app, "First").await, 2);
}

/// The usual reason to retry: the client gave up waiting and hung up. The request still finishes
/// and keeps its answer, so the retry gets it instead of a key stuck "running".
#[tokio::test]
async fn a_client_that_hangs_up_gets_the_answer_on_its_retry() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("o@example.com", "Keys").await;
    let api = Api::for_owner(&app, &owner).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "Big"})).await;
    let readers: Vec<Value> = (0..10_000).map(|i| json!({"email": format!("r{i}@example.com")})).collect();
    let body = json!({"readers": readers, "lists": [list["id"]]});
    let text = body.to_string();

    let addr = app.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /api/v1/readers/bulk HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Idempotency-Key: bulk-1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        api.key,
        text.len()
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(text.as_bytes()).await.expect("body");
    stream.flush().await.expect("flush");
    // Hang up once the request runs (its key claimed), not after a fixed pause: on a busy
    // machine the server may not have read the body yet, and a request that never arrived is
    // not the case under test.
    let claimed_by = tokio::time::Instant::now() + Duration::from_secs(30);
    while sqlx::query_scalar::<_, i64>("SELECT count(*) FROM api_requests WHERE idempotency_key = 'bulk-1'")
        .fetch_one(&app.owner)
        .await
        .expect("claims")
        == 0
    {
        assert!(tokio::time::Instant::now() < claimed_by, "the request never claimed its key");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(stream);

    // The retry waits for the running copy, then gets its answer.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (status, replayed, answer) = loop {
        let (status, replayed, answer) = post_with_key(&api, "/api/v1/readers/bulk", "bulk-1", &body).await;
        if status != StatusCode::TOO_MANY_REQUESTS || tokio::time::Instant::now() > deadline {
            break (status, replayed, answer);
        }
    };
    assert_eq!((status, replayed), (StatusCode::OK, true), "{answer}");
    let readers: i64 = sqlx::query_scalar("SELECT count(*) FROM readers").fetch_one(&app.owner).await.expect("count");
    assert_eq!(readers, 10_000);
}

/// A process that died while running a request left its key claimed and unanswered: whether the
/// request took effect is unknown, so a retry is told so and does not run it a second time.
#[tokio::test]
async fn a_request_that_never_finished_is_not_run_again() {
    let app = spawn_app().await;
    let (owner, tenant) = app.owner_with_workspace("o@example.com", "Keys").await;
    let api = Api::for_owner(&app, &owner).await;
    let mut tx = app.owner.begin().await.expect("tx");
    sqlx::query("SELECT set_config('app.tenant_id', $1, true)").bind(&tenant).execute(&mut *tx).await.expect("tenant");
    // The fingerprint is what this test's request has; a claim older than any request runs.
    let (status, _, _) = post_with_key(&api, "/api/v1/lists", "probe", &json!({"name": "Probe"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let sha: String = sqlx::query_scalar("SELECT request_sha256 FROM api_requests WHERE idempotency_key = 'probe'")
        .fetch_one(&mut *tx)
        .await
        .expect("probe");
    sqlx::query(
        "INSERT INTO api_requests (tenant_id, idempotency_key, request_sha256, created_at)
         VALUES ($1::uuid, 'died', $2, now() - interval '20 minutes')",
    )
    .bind(&tenant)
    .bind(&sha)
    .execute(&mut *tx)
    .await
    .expect("claim");
    tx.commit().await.expect("commit");

    let (status, _, body) = post_with_key(&api, "/api/v1/lists", "died", &json!({"name": "Probe"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("never finished")), "{body}");
    assert_eq!(lists_named(&app, "Probe").await, 1, "the unfinished request was not run again");
}
