//! `spawn_app()` and a `Browser` that talks to server functions the way the hydrated UI does.

#![allow(dead_code)]

use herald_app::auth::{CreateWorkspace, GetSessionInfo, Login, SessionInfo, Signup, SwitchWorkspace};
use herald_app::error::AppError;
use herald_app::pages::settings::api_keys::CreateApiKey;
use herald_app::pages::signup_finish::FinishSignup;
use herald_server::config::Config;
use herald_server::startup::Application;
use leptos::server_fn::ServerFn;
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::OnceCell;

/// The contract's values the typed calls take, for every test module.
pub use herald_types::{Role, UserId};

pub type TestResult = anyhow::Result<()>;

static TEMPLATE: OnceCell<String> = OnceCell::const_new();
static ROLES: OnceCell<herald_devtools::ordinary_owner::OrdinaryOwner> = OnceCell::const_new();

/// The ordinary owner's and the inspector's URLs (see `herald_devtools::ordinary_owner`), made
/// from whatever `DATABASE_URL` the tests are given: Herald is tested as it runs on managed
/// Postgres, never as a superuser.
async fn roles() -> &'static herald_devtools::ordinary_owner::OrdinaryOwner {
    ROLES
        .get_or_try_init(|| async {
            let url = std::env::var("DATABASE_URL")
                .map_err(|_| anyhow::anyhow!("DATABASE_URL must point at a Postgres server (make test sets it)"))?;
            herald_devtools::ordinary_owner::ensure(&url).await
        })
        .await
        .expect("the test roles can be set up")
}

/// The ordinary owner's URL on the database named in `DATABASE_URL`.
async fn owner_url() -> String {
    roles().await.owner_url.clone()
}

fn url_with_db(url: &str, db: &str) -> String {
    let mut u = url::Url::parse(url).expect("DATABASE_URL is a URL");
    u.set_path(&format!("/{db}"));
    u.to_string()
}

/// The inspector's URL for database `db`: the tests' assertions behind the runtime role's back.
pub async fn inspector_url(db: &str) -> String {
    url_with_db(&roles().await.inspector_url, db)
}

async fn admin_pool() -> anyhow::Result<PgPool> {
    Ok(PgPoolOptions::new().max_connections(1).connect(&owner_url().await).await?)
}

/// Migrates a template database once per test process; each test copies it (fast) instead of
/// migrating from scratch. Leftovers of earlier runs are dropped first.
async fn template() -> anyhow::Result<String> {
    TEMPLATE
        .get_or_try_init(|| async {
            let pid = std::process::id();
            let name = format!("herald_tpl_{pid}");
            let admin = admin_pool().await?;
            let stale: Vec<String> = sqlx::query_scalar(
                "SELECT datname::text FROM pg_database WHERE (datname LIKE 'herald_tpl_%' OR datname LIKE 'herald_t_%')
                 AND datname NOT LIKE $1",
            )
            .bind(format!("%\\_{pid}%"))
            .fetch_all(&admin)
            .await?;
            for db in stale {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)")))
                    .execute(&admin)
                    .await;
            }
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).execute(&admin).await?;
            herald_engine::infra::migrate::run(&url_with_db(&owner_url().await, &name)).await?;
            Ok::<_, anyhow::Error>(name)
        })
        .await
        .cloned()
}

pub struct TestApp {
    pub base: String,
    pub app: herald_app::ssr::AppState,
    pub sink: herald_devtools::smtp_sink::MailSink,
    /// The inspector's connection to this test's database, for set-up and assertions behind
    /// the runtime role's back: the owner's privileges and every workspace's rows, but not a
    /// superuser (`herald_devtools::ordinary_owner`).
    pub owner: PgPool,
    pub db_url: String,
    /// Counters of the tracking endpoints' write buffer.
    pub hits: std::sync::Arc<herald_engine::tracking::HitCounters>,
    /// The app's own job workers run (not `HERALD_RUN_WORKERS=false`): account mail goes out.
    pub workers: bool,
    stop: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl TestApp {
    /// Stops the app as SIGTERM does (graceful shutdown) and waits until it has finished.
    pub async fn shutdown(&mut self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.await??;
        }
        Ok(())
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// `spawn_app` with extra settings, e.g. `("HERALD_RUN_WORKERS", "false")` for tests that drive
/// the delivery engine themselves.
pub async fn spawn_app_with(extra: &[(&str, &str)]) -> TestApp {
    // The port is picked by binding port 0 and letting go; another test can take it before the
    // app binds it again. That race, and only it, is worth another try.
    for _ in 0..4 {
        match try_spawn_app(extra).await {
            Err(e) if e.to_string().contains("Address already in use") => continue,
            started => return started.expect("test app starts"),
        }
    }
    try_spawn_app(extra).await.expect("test app starts")
}

/// A fresh database copied from the migrated template; returns its owner URL.
pub async fn fresh_database() -> anyhow::Result<String> {
    // This test binary is not `herald`: tenants' templates render in the real binary's sandbox.
    herald_engine::sending::template_sandbox::use_program(env!("CARGO_BIN_EXE_herald"));
    let template = template().await?;
    let db = format!("herald_t_{}_{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let admin = admin_pool().await?;
    // Copies of one template can collide ("source database is being accessed"): retry briefly.
    let mut attempt = 0;
    loop {
        match sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{db}\" TEMPLATE \"{template}\"")))
            .execute(&admin)
            .await
        {
            Ok(_) => break,
            Err(e) if attempt < 20 => {
                attempt += 1;
                tracing_hint(&e);
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    herald_engine::infra::migrate::restrict_database(&admin, &db).await?;
    admin.close().await;
    Ok(url_with_db(&owner_url().await, &db))
}

/// An empty database (not migrated) owned by the ordinary owner; returns the owner's URL.
pub async fn fresh_empty_database() -> anyhow::Result<String> {
    let db = format!("herald_t_{}_{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let admin = admin_pool().await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{db}\""))).execute(&admin).await?;
    admin.close().await;
    Ok(url_with_db(&owner_url().await, &db))
}

/// `spawn_app_with` on a database the test built itself (`fresh_empty_database`, seeded between
/// two versions and then migrated with `migrate::run_on`); `db_url` is its owner's URL.
pub async fn spawn_app_on(db_url: &str, extra: &[(&str, &str)]) -> TestApp {
    herald_engine::sending::template_sandbox::use_program(env!("CARGO_BIN_EXE_herald"));
    for _ in 0..4 {
        match try_spawn_app_on(db_url.to_string(), extra).await {
            Err(e) if e.to_string().contains("Address already in use") => continue,
            started => return started.expect("test app starts"),
        }
    }
    try_spawn_app_on(db_url.to_string(), extra).await.expect("test app starts")
}

async fn try_spawn_app(extra: &[(&str, &str)]) -> anyhow::Result<TestApp> {
    try_spawn_app_on(fresh_database().await?, extra).await
}

async fn try_spawn_app_on(db_url: String, extra: &[(&str, &str)]) -> anyhow::Result<TestApp> {
    let db = db_url.rsplit('/').next().unwrap_or_default().to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let data_dir = std::env::temp_dir().join(format!("herald-test-{db}"));
    let vars: HashMap<&str, String> = HashMap::from([
        ("DATABASE_URL", db_url.clone()),
        ("HERALD_ENV", "development".to_string()),
        ("HERALD_BIND", format!("127.0.0.1:{port}")),
        ("HERALD_DEV_SMTP_BIND", "127.0.0.1:0".to_string()),
        ("HERALD_SECRET_KEY", "test-secret-key-that-is-long-enough-0123456789".to_string()),
        ("HERALD_DATA_DIR", data_dir.display().to_string()),
        ("HERALD_DB_MAX_CONNECTIONS", "8".to_string()),
    ]);
    let mut vars = vars;
    for (k, v) in extra {
        vars.insert(k, v.to_string());
    }
    let config = Config::from_lookup(|k| vars.get(k).cloned()).map_err(anyhow::Error::msg)?;
    let app = Application::build(&config).await?;
    let state = app.state.clone();
    let sink = app.sink.as_ref().map(|s| s.0.clone()).ok_or_else(|| anyhow::anyhow!("dev catcher not running"))?;
    let hits = app.hit_counters.clone();
    let (stop, rx) = tokio::sync::watch::channel(false);
    let task = Some(tokio::spawn(app.run(rx)));
    let owner = PgPoolOptions::new().max_connections(2).connect(&inspector_url(&db).await).await?;
    let workers = vars.get("HERALD_RUN_WORKERS").is_none_or(|v| v != "false");
    Ok(TestApp { base: format!("http://127.0.0.1:{port}"), app: state, sink, owner, db_url, hits, workers, stop, task })
}

fn tracing_hint(e: &sqlx::Error) {
    if std::env::var("TEST_LOG").is_ok() {
        eprintln!("retrying CREATE DATABASE: {e}");
    }
}

/// One browser: its own cookie jar, sending the app's Origin like a real page does.
pub struct Browser {
    pub client: reqwest::Client,
    pub base: String,
}

pub struct FnResponse {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl FnResponse {
    pub fn ok(&self) -> bool {
        self.status.is_success()
    }

    /// The user-facing message of an AppError body such as `{"Conflict":"..."}`, or every
    /// message of `{"Invalid":{"errors":[{"field":…,"message":…}]}}`.
    pub fn message(&self) -> String {
        match &self.body {
            Value::Object(m) => match m.values().next() {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v["errors"]
                    .as_array()
                    .map(|errors| errors.iter().filter_map(|e| e["message"].as_str()).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default(),
                None => String::new(),
            },
            Value::String(s) => s.clone(),
            _ => String::new(),
        }
    }
}

impl TestApp {
    pub fn browser(&self) -> Browser {
        let client = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client");
        Browser { client, base: self.base.clone() }
    }

    /// A new account, logged in, with a workspace it owns. Returns (browser, workspace id).
    pub async fn owner_with_workspace(&self, email: &str, workspace: &str) -> (Browser, String) {
        let b = self.browser();
        self.sign_up(&b, email, "correct horse battery").await.value();
        b.run(CreateWorkspace { name: workspace.into(), slug: String::new() }).await.value();
        let id = b.session().await.expect("logged in").current.expect("current workspace").id;
        (b, id)
    }

    /// What an operator's `herald admin verify-domain` does: lets the workspace send From
    /// `domain` and its subdomains.
    pub async fn verify_domain(&self, workspace_id: &str, domain: &str) {
        let tenant: herald_engine::TenantId = workspace_id.parse().expect("workspace id");
        herald_engine::sending::domains::mark_verified(&self.app.db, &self.app.signer, tenant, domain)
            .await
            .expect("domain verified");
    }

    /// Signs `b` up as a person does, both steps: the form, then the mailed link, which makes the
    /// account (its address confirmed) and logs in. Returns the first step's answer if it
    /// failed, else the second's.
    pub async fn sign_up(&self, b: &Browser, email: &str, password: &str) -> Reply<()> {
        self.sign_up_then(b, email, password, None).await
    }

    /// [`Self::sign_up`] with the page to land on afterwards (the form's `next`).
    pub async fn sign_up_then(&self, b: &Browser, email: &str, password: &str, next: Option<&str>) -> Reply<()> {
        let name = "Test User".to_string();
        let start = b.run(Signup { email: email.into(), name: name.clone(), next: next.map(Into::into) }).await;
        if !start.ok() {
            return start;
        }
        let token = self.signup_token(email, next).await;
        b.run(FinishSignup { token, name, password: password.into() }).await
    }

    /// The token of the sign-up link mailed to `to`, taken out of the sink so tests count only
    /// the mail they cause. With the workers off nothing is mailed: the token is made as the
    /// mail would carry it.
    pub async fn signup_token(&self, to: &str, next: Option<&str>) -> String {
        if !self.workers {
            let claim = herald_engine::accounts::SignupClaim {
                email: herald_engine::Email::parse(to).expect("address").as_str().to_string(),
                name: "Test User".into(),
                next: next.unwrap_or("/").into(),
            };
            return herald_engine::accounts::signup_token(&self.app.signer, &claim);
        }
        const LINK: &str = "/signup/finish?token=";
        for _ in 0..300 {
            let mail = self.sink.messages().await.into_iter().find_map(|m| {
                let text = m.parse().text.unwrap_or_default();
                let start = text.find(LINK)? + LINK.len();
                m.rcpt_to
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(to))
                    .then(|| (m.id, text[start..].chars().take_while(|c| !c.is_whitespace()).collect::<String>()))
            });
            if let Some((id, token)) = mail {
                self.sink.discard(id).await;
                return token;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no sign-up mail to {to}");
    }

    /// An account that never confirmed its address (made before sign-up mailed a link first, or
    /// by hand), logged in on `b`, with the confirmation mail such an account gets.
    pub async fn unconfirmed_account(&self, b: &Browser, email: &str, password: &str) {
        use herald_engine::users;
        let s = &self.app;
        let address = herald_engine::Email::parse(email).expect("address");
        let id = users::create_user(&s.db, &address, "Test User", password, users::Address::Unconfirmed)
            .await
            .expect("account made");
        herald_engine::accounts::send_verification(&s.db, &s.jobs, &s.signer, &s.base_url, id)
            .await
            .expect("confirmation mail queued");
        assert!(b.login(email, password).await.ok(), "logged in");
    }

    /// What an operator's `herald admin verify-email` does: confirms the address of an
    /// [`Self::unconfirmed_account`] without the mailed link (the link itself is tested in
    /// `email_verification`). Its confirmation mail is taken out of the sink, so tests count
    /// only the mail they cause.
    pub async fn verify_email(&self, email: &str) {
        herald_engine::accounts::mark_email_verified(&self.app.db, email).await.expect("address confirmed");
        if !self.workers {
            return;
        }
        for _ in 0..300 {
            let signup_mail = self.sink.messages().await.into_iter().find(|m| {
                m.rcpt_to.iter().any(|r| r.eq_ignore_ascii_case(email))
                    && m.parse().subject.starts_with("Confirm your email")
            });
            if let Some(mail) = signup_mail {
                self.sink.discard(mail.id).await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no sign-up mail to {email}");
    }

    /// The token of the newest confirmation link mailed to `to` (waits for it).
    pub async fn verification_token(&self, to: &str) -> String {
        self.verification_tokens(to, 1).await.pop().unwrap_or_default()
    }

    /// The tokens of the confirmation links mailed to `to`, oldest first, once there are at least
    /// `count` of them. Two links signed within the same second are the same token.
    pub async fn verification_tokens(&self, to: &str, count: usize) -> Vec<String> {
        for _ in 0..150 {
            let mut found: Vec<(u64, String)> = self
                .sink
                .messages()
                .await
                .into_iter()
                .filter(|m| m.rcpt_to.iter().any(|r| r.eq_ignore_ascii_case(to)))
                .filter_map(|m| {
                    let text = m.parse().text.unwrap_or_default();
                    let start = text.find("/verify-email?token=")? + "/verify-email?token=".len();
                    Some((m.id, text[start..].chars().take_while(|c| !c.is_whitespace()).collect()))
                })
                .collect();
            if found.len() >= count.max(1) {
                found.sort();
                return found.into_iter().map(|(_, token)| token).collect();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("fewer than {count} confirmation mails to {to}");
    }

    /// Adds an existing account to a workspace with a role, behind the UI's back (test set-up).
    pub async fn add_member(&self, workspace_id: &str, email: &str, role: &str) -> Browser {
        let b = self.browser();
        assert!(self.sign_up(&b, email, "correct horse battery").await.ok());
        sqlx::query(
            "INSERT INTO memberships (tenant_id, user_id, role) SELECT $1::uuid, id, $3 FROM users WHERE lower(email) = lower($2)",
        )
        .bind(workspace_id)
        .bind(email)
        .bind(role)
        .execute(&self.owner)
        .await
        .expect("add membership");
        b.run(SwitchWorkspace { workspace_id: workspace_id.into() }).await.value();
        b
    }

    /// Waits for mail to `to` and returns its text part.
    pub async fn mail_text_to(&self, to: &str) -> String {
        let m = self
            .sink
            .wait_for_recipient(to, Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("no mail to {to}"));
        m.parse().text.unwrap_or_default()
    }

    /// Runs the job queue dry: waits until no job is due, running or waiting for a retry, so a
    /// test can assert what the jobs did, or that they did nothing more (instead of sleeping
    /// for a guessed while). Jobs scheduled for later (the supervisor's next round, a
    /// recurring edition) do not count.
    pub async fn jobs_idle(&self) {
        assert!(self.workers, "jobs_idle needs the app's own workers");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let busy: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM apalis.jobs
                 WHERE (status IN ('Pending', 'Running') OR (status = 'Failed' AND attempts < max_attempts))
                   AND run_at <= now()",
            )
            .fetch_one(&self.owner)
            .await
            .expect("job count");
            if busy == 0 {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "{busy} jobs still due after 30 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What a typed server-function call answered: the value the page would get, or the error it
/// would show.
pub struct Reply<T> {
    pub status: StatusCode,
    pub result: Result<T, AppError>,
    pub headers: reqwest::header::HeaderMap,
}

impl<T> Reply<T> {
    pub fn ok(&self) -> bool {
        self.result.is_ok()
    }

    /// The value (panics with the error when the call failed).
    #[track_caller]
    pub fn value(self) -> T {
        match self.result {
            Ok(v) => v,
            Err(e) => panic!("expected a value, got {} {e:?}", self.status),
        }
    }

    /// The error (panics when the call succeeded).
    #[track_caller]
    pub fn error(self) -> AppError {
        match self.result {
            Ok(_) => panic!("expected an error, got {}", self.status),
            Err(e) => e,
        }
    }

    /// The user-facing text of the error: every message of `Invalid`, the text of the others
    /// (empty when the call succeeded).
    pub fn message(&self) -> String {
        match &self.result {
            Ok(_) => String::new(),
            Err(AppError::Invalid(invalid)) => {
                invalid.errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join(" ")
            }
            Err(e) => e.to_string(),
        }
    }
}

/// A server function aimed at another workspace's ids answered 404, exactly as for ids that do
/// not exist (`f` names it in the failure).
#[track_caller]
pub fn assert_not_found<T>(f: &str, r: Reply<T>) {
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{f} reached tenant B: {:?} {:?}", r.status, r.result.as_ref().err());
}

impl Browser {
    /// Calls a server function the way the hydrated UI does: its generated struct is the
    /// arguments, `F::PATH` the address, and the answer decodes into `F::Output` or `AppError`
    /// (a body that is neither fails the test). Form-encoded (`serde_qs`, as server_fn's
    /// `PostUrl` does) unless the function declares `input = Json`.
    pub async fn run<F>(&self, args: F) -> Reply<F::Output>
    where
        F: ServerFn<Error = AppError> + serde::Serialize,
        F::Output: serde::de::DeserializeOwned,
    {
        let req = self
            .client
            .post(format!("{}{}", self.base, F::PATH))
            .header("Accept", "application/json")
            .header("Origin", self.base.clone());
        // The protocol is `Http<Input, Output>`; only the input side names PostUrl.
        let req = if std::any::type_name::<F::Protocol>().contains("PostUrl") {
            let form = serde_qs::to_string(&args).expect("server function arguments encode");
            req.header("Content-Type", "application/x-www-form-urlencoded").body(form)
        } else {
            req.json(&args)
        };
        let res = req.send().await.expect("request");
        let status = res.status();
        let headers = res.headers().clone();
        let text = res.text().await.unwrap_or_default();
        let result = if status.is_success() {
            Ok(serde_json::from_str(&text).unwrap_or_else(|e| {
                panic!("{} answered {status} with no {}: {e}: {text}", F::PATH, std::any::type_name::<F::Output>())
            }))
        } else {
            Err(serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} answered {status} with no AppError: {e}: {text}", F::PATH)))
        };
        Reply { status, result, headers }
    }

    /// Calls a server function (`/rpc/<name>`) with a hand-made form body: for requests the UI
    /// would never send (forged ids, missing fields, another origin). Everything else uses `run`.
    pub async fn call(&self, name: &str, form: &[(&str, &str)]) -> FnResponse {
        self.call_with_origin(name, form, Some(&self.base.clone())).await
    }

    pub async fn call_with_origin(&self, name: &str, form: &[(&str, &str)], origin: Option<&str>) -> FnResponse {
        let mut req =
            self.client.post(format!("{}/rpc/{name}", self.base)).header("Accept", "application/json").form(form);
        if let Some(o) = origin {
            req = req.header("Origin", o);
        }
        Self::answer(req).await
    }

    async fn answer(req: reqwest::RequestBuilder) -> FnResponse {
        let res = req.send().await.expect("request");
        let status = res.status();
        let headers = res.headers().clone();
        let text = res.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        FnResponse { status, body, headers }
    }

    pub async fn login(&self, email: &str, password: &str) -> Reply<()> {
        self.run(Login { email: email.into(), password: password.into(), next: None }).await
    }

    /// The session summary (`None` when logged out).
    pub async fn session(&self) -> Option<SessionInfo> {
        self.run(GetSessionInfo {}).await.value()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(format!("{}{path}", self.base)).send().await.expect("request")
    }
}

/// Two workspaces with an owner each: the cross-tenant harness later features extend.
pub struct TwoTenants {
    pub app: TestApp,
    pub a: Browser,
    pub a_id: String,
    pub b: Browser,
    pub b_id: String,
}

pub async fn two_tenants() -> TwoTenants {
    let app = spawn_app().await;
    let (a, a_id) = app.owner_with_workspace("owner-a@example.com", "Tenant A").await;
    let (b, b_id) = app.owner_with_workspace("owner-b@example.com", "Tenant B").await;
    TwoTenants { app, a, a_id, b, b_id }
}

/// Finds the first `{base}/invite/<token>` link in a text.
pub fn invite_token(text: &str) -> String {
    let start = text.find("/invite/").expect("invite link in mail") + "/invite/".len();
    text[start..].split_whitespace().next().expect("token").to_string()
}

/// A REST API client with a workspace's key.
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
    pub key: String,
}

impl Api {
    pub async fn for_owner(app: &TestApp, owner: &Browser) -> Self {
        let key = owner.run(CreateApiKey { name: "test".into(), role: None }).await.value();
        Self { client: reqwest::Client::new(), base: app.base.clone(), key }
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base)).bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Polls `GET path` until its `status` is `want` and returns that body; panics with the
    /// last body once `within` has passed. The one wait for a campaign or a message to get
    /// somewhere.
    pub async fn wait_for_status(&self, path: &str, want: &str, within: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (status, body) = self.get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
            if body["status"] == want {
                return body;
            }
            assert!(tokio::time::Instant::now() < deadline, "{path} never reached {want}: {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }
    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(reqwest::Method::PUT, path, Some(body)).await
    }

    /// `POST /api/v1/messages` with an `Idempotency-Key`.
    pub async fn send_message(&self, key: &str, body: &Value) -> (StatusCode, Value) {
        let res = self
            .client
            .post(format!("{}/api/v1/messages", self.base))
            .bearer_auth(&self.key)
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
            .expect("request");
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

/// moto's S3 server on a free port, for the tests of images kept in a bucket. `scripts/test.sh`
/// installs it and names it in `HERALD_MOTO_SERVER`; stopped when dropped.
pub struct Moto {
    pub endpoint: String,
    child: std::process::Child,
}

impl Moto {
    pub async fn start() -> Moto {
        let server = std::env::var("HERALD_MOTO_SERVER").unwrap_or_else(|_| {
            format!("{}/.cache/herald/moto-5.2.5/bin/moto_server", std::env::var("HOME").unwrap_or_default())
        });
        assert!(
            std::path::Path::new(&server).exists(),
            "moto_server not found at {server}: `scripts/test.sh` installs it (scripts/lib.sh, ensure_moto)"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = std::process::Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let moto = Moto { endpoint: format!("http://127.0.0.1:{port}"), child };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(tokio::time::Instant::now() < deadline, "moto_server did not listen on {port} within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        moto
    }

    /// Makes a bucket (moto takes an unsigned CreateBucket).
    pub async fn create_bucket(&self, name: &str) {
        reqwest::Client::new()
            .put(format!("{}/{name}", self.endpoint))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .expect("bucket created");
    }

    /// The same client the engine stores with, to look inside the bucket.
    pub fn client(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_retry(object_store::RetryConfig { max_retries: 0, ..Default::default() })
            .build()
            .expect("client")
    }

    /// What `spawn_app_with` needs to store images in `bucket`.
    pub fn settings<'a>(&'a self, bucket: &'a str) -> [(&'a str, &'a str); 6] {
        [
            ("HERALD_MEDIA_STORE", "s3"),
            ("HERALD_MEDIA_S3_ENDPOINT", &self.endpoint),
            ("HERALD_MEDIA_S3_BUCKET", bucket),
            ("HERALD_MEDIA_S3_REGION", "us-east-1"),
            ("HERALD_MEDIA_S3_ACCESS_KEY_ID", "test"),
            ("HERALD_MEDIA_S3_SECRET_ACCESS_KEY", "test"),
        ]
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.stop();
    }
}
