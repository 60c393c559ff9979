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
