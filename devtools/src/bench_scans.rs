//! `herald bench scans`: what a sending campaign's periodic reads cost once the send log is
//! large, each measured against the statement it replaced, on the same data.
//!
//! One campaign with `--rows` send-log rows (70 % sent, 25 % queued but deferred an hour, 5 %
//! failed, a fifth of those hard bounces) and a recurring campaign with `--editions` finished
//! editions of `--rows / 10` rows each. Then, each the median of seven runs, as the runtime role:
//! an idle loop's "anything due?" (the claim's walk before, the due-index probe now); the bounce
//! health check (a count over the log before, the campaign's counters now); live progress (two
//! passes before, one now, and a count shared by every view); and the editions list (every edition's log joined before, frozen
//! figures now).

use std::future::Future;
use std::time::{Duration, Instant};

use herald_engine::campaigns::{delivery, progress, recurring};
use herald_engine::{CampaignId, Db, TenantId};
use uuid::Uuid;

use crate::BenchEnv;

#[derive(clap::Args, Debug, Clone)]
pub struct ScansBench {
    /// Send-log rows of the sending campaign.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: i64,
    /// Finished editions of the recurring campaign (each `--rows / 10` rows).
    #[arg(long, default_value_t = 30)]
    pub editions: i64,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

pub async fn run(args: ScansBench, env: &BenchEnv) -> anyhow::Result<()> {
    crate::in_bench_workspace(env, "Scans Bench", None, args.keep, |owner, tenant| async move {
        measure(&args, env, &owner, tenant).await
    })
    .await
}

/// The median of seven runs of `f`, after one to warm the cache.
async fn median<F, Fut>(mut f: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    f().await?;
    let mut times = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        f().await?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times[3])
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

async fn measure(args: &ScansBench, env: &BenchEnv, owner: &sqlx::PgPool, tenant: TenantId) -> anyhow::Result<()> {
    let started = Instant::now();
    let campaign = Uuid::new_v4();
    let parent = Uuid::new_v4();
    sqlx::query("INSERT INTO campaigns (id, tenant_id, name, status) VALUES ($1, $3, 'Big send', 'sending'), ($2, $3, 'Daily', 'sending')")
        .bind(campaign)
        .bind(parent)
        .bind(tenant)
        .execute(owner)
        .await?;
    // Readers once; every campaign's rows point at them.
    sqlx::query(
        "INSERT INTO readers (tenant_id, email) SELECT $1, 'r' || g || '@scans.test' FROM generate_series(1, $2) g",
    )
    .bind(tenant)
    .bind(args.rows)
    .execute(owner)
    .await?;
    let first_reader: i64 =
        sqlx::query_scalar("SELECT min(id) FROM readers WHERE tenant_id = $1").bind(tenant).fetch_one(owner).await?;
    sqlx::query(
        "INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, hard_bounce, next_attempt_at, sent_at)
         SELECT $1, $2, $3 + g - 1, 'r' || g || '@scans.test',
                CASE WHEN g % 20 < 14 THEN 'sent' WHEN g % 20 < 19 THEN 'queued' ELSE 'failed' END,
                g % 100 = 19, now() + CASE WHEN g % 20 BETWEEN 14 AND 18 THEN interval '1 hour' ELSE interval '0' END,
                CASE WHEN g % 20 < 14 THEN now() - interval '1 minute' END
         FROM generate_series(1, $4) g",
    )
    .bind(tenant)
    .bind(campaign)
    .bind(first_reader)
    .bind(args.rows)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO campaign_stats (campaign_id, tenant_id, sent, failed, hard_bounces)
         SELECT $2, $1, count(*) FILTER (WHERE status = 'sent'), count(*) FILTER (WHERE status = 'failed'),
                count(*) FILTER (WHERE hard_bounce)
         FROM sends WHERE tenant_id = $1 AND campaign_id = $2",
    )
    .bind(tenant)
    .bind(campaign)
    .execute(owner)
    .await?;
    let per_edition = (args.rows / 10).max(1);
    for e in 0..args.editions {
        let edition = Uuid::new_v4();
        sqlx::query(
            "INSERT INTO campaigns (id, tenant_id, name, status, parent_id, edition_slot)
             VALUES ($1, $2, 'Daily edition', 'sent', $3, now() - make_interval(days => $4))",
        )
        .bind(edition)
        .bind(tenant)
        .bind(parent)
        .bind(e as i32)
        .execute(owner)
        .await?;
        sqlx::query(
            "INSERT INTO sends (tenant_id, campaign_id, reader_id, email, status, sent_at)
             SELECT $1, $2, $3 + g - 1, 'r' || g || '@scans.test', 'sent', now() FROM generate_series(1, $4) g",
        )
        .bind(tenant)
        .bind(edition)
        .bind(first_reader)
        .bind(per_edition)
        .execute(owner)
        .await?;
        // What the end of each edition's send wrote.
        sqlx::query(
            "INSERT INTO campaign_stats (campaign_id, tenant_id, sent, final_counts)
             VALUES ($2, $1, $3, jsonb_build_object('by_status', jsonb_build_object('sent', $3),
                                                    'hard_bounces', 0, 'ambiguous', 0, 'skipped_no_data', 0))",
        )
        .bind(tenant)
        .bind(edition)
        .bind(per_edition)
        .execute(owner)
        .await?;
    }
    sqlx::query("ANALYZE sends").execute(owner).await?;
    sqlx::query("ANALYZE campaigns").execute(owner).await?;
    println!(
        "set-up: {} send-log rows in the sending campaign, {} editions of {per_edition}, {:.0} s",
        args.rows,
        args.editions,
        started.elapsed().as_secs_f64()
    );

    let db = Db::connect(&env.app_database_url, 2).await?;
    let id = CampaignId::from(campaign);
    let in_tenant = |sql: &'static str, campaign: Uuid| {
        let db = db.clone();
        async move {
            let mut tx = db.tenant_tx(tenant).await?;
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(campaign).execute(&mut *tx).await?;
            tx.commit().await?;
            anyhow::Ok(())
        }
    };

    // An idle loop, every 100–300 ms: before, the claim walked the queue in id order.
    let walk = median(|| {
        in_tenant(
            "SELECT s.id FROM sends s WHERE s.tenant_id = $1 AND s.campaign_id = $2 AND s.status = 'queued'
               AND s.next_attempt_at <= now() AND s.id > 0 ORDER BY s.id LIMIT 20",
            campaign,
        )
    })
    .await?;
    let probe = median(|| {
        let db = db.clone();
        async move {
            let mut tx = db.tenant_tx(tenant).await?;
            let _: bool = sqlx::query_scalar(delivery::DUE_PROBE).bind(campaign).fetch_one(&mut *tx).await?;
            tx.commit().await?;
            anyhow::Ok(())
        }
    })
    .await?;
    println!("idle loop, anything due?  claim's walk {}  →  due-index probe {}", ms(walk), ms(probe));

    // Every loop every 5 s once an address bounced.
    let scan = median(|| {
        in_tenant(
            "SELECT count(*) FILTER (WHERE status IN ('sent', 'failed')), count(*) FILTER (WHERE hard_bounce)
             FROM sends WHERE tenant_id = $1 AND campaign_id = $2",
            campaign,
        )
    })
    .await?;
    let counters = median(|| {
        in_tenant(
            "SELECT sent + failed, hard_bounces FROM campaign_stats WHERE tenant_id = $1 AND campaign_id = $2",
            campaign,
        )
    })
    .await?;
    println!("bounce health check        send-log count {}  →  counters {}", ms(scan), ms(counters));

    // Live progress, per view of the campaign page and per campaign on the list.
    let two_passes = median(|| {
        let db = db.clone();
        async move {
            let mut tx = db.tenant_tx(tenant).await?;
            for sql in [
                "SELECT status, count(*) FROM sends WHERE tenant_id = $1 AND campaign_id = $2 GROUP BY status",
                "SELECT count(*) FILTER (WHERE hard_bounce), coalesce(sum(ambiguous), 0)::bigint,
                        count(*) FILTER (WHERE status = 'sent' AND sent_at > now() - interval '10 seconds')
                 FROM sends WHERE tenant_id = $1 AND campaign_id = $2",
            ] {
                sqlx::query(sql).bind(tenant).bind(campaign).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            anyhow::Ok(())
        }
    })
    .await?;
    let one_pass = median(|| {
        let db = db.clone();
        async move {
            progress::progress(&db, tenant, id).await?;
            anyhow::Ok(())
        }
    })
    .await?;
    println!("live progress              two passes {}  →  progress() {}", ms(two_passes), ms(one_pass));
    // What a page view or an API read now costs: the count shared by every viewer (the first
    // view counts; the median is of views within its 2 s).
    let shared = median(|| {
        let db = db.clone();
        async move {
            progress::view(&db, tenant, id).await?;
            anyhow::Ok(())
        }
    })
    .await?;
    println!("a view of the live send     progress() per view {}  →  view() {}", ms(one_pass), ms(shared));

    // The recurring campaign's page.
    let joined = median(|| {
        in_tenant(
            "SELECT c.id, count(*) FILTER (WHERE s.status = 'sent'),
                    count(*) FILTER (WHERE s.status = 'skipped' AND s.reason = 'no data for this edition'),
                    count(*) FILTER (WHERE s.status = 'failed')
             FROM campaigns c LEFT JOIN sends s ON s.campaign_id = c.id AND s.tenant_id = c.tenant_id
             WHERE c.tenant_id = $1 AND c.parent_id = $2
             GROUP BY c.id ORDER BY c.edition_slot DESC LIMIT 100",
            parent,
        )
    })
    .await?;
    let frozen = median(|| {
        let db = db.clone();
        async move {
            recurring::editions(&db, tenant, CampaignId::from(parent)).await?;
            anyhow::Ok(())
        }
    })
    .await?;
    println!("editions list              every edition's log {}  →  frozen figures {}", ms(joined), ms(frozen));
    Ok(())
}
