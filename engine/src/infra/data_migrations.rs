//! Data migrations that SQL cannot express, run by `herald migrate` right after the SQL
//! migrations, in the same transaction (so with the system role's view of every workspace, and
//! all or nothing). A SQL migration asks for one by inserting its name into
//! `pending_data_migrations`; it is deleted once done, so each runs once per database.

use sqlx::PgConnection;

use crate::domain::Email;

pub async fn run_pending(conn: &mut PgConnection) -> anyhow::Result<()> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('public.pending_data_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        return Ok(());
    }
    let pending: Vec<String> =
        sqlx::query_scalar("SELECT name FROM pending_data_migrations ORDER BY name").fetch_all(&mut *conn).await?;
    for name in pending {
        match name.as_str() {
            "canonical_addresses" => {
                canonical_addresses(conn).await?;
            }
            other => anyhow::bail!("the database asks for data migration “{other}”, which this binary does not know"),
        }
        sqlx::query("DELETE FROM pending_data_migrations WHERE name = $1").bind(&name).execute(&mut *conn).await?;
    }
    Ok(())
}

/// What [`canonical_addresses`] changed, for the operator's log and the tests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AddressesMerged {
    pub readers_rewritten: u64,
    pub readers_merged: u64,
    pub suppressions_rewritten: u64,
    pub users_rewritten: u64,
    /// Transactional messages not yet sent (their claim checks suppressions by address).
    pub messages_rewritten: u64,
    /// Stored addresses that are not valid addresses any more (left as they were).
    pub left_invalid: u64,
    /// User accounts whose canonical address another account already has (left for an operator).
    pub users_in_conflict: u64,
}

/// Stores every reader, suppression and user address in its canonical form, merging readers of
/// one workspace that turn out to be one mailbox. A merge loses no consent history: the ledger
/// moves to the kept reader (with an entry saying so), and an unsubscribe, a block or a
/// suppression on either copy wins. Nor does it break mail already sent: the merged copy's id
/// stays an alias of the kept reader, its engagement is added to the kept reader's, and a row
/// in flight keeps its Message-ID. Only rows that can differ from their canonical form are read
/// (non-ASCII or upper-case ASCII), in keyset batches, so a database of plain addresses costs one
/// scan.
pub async fn canonical_addresses(conn: &mut PgConnection) -> anyhow::Result<AddressesMerged> {
    let mut done = AddressesMerged::default();
    suppressions(conn, &mut done).await?;
    readers(conn, &mut done).await?;
    queued_messages(conn, &mut done).await?;
    users(conn, &mut done).await?;
    tracing::info!(?done, "addresses made canonical");
    Ok(done)
}

/// A filter for rows whose `column` may not be canonical: any character outside printable
/// ASCII, or an upper-case one (the rest are canonical already).
fn maybe_not_canonical(column: &str) -> String {
    format!("({column} ~ '[^ -~]' OR {column} <> lower({column}))")
}

async fn suppressions(conn: &mut PgConnection, done: &mut AddressesMerged) -> anyhow::Result<()> {
    let candidates: Vec<(uuid::Uuid, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT tenant_id, email_lower FROM suppressions WHERE {}",
        maybe_not_canonical("email_lower")
    )))
    .fetch_all(&mut *conn)
    .await?;
    for (tenant, stored) in candidates {
        let Ok(canonical) = Email::parse(&stored) else {
            done.left_invalid += 1;
            continue;
        };
        if canonical.as_str() == stored {
            continue;
        }
        // Both rows may exist: the stronger reason wins (a complaint or bounce protects the
        // sender's reputation, and an unsubscribe from everything is the weakest), the older date.
        sqlx::query(
            "INSERT INTO suppressions AS kept (tenant_id, email_lower, reason, source, created_at)
             SELECT tenant_id, $3, reason, source, created_at FROM suppressions WHERE tenant_id = $1 AND email_lower = $2
             ON CONFLICT (tenant_id, email_lower) DO UPDATE
                SET reason = CASE WHEN suppression_strength(excluded.reason) > suppression_strength(kept.reason)
                                  THEN excluded.reason ELSE kept.reason END,
                    source = CASE WHEN suppression_strength(excluded.reason) > suppression_strength(kept.reason)
                                  THEN excluded.source ELSE kept.source END,
                    created_at = least(kept.created_at, excluded.created_at)",
        )
        .bind(tenant)
        .bind(&stored)
        .bind(canonical.as_str())
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM suppressions WHERE tenant_id = $1 AND email_lower = $2")
            .bind(tenant)
            .bind(&stored)
            .execute(&mut *conn)
            .await?;
        done.suppressions_rewritten += 1;
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct StoredReader {
    id: i64,
    tenant_id: uuid::Uuid,
    email: String,
}

async fn readers(conn: &mut PgConnection, done: &mut AddressesMerged) -> anyhow::Result<()> {
    let schema = MergeSchema::of(conn).await?;
    let mut after = 0_i64;
    loop {
        let batch: Vec<StoredReader> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id, tenant_id, email FROM readers WHERE id > $1 AND {} ORDER BY id LIMIT 5000",
            maybe_not_canonical("email")
        )))
        .bind(after)
        .fetch_all(&mut *conn)
        .await?;
        let Some(last) = batch.last() else { return Ok(()) };
        after = last.id;
        for reader in batch {
            let Ok(canonical) = Email::parse(&reader.email) else {
                done.left_invalid += 1;
                continue;
            };
            if canonical.as_str() == reader.email {
                continue;
            }
            // Canonical addresses are lower-case, so the unique index on lower(email) finds the
            // other copy, if there is one. A reader of this batch may already have been merged
            // away (as the other copy of an earlier one): then there is nothing left to do.
            let (still_here, other): (bool, Option<i64>) = sqlx::query_as(
                "SELECT EXISTS (SELECT 1 FROM readers WHERE id = $3),
                        (SELECT id FROM readers WHERE tenant_id = $1 AND lower(email) = $2 AND id <> $3)",
            )
            .bind(reader.tenant_id)
            .bind(canonical.as_str())
            .bind(reader.id)
            .fetch_one(&mut *conn)
            .await?;
            match other {
                _ if !still_here => {}
                None => {
                    sqlx::query("UPDATE readers SET email = $2, updated_at = now() WHERE id = $1")
                        .bind(reader.id)
                        .bind(canonical.as_str())
                        .execute(&mut *conn)
                        .await?;
                    done.readers_rewritten += 1;
                }
                Some(other) => {
                    // The older reader (the longer history) is kept, under the canonical address.
                    let (kept, dup) = (other.min(reader.id), other.max(reader.id));
                    merge_reader(conn, schema, reader.tenant_id, kept, dup).await?;
                    sqlx::query("UPDATE readers SET email = $2 WHERE id = $1")
                        .bind(kept)
                        .bind(canonical.as_str())
                        .execute(&mut *conn)
                        .await?;
                    done.readers_merged += 1;
                }
            }
        }
    }
}

/// What the schema a merge runs against has. `herald migrate` runs data migrations after every
/// migration, so a merge normally finds it all; a run that stops at an older version (the data
/// migrations' tests seed a database between two versions) merges as that version did, and the
/// migration that brought `reader_aliases` later rebuilds aliases and engagement from the ledger.
#[derive(Clone, Copy)]
struct MergeSchema {
    /// `reader_aliases` and `sends.message_reader_id` (and `reader_engagement`, older).
    aliases: bool,
}

impl MergeSchema {
    async fn of(conn: &mut PgConnection) -> anyhow::Result<Self> {
        let aliases: bool =
            sqlx::query_scalar("SELECT to_regclass('public.reader_aliases') IS NOT NULL").fetch_one(&mut *conn).await?;
        Ok(MergeSchema { aliases })
    }
}

/// Folds reader `dup` into reader `kept` (same workspace) and deletes `dup`.
///
/// Mail already sent to `dup` names it by id: its unsubscribe, confirmation and web-version
/// links, its open pixel and tracked links, and its Message-ID (`{campaign}.{reader}@domain`),
/// which receivers use to drop a second copy and complaint reports quote. So `dup`'s id becomes
/// an alias of `kept` (`reader_aliases`; every place that takes a reader id from a link resolves
/// it through `audience::aliases::resolve_id`, the tracking batch in `record_hits`).
///
/// A send-log row of `dup` that is in flight (being sent, armed, or counted ambiguous after a
/// lease was lost: it may have arrived) moves to `kept` like the rest, so that nothing is left
/// pointing at a reader about to be deleted, but remembers in `message_reader_id` the id its
/// Message-ID named: a re-send goes out under the same Message-ID. Keeping such rows on `dup`
/// instead would mean keeping `dup` itself, a second reader for one mailbox. A worker may hold
/// such a row while this runs (the migration may run beside running workers): its message is
/// already composed under `dup`'s id, which the alias and `message_reader_id` both keep valid,
/// and its later writes go by the row's id and lease token, which the merge leaves alone.
async fn merge_reader(
    conn: &mut PgConnection,
    schema: MergeSchema,
    tenant: uuid::Uuid,
    kept: i64,
    dup: i64,
) -> anyhow::Result<()> {
    let mut statements = vec![
        // The reader: the stricter status, the older first-seen date, the later frequency-cap
        // mark, names and attributes filled in from the copy where the kept one has none.
        "UPDATE readers k SET
            status = CASE WHEN 'blocklisted' IN (k.status, d.status) THEN 'blocklisted'
                          WHEN 'unsubscribed' IN (k.status, d.status) THEN 'unsubscribed' ELSE 'active' END,
            name = CASE WHEN k.name = '' THEN d.name ELSE k.name END,
            attributes = d.attributes || k.attributes,
            last_campaign_id = CASE WHEN d.last_campaign_at > k.last_campaign_at OR k.last_campaign_at IS NULL
                                    THEN d.last_campaign_id ELSE k.last_campaign_id END,
            last_campaign_at = greatest(k.last_campaign_at, d.last_campaign_at),
            created_at = least(k.created_at, d.created_at),
            updated_at = now()
         FROM readers d WHERE k.tenant_id = $1 AND k.id = $2 AND d.tenant_id = $1 AND d.id = $3",
        // Lists both copies are on: an unsubscribe on either wins, then a confirmation.
        "UPDATE subscriptions k SET
            status = CASE WHEN 'unsubscribed' IN (k.status, d.status) THEN 'unsubscribed'
                          WHEN 'confirmed' IN (k.status, d.status) THEN 'confirmed' ELSE 'unconfirmed' END,
            confirmed_at = least(k.confirmed_at, d.confirmed_at),
            unsubscribed_at = greatest(k.unsubscribed_at, d.unsubscribed_at),
            created_at = least(k.created_at, d.created_at)
         FROM subscriptions d
         WHERE k.tenant_id = $1 AND k.reader_id = $2 AND d.tenant_id = $1 AND d.reader_id = $3 AND d.list_id = k.list_id",
        "DELETE FROM subscriptions d USING subscriptions k
         WHERE d.tenant_id = $1 AND d.reader_id = $3 AND k.tenant_id = $1 AND k.reader_id = $2 AND k.list_id = d.list_id",
        "UPDATE subscriptions SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
        // The consent ledger keeps every entry, now under the kept reader, and says why.
        "UPDATE consent_events SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
        "INSERT INTO consent_events (tenant_id, reader_id, action, source, wording)
         VALUES ($1, $2, 'merged', 'migration',
                 'Reader #' || $3 || ' had the same mailbox written another way and was merged into this reader.')",
        // One send-log row per campaign: keep the one furthest along (a sent row over a queued
        // one, so nobody gets the campaign twice), the kept reader's on a tie.
        "DELETE FROM sends x USING sends y
         WHERE x.tenant_id = $1 AND y.tenant_id = $1 AND x.campaign_id = y.campaign_id
           AND ((x.reader_id = $3 AND y.reader_id = $2) OR (x.reader_id = $2 AND y.reader_id = $3))
           AND (send_progress_rank(x.status), x.reader_id = $3) > (send_progress_rank(y.status), y.reader_id = $3)",
    ];
    if schema.aliases {
        statements.extend([
            // A row in flight keeps the Message-ID it may already have arrived under (a row moved
            // before, from a third copy, keeps the one it has).
            "UPDATE sends SET reader_id = $2,
                    message_reader_id = coalesce(message_reader_id,
                                                 CASE WHEN status = 'sending' OR armed OR ambiguous > 0 THEN $3 END)
             WHERE tenant_id = $1 AND reader_id = $3",
            "UPDATE events SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
            // The summary of the events just moved (its row goes with `dup`): counts add up, the
            // latest dates win, as the trigger that keeps it adds new events.
            "INSERT INTO reader_engagement AS k
                    (tenant_id, reader_id, last_open_at, last_click_at, opens, clicks, last_soft_bounce_at)
             SELECT tenant_id, $2, last_open_at, last_click_at, opens, clicks, last_soft_bounce_at
             FROM reader_engagement WHERE tenant_id = $1 AND reader_id = $3
             ON CONFLICT (tenant_id, reader_id) DO UPDATE SET
                last_open_at = greatest(k.last_open_at, excluded.last_open_at),
                last_click_at = greatest(k.last_click_at, excluded.last_click_at),
                opens = k.opens + excluded.opens,
                clicks = k.clicks + excluded.clicks,
                last_soft_bounce_at = greatest(k.last_soft_bounce_at, excluded.last_soft_bounce_at)",
            // `dup`'s id, and the ids merged into it before, now name the kept reader.
            "UPDATE reader_aliases SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
            "INSERT INTO reader_aliases (tenant_id, merged_id, reader_id) VALUES ($1, $3, $2)
             ON CONFLICT (tenant_id, merged_id) DO UPDATE SET reader_id = excluded.reader_id",
        ]);
    } else {
        statements.extend([
            "UPDATE sends SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
            "UPDATE events SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
        ]);
    }
    statements.extend([
        "DELETE FROM campaign_feed d USING campaign_feed k
         WHERE d.tenant_id = $1 AND d.reader_id = $3 AND k.tenant_id = $1 AND k.reader_id = $2 AND k.campaign_id = d.campaign_id",
        "UPDATE campaign_feed SET reader_id = $2 WHERE tenant_id = $1 AND reader_id = $3",
        "DELETE FROM readers WHERE tenant_id = $1 AND id = $3",
    ]);
    for sql in statements {
        sqlx::query(sql).bind(tenant).bind(kept).bind(dup).execute(&mut *conn).await?;
    }
    Ok(())
}

/// Transactional messages still to send: their claim matches suppressions by address. Sent ones
/// keep the address they went to.
async fn queued_messages(conn: &mut PgConnection, done: &mut AddressesMerged) -> anyhow::Result<()> {
    let candidates: Vec<(uuid::Uuid, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, to_email FROM messages WHERE status IN ('queued', 'sending') AND {}",
        maybe_not_canonical("to_email")
    )))
    .fetch_all(&mut *conn)
    .await?;
    for (id, stored) in candidates {
        if let Ok(canonical) = Email::parse(&stored)
            && canonical.as_str() != stored
        {
            sqlx::query("UPDATE messages SET to_email = $2 WHERE id = $1")
                .bind(id)
                .bind(canonical.as_str())
                .execute(&mut *conn)
                .await?;
            done.messages_rewritten += 1;
        }
    }
    Ok(())
}

/// Accounts are people, not rows to merge: an address another account already has in canonical
/// form is left as it is (and counted) for an operator to resolve.
async fn users(conn: &mut PgConnection, done: &mut AddressesMerged) -> anyhow::Result<()> {
    let candidates: Vec<(uuid::Uuid, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, email FROM users WHERE {}",
        maybe_not_canonical("email")
    )))
    .fetch_all(&mut *conn)
    .await?;
    for (id, stored) in candidates {
        let Ok(canonical) = Email::parse(&stored) else {
            done.left_invalid += 1;
            continue;
        };
        if canonical.as_str() == stored {
            continue;
        }
        let updated = sqlx::query(
            "UPDATE users SET email = $2 WHERE id = $1
               AND NOT EXISTS (SELECT 1 FROM users o WHERE lower(o.email) = $2 AND o.id <> $1)",
        )
        .bind(id)
        .bind(canonical.as_str())
        .execute(&mut *conn)
        .await?
        .rows_affected();
        if updated == 1 {
            done.users_rewritten += 1;
        } else {
            done.users_in_conflict += 1;
            tracing::warn!(user = %id, "an account's canonical address belongs to another account; left as it is");
        }
    }
    Ok(())
}
