use crate::helpers::*;
use reqwest::StatusCode;

#[tokio::test]
async fn an_invite_is_mailed_accepted_once_and_creates_the_membership() {
    let app = spawn_app().await;
    let (owner, _ws) = app.owner_with_workspace("boss@example.com", "Invite Co").await;
    let r = owner.call("invite_member", &[("email", "New.Hire@example.com"), ("role", "author")]).await;
    assert!(r.ok(), "{:?} {}", r.status, r.body);

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
    let preview = anon.call("get_invite", &[("token", &token)]).await;
    assert!(preview.ok());
    assert_eq!(preview.body["workspace_name"], "Invite Co");
    assert_eq!(preview.body["role"], "author");
    // Accepting needs a login…
    assert_eq!(anon.call("accept_invite", &[("token", &token)]).await.status, StatusCode::UNAUTHORIZED);
    // …as the invited address.
    let stranger = app.browser();
    assert!(stranger.signup("stranger@example.com", "correct horse battery").await.ok());
    app.verify_email("stranger@example.com").await;
    let r = stranger.call("accept_invite", &[("token", &token)]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.message().contains("new.hire@example.com") || r.message().contains("New.Hire@example.com"), "{}", r.body);

    let hire = app.browser();
    assert!(hire.signup("new.hire@EXAMPLE.com", "correct horse battery").await.ok());
    // Not before the address is confirmed, through the link mailed at sign-up.
    let r = hire.call("accept_invite", &[("token", &token)]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert!(r.message().contains("Confirm your email address"), "{}", r.body);
    let confirm = app.verification_token("new.hire@example.com").await;
    assert!(app.browser().call("verify_email", &[("token", &confirm)]).await.ok());
    let r = hire.call("accept_invite", &[("token", &token)]).await;
    assert!(r.ok(), "{:?} {}", r.status, r.body);
    let info = hire.session().await;
    assert_eq!(info["current"]["name"], "Invite Co");
    assert_eq!(info["current"]["role"], "author");
    let members = owner.call("list_members", &[]).await.body;
    assert_eq!(members["members"].as_array().map(Vec::len), Some(2));
    assert_eq!(members["invites"].as_array().map(Vec::len), Some(0));

    // Single use.
    let again = hire.call("accept_invite", &[("token", &token)]).await;
    assert_eq!(again.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(again.message().contains("already been used"), "{}", again.body);
}

#[tokio::test]
async fn forged_and_withdrawn_invites_are_refused() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("boss2@example.com", "Forgery").await;
    assert!(owner.call("invite_member", &[("email", "x@example.com"), ("role", "viewer")]).await.ok());
    let token = invite_token(&app.mail_text_to("x@example.com").await);

    let b = app.browser();
    for forged in ["", "garbage", "abc.def", &format!("{token}x"), &token.replacen('e', "f", 1)] {
        let r = b.call("get_invite", &[("token", forged)]).await;
        assert!(r.status.is_client_error(), "forged {forged:?} gave {:?}", r.status);
    }
    // Withdrawn: the link stops working.
    let invites = owner.call("list_members", &[]).await.body;
    let id = invites["invites"][0]["id"].as_str().unwrap_or_default().to_string();
    assert!(owner.call("revoke_invite", &[("invite_id", &id)]).await.ok());
    assert!(b.signup("x@example.com", "correct horse battery").await.ok());
    app.verify_email("x@example.com").await;
    assert_eq!(b.call("accept_invite", &[("token", &token)]).await.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn owners_cannot_be_invited_and_members_cannot_be_invited_twice() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("boss3@example.com", "Rules").await;
    assert_eq!(
        owner.call("invite_member", &[("email", "y@example.com"), ("role", "owner")]).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        owner.call("invite_member", &[("email", "boss3@example.com"), ("role", "admin")]).await.status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        owner.call("invite_member", &[("email", "bad\r\nBcc: z@example.com"), ("role", "admin")]).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
}
