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

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use dashmap::DashMap;
use nacelle_core::ConfigKey;

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
    /// The new md5, `""` when the config was removed.
    pub md5: String,
    /// The revision (history `nid`) of the change.
    pub revision: i64,
    /// A serialized push message for this event, built once by the first protocol adapter
    /// that needs it and reused for every connection it goes to.
    pub encoded: OnceLock<Bytes>,
}

/// Something that wants to hear about changes of the keys it subscribed to.
pub trait Subscriber: Send + Sync + 'static {
    /// Called once per change of a subscribed key. Must return quickly and never block.
    fn notify(&self, event: &Arc<ChangeEvent>);
    /// The client's IP, for listener queries.
    fn client_ip(&self) -> &str;
}

struct Entry {
    subscriber: Arc<dyn Subscriber>,
    /// The md5 the client reported when it subscribed.
    md5: String,
}

/// Key → subscribers index.
pub struct WatchHub {
    index: DashMap<ConfigKey, HashMap<u64, Entry>>,
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

impl Default for WatchHub {
    fn default() -> Self {
        Self::new()
    }
}

/// A registration of one subscriber on a set of keys; dropping it unsubscribes.
pub struct Subscription {
    hub: Arc<WatchHub>,
    id: u64,
    keys: Vec<ConfigKey>,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl Subscription {
    /// The keys this subscription covers.
    pub fn keys(&self) -> &[ConfigKey] {
        &self.keys
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        for key in &self.keys {
            self.hub.remove_one(key, self.id);
        }
    }
}

impl WatchHub {
    /// An empty hub.
    pub fn new() -> Self {
        WatchHub {
            index: DashMap::new(),
            next_id: AtomicU64::new(1),
            next_seq: AtomicU64::new(1),
            listeners: AtomicU64::new(0),
        }
    }

    /// Subscribes `subscriber` to each `(key, md5)` pair. The returned handle unsubscribes
    /// from all of them when dropped.
    pub fn subscribe(
        self: &Arc<Self>,
        subscriber: Arc<dyn Subscriber>,
        keys: impl IntoIterator<Item = (ConfigKey, String)>,
    ) -> Subscription {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut registered = Vec::new();
        for (key, md5) in keys {
            let mut slot = self.index.entry(key.clone()).or_default();
            let entry = Entry {
                subscriber: subscriber.clone(),
                md5,
            };
            if slot.insert(id, entry).is_none() {
                self.listeners.fetch_add(1, Ordering::Relaxed);
                registered.push(key);
            }
        }
        Subscription {
            hub: self.clone(),
            id,
            keys: registered,
        }
    }

    fn remove_one(&self, key: &ConfigKey, id: u64) {
        // Drops the key's entry once its last subscriber leaves.
        self.index.remove_if_mut(key, |_, subs| {
            if subs.remove(&id).is_some() {
                self.listeners.fetch_sub(1, Ordering::Relaxed);
            }
            subs.is_empty()
        });
    }

    /// Builds the event for a change and hands it to every subscriber of its key: before
    /// returning when there are at most [`INLINE_WALK_MAX`], else on a task of its own
    /// (see the module docs). Returns how many subscribers are notified.
    pub fn publish(&self, key: &ConfigKey, md5: &str, revision: i64) -> usize {
        let event = Arc::new(ChangeEvent {
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            key: key.clone(),
            md5: md5.to_string(),
            revision,
            encoded: OnceLock::new(),
        });
        // Collect under the shard lock, notify outside it.
        let targets: Vec<Arc<dyn Subscriber>> = match self.index.get(key) {
            Some(subs) => subs.values().map(|e| e.subscriber.clone()).collect(),
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

    /// Number of (subscriber, key) pairs registered.
    pub fn listener_count(&self) -> u64 {
        self.listeners.load(Ordering::Relaxed)
    }

    /// Number of keys with at least one subscriber.
    pub fn watched_keys(&self) -> usize {
        self.index.len()
    }

    /// Client IP → md5 reported, for every subscriber of `key`.
    pub fn listeners_of(&self, key: &ConfigKey) -> Vec<(String, String)> {
        self.index
            .get(key)
            .map(|subs| {
                subs.values()
                    .map(|e| (e.subscriber.client_ip().to_string(), e.md5.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Key → md5 reported, for every key that a client at `ip` listens to.
    pub fn keys_of_ip(&self, ip: &str) -> Vec<(ConfigKey, String)> {
        let mut out = Vec::new();
        for item in self.index.iter() {
            for e in item.value().values() {
                if e.subscriber.client_ip() == ip {
                    out.push((item.key().clone(), e.md5.clone()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    struct Rec {
        ip: String,
        got: Mutex<Vec<ConfigKey>>,
    }
    impl Subscriber for Rec {
        fn notify(&self, event: &Arc<ChangeEvent>) {
            self.got.lock().push(event.key.clone());
        }
        fn client_ip(&self) -> &str {
            &self.ip
        }
    }

    #[test]
    fn only_listeners_of_the_key_are_notified() {
        let hub = Arc::new(WatchHub::new());
        let a = ConfigKey::from_trusted("", "G", "a");
        let b = ConfigKey::from_trusted("", "G", "b");
        let ra = Arc::new(Rec {
            ip: "1.1.1.1".into(),
            got: Mutex::new(vec![]),
        });
        let rb = Arc::new(Rec {
            ip: "2.2.2.2".into(),
            got: Mutex::new(vec![]),
        });
        let sa = hub.subscribe(ra.clone(), [(a.clone(), "m".to_string())]);
        let _sb = hub.subscribe(rb.clone(), [(b.clone(), String::new())]);
        assert_eq!(hub.listener_count(), 2);
        assert_eq!(hub.publish(&a, "x", 1), 1);
        assert_eq!(ra.got.lock().len(), 1);
        assert!(rb.got.lock().is_empty());
        assert_eq!(
            hub.listeners_of(&a),
            vec![("1.1.1.1".to_string(), "m".to_string())]
        );
        assert_eq!(hub.keys_of_ip("2.2.2.2").len(), 1);
        drop(sa);
        assert_eq!(hub.listener_count(), 1);
        assert_eq!(hub.publish(&a, "y", 2), 0);
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
                    let _ = rx.recv_timeout(std::time::Duration::from_secs(10));
                }
            }
        }
        fn client_ip(&self) -> &str {
            "127.0.0.1"
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_walk_does_not_hold_up_the_publisher() {
        let hub = Arc::new(WatchHub::new());
        let key = ConfigKey::from_trusted("", "G", "everyone");
        let (release, rx) = std::sync::mpsc::channel();
        let gate = Arc::new(Gate {
            count: std::sync::atomic::AtomicUsize::new(0),
            release: std::sync::Mutex::new(rx),
        });
        let n = INLINE_WALK_MAX + 100;
        let _subs: Vec<Subscription> = (0..n)
            .map(|_| hub.subscribe(gate.clone(), [(key.clone(), String::new())]))
            .collect();
        // The walk blocks in its first notification, yet publish has returned.
        assert_eq!(hub.publish(&key, "m", 1), n);
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
        let rec = Arc::new(Rec {
            ip: "3.3.3.3".into(),
            got: Mutex::new(vec![]),
        });
        let _s = hub.subscribe(rec.clone(), [(small.clone(), String::new())]);
        assert_eq!(hub.publish(&small, "m", 2), 1);
        assert_eq!(rec.got.lock().len(), 1);
    }
}
