//! The in-process limiter for login, sign-up and the public forms (per IP and per account):
//! governor's keyed GCRA limiter, `max` attempts at once and one more every `window / max`.
//!
//! In-process is enough for these: each web process limits on its own, so N processes allow N
//! times the rate, which still stops online guessing. Send-rate buckets, which must be shared by
//! every worker, live in Postgres (see the send engine).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota};

/// Keys kept before the ones whose bucket has refilled are forgotten (bounds memory under a
/// flood of distinct keys).
const MAX_KEYS: usize = 100_000;

#[derive(Debug)]
pub struct RateLimiter {
    limiter: DefaultKeyedRateLimiter<String>,
}

impl RateLimiter {
    /// `max` attempts per `window` for each key, all of them usable at once.
    pub fn new(max: u32, window: Duration) -> Self {
        let burst = NonZeroU32::new(max.max(1)).unwrap_or(NonZeroU32::MIN);
        let period = (window / burst.get()).max(Duration::from_nanos(1));
        let quota = Quota::with_period(period).unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN)).allow_burst(burst);
        Self { limiter: DefaultKeyedRateLimiter::keyed(quota) }
    }

    /// Records one attempt for `key`; false when the key has used up its allowance.
    pub fn check(&self, key: &str) -> bool {
        self.retry_after(key).is_none()
    }

    /// Records one attempt for `key`; `Some(wait)` when the key has used up its allowance, with
    /// how long until its next attempt is allowed (for `Retry-After`).
    pub fn retry_after(&self, key: &str) -> Option<Duration> {
        if self.limiter.len() > MAX_KEYS {
            self.limiter.retain_recent();
        }
        let clock = governor::clock::DefaultClock::default();
        self.limiter
            .check_key(&key.to_string())
            .err()
            .map(|not_until| not_until.wait_time_from(governor::clock::Clock::now(&clock)))
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

    #[test]
    fn a_refusal_says_how_long_to_wait() {
        let l = RateLimiter::new(30, Duration::from_secs(60));
        assert!((0..30).all(|_| l.retry_after("m").is_none()));
        let wait = l.retry_after("m").expect("the 31st is refused");
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(2), "{wait:?}");
    }

    #[test]
    fn a_key_gets_attempts_back_as_its_window_passes() {
        let l = RateLimiter::new(2, Duration::from_millis(200));
        assert!(l.check("a") && l.check("a") && !l.check("a"));
        std::thread::sleep(Duration::from_millis(120));
        assert!(l.check("a"), "one attempt back after window / max");
        assert!(!l.check("a"));
    }
}
