//! The audience REST API, including cross-workspace 404s (the isolation harness, for the API).

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[tokio::test]
async fn lists_and_readers_crud_bulk_and_subscriptions() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("api@example.com", "Api").await;
    let api = Api::for_owner(&app, &owner).await;

    let (s, list) = api.post("/api/v1/lists", json!({"name": "Product news", "opt_in": "single"})).await;
    assert_eq!(s, StatusCode::CREATED, "{list}");
    let list_id = list["id"].as_str().expect("id").to_string();
    assert_eq!(list["slug"], "product-news");
    let (s, dup) = api.post("/api/v1/lists", json!({"name": "Product news"})).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(dup["code"], "conflict");
    let (s, bad) = api.post("/api/v1/lists", json!({"nom": "x"})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    assert_eq!(bad["code"], "invalid");
    let (s, _) = api
        .send(
            reqwest::Method::PUT,
            &format!("/api/v1/lists/{list_id}"),
            Some(json!({"name": "Product updates", "slug": "updates", "visibility": "private"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);

    // Bulk upsert: duplicates merge on the lowercased email, bad rows are reported by index.
    // Every row is counted once, as what it did (a "skipped" row changed nothing).
    let body = json!({
        "lists": [list_id],
        "readers": [
            {"email": "Ann@Example.com", "name": "Ann", "attributes": {"city": "Lyon"}},
            {"email": "ann@example.com", "attributes": {"plan": "pro"}},
            {"email": "bob@example.com"},
            {"email": "not-an-email"},
        ]
    });
    let (s, out) = api.post("/api/v1/readers/bulk", body.clone()).await;
    assert_eq!(s, StatusCode::OK, "{out}");
    assert_eq!(
        (out["created"].as_u64(), out["updated"].as_u64(), out["skipped"].as_u64()),
        (Some(2), Some(1), Some(0))
    );
    assert_eq!(out["invalid"][0]["index"], 3);
    // Replaying the same request creates nothing.
    let (_, again) = api.post("/api/v1/readers/bulk", body.clone()).await;
    assert_eq!((again["created"].as_u64(), again["updated"].as_u64()), (Some(0), Some(3)));
    // "Leave them unchanged": every row skipped, and nothing changes, the repeated row included.
    let mut skip = body;
    skip["existing"] = json!("skip");
    skip["readers"][1]["attributes"] = json!({"plan": "free"});
    let (_, skipped) = api.post("/api/v1/readers/bulk", skip).await;
    assert_eq!(
        (skipped["created"].as_u64(), skipped["updated"].as_u64(), skipped["skipped"].as_u64()),
        (Some(0), Some(0), Some(3)),
        "{skipped}"
    );
    let (_, page) = api.get("/api/v1/readers?attribute=city%20%3D%20%22Lyon%22").await;
    let ann = &page["data"][0];
    assert_eq!(ann["email"], "ann@example.com", "stored in its canonical form");
    assert_eq!(ann["attributes"], json!({"city": "Lyon", "plan": "pro"}));
    let ann_id = ann["id"].as_i64().expect("id");
    let (_, lists) = api.get("/api/v1/lists").await;
    assert_eq!(lists[0]["confirmed"], 2);
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM consent_events WHERE source = 'api' AND action = 'subscribe'")
            .fetch_one(&app.owner)
            .await
            .unwrap_or(-1);
    assert_eq!(events, 2, "one ledger row per new subscription, none on replay");

    // Single reader CRUD and subscriptions.
    let (s, created) = api.post("/api/v1/readers", json!({"email": "cat@example.com", "name": "Cat"})).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let cat = created["reader"]["id"].as_i64().expect("id");
    let (s, _) = api.post("/api/v1/readers", json!({"email": "CAT@example.com"})).await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, sub) = api.post(&format!("/api/v1/readers/{cat}/subscriptions"), json!({"lists": [list_id]})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(sub["subscriptions"][0]["status"], "confirmed");
    let (s, _) =
        api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{cat}/subscriptions/{list_id}"), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, detail) = api.get(&format!("/api/v1/readers/{cat}")).await;
    assert_eq!(detail["subscriptions"][0]["status"], "unsubscribed");
    let (s, patched) =
        api.send(reqwest::Method::PATCH, &format!("/api/v1/readers/{ann_id}"), Some(json!({"name": "Annie"}))).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(patched["name"], "Annie");
    assert_eq!(patched["attributes"]["city"], "Lyon");
    let (s, _) = api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{cat}"), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(api.get(&format!("/api/v1/readers/{cat}")).await.0, StatusCode::NOT_FOUND);

    // Size limit on bulk.
    let many: Vec<Value> = (0..10_001).map(|i| json!({"email": format!("m{i}@example.com")})).collect();
    let (s, e) = api.post("/api/v1/readers/bulk", json!({"readers": many})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
}

#[tokio::test]
async fn suppressions_through_the_api() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("sup@example.com", "Sup").await;
    let api = Api::for_owner(&app, &owner).await;
    let (s, out) =
        api.post("/api/v1/suppressions", json!({"emails": ["a@example.com", "bad"], "reason": "complaint"})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(out["suppressed"], 1);
    assert_eq!(out["invalid"][0], "bad");
    let (_, list) = api.get("/api/v1/suppressions?q=a@").await;
    assert_eq!(list["data"][0]["reason"], "complaint");
    assert_eq!(
        api.send(reqwest::Method::DELETE, "/api/v1/suppressions/a@example.com", None).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        api.send(reqwest::Method::DELETE, "/api/v1/suppressions/a@example.com?confirm=true", None).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        api.send(reqwest::Method::DELETE, "/api/v1/suppressions/a@example.com?confirm=true", None).await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn another_workspaces_ids_are_404_through_the_api() {
    let t = two_tenants().await;
    let a = Api::for_owner(&t.app, &t.a).await;
    let b = Api::for_owner(&t.app, &t.b).await;
    let (_, list) = b.post("/api/v1/lists", json!({"name": "B only", "opt_in": "single"})).await;
    let list_id = list["id"].as_str().expect("id").to_string();
    let (_, r) = b.post("/api/v1/readers", json!({"email": "b@example.com", "lists": [list_id]})).await;
    let reader = r["reader"]["id"].as_i64().expect("id");
    assert_eq!(b.post("/api/v1/suppressions", json!({"emails": ["s@example.com"]})).await.0, StatusCode::OK);

    let probes: Vec<(reqwest::Method, String, Option<Value>)> = vec![
        (reqwest::Method::GET, format!("/api/v1/lists/{list_id}"), None),
        (reqwest::Method::PUT, format!("/api/v1/lists/{list_id}"), Some(json!({"name": "stolen"}))),
        (reqwest::Method::DELETE, format!("/api/v1/lists/{list_id}"), None),
        (reqwest::Method::GET, format!("/api/v1/readers/{reader}"), None),
        (reqwest::Method::PATCH, format!("/api/v1/readers/{reader}"), Some(json!({"name": "x"}))),
        (reqwest::Method::DELETE, format!("/api/v1/readers/{reader}"), None),
        (reqwest::Method::POST, format!("/api/v1/readers/{reader}/subscriptions"), Some(json!({"lists": [list_id]}))),
        (reqwest::Method::DELETE, format!("/api/v1/readers/{reader}/subscriptions/{list_id}"), None),
        (reqwest::Method::DELETE, "/api/v1/suppressions/s@example.com?confirm=true".to_string(), None),
    ];
    for (method, path, body) in probes {
        let (s, e) = a.send(method.clone(), &path, body).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{method} {path} → {s} {e}");
        assert_eq!(e["code"], "not_found");
    }
    // Listing shows only A's (empty) data; bulk onto B's list subscribes nobody there.
    assert_eq!(a.get("/api/v1/lists").await.1.as_array().map(Vec::len), Some(0));
    assert_eq!(a.get("/api/v1/readers").await.1["data"].as_array().map(Vec::len), Some(0));
    assert_eq!(a.get("/api/v1/suppressions").await.1["data"].as_array().map(Vec::len), Some(0));
    let (_, out) =
        a.post("/api/v1/readers/bulk", json!({"readers": [{"email": "b@example.com"}], "lists": [list_id]})).await;
    assert_eq!(out["created"], 1, "a separate reader in A");
    let (_, lists) = b.get("/api/v1/lists").await;
    assert_eq!(lists[0]["confirmed"], 1);
    assert_eq!(b.get(&format!("/api/v1/readers/{reader}")).await.1["reader"]["name"], "");
}

/// One mailbox is one reader however it is typed: a Unicode or A-label domain, any
/// case, composed or decomposed. main at d7b2561 made `Anna@Exämple.com` and
/// `anna@xn--exmple-cua.com` two readers, and so two copies of every campaign.
#[tokio::test]
async fn one_mailbox_typed_several_ways_is_one_reader() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("mailbox@example.com", "Mailbox").await;
    let api = Api::for_owner(&app, &owner).await;
    let (s, created) = api.post("/api/v1/readers", json!({"email": "Anna@Exämple.com", "name": "Anna"})).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(created["reader"]["email"], "anna@xn--exmple-cua.com");
    let (s, _) = api.post("/api/v1/readers", json!({"email": "anna@xn--exmple-cua.com"})).await;
    assert_eq!(s, StatusCode::CONFLICT, "the A-label spelling is the same reader");
    // An import in capitals with a decomposed umlaut (as some spreadsheets write it).
    let (s, out) = api
        .post(
            "/api/v1/readers/bulk",
            json!({"readers": [{"email": "ANNA@EXA\u{308}MPLE.COM", "attributes": {"plan": "pro"}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{out}");
    assert_eq!((out["created"].as_u64(), out["updated"].as_u64()), (Some(0), Some(1)), "{out}");
    let (_, page) = api.get("/api/v1/readers").await;
    let emails: Vec<&str> = page["data"].as_array().into_iter().flatten().filter_map(|r| r["email"].as_str()).collect();
    assert_eq!(emails, ["anna@xn--exmple-cua.com"]);
    assert_eq!(page["data"][0]["attributes"]["plan"], "pro");
}
