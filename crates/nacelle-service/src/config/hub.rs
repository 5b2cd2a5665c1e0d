//! The change hub: an index from key to the subscribers listening to it.
//!
//! A change looks up its key and notifies only that key's subscribers; there is no scan
//! of all subscribers. Subscribers are long polls (HTTP) and connections (gRPC); each
//! implements [`Subscriber`], whose `notify` must not block (it hands the event to a
//! waiter or a bounded queue). The event is one `Arc` shared by every subscriber.
//!
//! A key with up to [`INLINE_WALK_MAX`] subscribers is walked before [`WatchHub::publish`]
//! returns; a larger walk (a config every client listens to) runs on a task of its own,
//! yielding every [`WALK_CHUNK`] notifications, so that the publisher is answered without
//! waiting for tens of thousands of notifications and no runtime thread is held for the
//! whole walk.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use nacelle_core::{now_millis, Caller, ConfigKey};
use rustc_hash::FxBuildHasher;

use crate::config::key_map::KeyMap;

/// Most subscribers of a key that [`WatchHub::publish`] notifies itself before returning.
pub const INLINE_WALK_MAX: usize = 1024;

/// Notifications between two yields of a walk running on its own task.
pub const WALK_CHUNK: usize = 256;

/// A change of one key, shared by all subscribers it reaches.
#[derive(Debug)]
pub struct ChangeEvent {
    /// Sequence number of the event in this process, unique and increasing.
    pub seq: u64,
    pub key: ConfigKey,
    /// The new md5 of the formal config, `""` when it was removed. A subscriber whose
    /// caller sees a gray variant may be served another md5.
    pub md5: String,
    /// The revision (history `nid`) of the change.
    pub revision: i64,
    /// When the change reached this hub: right after its commit for a write on this node,
    /// after the reload for a change made elsewhere. Push and long-poll release latencies
    /// are measured from here.
    pub committed_at: Instant,
    /// A serialized push message for this event, built once by the first protocol adapter
    /// that needs it and reused for every connection it goes to.
    pub encoded: OnceLock<Bytes>,
}

/// Something that wants to hear about changes of the keys it watches.
pub trait Subscriber: Send + Sync + 'static {
    /// Called once per change of a watched key. Must return quickly and never block.
    fn notify(&self, event: &Arc<ChangeEvent>);

    /// Called once when the server begins shutting down: a listener holding a request
    /// (a long poll) answers it now. Must return quickly and never block.
    fn close(&self) {}
}

struct Entry {
    subscriber: Arc<dyn Subscriber>,
    /// The md5 the client holds: what it reported when it subscribed, then what it was
    /// last told of (a notified client reads the key again). A change is passed on only
    /// when what the caller sees differs from it, so a caller whose variant did not change
    /// is not woken.
    md5: Arc<str>,
    /// Who listens: decides which variant of the key it sees; its IP answers listener
    /// queries.
    caller: Arc<Caller>,
    /// Since when it holds `md5` (ms since the epoch): when it subscribed with it, or was
    /// last told of a change. Answers "since when" in the live view.
    since_ms: i64,
}

/// One subscriber of a key as the live view reads it.
pub(crate) struct Held {
    pub caller: Arc<Caller>,
    pub md5: Arc<str>,
    pub since_ms: i64,
}

/// What each subscriber of a changed key now sees: one md5 for everyone (the key has no
/// gray variant), or an md5 per caller.
pub(crate) enum Visible<'a> {
    All(Arc<str>),
    PerCaller(&'a (dyn Fn(&Caller) -> Arc<str> + Sync)),
}

/// Key → subscribers index. Only the service uses it: adapters watch through
/// [`crate::Watch`].
pub(crate) struct WatchHub {
    /// Key → watcher id → subscriber. Watcher ids are the hub's own, so their map hashes
    /// with `rustc-hash`.
    index: KeyMap<HashMap<u64, Entry, FxBuildHasher>>,
    next_id: AtomicU64,
    next_seq: AtomicU64,
    listeners: AtomicU64,
}

impl fmt::Debug for WatchHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchHub")
            .field("keys", &self.index.len())
            .field("listeners", &self.listeners.load(Ordering::Relaxed))
            .finish()
    }
}

impl WatchHub {
    /// An empty hub.
    pub fn new() -> Self {
        WatchHub {
            index: KeyMap::default(),
            next_id: AtomicU64::new(1),
            next_seq: AtomicU64::new(1),
            listeners: AtomicU64::new(0),
        }
    }

    /// A new watcher id: one per watch, shared by all its keys.
    pub fn next_watcher_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers watcher `id` on `key` (or updates its md5 and subscriber). Returns whether
    /// the key is new to this watcher.
    pub fn subscribe(
        &self,
        id: u64,
        key: &ConfigKey,
        md5: String,
        caller: Arc<Caller>,
        subscriber: Arc<dyn Subscriber>,
    ) -> bool {
        let mut slot = self.index.entry(key.clone()).or_default();
        // A watcher that subscribes again with the md5 it held keeps its `since`.
        let since_ms = match slot.get(&id) {
            Some(old) if *old.md5 == *md5 => old.since_ms,
            _ => now_millis(),
        };
        let entry = Entry {
            subscriber,
            md5: md5.into(),
            caller,
            since_ms,
        };
        let new = slot.insert(id, entry).is_none();
        if new {
            self.listeners.fetch_add(1, Ordering::Relaxed);
        }
        new
    }

    /// Removes watcher `id` from `key`; drops the key's entry once its last subscriber
    /// leaves. Returns whether it was registered.
    pub fn unsubscribe(&self, key: &ConfigKey, id: u64) -> bool {
        let mut removed = false;
        self.index.remove_if_mut(key, |_, subs| {
            if subs.remove(&id).is_some() {
                self.listeners.fetch_sub(1, Ordering::Relaxed);
                removed = true;
            }
            subs.is_empty()
        });
        removed
    }

    /// Builds the event for a change and hands it to every subscriber of its key whose
    /// visible md5 (`visible`) differs from the one it holds: before returning when there
    /// are at most [`INLINE_WALK_MAX`], else on a task of its own (see the module docs).
    /// Returns how many subscribers are notified.
    pub fn publish(
        &self,
        key: &ConfigKey,
        md5: &str,
        revision: i64,
        visible: Visible<'_>,
    ) -> usize {
        let event = Arc::new(ChangeEvent {
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            key: key.clone(),
            md5: md5.to_string(),
            revision,
            committed_at: Instant::now(),
            encoded: OnceLock::new(),
        });
        // Collect under the shard lock (recording what each is told), notify outside it.
        let told_at = now_millis();
        let targets: Vec<Arc<dyn Subscriber>> = match self.index.get_mut(key) {
            Some(mut subs) => subs
                .values_mut()
                .filter_map(|e| {
                    let now = match &visible {
                        Visible::All(md5) => md5.clone(),
                        Visible::PerCaller(f) => f(&e.caller),
                    };
                    if now == e.md5 {
                        return None;
                    }
                    e.md5 = now;
                    e.since_ms = told_at;
                    Some(e.subscriber.clone())
                })
                .collect(),
            None => return 0,
        };
        let n = targets.len();
        if n > INLINE_WALK_MAX {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    for chunk in targets.chunks(WALK_CHUNK) {
                        for t in chunk {
                            t.notify(&event);
                        }
                        tokio::task::yield_now().await;
                    }
                });
                return n;
            }
        }
        for t in &targets {
            t.notify(&event);
        }
        n
    }

    /// Tells every subscriber the server is shutting down ([`Subscriber::close`]), once
    /// per subscriber however many keys it watches (one subscriber is one allocation);
    /// called outside the index's locks.
    pub fn close_all(&self) {
        let mut seen = HashSet::new();
        let mut targets: Vec<Arc<dyn Subscriber>> = Vec::new();
        for item in self.index.iter() {
            for e in item.value().values() {
                if seen.insert(Arc::as_ptr(&e.subscriber).cast::<()>()) {
                    targets.push(e.subscriber.clone());
                }
            }
        }
        for t in targets {
            t.close();
        }
    }

    /// Number of (subscriber, key) pairs registered.
    pub fn listener_count(&self) -> u64 {
        self.listeners.load(Ordering::Relaxed)
    }

    /// Number of keys with at least one subscriber.
    pub(crate) fn watched_keys(&self) -> usize {
        self.index.len()
    }

    /// Client IP → md5 reported, for every subscriber of `key`.
    pub fn listeners_of(&self, key: &ConfigKey) -> Vec<(String, String)> {
        self.index
            .get(key)
            .map(|subs| {
                subs.values()
                    .map(|e| (e.caller.ip_string(), e.md5.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every subscriber of `key`: who it is and the md5 it holds (read-only, for the
    /// console's listener views).
    pub fn subscribers_of(&self, key: &ConfigKey) -> Vec<(Arc<Caller>, Arc<str>)> {
        self.held_of(key)
            .into_iter()
            .map(|h| (h.caller, h.md5))
            .collect()
    }

    /// Every subscriber of `key` with the md5 it holds and since when (the live view).
    pub fn held_of(&self, key: &ConfigKey) -> Vec<Held> {
        self.index
            .get(key)
            .map(|subs| {
                subs.values()
                    .map(|e| Held {
                        caller: e.caller.clone(),
                        md5: e.md5.clone(),
                        since_ms: e.since_ms,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every (key, subscriber, md5 held) of the subscribers whose client IP is `ip`.
    pub fn subscriptions_of_ip(&self, ip: &str) -> Vec<(ConfigKey, Arc<Caller>, Arc<str>)> {
        let ip = IpQuery::new(ip);
        let mut out = Vec::new();
        for item in self.index.iter() {
            for e in item.value().values() {
                if ip.matches(&e.caller) {
                    out.push((item.key().clone(), e.caller.clone(), e.md5.clone()));
                }
            }
        }
        out
    }

    /// Key → md5 reported, for every key that a client at `ip` listens to.
    pub fn keys_of_ip(&self, ip: &str) -> Vec<(ConfigKey, String)> {
        self.subscriptions_of_ip(ip)
            .into_iter()
            .map(|(key, _, md5)| (key, md5.to_string()))
            .collect()
    }
}

/// The IP a listener query names, matched against each subscriber's caller: an address
/// matches the same address (an IPv4-mapped IPv6 form matches its IPv4 one, as callers'
/// addresses are kept), the empty string matches callers without one, and anything else
/// matches nobody. Subscribers keep their IP as an address, so subscribing formats none.
enum IpQuery {
    Addr(std::net::IpAddr),
    Unknown,
    Invalid,
}

impl IpQuery {
    fn new(ip: &str) -> Self {
        let ip = ip.trim();
        if ip.is_empty() {
            return IpQuery::Unknown;
        }
        match ip.parse::<std::net::IpAddr>() {
            Ok(a) => IpQuery::Addr(a.to_canonical()),
            Err(_) => IpQuery::Invalid,
        }
    }

    fn matches(&self, caller: &Caller) -> bool {
        match self {
            IpQuery::Addr(a) => caller.ip.map(|ip| ip.to_canonical()) == Some(*a),
            IpQuery::Unknown => caller.ip.is_none(),
            IpQuery::Invalid => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    fn who() -> Arc<Caller> {
        Arc::new(Caller::internal())
    }

    fn at(ip: &str) -> Arc<Caller> {
        Arc::new(Caller::anonymous(
            nacelle_core::Protocol::Grpc,
            Some(ip.parse().expect("an address")),
        ))
    }

    #[derive(Default)]
    struct Rec {
        got: Mutex<Vec<ConfigKey>>,
        closed: std::sync::atomic::AtomicUsize,
    }
    impl Subscriber for Rec {
        fn notify(&self, event: &Arc<ChangeEvent>) {
            self.got.lock().push(event.key.clone());
        }
        fn close(&self) {
            self.closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn closing_tells_each_subscriber_once_however_many_keys_it_watches() {
        let hub = WatchHub::new();
        let keys: Vec<ConfigKey> = ["a", "b", "c"]
            .iter()
            .map(|d| ConfigKey::from_trusted("", "G", d))
            .collect();
        let (many, one) = (Arc::new(Rec::default()), Arc::new(Rec::default()));
        let (im, io) = (hub.next_watcher_id(), hub.next_watcher_id());
        for k in &keys {
            hub.subscribe(im, k, String::new(), who(), many.clone());
        }
        hub.subscribe(io, &keys[1], String::new(), who(), one.clone());
        hub.close_all();
        assert_eq!(many.closed.load(Ordering::Relaxed), 1);
        assert_eq!(one.closed.load(Ordering::Relaxed), 1);
        assert!(many.got.lock().is_empty(), "closing is not a change");
        // The subscriptions stay until their watches leave.
        assert_eq!(hub.listener_count(), 4);
    }

    #[test]
    fn only_listeners_of_the_key_are_notified() {
        let hub = WatchHub::new();
        let a = ConfigKey::from_trusted("", "G", "a");
        let b = ConfigKey::from_trusted("", "G", "b");
        let ra = Arc::new(Rec::default());
        let rb = Arc::new(Rec::default());
        let (ia, ib) = (hub.next_watcher_id(), hub.next_watcher_id());
        assert!(hub.subscribe(ia, &a, "m".into(), at("1.1.1.1"), ra.clone()));
        assert!(hub.subscribe(ib, &b, String::new(), at("2.2.2.2"), rb.clone()));
        assert!(!hub.subscribe(ia, &a, "m".into(), at("1.1.1.1"), ra.clone()));
        // A change to what the subscriber already holds wakes nobody.
        assert_eq!(hub.publish(&a, "m", 1, Visible::All("m".into())), 0);
        assert_eq!(hub.listener_count(), 2);
        assert_eq!(hub.publish(&a, "x", 1, Visible::All("x".into())), 1);
        assert_eq!(ra.got.lock().len(), 1);
        assert!(rb.got.lock().is_empty());
        assert_eq!(
            hub.listeners_of(&a),
            vec![("1.1.1.1".to_string(), "x".to_string())],
            "the md5 it was last told of"
        );
        assert_eq!(hub.keys_of_ip("2.2.2.2").len(), 1);
        assert_eq!(hub.keys_of_ip("::ffff:2.2.2.2").len(), 1);
        assert_eq!(hub.keys_of_ip(" 1.1.1.1 ").len(), 1);
        assert!(hub.keys_of_ip("2.2.2.3").is_empty());
        assert!(hub.keys_of_ip("not-an-ip").is_empty());
        assert!(hub.keys_of_ip("").is_empty(), "every subscriber has an IP");
        assert!(hub.unsubscribe(&a, ia));
        assert!(!hub.unsubscribe(&a, ia));
        assert_eq!(hub.listener_count(), 1);
        assert_eq!(hub.publish(&a, "y", 2, Visible::All("y".into())), 0);
        assert_eq!(hub.watched_keys(), 1);
    }

    /// Counts notifications; the first one blocks until released.
    struct Gate {
        count: std::sync::atomic::AtomicUsize,
        release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }
    impl Subscriber for Gate {
        fn notify(&self, _event: &Arc<ChangeEvent>) {
            if self.count.fetch_add(1, Ordering::SeqCst) == 0 {
                if let Ok(rx) = self.release.lock() {
                    // A timeout only ends the test's wait early; the count is what is checked.
                    let _released = rx.recv_timeout(std::time::Duration::from_secs(10));
                }
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_walk_does_not_hold_up_the_publisher() {
        let hub = WatchHub::new();
        let key = ConfigKey::from_trusted("", "G", "everyone");
        let (release, rx) = std::sync::mpsc::channel();
        let gate = Arc::new(Gate {
            count: std::sync::atomic::AtomicUsize::new(0),
            release: std::sync::Mutex::new(rx),
        });
        let n = INLINE_WALK_MAX + 100;
        for _ in 0..n {
            let id = hub.next_watcher_id();
            hub.subscribe(id, &key, String::new(), who(), gate.clone());
        }
        // The walk blocks in its first notification, yet publish has returned.
        assert_eq!(hub.publish(&key, "m", 1, Visible::All("m".into())), n);
        assert!(
            gate.count.load(Ordering::SeqCst) < n,
            "publish waited for the whole walk"
        );
        release.send(()).expect("the walk waits for the release");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while gate.count.load(Ordering::SeqCst) < n {
            assert!(std::time::Instant::now() < deadline, "walk did not finish");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(gate.count.load(Ordering::SeqCst), n);

        // A small walk is done before publish returns.
        let small = ConfigKey::from_trusted("", "G", "few");
        let rec = Arc::new(Rec::default());
        let id = hub.next_watcher_id();
        hub.subscribe(id, &small, String::new(), who(), rec.clone());
        assert_eq!(hub.publish(&small, "m", 2, Visible::All("m".into())), 1);
        assert_eq!(rec.got.lock().len(), 1);
    }
}
