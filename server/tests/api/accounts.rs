use crate::helpers::*;
use reqwest::StatusCode;

fn session_cookie(r: &FnResponse) -> Option<String> {
    r.headers
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
    assert!(r.ok(), "{:?} {}", r.status, r.body);
    let cookie = session_cookie(&r).expect("session cookie set");
    let raw = r
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(raw.contains("HttpOnly") && raw.contains("SameSite=Lax"), "{raw}");
    assert!(!cookie.is_empty());
    assert_eq!(b.session().await["email"], "Ada@Example.com");
    assert!(b.call("logout", &[]).await.ok());
    assert!(b.session().await.is_null());
}

#[tokio::test]
async fn login_cycles_the_session_id() {
    let app = spawn_app().await;
    let b = app.browser();
    let first = b.signup("cycle@example.com", "correct horse battery").await;
    let old = session_cookie(&first).expect("signup sets a session cookie");
    // Logging in again on a browser that already holds a session must issue a new id.
    let r = b.login("cycle@example.com", "correct horse battery").await;
    assert!(r.ok(), "{:?} {}", r.status, r.body);
    let new = session_cookie(&r).expect("login sets a session cookie");
    assert_ne!(old, new, "the session id must change on login");
    assert_eq!(b.session().await["email"], "cycle@example.com");
    // The old id no longer identifies anyone.
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
    assert_eq!(wrong.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(wrong.status, unknown.status);
    assert_eq!(wrong.body, unknown.body);
    assert!(wrong.message().contains("do not match"), "{}", wrong.body);
    assert!(other.session().await.is_null());
}

#[tokio::test]
async fn duplicate_signup_and_weak_passwords_are_refused_with_clear_messages() {
    let app = spawn_app().await;
    let b = app.browser();
    let weak = b.signup("weak@example.com", "short").await;
    assert_eq!(weak.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(weak.message().contains("at least 10"), "{}", weak.body);
    let bad_email = b.signup("not-an-email", "correct horse battery").await;
    assert_eq!(bad_email.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(b.signup("dupe@example.com", "correct horse battery").await.ok());
    let again = app.browser().signup("DUPE@example.com", "correct horse battery").await;
    assert_eq!(again.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn login_is_rate_limited_per_account() {
    let app = spawn_app().await;
    assert!(app.browser().signup("target@example.com", "correct horse battery").await.ok());
    let attacker = app.browser();
    let mut limited = false;
    for _ in 0..12 {
        let r = attacker.login("target@example.com", "guess guess guess").await;
        if r.status == StatusCode::TOO_MANY_REQUESTS {
            limited = true;
            break;
        }
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    }
    assert!(limited, "ten failures in a minute must trip the per-account limit");
    // Even the right password is refused while limited.
    let r = attacker.login("target@example.com", "correct horse battery").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
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
    let r = b.call("create_workspace", &[("name", "Second"), ("slug", "second-ws")]).await;
    assert!(r.ok());
    let info = b.session().await;
    assert_eq!(info["workspaces"].as_array().map(Vec::len), Some(2));
    assert_eq!(info["current"]["slug"], "second-ws");
    assert!(b.call("switch_workspace", &[("workspace_id", &first)]).await.ok());
    assert_eq!(b.session().await["current"]["id"], first.as_str());
    let taken = b.call("create_workspace", &[("name", "Third"), ("slug", "second-ws")]).await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
}
