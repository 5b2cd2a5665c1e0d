//! Listening as a service operation. A [`Watch`] is the set of keys one listener watches —
//! a held long poll, or a gRPC connection — on behalf of one [`Caller`]. The service owns
//! the rules every protocol shares:
//! - the key limit: at most [`crate::Limits::max_listen_keys`] distinct keys per watch
//!   (a long poll is one watch, a gRPC connection is one watch over all its listen
//!   requests); a request that would exceed it changes nothing;
//! - readiness: nothing is watched before the cache is loaded or after shutdown began;
//! - subscribe-then-compare: a key is subscribed *before* its md5 is compared with the
//!   caller's, so a change landing in between is both reported and pushed (never lost);
//! - the comparison itself: against the md5 of what this caller would be served.
//!
//! A watch also holds group patterns (`namespace>>group>>dataId`, Nacos 3.0's fuzzy
//! watch): [`Watch::watch_pattern`] owns their limits (patterns per watch, keys per
//! pattern), the listing of what a pattern covers and the read filter (a caller hears only
//! of keys it may read).
//!
//! The change hub and the pattern hub behind it stay private to the service.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use nacelle_core::Action;
use nacelle_core::{Caller, ConfigKey, CoreError, GroupPattern, NamespaceId};
use parking_lot::Mutex;

pub use crate::config::hub::{ChangeEvent, Subscriber};
use crate::config::key_map::KeySet;
use crate::config::limits::{HoldRefused, PollHold};
pub use crate::config::patterns::{GroupChange, GroupSubscriber};
use crate::config::patterns::{KeyState, PatternSub};
use crate::config::service::ConfigService;

/// What [`Watch::watch_pattern`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternWatched {
    /// How many keys the pattern covers for this caller (at most
    /// [`crate::Limits::max_pattern_keys`]).
    pub keys: usize,
    /// Whether more keys matched than the limit: the watch is in place over the first
    /// keys (in key order), and a key beyond them is not reported until others go.
    pub truncated: bool,
}

/// Why [`Watch::watch_pattern`] refused a pattern.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// The watch already has [`crate::Limits::max_watch_patterns`] patterns.
    #[error("fuzzy watch pattern over limit: at most {max} patterns per connection")]
    TooManyPatterns { max: usize },
    /// Any other refusal: a bad pattern, the caller's credentials, readiness.
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// One key to watch: the md5 the client holds (`""` when it holds nothing) and who is told
/// of its changes.
pub struct WatchItem {
    pub key: ConfigKey,
    pub md5: String,
    pub subscriber: Arc<dyn Subscriber>,
}

impl fmt::Debug for WatchItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchItem")
            .field("key", &self.key)
            .field("md5", &self.md5)
            .finish()
    }
}

/// What [`Watch::add`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Added {
    /// The keys whose md5 differs from the one the caller holds: the caller must re-read
    /// them.
    pub changed: Vec<ConfigKey>,
    /// How many keys were new to this watch (the others had their md5 updated).
    pub new_keys: usize,
}

/// One listener of one key as the console shows it: who listens (IP, app, protocol,
/// labels), the md5 it holds, and what the service would serve it now.
#[derive(Debug, Clone)]
pub struct ListenerView {
    pub key: ConfigKey,
    pub listener: Arc<Caller>,
    /// The md5 the listener holds (reported, then what it was last told of).
    pub held_md5: String,
    /// The md5 of the variant it would be served now (`""`: nothing).
    pub served_md5: String,
    /// The gray variant it would be served, `None` for the formal config.
    pub gray: Option<Arc<str>>,
    /// Whether what it holds is what it would be served.
    pub in_sync: bool,
}

/// The keys one listener watches; dropping it unsubscribes from all of them.
pub struct Watch {
    service: ConfigService,
    caller: Arc<Caller>,
    /// The hub's id of this watcher.
    id: u64,
    keys: Mutex<KeySet<ConfigKey>>,
    /// The group patterns watched, each with its subscription in the pattern hub.
    patterns: Mutex<HashMap<GroupPattern, Arc<PatternSub>>>,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("id", &self.id)
            .field("ip", &self.caller.ip)
            .field("keys", &self.keys.lock().len())
            .field("patterns", &self.patterns.lock().len())
            .finish()
    }
}

impl ConfigService {
    /// A place for one held long poll of `caller`, within `Limits::max_held_polls` in all
    /// and `max_held_polls_per_ip` for the caller's IP; the place is given back when the
    /// returned hold is dropped. Refused: [`HoldRefused`], which adapters answer as
    /// "unavailable, retry" (HTTP 503).
    pub fn hold_poll(&self, caller: &Caller) -> Result<PollHold, HoldRefused> {
        let limits = &self.inner.limits;
        self.inner.held_polls.take(
            caller.ip,
            limits.max_held_polls,
            limits.max_held_polls_per_ip,
        )
    }

    /// Opens an empty watch for `caller`.
    /// Opening one checks nothing of the caller's credentials (a gRPC connection opens
    /// its watch at setup, before any request): every [`Watch::add`] is authorized.
    pub fn watch(&self, caller: &Caller) -> Result<Watch, CoreError> {
        self.guard()?;
        Ok(Watch {
            service: self.clone(),
            caller: Arc::new(caller.clone()),
            id: self.inner.hub.next_watcher_id(),
            keys: Mutex::new(KeySet::default()),
            patterns: Mutex::new(HashMap::new()),
        })
    }

    /// The keys among `items` (key, md5 the caller holds) whose md5 differs from what the
    /// caller would be served, without watching them (a poll that does not wait). The same
    /// key limit as a watch applies.
    pub fn changed(
        &self,
        caller: &Caller,
        items: &[(ConfigKey, &str)],
    ) -> Result<Vec<ConfigKey>, CoreError> {
        self.guard()?;
        let distinct: KeySet<&ConfigKey> = items.iter().map(|(k, _)| k).collect();
        self.check_listen_limit(distinct.len())?;
        for key in &distinct {
            self.authorize_key(caller, key, Action::Read)?;
        }
        Ok(items
            .iter()
            .filter(|(k, md5)| !self.holds_current(caller, k, md5))
            .map(|(k, _)| k.clone())
            .collect())
    }

    pub(crate) fn listener_view(
        &self,
        key: ConfigKey,
        listener: Arc<Caller>,
        held: &str,
    ) -> ListenerView {
        let served = self.select(&listener, &key, None);
        let in_sync = self.holds_current(&listener, &key, held);
        ListenerView {
            served_md5: served
                .as_ref()
                .map(|s| s.config.md5.clone())
                .unwrap_or_default(),
            gray: served.and_then(|s| s.gray),
            held_md5: held.to_string(),
            in_sync,
            listener,
            key,
        }
    }

    fn check_listen_limit(&self, keys: usize) -> Result<(), CoreError> {
        let max = self.inner.limits.max_listen_keys;
        if keys > max {
            return Err(CoreError::invalid(format!(
                "too many listening configs, over {max}"
            )));
        }
        Ok(())
    }
}

impl Watch {
    /// Watches `items` (or updates the md5 of keys already watched) and returns which of
    /// them changed relative to the md5 the caller holds. Validates the whole request
    /// first: if the watch would exceed the key limit, or `requester` (the caller of this
    /// request, whose credentials may differ from the watch's first request) may not read
    /// one of the keys, nothing changes.
    pub fn add(&self, requester: &Caller, items: Vec<WatchItem>) -> Result<Added, CoreError> {
        let service = &self.service;
        service.guard()?;
        for item in &items {
            service.authorize_key(requester, &item.key, Action::Read)?;
        }
        let mut keys = self.keys.lock();
        let fresh: KeySet<&ConfigKey> = items
            .iter()
            .map(|i| &i.key)
            .filter(|k| !keys.contains(*k))
            .collect();
        service.check_listen_limit(keys.len() + fresh.len())?;
        let hub = &service.inner.hub;
        let mut added = Added::default();
        for item in items {
            // Subscribe first, then compare: a change landing in between is pushed.
            if hub.subscribe(
                self.id,
                &item.key,
                item.md5.clone(),
                self.caller.clone(),
                item.subscriber,
            ) {
                added.new_keys += 1;
            }
            keys.insert(item.key.clone());
            if !service.holds_current(&self.caller, &item.key, &item.md5) {
                added.changed.push(item.key);
            }
        }
        Ok(added)
    }

    /// Stops watching `key`; returns whether it was watched.
    pub fn remove(&self, key: &ConfigKey) -> bool {
        let removed = self.keys.lock().remove(key);
        if removed {
            self.service.inner.hub.unsubscribe(key, self.id);
        }
        removed
    }

    /// Watches every key `pattern` (`namespace>>group>>dataId`) covers that `requester`
    /// may read. `received` are the keys the client says it already holds: before this
    /// returns, `subscriber.sync` is told the covered keys it does not hold and the held
    /// keys that are not covered (any more); then every change of a covered key reaches
    /// `subscriber.changed` (added, changed, removed — a key the caller may not read is
    /// never reported). Watching a pattern already watched replaces it and lists again.
    /// Refused when the watch already has [`crate::Limits::max_watch_patterns`] patterns.
    pub fn watch_pattern(
        &self,
        requester: &Caller,
        pattern: &str,
        received: &HashSet<ConfigKey>,
        subscriber: Arc<dyn GroupSubscriber>,
    ) -> Result<PatternWatched, PatternError> {
        let service = &self.service;
        service.guard()?;
        service.authenticated(requester)?;
        let pattern = GroupPattern::parse(pattern)?;
        let limits = &service.inner.limits;
        let hub = &service.inner.patterns;
        let mut patterns = self.patterns.lock();
        if let Some(old) = patterns.remove(&pattern) {
            hub.unsubscribe(&old);
        } else if patterns.len() >= limits.max_watch_patterns {
            return Err(PatternError::TooManyPatterns {
                max: limits.max_watch_patterns,
            });
        }
        let (sub, listed) = hub.subscribe(
            pattern.clone(),
            Arc::new(requester.clone()),
            subscriber,
            limits.max_pattern_keys,
            received,
            service,
        );
        patterns.insert(pattern, sub);
        Ok(PatternWatched {
            keys: listed.keys,
            truncated: listed.truncated,
        })
    }

    /// Stops watching `pattern`; returns whether it was watched.
    pub fn unwatch_pattern(&self, pattern: &str) -> Result<bool, CoreError> {
        let pattern = GroupPattern::parse(pattern)?;
        let removed = self.patterns.lock().remove(&pattern);
        if let Some(sub) = &removed {
            self.service.inner.patterns.unsubscribe(sub);
        }
        Ok(removed.is_some())
    }

    /// Number of group patterns watched.
    pub fn pattern_count(&self) -> usize {
        self.patterns.lock().len()
    }

    /// Stops watching every key and every pattern; returns how many keys were watched.
    pub fn clear(&self) -> usize {
        let subs: Vec<Arc<PatternSub>> = self.patterns.lock().drain().map(|(_, s)| s).collect();
        for sub in &subs {
            self.service.inner.patterns.unsubscribe(sub);
        }
        // Under the key set's lock, as `add` subscribes (set, then hub: one lock order), so
        // that no copy of the keys is made on the way out of every released poll.
        let mut keys = self.keys.lock();
        let n = keys.len();
        for key in keys.drain() {
            self.service.inner.hub.unsubscribe(&key, self.id);
        }
        n
    }

    /// Number of keys watched.
    pub fn len(&self) -> usize {
        self.keys.lock().len()
    }

    /// Whether no key is watched.
    pub fn is_empty(&self) -> bool {
        self.keys.lock().is_empty()
    }

    /// The caller this watch acts for.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}

/// What a pattern subscription reads of a key: the formal config in the cache (a pattern
/// reports keys, not variants) and the caller's read permission.
impl KeyState for ConfigService {
    fn md5(&self, key: &ConfigKey) -> Option<Arc<str>> {
        self.inner.cache.get(key).map(|c| Arc::from(c.md5.as_str()))
    }

    fn readable(&self, caller: &Caller, key: &ConfigKey) -> bool {
        self.may_read(caller, key)
    }

    fn matching(&self, pattern: &GroupPattern) -> Vec<(ConfigKey, Arc<str>)> {
        self.inner
            .cache
            .iter()
            .filter(|e| pattern.matches(e.key()))
            .map(|e| (e.key().clone(), Arc::from(e.value().md5.as_str())))
            .collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The listener queries for one caller (who listens to a key, what a client IP listens
/// to, and in sync or not): what [`ConfigService::listeners`] hands out once the service
/// is ready and the caller's credentials are good. Each query shows only keys the caller
/// may read.
#[derive(Debug, Clone, Copy)]
pub struct Listeners<'a> {
    pub(crate) service: &'a ConfigService,
    pub(crate) caller: &'a Caller,
}

impl ConfigService {
    /// The listener queries for `caller`: refused unless the service is ready and the
    /// caller's credentials are good (or authentication is off).
    pub fn listeners<'a>(&'a self, caller: &'a Caller) -> Result<Listeners<'a>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        Ok(Listeners {
            service: self,
            caller,
        })
    }
}

impl Listeners<'_> {
    /// Number of (listener, key) pairs watched, for stats.
    pub fn count(&self) -> u64 {
        self.service.inner.hub.listener_count()
    }

    /// Number of (watch, group pattern) subscriptions, for stats.
    pub fn watched_patterns(&self) -> usize {
        self.service.inner.patterns.len()
    }

    /// Client IP → md5 reported, for every listener of `key`.
    pub fn of_key(&self, key: &ConfigKey) -> Result<Vec<(String, String)>, CoreError> {
        self.service.authorize_key(self.caller, key, Action::Read)?;
        Ok(self.service.inner.hub.listeners_of(key))
    }

    /// Key → md5 reported, for every key that a client at `ip` listens to.
    pub fn keys_of_ip(&self, ip: &str) -> Result<Vec<(ConfigKey, String)>, CoreError> {
        let mut keys = self.service.inner.hub.keys_of_ip(ip);
        keys.retain(|(key, _)| self.service.may_read(self.caller, key));
        Ok(keys)
    }

    /// [`Listeners::keys_of_ip`] narrowed as Nacos 3's listener query by IP narrows
    /// it: every key with `all`; otherwise the keys of the default namespace and, when
    /// `namespace` is given, of that namespace. (Nacos matches the namespace as a
    /// substring of the group key; an exact match cannot show another namespace's keys.)
    pub fn keys_of_ip_in(
        &self,
        ip: &str,
        all: bool,
        namespace: Option<&NamespaceId>,
    ) -> Result<Vec<(ConfigKey, String)>, CoreError> {
        let mut keys = self.keys_of_ip(ip)?;
        if !all {
            keys.retain(|(key, _)| {
                key.namespace().is_default() || namespace.is_some_and(|n| key.namespace() == n)
            });
        }
        Ok(keys)
    }

    /// Every listener of `key` with what it holds and what it would be served now
    /// (variant and md5), for the console.
    pub fn views_of_key(&self, key: &ConfigKey) -> Result<Vec<ListenerView>, CoreError> {
        self.service.authorize_key(self.caller, key, Action::Read)?;
        let subs = self.service.inner.hub.subscribers_of(key);
        Ok(subs
            .into_iter()
            .map(|(who, held)| self.service.listener_view(key.clone(), who, &held))
            .collect())
    }

    /// Every key a client at `ip` listens to that `caller` may read, as
    /// [`Listeners::views_of_key`] shows it.
    pub fn views_of_ip(&self, ip: &str) -> Result<Vec<ListenerView>, CoreError> {
        let subs = self.service.inner.hub.subscriptions_of_ip(ip);
        Ok(subs
            .into_iter()
            .filter(|(key, _, _)| self.service.may_read(self.caller, key))
            .map(|(key, who, held)| self.service.listener_view(key, who, &held))
            .collect())
    }
}
