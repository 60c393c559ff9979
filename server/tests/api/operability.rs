use crate::helpers::*;
use herald_app::pages::settings::members::InviteMember;
use reqwest::StatusCode;

#[tokio::test]
async fn health_readiness_metrics_and_request_ids() {
    let app = spawn_app().await;
    let b = app.browser();
    let r = b.get("/healthz").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().contains_key("x-request-id"));
    assert_eq!(b.get("/readyz").await.status(), StatusCode::OK);
    assert_eq!(b.get("/login").await.status(), StatusCode::OK);
    let metrics = b.get("/metrics").await.text().await.unwrap_or_default();
    assert!(
        metrics.contains("herald_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("herald_http_request_duration_seconds_bucket"));
    // Readiness notices a missing migration.
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)")
        .execute(&app.owner)
        .await
        .expect("delete");
    assert_eq!(b.get("/readyz").await.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn pages_render_on_the_server_and_unknown_paths_are_404() {
    let app = spawn_app().await;
    let b = app.browser();
    let html = b.get("/signup").await.text().await.unwrap_or_default();
    assert!(html.contains("Create your account") && html.contains("/pkg/herald.js"));
    assert_eq!(b.get("/no/such/page").await.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_dev_inbox_lists_and_shows_caught_mail() {
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("inbox@example.com", "Inbox <b>Co</b>").await;
    assert!(owner.run(InviteMember { email: "reader@example.com".into(), role: Role::Viewer }).await.ok());
    app.mail_text_to("reader@example.com").await;
    let list = owner.get("/dev/inbox").await.text().await.unwrap_or_default();
    assert!(list.contains("reader@example.com") && list.contains("data-testid=\"inbox-row\""));
    // Workspace names are escaped, never injected.
    assert!(!list.contains("<b>Co</b>") && list.contains("&lt;b&gt;Co&lt;/b&gt;"), "{list}");
    let json: serde_json::Value = owner.get("/dev/inbox/messages.json").await.json().await.unwrap_or_default();
    let id = json[0]["id"].as_u64().unwrap_or_default();
    let page = owner.get(&format!("/dev/inbox/{id}")).await.text().await.unwrap_or_default();
    assert!(page.contains("data-testid=\"text-part\"") && page.contains("/invite/"));
    assert_eq!(owner.get("/dev/inbox/99999").await.status(), StatusCode::NOT_FOUND);
}

/// With `HERALD_METRICS_TOKEN`, `/metrics` answers only to that bearer token.
#[tokio::test]
async fn metrics_answer_only_to_their_token() {
    let token = "scrape-token-0123456789";
    let app = spawn_app_with(&[("HERALD_METRICS_TOKEN", token)]).await;
    let client = reqwest::Client::new();
    let url = format!("{}/metrics", app.base);
    assert_eq!(client.get(&url).send().await.expect("get").status(), StatusCode::UNAUTHORIZED);
    let wrong = client.get(&url).bearer_auth("scrape-token-0123456780").send().await.expect("get");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let right = client.get(&url).bearer_auth(token).send().await.expect("get");
    assert_eq!(right.status(), StatusCode::OK);
    assert!(right.text().await.unwrap_or_default().contains("herald_http_requests_total"));
}

/// apalis 1.0 ends a worker at its first failed poll. A real `herald serve` process whose every
/// database connection is dropped at once (as a Postgres restart does) must say so on
/// `/readyz`, rebuild its workers, become ready again, and still send system mail afterwards:
/// the measured defect was a system-mail worker that never came back.
#[tokio::test]
async fn a_process_that_loses_every_connection_reports_dead_workers_and_rebuilds_them() -> anyhow::Result<()> {
    use herald_devtools::smtp_sink::MailSink;
    use std::time::Duration;
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let (sink, smtp) = MailSink::start("127.0.0.1:0").await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("serve")
        .env("DATABASE_URL", &app.db_url)
        .env("HERALD_ENV", "development")
        .env("HERALD_BIND", format!("127.0.0.1:{port}"))
        .env("HERALD_SECRET_KEY", "test-secret-key-that-is-long-enough-0123456789")
        .env("HERALD_SMTP_URL", format!("smtp://{smtp}"))
        .env("HERALD_DEV_SMTP_BIND", "127.0.0.1:0")
        .env("HERALD_DATA_DIR", std::env::temp_dir().join(format!("herald-readyz-{port}")))
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let client = reqwest::Client::new();
    let readyz = format!("http://127.0.0.1:{port}/readyz");
    let ready = || async {
        match client.get(&readyz).send().await {
            Ok(r) => (r.status(), r.text().await.unwrap_or_default()),
            Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()),
        }
    };
    let wait_ready = |why: &'static str| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let (status, body) = ready().await;
            if status == StatusCode::OK {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "{why}: /readyz still answers {status} {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    wait_ready("the process started").await;

    // Drop every connection to the database, again and again, until a poller notices.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let down = 'watch: loop {
        sqlx::query(
            // Not a superuser's: an autovacuum worker on this database runs as the bootstrap
            // superuser, whom the owner may not terminate (the fresh-clone CI at 91d30d6 met one).
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
               AND usesysid NOT IN (SELECT oid FROM pg_roles WHERE rolsuper)",
        )
        .execute(&app.owner)
        .await?;
        for _ in 0..20 {
            let (status, body) = ready().await;
            if status == StatusCode::SERVICE_UNAVAILABLE && body.contains("job workers down") {
                break 'watch body;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(tokio::time::Instant::now() < deadline, "no worker was ever reported down");
    };
    assert!(server.try_wait()?.is_none(), "the process stays up while its workers restart");
    wait_ready("the workers were rebuilt").await;

    // The rebuilt system-mail worker sends.
    let mail = herald_engine::sending::mail::OutgoingMail {
        to: "after-the-outage@example.com".into(),
        subject: "Still here".into(),
        html: "<p>Still here</p>".into(),
        text: "Still here".into(),
        ..Default::default()
    };
    app.app.jobs.enqueue_account_mail(mail).await?;
    assert!(
        sink.wait_for_recipient("after-the-outage@example.com", Duration::from_secs(30)).await.is_some(),
        "system mail after the outage (reported: {down})"
    );
    server.kill().await?;
    Ok(())
}
