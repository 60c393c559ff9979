//! Settings, from the environment, each with a documented default (see docs/operations.md, "Settings").
//! A bad or missing setting is one clear line, never a panic.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Development,
    Production,
}

/// Outbound webhooks: `HERALD_WEBHOOK_BACKOFF` (seconds between attempts, comma separated; the
/// last repeats), `HERALD_WEBHOOK_RETRY_SECONDS` (how long a delivery is retried, default a day),
/// `HERALD_WEBHOOK_DISABLE_AFTER_SECONDS` (an endpoint failing this long is turned off, default
/// three days), `HERALD_WEBHOOK_CONCURRENCY` (deliveries in flight per process, default 32),
/// `HERALD_WEBHOOK_TIMEOUT_SECONDS` (default 10).
#[derive(Clone, Debug)]
pub struct WebhookSettings {
    pub backoff: Vec<std::time::Duration>,
    pub retry_for: std::time::Duration,
    pub disable_after: std::time::Duration,
    pub concurrency: usize,
    pub timeout: std::time::Duration,
}

/// A busy integration's pace: 20 requests a second per key, sustained.
pub const API_REQUESTS_PER_MINUTE: u32 = 1200;

#[derive(Clone)]
pub struct Config {
    pub mode: Mode,
    /// Owner role: runs migrations.
    pub database_url: String,
    /// Runtime role: everything else (RLS applies to it).
    pub app_database_url: String,
    pub bind: SocketAddr,
    /// Public base URL without trailing slash.
    pub base_url: String,
    pub secret_key: Vec<u8>,
    pub smtp_url: String,
    /// Where the dev mail catcher listens (development only).
    pub dev_smtp_bind: Option<String>,
    pub mail_from: String,
    pub site_root: String,
    pub data_dir: PathBuf,
    pub db_max_connections: u32,
    /// The bound on one statement of a request (`HERALD_INTERACTIVE_STATEMENT_TIMEOUT_MS`,
    /// default 15 s): a page, an API call or a live count that would take longer is answered
    /// with a clear 503 instead of holding a connection other workspaces need. Background work
    /// has its own, larger bound (`herald_engine::infra::db::BACKGROUND_STATEMENT_TIMEOUT`).
    pub interactive_statement_timeout: std::time::Duration,
    /// Largest CSV upload accepted.
    pub import_max_bytes: usize,
    /// What one workspace's uploads not yet imported may hold together
    /// (`HERALD_IMPORT_STORAGE_PER_WORKSPACE`, default 1 GiB).
    pub import_storage_per_workspace: i64,
    /// The same across every workspace one account made (`HERALD_IMPORT_STORAGE_PER_ACCOUNT`).
    pub import_storage_per_account: i64,
    /// What one workspace's images may take (`HERALD_MEDIA_STORAGE_PER_WORKSPACE`, default
    /// 100 MiB), and every workspace of one account together (`HERALD_MEDIA_STORAGE_PER_ACCOUNT`,
    /// 500 MiB).
    pub media_quota: herald_engine::media::MediaQuota,
    /// Where images are stored: Postgres unless `HERALD_MEDIA_STORE=s3`, then the bucket
    /// `HERALD_MEDIA_S3_BUCKET` (with `HERALD_MEDIA_S3_ENDPOINT`, `_REGION`, `_ACCESS_KEY_ID`,
    /// `_SECRET_ACCESS_KEY`): what deployments with several machines use.
    pub media_s3: Option<herald_engine::media::S3Config>,
    /// `herald serve` also runs the job workers (`HERALD_RUN_WORKERS=false` to serve only).
    pub run_workers: bool,
    pub send: SendSettings,
    /// Opens/clicks buffered in memory before drops are counted (`HERALD_TRACKING_BUFFER`).
    pub tracking_buffer: usize,
    /// SNS certificate host pattern (`HERALD_SNS_TRUSTED_HOST`, default `sns.*.amazonaws.com`).
    pub sns_trusted_host: String,
    /// Tests only: accept http:// SNS certificate URLs (`HERALD_SNS_ALLOW_HTTP`).
    pub sns_allow_http: bool,
    /// Private destinations a workspace's SMTP identity or feed URL may reach
    /// (`HERALD_EGRESS_ALLOW`; see `herald_engine::infra::egress`). Development allows loopback.
    pub egress: herald_engine::infra::egress::Egress,
    /// Who may read `/metrics` (`HERALD_METRICS_TOKEN`).
    pub metrics_access: MetricsAccess,
    /// Reverse proxies whose `X-Forwarded-For` names the client (`HERALD_TRUSTED_PROXIES`).
    pub trusted_proxies: crate::security::TrustedProxies,
    /// Invitations and opt-in confirmations per workspace and per recipient, per 24 hours
    /// (`HERALD_SYSTEM_MAIL_PER_WORKSPACE`, `HERALD_SYSTEM_MAIL_PER_RECIPIENT`).
    pub system_mail_limits: herald_engine::sending::mail_quota::SystemMailLimits,
    /// The DNS server sending-domain checks ask (`HERALD_DNS_SERVER`, `ip:port`); `None` uses
    /// the system's resolvers.
    pub dns_server: Option<SocketAddr>,
    /// What a sending domain's SPF record must include (`HERALD_SPF_INCLUDE`, default
    /// `_spf.<host of HERALD_BASE_URL>`).
    pub spf_include: String,
    /// Template previews per member per minute (`HERALD_PREVIEWS_PER_MINUTE`, default 30).
    pub previews_per_minute: u32,
    /// API requests per key per minute, all at once if need be, counted by every process
    /// together (`HERALD_API_REQUESTS_PER_MINUTE`, default 1200).
    pub api_requests_per_minute: u32,
    /// Outbound webhooks' retries and limits.
    pub webhooks: WebhookSettings,
    /// The public forms' budgets and challenge (`HERALD_PUBLIC_FORM_POSTS_PER_MINUTE`,
    /// `HERALD_PUBLIC_ENTRIES_PER_LIST_PER_HOUR`, `HERALD_PUBLIC_ENTRIES_PER_WORKSPACE_PER_HOUR`,
    /// `HERALD_PUBLIC_ENTRY_CHALLENGE_COST`, `HERALD_PUBLIC_ENTRY_CHALLENGE_MAX_COUNTER`).
    pub public_entries: herald_engine::audience::public_entry::EntryLimits,
}

/// `/metrics` says how busy every workspace is: in production it answers only to a bearer
/// token (`HERALD_METRICS_TOKEN`), and not at all without one; in development it is open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetricsAccess {
    Open,
    Token(String),
    Closed,
}

impl MetricsAccess {
    fn from_setting(token: Option<String>, mode: Mode) -> Result<Self, String> {
        match (token, mode) {
            (Some(t), _) if t.len() >= 16 => Ok(Self::Token(t)),
            (Some(_), _) => Err("HERALD_METRICS_TOKEN must be at least 16 characters".into()),
            (None, Mode::Development) => Ok(Self::Open),
            (None, Mode::Production) => Ok(Self::Closed),
        }
    }
}

/// The delivery engine's knobs (docs/operations.md, "Settings"). The default identity is `smtp_url`.
#[derive(Clone, Debug)]
pub struct SendSettings {
    /// Delivery jobs (SMTP connections) one process runs at once.
    pub concurrency: usize,
    /// Of those, the most one workspace may hold (`HERALD_SEND_WORKSPACE_LOOPS`; default half).
    pub workspace_loops: usize,
    /// For the default identity: connections per campaign, messages/second, burst.
    pub max_connections: u32,
    pub rate_per_second: f64,
    pub burst: u32,
    pub lease_seconds: u64,
    /// Connect and each SMTP command; the message data with its reply gets twice this.
    pub smtp_timeout_seconds: u64,
    /// 250s recorded per statement (and rows armed ahead of the wire).
    pub ack_batch: usize,
    pub retry_base_seconds: f64,
    pub batch_size: u32,
    pub max_attempts: i32,
    /// Transactional sending loops (SMTP connections) per process, apart from campaigns'.
    pub transactional_loops: usize,
    /// Waits between transactional attempts (`HERALD_TRANSACTIONAL_BACKOFF`, seconds, comma
    /// separated; default the seed's 60,300,1800,7200,28800).
    pub transactional_backoff: Vec<std::time::Duration>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("mode", &self.mode)
            .field("bind", &self.bind)
            .field("base_url", &self.base_url)
            .field("smtp_url", &"<redacted>")
            .field("secret_key", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Config {
    pub fn is_dev(&self) -> bool {
        self.mode == Mode::Development
    }

    pub fn secure_cookies(&self) -> bool {
        self.base_url.starts_with("https://")
    }

    pub fn from_env() -> Result<Self, String> {
        Self::from_lookup(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
    }

    /// Reads settings through `get` (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mode = match get("HERALD_ENV").as_deref() {
            // Production unless development is asked for: a forgotten setting must not open
            // `/dev/inbox` or sign sessions with a key generated on the spot.
            None | Some("production") | Some("prod") => Mode::Production,
            Some("development") | Some("dev") => Mode::Development,
            Some(other) => return Err(format!("HERALD_ENV must be `development` or `production`, not `{other}`")),
        };
        let database_url =
            get("DATABASE_URL").ok_or("DATABASE_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/herald)")?;
        if !(database_url.starts_with("postgres://") || database_url.starts_with("postgresql://")) {
            return Err("DATABASE_URL must start with postgres://".into());
        }
        let app_database_url =
            herald_engine::infra::db::runtime_url(&database_url, get("HERALD_APP_DATABASE_URL").as_deref())
                .map_err(|e| format!("DATABASE_URL: {e}"))?;
        let media_s3 = match get("HERALD_MEDIA_STORE").as_deref() {
            None | Some("postgres") => None,
            Some("s3") => {
                let need = |key: &str| get(key).ok_or(format!("HERALD_MEDIA_STORE=s3 needs {key}"));
                Some(herald_engine::media::S3Config {
                    endpoint: get("HERALD_MEDIA_S3_ENDPOINT"),
                    bucket: need("HERALD_MEDIA_S3_BUCKET")?,
                    region: get("HERALD_MEDIA_S3_REGION").unwrap_or_else(|| "us-east-1".into()),
                    access_key_id: need("HERALD_MEDIA_S3_ACCESS_KEY_ID")?,
                    secret_access_key: need("HERALD_MEDIA_S3_SECRET_ACCESS_KEY")?,
                })
            }
            Some(other) => return Err(format!("HERALD_MEDIA_STORE must be `postgres` or `s3`, not `{other}`")),
        };
        let bind_raw = get("HERALD_BIND").unwrap_or_else(|| "127.0.0.1:3000".into());
        let bind: SocketAddr = bind_raw
            .parse()
            .map_err(|_| format!("HERALD_BIND must be an address like 127.0.0.1:3000, not `{bind_raw}`"))?;
        let base_url = get("HERALD_BASE_URL").unwrap_or_else(|| format!("http://{bind}"));
        let parsed = url::Url::parse(&base_url).map_err(|_| format!("HERALD_BASE_URL is not a URL: `{base_url}`"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(format!("HERALD_BASE_URL must be an http(s) URL, not `{base_url}`"));
        }
        let base_url = base_url.trim_end_matches('/').to_string();
        let data_dir = PathBuf::from(get("HERALD_DATA_DIR").unwrap_or_else(|| ".herald".into()));
        let secret_key = match (get("HERALD_SECRET_KEY"), mode) {
            (Some(k), _) if k.len() >= 32 => k.into_bytes(),
            (Some(_), _) => return Err("HERALD_SECRET_KEY must be at least 32 characters".into()),
            (None, Mode::Production) => {
                return Err("HERALD_SECRET_KEY is required in production (at least 32 random characters); \
                     for a local try-out, set HERALD_ENV=development (`make dev` does)"
                    .into());
            }
            (None, Mode::Development) => dev_secret_key(&data_dir)?,
        };
        let dev_smtp_bind = match mode {
            Mode::Development => Some(get("HERALD_DEV_SMTP_BIND").unwrap_or_else(|| "127.0.0.1:2525".into())),
            Mode::Production => None,
        };
        let smtp_url = match (get("HERALD_SMTP_URL"), &dev_smtp_bind) {
            (Some(u), _) => u,
            (None, Some(catcher)) => format!("smtp://{catcher}"),
            (None, None) => {
                return Err(
                    "HERALD_SMTP_URL is required in production (e.g. smtp://user:pass@relay:587?tls=required)".into()
                );
            }
        };
        let mail_from = get("HERALD_MAIL_FROM").unwrap_or_else(|| "Herald <noreply@localhost>".into());
        let site_root = get("LEPTOS_SITE_ROOT").unwrap_or_else(|| "target/site".into());
        let db_max_connections = match get("HERALD_DB_MAX_CONNECTIONS") {
            None => 20,
            Some(v) => {
                v.parse().ok().filter(|n| *n > 0).ok_or("HERALD_DB_MAX_CONNECTIONS must be a positive number")?
            }
        };
        let import_max_bytes = match get("HERALD_IMPORT_MAX_BYTES") {
            None => 500 * 1024 * 1024,
            Some(v) => {
                v.parse().ok().filter(|n| *n > 0).ok_or("HERALD_IMPORT_MAX_BYTES must be a positive number of bytes")?
            }
        };
        let run_workers = match get("HERALD_RUN_WORKERS").as_deref() {
            None | Some("true") | Some("1") | Some("yes") => true,
            Some("false") | Some("0") | Some("no") => false,
            Some(other) => return Err(format!("HERALD_RUN_WORKERS must be true or false, not `{other}`")),
        };
        let concurrency = number(&get, "HERALD_SEND_CONCURRENCY", 16)?;
        let send = SendSettings {
            concurrency,
            workspace_loops: number(&get, "HERALD_SEND_WORKSPACE_LOOPS", (concurrency / 2).max(1))?,
            max_connections: number(&get, "HERALD_SMTP_MAX_CONNECTIONS", 4)?,
            rate_per_second: number(&get, "HERALD_SMTP_RATE", 100.0)?,
            burst: number(&get, "HERALD_SMTP_BURST", 100)?,
            lease_seconds: number(&get, "HERALD_SEND_LEASE_SECONDS", 30)?,
            smtp_timeout_seconds: number(&get, "HERALD_SMTP_TIMEOUT_SECONDS", 30)?,
            ack_batch: number(&get, "HERALD_SEND_ACK_BATCH", 16)?,
            retry_base_seconds: number(&get, "HERALD_SEND_RETRY_BASE_SECONDS", 60.0)?,
            batch_size: number(&get, "HERALD_SEND_BATCH", 50)?,
            max_attempts: number(&get, "HERALD_SEND_MAX_ATTEMPTS", 8)?,
            transactional_loops: number(&get, "HERALD_TRANSACTIONAL_LOOPS", 2)?,
            transactional_backoff: seconds_list(
                &get,
                "HERALD_TRANSACTIONAL_BACKOFF",
                herald_engine::transactional::delivery::BACKOFF.to_vec(),
            )?,
        };
        let webhooks = {
            use herald_engine::outbound_webhooks::delivery::{DEFAULT_BACKOFF, WebhookDeliveryConfig};
            let defaults = WebhookDeliveryConfig::default();
            let seconds = |key: &str, default: std::time::Duration| {
                number(&get, key, default.as_secs_f64()).map(std::time::Duration::from_secs_f64)
            };
            WebhookSettings {
                backoff: seconds_list(
                    &get,
                    "HERALD_WEBHOOK_BACKOFF",
                    DEFAULT_BACKOFF.iter().map(|s| std::time::Duration::from_secs(*s)).collect(),
                )?,
                retry_for: seconds("HERALD_WEBHOOK_RETRY_SECONDS", defaults.retry_for)?,
                disable_after: seconds("HERALD_WEBHOOK_DISABLE_AFTER_SECONDS", defaults.disable_after)?,
                concurrency: number(&get, "HERALD_WEBHOOK_CONCURRENCY", defaults.concurrency)?,
                timeout: seconds("HERALD_WEBHOOK_TIMEOUT_SECONDS", defaults.timeout)?,
            }
        };
        // Leases are renewed every half-second and the fence closes a fifth of a lease early:
        // shorter than 2 s leaves no room for one late renewal.
        if send.lease_seconds < 2 {
            return Err("HERALD_SEND_LEASE_SECONDS must be at least 2".into());
        }
        if send.smtp_timeout_seconds == 0 || send.ack_batch == 0 {
            return Err("HERALD_SMTP_TIMEOUT_SECONDS and HERALD_SEND_ACK_BATCH must be at least 1".into());
        }
        let sns_allow_http = match get("HERALD_SNS_ALLOW_HTTP").as_deref() {
            None | Some("false") | Some("0") => false,
            Some("true") | Some("1") if mode == Mode::Development => true,
            Some(_) => return Err("HERALD_SNS_ALLOW_HTTP may only be true in development (tests)".into()),
        };
        let egress = match (get("HERALD_EGRESS_ALLOW"), mode) {
            (Some(allow), _) => herald_engine::infra::egress::Egress::from_setting(&allow)?,
            (None, Mode::Development) => herald_engine::infra::egress::Egress::allow_loopback(),
            (None, Mode::Production) => herald_engine::infra::egress::Egress::default(),
        };
        let metrics_access = MetricsAccess::from_setting(get("HERALD_METRICS_TOKEN"), mode)?;
        let defaults = herald_engine::sending::mail_quota::SystemMailLimits::default();
        let daily = |name: &str, default: i32| match get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or(format!("{name} must be a number of emails per day (0 or more), not `{v}`")),
        };
        let system_mail_limits = herald_engine::sending::mail_quota::SystemMailLimits {
            per_workspace: daily("HERALD_SYSTEM_MAIL_PER_WORKSPACE", defaults.per_workspace)?,
            per_recipient: daily("HERALD_SYSTEM_MAIL_PER_RECIPIENT", defaults.per_recipient)?,
            per_account: daily("HERALD_SYSTEM_MAIL_PER_ACCOUNT", defaults.per_account)?,
        };
        let trusted_proxies =
            crate::security::TrustedProxies::from_setting(&get("HERALD_TRUSTED_PROXIES").unwrap_or_default())?;
        let previews_per_minute = match get("HERALD_PREVIEWS_PER_MINUTE") {
            None => herald_app::ssr::PREVIEWS_PER_MINUTE,
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("HERALD_PREVIEWS_PER_MINUTE must be a number of previews (1 or more), not `{v}`"))?,
        };
        let api_requests_per_minute =
            match get("HERALD_API_REQUESTS_PER_MINUTE") {
                None => API_REQUESTS_PER_MINUTE,
                Some(v) => v.trim().parse::<u32>().ok().filter(|n| *n > 0).ok_or(format!(
                    "HERALD_API_REQUESTS_PER_MINUTE must be a number of requests (1 or more), not `{v}`"
                ))?,
            };
        let dns_server =
            match get("HERALD_DNS_SERVER") {
                None => None,
                Some(v) => Some(v.trim().parse::<SocketAddr>().map_err(|_| {
                    format!("HERALD_DNS_SERVER must be an address and port like 127.0.0.1:53, not `{v}`")
                })?),
            };
        let spf_include = match get("HERALD_SPF_INCLUDE") {
            Some(v) => {
                let name = v.trim().trim_end_matches('.').to_ascii_lowercase();
                let ok = name.contains('.')
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                    && !name.split('.').any(str::is_empty);
                if !ok {
                    return Err(format!("HERALD_SPF_INCLUDE must be a domain name like _spf.example.com, not `{v}`"));
                }
                name
            }
            None => format!(
                "_spf.{}",
                url::Url::parse(&base_url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default()
            ),
        };
        let entry_defaults = herald_engine::audience::public_entry::EntryLimits::default();
        let public_entries = herald_engine::audience::public_entry::EntryLimits {
            posts_per_client_per_minute: number(
                &get,
                "HERALD_PUBLIC_FORM_POSTS_PER_MINUTE",
                entry_defaults.posts_per_client_per_minute,
            )?,
            per_list_per_hour: number(
                &get,
                "HERALD_PUBLIC_ENTRIES_PER_LIST_PER_HOUR",
                entry_defaults.per_list_per_hour,
            )?,
            per_workspace_per_hour: number(
                &get,
                "HERALD_PUBLIC_ENTRIES_PER_WORKSPACE_PER_HOUR",
                entry_defaults.per_workspace_per_hour,
            )?,
            challenge_cost: number(&get, "HERALD_PUBLIC_ENTRY_CHALLENGE_COST", entry_defaults.challenge_cost)?,
            challenge_max_counter: number(
                &get,
                "HERALD_PUBLIC_ENTRY_CHALLENGE_MAX_COUNTER",
                entry_defaults.challenge_max_counter,
            )?,
        };
        if public_entries.challenge_max_counter < 2 {
            return Err("HERALD_PUBLIC_ENTRY_CHALLENGE_MAX_COUNTER must be at least 2".into());
        }
        Ok(Self {
            public_entries,
            dns_server,
            spf_include,
            previews_per_minute,
            api_requests_per_minute,
            webhooks,
            trusted_proxies,
            metrics_access,
            system_mail_limits,
            egress,
            tracking_buffer: number(&get, "HERALD_TRACKING_BUFFER", 200_000)?,
            sns_trusted_host: get("HERALD_SNS_TRUSTED_HOST").unwrap_or_else(|| "sns.*.amazonaws.com".into()),
            sns_allow_http,
            mode,
            run_workers,
            send,
            import_max_bytes,
            import_storage_per_workspace: number(&get, "HERALD_IMPORT_STORAGE_PER_WORKSPACE", 1i64 << 30)?,
            import_storage_per_account: number(&get, "HERALD_IMPORT_STORAGE_PER_ACCOUNT", 2i64 << 30)?,
            media_quota: herald_engine::media::MediaQuota {
                per_workspace: number(&get, "HERALD_MEDIA_STORAGE_PER_WORKSPACE", 100i64 << 20)?,
                per_account: number(&get, "HERALD_MEDIA_STORAGE_PER_ACCOUNT", 500i64 << 20)?,
            },
            media_s3,
            database_url,
            app_database_url,
            bind,
            base_url,
            secret_key,
            smtp_url,
            dev_smtp_bind,
            mail_from,
            site_root,
            data_dir,
            db_max_connections,
            interactive_statement_timeout: std::time::Duration::from_millis(number(
                &get,
                "HERALD_INTERACTIVE_STATEMENT_TIMEOUT_MS",
                15_000,
            )?),
        })
    }
}

/// A positive number setting with a default; a bad value is one clear line.
/// Seconds separated by commas (`60,300,1800`), each 0 or more.
fn seconds_list(
    get: &impl Fn(&str) -> Option<String>,
    key: &str,
    default: Vec<std::time::Duration>,
) -> Result<Vec<std::time::Duration>, String> {
    match get(key) {
        None => Ok(default),
        Some(list) => list
            .split(',')
            .map(|s| s.trim().parse::<f64>().ok().filter(|v| *v >= 0.0 && v.is_finite()))
            .map(|v| v.map(std::time::Duration::from_secs_f64))
            .collect::<Option<Vec<_>>>()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| format!("{key} must be seconds separated by commas, not `{list}`")),
    }
}

fn number<T>(get: &impl Fn(&str) -> Option<String>, key: &str, default: T) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    match get(key) {
        None => Ok(default),
        Some(v) => {
            v.trim().parse::<T>().ok().filter(|n| *n > T::default()).ok_or(format!("{key} must be a positive number"))
        }
    }
}

/// The development key: generated once and kept in the data dir so sessions and links survive
/// restarts.
fn dev_secret_key(dir: &std::path::Path) -> Result<Vec<u8>, String> {
    let path = dir.join("secret_key");
    if let Ok(k) = std::fs::read_to_string(&path)
        && k.trim().len() >= 32
    {
        return Ok(k.trim().as_bytes().to_vec());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create HERALD_DATA_DIR {}: {e}", dir.display()))?;
    let key = hex::encode(rand::random::<[u8; 32]>());
    std::fs::write(&path, &key).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    }
    Ok(key.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn metrics_are_closed_in_production_unless_a_token_is_set() {
        let db = ("DATABASE_URL", "postgres://u@h/db");
        let key = ("HERALD_SECRET_KEY", "k".repeat(32));
        let prod =
            [db, ("HERALD_ENV", "production"), ("HERALD_SECRET_KEY", &key.1), ("HERALD_SMTP_URL", "smtp://relay:25")];
        assert_eq!(cfg(&prod).map(|c| c.metrics_access), Ok(MetricsAccess::Closed));
        let mut with_token = prod.to_vec();
        with_token.push(("HERALD_METRICS_TOKEN", "a-long-scrape-token"));
        assert_eq!(cfg(&with_token).map(|c| c.metrics_access), Ok(MetricsAccess::Token("a-long-scrape-token".into())));
        let dev = ("HERALD_ENV", "development");
        assert_eq!(cfg(&[db, dev]).map(|c| c.metrics_access), Ok(MetricsAccess::Open));
        assert!(cfg(&[db, dev, ("HERALD_METRICS_TOKEN", "short")]).err().is_some_and(|e| e.contains("16 characters")));
    }

    #[test]
    fn missing_and_bad_settings_are_one_clear_line() {
        assert!(cfg(&[]).err().is_some_and(|e| e.contains("DATABASE_URL")));
        // Production is the default: without the settings it needs, it refuses to start.
        let unset = [("DATABASE_URL", "postgres://u@h/db")];
        assert!(cfg(&unset).err().is_some_and(|e| e.contains("HERALD_SECRET_KEY") && e.contains("HERALD_ENV")));
        let prod = [("DATABASE_URL", "postgres://u@h/db"), ("HERALD_ENV", "production")];
        assert!(cfg(&prod).err().is_some_and(|e| e.contains("HERALD_SECRET_KEY")));
        let bad_bind =
            [("DATABASE_URL", "postgres://u@h/db"), ("HERALD_BIND", "nope"), ("HERALD_SECRET_KEY", &"k".repeat(32))];
        assert!(cfg(&bad_bind).err().is_some_and(|e| e.contains("HERALD_BIND")));
    }

    #[test]
    fn public_form_budgets_have_defaults_and_refuse_nonsense() -> Result<(), String> {
        let key = "k".repeat(32);
        let base = [("DATABASE_URL", "postgres://u@h/db"), ("HERALD_ENV", "development"), ("HERALD_SECRET_KEY", &key)];
        let defaults = herald_engine::audience::public_entry::EntryLimits::default();
        assert_eq!(cfg(&base)?.public_entries, defaults);
        let mut tuned = base.to_vec();
        tuned.push(("HERALD_PUBLIC_ENTRIES_PER_LIST_PER_HOUR", "2"));
        tuned.push(("HERALD_PUBLIC_ENTRY_CHALLENGE_COST", "10"));
        let c = cfg(&tuned)?.public_entries;
        assert_eq!(
            (c.per_list_per_hour, c.challenge_cost, c.per_workspace_per_hour),
            (2, 10, defaults.per_workspace_per_hour)
        );
        for bad in
            [("HERALD_PUBLIC_ENTRIES_PER_WORKSPACE_PER_HOUR", "0"), ("HERALD_PUBLIC_FORM_POSTS_PER_MINUTE", "many")]
        {
            let mut set = base.to_vec();
            set.push(bad);
            assert!(cfg(&set).err().is_some_and(|e| e.contains(bad.0)), "{bad:?}");
        }
        Ok(())
    }

    #[test]
    fn development_defaults_point_at_the_dev_catcher_and_the_runtime_role() -> Result<(), String> {
        let c = cfg(&[
            ("DATABASE_URL", "postgres://postgres:pw@127.0.0.1:5432/herald"),
            ("HERALD_ENV", "development"),
            ("HERALD_SECRET_KEY", &"k".repeat(32)),
        ])?;
        assert_eq!(c.smtp_url, "smtp://127.0.0.1:2525");
        assert_eq!(c.base_url, "http://127.0.0.1:3000");
        assert_eq!(c.app_database_url, "postgres://herald_app@127.0.0.1:5432/herald");
        assert!(!c.secure_cookies());
        Ok(())
    }
}
