//! Request counts and latency in Prometheus text format, kept in process (no exporter crate:
//! two metric families do not justify one).

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<(String, String), Histogram>>,
}

impl Metrics {
    pub fn record(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *requests.entry((method.to_string(), route.to_string(), status)).or_default() += 1;
        drop(requests);
        let mut latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        let h = latency.entry((method.to_string(), route.to_string())).or_default();
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += seconds;
        h.count += 1;
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP herald_http_requests_total HTTP requests by method, route and status.\n");
        out.push_str("# TYPE herald_http_requests_total counter\n");
        for ((m, r, s), n) in self.requests.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ =
                writeln!(out, "herald_http_requests_total{{method=\"{m}\",route=\"{}\",status=\"{s}\"}} {n}", esc(r));
        }
        out.push_str("# HELP herald_http_request_duration_seconds HTTP request latency.\n");
        out.push_str("# TYPE herald_http_request_duration_seconds histogram\n");
        for ((m, r), h) in self.latency.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let labels = format!("method=\"{m}\",route=\"{}\"", esc(r));
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ =
                    writeln!(out, "herald_http_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {}", h.counts[i]);
            }
            let _ = writeln!(out, "herald_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "herald_http_request_duration_seconds_sum{{{labels}}} {}", h.sum);
            let _ = writeln!(out, "herald_http_request_duration_seconds_count{{{labels}}} {}", h.count);
        }
        out
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Records every request under its route pattern (never the raw path, which would let anyone
/// create unbounded label values).
pub async fn track(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let method = req.method().to_string();
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| {
            if req.uri().path().starts_with("/pkg/") { "/pkg/*".into() } else { "unmatched".into() }
        });
    let started = Instant::now();
    let res = next.run(req).await;
    metrics.record(&method, &route, res.status().as_u16(), started.elapsed().as_secs_f64());
    res
}
