//! The runtime connection pool and the transactions every query runs in.
//!
//! Row-level security is the backstop for tenancy: every tenant-owned table has a FORCEd policy
//! comparing `tenant_id` with `app_tenant_id()`, which reads the transaction-local setting made
//! here. `set_config(.., true)` lasts until the transaction ends, so a pooled connection never
//! carries one request's tenant into the next.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::domain::{TenantId, UserId};
use crate::error::Result;

/// The role the app and workers run as (see the first migration).
pub const RUNTIME_ROLE: &str = "herald_app";

/// The `NOLOGIN` role that owns the `SECURITY DEFINER` functions which work across workspaces
/// (scheduled starts, the reaper, claims, tracking writes, slug and key look-ups). Every table
/// under row-level security has a policy granting it every row, and no other role gets that:
/// not the runtime role, and not the owner, whose own queries (the CLI, migrations' DDL) stay
/// under `FORCE` like everyone else's. See `migrate::grant_system_role`.
pub const SYSTEM_ROLE: &str = "herald_system";

pub type Tx = Transaction<'static, Postgres>;

/// The tables Herald writes a million rows into at once and then reads by plans that need their
/// statistics ([`Db::analyze_if_stale`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkTable {
    /// A campaign's fan-out, an automation's email steps.
    Sends,
    /// Readers entering an automation, and every step moving them.
    AutomationRuns,
    /// A row per step a run did.
    AutomationStepLog,
}

impl BulkTable {
    fn name(self) -> &'static str {
        match self {
            Self::Sends => "sends",
            Self::AutomationRuns => "automation_runs",
            Self::AutomationStepLog => "automation_step_log",
        }
    }
}

/// The bound on one statement of background work (fan-out chunks, imports, automation batches
/// over a million readers): generous, so a timeout never stops a send half-way, but a statement
/// that runs away still ends and frees its connection.
pub const BACKGROUND_STATEMENT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

tokio::task_local! {
    /// The bound on one statement of the work a person is waiting for (see [`interactive`]).
    static INTERACTIVE_BOUND: Duration;
}

/// Runs `work` as interactive: every transaction it begins bounds its statements to `bound`,
/// so one workspace's expensive request (a segment count of hundreds of conditions) ends with
/// a clear answer instead of holding a connection and a core for minutes while other
/// workspaces wait. The web layer wraps each request in it; work outside it (the workers) keeps
/// [`BACKGROUND_STATEMENT_TIMEOUT`].
pub async fn interactive<F: std::future::Future>(bound: Duration, work: F) -> F::Output {
    INTERACTIVE_BOUND.scope(bound, work).await
}

/// The current task's interactive bound as Postgres reads `statement_timeout` (milliseconds),
/// or `None` outside [`interactive`].
fn interactive_timeout() -> Option<String> {
    INTERACTIVE_BOUND.try_with(|bound| bound.as_millis().max(1).to_string()).ok()
}

#[derive(Clone, Debug)]
pub struct Db {
    pool: PgPool,
    /// State that lives as long as the pool, one value per type (see [`Db::shared`]).
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared(std::sync::Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shared")
    }
}

/// SQL that sets the transaction's statement timeout to the text placeholder `$p` when it is
/// not NULL (inside [`interactive`]), and leaves the pool's background bound otherwise.
macro_rules! bound_statements {
    ($p:literal) => {
        concat!("CASE WHEN ", $p, "::text IS NOT NULL THEN set_config('statement_timeout', ", $p, "::text, true) END")
    };
}

impl Db {
    /// Connects as the runtime role. `url` is the runtime URL (see [`runtime_url`]).
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        // No JIT: Herald's statements are short, and a plan whose estimate passes
        // `jit_above_cost` (a lateral count the plan never runs, a scan of a big send log) paid
        // 100–300 ms compiling it on every call (measured: the editions list, 0.1 ms of work,
        // took 290 ms with JIT on, Postgres's default since 12).
        let background = BACKGROUND_STATEMENT_TIMEOUT.as_millis().to_string();
        let options = PgConnectOptions::from_str(url)?
            .application_name("herald")
            .options([("jit", "off"), ("statement_timeout", background.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(Self::from_pool(pool))
    }

    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool, shared: Arc::default() }
    }

    /// The one `T` of this pool and its clones, made on first use: what belongs to the process's
    /// connection to Postgres rather than to one caller (the lease renewals of every loop), kept
    /// here so that a higher layer can hang it on the pool without this module knowing its type.
    pub fn shared<T: Any + Send + Sync + Default>(&self) -> Arc<T> {
        let mut map = self.shared.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = map.entry(TypeId::of::<T>()).or_insert_with(|| Arc::new(T::default()));
        Arc::clone(entry).downcast::<T>().unwrap_or_else(|_| unreachable!("keyed by its own TypeId"))
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// ANALYZEs `table` when a bulk write has left its statistics behind (`analyze_if_stale` in `engine/sql/statistics.sql`): called
    /// by the paths that follow such a write, before their plans depend on it. Best effort: a
    /// failure is logged, and the plans stay what they were.
    pub async fn analyze_if_stale(&self, table: BulkTable) {
        let analysed =
            sqlx::query_scalar::<_, bool>("SELECT analyze_if_stale($1)").bind(table.name()).fetch_one(&self.pool).await;
        match analysed {
            Ok(true) => tracing::debug!(table = table.name(), "statistics refreshed after a bulk write"),
            Ok(false) => {}
            Err(e) => tracing::warn!(table = table.name(), error = %e, "could not refresh statistics"),
        }
    }

    /// A transaction with no tenant and no user: tenant-owned rows are invisible in it.
    pub async fn begin(&self) -> Result<Tx> {
        let mut tx = self.pool.begin().await?;
        if let Some(ms) = interactive_timeout() {
            sqlx::query("SELECT set_config('statement_timeout', $1, true)").bind(ms).execute(&mut *tx).await?;
        }
        Ok(tx)
    }

    /// A transaction scoped to one tenant (and to the request's statement bound, in one round
    /// trip: this runs before nearly every query Herald makes).
    pub async fn tenant_tx(&self, tenant: TenantId) -> Result<Tx> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(concat!("SELECT set_config('app.tenant_id', $1, true), ", bound_statements!("$2")))
            .bind(tenant.to_string())
            .bind(interactive_timeout())
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// A read-only tenant transaction in which every statement sees one snapshot (REPEATABLE
    /// READ): for views built from several queries (a message and its events), which must not
    /// show an event whose effect on the row they do not show.
    pub async fn tenant_snapshot_tx(&self, tenant: TenantId) -> Result<Tx> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").execute(&mut *tx).await?;
        sqlx::query(concat!("SELECT set_config('app.tenant_id', $1, true), ", bound_statements!("$2")))
            .bind(tenant.to_string())
            .bind(interactive_timeout())
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// A transaction that sees the given user's own memberships (and their workspaces) across
    /// tenants, for the workspace switcher.
    pub async fn user_tx(&self, user: UserId) -> Result<Tx> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(concat!("SELECT set_config('app.user_id', $1, true), ", bound_statements!("$2")))
            .bind(user.to_string())
            .bind(interactive_timeout())
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// A transaction scoped to a tenant that also knows the acting user.
    pub async fn tenant_user_tx(&self, tenant: TenantId, user: UserId) -> Result<Tx> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(concat!(
            "SELECT set_config('app.tenant_id', $1, true), set_config('app.user_id', $2, true), ",
            bound_statements!("$3")
        ))
        .bind(tenant.to_string())
        .bind(user.to_string())
        .bind(interactive_timeout())
        .execute(&mut *tx)
        .await?;
        Ok(tx)
    }

    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

/// The runtime URL: `explicit` if given, else the owner's `database_url` with the user replaced
/// by [`RUNTIME_ROLE`] and no password (fits trust/peer auth in dev and CI; production sets
/// `HERALD_APP_DATABASE_URL`).
pub fn runtime_url(database_url: &str, explicit: Option<&str>) -> anyhow::Result<String> {
    if let Some(url) = explicit {
        return Ok(url.to_string());
    }
    let mut url = url::Url::parse(database_url)?;
    url.set_username(RUNTIME_ROLE).map_err(|()| anyhow::anyhow!("DATABASE_URL cannot carry a user name"))?;
    url.set_password(None).map_err(|()| anyhow::anyhow!("DATABASE_URL cannot carry a password"))?;
    Ok(url.to_string())
}
