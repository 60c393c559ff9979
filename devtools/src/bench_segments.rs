//! `herald bench segments`: segment counts and the segment fan-out at a large audience
//! (each fast condition alone and two by two under 300 ms at 1M readers; the fan-out
//! of a segment at least 0.8× the list fan-out's rows/s, measured in the same run).
//!
//! One workspace with `--readers` readers: all on one list, half on another, a tenth tagged,
//! typed fields (a choice, a number), sign-ups spread over three years, a hundred address
//! domains, and an engagement summary for a third of them (opens in the last 90 days, clicks
//! for a tenth). Each count is the median of seven runs as the runtime role, after one to warm
//! the cache; then a campaign to the list and one to a segment matching the same readers are
//! fanned out, one after the other.

use std::time::{Duration, Instant};

use herald_engine::audience::segments::{self, Definition};
use herald_engine::campaigns::lifecycle;
use herald_engine::campaigns::{fanout, store};
use herald_engine::{Db, Role, TenantId};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::BenchEnv;

#[derive(clap::Args, Debug, Clone)]
pub struct SegmentsBench {
    /// Readers in the workspace.
    #[arg(long, default_value_t = 1_000_000)]
    pub readers: i64,
    /// Skip the two fan-outs (counts only).
    #[arg(long)]
    pub skip_fanout: bool,
    /// Keep the benchmark workspace instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

pub async fn run(args: SegmentsBench, env: &BenchEnv) -> anyhow::Result<()> {
    crate::in_bench_workspace(env, "Segments Bench", None, args.keep, |owner, tenant| async move {
        measure(&args, env, &owner, tenant).await
    })
    .await
}

async fn seed(readers: i64, owner: &sqlx::PgPool, tenant: TenantId) -> anyhow::Result<(Uuid, Uuid, Uuid)> {
    let (all, half, vip) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    sqlx::query(
        "INSERT INTO lists (id, tenant_id, name, slug) VALUES ($1, $3, 'Everyone', 'everyone'), ($2, $3, 'Half', 'half')",
    )
    .bind(all)
    .bind(half)
    .bind(tenant)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO fields (tenant_id, key, label, kind, choices) VALUES
             ($1, 'plan', 'Plan', 'choice', '[\"Free\", \"Pro\", \"Team\"]'), ($1, 'age', 'Age', 'number', '[]')",
    )
    .bind(tenant)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO readers (tenant_id, email, attributes, created_at)
         SELECT $1, 'r' || g || '@d' || (g % 100) || '.test',
                jsonb_build_object('plan', CASE WHEN g % 5 = 0 THEN 'Pro' WHEN g % 7 = 0 THEN 'Team' ELSE 'Free' END,
                                   'age', 18 + g % 70),
                now() - make_interval(days => (g % 1095)::int)
         FROM generate_series(1, $2) g",
    )
    .bind(tenant)
    .bind(readers)
    .execute(owner)
    .await?;
    sqlx::query(
        "INSERT INTO subscriptions (tenant_id, list_id, reader_id, status, confirmed_at)
         SELECT $1, $2, id, 'confirmed', now() FROM readers WHERE tenant_id = $1
         UNION ALL
         SELECT $1, $3, id, 'confirmed', now() FROM readers WHERE tenant_id = $1 AND id % 2 = 0",
    )
    .bind(tenant)
    .bind(all)
    .bind(half)
    .execute(owner)
    .await?;
    sqlx::query("INSERT INTO tags (tenant_id, id, name) VALUES ($1, $2, 'vip')")
        .bind(tenant)
        .bind(vip)
        .execute(owner)
        .await?;
    sqlx::query("INSERT INTO reader_tags (tenant_id, tag_id, reader_id) SELECT $1, $2, id FROM readers WHERE tenant_id = $1 AND id % 10 = 3")
        .bind(tenant)
        .bind(vip)
        .execute(owner)
        .await?;
    sqlx::query(
        "INSERT INTO reader_engagement (tenant_id, reader_id, last_open_at, last_click_at, opens, clicks)
         SELECT $1, id, now() - make_interval(hours => (id % 2160)::int),
                CASE WHEN id % 30 = 1 THEN now() - make_interval(hours => (id % 720)::int) END, 1 + id % 5, (id % 30 = 1)::int
         FROM readers WHERE tenant_id = $1 AND id % 3 = 1",
    )
    .bind(tenant)
    .execute(owner)
    .await?;
    for table in ["readers", "subscriptions", "reader_tags", "reader_engagement", "field_values"] {
        // Fresh visibility maps: index-only scans, as on a table autovacuum has seen.
        sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM ANALYZE {table}"))).execute(owner).await?;
    }
    Ok((all, half, vip))
}

/// The median of seven runs of `f`, after one to warm the cache, and its result.
async fn median(db: &Db, tenant: TenantId, definition: &Definition) -> anyhow::Result<(Duration, i64)> {
    let mut n = segments::count(db, tenant, definition).await?;
    let mut times = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        n = segments::count(db, tenant, definition).await?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok((times[3], n))
}

async fn measure(args: &SegmentsBench, env: &BenchEnv, owner: &sqlx::PgPool, tenant: TenantId) -> anyhow::Result<()> {
    let started = Instant::now();
    let (all, half, vip) = seed(args.readers, owner, tenant).await?;
    println!("herald bench segments: {} readers seeded in {:.1} s", args.readers, started.elapsed().as_secs_f64());
    let db = Db::connect(&env.app_database_url, 4).await?;
    let conditions: Vec<(&str, Value)> = vec![
        ("list (half)", json!({"kind": "list", "list_id": half, "state": "subscribed"})),
        ("tag (10 %)", json!({"kind": "tag", "tag_id": vip})),
        ("field = (Pro)", json!({"kind": "field", "key": "plan", "op": "eq", "value": "Pro"})),
        (
            "field range (age 30–40)",
            json!({"kind": "field", "key": "age", "op": "between", "value": "30", "value2": "40"}),
        ),
        ("signed up (last 90 days)", json!({"kind": "signed_up", "op": "within_last_days", "days": 90})),
        ("email domain (1 %)", json!({"kind": "email_domain", "domain": "d42.test"})),
        ("opened (last 30 days)", json!({"kind": "opened", "days": 30})),
        ("clicked (last 30 days)", json!({"kind": "clicked", "days": 30})),
    ];
    let tree = |rules: Vec<&Value>| -> anyhow::Result<Definition> {
        Ok(serde_json::from_value(json!({"match": "all", "rules": rules}))?)
    };
    let mut slowest = Duration::ZERO;
    println!("{:<58} {:>10} {:>10}", "count", "readers", "median");
    for (name, rule) in &conditions {
        let (t, n) = median(&db, tenant, &tree(vec![rule])?).await?;
        slowest = slowest.max(t);
        println!("{name:<58} {n:>10} {:>8.1} ms", t.as_secs_f64() * 1e3);
    }
    for (i, (a, ra)) in conditions.iter().enumerate() {
        for (b, rb) in &conditions[i + 1..] {
            let (t, n) = median(&db, tenant, &tree(vec![ra, rb])?).await?;
            slowest = slowest.max(t);
            println!("{:<58} {n:>10} {:>8.1} ms", format!("{a} and {b}"), t.as_secs_f64() * 1e3);
        }
    }
    println!("slowest median count: {:.1} ms (the bound is 300 ms)", slowest.as_secs_f64() * 1e3);
    if args.skip_fanout {
        return Ok(());
    }

    // The fan-outs: the list, then a segment matching the same readers (everyone who signed up
    // in the last ten years), each started by hand so no delivery job picks it up.
    sqlx::query(
        "UPDATE tenants SET postal_address = '1 Bench Street', default_from_email = 'news@bench.test' WHERE id = $1",
    )
    .bind(tenant)
    .execute(owner)
    .await?;
    let everyone = segments::create(
        &db,
        tenant,
        Role::Owner,
        &herald_types::SegmentInput {
            name: "Everyone".into(),
            definition: tree(vec![&json!({"kind": "signed_up", "op": "within_last_days", "days": 3650})])?,
        },
    )
    .await?;
    let mut rates = Vec::new();
    for (name, lists, segment_ids) in [("list", vec![all.into()], vec![]), ("segment", vec![], vec![everyone.id])] {
        let input = herald_types::CampaignInput {
            name: format!("Fan-out to a {name}"),
            subject: "Bench".into(),
            list_ids: lists,
            segment_ids,
            ..Default::default()
        };
        let campaign = store::create(&db, tenant, Role::Owner, &input).await?;
        sqlx::query("UPDATE campaigns SET status = 'sending', started_at = now() WHERE id = $1")
            .bind(campaign.id)
            .execute(owner)
            .await?;
        let started = Instant::now();
        let queued = fanout::run(&db, tenant, campaign.id).await?;
        let rate = queued as f64 / started.elapsed().as_secs_f64();
        lifecycle::cancel(&db, tenant, Role::Owner, campaign.id).await?;
        println!(
            "fan-out to a {name:<8} {queued:>10} rows in {:>6.1} s = {rate:>8.0} rows/s",
            started.elapsed().as_secs_f64()
        );
        rates.push(rate);
        sqlx::query("DELETE FROM sends WHERE campaign_id = $1").bind(campaign.id).execute(owner).await?;
        sqlx::query("VACUUM ANALYZE sends").execute(owner).await?;
    }
    println!("segment fan-out / list fan-out: {:.2}× (the bound is 0.8×)", rates[1] / rates[0]);
    Ok(())
}
