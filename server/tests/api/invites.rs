use crate::helpers::*;
use herald_app::error::AppError;
use herald_app::pages::invite::{AcceptInvite, GetInvite};
use herald_app::pages::settings::members::{InviteMember, ListMembers, RevokeInvite};

#[tokio::test]
async fn an_invite_is_mailed_accepted_once_and_creates_the_membership() {
    let app = spawn_app().await;
    let (owner, _ws) = app.owner_with_workspace("boss@example.com", "Invite Co").await;
    let r = owner.run(InviteMember { email: "New.Hire@example.com".into(), role: Role::Author }).await;
    assert!(r.ok(), "{:?} {:?}", r.status, r.result);

    // The invite travels through the job queue and real SMTP into the sink.
    let mail = app
        .sink
        .wait_for_recipient("new.hire@example.com", std::time::Duration::from_secs(15))
        .await
        .expect("invite mail");
    let parsed = mail.parse();
    // Herald's sentence, the workspace's name quoted inside it (never the subject's main text).
    assert_eq!(parsed.subject, "Herald: an invitation to the workspace “Invite Co”");
    let token = invite_token(&parsed.text.unwrap_or_default());
    assert!(parsed.html.unwrap_or_default().contains(&format!("/invite/{token}")));

    // Anyone holding the link sees what it is for.
    let anon = app.browser();
    let preview = anon.run(GetInvite { token: token.clone() }).await;
    assert!(preview.ok());
    let preview = preview.value();
    assert_eq!(preview.workspace_name, "Invite Co");
    assert_eq!(preview.role, Role::Author);
    // Accepting needs a login…
    assert_eq!(anon.run(AcceptInvite { token: token.clone() }).await.error(), AppError::Unauthenticated);
    // …as the invited address.
    let stranger = app.browser();
    assert!(app.sign_up(&stranger, "stranger@example.com", "correct horse battery").await.ok());
    let r = stranger.run(AcceptInvite { token: token.clone() }).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    assert!(
        r.message().contains("new.hire@example.com") || r.message().contains("New.Hire@example.com"),
        "{:?}",
        r.result
    );

    let hire = app.browser();
    // Signing up from the invite ends on it, the address confirmed by the link mailed to it.
    let invite_page = format!("/invite/{token}");
    let r = app.sign_up_then(&hire, "new.hire@EXAMPLE.com", "correct horse battery", Some(&invite_page)).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!(r.headers.get("location").and_then(|v| v.to_str().ok()), Some(invite_page.as_str()));
    let r = hire.run(AcceptInvite { token: token.clone() }).await;
    assert!(r.ok(), "{:?} {:?}", r.status, r.result);
    let current = hire.session().await.expect("logged in").current.expect("current workspace");
    assert_eq!(current.name, "Invite Co");
    assert_eq!(current.role, Role::Author);
    let members = owner.run(ListMembers {}).await.value();
    assert_eq!(members.members.len(), 2);
    assert!(members.invites.is_empty(), "{:?}", members.invites);

    // Single use.
    let again = hire.run(AcceptInvite { token }).await;
    assert!(matches!(again.result, Err(AppError::Invalid(_))), "{} {:?}", again.status, again.result);
    assert!(again.message().contains("already been used"), "{:?}", again.result);
}

#[tokio::test]
async fn forged_and_withdrawn_invites_are_refused() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("boss2@example.com", "Forgery").await;
    assert!(owner.run(InviteMember { email: "x@example.com".into(), role: Role::Viewer }).await.ok());
    let token = invite_token(&app.mail_text_to("x@example.com").await);

    let b = app.browser();
    for forged in ["", "garbage", "abc.def", &format!("{token}x"), &token.replacen('e', "f", 1)] {
        let r = b.run(GetInvite { token: forged.to_string() }).await;
        assert!(r.status.is_client_error(), "forged {forged:?} gave {:?}", r.status);
    }
    // Withdrawn: the link stops working.
    let invites = owner.run(ListMembers {}).await.value();
    let id = invites.invites.first().expect("a pending invite").id;
    assert!(owner.run(RevokeInvite { invite_id: id }).await.ok());
    assert!(app.sign_up(&b, "x@example.com", "correct horse battery").await.ok());
    let r = b.run(AcceptInvite { token }).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
}

#[tokio::test]
async fn owners_cannot_be_invited_and_members_cannot_be_invited_twice() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("boss3@example.com", "Rules").await;
    let invite = |email: &str, role: Role| InviteMember { email: email.into(), role };
    let r = owner.run(invite("y@example.com", Role::Owner)).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    let r = owner.run(invite("boss3@example.com", Role::Admin)).await;
    assert!(matches!(r.result, Err(AppError::Conflict(_))), "{} {:?}", r.status, r.result);
    let r = owner.run(invite("bad\r\nBcc: z@example.com", Role::Admin)).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
}

/// The team through the API: a key invites and re-roles authors and viewers, and can neither
/// grant the admin or owner role nor act on the members who hold one.
#[tokio::test]
async fn a_key_manages_authors_and_viewers_and_never_grants_admin() {
    let app = spawn_app().await;
    let (owner, ws) = app.owner_with_workspace("team-owner@example.com", "Team").await;
    let api = Api::for_owner(&app, &owner).await;
    let author = app.add_member(&ws, "team-author@example.com", "author").await;
    let _admin = app.add_member(&ws, "team-admin@example.com", "admin").await;
    drop(author);
    let id_of = |team: &serde_json::Value, email: &str| {
        team["members"].as_array().expect("members").iter().find(|m| m["email"] == email).expect("member")["user_id"]
            .as_str()
            .expect("id")
            .to_string()
    };
    let (status, team) = api.get("/api/v1/members").await;
    assert_eq!(status, reqwest::StatusCode::OK, "{team}");
    let (author_id, admin_id) = (id_of(&team, "team-author@example.com"), id_of(&team, "team-admin@example.com"));

    for role in ["admin", "owner"] {
        let (status, body) =
            api.post("/api/v1/invites", serde_json::json!({"email": "new@example.com", "role": role})).await;
        assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "invite as {role}: {body}");
        let (status, body) = api
            .send(
                reqwest::Method::PATCH,
                &format!("/api/v1/members/{author_id}"),
                Some(serde_json::json!({"role": role})),
            )
            .await;
        assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "make an author {role}: {body}");
    }
    let (status, body) = api
        .send(
            reqwest::Method::PATCH,
            &format!("/api/v1/members/{admin_id}"),
            Some(serde_json::json!({"role": "viewer"})),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "demote an admin: {body}");
    let (status, _) = api.send(reqwest::Method::DELETE, &format!("/api/v1/members/{admin_id}"), None).await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN, "remove an admin");

    let (status, invite) =
        api.post("/api/v1/invites", serde_json::json!({"email": "new@example.com", "role": "author"})).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{invite}");
    let mail =
        app.sink.wait_for_recipient("new@example.com", std::time::Duration::from_secs(10)).await.expect("invitation");
    assert!(mail.parse().text.unwrap_or_default().contains("/invite/"));
    let (status, _) = api
        .send(reqwest::Method::DELETE, &format!("/api/v1/invites/{}", invite["id"].as_str().expect("id")), None)
        .await;
    assert_eq!(status, reqwest::StatusCode::NO_CONTENT);

    let (status, changed) = api
        .send(
            reqwest::Method::PATCH,
            &format!("/api/v1/members/{author_id}"),
            Some(serde_json::json!({"role": "viewer"})),
        )
        .await;
    assert_eq!((status, changed["role"].as_str()), (reqwest::StatusCode::OK, Some("viewer")), "{changed}");
    let (status, _) = api.send(reqwest::Method::DELETE, &format!("/api/v1/members/{author_id}"), None).await;
    assert_eq!(status, reqwest::StatusCode::NO_CONTENT);
    let (_, team) = api.get("/api/v1/members").await;
    assert_eq!(team["members"].as_array().map(Vec::len), Some(2), "{team}");
}
