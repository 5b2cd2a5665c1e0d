//! Explicit limits of the service. Every one is configurable and documented in
//! `docs/configuration.md`; the abuse limits in `docs/security.md` ("Limits").
//!
//! [`RateLimiter`] is the write rate limit per client IP: one token bucket per address,
//! checked by the service's publish and remove (so HTTP and gRPC share the rule and the
//! budget of an address).
//!
//! [`HeldPolls`] counts the long polls held now, in all and per caller IP, against
//! `max_held_polls` and `max_held_polls_per_ip`: [`crate::ConfigService::hold_poll`]
//! takes a [`PollHold`] before a poll is held, and dropping it gives the place back.

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

/// Long polls held now: in all, and per caller IP.
#[derive(Debug, Default)]
pub(crate) struct HeldPolls {
    total: std::sync::atomic::AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize, ahash::RandomState>>,
}

impl HeldPolls {
    /// Takes a place for one more held poll of `ip`, if neither `max` in all nor
    /// `max_per_ip` for the address is reached.
    pub(crate) fn take(
        self: &Arc<Self>,
        ip: Option<IpAddr>,
        max: usize,
        max_per_ip: usize,
    ) -> Result<PollHold, HoldRefused> {
        use std::sync::atomic::Ordering;
        if self.total.fetch_add(1, Ordering::AcqRel) >= max {
            self.total.fetch_sub(1, Ordering::AcqRel);
            return Err(HoldRefused(format!("too many long polls held, over {max}")));
        }
        // From here on the hold gives back what it took when dropped, refusal included.
        let mut hold = PollHold {
            held: self.clone(),
            ip: None,
        };
        if let Some(ip) = ip {
            let mut per_ip = self.per_ip.lock();
            let n = per_ip.entry(ip).or_default();
            if *n >= max_per_ip {
                if *n == 0 {
                    per_ip.remove(&ip);
                }
                return Err(HoldRefused(format!(
                    "too many long polls held for {ip}, over {max_per_ip}"
                )));
            }
            *n += 1;
            hold.ip = Some(ip);
        }
        Ok(hold)
    }

    /// Long polls held now.
    pub(crate) fn count(&self) -> usize {
        self.total.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One held long poll's place; dropping it gives the place back.
#[derive(Debug)]
pub struct PollHold {
    held: Arc<HeldPolls>,
    ip: Option<IpAddr>,
}

impl Drop for PollHold {
    fn drop(&mut self) {
        self.held
            .total
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        if let Some(ip) = self.ip {
            let mut per_ip = self.held.per_ip.lock();
            if let Some(n) = per_ip.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    per_ip.remove(&ip);
                }
            }
        }
    }
}

/// A long poll that may not be held now (a limit of held polls is reached): the adapter
/// answers it as "unavailable, retry" (HTTP 503).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HoldRefused(pub String);

#[cfg(test)]
mod tests {
    use super::{Arc, HeldPolls};

    #[test]
    fn held_polls_are_counted_in_all_and_per_ip_and_given_back() {
        let held = Arc::new(HeldPolls::default());
        let a = Some("10.0.0.1".parse().expect("ip"));
        let b = Some("10.0.0.2".parse().expect("ip"));
        let a1 = held.take(a, 3, 2).expect("first of a");
        let _a2 = held.take(a, 3, 2).expect("second of a");
        let e = held.take(a, 3, 2).expect_err("a third of a is over its 2");
        assert!(e.0.contains("10.0.0.1") && e.0.contains("over 2"), "{e}");
        assert_eq!(held.count(), 2, "a refused hold gives its place back");
        let _b1 = held.take(b, 3, 2).expect("b is under both");
        let e = held.take(None, 3, 2).expect_err("over 3 in all");
        assert!(e.0.contains("over 3"), "{e}");
        drop(a1);
        assert_eq!(held.count(), 2);
        let _a3 = held.take(a, 3, 2).expect("a's place came back");
        assert_eq!(held.count(), 3);
    }

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
