//! What every benchmark stands on: the settings it takes from `herald`, the web server it may
//! start, and a workspace of its own.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use herald_engine::TenantId;
use herald_engine::tracking::HitCounters;
use sqlx::postgres::PgPoolOptions;

/// What the benchmarks take from `herald`'s configuration, and a way to start its web server.
pub struct BenchEnv {
    /// Owner role: migrations and the benchmarks' own set-up and clean-up.
    pub database_url: String,
    /// Runtime role, as the workers use it.
    pub app_database_url: String,
    pub base_url: String,
    pub secret_key: Vec<u8>,
    pub mail_from: String,
    pub db_max_connections: u32,
    /// `HERALD_SEND_BATCH` and `HERALD_SEND_ACK_BATCH`.
    pub send_batch_size: u32,
    pub send_ack_batch: usize,
    /// Starts the real web server, as `herald serve` builds it, on a free loopback port and
    /// without workers.
    pub serve: Arc<dyn Fn() -> BoxFuture<'static, anyhow::Result<Served>> + Send + Sync>,
}

/// A web server a benchmark started.
pub struct Served {
    pub addr: SocketAddr,
    /// The tracking write buffer's counters, to check every hit was stored or counted.
    pub hit_counters: Arc<HitCounters>,
    /// Stops the server and waits for it.
    pub stop: BoxFuture<'static, anyhow::Result<()>>,
}

/// The owner's connections, each inside `tenant`'s workspace for its whole session: a
/// benchmark's set-up and clean-up through the owner must pass row-level security like any
/// other query (the owner is not a superuser on managed Postgres, nor in the tests).
pub async fn owner_in_workspace(owner_url: &str, tenant: TenantId) -> anyhow::Result<sqlx::PgPool> {
    Ok(PgPoolOptions::new()
        .max_connections(2)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                sqlx::query("SELECT set_config('app.tenant_id', $1, false)")
                    .bind(tenant.to_string())
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect(owner_url)
        .await?)
}

/// Runs `measure` in a workspace of its own, named `name` (with `from_email` as its
/// transactional sender, if given), on an owner connection; deletes the workspace afterwards
/// unless `keep`. Migrates first, as `herald serve` would.
pub async fn in_bench_workspace<Fut>(
    env: &BenchEnv,
    name: &str,
    from_email: Option<&str>,
    keep: bool,
    measure: impl FnOnce(sqlx::PgPool, TenantId) -> Fut,
) -> anyhow::Result<()>
where
    Fut: Future<Output = anyhow::Result<()>>,
{
    herald_engine::infra::migrate::run(&env.database_url).await?;
    let tenant = TenantId::new();
    let owner = owner_in_workspace(&env.database_url, tenant).await?;
    let slug = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    sqlx::query("INSERT INTO tenants (id, name, slug, transactional_from_email) VALUES ($1, $2, $3, $4)")
        .bind(tenant)
        .bind(name)
        .bind(&slug)
        .bind(from_email.unwrap_or_default())
        .execute(&owner)
        .await?;
    let outcome = measure(owner.clone(), tenant).await;
    if keep {
        println!("kept workspace {slug} ({tenant})");
    } else {
        sqlx::query("DELETE FROM tenants WHERE id = $1").bind(tenant).execute(&owner).await?;
    }
    outcome
}
