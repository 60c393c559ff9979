//! The audit log: each listed action leaves an entry naming who (member or API key),
//! what, which object and from where; owners and admins read it on a page and through
//! `GET /api/v1/audit`; no workspace reads another's; the app cannot change or delete entries.

use reqwest::StatusCode;
use serde_json::{Value, json};

use herald_app::error::AppError;
use herald_app::pages::audience::reader::EraseReader;
use herald_app::pages::campaigns::send_panel::{ScheduleCampaign, UnscheduleCampaign};
use herald_app::pages::settings::api_keys::{CreateApiKey, ListApiKeys, RevokeApiKey};
use herald_app::pages::settings::audit::AuditLog;
use herald_app::pages::settings::general::UpdateWorkspaceSettings;
use herald_app::pages::settings::members::{ChangeMemberRole, InviteMember, RemoveMember, SaveTeamRules};
use herald_types::{CampaignId, Role, UserId};

use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;

/// The audit page's arguments with no filter.
fn whole_log() -> AuditLog {
    AuditLog { action: String::new(), actor: String::new(), before: String::new() }
}

fn actions(entries: &Value) -> Vec<String> {
    entries.as_array().expect("entries").iter().map(|e| e["action"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test]
async fn every_listed_action_is_recorded_with_its_actor_and_stays_in_its_workspace() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "audited@example.com", 3).await;
    let owner = app.browser();
    assert!(owner.login("audited@example.com", "correct horse battery").await.ok());
    let ws = owner.session().await.expect("logged in").current.expect("ws").id;

    // Members: invite, join is by invite elsewhere; role change and removal here.
    assert!(owner.run(InviteMember { email: "hire@example.com".into(), role: Role::Author }).await.ok());
    let _member = app.add_member(&ws, "member@example.com", "author").await;
    let member_id: String = sqlx::query_scalar("SELECT id::text FROM users WHERE email = 'member@example.com'")
        .fetch_one(&app.owner)
        .await?;
    let member: UserId = member_id.parse()?;
    assert!(owner.run(ChangeMemberRole { user_id: member, role: Role::Viewer }).await.ok());
    assert!(owner.run(RemoveMember { user_id: member }).await.ok());
    // Settings, team rules, keys.
    let r = owner
        .run(UpdateWorkspaceSettings {
            name: "Audited Co".into(),
            postal_address: "1 Main Street, Lyon".into(),
            default_from_name: "Audited".into(),
            default_from_email: "news@campaign.test".into(),
            time_zone: None,
        })
        .await;
    assert!(r.ok(), "{:?}", r.result);
    assert!(owner.run(SaveTeamRules { two_factor: None, send_approval: Some("on".into()) }).await.ok());
    assert!(owner.run(SaveTeamRules { two_factor: None, send_approval: None }).await.ok());
    let key = owner.run(CreateApiKey { name: "throwaway".into(), role: None }).await;
    assert!(key.ok());
    let keys = owner.run(ListApiKeys {}).await.value();
    let throwaway = keys.iter().find(|k| k.name == "throwaway").map(|k| k.id).expect("key");
    assert!(owner.run(RevokeApiKey { key_id: throwaway }).await.ok());
    // A campaign scheduled and unscheduled in the UI, then sent through the API.
    let (_, c) = api.post("/api/v1/campaigns", json!({"name": "Audit me", "subject": "s", "list_ids": [list]})).await;
    let id = c["id"].as_str().expect("id").to_string();
    let campaign: CampaignId = id.parse()?;
    let at = (chrono::Utc::now() + chrono::Duration::hours(3)).to_rfc3339();
    assert!(owner.run(ScheduleCampaign { id: campaign, at, timezone: "Europe/Paris".into() }).await.ok());
    assert!(owner.run(UnscheduleCampaign { id: campaign }).await.ok());
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
    assert!(owner.run(EraseReader { id: reader }).await.ok());
    assert_eq!(owner.get("/audience/readers/export.csv").await.status(), StatusCode::OK);
    assert_eq!(api.get(&format!("/api/v1/campaigns/{id}/events.csv")).await.0, StatusCode::OK);

    // The page (owners and admins) and the API see the same log, newest first.
    let page = owner.run(whole_log()).await;
    assert!(page.ok(), "{:?}", page.result);
    let seen: Vec<String> = page.value().entries.iter().map(|e| e.action.as_str().to_string()).collect();
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
    let sent = &body["data"][0];
    assert_eq!(sent["actor_kind"], "api_key");
    assert_eq!(sent["actor"], "API key “test”");
    assert_eq!(sent["object"], id);
    assert_eq!(actions(&body["data"]), ["campaign.sent"]);
    let (_, body) = api.get("/api/v1/audit?action=export.downloaded").await;
    let exports: Vec<(String, String)> = body["data"]
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
    let changed = &body["data"][0];
    assert_eq!(
        (changed["actor"].as_str(), changed["actor_kind"].as_str()),
        (Some("audited@example.com"), Some("user"))
    );
    assert_eq!(changed["object"], "member@example.com");
    assert_eq!(changed["detail"]["role"], "viewer");
    assert_eq!(changed["ip"], "127.0.0.1");
    // Paging and bad filters.
    let (_, first) = api.get("/api/v1/audit?limit=2").await;
    let cursor = first["next_cursor"].as_str().expect("more pages");
    let (_, second) = api.get(&format!("/api/v1/audit?limit=2&cursor={cursor}")).await;
    assert!(second["data"][0]["id"].as_i64() < first["data"][1]["id"].as_i64());
    assert_eq!(api.get("/api/v1/audit?action=nope").await.0, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(api.get("/api/v1/audit?limit=0").await.0, StatusCode::UNPROCESSABLE_ENTITY);

    // Another workspace sees none of it, by page or API.
    let (other, _) = app.owner_with_workspace("elsewhere@example.com", "Elsewhere").await;
    let theirs = other.run(whole_log()).await;
    assert!(theirs.ok());
    let theirs = theirs.value();
    assert_eq!(theirs.entries.len(), 0, "{:?}", theirs.entries);
    let other_api = Api::for_owner(&app, &other).await;
    let (_, body) = other_api.get("/api/v1/audit").await;
    assert_eq!(actions(&body["data"]), ["api_key.created"], "only its own key's creation");

    // Authors and viewers do not read it.
    let viewer = app.add_member(&ws, "viewer@example.com", "viewer").await;
    assert_eq!(viewer.run(whole_log()).await.error(), AppError::Forbidden);
    Ok(())
}

#[tokio::test]
async fn the_app_role_can_append_and_read_but_never_rewrite_the_log() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("append-only@example.com", "Append Only").await;
    assert!(owner.run(CreateApiKey { name: "k".into(), role: None }).await.ok());
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
