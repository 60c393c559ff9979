//! Every role against every guarded server function: enforced on the server, not in the UI.

use crate::helpers::*;
use herald_app::error::AppError;
use herald_app::pages::campaigns::list::ListCampaigns;
use herald_app::pages::dashboard::GetDashboardSummary;
use herald_app::pages::settings::api_keys::{CreateApiKey, ListApiKeys};
use herald_app::pages::settings::general::{GetWorkspaceSettings, UpdateWorkspaceSettings};
use herald_app::pages::settings::members::{ChangeMemberRole, InviteMember, LeaveWorkspace, ListMembers, RemoveMember};
use herald_app::pages::settings::webhooks::{ListWebhooks, RotateWebhook, WebhooksView};
use reqwest::StatusCode;

#[tokio::test]
async fn each_role_can_do_exactly_what_it_should() {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("owner@example.com", "Roles").await;
    let admin = app.add_member(&ws, "admin@example.com", "admin").await;
    let author = app.add_member(&ws, "author@example.com", "author").await;
    let viewer = app.add_member(&ws, "viewer@example.com", "viewer").await;
    let settings = || UpdateWorkspaceSettings {
        name: "Roles".into(),
        postal_address: "1 Main St".into(),
        default_from_name: "R".into(),
        default_from_email: "r@example.com".into(),
        time_zone: None,
    };

    for (who, b, admin_ok) in
        [("owner", &owner, true), ("admin", &admin, true), ("author", &author, false), ("viewer", &viewer, false)]
    {
        // Everyone in the workspace can read.
        let r = b.run(GetWorkspaceSettings {}).await;
        assert!(r.ok(), "{who} reading workspace_settings: {:?} {}", r.status, r.message());
        let r = b.run(GetDashboardSummary { days: 90 }).await;
        assert!(r.ok(), "{who} reading dashboard_summary: {:?} {}", r.status, r.message());
        let r = b.run(ListMembers {}).await;
        assert!(r.ok(), "{who} reading list_members: {:?} {}", r.status, r.message());
        // Only owners and admins manage settings, members and keys.
        let expect = if admin_ok { StatusCode::OK } else { StatusCode::FORBIDDEN };
        assert_eq!(b.run(settings()).await.status, expect, "{who} settings");
        assert_eq!(b.run(ListApiKeys {}).await.status, expect, "{who} list keys");
        assert_eq!(b.run(CreateApiKey { name: "k".into(), role: None }).await.status, expect, "{who} create key");
        let invitee = format!("invitee-{who}@example.com");
        assert_eq!(b.run(InviteMember { email: invitee, role: Role::Viewer }).await.status, expect, "{who} invite");
    }
    // Viewers do not see pending invites' addresses.
    let v = viewer.run(ListMembers {}).await.value();
    assert!(v.invites.is_empty(), "{:?}", v.invites);
    assert_eq!(v.members.len(), 4);
}

#[tokio::test]
async fn only_owners_touch_ownership_and_the_last_owner_stays() {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("o@example.com", "Own").await;
    let admin = app.add_member(&ws, "a@example.com", "admin").await;
    let members = owner.run(ListMembers {}).await.value();
    let id_of = |email: &str| members.members.iter().find(|m| m.email == email).map(|m| m.user_id).expect("a member");
    let (owner_id, admin_id) = (id_of("o@example.com"), id_of("a@example.com"));
    let change = |user_id: UserId, role: Role| ChangeMemberRole { user_id, role };
    // An admin cannot demote or remove the owner, nor make themselves owner.
    assert_eq!(admin.run(change(owner_id, Role::Viewer)).await.status, StatusCode::FORBIDDEN);
    assert_eq!(admin.run(RemoveMember { user_id: owner_id }).await.status, StatusCode::FORBIDDEN);
    assert_eq!(admin.run(change(admin_id, Role::Owner)).await.status, StatusCode::FORBIDDEN);
    // The only owner cannot step down.
    let r = owner.run(change(owner_id, Role::Admin)).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    assert!(r.message().contains("at least one owner"));
    // After promoting the admin, the first owner may step down.
    assert!(owner.run(change(admin_id, Role::Owner)).await.ok());
    assert!(owner.run(change(owner_id, Role::Viewer)).await.ok());
    // A removed member loses access at once.
    assert!(admin.run(RemoveMember { user_id: owner_id }).await.ok());
    assert_eq!(owner.run(ListMembers {}).await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn logged_out_callers_get_401() {
    let app = spawn_app().await;
    let anon = app.browser();
    assert_eq!(anon.run(ListMembers {}).await.error(), AppError::Unauthenticated, "list_members");
    assert_eq!(anon.run(GetWorkspaceSettings {}).await.error(), AppError::Unauthenticated, "workspace_settings");
    assert_eq!(anon.run(ListApiKeys {}).await.error(), AppError::Unauthenticated, "list_api_keys");
    assert_eq!(
        anon.run(GetDashboardSummary { days: 90 }).await.error(),
        AppError::Unauthenticated,
        "dashboard_summary"
    );
}

/// A webhook URL lets whoever holds it report on the workspace's mail: admins see it and can
/// replace it; authors and viewers see only whether webhooks are on.
#[tokio::test]
async fn only_admins_see_and_rotate_webhook_urls() -> TestResult {
    use herald_engine::sending::identities;
    let app = spawn_app().await;
    let (_owner, ws) = app.owner_with_workspace("hooks-owner@example.com", "Hooks").await;
    let admin = app.add_member(&ws, "hooks-admin@example.com", "admin").await;
    let viewer = app.add_member(&ws, "hooks-viewer@example.com", "viewer").await;
    let tenant: herald_engine::TenantId = ws.parse()?;
    let input = identities::IdentityInput {
        name: "Relay".into(),
        smtp_url: "smtp://relay.example.com:587".into(),
        max_connections: 1,
        rate_per_second: 1.0,
        burst: 1,
        ..Default::default()
    };
    let (db, signer) = (&app.app.db, &app.app.signer);
    let identity = identities::save(db, signer, tenant, herald_engine::Role::Owner, None, &input).await?;
    identities::configure_webhook(db, signer, tenant, herald_engine::Role::Owner, identity.id, "ses", "").await?;

    let url = |v: &WebhooksView| v.rows.first().map(|r| r.url.clone()).unwrap_or_default();
    let seen_by_admin = admin.run(ListWebhooks {}).await.value();
    assert!(url(&seen_by_admin).contains("/webhooks/ses/"), "{seen_by_admin:?}");
    let seen_by_viewer = viewer.run(ListWebhooks {}).await;
    assert!(seen_by_viewer.ok(), "{:?}", seen_by_viewer.result);
    let seen_by_viewer = seen_by_viewer.value();
    assert_eq!(
        (url(&seen_by_viewer).as_str(), seen_by_viewer.rows.first().map(|r| r.provider.as_str())),
        ("", Some("ses"))
    );

    assert_eq!(viewer.run(RotateWebhook { id: identity.id }).await.status, StatusCode::FORBIDDEN);
    assert!(admin.run(RotateWebhook { id: identity.id }).await.ok());
    assert_ne!(url(&admin.run(ListWebhooks {}).await.value()), url(&seen_by_admin), "a new URL");
    Ok(())
}

/// Anyone may leave a workspace except its only owner, and leaving takes access away
/// at once.
#[tokio::test]
async fn members_leave_a_workspace_but_its_only_owner_cannot() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("leaver-owner@example.com", "Leavers").await;
    let author = app.add_member(&ws, "leaver-author@example.com", "author").await;
    let r = owner.run(LeaveWorkspace {}).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    assert!(r.message().contains("only owner"), "{:?}", r.result);

    assert!(author.run(ListCampaigns { filter: Default::default() }).await.ok());
    let r = author.run(LeaveWorkspace {}).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!(
        author.run(ListCampaigns { filter: Default::default() }).await.status,
        StatusCode::FORBIDDEN,
        "no longer a member"
    );
    assert!(author.session().await.expect("logged in").workspaces.is_empty());
    let members = owner.run(ListMembers {}).await.value();
    assert_eq!(members.members.len(), 1);

    // With a second owner, the first may leave.
    let co = app.add_member(&ws, "leaver-co@example.com", "owner").await;
    assert!(owner.run(LeaveWorkspace {}).await.ok());
    assert_eq!(co.run(ListMembers {}).await.value().members.len(), 1);
    Ok(())
}
