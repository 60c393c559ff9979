//! States and choices live in `text` columns with a CHECK constraint and, in Rust, as the
//! contract's enums (`string_enum!`). The two lists are written in different places (a
//! migration, `herald-types`), and the SQL functions of the send path compare the text directly:
//! a value added on one side only would be refused by Postgres at runtime, or read back as a
//! decode error. This test holds each enum against its column's constraint, so the lists cannot
//! drift apart unnoticed.

use crate::helpers::{TestResult, fresh_database};
use herald_types::{
    BodyFormat, CampaignStatus, Existing, FeedSource, FieldKind, ImportMode, ImportStatus, MessageStatus, OptIn,
    ReaderStatus, Role, SendStatus, SubscriptionStatus, SuppressionReason, TrackingMode, Visibility,
};
use std::collections::BTreeSet;

macro_rules! texts {
    ($e:ty) => {
        <$e>::ALL.iter().map(|v| v.as_str().to_string()).collect::<BTreeSet<String>>()
    };
}

#[tokio::test]
async fn every_stored_enum_has_exactly_the_values_its_column_allows() -> TestResult {
    let url = fresh_database().await?;
    let db = sqlx::PgPool::connect(&url).await?;
    let columns: Vec<(&str, &str, BTreeSet<String>)> = vec![
        ("campaigns", "status", texts!(CampaignStatus)),
        ("campaigns", "body_format", texts!(BodyFormat)),
        ("campaigns", "tracking", texts!(TrackingMode)),
        ("campaigns", "feed", texts!(FeedSource)),
        ("sends", "status", texts!(SendStatus)),
        ("messages", "status", texts!(MessageStatus)),
        ("imports", "status", texts!(ImportStatus)),
        ("imports", "mode", texts!(ImportMode)),
        ("imports", "existing", texts!(Existing)),
        ("readers", "status", texts!(ReaderStatus)),
        ("subscriptions", "status", texts!(SubscriptionStatus)),
        ("suppressions", "reason", texts!(SuppressionReason)),
        ("lists", "opt_in", texts!(OptIn)),
        ("lists", "visibility", texts!(Visibility)),
        ("fields", "kind", texts!(FieldKind)),
        ("memberships", "role", texts!(Role)),
    ];
    for (table, column, rust) in columns {
        let checks: Vec<String> = sqlx::query_scalar(
            "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
             WHERE c.contype = 'c' AND c.conrelid = $1::regclass AND a.attname = $2",
        )
        .bind(table)
        .bind(column)
        .fetch_all(&db)
        .await?;
        assert_eq!(checks.len(), 1, "{table}.{column}: expected one CHECK constraint, found {checks:?}");
        let allowed = quoted_texts(&checks[0]);
        assert_eq!(allowed, rust, "{table}.{column}: the column allows {allowed:?}, the enum has {rust:?}");
    }
    Ok(())
}

/// The `'…'::text` literals of a constraint as `pg_get_constraintdef` prints it, e.g.
/// `CHECK ((status = ANY (ARRAY['queued'::text, 'sent'::text])))`.
fn quoted_texts(def: &str) -> BTreeSet<String> {
    let pieces: Vec<&str> = def.split('\'').collect();
    pieces
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .filter(|(i, _)| pieces.get(i + 1).is_some_and(|next| next.starts_with("::text")))
        .map(|(_, literal)| literal.to_string())
        .collect()
}
