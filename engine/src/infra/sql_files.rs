//! The one current text of every SQL function, trigger function and trigger, one file per concept
//! in `engine/sql/`, beside the Rust that calls them. `herald migrate` applies them after the
//! schema migrations and before the data migrations (which call them), in the migrations'
//! transaction, before the system role's grants; a file is applied again only when its text
//! changed (its hash is kept in `applied_sql_files`), so a deploy that changes no file takes no
//! lock on `sends` or `subscriptions`.
//!
//! Migrations carry schema changes and data migrations only. A function's body changes here; a
//! changed signature (arguments, return type) needs its `DROP FUNCTION` in a migration first,
//! since `CREATE OR REPLACE` cannot change it. The migrations before this file existed restate
//! bodies that these files now supersede; they stay as they were (their checksums are recorded).

use sha2::{Digest, Sha256};
use sqlx::PgConnection;

/// Every file, by concept. The order does not matter: bodies are not checked against each other
/// while they are applied (`check_function_bodies` is off for the moment), and each trigger sits
/// in the file of its function.
pub const FILES: &[(&str, &str)] = &[
    ("tenancy", include_str!("../../sql/tenancy.sql")),
    ("operators", include_str!("../../sql/operators.sql")),
    ("statistics", include_str!("../../sql/statistics.sql")),
    ("readers", include_str!("../../sql/readers.sql")),
    ("segments", include_str!("../../sql/segments.sql")),
    ("tracking", include_str!("../../sql/tracking.sql")),
    ("sending", include_str!("../../sql/sending.sql")),
    ("automations", include_str!("../../sql/automations.sql")),
    ("webhooks", include_str!("../../sql/webhooks.sql")),
];

pub fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Applies each file whose text differs from the one last applied; returns the names applied.
pub async fn apply_changed(conn: &mut PgConnection) -> anyhow::Result<Vec<&'static str>> {
    let applied: Vec<(String, String)> =
        sqlx::query_as("SELECT name, sha256 FROM applied_sql_files").fetch_all(&mut *conn).await?;
    let mut done = Vec::new();
    for (name, text) in FILES {
        let hash = sha256(text);
        if applied.iter().any(|(n, h)| n == name && *h == hash) {
            continue;
        }
        sqlx::query("SET LOCAL check_function_bodies = off").execute(&mut *conn).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(*text))
            .execute(&mut *conn)
            .await
            .map_err(|e| anyhow::anyhow!("engine/sql/{name}.sql: {e}"))?;
        sqlx::query("SET LOCAL check_function_bodies = on").execute(&mut *conn).await?;
        sqlx::query(
            "INSERT INTO applied_sql_files (name, sha256) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()",
        )
        .bind(name)
        .bind(&hash)
        .execute(&mut *conn)
        .await?;
        done.push(*name);
    }
    if !done.is_empty() {
        tracing::info!(files = ?done, "SQL functions and triggers applied");
    }
    Ok(done)
}
