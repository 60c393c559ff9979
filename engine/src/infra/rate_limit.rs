//! A small in-process sliding-window limiter for login and sign-up (per IP and per account).
//!
//! In-process is enough for these: each web process limits on its own, so N processes allow N
//! times the rate, which still stops online guessing. Send-rate buckets, which must be shared by
//! every worker, live in Postgres (see the send engine).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct RateLimiter {
    max: usize,
    window: Duration,
    hits: Mutex<HashMap<String, Vec<Instant>>>,
}

impl RateLimiter {
    pub fn new(max: usize, window: Duration) -> Self {
        Self { max, window, hits: Mutex::new(HashMap::new()) }
    }

    /// Records one attempt for `key`; false when the key has used up its window.
    pub fn check(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut hits = self.hits.lock().unwrap_or_else(|e| e.into_inner());
        if hits.len() > 100_000 {
            // Bound memory under a flood of distinct keys.
            hits.retain(|_, v| v.last().is_some_and(|t| now.duration_since(*t) < self.window));
        }
        let entry = hits.entry(key.to_string()).or_default();
        entry.retain(|t| now.duration_since(*t) < self.window);
        if entry.len() >= self.max {
            return false;
        }
        entry.push(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_key() {
        let l = RateLimiter::new(2, Duration::from_secs(60));
        assert!(l.check("a"));
        assert!(l.check("a"));
        assert!(!l.check("a"));
        assert!(l.check("b"));
    }
}
