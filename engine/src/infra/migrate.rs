//! Schema migrations, run as the database owner (the `DATABASE_URL` role), never as the runtime
//! role. Herald's migrations and apalis's job-queue migrations keep separate history tables
//! (`public._sqlx_migrations`, `apalis._sqlx_migrations`).
//!
//! The owner need not be a superuser (no managed Postgres offers one). Tables are `FORCE ROW
//! LEVEL SECURITY`, so the owner's own queries see no workspace's rows, just as the runtime
//! role's do. The few paths that must work across workspaces are `SECURITY DEFINER` functions
//! owned by [`SYSTEM_ROLE`], a `NOLOGIN` role that every table's `<table>_system` policy lets
//! see every row ([`grant_system_role`] keeps both true after every run). While migrations run,
//! and only then, the owner is a member of that role, so a data migration (a backfill) sees the
//! rows it copies; afterwards the membership is taken back, so the CLI and ad-hoc queries as the
//! owner stay under `FORCE`.

use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, PgPool};

use crate::infra::db::{Db, RUNTIME_ROLE, SYSTEM_ROLE};

pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Creates the runtime and system roles if needed, applies Herald's and apalis's migrations,
/// and grants the runtime role what it needs on the job queue's schema.
pub async fn run(owner_url: &str) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new().max_connections(2).connect(owner_url).await?;
    let result = run_on(&pool).await;
    pool.close().await;
    result
}

pub async fn run_on(pool: &PgPool) -> anyhow::Result<()> {
    run_until(pool, None).await
}

/// [`run_on`], applying Herald's migrations only up to version `target` when given (the data
/// migrations' tests seed a database between two versions).
pub async fn run_until(pool: &PgPool, target: Option<i64>) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    ensure_roles(&mut conn).await?;
    let owner: String = sqlx::query_scalar("SELECT current_user::text").fetch_one(&mut *conn).await?;
    if let Some(problem) = runtime_role_problem(&mut conn, RUNTIME_ROLE, Some(&owner)).await? {
        anyhow::bail!("{problem}");
    }

    // Written before the system role existed: as the owner alone (see below).
    MIGRATOR.run_to(target.unwrap_or(i64::MAX).min(LAST_WITHOUT_SYSTEM_ROLE), &mut *conn).await?;
    // The rest in one transaction in which the owner is a member of the system role: role
    // membership is a catalog row, so a GRANT and REVOKE in one transaction are never seen by
    // another session (the CLI, another database's migrations on the same cluster), and a crash
    // cannot leave the owner a member. sqlx runs each migration in a savepoint of it.
    let mut tx = conn.begin().await?;
    owner_membership(&mut tx, true).await?;
    grant_system_role(&mut tx).await?;
    match target {
        Some(version) => MIGRATOR.run_to(version, &mut *tx).await?,
        None => MIGRATOR.run(&mut *tx).await?,
    }
    // The current functions and triggers, once the schema they are written for is all there
    // (a run that stops at an older version keeps that version's own).
    if target.is_none() {
        crate::infra::sql_files::apply_changed(&mut tx).await?;
    }
    crate::infra::data_migrations::run_pending(&mut tx).await?;
    grant_system_role(&mut tx).await?;
    owner_membership(&mut tx, false).await?;
    tx.commit().await?;

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
        sqlx::query(sqlx::AssertSqlSafe(stmt)).execute(&mut *conn).await?;
    }
    let database: String = sqlx::query_scalar("SELECT current_database()::text").fetch_one(&mut *conn).await?;
    restrict_database(pool, &database).await
}

/// The last migration written before the system role existed. Migrations 10 and 13 backfill
/// tables they have just put under `FORCE` in the same file, before any policy could let the
/// system role write them: with its view of every workspace they would fail on a database with
/// data. So, as before, they run as the owner alone (on a managed server their backfills see no
/// rows), and the migration `system_role_backfills` makes each backfill again with the system role's view. A new
/// migration that creates a table and backfills it must fill it before `FORCE`, or create its
/// `<table>_system` policy first.
const LAST_WITHOUT_SYSTEM_ROLE: i64 = 20261127000026;

/// Makes the migrating owner a member of the system role (`on`), or takes that back. A
/// superuser is left alone: row-level security never applies to it.
async fn owner_membership(conn: &mut PgConnection, on: bool) -> anyhow::Result<()> {
    let verb = if on { "GRANT %I TO %I" } else { "REVOKE %I FROM %I" };
    let sql = format!(
        "DO $$ BEGIN
           IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
             EXECUTE format('{verb}', '{SYSTEM_ROLE}', current_user);
           END IF;
         END $$"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *conn).await.map_err(|e| {
        anyhow::anyhow!(
            "the database owner cannot {} membership of {SYSTEM_ROLE} ({e}); give it CREATEROLE, or ADMIN OPTION on {SYSTEM_ROLE}",
            if on { "grant itself" } else { "give up" }
        )
    })?;
    Ok(())
}

/// `SECURITY DEFINER` functions that keep the owner's rights instead of the system role's:
/// `analyze_if_stale` (`engine/sql/statistics.sql`), because before Postgres 17 only a table's owner may
/// ANALYZE it. It analyses one of three named tables and does nothing else.
pub const OWNER_DEFINER_FUNCTIONS: &[&str] = &["analyze_if_stale"];

/// Definer functions for the operator's CLI alone (every account's address and volumes): the
/// owner, which the CLI connects as for them, may run them; the runtime role may not.
pub const OPERATOR_FUNCTIONS: &[&str] = &["account_activity(integer)"];

/// The system role's share, made true before and after the migrations of every run: every table
/// under row-level security has a `<table>_system` policy letting the system role see and write
/// every row, the role may use every table and sequence, and every `SECURITY DEFINER` function of
/// the owner's is the system role's (so it runs with the role's policies, not the owner's, which
/// match nothing under `FORCE`). Only the owner's: a function someone else managed to create in
/// `public` must never gain the system role's view. Changing a function's owner needs CREATE on its
/// schema for the new owner; that is given for the moment it takes. The functions in
/// [`OWNER_DEFINER_FUNCTIONS`] stay the owner's.
/// The owner may run the [`OPERATOR_FUNCTIONS`] (the operator's CLI calls them as the owner).
pub async fn grant_system_role(conn: &mut PgConnection) -> anyhow::Result<()> {
    let keep = OWNER_DEFINER_FUNCTIONS.iter().map(|f| format!("'{f}'")).collect::<Vec<_>>().join(", ");
    // `to_regprocedure` so a run before the function exists (an early migration) skips it.
    let operator = OPERATOR_FUNCTIONS.iter().map(|f| format!("to_regprocedure('{f}')")).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "DO $$
         DECLARE
           item record;
         BEGIN
           GRANT USAGE, CREATE ON SCHEMA public TO {SYSTEM_ROLE};
           GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {SYSTEM_ROLE};
           GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {SYSTEM_ROLE};
           FOR item IN
             SELECT c.relname FROM pg_class c
             WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND c.relrowsecurity
               AND NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = c.relname || '_system')
           LOOP
             EXECUTE format('CREATE POLICY %I ON %I FOR ALL TO {SYSTEM_ROLE} USING (true) WITH CHECK (true)',
                            item.relname || '_system', item.relname);
           END LOOP;
           FOR item IN
             SELECT p.oid::regprocedure AS f FROM pg_proc p
             WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef
               AND p.proowner = (SELECT relowner FROM pg_class WHERE oid = to_regclass('public.tenants'))
               AND p.proname NOT IN ({keep})
           LOOP
             EXECUTE format('ALTER FUNCTION %s OWNER TO {SYSTEM_ROLE}', item.f);
           END LOOP;
           REVOKE CREATE ON SCHEMA public FROM {SYSTEM_ROLE};
           FOR item IN SELECT unnest(ARRAY[{operator}]::regprocedure[]) AS f
           LOOP
             -- Granted once: a GRANT rewrites the catalog row even when nothing changes.
             IF item.f IS NOT NULL AND NOT EXISTS (
                  SELECT 1 FROM pg_proc p, aclexplode(p.proacl) a
                  WHERE p.oid = item.f AND a.privilege_type = 'EXECUTE'
                    AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = current_user)) THEN
               EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO CURRENT_USER', item.f);
             END IF;
           END LOOP;
         END $$"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut *conn)
        .await
        .map_err(|e| anyhow::anyhow!("cannot give the cross-workspace functions to {SYSTEM_ROLE}: {e}"))?;
    Ok(())
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

/// Creates the runtime role and the system role unless they exist. Roles are cluster-wide, so
/// this is idempotent and tolerates a concurrent creator.
pub async fn ensure_roles(conn: &mut PgConnection) -> anyhow::Result<()> {
    for (role, attributes) in [
        (RUNTIME_ROLE, "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"),
        (SYSTEM_ROLE, "NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOINHERIT"),
    ] {
        ensure_role(conn, role, attributes).await?;
    }
    Ok(())
}

async fn ensure_role(conn: &mut PgConnection, role: &str, attributes: &str) -> anyhow::Result<()> {
    let sql = format!(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
             CREATE ROLE {role} {attributes};
           END IF;
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
         END $$"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut *conn)
        .await
        .map_err(|e| anyhow::anyhow!("cannot create the database role {role} ({e}); give the owner CREATEROLE"))?;
    Ok(())
}

/// True when every migration compiled into this binary has been applied, and every SQL file
/// (`sql_files`) in the text this binary carries.
pub async fn is_current(db: &Db) -> crate::Result<bool> {
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success").fetch_all(db.pool()).await?;
    if !MIGRATOR.iter().filter(|m| m.migration_type.is_up_migration()).all(|m| applied.contains(&m.version)) {
        return Ok(false);
    }
    let files: Vec<(String, String)> =
        sqlx::query_as("SELECT name, sha256 FROM applied_sql_files").fetch_all(db.pool()).await?;
    Ok(crate::infra::sql_files::FILES
        .iter()
        .all(|(name, text)| files.iter().any(|(n, h)| n == name && *h == crate::infra::sql_files::sha256(text))))
}

/// Refuses to run as a role that row-level security would not hold to its own workspace.
pub async fn check_runtime_role(db: &Db) -> anyhow::Result<()> {
    let mut conn = db.pool().acquire().await?;
    let role: String = sqlx::query_scalar("SELECT current_user::text").fetch_one(&mut *conn).await?;
    match runtime_role_problem(&mut conn, &role, None).await? {
        Some(problem) => anyhow::bail!("{problem}"),
        None => Ok(()),
    }
}

/// What `runtime_role_problem` reads about a role.
#[derive(sqlx::FromRow)]
struct RoleFacts {
    superuser: bool,
    bypass: bool,
    createrole: bool,
    /// One of Herald's tables it owns.
    owned: Option<String>,
    /// A role it must not be a member of.
    member_of: Option<String>,
}

/// Why `role` must not be the runtime role, as one line saying what to change: it is a
/// superuser or `BYPASSRLS` (or a member of one), may create roles (and so grant itself any),
/// may create objects in `public` (a `SECURITY DEFINER` function of its own), owns one of
/// Herald's tables (`FORCE` aside, an owner can turn row security off), or is a member of the
/// owner (`owner`, or whoever owns Herald's tables) or of the system role (whose policies see
/// every workspace).
pub async fn runtime_role_problem(
    conn: &mut PgConnection,
    role: &str,
    owner: Option<&str>,
) -> anyhow::Result<Option<String>> {
    let row: Option<RoleFacts> = sqlx::query_as(
        "SELECT r.rolsuper AS superuser, r.rolbypassrls AS bypass, r.rolcreaterole AS createrole,
                (SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.relowner = r.oid AND n.nspname IN ('public', 'apalis') LIMIT 1) AS owned,
                (SELECT o.rolname::text FROM pg_roles o
                  WHERE o.oid <> r.oid AND pg_has_role(r.oid, o.oid, 'MEMBER')
                    AND (o.rolsuper OR o.rolbypassrls OR o.rolname = $2 OR o.rolname = $3
                         OR o.oid IN (SELECT c.relowner FROM pg_class c
                                      WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'))
                  ORDER BY o.rolname LIMIT 1) AS member_of
         FROM pg_roles r WHERE r.rolname = $1",
    )
    .bind(role)
    .bind(owner)
    .bind(SYSTEM_ROLE)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(RoleFacts { superuser, bypass, createrole, owned, member_of }) = row else {
        return Ok(None);
    };
    let creates_in_public: bool = sqlx::query_scalar("SELECT has_schema_privilege($1, 'public', 'CREATE')")
        .bind(role)
        .fetch_one(&mut *conn)
        .await?;
    let why = |what: &str, fix: String| Some(format!("the runtime database role {role} {what}; run: {fix}"));
    Ok(if superuser || bypass {
        why(
            "is a superuser or BYPASSRLS, so row-level security would not apply to it",
            format!("ALTER ROLE {role} NOSUPERUSER NOBYPASSRLS"),
        )
    } else if createrole {
        why("has CREATEROLE, so it could grant itself any role", format!("ALTER ROLE {role} NOCREATEROLE"))
    } else if let Some(table) = owned {
        why(
            &format!("owns {table}, so it could turn row-level security off"),
            format!("ALTER TABLE {table} OWNER TO {}", owner.unwrap_or("<the owner of Herald's other tables>")),
        )
    } else if let Some(other) = member_of {
        why(&format!("is a member of {other}, so it could see every workspace"), format!("REVOKE {other} FROM {role}"))
    } else if creates_in_public {
        why(
            "may create objects in schema public (a function of its own)",
            format!("REVOKE CREATE ON SCHEMA public FROM PUBLIC, {role}"),
        )
    } else {
        None
    })
}
