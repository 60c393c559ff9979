use crate::helpers::*;
use herald_app::error::AppError;
use herald_app::pages::settings::api_keys::{CreateApiKey, ListApiKeys, RevokeApiKey};
use reqwest::StatusCode;

async fn get_workspace(app: &TestApp, key: &str) -> reqwest::Response {
    reqwest::Client::new().get(format!("{}/api/v1/workspace", app.base)).bearer_auth(key).send().await.expect("request")
}

#[tokio::test]
async fn api_keys_authenticate_until_revoked_and_only_for_their_workspace() {
    let t = two_tenants().await;
    let app = &t.app;
    let created = t.a.run(CreateApiKey { name: "site".into(), role: None }).await;
    assert!(created.ok(), "{:?} {:?}", created.status, created.result);
    let key = created.value();
    assert!(key.starts_with("hrld_"));

    let r = get_workspace(app, &key).await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    assert_eq!(body["id"], t.a_id.as_str());
    assert_eq!(body["name"], "Tenant A");

    // Stored hashed: the secret is nowhere in the database.
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM api_keys WHERE key_hash = $1 OR prefix = $1")
        .bind(&key)
        .fetch_one(&app.owner)
        .await
        .unwrap_or(-1);
    assert_eq!(stored, 0);

    // Listed by prefix with a last-used time, never in full.
    let list = t.a.run(ListApiKeys {}).await.value();
    assert!(!serde_json::to_string(&list).expect("keys as JSON").contains(&key));
    assert!(list[0].last_used_at.is_some());
    // Tenant B cannot see or revoke A's key.
    assert_eq!(t.b.run(ListApiKeys {}).await.value().len(), 0);
    let id = list[0].id;
    assert_eq!(t.b.run(RevokeApiKey { key_id: id }).await.error(), AppError::NotFound);
    assert_eq!(get_workspace(app, &key).await.status(), StatusCode::OK);

    assert!(t.a.run(RevokeApiKey { key_id: id }).await.ok());
    let r = get_workspace(app, &key).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let err: serde_json::Value = r.json().await.unwrap_or_default();
    assert_eq!(err["code"], "unauthenticated");
}

#[tokio::test]
async fn bad_keys_are_401_and_unknown_api_paths_404_as_json() {
    let app = spawn_app().await;
    for key in ["", "nope", "hrld_forged", &"x".repeat(500)] {
        assert_eq!(get_workspace(&app, key).await.status(), StatusCode::UNAUTHORIZED, "{key:?}");
    }
    let r = reqwest::get(format!("{}/api/v1/workspace", app.base)).await.expect("request");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = reqwest::get(format!("{}/api/v1/nothing-here", app.base)).await.expect("request");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    assert_eq!(body["code"], "not_found");
}

#[tokio::test]
async fn the_openapi_document_describes_the_api() {
    let app = spawn_app().await;
    let doc: serde_json::Value = reqwest::get(format!("{}/api/v1/openapi.json", app.base))
        .await
        .expect("request")
        .json()
        .await
        .unwrap_or_default();
    assert!(doc["openapi"].as_str().unwrap_or_default().starts_with("3."));
    assert!(doc["paths"]["/api/v1/workspace"]["get"].is_object());
    for path in ["/api/v1/lists", "/api/v1/readers", "/api/v1/readers/bulk", "/api/v1/suppressions"] {
        assert!(doc["paths"][path].is_object(), "{path} missing from the OpenAPI document");
    }
    assert!(doc["components"]["securitySchemes"]["api_key"].is_object());
}

/// What a client generator needs of each operation (the independent validator, run by
/// `scripts/test.sh` against the served document, checks the rest of the specification): a unique
/// camelCase operationId, and every `{name}` of its path declared as a required path parameter.
#[tokio::test]
async fn every_operation_has_a_unique_name_and_declares_its_path_parameters() {
    let app = spawn_app().await;
    let doc: serde_json::Value =
        reqwest::get(format!("{}/api/v1/openapi.json", app.base)).await.expect("request").json().await.expect("json");
    let mut names = std::collections::BTreeMap::new();
    let mut wrong = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let at = format!("{method} {path}");
            let id = op["operationId"].as_str().unwrap_or_default();
            let camel = id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && id.chars().all(|c| c.is_ascii_alphanumeric());
            if !camel {
                wrong.push(format!("{at}: operationId {id:?} is not camelCase"));
            }
            if let Some(other) = names.insert(id.to_string(), at.clone()) {
                wrong.push(format!("{at}: operationId {id} is also {other}'s"));
            }
            let declared: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path" && p["required"] == true)
                .filter_map(|p| p["name"].as_str())
                .collect();
            for name in path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')) {
                if !declared.contains(&name) {
                    wrong.push(format!("{at}: path parameter {name} is not declared"));
                }
            }
        }
    }
    assert!(names.len() > 90, "only {} operations in the document", names.len());
    assert!(wrong.is_empty(), "the OpenAPI document:\n{}", wrong.join("\n"));
}

/// A key is its maker's. The list shows who made it and what it may do; it stops
/// working (403, saying why) while its maker is not an admin, and works again if they are made
/// admin again; it dies with the maker's membership rights, not before; a narrower key may only
/// do what its role allows.
#[tokio::test]
async fn a_key_answers_only_while_its_maker_is_an_admin_and_only_within_its_role() {
    use herald_app::pages::settings::members::{ChangeMemberRole, RemoveMember};
    use herald_types::Role;
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("keys-owner@example.com", "Keys").await;
    let admin = app.add_member(&ws, "keys-admin@example.com", "admin").await;
    let key = admin.run(CreateApiKey { name: "by admin".into(), role: None }).await.value();
    let list = owner.run(ListApiKeys {}).await.value();
    assert_eq!(list[0].created_by.as_deref(), Some("keys-admin@example.com"));
    assert_eq!((list[0].role, list[0].active), (Role::Admin, true));
    assert_eq!(get_workspace(&app, &key).await.status(), StatusCode::OK);

    let admin_id = herald_engine::users::find_by_email(&app.app.db, "keys-admin@example.com")
        .await
        .expect("query")
        .expect("admin")
        .id;
    assert!(owner.run(ChangeMemberRole { user_id: admin_id, role: Role::Author }).await.ok());
    let r = get_workspace(&app, &key).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    assert!(body["message"].as_str().unwrap_or_default().contains("no longer an admin"), "{body}");
    assert!(!owner.run(ListApiKeys {}).await.value()[0].active);
    assert!(owner.run(ChangeMemberRole { user_id: admin_id, role: Role::Admin }).await.ok());
    assert_eq!(get_workspace(&app, &key).await.status(), StatusCode::OK);
    assert!(owner.run(RemoveMember { user_id: admin_id }).await.ok());
    assert_eq!(get_workspace(&app, &key).await.status(), StatusCode::FORBIDDEN, "the maker left");

    // A viewer key reads and cannot write.
    let viewer_key = owner.run(CreateApiKey { name: "dashboard".into(), role: Some(Role::Viewer) }).await.value();
    let client = reqwest::Client::new();
    let read = client.get(format!("{}/api/v1/lists", app.base)).bearer_auth(&viewer_key).send().await.expect("get");
    assert_eq!(read.status(), StatusCode::OK);
    let write = client
        .post(format!("{}/api/v1/lists", app.base))
        .bearer_auth(&viewer_key)
        .json(&serde_json::json!({"name": "Nope"}))
        .send()
        .await
        .expect("post");
    assert_eq!(write.status(), StatusCode::FORBIDDEN);
    let owner_key = owner.run(CreateApiKey { name: "too much".into(), role: Some(Role::Owner) }).await;
    assert_eq!(owner_key.status, StatusCode::UNPROCESSABLE_ENTITY, "a key cannot be an owner");
}

/// A key's rate is counted by every process together (two servers on one database here), each
/// answer says what is left in the IETF `RateLimit` fields, and past the rate the answer is 429
/// with `Retry-After`; another key has its own rate.
#[tokio::test]
async fn a_key_has_one_rate_across_every_process_and_each_answer_says_what_is_left() {
    let limit = [("HERALD_API_REQUESTS_PER_MINUTE", "6")];
    let first = spawn_app_with(&limit).await;
    let (owner, _) = first.owner_with_workspace("rate@example.com", "Rates").await;
    let key = owner.run(CreateApiKey { name: "busy".into(), role: None }).await.value();
    let other = owner.run(CreateApiKey { name: "quiet".into(), role: None }).await.value();
    // Started after the sign-up, whose mail goes through whichever process's worker takes it.
    let second = spawn_app_on(&first.db_url, &limit).await;
    let call = |base: &str, key: &str| {
        reqwest::Client::new().get(format!("{base}/api/v1/workspace")).bearer_auth(key.to_string()).send()
    };
    for n in 0..6u32 {
        let app = if n % 2 == 0 { &first } else { &second };
        let r = call(&app.base, &key).await.expect("request");
        assert_eq!(r.status(), StatusCode::OK, "request {n}");
        assert_eq!(r.headers()["ratelimit-policy"], "\"per-key\";q=6;w=60");
        let left = r.headers()["ratelimit"].to_str().expect("ascii").to_string();
        assert!(left.starts_with(&format!("\"per-key\";r={};t=", 5 - n)), "request {n}: {left}");
    }
    for app in [&first, &second] {
        let r = call(&app.base, &key).await.expect("request");
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = r.headers()["retry-after"].to_str().expect("ascii").parse().expect("seconds");
        assert!((1..=10).contains(&wait), "one request comes back every 10 s: {wait}");
        assert!(r.headers()["ratelimit"].to_str().expect("ascii").contains(";r=0;"));
        let body: serde_json::Value = r.json().await.expect("json");
        assert_eq!(body["code"], "rate_limited");
    }
    assert_eq!(call(&second.base, &other).await.expect("request").status(), StatusCode::OK, "another key's own rate");
}
