//! Fan-out: one send-log row per eligible reader, written set-based in chunks of reader ids.
//!
//! Each chunk is one `INSERT … SELECT … ON CONFLICT DO NOTHING` plus the cursor move, in one
//! transaction, so a crash loses at most the chunk in flight and a re-run (or a duplicate apalis
//! job) inserts nothing twice: `UNIQUE (campaign_id, reader_id)` is the last line (seed 002).
//! Readers are deduplicated on the lowercased address already (one reader per address per
//! workspace), and a reader on several target lists is one row (`DISTINCT`).
//!
//! Eligibility here is the first of three checks: confirmed on a target list, active, not
//! suppressed, outside the frequency cap, matching the attribute condition. Readers that fail
//! a check after being selected are written as `skipped` with the reason, so the report can
//! say why they got nothing; the claim re-checks everything just before SMTP.

use serde_json::Value;
use uuid::Uuid;

use super::ab_test::Split;
use crate::audience::readers::AttributeCondition;
use crate::domain::{CampaignId, TenantId};
use crate::error::Result;
use crate::infra::db::{BulkTable, Db, Tx};
use herald_types::CampaignStatus;

/// Reader ids per chunk. Ranges, not LIMIT: a range scan of the subscriptions index per target
/// list costs the same for every chunk, while `ORDER BY reader_id LIMIT n` over several lists
/// would sort everything after the cursor each time. Each range starts at the next confirmed
/// subscriber after the cursor: reader ids are shared by every workspace, so a workspace's
/// readers sit in scattered stretches of the id space, and stepping through the gaps would
/// cost one empty chunk (and one hold of the campaign row lock) per 50k ids of other tenants.
pub const CHUNK_IDS: i64 = 50_000;

/// `attributes @> {k: v}` conditions, any of which must hold.
pub(crate) fn attribute_conditions(cond: Option<&AttributeCondition>) -> Vec<Value> {
    match cond {
        None => Vec::new(),
        Some(AttributeCondition::Equals(k, v)) => vec![serde_json::json!({ k: v })],
        Some(AttributeCondition::In(k, vs)) => vs.iter().map(|v| serde_json::json!({ k: v })).collect(),
    }
}

/// The campaign as each chunk reads it under its row lock.
#[derive(sqlx::FromRow)]
struct FanoutRow {
    status: CampaignStatus,
    fanout_done: bool,
    fanout_cursor: i64,
    list_ids: Vec<Uuid>,
    attribute_filter: String,
    frequency_cap_hours: Option<i32>,
    /// An edition with pushed data reads (and consumes) its recurring campaign's feed.
    feed_of: Option<Uuid>,
    segment_ids: Vec<Uuid>,
    exclude_segment_id: Option<Uuid>,
    audience: Option<Value>,
    ab_test: Option<sqlx::types::Json<herald_types::AbTest>>,
    ab_seed: Option<i64>,
    ab_winner: Option<i16>,
    resend_of: Option<Uuid>,
    resend_machine_opens: bool,
}

/// Where a campaign's readers come from, and so what a chunk's range is over.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    /// Confirmed subscribers of the target lists (ranges of reader ids).
    Lists,
    /// The audience tree of lists, segments and an exclusion (ranges of reader ids).
    Tree,
    /// The original campaign's sent rows (ranges of their send ids).
    Resend(Uuid),
}

impl Source {
    fn of(resend_of: Option<Uuid>, segments: &[Uuid], exclude: Option<Uuid>) -> Self {
        match resend_of {
            Some(original) => Source::Resend(original),
            None if !segments.is_empty() || exclude.is_some() => Source::Tree,
            None => Source::Lists,
        }
    }

    /// The chunk's `$3`: the target lists, or for a resend the lists a reader must still be
    /// confirmed on (none, meaning any, when segments brought the original's readers in).
    fn lists(self, lists: &[Uuid], segments: &[Uuid]) -> Vec<Uuid> {
        match self {
            Source::Resend(_) if !segments.is_empty() => Vec::new(),
            _ => lists.to_vec(),
        }
    }

    fn chunk(self) -> &'static str {
        match self {
            Source::Lists => LIST_CHUNK,
            Source::Tree => TREE_CHUNK,
            Source::Resend(_) => super::resend::RESEND_CHUNK,
        }
    }
}

/// A chunk of a campaign that targets lists only: their confirmed subscribers with ids in
/// ($4, $5], each once. `$3` the lists.
const LIST_CHUNK: &str = "SELECT DISTINCT s.reader_id FROM subscriptions s
     WHERE s.tenant_id = $1 AND s.list_id = ANY($3) AND s.status = 'confirmed'
       AND s.reader_id > $4 AND s.reader_id <= $5";

/// A chunk of a campaign with segments or an exclusion: the readers with ids in ($4, $5] the
/// audience tree `$9` matches (its lists, its segments, not its exclusion; see
/// `targeting::tree`), of those confirmed on at least one list: a segment chooses among readers
/// who agreed to hear from the workspace, never beyond them.
const TREE_CHUNK: &str = "SELECT m.id AS reader_id FROM segment_readers($9, $4, $5, NULL) AS m(id)
     WHERE EXISTS (SELECT 1 FROM subscriptions c WHERE c.tenant_id = $1 AND c.reader_id = m.id AND c.status = 'confirmed')";

/// The chunk's readers with why each gets nothing (`skip`), or NULL. The frequency cap skips a
/// reader here only when another campaign has mailed them within it (its row `sent`): while
/// that row may still be sent or given back, or after it ended unsent, the reader stays in, and
/// the claim decides (`Sender::apply_cap`: it waits, moves the marks or skips).
const CANDIDATES: &str = "SELECT r.id, r.email, f.data AS feed,
            CASE WHEN r.status <> 'active' THEN 'reader ' || r.status
                 WHEN EXISTS (SELECT 1 FROM suppressions x WHERE x.tenant_id = $1 AND x.email_lower = lower(r.email))
                     THEN 'suppressed'
                 WHEN $6::int IS NOT NULL AND r.last_campaign_at > now() - make_interval(hours => $6::int)
                      AND r.last_campaign_id IS DISTINCT FROM $2
                      AND coalesce((SELECT x.status FROM sends x
                                    WHERE x.tenant_id = $1 AND x.campaign_id = r.last_campaign_id AND x.reader_id = r.id
                                    ORDER BY x.entry DESC LIMIT 1), 'sent') = 'sent' THEN 'frequency cap'
                 WHEN $8::uuid IS NOT NULL AND f.data IS NULL THEN 'no data for this edition'
            END AS skip
     FROM chunk JOIN readers r ON r.id = chunk.reader_id
     LEFT JOIN campaign_feed f ON f.campaign_id = $8 AND f.reader_id = r.id AND f.tenant_id = $1
     WHERE r.tenant_id = $1 AND (cardinality($7::jsonb[]) = 0 OR r.attributes @> ANY($7::jsonb[]))";

/// An A/B test's split of the chunk's candidates (`$10` the seed, none without a test; `$11`
/// the test share in percent; `$12` the versions): a hash of the reader id and the seed puts a
/// reader in the rest (`rest`) or gives it a version, the same each time a chunk is re-run.
/// The low two digits decide the share, the rest of the hash the version, so the two are
/// independent.
const SPLIT: &str = "SELECT c.*, coalesce(((h % 100) + 100) % 100 >= $11, false) AS rest,
            ((((h / 100) % $12) + $12) % $12)::smallint AS variant
     FROM candidates c CROSS JOIN LATERAL (
         SELECT CASE WHEN $10::bigint IS NOT NULL THEN hashtextextended(c.id::text, $10) END AS h) x";

/// How many readers the campaign would reach if sent now (after suppressions, readers not
/// confirmed on any list, the frequency cap), and how many its lists and segments hold that it
/// would skip: the fan-out's own queries, over every reader at once.
#[tracing::instrument(skip_all, fields(%tenant, %id))]
pub async fn reach(
    db: &crate::infra::db::Db,
    tenant: TenantId,
    id: crate::domain::CampaignId,
) -> Result<herald_types::AudienceCount> {
    let mut tx = db.tenant_tx(tenant).await?;
    let campaign = super::store::get_in(&mut tx, tenant, id).await?;
    let (eligible, skipped) = if campaign.list_ids.is_empty() && campaign.segment_ids.is_empty() {
        (0, 0)
    } else {
        eligible(&mut tx, tenant, &campaign).await?
    };
    tx.commit().await?;
    Ok(herald_types::AudienceCount { eligible, skipped })
}

/// How many readers a send would reach now, and how many of those it would skip (inactive,
/// suppressed, within the frequency cap): the fan-out's own queries over every reader at once.
pub(crate) async fn eligible(
    tx: &mut crate::infra::db::Tx,
    tenant: TenantId,
    campaign: &herald_types::Campaign,
) -> Result<(i64, i64)> {
    let segments = ids(&campaign.segment_ids);
    let source = Source::of(campaign.resend_of.map(|c| c.0), &segments, campaign.exclude_segment_id.map(|s| s.0));
    let tree = if source == Source::Tree {
        Some(
            super::targeting::tree(
                tx,
                tenant,
                &ids(&campaign.list_ids),
                &ids(&campaign.segment_ids),
                campaign.exclude_segment_id.map(|s| s.0),
            )
            .await?,
        )
    } else {
        None
    };
    let cap: Option<i32> = sqlx::query_scalar("SELECT frequency_cap_hours FROM tenants WHERE id = $1")
        .bind(tenant)
        .fetch_one(&mut **tx)
        .await?;
    let cond = if campaign.attribute_filter.trim().is_empty() {
        None
    } else {
        Some(AttributeCondition::parse(&campaign.attribute_filter)?)
    };
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH chunk AS ({chunk}), candidates AS ({CANDIDATES})
         SELECT count(*) FILTER (WHERE skip IS NULL), count(*) FILTER (WHERE skip IS NOT NULL) FROM candidates",
        chunk = source.chunk(),
    )))
    .bind(tenant)
    .bind(campaign.id)
    .bind(source.lists(&ids(&campaign.list_ids), &segments))
    .bind(0_i64)
    .bind(i64::MAX)
    .bind(cap)
    .bind(attribute_conditions(cond.as_ref()))
    .bind(None::<Uuid>)
    .bind(&tree)
    .bind(None::<i64>)
    .bind(100_i32)
    .bind(1_i32)
    .bind(None::<i16>)
    .bind(campaign.resend_of)
    .bind(campaign.resend_machine_opens)
    .fetch_one(&mut **tx)
    .await?)
}

fn ids<T: Copy + Into<Uuid>>(ids: &[T]) -> Vec<Uuid> {
    ids.iter().map(|&id| id.into()).collect()
}

/// Runs the fan-out to the end (or until the campaign leaves sending/paused). Returns the
/// number of queued recipients written by this call.
#[tracing::instrument(skip_all, fields(%tenant, %campaign))]
pub async fn run(db: &Db, tenant: TenantId, campaign: CampaignId) -> Result<i64> {
    let mut written = 0;
    loop {
        let mut tx = db.tenant_tx(tenant).await?;
        let Some(mut row) = lock_for_chunk(&mut tx, tenant, campaign).await? else {
            return Ok(written);
        };
        if row.fanout_done || !matches!(row.status, CampaignStatus::Sending | CampaignStatus::Paused) {
            return Ok(written);
        }
        let split = super::ab_test::split(
            &mut tx,
            tenant,
            campaign,
            row.ab_test.as_ref().map(|t| &t.0),
            row.ab_seed,
            row.ab_winner,
        )
        .await?;
        let attrs = attribute_conditions_of(&row.attribute_filter)?;
        let source = Source::of(row.resend_of, &row.segment_ids, row.exclude_segment_id);
        if source == Source::Tree && row.audience.is_none() {
            let fixed = fix_tree(&mut tx, tenant, campaign, &row).await?;
            row.audience = Some(fixed);
        }
        let Some(next) = next_start(&mut tx, tenant, source, &row).await? else {
            mark_done(&mut tx, tenant, campaign).await?;
            tx.commit().await?;
            tracing::info!(%campaign, recipients = written, "fan-out finished");
            // The delivery loops' claims plan against `sends`; after a million new rows its
            // statistics (or the lack of any) made the claim crawl (150 msg/s for minutes).
            db.analyze_if_stale(BulkTable::Sends).await;
            return Ok(written);
        };
        let lower = next - 1;
        let upper = lower + CHUNK_IDS;
        let chunk = Chunk { tenant, campaign, row: &row, source, attrs: &attrs, split: &split, lower, upper };
        let queued = write_chunk(&mut tx, &chunk).await?;
        let over = advance(&mut tx, tenant, campaign, upper, queued).await?;
        tx.commit().await?;
        written += queued;
        if over {
            // The fan-out goes on while paused (a resume needs every recipient counted).
            continue;
        }
    }
}

/// The campaign as one chunk reads it, locked until the chunk commits; `None` when it is gone.
async fn lock_for_chunk(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<Option<FanoutRow>> {
    // The row lock serialises duplicate fan-out jobs (NO KEY UPDATE: rows that only reference
    // the campaign, such as its tracked links, need not wait for a chunk): the second waits, then sees the
    // cursor the first one committed.
    let row: Option<FanoutRow> = sqlx::query_as(
        "SELECT c.status, c.fanout_done, c.fanout_cursor, c.list_ids, c.attribute_filter, t.frequency_cap_hours,
                    CASE WHEN c.feed = 'api' THEN c.parent_id END AS feed_of, c.segment_ids, c.exclude_segment_id,
                    c.audience, c.ab_test, c.ab_seed, c.ab_winner, c.resend_of, c.resend_machine_opens
             FROM campaigns c JOIN tenants t ON t.id = c.tenant_id
             WHERE c.tenant_id = $1 AND c.id = $2 FOR NO KEY UPDATE OF c",
    )
    .bind(tenant)
    .bind(campaign)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row)
}

/// The campaign's attribute filter as the chunk's `$7`.
fn attribute_conditions_of(filter: &str) -> Result<Vec<Value>> {
    let cond = if filter.trim().is_empty() { None } else { Some(AttributeCondition::parse(filter)?) };
    Ok(attribute_conditions(cond.as_ref()))
}

/// Builds the campaign's audience tree and stores it.
async fn fix_tree(tx: &mut Tx, tenant: TenantId, campaign: CampaignId, row: &FanoutRow) -> Result<Value> {
    // Fixed at the first chunk, in its transaction: every chunk reads the same tree.
    let fixed = super::targeting::tree(tx, tenant, &row.list_ids, &row.segment_ids, row.exclude_segment_id).await?;
    sqlx::query("UPDATE campaigns SET audience = $3 WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(campaign)
        .bind(&fixed)
        .execute(&mut **tx)
        .await?;
    Ok(fixed)
}

/// Where the next chunk starts: the first reader (or, for a resend, send) after the cursor, or
/// `None` when there is none.
async fn next_start(tx: &mut Tx, tenant: TenantId, source: Source, row: &FanoutRow) -> Result<Option<i64>> {
    let cursor = row.fanout_cursor;
    let next: Option<i64> = if let Source::Resend(original) = source {
        // The original's next sent row: the cursor is a send id.
        sqlx::query_scalar(super::resend::RESEND_NEXT)
            .bind(tenant)
            .bind(original)
            .bind(cursor)
            .fetch_one(&mut **tx)
            .await?
    } else if source == Source::Tree {
        // The workspace's next reader: the tree decides within the chunk.
        sqlx::query_scalar("SELECT min(id) FROM readers WHERE tenant_id = $1 AND id > $2")
            .bind(tenant)
            .bind(cursor)
            .fetch_one(&mut **tx)
            .await?
    } else {
        // One index seek per target list: the lowest confirmed subscriber after the cursor.
        sqlx::query_scalar(
            "SELECT min(x.reader_id) FROM unnest($2::uuid[]) AS l(id)
                 CROSS JOIN LATERAL (
                     SELECT s.reader_id FROM subscriptions s
                     WHERE s.tenant_id = $1 AND s.list_id = l.id AND s.status = 'confirmed' AND s.reader_id > $3
                     ORDER BY s.reader_id LIMIT 1
                 ) x",
        )
        .bind(tenant)
        .bind(&row.list_ids)
        .bind(cursor)
        .fetch_one(&mut **tx)
        .await?
    };
    Ok(next)
}

/// Marks the fan-out finished.
async fn mark_done(tx: &mut Tx, tenant: TenantId, campaign: CampaignId) -> Result<()> {
    sqlx::query("UPDATE campaigns SET fanout_done = true, heartbeat_at = now() WHERE tenant_id = $1 AND id = $2")
        .bind(tenant)
        .bind(campaign)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// One chunk: the reader (or send) ids in (`lower`, `upper`] and what its insert reads besides.
struct Chunk<'a> {
    tenant: TenantId,
    campaign: CampaignId,
    row: &'a FanoutRow,
    source: Source,
    /// The attribute conditions (`$7`).
    attrs: &'a Vec<Value>,
    split: &'a Split,
    lower: i64,
    upper: i64,
}

/// Writes the chunk's send-log rows; returns how many are queued or held.
async fn write_chunk(tx: &mut Tx, chunk: &Chunk<'_>) -> Result<i64> {
    let Chunk { tenant, campaign, row, source, attrs, split, lower, upper } = *chunk;
    let queued: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "WITH chunk AS ({chunk}), candidates AS ({CANDIDATES}), split AS ({SPLIT}), inserted AS (
                 INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, reason, feed, variant, ab_rest)
                 SELECT $1, $2, id, email,
                        CASE WHEN skip IS NOT NULL THEN 'skipped' WHEN rest AND $13::smallint IS NULL THEN 'held'
                             ELSE 'queued' END,
                        skip, CASE WHEN skip IS NULL THEN feed END,
                        CASE WHEN skip IS NOT NULL THEN NULL WHEN rest THEN $13::smallint ELSE variant END,
                        skip IS NULL AND rest
                 FROM split
                 ON CONFLICT (reader_id, campaign_id, entry) DO NOTHING
                 RETURNING status, reader_id
             ), consumed AS (
                 DELETE FROM campaign_feed f USING inserted i
                 WHERE $8::uuid IS NOT NULL AND f.campaign_id = $8 AND f.tenant_id = $1 AND f.reader_id = i.reader_id
                   AND i.status = 'queued'
                 RETURNING 1
             )
             SELECT count(*) FILTER (WHERE status IN ('queued', 'held')) FROM inserted",
        chunk = source.chunk(),
    )))
    .bind(tenant)
    .bind(campaign)
    .bind(source.lists(&row.list_ids, &row.segment_ids))
    .bind(lower)
    .bind(upper)
    .bind(row.frequency_cap_hours)
    .bind(attrs)
    .bind(row.feed_of)
    .bind(&row.audience)
    .bind(split.seed)
    .bind(split.percent)
    .bind(split.versions)
    .bind(split.winner)
    .bind(row.resend_of)
    .bind(row.resend_machine_opens)
    .fetch_one(&mut **tx)
    .await?;
    Ok(queued)
}

/// Moves the cursor past the chunk and counts its recipients; true when that paused the send.
async fn advance(tx: &mut Tx, tenant: TenantId, campaign: CampaignId, upper: i64, queued: i64) -> Result<bool> {
    sqlx::query(
        "UPDATE campaigns SET fanout_cursor = $3, recipients = recipients + $4, heartbeat_at = now()
             WHERE tenant_id = $1 AND id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(upper)
    .bind(queued)
    .execute(&mut **tx)
    .await?;
    // Paused in this transaction: delivery never sees a row of a send that went over.
    let over = queued > 0 && super::warmup::pause_if_over(tx, tenant, campaign).await?;
    Ok(over)
}
