//! The database roles Herald's tests run as, so they meet Postgres as every managed service
//! offers it: an owner that is **not** a superuser and cannot bypass row-level security.
//!
//! - `herald_owner` (LOGIN, CREATEDB, CREATEROLE, NOSUPERUSER, NOBYPASSRLS) migrates and owns
//!   the test databases, as `DATABASE_URL` does in a real deployment. It may signal other
//!   backends and read their activity (`pg_signal_backend`, `pg_monitor`, as RDS's master user
//!   may), so dropping a test database can end its runtime role's pooled connections.
//! - `herald_inspector` (LOGIN, NOSUPERUSER, NOBYPASSRLS) is the tests' eyes behind the runtime
//!   role's back: a member of the owner (its privileges, DDL included) and of the system role
//!   (whose policies see every workspace). Nothing in the product connects as it.
//!
//! Roles are cluster-wide; everything here is idempotent.

use herald_engine::infra::db::SYSTEM_ROLE;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

pub const OWNER_ROLE: &str = "herald_owner";
pub const INSPECTOR_ROLE: &str = "herald_inspector";

/// The owner's and the inspector's URLs on `url`'s server and database.
pub struct OrdinaryOwner {
    pub owner_url: String,
    pub inspector_url: String,
}

/// From whatever `url` the tests are given: when its role is a superuser, creates the two roles
/// (and the system role, made by the owner so the owner may grant it) and answers their URLs;
/// when it is already an ordinary role, that role is the owner and the inspector must exist.
pub async fn ensure(url: &str) -> anyhow::Result<OrdinaryOwner> {
    let mut conn = PgConnection::connect(url).await?;
    let superuser: bool =
        sqlx::query_scalar("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetch_one(&mut conn).await?;
    if !superuser {
        let inspector: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
            .bind(INSPECTOR_ROLE)
            .fetch_one(&mut conn)
            .await?;
        anyhow::ensure!(
            inspector,
            "role {INSPECTOR_ROLE} is missing: give DATABASE_URL a superuser once (make test does) to create it"
        );
        return Ok(OrdinaryOwner { owner_url: url.to_string(), inspector_url: with_user(url, INSPECTOR_ROLE)? });
    }
    // Constant role names only: nothing user-supplied reaches these statements.
    let statements = [
        format!(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{OWNER_ROLE}') THEN
                 CREATE ROLE {OWNER_ROLE} LOGIN CREATEDB CREATEROLE NOSUPERUSER NOBYPASSRLS;
               END IF;
               IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{INSPECTOR_ROLE}') THEN
                 CREATE ROLE {INSPECTOR_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS;
               END IF;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
             END $$"
        ),
        format!("GRANT pg_signal_backend TO {OWNER_ROLE}"),
        // And read every session's activity (pg_monitor), as managed services' admin roles do:
        // some tests find the runtime role's backend by its query to end it mid-statement.
        format!("GRANT pg_monitor TO {OWNER_ROLE}"),
        format!("GRANT {OWNER_ROLE} TO {INSPECTOR_ROLE}"),
        // The owner creates the system role, as `herald migrate` would on a managed server, so
        // it holds the ADMIN OPTION a non-superuser needs to grant it (Postgres 16 and later).
        format!("SET ROLE {OWNER_ROLE}"),
    ];
    for stmt in statements {
        sqlx::query(sqlx::AssertSqlSafe(stmt)).execute(&mut conn).await?;
    }
    herald_engine::infra::migrate::ensure_roles(&mut conn).await?;
    for stmt in ["RESET ROLE".to_string(), format!("GRANT {SYSTEM_ROLE} TO {INSPECTOR_ROLE}")] {
        sqlx::query(sqlx::AssertSqlSafe(stmt)).execute(&mut conn).await?;
    }
    conn.close().await?;
    Ok(OrdinaryOwner { owner_url: with_user(url, OWNER_ROLE)?, inspector_url: with_user(url, INSPECTOR_ROLE)? })
}

/// `url` with its user replaced by `user`, and no password (trust auth, as in development).
pub fn with_user(url: &str, user: &str) -> anyhow::Result<String> {
    let mut url = url::Url::parse(url)?;
    url.set_username(user).map_err(|()| anyhow::anyhow!("the database URL cannot carry a user name"))?;
    url.set_password(None).map_err(|()| anyhow::anyhow!("the database URL cannot carry a password"))?;
    Ok(url.to_string())
}
