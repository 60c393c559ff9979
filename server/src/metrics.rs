//! `/metrics` in the OpenMetrics text format, through the Prometheus project's client crate:
//! request counts and latency per route, and the tracking write buffer's counters, read from
//! the engine's atomics on each scrape.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use herald_engine::tracking::HitCounters;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

const BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

type LatencyFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
}

impl Metrics {
    /// The registry, with the tracking buffer's counters (`tracking`) read at each scrape.
    pub fn new(tracking: Arc<HitCounters>) -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("herald_http_requests", "HTTP requests by method, route and status.", requests.clone());
        let latency: LatencyFamily = Family::new_with_constructor(|| Histogram::new(BUCKETS));
        registry.register("herald_http_request_duration_seconds", "HTTP request latency.", latency.clone());
        registry.register_collector(Box::new(TrackingCounters(tracking)));
        Self { registry, requests, latency }
    }

    pub fn record(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let (method, route) = (method.to_string(), route.to_string());
        self.latency.get_or_create(&RouteLabels { method: method.clone(), route: route.clone() }).observe(seconds);
        self.requests.get_or_create(&RequestLabels { method, route, status }).inc();
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The tracking write buffer's counters (`herald_tracking_hits_*_total`).
#[derive(Debug)]
struct TrackingCounters(Arc<HitCounters>);

impl Collector for TrackingCounters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let c = &self.0;
        for (name, help, value) in [
            ("accepted", "Opens and clicks handed to the write buffer.", &c.accepted),
            ("dropped", "Opens and clicks not recorded because the buffer was full.", &c.dropped),
            ("stored", "Opens and clicks written to the database.", &c.stored),
            ("discarded", "Buffered hits the database refused (campaign or link gone).", &c.discarded),
            ("lost", "Hits of batches that could not be written after retries.", &c.lost),
        ] {
            let counter = ConstCounter::new(value.load(Ordering::Relaxed));
            let name = format!("herald_tracking_hits_{name}");
            counter.encode(encoder.encode_descriptor(&name, help, None, counter.metric_type())?)?;
        }
        Ok(())
    }
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
