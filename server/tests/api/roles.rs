//! Every role against every guarded server function: enforced on the server, not in the UI.

use crate::helpers::*;
use reqwest::StatusCode;

#[tokio::test]
async fn each_role_can_do_exactly_what_it_should() {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("owner@example.com", "Roles").await;
    let admin = app.add_member(&ws, "admin@example.com", "admin").await;
    let author = app.add_member(&ws, "author@example.com", "author").await;
    let viewer = app.add_member(&ws, "viewer@example.com", "viewer").await;
    let settings = [
        ("name", "Roles"),
        ("postal_address", "1 Main St"),
        ("default_from_name", "R"),
        ("default_from_email", "r@example.com"),
    ];

    for (who, b, admin_ok) in
        [("owner", &owner, true), ("admin", &admin, true), ("author", &author, false), ("viewer", &viewer, false)]
    {
        // Everyone in the workspace can read.
        for read in ["workspace_settings", "dashboard_summary", "list_members"] {
            let r = b.call(read, &[]).await;
            assert!(r.ok(), "{who} reading {read}: {:?} {}", r.status, r.body);
        }
        // Only owners and admins manage settings, members and keys.
        let expect = if admin_ok { StatusCode::OK } else { StatusCode::FORBIDDEN };
        assert_eq!(b.call("update_workspace_settings", &settings).await.status, expect, "{who} settings");
        assert_eq!(b.call("list_api_keys", &[]).await.status, expect, "{who} list keys");
        assert_eq!(b.call("create_api_key", &[("name", "k")]).await.status, expect, "{who} create key");
        let invitee = format!("invitee-{who}@example.com");
        assert_eq!(
            b.call("invite_member", &[("email", &invitee), ("role", "viewer")]).await.status,
            expect,
            "{who} invite"
        );
    }
    // Viewers do not see pending invites' addresses.
    let v = viewer.call("list_members", &[]).await;
    assert_eq!(v.body["invites"].as_array().map(Vec::len), Some(0));
    assert_eq!(v.body["members"].as_array().map(Vec::len), Some(4));
}

#[tokio::test]
async fn only_owners_touch_ownership_and_the_last_owner_stays() {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("o@example.com", "Own").await;
    let admin = app.add_member(&ws, "a@example.com", "admin").await;
    let members = owner.call("list_members", &[]).await.body;
    let id_of = |email: &str| {
        members["members"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["email"] == email)
            .and_then(|m| m["user_id"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (owner_id, admin_id) = (id_of("o@example.com"), id_of("a@example.com"));
    // An admin cannot demote or remove the owner, nor make themselves owner.
    assert_eq!(
        admin.call("change_member_role", &[("user_id", &owner_id), ("role", "viewer")]).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(admin.call("remove_member", &[("user_id", &owner_id)]).await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        admin.call("change_member_role", &[("user_id", &admin_id), ("role", "owner")]).await.status,
        StatusCode::FORBIDDEN
    );
    // The only owner cannot step down.
    let r = owner.call("change_member_role", &[("user_id", &owner_id), ("role", "admin")]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.message().contains("at least one owner"));
    // After promoting the admin, the first owner may step down.
    assert!(owner.call("change_member_role", &[("user_id", &admin_id), ("role", "owner")]).await.ok());
    assert!(owner.call("change_member_role", &[("user_id", &owner_id), ("role", "viewer")]).await.ok());
    // A removed member loses access at once.
    assert!(admin.call("remove_member", &[("user_id", &owner_id)]).await.ok());
    assert_eq!(owner.call("list_members", &[]).await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn logged_out_callers_get_401() {
    let app = spawn_app().await;
    let anon = app.browser();
    for f in ["list_members", "workspace_settings", "list_api_keys", "dashboard_summary"] {
        assert_eq!(anon.call(f, &[]).await.status, StatusCode::UNAUTHORIZED, "{f}");
    }
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

    let url = |r: &FnResponse| r.body["rows"][0]["url"].as_str().unwrap_or_default().to_string();
    let seen_by_admin = admin.call("list_webhooks", &[]).await;
    assert!(url(&seen_by_admin).contains("/webhooks/ses/"), "{}", seen_by_admin.body);
    let seen_by_viewer = viewer.call("list_webhooks", &[]).await;
    assert!(seen_by_viewer.ok(), "{}", seen_by_viewer.body);
    assert_eq!((url(&seen_by_viewer).as_str(), seen_by_viewer.body["rows"][0]["provider"].as_str()), ("", Some("ses")));

    let id = identity.id.to_string();
    assert_eq!(viewer.call("rotate_webhook", &[("id", &id)]).await.status, StatusCode::FORBIDDEN);
    assert!(admin.call("rotate_webhook", &[("id", &id)]).await.ok());
    assert_ne!(url(&admin.call("list_webhooks", &[]).await), url(&seen_by_admin), "a new URL");
    Ok(())
}

/// Issue 17: anyone may leave a workspace except its only owner, and leaving takes access away
/// at once.
#[tokio::test]
async fn members_leave_a_workspace_but_its_only_owner_cannot() -> TestResult {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("leaver-owner@example.com", "Leavers").await;
    let author = app.add_member(&ws, "leaver-author@example.com", "author").await;
    let r = owner.call("leave_workspace", &[]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert!(r.message().contains("only owner"), "{:?}", r.body);

    assert!(author.call("list_campaigns", &[]).await.ok());
    let r = author.call("leave_workspace", &[]).await;
    assert!(r.ok(), "{:?}", r.body);
    assert_eq!(author.call("list_campaigns", &[]).await.status, StatusCode::FORBIDDEN, "no longer a member");
    assert!(author.session().await["workspaces"].as_array().is_some_and(Vec::is_empty));
    let members = owner.call("list_members", &[]).await.body;
    assert_eq!(members["members"].as_array().map(Vec::len), Some(1));

    // With a second owner, the first may leave.
    let co = app.add_member(&ws, "leaver-co@example.com", "owner").await;
    assert!(owner.call("leave_workspace", &[]).await.ok());
    assert_eq!(co.call("list_members", &[]).await.body["members"].as_array().map(Vec::len), Some(1));
    Ok(())
}
