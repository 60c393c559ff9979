//! Send approval: under the workspace rule an author's "Send" and "Schedule" become
//! requests; only owners and admins approve (the campaign then goes out as asked) or turn them
//! down; editing withdraws a pending request; everything shows in the campaign and the audit log.

use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

use herald_engine::Role;
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::store;

use herald_app::error::AppError;
use herald_app::pages::campaigns::approval::{ApproveSend, RejectSend};
use herald_app::pages::campaigns::editor::GetCampaign;
use herald_app::pages::campaigns::list::ListCampaigns;
use herald_app::pages::campaigns::send_panel::{ScheduleCampaign, SendCampaign, UnscheduleCampaign};
use herald_app::pages::settings::audit::AuditLog;
use herald_app::pages::settings::members::SaveTeamRules;
use herald_types::{ApprovalState, CampaignId, CampaignStatus};

use crate::campaigns_api::{wait_for_status, workspace_with_readers};
use crate::helpers::*;

#[tokio::test]
async fn authors_ask_and_only_owners_or_admins_approve_or_turn_down() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "publisher@example.com", 3).await;
    let owner = app.browser();
    assert!(owner.login("publisher@example.com", "correct horse battery").await.ok());
    let ws = owner.session().await.expect("logged in").current.expect("ws").id;
    let author = app.add_member(&ws, "writer@example.com", "author").await;
    let admin = app.add_member(&ws, "editor@example.com", "admin").await;
    let draft = |name: &'static str| {
        let api = &api;
        let list = list.clone();
        async move {
            let (_, c) = api.post("/api/v1/campaigns", json!({"name": name, "subject": "s", "list_ids": [list]})).await;
            c["id"].as_str().expect("id").parse::<CampaignId>().expect("id")
        }
    };
    let first = draft("Needs a yes").await;

    // Without the rule the author sends directly; with it, "Send" asks.
    assert!(owner.run(SaveTeamRules { two_factor: None, send_approval: Some("on".into()) }).await.ok());
    let r = author.run(SendCampaign { id: first }).await;
    assert!(r.ok(), "{:?}", r.result);
    let c = author.run(GetCampaign { id: first }).await.value();
    assert_eq!(c.campaign.status, CampaignStatus::Draft, "nothing went out");
    assert!(c.approval_needed);
    assert_eq!(c.approval.as_ref().map(|a| a.state), Some(ApprovalState::Pending));
    assert_eq!(c.approval.as_ref().map(|a| a.requested_by.as_str()), Some("writer@example.com"));
    // The owners and admins hear of it, and the list shows it.
    for approver in ["publisher@example.com", "editor@example.com"] {
        let text = app.mail_text_to(approver).await;
        assert!(
            text.contains("writer@example.com asks for the campaign \"Needs a yes\"")
                && text.contains(&first.to_string()),
            "{text}"
        );
    }
    let campaigns = owner.run(ListCampaigns { filter: Default::default() }).await.value();
    let row = campaigns.campaigns.iter().find(|r| r.id == first).cloned();
    assert_eq!(row.map(|r| r.awaiting_approval), Some(true));
    // The author cannot approve it, nor go around the rule through the engine's send.
    assert_eq!(author.run(ApproveSend { id: first }).await.error(), AppError::Forbidden);
    // An admin approves: it is sent.
    let r = admin.run(ApproveSend { id: first }).await;
    assert!(r.ok(), "{:?}", r.result);
    wait_for_status(&api, &first.to_string(), "sent", Duration::from_secs(60)).await;
    let c = owner.run(GetCampaign { id: first }).await.value();
    assert_eq!(
        (c.approval.as_ref().map(|a| a.state), c.approval.as_ref().and_then(|a| a.decided_by.as_deref())),
        (Some(ApprovalState::Approved), Some("editor@example.com"))
    );
    assert!(matches!(admin.run(ApproveSend { id: first }).await.result, Err(AppError::Conflict(_))), "approved once");

    // A scheduled request is scheduled for the time asked; a turned-down one says why.
    let second = draft("Later").await;
    let at = (chrono::Utc::now() + chrono::Duration::hours(5)).to_rfc3339();
    assert!(author.run(ScheduleCampaign { id: second, at, timezone: "Europe/Paris".into() }).await.ok());
    assert!(owner.run(ApproveSend { id: second }).await.ok());
    let c = owner.run(GetCampaign { id: second }).await.value();
    assert_eq!(c.campaign.status, CampaignStatus::Scheduled);
    assert_eq!(c.campaign.schedule_tz, "Europe/Paris");
    // What was approved is what goes out: the author cannot change it while it waits…
    let tenant: herald_engine::TenantId = ws.parse()?;
    let edit: store::CampaignInput =
        serde_json::from_value(json!({"name": "Sneaky", "subject": "changed after approval", "list_ids": [list]}))?;
    let r = store::update(&app.app.db, tenant, Role::Author, second, &edit).await;
    assert!(matches!(r, Err(herald_engine::Error::Refused(_))), "{r:?}");
    // …unless they cancel the schedule, which makes it a draft to ask for again.
    assert!(author.run(UnscheduleCampaign { id: second }).await.ok());
    store::update(&app.app.db, tenant, Role::Author, second, &edit).await?;
    assert!(author.run(GetCampaign { id: second }).await.value().approval.is_none());
    // Nor may an author restart a send: resuming is gated like sending.
    let r = lifecycle::resume(&app.app.db, &app.app.jobs, tenant, Role::Author, first).await;
    assert!(matches!(r, Err(herald_engine::Error::Refused(_))), "{r:?}");

    let third = draft("Not like this").await;
    assert!(author.run(SendCampaign { id: third }).await.ok());
    assert!(owner.run(RejectSend { id: third, note: "Fix the subject".into() }).await.ok());
    let c = author.run(GetCampaign { id: third }).await.value();
    assert_eq!(
        (c.approval.as_ref().map(|a| a.state), c.approval.as_ref().map(|a| a.note.as_str())),
        (Some(ApprovalState::Rejected), Some("Fix the subject"))
    );
    assert!(matches!(owner.run(ApproveSend { id: third }).await.result, Err(AppError::Conflict(_))));

    // Asking again, then editing, withdraws the request.
    assert!(author.run(SendCampaign { id: third }).await.ok());
    let (status, body) = api
        .put(&format!("/api/v1/campaigns/{third}"), json!({"name": "Edited", "subject": "better", "list_ids": [list]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let c = author.run(GetCampaign { id: third }).await.value();
    assert!(c.approval.is_none(), "{:?}", c.approval);
    assert!(matches!(owner.run(ApproveSend { id: third }).await.result, Err(AppError::Conflict(_))));

    // Owners and admins (and API keys, which admins make) send directly.
    let fourth = draft("Direct").await;
    let (status, body) = api.post(&format!("/api/v1/campaigns/{fourth}/send"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The log tells the story.
    let log = owner.run(AuditLog { action: String::new(), actor: String::new(), before: String::new() }).await.value();
    let rows = &log.entries;
    let who = |action: &str| -> Vec<String> {
        rows.iter().filter(|r| r.action.as_str() == action).map(|r| r.actor.clone()).collect()
    };
    assert_eq!(who("campaign.approval_requested").len(), 4);
    assert!(who("campaign.approval_requested").iter().all(|a| a == "writer@example.com"));
    assert_eq!(who("campaign.approved"), ["publisher@example.com", "editor@example.com"]);
    assert_eq!(who("campaign.approval_rejected"), ["publisher@example.com"]);
    Ok(())
}

fn email_step(subject: &str, body: &str) -> serde_json::Value {
    json!({"action": {"kind": "email", "subject": subject, "body": body}})
}

/// Under the approval rule, what an admin turned on is what goes out: an author's edit of a live
/// automation (new content, a new step) takes it off until an admin starts it again, and
/// nothing of the edit is sent before; the admin's start sends the edited content.
#[tokio::test]
async fn an_authors_edit_of_a_live_automation_waits_for_an_admin() -> TestResult {
    use herald_app::pages::settings::api_keys::CreateApiKey;
    use herald_engine::automations::scheduler;
    let app = spawn_app().await;
    let (admin_api, list) = workspace_with_readers(&app, "approver@example.com", 1).await;
    let owner = app.browser();
    assert!(owner.login("approver@example.com", "correct horse battery").await.ok());
    owner.session().await.expect("logged in").current.expect("a current workspace");
    let r = owner.run(SaveTeamRules { two_factor: None, send_approval: Some("on".into()) }).await;
    assert!(r.ok(), "{:?}", r.result);
    let author_key = owner.run(CreateApiKey { name: "author".into(), role: Some(Role::Author) }).await.value();
    let author = Api { client: reqwest::Client::new(), base: app.base.clone(), key: author_key };

    let wait = json!({"action": {"kind": "wait", "amount": 1, "unit": "days"}});
    let input = |subject: &str, extra: bool| {
        let mut steps = vec![wait.clone(), email_step(subject, "Hello")];
        if extra {
            steps.push(email_step("A step nobody approved", "Surprise"));
        }
        json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list}, "steps": steps})
    };
    let id = crate::automations::create_live(&admin_api, input("Approved", false)).await;
    let (status, body) = admin_api
        .post("/api/v1/readers/bulk", json!({"readers": [{"email": "held@example.com"}], "lists": [list]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The reader is in, waiting a day.
    let (_, report) = admin_api.get(&format!("/api/v1/automations/{id}/report")).await;
    assert_eq!(report["entered"].as_i64(), Some(1), "{report}");

    // The author's edit: new subject, one more step. It is saved, and the automation is off.
    let (_, current) = admin_api.get(&format!("/api/v1/automations/{id}")).await;
    let mut edited = input("Changed by the author", true);
    edited["steps"][0]["id"] = current["steps"][0]["id"].clone();
    edited["steps"][1]["id"] = current["steps"][1]["id"].clone();
    let (status, a) = author.put(&format!("/api/v1/automations/{id}"), edited).await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert_eq!(a["status"], "paused", "{a}");
    assert!(a["pause_reason"].as_str().unwrap_or_default().contains("admin"), "{a}");
    // The author cannot turn it back on; a day later nothing has gone out.
    let (status, body) = author.post(&format!("/api/v1/automations/{id}/start"), json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    scheduler::tick(
        &app.app.db,
        &app.app.jobs,
        chrono::Utc::now() + chrono::Duration::days(1) + chrono::Duration::minutes(1),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(app.sink.messages().await.len(), 0, "the unapproved edit went out");

    // An admin turns it on: the edited content goes out, once.
    let (status, body) = admin_api.post(&format!("/api/v1/automations/{id}/start"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    scheduler::tick(
        &app.app.db,
        &app.app.jobs,
        chrono::Utc::now() + chrono::Duration::days(1) + chrono::Duration::minutes(2),
    )
    .await?;
    assert!(app.sink.wait_for_count(1, Duration::from_secs(30)).await, "the approved step never went out");
    let subject = app.sink.messages().await.remove(0).parse().subject;
    assert_eq!(subject, "Changed by the author");

    // The admin's own edit of a live automation stays live.
    let (_, current) = admin_api.get(&format!("/api/v1/automations/{id}")).await;
    let (status, a) = admin_api.put(&format!("/api/v1/automations/{id}"), json!({
        "name": "Welcome (admin)", "trigger": {"kind": "list_confirmed", "list_id": list}, "steps": current["steps"].clone()
    })).await;
    assert_eq!((status, a["status"].as_str()), (StatusCode::OK, Some("live")), "{a}");
    Ok(())
}

/// A step added to a live automation meets the checks `start` makes before it can send: a
/// broken template is refused, not saved and sent.
#[tokio::test]
async fn a_new_step_on_a_live_automation_meets_the_checks_of_start() -> TestResult {
    let app = spawn_app().await;
    let (api, list) = workspace_with_readers(&app, "checked@example.com", 1).await;
    let id = crate::automations::create_live(
        &api,
        json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list}, "steps": [email_step("Hi", "Hello")]}),
    )
    .await;
    let (_, current) = api.get(&format!("/api/v1/automations/{id}")).await;
    let mut steps = current["steps"].as_array().cloned().unwrap_or_default();
    steps.push(email_step("Broken", "Hello {{ reader.name "));
    let (status, body) = api
        .put(
            &format!("/api/v1/automations/{id}"),
            json!({"name": "Welcome", "trigger": {"kind": "list_confirmed", "list_id": list}, "steps": steps}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("Step 2"), "{body}");
    let (_, after) = api.get(&format!("/api/v1/automations/{id}")).await;
    assert_eq!(after["steps"].as_array().map(Vec::len), Some(1), "the refused edit was saved: {after}");
    Ok(())
}
