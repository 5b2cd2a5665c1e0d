//! The pending pushes of one connection: which `ConfigChangeNotifyRequest`s wait for an ack,
//! and when each is due to be declared failed or resent.
//!
//! A push waits `ack_timeout` for its ack (matched by `requestId`); a try that times out is a
//! failure; after `n` failures the push is resent after `n × retry_base`; after `max_tries`
//! failures the connection is given up. Only the newest push of a key is kept: a change
//! that supersedes an unacknowledged one replaces it and inherits its failure count, so a
//! dead client is still dropped while a healthy one is never penalised for fast changes.
//!
//! A push's request id is the change's sequence number (its decimal form on the wire), so
//! the table is keyed by a `u64`; both maps hash with `rustc-hash` (the keys are the
//! server's own: sequence numbers, and keys the connection already listens to), which makes
//! recording a push and matching its ack a few hundred instructions.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use nacelle_core::ConfigKey;
use rustc_hash::FxBuildHasher;
use tokio::time::Instant;

/// Retry policy of pushes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PushPolicy {
    pub ack_timeout: Duration,
    pub retry_base: Duration,
    pub max_tries: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Sent; failed if no ack by `due`.
    AwaitingAck,
    /// Failed; resend at `due`.
    WaitingRetry,
}

#[derive(Debug)]
struct Pending {
    key: ConfigKey,
    /// When the change reached the hub (`ChangeEvent::committed_at`): the push latency's
    /// start.
    committed_at: std::time::Instant,
    frame: Bytes,
    failures: u32,
    state: State,
    due: Instant,
}

/// What [`PushTable::fire_due`] asks the connection to do.
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// Framed messages to send again now.
    pub resend: Vec<Bytes>,
    /// Some push failed `max_tries` times: unregister the connection.
    pub give_up: bool,
}

/// Pending pushes of one connection, by request id and by key.
#[derive(Debug, Default)]
pub(crate) struct PushTable {
    by_id: HashMap<u64, Pending, FxBuildHasher>,
    by_key: HashMap<ConfigKey, u64, FxBuildHasher>,
}

impl PushTable {
    /// Records a push just sent. Replaces the pending push of the same key, if any,
    /// inheriting its failure count.
    pub fn sent(
        &mut self,
        key: &ConfigKey,
        request_id: u64,
        frame: Bytes,
        due: Instant,
        committed_at: std::time::Instant,
    ) {
        let mut failures = 0;
        if let Some(old_id) = self.by_key.insert(key.clone(), request_id) {
            if let Some(old) = self.by_id.remove(&old_id) {
                failures = old.failures;
            }
        }
        self.by_id.insert(
            request_id,
            Pending {
                key: key.clone(),
                committed_at,
                frame,
                failures,
                state: State::AwaitingAck,
                due,
            },
        );
    }

    /// An ack arrived; returns when the change of the push it matched reached the hub,
    /// `None` when it matched none.
    pub fn ack(&mut self, request_id: u64) -> Option<std::time::Instant> {
        let p = self.by_id.remove(&request_id)?;
        if self.by_key.get(&p.key) == Some(&request_id) {
            self.by_key.remove(&p.key);
        }
        Some(p.committed_at)
    }

    /// The earliest instant something is due, if anything is pending.
    #[cfg(test)]
    pub fn next_due(&self) -> Option<Instant> {
        self.by_id.values().map(|p| p.due).min()
    }

    /// Number of pushes waiting for an ack or a retry.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Handles everything due at `now`: unacked tries become failures (scheduled for a
    /// retry, or giving up), scheduled retries are returned to be resent.
    pub fn fire_due(&mut self, now: Instant, policy: &PushPolicy) -> Due {
        let mut due = Due::default();
        for p in self.by_id.values_mut() {
            if p.due > now {
                continue;
            }
            match p.state {
                State::AwaitingAck => {
                    p.failures += 1;
                    if p.failures >= policy.max_tries {
                        due.give_up = true;
                    }
                    p.state = State::WaitingRetry;
                    p.due = now + policy.retry_base * p.failures;
                }
                State::WaitingRetry => {
                    due.resend.push(p.frame.clone());
                    p.state = State::AwaitingAck;
                    p.due = now + policy.ack_timeout;
                }
            }
        }
        due
    }

    /// Forgets everything (the connection is gone).
    pub fn clear(&mut self) {
        self.by_id.clear();
        self.by_key.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> PushPolicy {
        PushPolicy {
            ack_timeout: Duration::from_millis(100),
            retry_base: Duration::from_millis(200),
            max_tries: 3,
        }
    }

    #[test]
    fn ack_clears_and_unknown_ack_is_ignored() {
        let mut t = PushTable::default();
        let k = ConfigKey::from_trusted("", "G", "d");
        let now = Instant::now();
        t.sent(&k, 1, Bytes::new(), now, std::time::Instant::now());
        assert!(t.ack(2).is_none());
        assert!(t.ack(1).is_some());
        assert_eq!(t.len(), 0);
        assert!(t.next_due().is_none());
    }

    #[test]
    fn retries_with_growing_delay_then_gives_up() {
        let p = policy();
        let mut t = PushTable::default();
        let k = ConfigKey::from_trusted("", "G", "d");
        let start = Instant::now();
        t.sent(
            &k,
            1,
            Bytes::new(),
            start + p.ack_timeout,
            std::time::Instant::now(),
        );
        let mut now;
        let mut resends = 0;
        let mut delays = Vec::new();
        loop {
            now = t.next_due().expect("pending");
            let due = t.fire_due(now, &p);
            if due.give_up {
                break;
            }
            resends += due.resend.len();
            if due.resend.is_empty() {
                delays.push(t.next_due().expect("retry scheduled") - now);
            }
        }
        assert_eq!(resends, 2, "tries 2 and 3 are resends");
        assert_eq!(delays, vec![p.retry_base, p.retry_base * 2]);
        assert!(now > start);
    }

    #[test]
    fn a_newer_push_of_a_key_replaces_the_older_and_keeps_its_failures() {
        let p = policy();
        let mut t = PushTable::default();
        let k = ConfigKey::from_trusted("", "G", "d");
        let now = Instant::now();
        t.sent(&k, 1, Bytes::new(), now, std::time::Instant::now());
        let _resent = t.fire_due(now, &p); // one failure
        t.sent(&k, 2, Bytes::new(), now, std::time::Instant::now());
        assert_eq!(t.len(), 1);
        assert!(t.ack(1).is_none());
        let due = t.fire_due(now, &p);
        assert!(!due.give_up);
        let next = t.next_due().expect("retry");
        assert_eq!(next - now, p.retry_base * 2, "second failure of the key");
    }
}
