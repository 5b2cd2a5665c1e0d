//! Explicit limits of the service. Every one is configurable and documented in
//! `docs/configuration.md`; the abuse limits in `docs/security.md` ("Limits").
//!
//! [`RateLimiter`] is the write rate limit per client IP: one token bucket per address,
//! checked by the service's publish and remove (so HTTP and gRPC share the rule and the
//! budget of an address).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacelle_cipher::MasterKeys;
use nacelle_core::ValidationPolicy;
use parking_lot::Mutex;

/// Limits and policies enforced by the config service and its adapters.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest config content in bytes (Nacos: 10 MB).
    pub max_content_bytes: usize,
    /// Most keys one long poll or one gRPC listen request may carry (Nacos: 10 000).
    pub max_listen_keys: usize,
    /// Most long polls held at once; beyond it clients get 503.
    pub max_held_polls: usize,
    /// Most long polls held at once for one client IP (the caller's IP, forwarded headers
    /// believed only from trusted proxies); beyond it that address gets 503.
    pub max_held_polls_per_ip: usize,
    /// Writes (publish, remove) per second one client IP may make on average; `0`: no
    /// limit. Over it a write is refused with [`nacelle_core::CoreError::OverLimit`].
    pub write_rate_per_ip: u32,
    /// How many writes one client IP may make in a burst above the rate (the bucket's
    /// size); at least 1 when the rate is on.
    pub write_burst_per_ip: u32,
    /// What a publish whose content does not parse as its type does, by namespace
    /// (`reject | warn | off`; default `warn`). See `nacelle_core::content`.
    pub content_validation: ValidationPolicy,
    /// The master keys that wrap the data keys of encrypted configs at rest
    /// (`--cipher-master-key-file`: the current key, then previous ones that only unwrap);
    /// `None`: data keys are stored in clear, as Nacos does. Never a built-in default. See
    /// `docs/encryption.md`.
    pub cipher_master_key: Option<Arc<MasterKeys>>,
    /// Most group patterns one watch (a gRPC connection) may watch at once (Nacos 3.0's
    /// `nacos.config.fuzzy.watch.max.pattern.count`, 20 — counted server-wide there).
    pub max_watch_patterns: usize,
    /// Most keys one watched pattern reports (Nacos 3.0's
    /// `nacos.config.fuzzy.watch.max.pattern.match.config.count`, 500).
    pub max_pattern_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_content_bytes: 10 * 1024 * 1024,
            max_listen_keys: 10_000,
            max_held_polls: 100_000,
            max_held_polls_per_ip: 2_000,
            write_rate_per_ip: 100,
            write_burst_per_ip: 1_000,
            content_validation: ValidationPolicy::default(),
            cipher_master_key: None,
            max_watch_patterns: 20,
            max_pattern_keys: 500,
        }
    }
}

/// Buckets kept before idle (full) ones are dropped.
const PRUNE_ABOVE: usize = 10_000;
/// Shortest time between two prunes.
const PRUNE_EVERY: Duration = Duration::from_secs(10);

/// A token bucket per client IP: `burst` tokens, refilled at `rate` per second; each
/// write takes one. Memory is bounded by pruning buckets that are full again (an address
/// that stopped writing) once there are many.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    /// One short lock per write (writes are rare next to reads; no I/O under it).
    state: Mutex<Buckets>,
    /// When a refusal was last logged, so a flood of refusals is not a flood of logs.
    logged_at: Mutex<Option<Instant>>,
}

#[derive(Debug)]
struct Buckets {
    by_ip: HashMap<IpAddr, Bucket>,
    pruned_at: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// `rate` tokens per second, `burst` at most (raised to 1); `None` when `rate` is 0
    /// (no limit).
    pub fn new(rate: u32, burst: u32) -> Option<Self> {
        (rate > 0).then(|| RateLimiter {
            rate: f64::from(rate),
            burst: f64::from(burst.max(1)),
            state: Mutex::new(Buckets {
                by_ip: HashMap::new(),
                pruned_at: Instant::now(),
            }),
            logged_at: Mutex::new(None),
        })
    }

    /// Whether a refusal at `now` should be logged: at most once a second.
    pub fn should_log(&self, now: Instant) -> bool {
        let mut at = self.logged_at.lock();
        if at.is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            return false;
        }
        *at = Some(now);
        true
    }

    /// The configured rate, per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Takes a token of `ip` at `now`; `false` when its bucket is empty.
    pub fn try_take(&self, ip: IpAddr, now: Instant) -> bool {
        let mut state = self.state.lock();
        if state.by_ip.len() > PRUNE_ABOVE && now.duration_since(state.pruned_at) >= PRUNE_EVERY {
            let (rate, burst) = (self.rate, self.burst);
            state
                .by_ip
                .retain(|_, b| b.refilled(now, rate, burst) < burst);
            state.pruned_at = now;
        }
        let bucket = state.by_ip.entry(ip).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        bucket.tokens = bucket.refilled(now, self.rate, self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Addresses with a bucket (for tests and metrics).
    pub fn tracked(&self) -> usize {
        self.state.lock().by_ip.len()
    }
}

impl Bucket {
    fn refilled(&self, now: Instant, rate: f64, burst: f64) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        (self.tokens + elapsed * rate).min(burst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_burst_then_the_rate_per_address() {
        let limiter = RateLimiter::new(10, 3).expect("on");
        let t0 = Instant::now();
        assert!((0..3).all(|_| limiter.try_take(ip(1), t0)));
        assert!(!limiter.try_take(ip(1), t0), "the burst is spent");
        // Another address has its own bucket.
        assert!(limiter.try_take(ip(2), t0));
        // 100 ms at 10/s give one token back.
        let later = t0 + Duration::from_millis(100);
        assert!(limiter.try_take(ip(1), later));
        assert!(!limiter.try_take(ip(1), later));
        // A long pause refills to the burst, not beyond.
        let much_later = t0 + Duration::from_secs(60);
        assert!((0..3).all(|_| limiter.try_take(ip(1), much_later)));
        assert!(!limiter.try_take(ip(1), much_later));
    }

    #[test]
    fn off_at_rate_zero_and_idle_buckets_are_pruned() {
        assert!(RateLimiter::new(0, 100).is_none());
        let limiter = RateLimiter::new(1000, 1).expect("on");
        let t0 = Instant::now();
        for i in 0..=PRUNE_ABOVE as u32 {
            assert!(limiter.try_take(IpAddr::from(i.to_be_bytes()), t0));
        }
        assert!(limiter.tracked() > PRUNE_ABOVE);
        // Every bucket is full again by then: all are dropped but the one just used.
        let later = t0 + PRUNE_EVERY;
        assert!(limiter.try_take(ip(1), later));
        assert_eq!(limiter.tracked(), 1);
    }
}
