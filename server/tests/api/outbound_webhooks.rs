//! Outbound webhooks against a real receiver on a local port: every event arrives, retried
//! through failures with the same id; every signature verifies with the Standard Webhooks
//! project's own library (npm `standardwebhooks`, run by node), not with Herald's code; nothing
//! is written for a workspace without a subscribed endpoint; a change whose process dies before
//! delivery (or mid-attempt, `kill -9`) is still delivered; internal destinations and disabled
//! endpoints get nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::helpers::*;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use serde_json::{Value, json};

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Received {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
    answered: u16,
}

#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    /// Every request is held this long before its answer (a slow receiver).
    stall_every: Duration,
    /// Requests that arrived, by event id (counted before any is answered).
    arrived: Arc<Mutex<BTreeMap<String, usize>>>,
    /// Attempts of each event id answered 500 before one is taken.
    fail_first: usize,
    /// The first attempt of each event id is held this long before its answer.
    stall_first: Duration,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> AxumStatus {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let id = header("webhook-id");
    let earlier = {
        let mut arrived = r.arrived.lock().expect("lock");
        let n = arrived.entry(id.clone()).or_default();
        *n += 1;
        *n - 1
    };
    if earlier == 0 && !r.stall_first.is_zero() {
        tokio::time::sleep(r.stall_first).await;
    }
    tokio::time::sleep(r.stall_every).await;
    let answered = if earlier < r.fail_first { 500 } else { 204 };
    r.got.lock().expect("lock").push(Received {
        id,
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body,
        answered,
    });
    AxumStatus::from_u16(answered).expect("status")
}

impl Receiver {
    async fn start(self) -> (String, Self) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hooks", listener.local_addr().expect("addr"));
        let app = axum::Router::new().route("/hooks", axum::routing::post(receive)).with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, self)
    }

    fn all(&self) -> Vec<Received> {
        self.got.lock().expect("lock").clone()
    }

    /// The event types taken (answered 2xx), by event id.
    fn taken(&self) -> BTreeMap<String, String> {
        self.all()
            .into_iter()
            .filter(|g| g.answered < 300)
            .map(|g| {
                let body: Value = serde_json::from_str(&g.body).expect("json body");
                (g.id, body["type"].as_str().unwrap_or_default().to_string())
            })
            .collect()
    }

    async fn wait_for_types(&self, want: &[&str], within: Duration) -> BTreeMap<String, String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let taken = self.taken();
            let types: BTreeSet<&str> = taken.values().map(String::as_str).collect();
            if want.iter().all(|t| types.contains(t)) {
                return taken;
            }
            assert!(tokio::time::Instant::now() < deadline, "still missing some of {want:?}; got {taken:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Checks every request with the specification's library: node runs `standardwebhooks`'s
/// `Webhook.verify` on each, with the secret as Herald showed it once.
fn verify_with_standardwebhooks(secrets: &[&str], got: &[Received]) {
    let modules = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../end2end/node_modules");
    assert!(
        modules.join("standardwebhooks").exists(),
        "end2end/node_modules/standardwebhooks is missing: run `npm ci` in end2end (scripts/test.sh does)"
    );
    let input = json!({
        "secrets": secrets,
        "requests": got.iter().map(|g| json!({
            "id": g.id, "timestamp": g.timestamp, "signature": g.signature, "body": g.body,
        })).collect::<Vec<_>>(),
    });
    // Each request must verify with every secret given (a rotation sends both signatures).
    let script = r#"
        const { Webhook } = require("standardwebhooks");
        const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
        let bad = [];
        for (const secret of input.secrets) {
            const wh = new Webhook(secret);
            for (const r of input.requests) {
                try {
                    wh.verify(r.body, { "webhook-id": r.id, "webhook-timestamp": r.timestamp, "webhook-signature": r.signature });
                } catch (e) { bad.push(r.id + ": " + e.message); }
            }
        }
        if (bad.length) { console.error(bad.join("\n")); process.exit(1); }
        console.log("verified " + input.requests.length);
    "#;
    let mut child = std::process::Command::new("node")
        .arg("-e")
        .arg(script)
        .env("NODE_PATH", &modules)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (Node.js is needed for the browser tests too)");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("write");
    let out = child.wait_with_output().expect("node");
    assert!(
        out.status.success(),
        "standardwebhooks refused Herald's signatures:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn api_for(app: &TestApp, email: &str) -> Api {
    let name = format!("Hooks {}", email.split('@').next().unwrap_or_default());
    let (owner, _) = app.owner_with_workspace(email, &name).await;
    Api::for_owner(app, &owner).await
}

async fn add_endpoint(api: &Api, url: &str, types: &[&str]) -> (String, String) {
    let (status, made) = api.post("/api/v1/webhook-endpoints", json!({"url": url, "event_types": types})).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{made}");
    let secret = made["secret"].as_str().expect("secret").to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    (made["endpoint"]["id"].as_str().expect("id").to_string(), secret)
}

async fn events_in_database(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbound_events").fetch_one(&app.owner).await.expect("count")
}

/// A reader's life, through the API: subscribed (and confirmed: a single opt-in list), changed,
/// tagged, untagged, unsubscribed. Returns the reader's id. `name` keeps lists and addresses apart.
async fn a_readers_life(api: &Api, name: &str) -> i64 {
    let (_, list) = api.post("/api/v1/lists", json!({"name": name, "opt_in": "single"})).await;
    let list = list["id"].as_str().expect("list").to_string();
    let email = format!("{name}@example.com");
    let (status, made) = api.post("/api/v1/readers", json!({"email": email, "lists": [list]})).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{made}");
    let id = made["reader"]["id"].as_i64().expect("id");
    let (status, body) =
        api.send(reqwest::Method::PATCH, &format!("/api/v1/readers/{id}"), Some(json!({"name": "Ada L."}))).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let (status, body) = api.post(&format!("/api/v1/readers/{id}/tags"), json!({"tags": ["vip"]})).await;
    assert!(status.is_success(), "{body}");
    let (status, body) = api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{id}/tags?tags=vip"), None).await;
    assert!(status.is_success(), "{body}");
    let (status, body) =
        api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{id}/subscriptions/{list}"), None).await;
    assert!(status.is_success(), "{body}");
    id
}

async fn erase(api: &Api, reader: i64) {
    let (status, body) = api.send(reqwest::Method::DELETE, &format!("/api/v1/readers/{reader}"), None).await;
    assert!(status.is_success(), "{body}");
}

const READER_LIFE: [&str; 7] = [
    "reader.subscribed",
    "reader.confirmed",
    "reader.updated",
    "reader.tagged",
    "reader.untagged",
    "reader.unsubscribed",
    "reader.deleted",
];

#[tokio::test]
async fn every_event_arrives_signed_and_retried_with_one_id_until_it_is_taken() {
    let app = spawn_app_with(&[("HERALD_WEBHOOK_BACKOFF", "0.2")]).await;
    let api = api_for(&app, "hooks@example.com").await;
    let (url, receiver) = Receiver { fail_first: 2, ..Default::default() }.start().await;
    let (endpoint, secret) = add_endpoint(&api, &url, &["reader.*"]).await;
    let reader = a_readers_life(&api, "ada").await;
    receiver.wait_for_types(&READER_LIFE[..6], Duration::from_secs(60)).await;
    erase(&api, reader).await;
    let taken = receiver.wait_for_types(&READER_LIFE, Duration::from_secs(60)).await;

    let all = receiver.all();
    // Each event: two refusals, then taken; the same id and the same body every time, and one
    // id per event.
    assert_eq!(taken.len(), READER_LIFE.len(), "one event each: {taken:?}");
    for id in taken.keys() {
        let attempts: Vec<&Received> = all.iter().filter(|g| &g.id == id).collect();
        assert_eq!(attempts.len(), 3, "{id}: {attempts:?}");
        assert!(attempts.iter().all(|a| a.body == attempts[0].body), "{id}: the body changed between attempts");
        let body: Value = serde_json::from_str(&attempts[0].body).expect("json");
        assert_eq!((body["id"].as_str(), body["schema_version"].as_i64()), (Some(id.as_str()), Some(1)));
        assert!(body["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')), "{body}");
    }
    verify_with_standardwebhooks(&[&secret], &all);
    // The erasure's event carries ids only, and nothing about the reader was kept.
    let deleted = all.iter().find(|g| g.body.contains("reader.deleted")).expect("deleted");
    assert!(!deleted.body.contains("ada@example.com"), "{}", deleted.body);
    let kept: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbound_events WHERE data::text LIKE '%ada@example.com%'")
            .fetch_one(&app.owner)
            .await
            .expect("count");
    assert_eq!(kept, 0, "erasing the reader purged the events about them");

    // The endpoint's log says what happened.
    let (status, page) = api.get(&format!("/api/v1/webhook-endpoints/{endpoint}/deliveries?limit=100")).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{page}");
    let delivered: Vec<&Value> =
        page["data"].as_array().expect("data").iter().filter(|d| d["state"] == "delivered").collect();
    assert_eq!(delivered.len(), 1, "only reader.deleted is left after the erasure: {page}");
    assert_eq!((delivered[0]["attempts"].as_i64(), delivered[0]["last_status"].as_i64()), (Some(3), Some(204)));
}

#[tokio::test]
async fn nothing_is_written_for_a_workspace_without_a_subscribed_endpoint() {
    let app = spawn_app().await;
    let api = api_for(&app, "quiet@example.com").await;
    let reader = a_readers_life(&api, "first").await;
    erase(&api, reader).await;
    assert_eq!(events_in_database(&app).await, 0, "no endpoint: no event");
    let (url, _receiver) = Receiver::default().start().await;
    add_endpoint(&api, &url, &["campaign.*"]).await;
    let reader = a_readers_life(&api, "second").await;
    erase(&api, reader).await;
    assert_eq!(events_in_database(&app).await, 0, "an endpoint for campaigns only: no reader event");
}

/// A rotation: until the overlap ends, every delivery carries a signature by each secret, so a
/// receiver holding either verifies it.
#[tokio::test]
async fn a_rotated_secret_signs_beside_the_old_one_during_the_overlap() {
    let app = spawn_app().await;
    let api = api_for(&app, "rotate@example.com").await;
    let (url, receiver) = Receiver::default().start().await;
    let (endpoint, old) = add_endpoint(&api, &url, &["reader.*"]).await;
    let (status, rotated) =
        api.post(&format!("/api/v1/webhook-endpoints/{endpoint}/rotate-secret"), json!({"overlap_hours": 2})).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{rotated}");
    let new = rotated["secret"].as_str().expect("secret").to_string();
    assert_ne!(new, old);
    let (status, test) = api.post(&format!("/api/v1/webhook-endpoints/{endpoint}/test"), json!({})).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{test}");
    let taken = receiver.wait_for_types(&["webhook.test"], Duration::from_secs(30)).await;
    assert!(taken.contains_key(test["event_id"].as_str().expect("id")));
    let all = receiver.all();
    assert_eq!(all[0].signature.split(' ').count(), 2, "{}", all[0].signature);
    verify_with_standardwebhooks(&[&old, &new], &all);
}

/// The change commits with its event; the process that would have sent it is gone (here: the
/// server runs no senders), and a worker started later sends it. A worker killed with SIGKILL
/// while the receiver holds its attempt leaves the delivery to the next one once its lease ends.
#[tokio::test]
async fn an_event_whose_sender_died_is_still_delivered() {
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let api = api_for(&app, "crash@example.com").await;
    let (url, receiver) = Receiver { stall_first: Duration::from_secs(30), ..Default::default() }.start().await;
    let (_, secret) = add_endpoint(&api, &url, &["reader.*"]).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "Crash", "opt_in": "single"})).await;
    let (status, _) = api.post("/api/v1/readers", json!({"email": "grace@example.com", "lists": [list["id"]]})).await;
    assert_eq!(status, reqwest::StatusCode::CREATED);
    assert_eq!(events_in_database(&app).await, 2, "subscribed and confirmed, written with the change");

    let worker = || {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .arg("worker")
            .env("DATABASE_URL", &app.db_url)
            .env("HERALD_ENV", "development")
            .env("HERALD_SECRET_KEY", "test-secret-key-that-is-long-enough-0123456789")
            .env("HERALD_DEV_SMTP_BIND", "127.0.0.1:0")
            .env("HERALD_BASE_URL", &app.base)
            .env("HERALD_DATA_DIR", std::env::temp_dir().join("herald-webhook-worker-test"))
            .env("HERALD_WEBHOOK_TIMEOUT_SECONDS", "1")
            .env("HERALD_WEBHOOK_BACKOFF", "0.2")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("herald worker starts")
    };
    // The first worker's attempts are held by the receiver; it dies mid-attempt.
    let mut first = worker();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while sqlx::query_scalar::<_, i64>("SELECT count(*) FROM outbound_deliveries WHERE attempts > 0")
        .fetch_one(&app.owner)
        .await
        .expect("count")
        < 2
    {
        assert!(tokio::time::Instant::now() < deadline, "the first worker claimed nothing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("reaped");

    let mut second = worker();
    let taken = receiver.wait_for_types(&["reader.subscribed", "reader.confirmed"], Duration::from_secs(60)).await;
    second.kill().await.expect("kill");
    assert_eq!(taken.len(), 2);
    verify_with_standardwebhooks(&[&secret], &receiver.all());
}

#[tokio::test]
async fn internal_destinations_are_refused_and_a_disabled_endpoint_gets_nothing() {
    // Production's policy: loopback is not allowed (development allows it for tests and demos).
    let app = spawn_app_with(&[("HERALD_EGRESS_ALLOW", "192.0.2.1/32")]).await;
    let api = api_for(&app, "inside@example.com").await;
    for url in [
        "http://127.0.0.1:9/hooks",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost/x",
        "ftp://example.com/",
    ] {
        let (status, body) =
            api.post("/api/v1/webhook-endpoints", json!({"url": url, "event_types": ["reader.*"]})).await;
        assert_eq!(status, reqwest::StatusCode::UNPROCESSABLE_ENTITY, "{url}: {body}");
        assert!(body["fields"]["url"].is_string(), "{body}");
    }
    // One that got in another way (an address allowed then, a name that now resolves inside)
    // is refused when Herald connects: the receiver on loopback hears nothing.
    let (url, receiver) = Receiver::default().start().await;
    let tenant: String =
        sqlx::query_scalar("SELECT id::text FROM tenants LIMIT 1").fetch_one(&app.owner).await.expect("t");
    let (endpoint, _) = add_endpoint(&api, "http://192.0.2.1/hooks", &["reader.*"]).await;
    let mut tx = app.owner.begin().await.expect("tx");
    sqlx::query("SELECT set_config('app.tenant_id', $1, true)").bind(&tenant).execute(&mut *tx).await.expect("tenant");
    sqlx::query("UPDATE webhook_endpoints SET url = $1 WHERE id = $2::uuid")
        .bind(&url)
        .bind(&endpoint)
        .execute(&mut *tx)
        .await
        .expect("update");
    tx.commit().await.expect("commit");
    let (_, list) = api.post("/api/v1/lists", json!({"name": "Inside", "opt_in": "single"})).await;
    api.post("/api/v1/readers", json!({"email": "mallory@example.com", "lists": [list["id"]]})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let page = loop {
        let (_, page) = api.get(&format!("/api/v1/webhook-endpoints/{endpoint}/deliveries")).await;
        // Recorded, not only claimed: a claim counts the attempt before it is made.
        if page["data"].as_array().is_some_and(|i| i.iter().any(|d| d["last_error"].is_string())) {
            break page;
        }
        assert!(tokio::time::Instant::now() < deadline, "no attempt was recorded: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(receiver.all().is_empty(), "an inside address was reached");
    let attempted =
        page["data"].as_array().expect("data").iter().find(|d| d["attempts"].as_i64() >= Some(1)).expect("one");
    assert_eq!(attempted["last_error"], "Herald could not connect to the endpoint.", "{page}");

    // Disabled: new events are not even written for it, and nothing is sent.
    let (status, body) = api
        .put(
            &format!("/api/v1/webhook-endpoints/{endpoint}"),
            json!({"url": "http://192.0.2.1/hooks", "event_types": ["reader.*"], "enabled": false}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    let before = events_in_database(&app).await;
    api.post("/api/v1/readers", json!({"email": "eve@example.com", "lists": [list["id"]]})).await;
    assert_eq!(events_in_database(&app).await, before, "a disabled endpoint is not subscribed to anything");
    assert!(receiver.all().is_empty());
}

/// Making an endpoint is an admin's act, logged and mailed to the admins; an author's key is
/// refused (the route walk in `access.rs` checks every role).
#[tokio::test]
async fn a_new_endpoint_is_audited_and_mailed_to_the_admins() {
    let app = spawn_app().await;
    let api = api_for(&app, "boss@example.com").await;
    let (url, _receiver) = Receiver::default().start().await;
    add_endpoint(&api, &url, &["reader.*"]).await;
    let mail =
        app.sink.wait_for_recipient("boss@example.com", Duration::from_secs(10)).await.expect("mail to the admin");
    let parsed = mail.parse();
    assert!(parsed.subject.contains("webhook endpoint"), "{}", parsed.subject);
    assert!(parsed.text.unwrap_or_default().contains(&url));
    let (status, log) = api.get("/api/v1/audit").await;
    assert_eq!(status, reqwest::StatusCode::OK);
    assert!(log.to_string().contains("webhook_endpoint.created"), "{log}");
}

/// A receiver that never takes a delivery: attempts stop once a delivery is older than the retry
/// period (`failed`), and once every attempt has failed for the disable period (over several
/// events) the endpoint is turned off, says why, and its admins are mailed. (A day and three
/// days in production.)
#[tokio::test]
async fn an_endpoint_that_keeps_failing_gives_up_and_is_turned_off() {
    let app = spawn_app_with(&[
        ("HERALD_WEBHOOK_BACKOFF", "0.3"),
        ("HERALD_WEBHOOK_RETRY_SECONDS", "1"),
        ("HERALD_WEBHOOK_DISABLE_AFTER_SECONDS", "2"),
    ])
    .await;
    let api = api_for(&app, "failing@example.com").await;
    let (url, receiver) = Receiver { fail_first: usize::MAX, ..Default::default() }.start().await;
    let (endpoint, _) = add_endpoint(&api, &url, &["reader.subscribed"]).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "Failing", "opt_in": "single"})).await;
    let deliveries = format!("/api/v1/webhook-endpoints/{endpoint}/deliveries");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    let shown = loop {
        // A new reader now and then, so there is always something failing.
        if n < 8 {
            n += 1;
            api.post("/api/v1/readers", json!({"email": format!("r{n}@example.com"), "lists": [list["id"]]})).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (_, shown) = api.get(&format!("/api/v1/webhook-endpoints/{endpoint}")).await;
        if shown["enabled"] == false {
            break shown;
        }
        assert!(tokio::time::Instant::now() < deadline, "never turned off: {shown}");
    };
    assert!(shown["disabled_reason"].as_str().is_some_and(|r| r.contains("failed")), "{shown}");
    let (_, page) = api.get(&format!("{deliveries}?limit=100")).await;
    let items = page["data"].as_array().expect("data");
    let failed: Vec<&Value> = items.iter().filter(|d| d["state"] == "failed").collect();
    assert!(!failed.is_empty(), "the oldest gave up: {page}");
    assert!(failed.iter().all(|d| d["attempts"].as_i64() >= Some(2) && d["last_status"] == 500), "{page}");
    assert!(items.iter().all(|d| d["state"] != "delivered"), "{page}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !app.sink.messages().await.iter().any(|m| m.parse().subject == "A webhook endpoint was turned off") {
        assert!(tokio::time::Instant::now() < deadline, "the admins were not mailed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Off: nothing more is written for it, and nothing more is sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (before, attempts) = (events_in_database(&app).await, receiver.all().len());
    api.post("/api/v1/readers", json!({"email": "after@example.com", "lists": [list["id"]]})).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(events_in_database(&app).await, before);
    assert_eq!(receiver.all().len(), attempts, "no attempt after it was turned off");
}

/// One workspace's slow receiver (every answer takes 4 s) holds only its endpoint's share of the
/// senders: another workspace's events arrive at once beside its backlog.
#[tokio::test]
async fn a_slow_endpoint_does_not_hold_up_another_workspaces() {
    let app = spawn_app().await;
    let slow_api = api_for(&app, "slow@example.com").await;
    let fast_api = api_for(&app, "fast@example.com").await;
    let (slow_url, slow) = Receiver { stall_every: Duration::from_secs(4), ..Default::default() }.start().await;
    let (fast_url, fast) = Receiver::default().start().await;
    add_endpoint(&slow_api, &slow_url, &["reader.subscribed"]).await;
    add_endpoint(&fast_api, &fast_url, &["reader.subscribed"]).await;
    let (_, list) = slow_api.post("/api/v1/lists", json!({"name": "Slow", "opt_in": "single"})).await;
    let readers: Vec<Value> = (0..40).map(|i| json!({"email": format!("slow{i}@example.com")})).collect();
    let (status, body) =
        slow_api.post("/api/v1/readers/bulk", json!({"readers": readers, "lists": [list["id"]]})).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    // The slow endpoint's senders are busy now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = tokio::time::Instant::now();
    let (_, list) = fast_api.post("/api/v1/lists", json!({"name": "Fast", "opt_in": "single"})).await;
    fast_api.post("/api/v1/readers", json!({"email": "quick@example.com", "lists": [list["id"]]})).await;
    fast.wait_for_types(&["reader.subscribed"], Duration::from_secs(3)).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "the fast workspace waited {took:?}");
    assert!(slow.all().len() < 40, "the slow one is still working through its backlog");
}

/// Delivered events are pruned after the retention (seven days); one still owed is kept.
#[tokio::test]
async fn delivered_events_are_pruned_after_the_retention() {
    let app = spawn_app_with(&[("HERALD_RUN_WORKERS", "false")]).await;
    let api = api_for(&app, "prune@example.com").await;
    add_endpoint(&api, "http://127.0.0.1:9/never", &["reader.*"]).await;
    let (_, list) = api.post("/api/v1/lists", json!({"name": "Prune", "opt_in": "single"})).await;
    api.post("/api/v1/readers", json!({"email": "old@example.com", "lists": [list["id"]]})).await;
    assert_eq!(events_in_database(&app).await, 2);
    // Both eight days old; one was delivered, the other is still owed.
    let mut tx = app.owner.begin().await.expect("tx");
    let tenant: String =
        sqlx::query_scalar("SELECT id::text FROM tenants LIMIT 1").fetch_one(&mut *tx).await.expect("t");
    sqlx::query("SELECT set_config('app.tenant_id', $1, true)").bind(&tenant).execute(&mut *tx).await.expect("tenant");
    sqlx::query("UPDATE outbound_events SET occurred_at = now() - interval '8 days'")
        .execute(&mut *tx)
        .await
        .expect("age");
    sqlx::query(
        "UPDATE outbound_deliveries SET state = 'delivered', delivered_at = now()
          WHERE event_id = (SELECT id FROM outbound_events WHERE type = 'reader.subscribed')",
    )
    .execute(&mut *tx)
    .await
    .expect("deliver");
    tx.commit().await.expect("commit");
    let pruned: i32 = sqlx::query_scalar("SELECT webhook_prune($1, 100)")
        .bind(7.0 * 86400.0)
        .fetch_one(app.app.db.pool())
        .await
        .expect("prune");
    assert_eq!(pruned, 1);
    let left: Vec<String> =
        sqlx::query_scalar("SELECT type FROM outbound_events").fetch_all(&app.owner).await.expect("left");
    assert_eq!(left, ["reader.confirmed"], "the one still owed stays");
}
