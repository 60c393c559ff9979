use crate::helpers::*;
use herald_app::auth::{CreateWorkspace, Logout, Signup, SwitchWorkspace};
use herald_app::error::AppError;
use herald_app::pages::signup_finish::{FinishSignup, ReadSignupLink};
use herald_engine::infra::tokens::Signer;
use reqwest::header::HeaderMap;
use std::time::Duration;

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("herald_session="))
        .map(|c| c.split(';').next().unwrap_or_default().to_string())
}

#[tokio::test]
async fn sign_up_logs_in_and_log_out_ends_the_session() {
    let app = spawn_app().await;
    let b = app.browser();
    let r = app.sign_up(&b, "Ada@Example.com", "correct horse battery").await;
    assert!(r.ok(), "{:?} {:?}", r.status, r.result);
    let cookie = session_cookie(&r.headers).expect("session cookie set");
    let raw = r
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(raw.contains("HttpOnly") && raw.contains("SameSite=Lax"), "{raw}");
    assert!(!cookie.is_empty());
    // Stored in its canonical form: one mailbox, one account, however it is typed.
    let me = b.session().await.expect("logged in");
    assert_eq!(me.email, "ada@example.com");
    // The link came to the address: nothing more to confirm.
    assert!(me.email_verified);
    assert!(b.run(Logout {}).await.ok());
    assert!(b.session().await.is_none());
}

/// The sign-up form says the same for an address with an account as for one
/// without, and makes nothing; the owner of a taken address is told by mail, a new address gets
/// the link that makes the account. Nobody can make an account at an address they do not read
/// (a pre-hijacked account waiting for its owner).
#[tokio::test]
async fn sign_up_answers_the_same_either_way_and_makes_the_account_only_from_the_mailed_link() -> TestResult {
    let app = spawn_app().await;
    assert!(app.sign_up(&app.browser(), "taken@example.com", "correct horse battery").await.ok());
    let visitor = app.browser();
    let start = |email: &str| Signup { email: email.into(), name: "Someone".into(), next: None };
    let taken = visitor.run(start("TAKEN@example.com")).await;
    let fresh = visitor.run(start("fresh@example.com")).await;
    assert!(taken.ok() && fresh.ok(), "{:?} {:?}", taken.result, fresh.result);
    assert_eq!((taken.status, &taken.result), (fresh.status, &fresh.result));
    let header = |r: &Reply<()>| r.headers.get("location").map(|v| v.to_str().unwrap_or_default().to_string());
    assert_eq!(header(&taken), header(&fresh));
    assert!(visitor.session().await.is_none(), "the first step logged someone in");
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users").fetch_one(&app.owner).await?;
    assert_eq!(users, 1, "an account was made before its address was proven");

    // The owner is told; the new address gets the link.
    let note = app.sink.wait_for_recipient("taken@example.com", Duration::from_secs(15)).await.expect("owner told");
    let note = note.parse();
    assert_eq!(note.subject, "You already have a Herald account");
    assert!(!note.text.unwrap_or_default().contains("/signup/finish"), "a taken address got a link to make another");
    let token = app.signup_token("fresh@example.com", None).await;

    // The link: a weak password is refused beside the field and the link still works; then
    // the account is made, confirmed, logged in; a second use finds it made.
    let owner = app.browser();
    let finish =
        |password: &str| FinishSignup { token: token.clone(), name: "Fresh".into(), password: password.into() };
    let weak = owner.run(finish("short")).await;
    assert!(matches!(weak.result, Err(AppError::Invalid(_))), "{} {:?}", weak.status, weak.result);
    assert!(weak.message().contains("at least 10"), "{:?}", weak.result);
    assert!(owner.run(finish("correct horse battery")).await.ok());
    let me = owner.session().await.expect("logged in");
    assert_eq!((me.email.as_str(), me.name.as_str(), me.email_verified), ("fresh@example.com", "Fresh", true));
    let again = app.browser().run(finish("another long password")).await;
    assert!(matches!(again.result, Err(AppError::Conflict(_))), "{} {:?}", again.status, again.result);
    assert!(app.browser().login("fresh@example.com", "another long password").await.result.is_err());

    // Forged, tampered and expired links make nothing.
    let claim = herald_engine::accounts::SignupClaim {
        email: "forged@example.com".into(),
        name: String::new(),
        next: "/".into(),
    };
    let forged = herald_engine::accounts::signup_token(&Signer::new(b"another-key-another-key-another-key"), &claim);
    let expired = app.app.signer.sign("signup", Some(chrono::Utc::now().timestamp() - 1), &claim);
    for bad in [forged, expired.clone(), "garbage".into(), String::new(), format!("{token}x")] {
        let r = app
            .browser()
            .run(FinishSignup { token: bad.clone(), name: String::new(), password: "correct horse battery".into() })
            .await;
        assert!(matches!(r.result, Err(AppError::Invalid(_))), "{bad}: {} {:?}", r.status, r.result);
        assert!(app.browser().run(ReadSignupLink { token: bad }).await.result.is_err());
    }
    let r = app.browser().run(ReadSignupLink { token: expired }).await;
    assert!(r.message().contains("expired"), "{:?}", r.result);
    assert!(herald_engine::users::find_by_email(&app.app.db, "forged@example.com").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn login_cycles_the_session_id() {
    let app = spawn_app().await;
    let b = app.browser();
    let first = app.sign_up(&b, "cycle@example.com", "correct horse battery").await;
    let old = session_cookie(&first.headers).expect("signup sets a session cookie");
    // Logging in again on a browser that already holds a session must issue a new id.
    let r = b.login("cycle@example.com", "correct horse battery").await;
    assert!(r.ok(), "{:?} {:?}", r.status, r.result);
    let new = session_cookie(&r.headers).expect("login sets a session cookie");
    assert_ne!(old, new, "the session id must change on login");
    assert_eq!(b.session().await.expect("logged in").email, "cycle@example.com");
    // The old id no longer identifies anyone.
    // raw: a hand-made request carrying the old cookie, outside this browser's jar.
    let replay = reqwest::Client::new()
        .post(format!("{}/rpc/session", app.base))
        .header("Origin", &app.base)
        .header("Accept", "application/json")
        .header("Cookie", &old)
        .send()
        .await
        .expect("request");
    assert_eq!(replay.text().await.unwrap_or_default(), "null");
}

#[tokio::test]
async fn wrong_password_and_unknown_email_get_the_same_answer() {
    let app = spawn_app().await;
    assert!(app.sign_up(&app.browser(), "known@example.com", "correct horse battery").await.ok());
    let other = app.browser();
    let wrong = other.login("known@example.com", "not the password").await;
    let unknown = other.login("nobody@example.com", "not the password").await;
    assert!(matches!(wrong.result, Err(AppError::Invalid(_))), "{} {:?}", wrong.status, wrong.result);
    assert_eq!(wrong.status, unknown.status);
    assert_eq!(wrong.result, unknown.result);
    assert!(wrong.message().contains("do not match"), "{:?}", wrong.result);
    assert!(other.session().await.is_none());
}

#[tokio::test]
async fn bad_addresses_and_names_are_refused_with_clear_messages() {
    let app = spawn_app().await;
    let b = app.browser();
    let bad_email = b.run(Signup { email: "not-an-email".into(), name: String::new(), next: None }).await;
    assert!(matches!(bad_email.result, Err(AppError::Invalid(_))), "{} {:?}", bad_email.status, bad_email.result);
    let long_name = b.run(Signup { email: "named@example.com".into(), name: "n".repeat(101), next: None }).await;
    assert!(matches!(long_name.result, Err(AppError::Invalid(_))), "{} {:?}", long_name.status, long_name.result);
    assert!(long_name.message().contains("100 characters"), "{:?}", long_name.result);
}

#[tokio::test]
async fn login_is_rate_limited_per_account() {
    let app = spawn_app().await;
    assert!(app.sign_up(&app.browser(), "target@example.com", "correct horse battery").await.ok());
    let attacker = app.browser();
    let mut limited = false;
    for _ in 0..12 {
        let r = attacker.login("target@example.com", "guess guess guess").await;
        if matches!(r.result, Err(AppError::RateLimited)) {
            limited = true;
            break;
        }
        assert!(matches!(r.result, Err(AppError::Invalid(_))), "{} {:?}", r.status, r.result);
    }
    assert!(limited, "ten failures in a minute must trip the per-account limit");
    // Even the right password is refused while limited.
    let r = attacker.login("target@example.com", "correct horse battery").await;
    assert_eq!(r.error(), AppError::RateLimited);
}

#[tokio::test]
async fn passwords_are_stored_as_argon2id() {
    let app = spawn_app().await;
    assert!(app.sign_up(&app.browser(), "hash@example.com", "correct horse battery").await.ok());
    let hash: String =
        sqlx::query_scalar("SELECT password_hash FROM users").fetch_one(&app.owner).await.unwrap_or_default();
    assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hash}");
}

#[tokio::test]
async fn workspaces_can_be_created_and_switched() {
    let app = spawn_app().await;
    let (b, first) = app.owner_with_workspace("multi@example.com", "First").await;
    let r = b.run(CreateWorkspace { name: "Second".into(), slug: "second-ws".into() }).await;
    assert!(r.ok());
    let info = b.session().await.expect("logged in");
    assert_eq!(info.workspaces.len(), 2);
    assert_eq!(info.current.map(|w| w.slug), Some("second-ws".to_string()));
    assert!(b.run(SwitchWorkspace { workspace_id: first.clone() }).await.ok());
    assert_eq!(b.session().await.expect("logged in").current.map(|w| w.id), Some(first));
    let taken = b.run(CreateWorkspace { name: "Third".into(), slug: "second-ws".into() }).await;
    assert!(matches!(taken.result, Err(AppError::Conflict(_))), "{} {:?}", taken.status, taken.result);
}
