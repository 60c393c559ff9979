//! Accounts: password change and reset (used, expired, forged and superseded links;
//! the same answer for unknown addresses; every session ends), and the sessions list with
//! logging out one session or all the others.

use herald_app::auth::CreateWorkspace;
use herald_app::error::AppError;
use herald_app::pages::account::overview::{ChangePassword, DeleteAccount, EndOtherSessions, EndSession, ListSessions};
use herald_app::pages::forgot_password::RequestPasswordReset;
use herald_app::pages::reset_password::ResetPassword;
use herald_app::pages::settings::members::ChangeMemberRole;
use std::time::Duration;

use crate::helpers::*;

const PASSWORD: &str = "correct horse battery";

/// Every reset link mailed to `to` so far, oldest first.
async fn reset_links(app: &TestApp, to: &str) -> Vec<String> {
    let mut links: Vec<(u64, String)> = app
        .sink
        .messages()
        .await
        .into_iter()
        .filter(|m| m.rcpt_to.iter().any(|r| r == to))
        .filter_map(|m| {
            let text = m.parse().text.unwrap_or_default();
            let start = text.find("/reset-password?token=")? + "/reset-password?token=".len();
            let token: String = text[start..].chars().take_while(|c| !c.is_whitespace()).collect();
            Some((m.id, token))
        })
        .collect();
    links.sort();
    links.into_iter().map(|(_, t)| t).collect()
}

pub(crate) async fn wait_for_links(app: &TestApp, to: &str, n: usize) -> Vec<String> {
    for _ in 0..150 {
        let links = reset_links(app, to).await;
        if links.len() >= n {
            return links;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{n} reset mails to {to} never arrived");
}

async fn logged_in(b: &Browser) -> bool {
    b.session().await.is_some()
}

#[tokio::test]
async fn a_forgotten_password_is_reset_once_by_the_latest_link_and_every_session_ends() -> TestResult {
    let app = spawn_app().await;
    let laptop = app.browser();
    assert!(app.sign_up(&laptop, "forgetful@example.com", PASSWORD).await.ok());
    let phone = app.browser();
    assert!(phone.login("forgetful@example.com", PASSWORD).await.ok());

    // Unknown and known addresses get the same answer; only the known one gets mail.
    let stranger = app.browser();
    let unknown = stranger.run(RequestPasswordReset { email: "nobody@example.com".into() }).await;
    let known = stranger.run(RequestPasswordReset { email: "Forgetful@example.com".into() }).await;
    assert_eq!((unknown.status, &unknown.result), (known.status, &known.result));
    assert!(known.ok(), "{:?}", known.result);
    let first = wait_for_links(&app, "forgetful@example.com", 1).await.remove(0);
    app.jobs_idle().await;
    assert!(reset_links(&app, "nobody@example.com").await.is_empty());

    // A second request supersedes the first link.
    assert!(stranger.run(RequestPasswordReset { email: "forgetful@example.com".into() }).await.ok());
    let latest = wait_for_links(&app, "forgetful@example.com", 2).await.remove(1);
    let r = stranger.run(ResetPassword { token: first, password: "a brand new secret".into() }).await;
    assert!(!r.ok() && r.message().contains("newer reset link"), "{:?}", r.result);

    // Forged: a token signed with another key, and garbage.
    let forged = herald_engine::infra::tokens::Signer::new(b"not-the-server-key-not-the-server-key").sign(
        "password-reset",
        Some(chrono::Utc::now().timestamp() + 600),
        &("00000000-0000-0000-0000-000000000000", 2, "0000000000000000"),
    );
    for bad in [forged.as_str(), "garbage", ""] {
        let r = stranger.run(ResetPassword { token: bad.into(), password: "a brand new secret".into() }).await;
        assert!(!r.ok() && r.message().contains("not valid"), "{bad}: {:?}", r.result);
    }

    // The latest link works, once; both sessions end; the new password logs in, the old does not.
    let r = stranger.run(ResetPassword { token: latest.clone(), password: "a brand new secret".into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert!(!logged_in(&laptop).await && !logged_in(&phone).await, "every session ended");
    let r = stranger.run(ResetPassword { token: latest, password: "yet another secret".into() }).await;
    assert!(!r.ok() && r.message().contains("used already"), "{:?}", r.result);
    assert!(!app.browser().login("forgetful@example.com", PASSWORD).await.ok());
    assert!(app.browser().login("forgetful@example.com", "a brand new secret").await.ok());

    // Expired: a link minted by the server's own key an instant before it ran out.
    let (user, generation, hash): (uuid::Uuid, i32, String) =
        sqlx::query_as("SELECT id, reset_generation, password_hash FROM users WHERE email = 'forgetful@example.com'")
            .fetch_one(&app.owner)
            .await?;
    use sha2::Digest;
    let fingerprint = hex_prefix(&sha2::Sha256::digest(hash.as_bytes()));
    let expired = app.app.signer.sign(
        "password-reset",
        Some(chrono::Utc::now().timestamp() - 1),
        &(user, generation, fingerprint),
    );
    let r = stranger.run(ResetPassword { token: expired, password: "a brand new secret 2".into() }).await;
    assert!(!r.ok() && r.message().contains("expired"), "{:?}", r.result);

    // Too short a password is refused beside the field, and the link stays usable.
    assert!(stranger.run(RequestPasswordReset { email: "forgetful@example.com".into() }).await.ok());
    let third = wait_for_links(&app, "forgetful@example.com", 3).await.remove(2);
    let r = stranger.run(ResetPassword { token: third.clone(), password: "short".into() }).await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    assert!(stranger.run(ResetPassword { token: third, password: "long enough now".into() }).await.ok());
    Ok(())
}

fn hex_prefix(digest: &[u8]) -> String {
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn reset_mail_to_one_address_is_limited_and_the_answer_does_not_change() -> TestResult {
    let app = spawn_app().await;
    assert!(app.sign_up(&app.browser(), "bombed@example.com", PASSWORD).await.ok());
    let attacker = app.browser();
    for _ in 0..8 {
        let r = attacker.run(RequestPasswordReset { email: "bombed@example.com".into() }).await;
        assert!(r.ok(), "the answer never says the limit was reached: {:?}", r.result);
    }
    // Five a day per recipient; the confirmation mail sent at sign-up was the first. Wait for the
    // four that may go (a busy machine delivers them late), then a moment for a fifth that must not.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while reset_links(&app, "bombed@example.com").await.len() < 4 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.jobs_idle().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reset_links(&app, "bombed@example.com").await.len(), 4, "the per-recipient limit of system mail");
    Ok(())
}

#[tokio::test]
async fn a_password_change_needs_the_current_one_and_ends_the_other_sessions() -> TestResult {
    let app = spawn_app().await;
    let here = app.browser();
    assert!(app.sign_up(&here, "changer@example.com", PASSWORD).await.ok());
    let there = app.browser();
    assert!(there.login("changer@example.com", PASSWORD).await.ok());
    let r = here
        .run(ChangePassword { current_password: "wrong password".into(), new_password: "a new password".into() })
        .await;
    assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    assert!(logged_in(&there).await);
    let r = here.run(ChangePassword { current_password: PASSWORD.into(), new_password: "a new password".into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert!(logged_in(&here).await, "this session stays");
    assert!(!logged_in(&there).await, "the other one ended");
    assert!(app.browser().login("changer@example.com", "a new password").await.ok());
    // Logged out, the function is not reachable.
    let r = app.browser().run(ChangePassword { current_password: "x".into(), new_password: "y".into() }).await;
    assert_eq!(r.error(), AppError::Unauthenticated);
    Ok(())
}

#[tokio::test]
async fn sessions_are_listed_and_ended_one_by_one_or_all_but_this_one() -> TestResult {
    let app = spawn_app().await;
    let here = app.browser();
    assert!(app.sign_up(&here, "devices@example.com", PASSWORD).await.ok());
    let (a, b) = (app.browser(), app.browser());
    assert!(a.login("devices@example.com", PASSWORD).await.ok());
    assert!(b.login("devices@example.com", PASSWORD).await.ok());
    // Someone else's sessions never show.
    assert!(app.sign_up(&app.browser(), "someone-else@example.com", PASSWORD).await.ok());

    let rows = here.run(ListSessions {}).await.value();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows.iter().filter(|s| s.current).count(), 1);
    assert!(rows[0].current, "this device first");
    assert!(rows.iter().all(|s| s.ip == "127.0.0.1" && s.started_at.is_some()), "{rows:?}");
    // Handles are not session ids (the cookie's secret).
    let cookie_ids: Vec<String> = sqlx::query_scalar("SELECT id FROM sessions").fetch_all(&app.owner).await?;
    assert!(rows.iter().all(|s| !cookie_ids.contains(&s.handle)));

    // End one: exactly one other session ends.
    let other = rows.iter().find(|s| !s.current).expect("another session");
    let r = here.run(EndSession { handle: other.handle.clone() }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert_eq!([logged_in(&a).await, logged_in(&b).await].iter().filter(|x| **x).count(), 1);
    // Another account cannot end this account's sessions.
    let intruder = app.browser();
    assert!(intruder.login("someone-else@example.com", PASSWORD).await.ok());
    let mine = here.run(ListSessions {}).await.value();
    let handle = mine[0].handle.clone();
    assert_eq!(intruder.run(EndSession { handle }).await.error(), AppError::NotFound);
    // All but this one.
    assert!(here.run(EndOtherSessions {}).await.ok());
    assert!(!logged_in(&a).await && !logged_in(&b).await && logged_in(&here).await);
    assert_eq!(here.run(ListSessions {}).await.value().len(), 1);
    Ok(())
}

#[tokio::test]
async fn deleting_an_account_takes_its_solo_workspaces_and_keeps_the_last_owner_rule() -> TestResult {
    let app = spawn_app().await;
    let (alone, solo_ws) = app.owner_with_workspace("leaving@example.com", "Solo").await;
    assert!(alone.run(CreateWorkspace { name: "Shared".into(), slug: String::new() }).await.ok());
    let shared_ws = alone.session().await.expect("logged in").current.expect("ws").id;
    let _colleague = app.add_member(&shared_ws, "colleague@example.com", "admin").await;

    let r = alone.run(DeleteAccount { current_password: "not my password".into() }).await;
    assert!(!r.ok() && r.message().contains("password"), "{:?}", r.result);
    // The only owner of a workspace others use cannot leave it ownerless.
    let r = alone.run(DeleteAccount { current_password: PASSWORD.into() }).await;
    assert!(!r.ok() && r.message().contains("Shared"), "{:?}", r.result);
    assert!(!r.message().contains("Solo"), "{:?}", r.result);

    // With another owner there, the account goes, with the workspace only it used.
    let colleague_id: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM users WHERE email = 'colleague@example.com'").fetch_one(&app.owner).await?;
    assert!(alone.run(ChangeMemberRole { user_id: UserId(colleague_id), role: Role::Owner }).await.ok());
    let other_device = app.browser();
    assert!(other_device.login("leaving@example.com", PASSWORD).await.ok());
    let r = alone.run(DeleteAccount { current_password: PASSWORD.into() }).await;
    assert!(r.ok(), "{:?}", r.result);
    assert!(alone.session().await.is_none());
    assert!(other_device.session().await.is_none(), "every session ended");
    assert!(!app.browser().login("leaving@example.com", PASSWORD).await.ok());
    let left: Vec<String> =
        sqlx::query_scalar("SELECT id::text FROM tenants ORDER BY name").fetch_all(&app.owner).await?;
    assert_eq!(left, std::slice::from_ref(&shared_ws), "Solo ({solo_ws}) deleted, Shared kept");
    let owners: i64 =
        sqlx::query_scalar("SELECT count(*) FROM memberships WHERE tenant_id = $1::uuid AND role = 'owner'")
            .bind(&shared_ws)
            .fetch_one(&app.owner)
            .await?;
    assert_eq!(owners, 1);
    Ok(())
}
