//! Isolation: RLS on every tenant-owned table, nothing visible without a tenant, and no server
//! function or endpoint that reaches across workspaces.

use crate::helpers::*;
use herald_app::pages::transactional::message::MessagePage;
use herald_engine::TenantId;
use herald_types::MessageStatus;
use reqwest::StatusCode;

#[tokio::test]
async fn every_table_with_a_tenant_id_has_forced_row_level_security() {
    let app = spawn_app().await;
    let rows: Vec<(String, bool, bool)> = sqlx::query_as(
        "SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
           AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)",
    )
    .fetch_all(&app.owner)
    .await
    .expect("catalog query");
    assert!(rows.len() >= 3, "expected tenant-owned tables, found {rows:?}");
    let unprotected: Vec<_> = rows.iter().filter(|(_, on, forced)| !(*on && *forced)).map(|r| r.0.clone()).collect();
    assert!(
        unprotected.is_empty(),
        "tables with tenant_id but without ENABLE+FORCE ROW LEVEL SECURITY: {unprotected:?}"
    );
    // Every such table has at least one policy.
    let without_policy: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind = 'r'
           AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id')
           AND NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid)",
    )
    .fetch_all(&app.owner)
    .await
    .expect("policy query");
    assert!(without_policy.is_empty(), "{without_policy:?}");
}

#[tokio::test]
async fn the_runtime_role_is_neither_owner_nor_superuser_nor_bypassrls() {
    let app = spawn_app().await;
    let (user, superuser, bypass): (String, bool, bool) =
        sqlx::query_as("SELECT rolname::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            .fetch_one(app.app.db.pool())
            .await
            .expect("role query");
    assert_eq!(user, "herald_app");
    assert!(!superuser && !bypass);
    let owned: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user")
            .fetch_one(app.app.db.pool())
            .await
            .expect("owner query");
    assert_eq!(owned, 0);
}

#[tokio::test]
async fn queries_without_a_tenant_see_nothing() {
    let t = two_tenants().await;
    assert!(t.a.call("create_api_key", &[("name", "k")]).await.ok());
    assert!(t.a.call("invite_member", &[("email", "i@example.com"), ("role", "viewer")]).await.ok());
    let db = &t.app.app.db;
    for table in ["tenants", "memberships", "invites", "api_keys"] {
        let owner_sees: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(&t.app.owner)
            .await
            .expect("count");
        assert!(owner_sees > 0, "{table} has rows");
        let mut tx = db.begin().await.expect("tx");
        let runtime_sees: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(&mut *tx)
            .await
            .expect("count");
        assert_eq!(runtime_sees, 0, "{table} leaked rows with no tenant set");
        // Outside a transaction too (set_config is transaction-local, so nothing carries over).
        let pooled: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(db.pool())
            .await
            .expect("count");
        assert_eq!(pooled, 0, "{table} leaked rows on a pooled connection");
    }
}

#[tokio::test]
async fn a_tenant_transaction_sees_and_changes_only_its_own_rows() {
    let t = two_tenants().await;
    let a: TenantId = t.a_id.parse().expect("uuid");
    let b: TenantId = t.b_id.parse().expect("uuid");
    let mut tx = t.app.app.db.tenant_tx(a).await.expect("tx");
    let visible: Vec<String> =
        sqlx::query_scalar("SELECT name FROM tenants").fetch_all(&mut *tx).await.expect("select");
    assert_eq!(visible, vec!["Tenant A".to_string()]);
    let changed = sqlx::query("UPDATE tenants SET name = 'pwned' WHERE id = $1")
        .bind(b)
        .execute(&mut *tx)
        .await
        .expect("update")
        .rows_affected();
    assert_eq!(changed, 0);
    let moved = sqlx::query(
        "INSERT INTO memberships (tenant_id, user_id, role) SELECT $1, user_id, 'owner' FROM memberships LIMIT 1",
    )
    .bind(b)
    .execute(&mut *tx)
    .await;
    assert!(moved.is_err(), "writing a row for another tenant must violate the policy");
}

/// The cross-tenant harness: tenant A's session aims every workspace-scoped server function at
/// tenant B's ids. Later features add their functions to this list.
#[tokio::test]
async fn no_server_function_reaches_another_workspace() {
    let t = two_tenants().await;
    // Give B things to aim at.
    let key = t.b.call("create_api_key", &[("name", "b-key")]).await.body.as_str().unwrap_or_default().to_string();
    assert!(t.b.call("invite_member", &[("email", "b-invitee@example.com"), ("role", "viewer")]).await.ok());
    let b_members = t.b.call("list_members", &[]).await.body;
    let b_owner_id = b_members["members"][0]["user_id"].as_str().unwrap_or_default().to_string();
    let b_invite_id = b_members["invites"][0]["id"].as_str().unwrap_or_default().to_string();
    let b_key_id = t.b.call("list_api_keys", &[]).await.body[0]["id"].as_str().unwrap_or_default().to_string();

    let attempts: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("switch_workspace", vec![("workspace_id", &t.b_id)]),
        ("change_member_role", vec![("user_id", &b_owner_id), ("role", "viewer")]),
        ("remove_member", vec![("user_id", &b_owner_id)]),
        ("revoke_invite", vec![("invite_id", &b_invite_id)]),
        ("revoke_api_key", vec![("key_id", &b_key_id)]),
    ];
    for (f, args) in &attempts {
        let r = t.a.call(f, args).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{f} reached tenant B: {:?} {}", r.status, r.body);
    }
    // A's reads show only A.
    let a_members = t.a.call("list_members", &[]).await.body.to_string();
    assert!(!a_members.contains("owner-b@example.com") && !a_members.contains("b-invitee"));
    assert_eq!(t.a.call("workspace_settings", &[]).await.body["name"], "Tenant A");
    assert_eq!(t.a.session().await["workspaces"].as_array().map(Vec::len), Some(1));

    // B is untouched.
    let after = t.b.call("list_members", &[]).await.body;
    assert_eq!(after["members"][0]["role"], "owner");
    assert_eq!(after["invites"].as_array().map(Vec::len), Some(1));
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/workspace", t.app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), StatusCode::OK);
}

/// The harness, for campaigns and sending identities: every campaign and identity function
/// aimed by tenant A at tenant B's ids answers 404 and changes nothing.
#[tokio::test]
async fn no_campaign_or_identity_function_reaches_another_workspace() {
    let t = two_tenants().await;
    let created = t.b.call("create_campaign", &[("name", "B's campaign")]).await;
    assert!(created.ok(), "{:?}", created.body);
    let campaign = created.body.as_str().unwrap_or_default().to_string();
    let saved =
        t.b.call(
            "save_identity",
            &[
                ("id", ""),
                ("identity[name]", "B's server"),
                ("identity[smtp_url]", "smtp://user:secret@127.0.0.1:2525"),
                ("identity[max_connections]", "2"),
                ("identity[rate_per_second]", "5"),
                ("identity[burst]", "5"),
            ],
        )
        .await;
    assert!(saved.ok(), "{:?}", saved.body);
    let identities = t.b.call("list_identities", &[]).await.body;
    let identity = identities["identities"][0]["id"].as_str().unwrap_or_default().to_string();
    assert!(!identity.is_empty(), "B has an identity: {identities}");

    let c = campaign.as_str();
    let attempts: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("get_campaign", vec![("id", c)]),
        ("save_campaign", vec![("id", c), ("input[name]", "Taken over"), ("input[body_format]", "markdown")]),
        ("preview_campaign", vec![("id", c)]),
        ("test_send_campaign", vec![("id", c), ("addresses", "a@example.com")]),
        ("send_campaign", vec![("id", c)]),
        ("schedule_campaign", vec![("id", c), ("at", "2099-01-01T09:00:00Z"), ("timezone", "UTC")]),
        ("unschedule_campaign", vec![("id", c)]),
        ("campaign_report", vec![("id", c)]),
        ("campaign_stats", vec![("id", c)]),
        ("save_webhook", vec![("id", &identity), ("provider", "generic"), ("secret", "taken-over")]),
        ("pause_campaign", vec![("id", c)]),
        ("resume_campaign", vec![("id", c)]),
        ("cancel_campaign", vec![("id", c)]),
        ("retry_failed_sends", vec![("id", c)]),
        ("delete_campaign", vec![("id", c)]),
        ("test_identity", vec![("id", &identity)]),
        ("delete_identity", vec![("id", &identity)]),
        (
            "save_identity",
            vec![
                ("id", &identity),
                ("identity[name]", "Taken over"),
                ("identity[smtp_url]", ""),
                ("identity[max_connections]", "1"),
                ("identity[rate_per_second]", "1"),
                ("identity[burst]", "1"),
            ],
        ),
    ];
    for (f, args) in &attempts {
        let r = t.a.call(f, args).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{f} reached tenant B: {:?} {}", r.status, r.body);
    }
    // Nor B's event export.
    let export = t.a.get(&format!("/campaigns/{c}/events.csv")).await;
    assert_eq!(export.status(), StatusCode::NOT_FOUND);
    // A's lists show none of B's; B's are untouched.
    assert_eq!(t.a.call("list_campaigns", &[]).await.body["campaigns"].as_array().map(Vec::len), Some(0));
    assert_eq!(t.a.call("list_webhooks", &[]).await.body["rows"].as_array().map(Vec::len), Some(0));
    assert_eq!(t.a.call("list_identities", &[]).await.body["identities"].as_array().map(Vec::len), Some(0));
    let theirs = t.b.call("get_campaign", &[("id", c)]).await.body;
    assert_eq!((theirs["name"].as_str(), theirs["status"].as_str()), (Some("B's campaign"), Some("draft")));
    let theirs = t.b.call("list_identities", &[]).await.body;
    assert_eq!(theirs["identities"][0]["name"], "B's server");
}

#[tokio::test]
async fn no_transactional_function_reaches_another_workspace() {
    let t = two_tenants().await;
    let template = serde_json::json!({
        "name": "b-receipt", "subject": "Hi {{ name }}", "html": "<p>Hi {{ name }}</p>", "sample": {"name": "B"}
    });
    let saved = t.b.call_json("save_tx_template", &serde_json::json!({"id": "new", "template": template})).await;
    assert!(saved.ok(), "{:?}", saved.body);
    let template = saved.body.as_str().unwrap_or_default().to_string();
    let b_api = Api::for_owner(&t.app, &t.b).await;
    t.app.verify_domain(&t.b_id, "b.test").await;
    let (status, message) = b_api
        .send_message(
            "b-1",
            &serde_json::json!({"to": "x@example.com", "from": "b@b.test", "template": "b-receipt",
                                                "variables": {"name": "X"}, "send_at": "2099-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{message}");
    let m = message["id"].as_str().unwrap_or_default().to_string();
    let overwrite =
        serde_json::json!({"id": template, "template": {"name": "taken", "subject": "x", "text_body": "x"}});
    let r = t.a.call_json("save_tx_template", &overwrite).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "save_tx_template reached tenant B: {:?} {}", r.status, r.body);
    let attempts: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("tx_template_view", vec![("id", &template)]),
        ("load_message", vec![("id", &m)]),
        ("cancel_message", vec![("id", &m)]),
    ];
    for (f, args) in &attempts {
        let r = t.a.call(f, args).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{f} reached tenant B: {:?} {}", r.status, r.body);
    }
    let mine = t.a.call("list_messages", &[("q", ""), ("status", "")]).await.body;
    assert_eq!(mine["rows"].as_array().map(Vec::len), Some(0), "{mine}");
    assert_eq!(t.a.call("list_tx_templates", &[]).await.body.as_array().map(Vec::len), Some(0));
    // A's API with B's message id and template name: 404 and 422 (no such template here).
    let a_api = Api::for_owner(&t.app, &t.a).await;
    assert_eq!(a_api.get(&format!("/api/v1/messages/{m}")).await.0, StatusCode::NOT_FOUND);
    let (status, _) = a_api
        .send_message("a-1", &serde_json::json!({"to": "y@example.com", "from": "a@a.test", "template": "b-receipt"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let theirs: MessagePage = t.b.call("load_message", &[("id", &m)]).await.typed();
    assert_eq!(theirs.detail.message.status, MessageStatus::Queued, "B's message untouched");
}
