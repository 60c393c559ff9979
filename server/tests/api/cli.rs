//! The operator commands, run as the real binary.

use crate::helpers::*;
use std::io::Write;
use std::process::{Command, Stdio};

pub(crate) fn herald(app: &TestApp, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("DATABASE_URL", &app.db_url)
        .env("HERALD_ENV", "development")
        .env("HERALD_SECRET_KEY", "test-secret-key-that-is-long-enough-0123456789")
        .env("RUST_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("herald runs");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("herald exits");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn admin_commands_create_a_user_a_workspace_and_a_working_api_key() {
    let app = spawn_app().await;
    let (ok, out, err) = herald(
        &app,
        &["admin", "create-user", "--email", "ops@example.com", "--password-stdin"],
        "correct horse battery\n",
    );
    assert!(ok, "{out} {err}");
    let (ok, out, err) = herald(
        &app,
        &["admin", "create-workspace", "--owner", "ops@example.com", "--name", "Ops Weekly", "--slug", "ops"],
        "",
    );
    assert!(ok, "{out} {err}");
    let (ok, key, err) = herald(&app, &["admin", "create-api-key", "--workspace", "ops"], "");
    assert!(ok, "{err}");
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/workspace", app.base))
        .bearer_auth(key.trim())
        .send()
        .await
        .expect("request");
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    assert_eq!(body["slug"], "ops");
    // The account logs in through the web app.
    assert!(app.browser().login("ops@example.com", "correct horse battery").await.ok());
    // Errors are one clear line.
    let (ok, _, err) = herald(&app, &["admin", "create-api-key", "--workspace", "nope"], "");
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no workspace with slug nope"));
}

#[test]
fn a_missing_setting_is_one_line_and_help_works_everywhere() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_herald")).arg("migrate").env_remove("DATABASE_URL").output().expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("DATABASE_URL"));
    for sub in [
        &["--help"][..],
        &["serve", "--help"],
        &["worker", "--help"],
        &["migrate", "--help"],
        &["admin", "create-user", "--help"],
        &["admin", "create-api-key", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_herald")).args(sub).output().expect("runs");
        assert!(out.status.success(), "{sub:?}");
    }
}
