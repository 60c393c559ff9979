//! Issue 17, accounts: password change and reset (used, expired, forged and superseded links;
//! the same answer for unknown addresses; every session ends), and the sessions list with
//! logging out one session or all the others.

use reqwest::StatusCode;
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

async fn wait_for_links(app: &TestApp, to: &str, n: usize) -> Vec<String> {
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
    !b.session().await.is_null()
}

#[tokio::test]
async fn a_forgotten_password_is_reset_once_by_the_latest_link_and_every_session_ends() -> TestResult {
    let app = spawn_app().await;
    let laptop = app.browser();
    assert!(laptop.signup("forgetful@example.com", PASSWORD).await.ok());
    let phone = app.browser();
    assert!(phone.login("forgetful@example.com", PASSWORD).await.ok());

    // Unknown and known addresses get the same answer; only the known one gets mail.
    let stranger = app.browser();
    let unknown = stranger.call("request_password_reset", &[("email", "nobody@example.com")]).await;
    let known = stranger.call("request_password_reset", &[("email", "Forgetful@example.com")]).await;
    assert_eq!((unknown.status, &unknown.body), (known.status, &known.body));
    assert!(known.ok(), "{:?}", known.body);
    let first = wait_for_links(&app, "forgetful@example.com", 1).await.remove(0);
    app.jobs_idle().await;
    assert!(reset_links(&app, "nobody@example.com").await.is_empty());

    // A second request supersedes the first link.
    assert!(stranger.call("request_password_reset", &[("email", "forgetful@example.com")]).await.ok());
    let latest = wait_for_links(&app, "forgetful@example.com", 2).await.remove(1);
    let r = stranger.call("reset_password", &[("token", &first), ("password", "a brand new secret")]).await;
    assert!(!r.ok() && r.message().contains("newer reset link"), "{:?}", r.body);

    // Forged: a token signed with another key, and garbage.
    let forged = herald_engine::infra::tokens::Signer::new(b"not-the-server-key-not-the-server-key").sign(
        "password-reset",
        Some(chrono::Utc::now().timestamp() + 600),
        &("00000000-0000-0000-0000-000000000000", 2, "0000000000000000"),
    );
    for bad in [forged.as_str(), "garbage", ""] {
        let r = stranger.call("reset_password", &[("token", bad), ("password", "a brand new secret")]).await;
        assert!(!r.ok() && r.message().contains("not valid"), "{bad}: {:?}", r.body);
    }

    // The latest link works, once; both sessions end; the new password logs in, the old does not.
    let r = stranger.call("reset_password", &[("token", &latest), ("password", "a brand new secret")]).await;
    assert!(r.ok(), "{:?}", r.body);
    assert!(!logged_in(&laptop).await && !logged_in(&phone).await, "every session ended");
    let r = stranger.call("reset_password", &[("token", &latest), ("password", "yet another secret")]).await;
    assert!(!r.ok() && r.message().contains("used already"), "{:?}", r.body);
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
    let r = stranger.call("reset_password", &[("token", &expired), ("password", "a brand new secret 2")]).await;
    assert!(!r.ok() && r.message().contains("expired"), "{:?}", r.body);

    // Too short a password is refused beside the field, and the link stays usable.
    assert!(stranger.call("request_password_reset", &[("email", "forgetful@example.com")]).await.ok());
    let third = wait_for_links(&app, "forgetful@example.com", 3).await.remove(2);
    let r = stranger.call("reset_password", &[("token", &third), ("password", "short")]).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert!(stranger.call("reset_password", &[("token", &third), ("password", "long enough now")]).await.ok());
    Ok(())
}

fn hex_prefix(digest: &[u8]) -> String {
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn reset_mail_to_one_address_is_limited_and_the_answer_does_not_change() -> TestResult {
    let app = spawn_app().await;
    assert!(app.browser().signup("bombed@example.com", PASSWORD).await.ok());
    let attacker = app.browser();
    for _ in 0..8 {
        let r = attacker.call("request_password_reset", &[("email", "bombed@example.com")]).await;
        assert!(r.ok(), "the answer never says the limit was reached: {:?}", r.body);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Five a day per recipient; the confirmation mail sent at sign-up was the first.
    assert_eq!(reset_links(&app, "bombed@example.com").await.len(), 4, "the per-recipient limit of system mail");
    Ok(())
}

#[tokio::test]
async fn a_password_change_needs_the_current_one_and_ends_the_other_sessions() -> TestResult {
    let app = spawn_app().await;
    let here = app.browser();
    assert!(here.signup("changer@example.com", PASSWORD).await.ok());
    let there = app.browser();
    assert!(there.login("changer@example.com", PASSWORD).await.ok());
    let r = here
        .call("change_password", &[("current_password", "wrong password"), ("new_password", "a new password")])
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert!(logged_in(&there).await);
    let r = here.call("change_password", &[("current_password", PASSWORD), ("new_password", "a new password")]).await;
    assert!(r.ok(), "{:?}", r.body);
    assert!(logged_in(&here).await, "this session stays");
    assert!(!logged_in(&there).await, "the other one ended");
    assert!(app.browser().login("changer@example.com", "a new password").await.ok());
    // Logged out, the function is not reachable.
    let r = app.browser().call("change_password", &[("current_password", "x"), ("new_password", "y")]).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    Ok(())
}

#[tokio::test]
async fn sessions_are_listed_and_ended_one_by_one_or_all_but_this_one() -> TestResult {
    let app = spawn_app().await;
    let here = app.browser();
    assert!(here.signup("devices@example.com", PASSWORD).await.ok());
    let (a, b) = (app.browser(), app.browser());
    assert!(a.login("devices@example.com", PASSWORD).await.ok());
    assert!(b.login("devices@example.com", PASSWORD).await.ok());
    // Someone else's sessions never show.
    assert!(app.browser().signup("someone-else@example.com", PASSWORD).await.ok());

    let list = here.call("list_sessions", &[]).await.body;
    let rows = list.as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 3, "{list}");
    assert_eq!(rows.iter().filter(|s| s["current"] == true).count(), 1);
    assert_eq!(rows[0]["current"], true, "this device first");
    assert!(rows.iter().all(|s| s["ip"] == "127.0.0.1" && s["started_at"].is_string()), "{list}");
    // Handles are not session ids (the cookie's secret).
    let cookie_ids: Vec<String> = sqlx::query_scalar("SELECT id FROM sessions").fetch_all(&app.owner).await?;
    assert!(rows.iter().all(|s| !cookie_ids.contains(&s["handle"].as_str().unwrap_or_default().to_string())));

    // End one: exactly one other session ends.
    let other = rows.iter().find(|s| s["current"] == false).expect("another session");
    let r = here.call("end_session", &[("handle", other["handle"].as_str().unwrap_or_default())]).await;
    assert!(r.ok(), "{:?}", r.body);
    assert_eq!([logged_in(&a).await, logged_in(&b).await].iter().filter(|x| **x).count(), 1);
    // Another account cannot end this account's sessions.
    let intruder = app.browser();
    assert!(intruder.login("someone-else@example.com", PASSWORD).await.ok());
    let mine = here.call("list_sessions", &[]).await.body;
    let handle = mine[0]["handle"].as_str().unwrap_or_default().to_string();
    assert_eq!(intruder.call("end_session", &[("handle", &handle)]).await.status, StatusCode::NOT_FOUND);
    // All but this one.
    assert!(here.call("end_other_sessions", &[]).await.ok());
    assert!(!logged_in(&a).await && !logged_in(&b).await && logged_in(&here).await);
    assert_eq!(here.call("list_sessions", &[]).await.body.as_array().map(Vec::len), Some(1));
    Ok(())
}

#[tokio::test]
async fn deleting_an_account_takes_its_solo_workspaces_and_keeps_the_last_owner_rule() -> TestResult {
    let app = spawn_app().await;
    let (alone, solo_ws) = app.owner_with_workspace("leaving@example.com", "Solo").await;
    assert!(alone.call("create_workspace", &[("name", "Shared"), ("slug", "")]).await.ok());
    let shared_ws = alone.session().await["current"]["id"].as_str().expect("ws").to_string();
    let _colleague = app.add_member(&shared_ws, "colleague@example.com", "admin").await;

    let r = alone.call("delete_account", &[("current_password", "not my password")]).await;
    assert!(!r.ok() && r.message().contains("password"), "{:?}", r.body);
    // The only owner of a workspace others use cannot leave it ownerless.
    let r = alone.call("delete_account", &[("current_password", PASSWORD)]).await;
    assert!(!r.ok() && r.message().contains("Shared"), "{:?}", r.body);
    assert!(!r.message().contains("Solo"), "{}", r.body);

    // With another owner there, the account goes, with the workspace only it used.
    let colleague_id: String = sqlx::query_scalar("SELECT id::text FROM users WHERE email = 'colleague@example.com'")
        .fetch_one(&app.owner)
        .await?;
    assert!(alone.call("change_member_role", &[("user_id", &colleague_id), ("role", "owner")]).await.ok());
    let other_device = app.browser();
    assert!(other_device.login("leaving@example.com", PASSWORD).await.ok());
    let r = alone.call("delete_account", &[("current_password", PASSWORD)]).await;
    assert!(r.ok(), "{:?}", r.body);
    assert!(alone.session().await.is_null());
    assert!(other_device.session().await.is_null(), "every session ended");
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
