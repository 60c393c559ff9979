use crate::helpers::*;
use herald_app::auth::{CreateWorkspace, Logout, SwitchWorkspace};
use herald_app::error::AppError;
use reqwest::header::HeaderMap;

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
    let r = b.signup("Ada@Example.com", "correct horse battery").await;
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
    // Stored in its canonical form (issue 30 §6): one mailbox, one account, however it is typed.
    assert_eq!(b.session().await.expect("logged in").email, "ada@example.com");
    assert!(b.run(Logout {}).await.ok());
    assert!(b.session().await.is_none());
}

#[tokio::test]
async fn login_cycles_the_session_id() {
    let app = spawn_app().await;
    let b = app.browser();
    let first = b.signup("cycle@example.com", "correct horse battery").await;
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
    let b = app.browser();
    assert!(b.signup("known@example.com", "correct horse battery").await.ok());
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
async fn duplicate_signup_and_weak_passwords_are_refused_with_clear_messages() {
    let app = spawn_app().await;
    let b = app.browser();
    let weak = b.signup("weak@example.com", "short").await;
    assert!(matches!(weak.result, Err(AppError::Invalid(_))), "{} {:?}", weak.status, weak.result);
    assert!(weak.message().contains("at least 10"), "{:?}", weak.result);
    let bad_email = b.signup("not-an-email", "correct horse battery").await;
    assert!(matches!(bad_email.result, Err(AppError::Invalid(_))), "{} {:?}", bad_email.status, bad_email.result);
    assert!(b.signup("dupe@example.com", "correct horse battery").await.ok());
    let again = app.browser().signup("DUPE@example.com", "correct horse battery").await;
    assert!(matches!(again.result, Err(AppError::Conflict(_))), "{} {:?}", again.status, again.result);
}

#[tokio::test]
async fn login_is_rate_limited_per_account() {
    let app = spawn_app().await;
    assert!(app.browser().signup("target@example.com", "correct horse battery").await.ok());
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
    assert!(app.browser().signup("hash@example.com", "correct horse battery").await.ok());
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
