//! The pattern hub: who watches which group pattern (`namespace>>group>>dataId`, Nacos 3.0's
//! fuzzy watch), beside the per-key [`crate::config::hub`].
//!
//! Index: namespace → (exact group → subscriptions, and the subscriptions whose group part
//! is a wildcard). A change of a key takes a read lock, looks up its namespace and its
//! (namespace, group) bucket and checks the wildcard-group patterns of that namespace one
//! by one — never every subscription or connection. Cost per change: two hash lookups plus
//! one string match per pattern in those two lists; with no pattern watched at all, one
//! atomic load.
//!
//! Each subscription keeps the keys it has reported (at most `max_keys`, with the md5 last
//! seen) under its own mutex. Its initial listing and every later decision happen under
//! that mutex, and each decision reads the key's *current* state from the cache (not the
//! state the change carried), so concurrent or reordered changes still converge and a
//! change landing during the listing is neither lost nor reported before the listing.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nacelle_core::pattern::Part;
use nacelle_core::{Caller, ConfigKey, GroupPattern, NamespaceId};
use parking_lot::{Mutex, RwLock};

/// What happened to a key a pattern covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupChange {
    /// The key now exists (created, or readable to the watcher for the first time).
    Added,
    /// Its content changed.
    Changed,
    /// It was removed (or is no longer readable to the watcher).
    Removed,
}

/// Someone watching a pattern. Both calls happen under the subscription's lock, so they
/// must return quickly and never block (queue a message, wake a task).
pub trait GroupSubscriber: Send + Sync + 'static {
    /// The initial listing, once, before any [`GroupSubscriber::changed`]: the keys the
    /// pattern covers that the watcher did not say it holds, and the keys it said it holds
    /// that are not (or no longer) covered.
    fn sync(&self, present: &[ConfigKey], gone: &[ConfigKey]);
    /// A later change of one covered key.
    fn changed(&self, key: &ConfigKey, change: GroupChange);
}

/// One (watch, pattern).
pub(crate) struct PatternSub {
    pub(crate) pattern: GroupPattern,
    /// Whose permissions filter the keys (the caller of the watch request).
    pub(crate) caller: Arc<Caller>,
    /// Key → md5 of every key reported as present.
    known: Mutex<HashMap<ConfigKey, Arc<str>>>,
    subscriber: Arc<dyn GroupSubscriber>,
    max_keys: usize,
}

/// What listing a new subscription found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listed {
    /// How many keys it covers now (at most `max_keys`).
    pub(crate) keys: usize,
    /// Whether more keys matched than `max_keys`.
    pub(crate) truncated: bool,
}

#[derive(Default)]
struct NsPatterns {
    by_group: HashMap<String, Vec<Arc<PatternSub>>>,
    any_group: Vec<Arc<PatternSub>>,
}

impl NsPatterns {
    fn list_of(&mut self, pattern: &GroupPattern) -> &mut Vec<Arc<PatternSub>> {
        match pattern.group() {
            Part::Exact(g) => self.by_group.entry(g.clone()).or_default(),
            _ => &mut self.any_group,
        }
    }

    fn is_empty(&self) -> bool {
        self.by_group.is_empty() && self.any_group.is_empty()
    }
}

/// Namespace → the pattern subscriptions over it.
#[derive(Default)]
pub(crate) struct PatternHub {
    index: RwLock<HashMap<NamespaceId, NsPatterns>>,
    count: AtomicUsize,
}

impl fmt::Debug for PatternHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PatternHub")
            .field("subscriptions", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

/// The state of a key as a subscription sees it: its current md5 (`None`: absent) and
/// whether the subscription's caller may read it.
pub(crate) trait KeyState {
    fn md5(&self, key: &ConfigKey) -> Option<Arc<str>>;
    fn readable(&self, caller: &Caller, key: &ConfigKey) -> bool;
    /// Every existing key the pattern covers, with its md5.
    fn matching(&self, pattern: &GroupPattern) -> Vec<(ConfigKey, Arc<str>)>;
}

impl PatternHub {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Number of (watch, pattern) subscriptions.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Registers a subscription and lists the keys its pattern covers: `received` are the
    /// keys the watcher says it holds. The subscriber's `sync` is called before this
    /// returns, and before any change reaches it.
    pub(crate) fn subscribe(
        &self,
        pattern: GroupPattern,
        caller: Arc<Caller>,
        subscriber: Arc<dyn GroupSubscriber>,
        max_keys: usize,
        received: &HashSet<ConfigKey>,
        state: &dyn KeyState,
    ) -> (Arc<PatternSub>, Listed) {
        let sub = Arc::new(PatternSub {
            pattern,
            caller,
            known: Mutex::new(HashMap::new()),
            subscriber,
            max_keys,
        });
        // Lock the subscription before it is visible: a change that finds it waits for the
        // listing, then compares with the cache as it is by then.
        let mut known = sub.known.lock();
        {
            let mut index = self.index.write();
            index
                .entry(sub.pattern.namespace().clone())
                .or_default()
                .list_of(&sub.pattern)
                .push(sub.clone());
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        let mut matching: Vec<(ConfigKey, Arc<str>)> = state
            .matching(&sub.pattern)
            .into_iter()
            .filter(|(k, _)| state.readable(&sub.caller, k))
            .collect();
        matching.sort_by(|a, b| a.0.cmp(&b.0));
        let truncated = matching.len() > max_keys;
        matching.truncate(max_keys);
        known.extend(matching);
        let present: Vec<ConfigKey> = known
            .keys()
            .filter(|k| !received.contains(*k))
            .cloned()
            .collect();
        // Over the limit the listing is not the whole match: a received key outside it may
        // still exist, so it is not reported gone (as Nacos does).
        let still_there = |k: &ConfigKey| {
            truncated
                && sub.pattern.matches(k)
                && state.md5(k).is_some()
                && state.readable(&sub.caller, k)
        };
        let mut gone: Vec<ConfigKey> = received
            .iter()
            .filter(|k| !known.contains_key(*k) && !still_there(k))
            .cloned()
            .collect();
        let mut present = present;
        present.sort();
        gone.sort();
        sub.subscriber.sync(&present, &gone);
        let listed = Listed {
            keys: known.len(),
            truncated,
        };
        drop(known);
        (sub, listed)
    }

    /// Removes a subscription.
    pub(crate) fn unsubscribe(&self, sub: &Arc<PatternSub>) {
        let mut index = self.index.write();
        let ns = sub.pattern.namespace();
        let Some(patterns) = index.get_mut(ns) else {
            return;
        };
        let list = patterns.list_of(&sub.pattern);
        let before = list.len();
        list.retain(|s| !Arc::ptr_eq(s, sub));
        if list.len() < before {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        if let Part::Exact(g) = sub.pattern.group() {
            if patterns.by_group.get(g).is_some_and(Vec::is_empty) {
                patterns.by_group.remove(g);
            }
        }
        if patterns.is_empty() {
            index.remove(ns);
        }
    }

    /// `key` changed: tells each subscription whose pattern covers it what that change is
    /// for its caller. Returns how many were told something.
    pub(crate) fn publish(&self, key: &ConfigKey, state: &dyn KeyState) -> usize {
        if self.count.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let targets: Vec<Arc<PatternSub>> = {
            let index = self.index.read();
            let Some(patterns) = index.get(key.namespace()) else {
                return 0;
            };
            patterns
                .by_group
                .get(key.group())
                .into_iter()
                .flatten()
                .chain(patterns.any_group.iter())
                .filter(|s| s.pattern.matches(key))
                .cloned()
                .collect()
        };
        let mut told = 0;
        for sub in targets {
            let mut known = sub.known.lock();
            let now = state.md5(key).filter(|_| state.readable(&sub.caller, key));
            let change = match (now, known.get(key)) {
                (Some(md5), Some(held)) if *held == md5 => None,
                (Some(md5), Some(_)) => {
                    known.insert(key.clone(), md5);
                    Some(GroupChange::Changed)
                }
                (Some(md5), None) if known.len() < sub.max_keys => {
                    known.insert(key.clone(), md5);
                    Some(GroupChange::Added)
                }
                (Some(_), None) => None, // over the limit: ignored, as Nacos does
                (None, Some(_)) => {
                    known.remove(key);
                    Some(GroupChange::Removed)
                }
                (None, None) => None,
            };
            if let Some(change) = change {
                sub.subscriber.changed(key, change);
                told += 1;
            }
        }
        told
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cache(Mutex<HashMap<ConfigKey, Arc<str>>>);
    impl KeyState for Cache {
        fn md5(&self, key: &ConfigKey) -> Option<Arc<str>> {
            self.0.lock().get(key).cloned()
        }
        fn readable(&self, _caller: &Caller, key: &ConfigKey) -> bool {
            !key.data_id().starts_with("secret")
        }
        fn matching(&self, pattern: &GroupPattern) -> Vec<(ConfigKey, Arc<str>)> {
            let c = self.0.lock();
            c.iter()
                .filter(|(k, _)| pattern.matches(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }
    }

    #[derive(Default)]
    struct Rec(Mutex<Vec<String>>);
    impl GroupSubscriber for Rec {
        fn sync(&self, present: &[ConfigKey], gone: &[ConfigKey]) {
            let mut r = self.0.lock();
            r.extend(present.iter().map(|k| format!("sync+{}", k.data_id())));
            r.extend(gone.iter().map(|k| format!("sync-{}", k.data_id())));
        }
        fn changed(&self, key: &ConfigKey, change: GroupChange) {
            self.0.lock().push(format!("{change:?} {}", key.data_id()));
        }
    }

    fn k(d: &str) -> ConfigKey {
        ConfigKey::from_trusted("", "G", d)
    }

    #[test]
    fn listing_then_changes_filtered_and_limited() {
        let cache = Cache(Mutex::new(HashMap::new()));
        for d in ["app-1", "app-2", "secret-app", "other"] {
            cache.0.lock().insert(k(d), Arc::from("m1"));
        }
        let hub = PatternHub::new();
        let rec = Arc::new(Rec::default());
        let received: HashSet<ConfigKey> = [k("app-1"), k("app-gone")].into_iter().collect();
        let (sub, listed) = hub.subscribe(
            GroupPattern::parse(">>G>>app*").expect("valid"),
            Arc::new(Caller::internal()),
            rec.clone(),
            3,
            &received,
            &cache,
        );
        assert_eq!(
            listed,
            Listed {
                keys: 2,
                truncated: false
            }
        );
        assert_eq!(*rec.0.lock(), ["sync+app-2", "sync-app-gone"]);
        rec.0.lock().clear();

        cache.0.lock().insert(k("app-3"), Arc::from("m1"));
        assert_eq!(hub.publish(&k("app-3"), &cache), 1);
        cache.0.lock().insert(k("app-4"), Arc::from("m1"));
        assert_eq!(hub.publish(&k("app-4"), &cache), 0, "over the limit of 3");
        cache.0.lock().insert(k("app-1"), Arc::from("m2"));
        assert_eq!(hub.publish(&k("app-1"), &cache), 1);
        assert_eq!(hub.publish(&k("app-1"), &cache), 0, "same md5 again");
        cache.0.lock().remove(&k("app-2"));
        assert_eq!(hub.publish(&k("app-2"), &cache), 1);
        assert_eq!(hub.publish(&k("other"), &cache), 0);
        cache.0.lock().insert(k("secret-app2"), Arc::from("m1"));
        assert_eq!(hub.publish(&k("secret-app2"), &cache), 0, "not readable");
        assert_eq!(
            *rec.0.lock(),
            ["Added app-3", "Changed app-1", "Removed app-2"]
        );
        hub.unsubscribe(&sub);
        assert_eq!(hub.len(), 0);
        assert_eq!(hub.publish(&k("app-1"), &cache), 0);
    }
}
