//! Benchmark, not a timed test: imports 1,000,000 generated rows and prints rows/s and the
//! process's peak memory. Run with
//!   cargo test -p herald-server --test api bench_import -- --ignored --nocapture
//! (docs/benchmarks.md records the figures and the machine).

use crate::helpers::*;
use crate::imports::{upload, wait_done};
use herald_app::pages::audience::import::{GetImport, StartImport};
use herald_types::{Existing, ImportId, ImportMode, ImportStatus};
use std::time::Instant;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.to_string()))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

#[tokio::test]
#[ignore = "benchmark: run explicitly"]
async fn bench_import_one_million_rows() {
    let rows: usize = std::env::var("HERALD_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let app = spawn_app().await;
    let (owner, _) = app.owner_with_workspace("bench@example.com", "Bench").await;
    let list = crate::audience::create_list(&owner, "All", "all", "single", "private").await;
    let mut csv = String::with_capacity(rows * 60);
    csv.push_str("email,name,city,plan\n");
    let cities = ["Lyon", "Paris", "Nantes", "Lille", "Nice"];
    for i in 0..rows {
        csv.push_str(&format!(
            "reader{i}@example.com,Reader {i},{},{}\n",
            cities[i % 5],
            if i % 3 == 0 { "pro" } else { "free" }
        ));
    }
    let size = csv.len();
    let t = Instant::now();
    let id = upload(&owner, "million.csv", csv.into_bytes()).await;
    let upload_s = t.elapsed().as_secs_f64();
    let import: ImportId = id.to_string().parse().expect("import id");
    let start = StartImport {
        id: import,
        mapping: vec!["email".into(), "name".into(), "attributes.city".into(), "attributes.plan".into()],
        lists: list.to_string(),
        no_list: None,
        mode: ImportMode::Confirmed,
        existing: Existing::Update,
    };
    let t = Instant::now();
    assert!(owner.run(start).await.ok());
    wait_done(&owner, &id).await;
    let import_s = t.elapsed().as_secs_f64();
    let d = owner.run(GetImport { id: import }).await.value();
    assert_eq!(d.status, ImportStatus::Done, "{d:?}");
    assert_eq!(d.created, rows as i64);
    eprintln!(
        "BENCH import: {rows} rows ({:.1} MB) — upload {upload_s:.1}s, import {import_s:.1}s = {:.0} rows/s (engine's own figure {:.0} rows/s); peak RSS of the test process (app + 1M-row CSV in memory) {:.0} MiB",
        size as f64 / 1e6,
        rows as f64 / import_s,
        d.rows_per_second,
        peak_rss_mib()
    );
}
