//! The benchmarks' load generator: one HTTP/1.1 keep-alive connection per task (reqwest, with
//! redirects off so a click's 302 is the answer measured), sending requests back to back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// One connection sending requests back to back until `running` turns false; `request` builds
/// the `i`-th request (from `first`) on the connection's client. Returns the latency of each
/// answer whose status is in `ok_statuses` (µs) and the number of other outcomes.
pub async fn client(
    request: impl Fn(&reqwest::Client, usize) -> reqwest::RequestBuilder,
    first: usize,
    ok_statuses: &[u16],
    running: Arc<AtomicBool>,
) -> (Vec<u32>, u64) {
    let mut latencies = Vec::with_capacity(100_000);
    let mut errors = 0;
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(1)
        .tcp_nodelay(true)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "the load client could not be built");
            return (latencies, 1);
        }
    };
    let mut i = first;
    while running.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let answer = request(&client, i).send().await;
        i += 1;
        let ok = match answer {
            // Read the body, so the connection is free for the next request.
            Ok(res) => ok_statuses.contains(&res.status().as_u16()) && res.bytes().await.is_ok(),
            Err(_) => false,
        };
        if ok {
            latencies.push(sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        } else {
            errors += 1;
        }
    }
    (latencies, errors)
}
