//! Schema migrations, run as the database owner (the `DATABASE_URL` role), never as the runtime
//! role. Herald's migrations and apalis's job-queue migrations keep separate history tables
//! (`public._sqlx_migrations`, `apalis._sqlx_migrations`).

use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;

use crate::infra::db::{Db, RUNTIME_ROLE};

pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Creates the runtime role if needed, applies Herald's and apalis's migrations, and grants the
/// runtime role what it needs on the job queue's schema.
pub async fn run(owner_url: &str) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new().max_connections(2).connect(owner_url).await?;
    run_on(&pool).await?;
    pool.close().await;
    Ok(())
}

pub async fn run_on(pool: &PgPool) -> anyhow::Result<()> {
    ensure_runtime_role(pool).await?;
    MIGRATOR.run(pool).await?;
    apalis_postgres::PostgresStorage::<()>::setup(pool)
        .await
        .map_err(|e| anyhow::anyhow!("job queue migrations: {e}"))?;
    // Constant role and schema names only: nothing user-supplied reaches these statements.
    for stmt in [
        format!("GRANT USAGE ON SCHEMA apalis TO {RUNTIME_ROLE}"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA apalis TO {RUNTIME_ROLE}"),
        format!("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA apalis TO {RUNTIME_ROLE}"),
        format!("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA apalis TO {RUNTIME_ROLE}"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt)).execute(pool).await?;
    }
    let database: String = sqlx::query_scalar("SELECT current_database()::text").fetch_one(pool).await?;
    restrict_database(pool, &database).await
}

/// Takes TEMPORARY on `database` away from every role but its owner (Postgres grants it to
/// PUBLIC): the runtime role needs no temporary tables, and a `SECURITY DEFINER` function must
/// never meet one its caller made. Database privileges are not part of a database's contents,
/// so a copy made from a migrated template needs this again.
pub async fn restrict_database(pool: &PgPool, database: &str) -> anyhow::Result<()> {
    let quoted = format!("\"{}\"", database.replace('"', "\"\""));
    for stmt in [
        format!("REVOKE TEMPORARY ON DATABASE {quoted} FROM PUBLIC"),
        format!("REVOKE TEMPORARY ON DATABASE {quoted} FROM {RUNTIME_ROLE}"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt)).execute(pool).await?;
    }
    Ok(())
}

/// Roles are cluster-wide, so this is idempotent and tolerates a concurrent creator.
async fn ensure_runtime_role(pool: &PgPool) -> anyhow::Result<()> {
    let sql = format!(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RUNTIME_ROLE}') THEN
             CREATE ROLE {RUNTIME_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
           END IF;
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
         END $$"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql)).execute(pool).await?;
    Ok(())
}

/// True when every migration compiled into this binary has been applied.
pub async fn is_current(db: &Db) -> crate::Result<bool> {
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success").fetch_all(db.pool()).await?;
    Ok(MIGRATOR.iter().filter(|m| m.migration_type.is_up_migration()).all(|m| applied.contains(&m.version)))
}

/// Refuses to run as a role that row-level security would not apply to.
pub async fn check_runtime_role(db: &Db) -> anyhow::Result<()> {
    let (user, superuser, bypass): (String, bool, bool) =
        sqlx::query_as("SELECT rolname::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            .fetch_one(db.pool())
            .await?;
    if superuser || bypass {
        anyhow::bail!(
            "the runtime database role {user} is a superuser or BYPASSRLS; row-level security would not apply"
        );
    }
    Ok(())
}
