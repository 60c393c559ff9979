//! Issue 17, send approval: under the workspace rule an author's "Send" and "Schedule" become
//! requests; only owners and admins approve (the campaign then goes out as asked) or turn them
//! down; editing withdraws a pending request; everything shows in the campaign and the audit log.

use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

use herald_engine::Role;
use herald_engine::campaigns::store;

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

#[tokio::test]
async fn authors_ask_and_only_owners_or_admins_approve_or_turn_down() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "publisher@example.com", 3).await;
    let owner = app.browser();
    assert!(owner.login("publisher@example.com", "correct horse battery").await.ok());
    let ws = owner.session().await["current"]["id"].as_str().expect("ws").to_string();
    let author = app.add_member(&ws, "writer@example.com", "author").await;
    let admin = app.add_member(&ws, "editor@example.com", "admin").await;
    let draft = |name: &'static str| {
        let api = &api;
        let list = list.clone();
        async move {
            let (_, c) = api.post("/api/v1/campaigns", json!({"name": name, "subject": "s", "list_ids": [list]})).await;
            c["id"].as_str().expect("id").to_string()
        }
    };
    let first = draft("Needs a yes").await;

    // Without the rule the author sends directly; with it, "Send" asks.
    assert!(owner.call("save_team_rules", &[("send_approval", "on")]).await.ok());
    let r = author.call("send_campaign", &[("id", &first)]).await;
    assert!(r.ok(), "{:?}", r.body);
    let c = author.call("get_campaign", &[("id", &first)]).await.body;
    assert_eq!(c["status"], "draft", "nothing went out");
    assert_eq!(c["approval_needed"], true);
    assert_eq!(c["approval"]["state"], "pending");
    assert_eq!(c["approval"]["requested_by"], "writer@example.com");
    // The owners and admins hear of it, and the list shows it.
    for approver in ["publisher@example.com", "editor@example.com"] {
        let text = app.mail_text_to(approver).await;
        assert!(
            text.contains("writer@example.com asks for the campaign \"Needs a yes\"") && text.contains(&first),
            "{text}"
        );
    }
    let campaigns = owner.call("list_campaigns", &[]).await.body;
    let row = campaigns["campaigns"].as_array().and_then(|l| l.iter().find(|r| r["id"] == first.as_str())).cloned();
    assert_eq!(row.map(|r| r["awaiting_approval"].clone()), Some(serde_json::Value::Bool(true)));
    // The author cannot approve it, nor go around the rule through the engine's send.
    assert_eq!(author.call("approve_send", &[("id", &first)]).await.status, StatusCode::FORBIDDEN);
    // An admin approves: it is sent.
    let r = admin.call("approve_send", &[("id", &first)]).await;
    assert!(r.ok(), "{:?}", r.body);
    wait_for_status(&api, &first, "sent", Duration::from_secs(60)).await;
    let c = owner.call("get_campaign", &[("id", &first)]).await.body;
    assert_eq!(
        (c["approval"]["state"].as_str(), c["approval"]["decided_by"].as_str()),
        (Some("approved"), Some("editor@example.com"))
    );
    assert_eq!(admin.call("approve_send", &[("id", &first)]).await.status, StatusCode::CONFLICT, "approved once");

    // A scheduled request is scheduled for the time asked; a turned-down one says why.
    let second = draft("Later").await;
    let at = (chrono::Utc::now() + chrono::Duration::hours(5)).to_rfc3339();
    assert!(author.call("schedule_campaign", &[("id", &second), ("at", &at), ("timezone", "Europe/Paris")]).await.ok());
    assert!(owner.call("approve_send", &[("id", &second)]).await.ok());
    let c = owner.call("get_campaign", &[("id", &second)]).await.body;
    assert_eq!(c["status"], "scheduled");
    assert_eq!(c["schedule_tz"], "Europe/Paris");
    // What was approved is what goes out: the author cannot change it while it waits…
    let tenant: herald_engine::TenantId = ws.parse()?;
    let edit: store::CampaignInput =
        serde_json::from_value(json!({"name": "Sneaky", "subject": "changed after approval", "list_ids": [list]}))?;
    let r = store::update(&app.app.db, tenant, Role::Author, second.parse()?, &edit).await;
    assert!(matches!(r, Err(herald_engine::Error::Refused(_))), "{r:?}");
    // …unless they cancel the schedule, which makes it a draft to ask for again.
    assert!(author.call("unschedule_campaign", &[("id", &second)]).await.ok());
    store::update(&app.app.db, tenant, Role::Author, second.parse()?, &edit).await?;
    assert!(author.call("get_campaign", &[("id", &second)]).await.body["approval"].is_null());
    // Nor may an author restart a send: resuming is gated like sending.
    let r = store::resume(&app.app.db, &app.app.jobs, tenant, Role::Author, first.parse()?).await;
    assert!(matches!(r, Err(herald_engine::Error::Refused(_))), "{r:?}");

    let third = draft("Not like this").await;
    assert!(author.call("send_campaign", &[("id", &third)]).await.ok());
    assert!(owner.call("reject_send", &[("id", &third), ("note", "Fix the subject")]).await.ok());
    let c = author.call("get_campaign", &[("id", &third)]).await.body;
    assert_eq!(
        (c["approval"]["state"].as_str(), c["approval"]["note"].as_str()),
        (Some("rejected"), Some("Fix the subject"))
    );
    assert_eq!(owner.call("approve_send", &[("id", &third)]).await.status, StatusCode::CONFLICT);

    // Asking again, then editing, withdraws the request.
    assert!(author.call("send_campaign", &[("id", &third)]).await.ok());
    let (status, body) = api
        .put(&format!("/api/v1/campaigns/{third}"), json!({"name": "Edited", "subject": "better", "list_ids": [list]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let c = author.call("get_campaign", &[("id", &third)]).await.body;
    assert!(c["approval"].is_null(), "{}", c["approval"]);
    assert_eq!(owner.call("approve_send", &[("id", &third)]).await.status, StatusCode::CONFLICT);

    // Owners and admins (and API keys, which admins make) send directly.
    let fourth = draft("Direct").await;
    let (status, body) = api.post(&format!("/api/v1/campaigns/{fourth}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The log tells the story.
    let log = owner.call("audit_log", &[("action", ""), ("actor", ""), ("before", "")]).await.body;
    let rows = log["entries"].as_array().expect("entries");
    let who = |action: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r["action"] == action)
            .map(|r| r["actor"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(who("campaign.approval_requested").len(), 4);
    assert!(who("campaign.approval_requested").iter().all(|a| a == "writer@example.com"));
    assert_eq!(who("campaign.approved"), ["publisher@example.com", "editor@example.com"]);
    assert_eq!(who("campaign.approval_rejected"), ["publisher@example.com"]);
    Ok(())
}
