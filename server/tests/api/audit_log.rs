//! Issue 17, the audit log: each listed action leaves an entry naming who (member or API key),
//! what, which object and from where; owners and admins read it on a page and through
//! `GET /api/v1/audit`; no workspace reads another's; the app cannot change or delete entries.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;

fn actions(entries: &Value) -> Vec<String> {
    entries.as_array().expect("entries").iter().map(|e| e["action"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test]
async fn every_listed_action_is_recorded_with_its_actor_and_stays_in_its_workspace() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "audited@example.com", 3).await;
    let owner = app.browser();
    assert!(owner.login("audited@example.com", "correct horse battery").await.ok());
    let ws = owner.session().await["current"]["id"].as_str().expect("ws").to_string();

    // Members: invite, join is by invite elsewhere; role change and removal here.
    assert!(owner.call("invite_member", &[("email", "hire@example.com"), ("role", "author")]).await.ok());
    let _member = app.add_member(&ws, "member@example.com", "author").await;
    let member_id: String = sqlx::query_scalar("SELECT id::text FROM users WHERE email = 'member@example.com'")
        .fetch_one(&app.owner)
        .await?;
    assert!(owner.call("change_member_role", &[("user_id", &member_id), ("role", "viewer")]).await.ok());
    assert!(owner.call("remove_member", &[("user_id", &member_id)]).await.ok());
    // Settings, team rules, keys.
    let r = owner
        .call(
            "update_workspace_settings",
            &[
                ("name", "Audited Co"),
                ("postal_address", "1 Main Street, Lyon"),
                ("default_from_name", "Audited"),
                ("default_from_email", "news@campaign.test"),
            ],
        )
        .await;
    assert!(r.ok(), "{:?}", r.body);
    assert!(owner.call("save_team_rules", &[("send_approval", "on")]).await.ok());
    assert!(owner.call("save_team_rules", &[]).await.ok());
    let key = owner.call("create_api_key", &[("name", "throwaway")]).await;
    assert!(key.ok());
    let keys = owner.call("list_api_keys", &[]).await.body;
    let throwaway = keys
        .as_array()
        .and_then(|k| k.iter().find(|k| k["name"] == "throwaway"))
        .and_then(|k| k["id"].as_str())
        .expect("key")
        .to_string();
    assert!(owner.call("revoke_api_key", &[("key_id", &throwaway)]).await.ok());
    // A campaign scheduled and unscheduled in the UI, then sent through the API.
    let (_, c) = api.post("/api/v1/campaigns", json!({"name": "Audit me", "subject": "s", "list_ids": [list]})).await;
    let id = c["id"].as_str().expect("id").to_string();
    let at = (chrono::Utc::now() + chrono::Duration::hours(3)).to_rfc3339();
    assert!(owner.call("schedule_campaign", &[("id", &id), ("at", &at), ("timezone", "Europe/Paris")]).await.ok());
    assert!(owner.call("unschedule_campaign", &[("id", &id)]).await.ok());
    let (status, _) = api.post(&format!("/api/v1/campaigns/{id}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    // Suppression removed (API), a reader erased (UI), an export downloaded.
    let (status, _) = api.post("/api/v1/suppressions", json!({"emails": ["gone@example.com"]})).await;
    assert!(status.is_success());
    let (status, _) = api.send(reqwest::Method::DELETE, "/api/v1/suppressions/gone@example.com", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let reader: i64 = sqlx::query_scalar("SELECT id FROM readers WHERE email = 'audited-r1@example.com'")
        .fetch_one(&app.owner)
        .await?;
    assert!(owner.call("erase_reader", &[("id", &reader.to_string())]).await.ok());
    assert_eq!(owner.get("/audience/readers/export.csv").await.status(), StatusCode::OK);
    assert_eq!(api.get(&format!("/api/v1/campaigns/{id}/events.csv")).await.0, StatusCode::OK);

    // The page (owners and admins) and the API see the same log, newest first.
    let page = owner.call("audit_log", &[("action", ""), ("actor", ""), ("before", "")]).await;
    assert!(page.ok(), "{:?}", page.body);
    let seen = actions(&page.body["entries"]);
    for want in [
        "member.invited",
        "member.role_changed",
        "member.removed",
        "settings.changed",
        "team_rules.changed",
        "api_key.created",
        "api_key.revoked",
        "campaign.scheduled",
        "campaign.unscheduled",
        "campaign.sent",
        "suppression.removed",
        "reader.erased",
        "export.downloaded",
    ] {
        assert!(seen.iter().any(|a| a == want), "{want} missing from {seen:?}");
    }
    let (status, body) = api.get("/api/v1/audit?action=campaign.sent").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sent = &body["entries"][0];
    assert_eq!(sent["actor_kind"], "api_key");
    assert_eq!(sent["actor"], "API key “test”");
    assert_eq!(sent["object"], id);
    assert_eq!(actions(&body["entries"]), ["campaign.sent"]);
    let (_, body) = api.get("/api/v1/audit?action=export.downloaded").await;
    let exports: Vec<(String, String)> = body["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| (e["actor"].as_str().unwrap_or_default().into(), e["object"].as_str().unwrap_or_default().into()))
        .collect();
    assert_eq!(
        exports,
        [
            ("API key “test”".to_string(), format!("campaign {id} events.csv")),
            ("audited@example.com".to_string(), "readers.csv".to_string())
        ]
    );
    let (_, body) = api.get("/api/v1/audit?action=member.role_changed").await;
    let changed = &body["entries"][0];
    assert_eq!(
        (changed["actor"].as_str(), changed["actor_kind"].as_str()),
        (Some("audited@example.com"), Some("user"))
    );
    assert_eq!(changed["object"], "member@example.com");
    assert_eq!(changed["detail"]["role"], "viewer");
    assert_eq!(changed["ip"], "127.0.0.1");
    // Paging and bad filters.
    let (_, first) = api.get("/api/v1/audit?limit=2").await;
    let before = first["next_before"].as_i64().expect("more pages");
    let (_, second) = api.get(&format!("/api/v1/audit?limit=2&before={before}")).await;
    assert!(second["entries"][0]["id"].as_i64() < Some(before));
    assert_eq!(api.get("/api/v1/audit?action=nope").await.0, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(api.get("/api/v1/audit?limit=0").await.0, StatusCode::UNPROCESSABLE_ENTITY);

    // Another workspace sees none of it, by page or API.
    let (other, _) = app.owner_with_workspace("elsewhere@example.com", "Elsewhere").await;
    let theirs = other.call("audit_log", &[("action", ""), ("actor", ""), ("before", "")]).await;
    assert!(theirs.ok());
    assert_eq!(theirs.body["entries"].as_array().map(Vec::len), Some(0), "{}", theirs.body);
    let other_api = Api::for_owner(&app, &other).await;
    let (_, body) = other_api.get("/api/v1/audit").await;
    assert_eq!(actions(&body["entries"]), ["api_key.created"], "only its own key's creation");

    // Authors and viewers do not read it.
    let viewer = app.add_member(&ws, "viewer@example.com", "viewer").await;
    assert_eq!(
        viewer.call("audit_log", &[("action", ""), ("actor", ""), ("before", "")]).await.status,
        StatusCode::FORBIDDEN
    );
    Ok(())
}

#[tokio::test]
async fn the_app_role_can_append_and_read_but_never_rewrite_the_log() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("append-only@example.com", "Append Only").await;
    assert!(owner.call("create_api_key", &[("name", "k")]).await.ok());
    let tenant: herald_engine::TenantId = ws.parse()?;
    // As the runtime role (not the superuser), inside the workspace's own transaction.
    for statement in ["UPDATE audit_log SET actor = 'someone else'", "DELETE FROM audit_log", "TRUNCATE audit_log"] {
        let mut tx = app.app.db.tenant_tx(tenant).await?;
        let r = sqlx::query(statement).execute(&mut *tx).await;
        let e = r.expect_err(statement).to_string();
        assert!(e.contains("permission denied"), "{statement}: {e}");
    }
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log").fetch_one(&app.owner).await?;
    assert_eq!(left, 1);
    Ok(())
}
