//! Builds the application (state, router, background tasks) so that `herald serve` and the
//! integration tests start exactly the same thing; tests bind port 0.

use anyhow::Context;
use axum::Router;
use axum::extract::FromRef;
use axum::http::{HeaderName, Request};
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use herald_app::ssr::AppState;
use herald_app::{App, shell};
use herald_devtools::smtp_sink::MailSink;
use herald_engine::campaigns::delivery::DeliveryConfig;
use herald_engine::infra::rate_limit::RateLimiter;
use herald_engine::infra::tokens::Signer;
use herald_engine::jobs::Jobs;
use herald_engine::sending::identities::SmtpIdentity;
use herald_engine::sending::mail::Mailer;
use herald_engine::sending::smtp::SmtpServer;
use herald_engine::tracking::{Flusher, HitCounters, HitRecorder, TrackingKeys};
use herald_engine::transactional::delivery::TxDeliveryConfig;
use herald_engine::transactional::messages::Outbox;
use herald_engine::webhooks::WebhookConfig;
use herald_engine::worker::WorkerSetup;
use herald_engine::{Db, infra::migrate};
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::routes::tracking::TrackingState;
use crate::routes::webhooks::WebhookState;
use crate::routes::{api, dev_inbox, health};
use crate::security::{AllowedOrigin, require_same_origin};
use crate::sessions::PgSessionStore;

/// Hard ceiling on any request body. axum extractors also default to 2 MB; the routes that need
/// more (API bulk upsert) raise that with `DefaultBodyLimit`.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Axum state: what handlers outside Leptos need.
#[derive(Clone)]
pub struct ServerState {
    pub app: AppState,
    /// API requests per key per minute (see [`crate::routes::api::metering`]).
    pub api_requests_per_minute: u32,
    pub metrics: Arc<Metrics>,
    pub metrics_access: crate::config::MetricsAccess,
    pub leptos: LeptosOptions,
    pub tracking: TrackingState,
    pub webhooks: WebhookState,
    pub imports: crate::routes::imports::ImportLimits,
}

impl FromRef<ServerState> for LeptosOptions {
    fn from_ref(s: &ServerState) -> Self {
        s.leptos.clone()
    }
}

/// The running parts shared by web and worker processes.
pub struct Core {
    pub db: Db,
    pub mailer: Mailer,
    pub sink: Option<(MailSink, SocketAddr)>,
    /// Where campaigns without their own sending identity go (`HERALD_SMTP_URL`).
    pub default_identity: SmtpIdentity,
    /// An accepted transactional message wakes this process's transactional senders at once.
    pub transactional_wake: Arc<tokio::sync::Notify>,
}

impl Core {
    /// The delivery engine's configuration for this process (a unique worker id each time).
    pub fn delivery_config(&self, config: &Config) -> DeliveryConfig {
        let mut d = DeliveryConfig::new(
            herald_engine::jobs::unique_worker_name("send"),
            config.base_url.clone(),
            self.default_identity.clone(),
        );
        d.lease = Duration::from_secs(config.send.lease_seconds);
        d.smtp_timeout = Duration::from_secs(config.send.smtp_timeout_seconds);
        d.ack_batch = config.send.ack_batch;
        d.retry_base = Duration::from_secs_f64(config.send.retry_base_seconds);
        d.batch_size = config.send.batch_size;
        d.max_attempts = config.send.max_attempts;
        d.egress = config.egress.clone();
        d.workspace_loops = herald_engine::campaigns::fair_share::WorkspaceLoops::new(config.send.workspace_loops);
        d
    }

    /// Everything the job workers need.
    pub fn worker_setup(&self, config: &Config) -> WorkerSetup {
        WorkerSetup {
            db: self.db.clone(),
            mailer: self.mailer.clone(),
            signer: Signer::new(&config.secret_key),
            base_url: config.base_url.clone(),
            delivery: self.delivery_config(config),
            send_concurrency: config.send.concurrency,
            transactional: self.transactional_config(config),
            transactional_wake: self.transactional_wake.clone(),
            system_mail_limits: config.system_mail_limits,
            webhooks: herald_engine::outbound_webhooks::delivery::WebhookDeliveryConfig {
                egress: config.egress.clone(),
                backoff: config.webhooks.backoff.clone(),
                retry_for: config.webhooks.retry_for,
                disable_after: config.webhooks.disable_after,
                concurrency: config.webhooks.concurrency,
                timeout: config.webhooks.timeout,
                ..Default::default()
            },
        }
    }

    /// The transactional stream's configuration (its own loops and worker id).
    pub fn transactional_config(&self, config: &Config) -> TxDeliveryConfig {
        let mut t = TxDeliveryConfig::new(
            herald_engine::jobs::unique_worker_name("transactional"),
            self.default_identity.clone(),
        );
        t.loops = config.send.transactional_loops;
        t.lease = Duration::from_secs(config.send.lease_seconds);
        t.smtp_timeout = Duration::from_secs(config.send.smtp_timeout_seconds);
        t.backoff = config.send.transactional_backoff.clone();
        t.egress = config.egress.clone();
        t
    }
}

fn default_identity(config: &Config, smtp_url: &str) -> anyhow::Result<SmtpIdentity> {
    Ok(SmtpIdentity {
        bucket: "identity:default".into(),
        server: SmtpServer::parse(smtp_url).map_err(|e| anyhow::anyhow!("HERALD_SMTP_URL is not valid: {e}"))?,
        max_connections: config.send.max_connections,
        rate_per_second: config.send.rate_per_second,
        burst: config.send.burst,
        dkim: None,
    })
}

/// Connects as the runtime role, checks it cannot bypass RLS, starts the dev mail catcher if
/// configured and builds the mailer.
pub async fn core(config: &Config) -> anyhow::Result<Core> {
    let db = connect_checked(config).await?;
    let mut smtp_url = config.smtp_url.clone();
    let sink = match &config.dev_smtp_bind {
        Some(bind) => {
            let (sink, addr) = MailSink::start(bind)
                .await
                .map_err(|e| anyhow::anyhow!("dev mail catcher cannot listen on {bind}: {e}"))?;
            // With the default URL pointing at the catcher, follow it to the port it really got.
            if smtp_url == format!("smtp://{bind}") {
                smtp_url = format!("smtp://{addr}");
            }
            Some((sink, addr))
        }
        None => None,
    };
    let mailer = Mailer::from_url(&smtp_url, &config.mail_from)?;
    let default_identity = default_identity(config, &smtp_url)?;
    Ok(Core { db, mailer, sink, default_identity, transactional_wake: Arc::new(tokio::sync::Notify::new()) })
}

/// How long start-up keeps trying a database that is restarting or dropped its connection.
const START_UP_PATIENCE: Duration = Duration::from_secs(60);

/// Connects as the runtime role and checks it, retrying (with backoff, for
/// [`START_UP_PATIENCE`]) while the database is unreachable or drops the connection: a process
/// started during a Postgres restart or failover — or by a supervisor that restarts it at once —
/// waits for it, as the job loops do, instead of exiting. A wrong role or a refused password
/// fails at once.
async fn connect_checked(config: &Config) -> anyhow::Result<Db> {
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        let attempt = async {
            let db = Db::connect(&config.app_database_url, config.db_max_connections)
                .await
                .context("cannot connect to the database as the runtime role")?;
            migrate::check_runtime_role(&db).await?;
            anyhow::Ok(db)
        };
        match attempt.await {
            Ok(db) => return Ok(db),
            Err(e) if started.elapsed() < START_UP_PATIENCE && connection_lost(&e) => {
                tracing::warn!(error = %format!("{e:#}"), "database not reachable yet; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e),
        }
    }
}

/// True when some error in `e`'s chain is the database being unreachable or dropping the
/// connection.
fn connection_lost(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| cause.downcast_ref::<sqlx::Error>().is_some_and(herald_engine::error::connection_lost))
}

pub struct Application {
    listener: TcpListener,
    router: Router,
    pub addr: SocketAddr,
    pub state: AppState,
    pub sink: Option<(MailSink, SocketAddr)>,
    workers: Option<WorkerSetup>,
    /// Writes buffered opens and clicks; flushed on shutdown.
    flusher: Flusher,
    pub hit_counters: Arc<HitCounters>,
}

impl Application {
    pub async fn build(config: &Config) -> anyhow::Result<Self> {
        let core = core(config).await?;
        let workers = config.run_workers.then(|| core.worker_setup(config));
        let Core { db, sink, default_identity, transactional_wake, .. } = core;
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.bind))?;
        let addr = listener.local_addr()?;
        let state = AppState {
            db: db.clone(),
            signer: Signer::new(&config.secret_key),
            jobs: Jobs::new(&db).with_system_mail_limits(config.system_mail_limits),
            default_identity,
            egress: config.egress.clone(),
            base_url: config.base_url.clone(),
            dev_mode: config.is_dev(),
            auth_ip_limiter: Arc::new(RateLimiter::new(30, Duration::from_secs(60))),
            auth_account_limiter: Arc::new(RateLimiter::new(10, Duration::from_secs(60))),
            public_entries: config.public_entries,
            preview_limiter: Arc::new(RateLimiter::new(config.previews_per_minute, Duration::from_secs(60))),
            outbox: Outbox {
                db: db.clone(),
                keys: TrackingKeys::new(&Signer::new(&config.secret_key)),
                base_url: config.base_url.clone(),
                wake: transactional_wake,
            },
            domains: herald_engine::sending::domains::DomainChecker::new(config.dns_server, &config.spf_include)?,
            media_storage: match &config.media_s3 {
                None => herald_engine::media::MediaStorage::Postgres,
                Some(bucket) => herald_engine::media::MediaStorage::S3(herald_engine::media::S3Bucket::new(bucket)?),
            },
            media_quota: config.media_quota,
        };
        let (recorder, flusher) = HitRecorder::start(db.clone(), config.tracking_buffer);
        let hit_counters = recorder.counters.clone();
        let tracking = TrackingState::new(TrackingKeys::new(&state.signer), recorder);
        let webhooks = WebhookState::new(
            WebhookConfig {
                sns_trusted_host: config.sns_trusted_host.clone(),
                sns_allow_http: config.sns_allow_http,
                ..WebhookConfig::default()
            },
            &config.egress,
        );
        let router = router(config, state.clone(), addr, sink.as_ref().map(|s| s.0.clone()), tracking, webhooks);
        Ok(Self { listener, router, addr, state, sink, workers, flusher, hit_counters })
    }

    /// Serves HTTP and runs the background workers until `shutdown` resolves.
    pub async fn run(self, shutdown: tokio::sync::watch::Receiver<bool>) -> anyhow::Result<()> {
        let workers = match self.workers {
            Some(setup) => tokio::spawn(run_background(setup, shutdown.clone())),
            None => tokio::spawn(async { Ok(()) }),
        };
        let mut rx = shutdown.clone();
        axum::serve(self.listener, self.router.into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(async move {
                let _ = rx.wait_for(|stop| *stop).await;
            })
            .await?;
        // No request is in flight any more: write what the tracking endpoints buffered.
        self.flusher.shutdown().await;
        workers.await??;
        Ok(())
    }
}

/// The job workers and housekeeping, until `shutdown` flips to true.
pub async fn run_background(setup: WorkerSetup, shutdown: tokio::sync::watch::Receiver<bool>) -> anyhow::Result<()> {
    let store = PgSessionStore::new(setup.db.pool().clone());
    let mut rx = shutdown.clone();
    let housekeeping = tokio::spawn(async move {
        loop {
            if let Err(e) = store.delete_expired().await {
                tracing::warn!(error = %e, "expired session cleanup failed");
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
                _ = rx.wait_for(|stop| *stop) => break,
            }
        }
    });
    let mut rx = shutdown;
    let result = herald_engine::worker::run_workers(setup, async move {
        let _ = rx.wait_for(|stop| *stop).await;
    })
    .await;
    housekeeping.abort();
    result
}

fn router(
    config: &Config,
    state: AppState,
    addr: SocketAddr,
    sink: Option<MailSink>,
    tracking: TrackingState,
    webhooks: WebhookState,
) -> Router {
    let leptos = LeptosOptions::builder()
        .output_name("herald")
        .site_root(config.site_root.as_str())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    let server_state = ServerState {
        app: state.clone(),
        api_requests_per_minute: config.api_requests_per_minute,
        metrics: Arc::new(Metrics::new(tracking.recorder.counters.clone())),
        metrics_access: config.metrics_access.clone(),
        leptos: leptos.clone(),
        tracking,
        webhooks,
        imports: crate::routes::imports::ImportLimits {
            max_bytes: config.import_max_bytes,
            storage_caps: herald_engine::audience::import::StorageCaps {
                per_workspace: config.import_storage_per_workspace,
                per_account: config.import_storage_per_account,
            },
        },
    };
    let routes = generate_route_list(App);
    let context = {
        let state = state.clone();
        move || {
            provide_context(state.clone());
            // leptos_axum made up a nonce of its own; the one in the CSP header is the edge's.
            let parts = leptos::prelude::use_context::<axum::http::request::Parts>();
            if let Some(nonce) = parts.as_ref().and_then(|p| p.extensions.get::<herald_app::ssr::CspNonce>()) {
                provide_context(leptos::nonce::Nonce::from_value(nonce.0.clone()));
            }
        }
    };

    let session_layer = SessionManagerLayer::new(PgSessionStore::new(state.db.pool().clone()))
        .with_name("herald_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(config.secure_cookies())
        .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::days(14)));

    let mut router = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .merge(api::router(&server_state))
        .merge(crate::routes::public::router())
        .merge(crate::routes::tracking::router())
        .merge(crate::routes::webhooks::router())
        .route("/audience/readers/export.csv", get(crate::routes::export::readers_csv))
        .route("/campaigns/{id}/events.csv", get(crate::routes::export::campaign_events_csv))
        .leptos_routes_with_context(&server_state, routes, context.clone(), {
            let leptos = leptos.clone();
            move || shell(leptos.clone())
        });
    if let Some(sink) = sink {
        // The catcher's pages exist only in development mode.
        router = router.merge(
            Router::new()
                .route("/dev/inbox", get(dev_inbox::list))
                .route("/dev/inbox/messages.json", get(dev_inbox::list_json))
                .route("/dev/inbox/{id}", get(dev_inbox::show))
                .with_state(sink),
        );
    }
    let request_id = HeaderName::from_static("x-request-id");
    router
        .route_layer(from_fn_with_state(server_state.metrics.clone(), crate::metrics::track))
        .fallback(leptos_axum::file_and_error_handler_with_context::<ServerState, _>(context, shell))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        // After the general body limit: image uploads have their own, larger one.
        .merge(crate::routes::media::router())
        // After the general body limit: CSV uploads have their own, much larger one.
        .merge(crate::routes::imports::router(server_state.imports))
        .merge(api::upload_router(&server_state))
        // Inside the session layer: the declared access of each server function needs the session.
        .layer(from_fn_with_state(state.db.clone(), crate::routes::session_auth::server_fn_access))
        .layer(session_layer)
        .layer(from_fn_with_state(config.interactive_statement_timeout, bound_statements))
        .layer(from_fn_with_state(AllowedOrigin::from_base_url(&config.base_url), require_same_origin))
        .layer(from_fn_with_state(crate::security::Https(config.secure_cookies()), crate::security::security_headers))
        .layer(from_fn_with_state(config.trusted_proxies.clone(), crate::security::client_ip))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
            let id = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("http", method = %req.method(), path = %path_for_logs(req.uri().path()), request_id = %id)
        }))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
        .with_state(server_state)
}

/// Every request's database work is interactive: its statements get the short bound, so one
/// workspace's runaway count cannot hold a connection and a core for minutes.
async fn bound_statements(
    axum::extract::State(bound): axum::extract::State<std::time::Duration>,
    req: Request<axum::body::Body>,
    next: axum::middleware::Next,
) -> axum::response::Response {
    herald_engine::infra::db::interactive(bound, next.run(req)).await
}

/// The request path as logs may show it: paths carry secrets (`/webhooks/ses/<token>`,
/// `/u/<unsubscribe token>`, `/confirm/<token>`, `/invite/<token>`), and logs go to places
/// secrets must not. Routing happens inside this layer, so the matched route pattern is not known
/// yet; every segment long enough to be a token (or an id) is replaced instead.
fn path_for_logs(path: &str) -> String {
    const LONGEST_PLAIN_SEGMENT: usize = 20;
    path.split('/')
        .map(|segment| if segment.len() > LONGEST_PLAIN_SEGMENT { "{redacted}" } else { segment })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::{connection_lost, path_for_logs};

    #[test]
    fn start_up_waits_for_a_lost_connection_but_not_for_a_wrong_role() {
        let dropped = anyhow::Error::new(sqlx::Error::Io(std::io::Error::other("connection reset")))
            .context("cannot connect to the database as the runtime role");
        assert!(connection_lost(&dropped), "a cause anywhere in the chain counts");
        assert!(connection_lost(&anyhow::Error::new(sqlx::Error::PoolTimedOut)));
        let wrong_role = anyhow::anyhow!("the runtime database role herald is a superuser");
        assert!(!connection_lost(&wrong_role));
        assert!(!connection_lost(&anyhow::Error::new(sqlx::Error::RowNotFound)));
    }

    #[test]
    fn tokens_in_paths_never_reach_the_logs() {
        let token = "c2VjcmV0LXdlYmhvb2stdG9rZW4tMTIzNDU2Nzg5MA";
        assert_eq!(path_for_logs(&format!("/webhooks/ses/{token}")), "/webhooks/ses/{redacted}");
        assert_eq!(path_for_logs(&format!("/u/{token}")), "/u/{redacted}");
        assert_eq!(
            path_for_logs("/campaigns/0195f3a2-7c1e-7d44-9a6b-1f2e3d4c5b6a/report"),
            "/campaigns/{redacted}/report"
        );
        assert_eq!(path_for_logs("/settings/members"), "/settings/members");
        assert_eq!(path_for_logs("/"), "/");
    }
}
