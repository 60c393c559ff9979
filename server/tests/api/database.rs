//! The database layer under cancellation. A request whose browser goes away, a task aborted at
//! shutdown, a `select!` that picks the other branch: each drops a future that may be halfway
//! through a query. The pooled connection it held must come back as clean as it left.

use crate::helpers::{TestResult, fresh_database};
use sqlx::postgres::PgPoolOptions;
use std::time::Duration;

/// sqlx-postgres 0.9.0 counts a transaction only once BEGIN's reply has been read, and its
/// drop guard rolls back only what it has counted. A future dropped while BEGIN was in flight
/// therefore left the session inside a transaction nothing would end; the pool handed that
/// connection on, and the next borrower's autocommit writes ran inside it: they held their locks
/// (the campaign that next needed them hung) and vanished when the connection closed (a `sent`
/// mark lost is a message sent twice). Herald builds a patched copy, `vendor/sqlx-postgres`.
#[tokio::test]
async fn a_transaction_dropped_while_it_begins_leaves_no_transaction_behind() -> TestResult {
    let url = fresh_database().await?;
    // One connection, so the next borrower gets the very one the dropped BEGIN used; no ping on
    // acquire, so the first poll of `begin` puts BEGIN on the wire and then waits for its reply.
    let pool = PgPoolOptions::new().max_connections(1).test_before_acquire(false).connect(&url).await?;
    let observer = PgPoolOptions::new().max_connections(1).connect(&url).await?;
    sqlx::query("CREATE TABLE writes (round int)").execute(&observer).await?;
    // On loopback BEGIN's reply is sometimes read within the first poll; those rounds miss the
    // window, so count the ones that hit it.
    let mut dropped_in_flight = 0;
    for round in 0..40 {
        // Let the previous borrower's connection finish going back to the pool.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut begin = Box::pin(pool.begin());
        tokio::select! {
            biased;
            begun = &mut begin => drop(begun?),
            () = std::future::ready(()) => dropped_in_flight += 1,
        }
        drop(begin);

        // The next borrower writes outside any transaction: another session sees it at once.
        sqlx::query("INSERT INTO writes VALUES ($1)").bind(round).execute(&pool).await?;
        let seen: i64 =
            sqlx::query_scalar("SELECT count(*) FROM writes WHERE round = $1").bind(round).fetch_one(&observer).await?;
        assert_eq!(seen, 1, "round {round}: an autocommit write ran inside the dropped BEGIN's transaction");
    }
    assert!(dropped_in_flight >= 5, "only {dropped_in_flight} of 40 rounds dropped BEGIN while it was in flight");
    Ok(())
}
