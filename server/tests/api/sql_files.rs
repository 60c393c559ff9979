//! The SQL functions and triggers have one current text (`engine/sql/*.sql`): a database built
//! fresh and one upgraded from the previous release end with the same functions, triggers,
//! policies and grants, and a run that changes no file replaces nothing.

use std::collections::BTreeMap;

use crate::helpers::*;
use herald_engine::infra::migrate;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// The last migration of the release before the SQL files: where an upgraded database starts.
const PREVIOUS_RELEASE: i64 = 20261201000054;

/// What the catalog says of the database's own code and access rules, as comparable text.
async fn catalog(pool: &PgPool) -> BTreeMap<String, String> {
    let queries = [
        (
            "function",
            "SELECT p.oid::regprocedure::text,
                    concat_ws(' | ', pg_get_functiondef(p.oid), pg_get_userbyid(p.proowner), p.proacl::text)
               FROM pg_proc p
              WHERE p.pronamespace = 'public'::regnamespace
                AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')",
        ),
        (
            "trigger",
            "SELECT t.tgrelid::regclass::text || '.' || t.tgname, pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text
               FROM pg_trigger t WHERE NOT t.tgisinternal",
        ),
        (
            "policy",
            "SELECT polrelid::regclass::text || '.' || polname,
                    concat_ws(' | ', polcmd, polpermissive::text, polroles::regrole[]::text,
                              pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid))
               FROM pg_policy",
        ),
        (
            "table",
            "SELECT c.oid::regclass::text,
                    concat_ws(' | ', c.relkind, c.relacl::text, c.relrowsecurity::text, c.relforcerowsecurity::text)
               FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')",
        ),
    ];
    let mut out = BTreeMap::new();
    for (kind, sql) in queries {
        let rows: Vec<(String, String)> = sqlx::query_as(sql).fetch_all(pool).await.expect("catalog");
        for (name, def) in rows {
            out.insert(format!("{kind} {name}"), def);
        }
    }
    out
}

async fn pool(url: &str) -> PgPool {
    PgPoolOptions::new().max_connections(2).connect(url).await.expect("connect")
}

#[tokio::test]
async fn a_fresh_database_and_an_upgraded_one_have_the_same_functions_triggers_policies_and_grants() -> TestResult {
    let fresh = pool(&fresh_empty_database().await?).await;
    migrate::run_on(&fresh).await?;

    let upgraded = pool(&fresh_empty_database().await?).await;
    // The previous release's migrations, as that release applied them (no SQL files yet)...
    migrate::run_until(&upgraded, Some(PREVIOUS_RELEASE)).await?;
    // ... then this release's.
    migrate::run_on(&upgraded).await?;

    let (a, b) = (catalog(&fresh).await, catalog(&upgraded).await);
    assert!(a.keys().any(|k| k.starts_with("function automation_advance")), "the catalog query found no functions");
    let mut differ = Vec::new();
    for key in a.keys().chain(b.keys()).collect::<std::collections::BTreeSet<_>>() {
        if a.get(key) != b.get(key) {
            differ.push(format!("{key}\n  fresh:    {:?}\n  upgraded: {:?}", a.get(key), b.get(key)));
        }
    }
    assert!(differ.is_empty(), "fresh and upgraded differ:\n{}", differ.join("\n"));

    // Every function and trigger of Herald's schema is in a file: none lives only in a migration
    // (the job queue's schema is apalis's own).
    let mut missing = Vec::new();
    for key in a.keys() {
        let (needle, name) = if let Some(f) = key.strip_prefix("function ") {
            ("FUNCTION", f.split('(').next().unwrap_or(f))
        } else if let Some(t) = key.strip_prefix("trigger ").filter(|t| !t.starts_with("apalis.")) {
            ("TRIGGER", t.rsplit('.').next().unwrap_or(t))
        } else {
            continue;
        };
        let in_a_file = herald_engine::infra::sql_files::FILES.iter().any(|(_, text)| {
            text.contains(&format!("{needle} {name}(")) || text.contains(&format!("{needle} {name} "))
        });
        if !in_a_file {
            missing.push(key.clone());
        }
    }
    assert!(missing.is_empty(), "defined only in migrations, not in engine/sql/: {missing:?}");
    Ok(())
}

#[tokio::test]
async fn a_run_that_changes_no_file_replaces_nothing() -> TestResult {
    let db = pool(&fresh_empty_database().await?).await;
    migrate::run_on(&db).await?;
    let before: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT name, applied_at FROM applied_sql_files ORDER BY name").fetch_all(&db).await?;
    assert_eq!(before.len(), herald_engine::infra::sql_files::FILES.len());
    // xmin of a function's catalog row changes when it is replaced.
    let versions = "SELECT string_agg(p.oid::regprocedure::text || ':' || p.xmin::text, ',' ORDER BY p.oid)
                      FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace";
    let functions_before: String = sqlx::query_scalar(versions).fetch_one(&db).await?;
    migrate::run_on(&db).await?;
    let after: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT name, applied_at FROM applied_sql_files ORDER BY name").fetch_all(&db).await?;
    assert_eq!(before, after, "a file was applied again");
    let functions_after: String = sqlx::query_scalar(versions).fetch_one(&db).await?;
    assert_eq!(functions_before, functions_after, "a function was replaced");

    // A changed file is applied again, alone.
    sqlx::query("UPDATE applied_sql_files SET sha256 = 'stale' WHERE name = 'segments'").execute(&db).await?;
    migrate::run_on(&db).await?;
    let again: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        sqlx::query_as("SELECT name, applied_at FROM applied_sql_files ORDER BY name").fetch_all(&db).await?;
    let reapplied: Vec<&str> =
        again.iter().zip(&after).filter(|(a, b)| a.1 != b.1).map(|(a, _)| a.0.as_str()).collect();
    assert_eq!(reapplied, vec!["segments"]);
    Ok(())
}
