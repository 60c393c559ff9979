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

/// The operator's account commands as the real binary: `set-limits --email`,
/// `accounts` (volume per account, busiest first), `suspend-account` and `reinstate-account`.
#[tokio::test]
async fn operators_see_accounts_raise_their_limits_and_suspend_them() {
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let (api, _) = crate::campaigns_api::workspace_with_readers(&app, "busy@example.com", 1).await;
    let _quiet = app.owner_with_workspace("quiet@example.com", "Quiet").await;
    let message = serde_json::json!({"to": "r@example.com", "from": "a@campaign.test", "subject": "s", "text": "t"});
    let (status, body) = api.send_message("one", &message).await;
    assert!(status.is_success(), "{body}");
    sqlx::query("UPDATE messages SET status = 'sent', sent_at = now()").execute(&app.owner).await.expect("sent");

    let (ok, out, err) = herald(&app, &["admin", "accounts", "--json"], "");
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).expect("JSON");
    assert_eq!(rows[0]["email"], "busy@example.com", "busiest first: {out}");
    assert_eq!(rows[0]["tx_sent_1d"], 1, "{out}");
    assert!(rows.iter().any(|r| r["email"] == "quiet@example.com" && r["tx_sent_7d"] == 0), "{out}");
    let (ok, table, _) = herald(&app, &["admin", "accounts"], "");
    assert!(ok && table.contains("busy@example.com") && table.contains("complain%"), "{table}");

    let (ok, out, err) = herald(
        &app,
        &["admin", "set-limits", "--email", "busy@example.com", "--workspaces", "5", "--test-sends-per-day", "default"],
        "",
    );
    assert!(ok, "{out} {err}");
    let busy =
        herald_engine::users::find_by_email(&app.app.db, "busy@example.com").await.expect("query").expect("account");
    let limits = herald_engine::account_limits::limits(&app.app.db, busy.id).await.expect("limits");
    assert_eq!((limits.workspaces, limits.test_sends_per_day), (5, 50));
    let (ok, _, err) = herald(&app, &["admin", "set-limits", "--email", "nobody@example.com", "--workspaces", "5"], "");
    assert!(!ok && err.contains("no account with email nobody@example.com"), "{err}");
    let (ok, _, err) =
        herald(&app, &["admin", "set-limits", "--email", "busy@example.com", "--campaign-mail-per-day", "5"], "");
    assert!(!ok, "a workspace's limit given for an account: {err}");

    let (ok, out, err) =
        herald(&app, &["admin", "suspend-account", "--email", "busy@example.com", "--reason", "spam reports"], "");
    assert!(ok && out.contains("suspended (1 workspaces)"), "{out} {err}");
    assert_eq!(api.get("/api/v1/workspace").await.0, reqwest::StatusCode::FORBIDDEN);
    let (ok, table, _) = herald(&app, &["admin", "accounts"], "");
    assert!(ok && table.contains("busy@example.com (suspended)"), "{table}");
    let (ok, out, err) = herald(&app, &["admin", "reinstate-account", "--email", "busy@example.com"], "");
    assert!(ok, "{out} {err}");
    assert_eq!(api.get("/api/v1/workspace").await.0, reqwest::StatusCode::OK);
}
