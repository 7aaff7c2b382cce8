//! What keeps the endpoint up under abuse (JANUS-2026-004, janus-node-side.md
//! §8.6, without its mistakes): a token bucket per source address for
//! announcements (429 with `Retry-After`), and a cap on pending records
//! (503 for tokenless announcements; a token still admits).
//!
//! Invariants: one source's flood never spends another source's bucket; the
//! limiter's memory is bounded (full buckets are forgotten); the pending
//! count is an estimate kept fresh by a periodic scan of the state, so
//! several replicas sharing a directory converge on the same cap.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct LimitsConfig {
    /// Announcements a source may make at once.
    pub burst: u32,
    /// Then one per this interval.
    pub refill_every: Duration,
    /// Pending records beyond which tokenless announcements get 503.
    pub max_pending: usize,
    /// Pending records older than this are forgotten.
    pub pending_max_age: Duration,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            burst: 10,
            refill_every: Duration::from_secs(6),
            max_pending: 5000,
            pending_max_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Tracks sources past this many and forgets the full buckets.
const TRACKED_SOURCES: usize = 65_536;

pub struct RateLimiter {
    config: LimitsConfig,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl RateLimiter {
    pub fn new(config: LimitsConfig) -> Self {
        RateLimiter { config, buckets: Mutex::new(HashMap::new()) }
    }

    fn per_second(&self) -> f64 {
        1.0 / self.config.refill_every.as_secs_f64().max(1e-3)
    }

    /// Takes one announcement from `source`'s bucket; `Err(retry_after)` when empty.
    pub fn check(&self, source: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let burst = f64::from(self.config.burst.max(1));
        let rate = self.per_second();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= TRACKED_SOURCES {
            buckets.retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst);
        }
        let bucket = buckets.entry(source).or_insert(Bucket { tokens: burst, at: now });
        bucket.tokens = (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / rate;
            Err(Duration::from_secs_f64(wait.ceil().max(1.0)))
        }
    }
}

/// The pending count: set by scans, bumped by each pending record written.
#[derive(Default)]
pub struct PendingCount(AtomicUsize);

impl PendingCount {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
    pub fn set(&self, n: usize) {
        self.0.store(n, Ordering::Relaxed)
    }
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_steady_rate_per_source() {
        let limiter = RateLimiter::new(LimitsConfig {
            burst: 3,
            refill_every: Duration::from_secs(60),
            ..Default::default()
        });
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
        }
        let retry = limiter.check(a).unwrap_err();
        assert!(retry >= Duration::from_secs(1) && retry <= Duration::from_secs(60), "{retry:?}");
        assert!(limiter.check(b).is_ok(), "another source is not starved");
    }
}
