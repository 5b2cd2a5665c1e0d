//! The change hub: an index from key to the subscribers listening to it.
//!
//! A change looks up its key and notifies only that key's subscribers; there is no scan
//! of all subscribers. Subscribers are long polls (HTTP) and connections (gRPC); each
//! implements [`Subscriber`], whose `notify` must not block (it hands the event to a
//! waiter or a bounded queue). The event is one `Arc` shared by every subscriber.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use dashmap::DashMap;
use nacelle_core::ConfigKey;

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

    /// Builds the event for a change and hands it to every subscriber of its key.
    /// Returns how many subscribers were notified.
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
        for t in &targets {
            t.notify(&event);
        }
        targets.len()
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
}
