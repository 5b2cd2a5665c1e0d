//! Login throttling: failures are counted per (user, source address) pair and per source
//! address; past a number of free attempts each further failure doubles a wait (from 1 s
//! up to 5 min) during which that pair, or that address, is refused without checking the
//! password. Failures from one address never lock the user out from another.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Failed logins of one user from one address before waits begin.
pub const PAIR_FREE_FAILURES: u32 = 5;
/// Failed logins from one address (any user) before waits begin.
pub const ADDRESS_FREE_FAILURES: u32 = 20;
/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(300);
/// A record without failures for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(900);
/// Records kept before old ones are pruned.
const MAX_RECORDS: usize = 100_000;

#[derive(Debug, Clone, Copy)]
struct Strikes {
    failures: u32,
    blocked_until: Option<Instant>,
    last: Instant,
}

impl Strikes {
    fn new(now: Instant) -> Self {
        Strikes {
            failures: 0,
            blocked_until: None,
            last: now,
        }
    }

    fn wait(&self, now: Instant) -> Option<Duration> {
        self.blocked_until
            .and_then(|until| until.checked_duration_since(now))
            .filter(|d| !d.is_zero())
    }

    fn strike(&mut self, now: Instant, free: u32) {
        self.failures = self.failures.saturating_add(1);
        self.last = now;
        if self.failures >= free {
            let doublings = (self.failures - free).min(16);
            let wait = Duration::from_secs(1u64 << doublings).min(MAX_WAIT);
            self.blocked_until = Some(now + wait);
        }
    }
}

#[derive(Default)]
struct Records {
    pairs: HashMap<(String, Option<IpAddr>), Strikes>,
    addresses: HashMap<Option<IpAddr>, Strikes>,
}

/// The throttle of one server.
#[derive(Default)]
pub(crate) struct Throttle {
    records: Mutex<Records>,
}

impl Throttle {
    /// How long `user` from `ip` must still wait, if at all.
    pub(crate) fn wait(&self, user: &str, ip: Option<IpAddr>) -> Option<Duration> {
        let now = Instant::now();
        let r = self.records.lock();
        let pair = r
            .pairs
            .get(&(user.to_string(), ip))
            .and_then(|s| s.wait(now));
        let address = r.addresses.get(&ip).and_then(|s| s.wait(now));
        pair.max(address)
    }

    /// Records a failed login; returns the wait it starts, if any.
    pub(crate) fn failed(&self, user: &str, ip: Option<IpAddr>) -> Option<Duration> {
        let now = Instant::now();
        let mut r = self.records.lock();
        if r.pairs.len() + r.addresses.len() >= MAX_RECORDS {
            r.pairs
                .retain(|_, s| now.duration_since(s.last) < FORGET_AFTER);
            r.addresses
                .retain(|_, s| now.duration_since(s.last) < FORGET_AFTER);
        }
        let pair = r
            .pairs
            .entry((user.to_string(), ip))
            .or_insert_with(|| Strikes::new(now));
        pair.strike(now, PAIR_FREE_FAILURES);
        let pair_wait = pair.wait(now);
        let address = r.addresses.entry(ip).or_insert_with(|| Strikes::new(now));
        address.strike(now, ADDRESS_FREE_FAILURES);
        pair_wait.max(address.wait(now))
    }

    /// Records a successful login: the pair starts over (the address keeps its count, so
    /// logging into one's own account does not reset an address guessing others').
    pub(crate) fn succeeded(&self, user: &str, ip: Option<IpAddr>) {
        self.records.lock().pairs.remove(&(user.to_string(), ip));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_start_after_the_free_failures_and_stay_per_address() {
        let t = Throttle::default();
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let b = Some(IpAddr::from([10, 0, 0, 2]));
        for _ in 1..PAIR_FREE_FAILURES {
            assert_eq!(t.failed("u", a), None);
        }
        assert!(t.failed("u", a).is_some());
        assert!(t.wait("u", a).is_some());
        assert_eq!(t.wait("u", b), None);
        assert_eq!(t.wait("other", a), None);
        t.succeeded("u", b);
        assert!(t.wait("u", a).is_some());
    }

    #[test]
    fn an_address_guessing_many_users_waits() {
        let t = Throttle::default();
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        for i in 0..ADDRESS_FREE_FAILURES {
            t.failed(&format!("user{i}"), a);
        }
        assert!(t.wait("fresh", a).is_some());
        assert_eq!(t.wait("fresh", Some(IpAddr::from([10, 0, 0, 9]))), None);
    }

    #[test]
    fn waits_double_up_to_the_cap() {
        let now = Instant::now();
        let mut s = Strikes::new(now);
        let mut last = Duration::ZERO;
        for _ in 0..40 {
            s.strike(now, 1);
            let w = s.wait(now).unwrap_or_default();
            assert!(w >= last && w <= MAX_WAIT);
            last = w;
        }
        assert_eq!(last, MAX_WAIT);
    }
}
