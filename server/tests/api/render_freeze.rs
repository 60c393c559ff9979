//! One member could freeze the whole server. Renders of templates that run to the
//! 5-s time limit, sent from several connections at once, used to block every runtime thread
//! (blocking pipe I/O on async threads, no bound on concurrent children): `/healthz` took 10 s
//! and the process ignored SIGTERM. This starts a real `herald serve`, runs that attack against
//! it, and measures what other users get meanwhile: health and a tracking hit within 200 ms,
//! logins (argon2) within 500 ms, at the 95th percentile; then SIGTERM must end the process
//! within 10 s while the attack goes on.
//!
//! It loads both cores for half a minute, so it runs on its own after the rest of the suite
//! (`scripts/test.sh`, `-- --ignored render_freeze`): the bounds are about Herald's own threads,
//! not about the other tests sharing the machine.

use reqwest::StatusCode;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::campaigns_api::workspace_with_readers;
use crate::helpers::*;

/// About 150 bytes: a 20 MB string copied in a loop. Few instructions (far inside the fuel) and
/// little memory (far inside the cap), but each copy takes milliseconds: the render runs until
/// the sandbox's 5-s limit stops it.
const SLOW_TEMPLATE: &str = "{% set s = 'x' * 20000000 %}{% for i in range(300) %}{% for j in range(300) %}\
                             {% if (s ~ i) | length > 1 %}{% endif %}{% endfor %}{% endfor %}";

const ATTACKERS: usize = 6;
const LOGINS: usize = 20;

fn p95(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 95 / 100).min(samples.len() - 1)]
}

#[tokio::test]
#[ignore = "loads both cores; scripts/test.sh runs it alone after the suite"]
async fn render_freeze_attack_leaves_health_logins_and_tracking_responsive() -> TestResult {
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let (api, _list) = workspace_with_readers(&app, "freeze-owner@example.com", 1).await;
    // One account per login: the per-account login limiter allows 10 a minute.
    for i in 0..LOGINS {
        assert!(app.sign_up(&app.browser(), &format!("bystander{i}@example.com"), "correct horse battery").await.ok());
    }

    let (_sink, smtp) = herald_devtools::smtp_sink::MailSink::start("127.0.0.1:0").await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("serve")
        .env("DATABASE_URL", &app.db_url)
        .env("HERALD_ENV", "development")
        .env("HERALD_BIND", format!("127.0.0.1:{port}"))
        .env("HERALD_BASE_URL", &base)
        .env("HERALD_SECRET_KEY", "test-secret-key-that-is-long-enough-0123456789")
        .env("HERALD_SMTP_URL", format!("smtp://{smtp}"))
        .env("HERALD_DEV_SMTP_BIND", "127.0.0.1:0")
        .env("HERALD_DATA_DIR", std::env::temp_dir().join(format!("herald-freeze-{port}")))
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let deadline = Instant::now() + Duration::from_secs(90);
    while client.get(format!("{base}/readyz")).send().await.ok().map(|r| r.status()) != Some(StatusCode::OK) {
        assert!(Instant::now() < deadline, "herald serve did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The attack: every connection renders the slow template again as soon as it is answered.
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<std::sync::Mutex<Vec<StatusCode>>> = Arc::default();
    let started = Arc::new(AtomicUsize::new(0));
    let mut attack = tokio::task::JoinSet::new();
    for a in 0..ATTACKERS {
        let (client, base, key, stop, answers, started) =
            (client.clone(), base.clone(), api.key.clone(), stop.clone(), answers.clone(), started.clone());
        attack.spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                started.fetch_add(1, Ordering::Relaxed);
                let body =
                    json!({"to": "a@example.com", "from": "x@campaign.test", "subject": "Hi", "html": SLOW_TEMPLATE});
                let sent = client
                    .post(format!("{base}/api/v1/messages"))
                    .bearer_auth(&key)
                    .header("Idempotency-Key", format!("freeze-{a}-{n}"))
                    .json(&body)
                    .send()
                    .await;
                match sent {
                    Ok(r) => answers.lock().unwrap_or_else(|p| p.into_inner()).push(r.status()),
                    // The server going away at SIGTERM ends the attack.
                    Err(_) => break,
                }
            }
        });
    }
    // Let the renders reach the sandbox before measuring.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let timed = |req: reqwest::RequestBuilder| async move {
        let t = Instant::now();
        let r = req.send().await.expect("the server answers during the attack");
        let status = r.status();
        let _ = r.bytes().await;
        (t.elapsed(), status)
    };
    let (mut health, mut tracking, mut logins) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..60 {
        let (d, s) = timed(client.get(format!("{base}/healthz"))).await;
        assert_eq!(s, StatusCode::OK);
        health.push(d);
        let (d, s) = timed(client.get(format!("{base}/o/not-a-real-open-token-{i}"))).await;
        assert!(s.is_success() || s.is_client_error(), "tracking answered {s}");
        tracking.push(d);
        if i % 3 == 0 {
            let bystander =
                Browser { client: reqwest::Client::builder().cookie_store(true).build()?, base: base.clone() };
            let t = Instant::now();
            let r = bystander.login(&format!("bystander{}@example.com", i / 3), "correct horse battery").await;
            logins.push(t.elapsed());
            assert!(r.ok(), "login during the attack: {:?}", r.result);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut sorted_logins = logins.clone();
    sorted_logins.sort();
    println!("logins during the attack, fastest first: {sorted_logins:?}");
    let (health_p95, tracking_p95, login_p95) = (p95(health), p95(tracking), p95(logins));
    println!("during the attack: /healthz p95 {health_p95:?}, tracking p95 {tracking_p95:?}, login p95 {login_p95:?}");

    // SIGTERM while the attack goes on: the process ends within 10 s.
    let pid = server.id().expect("the server runs");
    let term = Instant::now();
    let sent = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    assert!(sent.success(), "kill -TERM {pid}");
    let exited = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
    let stopped_in = term.elapsed();
    stop.store(true, Ordering::Relaxed);
    while attack.join_next().await.is_some() {}
    let answers = answers.lock().unwrap_or_else(|p| p.into_inner()).clone();
    println!(
        "attack: {} renders asked for, answers {answers:?}; SIGTERM ended the process in {stopped_in:?}",
        started.load(Ordering::Relaxed)
    );

    assert!(exited.is_ok(), "herald serve ignored SIGTERM for 10 s during the attack");
    assert!(health_p95 < Duration::from_millis(200), "/healthz p95 {health_p95:?}");
    assert!(tracking_p95 < Duration::from_millis(200), "tracking p95 {tracking_p95:?}");
    assert!(login_p95 < Duration::from_millis(500), "login p95 {login_p95:?}");
    assert!(!answers.contains(&StatusCode::INTERNAL_SERVER_ERROR), "an attack render answered 500: {answers:?}");
    assert!(
        answers.contains(&StatusCode::TOO_MANY_REQUESTS),
        "renders past the workspace's two were not refused: {answers:?}"
    );
    Ok(())
}
