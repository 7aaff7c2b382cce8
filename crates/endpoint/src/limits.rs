//! What keeps the endpoint up under abuse (a flood of announcements from one
//! address, or of tokenless ones filling the disk): a token bucket per source address for
//! announcements (429 with `Retry-After`), and a cap on pending records
//! (503 for tokenless announcements; a token still admits).
//!
//! Invariants: one source's flood never spends another source's bucket (an
//! IPv6 source is its /64); the limiter costs O(1) per request and its
//! memory is bounded whatever the number of sources; the pending
//! count is an estimate kept fresh by a periodic scan of the state, so
//! several replicas sharing a directory converge on the same cap.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;

use janus_listen::prefix::source_key;

/// The limits `serve` enforces.
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

/// How many sources each of the limiter's two generations holds.
const GENERATION: usize = 32_768;

/// Token buckets in two generations: a source is looked up in the current
/// one, then the previous one (and moved up); when the current one is
/// full, the previous is dropped whole and the current becomes it. So each
/// request costs O(1) and memory holds at most 2 x [`GENERATION`] sources,
/// however many send. A source forgotten that way comes back with a full
/// bucket, which only a flood of 32,768 other sources can make happen.
#[derive(Default)]
struct Generations {
    current: HashMap<IpAddr, Bucket>,
    previous: HashMap<IpAddr, Bucket>,
}

/// Token buckets per source, in two bounded generations.
pub struct RateLimiter {
    config: LimitsConfig,
    buckets: Mutex<Generations>,
}

impl RateLimiter {
    /// A limiter with nothing tracked yet.
    pub fn new(config: LimitsConfig) -> Self {
        RateLimiter { config, buckets: Mutex::new(Generations::default()) }
    }

    fn per_second(&self) -> f64 {
        1.0 / self.config.refill_every.as_secs_f64().max(1e-3)
    }

    /// Takes one announcement from `source`'s bucket; `Err(retry_after)` when empty.
    pub fn check(&self, source: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let key = source_key(source);
        let burst = f64::from(self.config.burst.max(1));
        let rate = self.per_second();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !buckets.current.contains_key(&key) {
            let earlier = buckets.previous.remove(&key).unwrap_or(Bucket { tokens: burst, at: now });
            if buckets.current.len() >= GENERATION {
                buckets.previous = std::mem::take(&mut buckets.current);
            }
            buckets.current.insert(key, earlier);
        }
        let bucket = buckets.current.get_mut(&key).expect("just inserted");
        bucket.tokens = (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            // Less a microsecond: a float's last bit must not round a whole
            // second up (59 s into a 60 s refill, 1 s is left, not 2).
            let wait = (1.0 - bucket.tokens) / rate - 1e-6;
            Err(Duration::from_secs_f64(wait.ceil().max(1.0)))
        }
    }

    /// Sources tracked now (at most twice a generation's 32,768).
    pub fn tracked(&self) -> usize {
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.current.len() + buckets.previous.len()
    }
}

/// The pending count: set by scans, bumped by each pending record written.
#[derive(Default)]
pub struct PendingCount {
    count: AtomicUsize,
    /// Every record ever added by [`PendingCount::bump`]: a scan adds those
    /// made while it ran, which it may have missed.
    bumps: AtomicUsize,
}

impl PendingCount {
    /// The last count.
    pub fn get(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
    /// Where a scan starts from: pass it to [`PendingCount::scanned`].
    pub fn before_scan(&self) -> usize {
        self.bumps.load(Ordering::Relaxed)
    }
    /// A scan that started at `before` counted `n`: the count becomes `n`
    /// plus the records added since it started (some may be in `n` too:
    /// the cap is reached a little early until the next pass, never late).
    pub fn scanned(&self, n: usize, before: usize) {
        let since = self.bumps.load(Ordering::Relaxed).wrapping_sub(before);
        self.count.store(n + since, Ordering::Relaxed)
    }
    /// One more pending record.
    pub fn bump(&self) {
        self.bumps.fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// A warning that a flood would repeat many times a second (a full
/// queue, accepts failing for want of file descriptors): said at most
/// once per interval, so the log stays readable and costs nothing.
#[derive(Debug, Default)]
pub(crate) struct LogThrottle(std::sync::Mutex<Option<tokio::time::Instant>>);

impl LogThrottle {
    /// True at most once per `every`: when the warning is to be logged now.
    pub(crate) fn due(&self, every: std::time::Duration) -> bool {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < every) {
            return false;
        }
        *last = Some(tokio::time::Instant::now());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_never_forgets_records_added_while_it_ran() {
        let pending = PendingCount::default();
        let before = pending.before_scan();
        pending.bump();
        pending.bump();
        // The scan listed the directory before either record was written.
        pending.scanned(0, before);
        assert_eq!(pending.get(), 2);
        // The next scan sees them, and an admin approved one meanwhile.
        let before = pending.before_scan();
        pending.scanned(1, before);
        assert_eq!(pending.get(), 1);
    }

    #[test]
    fn a_throttled_warning_is_due_once_per_interval() {
        let throttle = LogThrottle::default();
        assert!(throttle.due(std::time::Duration::from_secs(60)));
        assert!(!throttle.due(std::time::Duration::from_secs(60)));
        assert!(throttle.due(std::time::Duration::ZERO));
    }

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

    #[tokio::test(start_paused = true)]
    async fn a_bucket_refills_at_its_rate_and_a_throttle_reopens_in_virtual_time() {
        let limiter = RateLimiter::new(LimitsConfig {
            burst: 2,
            refill_every: Duration::from_secs(60),
            ..Default::default()
        });
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(limiter.check(a).is_ok() && limiter.check(a).is_ok());
        assert_eq!(limiter.check(a), Err(Duration::from_secs(60)), "empty: a whole refill to wait");
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(limiter.check(a), Err(Duration::from_secs(1)), "a second short of one announcement");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(limiter.check(a).is_ok(), "refilled by one");
        assert!(limiter.check(a).is_err());
        let throttle = LogThrottle::default();
        assert!(throttle.due(Duration::from_secs(60)));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(!throttle.due(Duration::from_secs(60)));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(throttle.due(Duration::from_secs(60)), "due again after its interval");
    }

    #[test]
    fn one_ipv6_64_is_one_source_and_memory_stays_bounded() {
        let limiter = RateLimiter::new(LimitsConfig {
            burst: 2,
            refill_every: Duration::from_secs(60),
            ..Default::default()
        });
        for host in 1..=2u16 {
            assert!(limiter.check(format!("2001:db8:1:2::{host:x}").parse().unwrap()).is_ok());
        }
        assert!(limiter.check("2001:db8:1:2:ffff::9".parse().unwrap()).is_err(), "the same /64");
        assert!(limiter.check("2001:db8:1:3::1".parse().unwrap()).is_ok(), "the next /64");
        assert_eq!(source_key("::ffff:10.0.0.1".parse().unwrap()), "10.0.0.1".parse::<IpAddr>().unwrap());
        for i in 0..(3 * GENERATION as u32) {
            let _ = limiter.check(IpAddr::V4(i.into()));
        }
        assert!(limiter.tracked() <= 2 * GENERATION, "{}", limiter.tracked());
    }
}
