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
