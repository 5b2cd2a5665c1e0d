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
//! The change hub behind it stays private to the service.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use nacelle_core::Action;
use nacelle_core::{Caller, ConfigKey, CoreError};
use parking_lot::Mutex;

pub use crate::hub::{ChangeEvent, Subscriber};
use crate::service::ConfigService;

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

/// The keys one listener watches; dropping it unsubscribes from all of them.
pub struct Watch {
    service: ConfigService,
    caller: Arc<Caller>,
    /// The caller's IP as listener queries show it.
    ip: Arc<str>,
    /// The hub's id of this watcher.
    id: u64,
    keys: Mutex<HashSet<ConfigKey>>,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("id", &self.id)
            .field("ip", &self.ip)
            .field("keys", &self.keys.lock().len())
            .finish()
    }
}

impl ConfigService {
    /// Opens an empty watch for `caller`.
    /// Opening one checks nothing of the caller's credentials (a gRPC connection opens
    /// its watch at setup, before any request): every [`Watch::add`] is authorized.
    pub fn watch(&self, caller: &Caller) -> Result<Watch, CoreError> {
        self.guard()?;
        Ok(Watch {
            service: self.clone(),
            caller: Arc::new(caller.clone()),
            ip: caller.ip_string().into(),
            id: self.inner.hub.next_watcher_id(),
            keys: Mutex::new(HashSet::new()),
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
        let distinct: HashSet<&ConfigKey> = items.iter().map(|(k, _)| k).collect();
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

    /// Client IP → md5 reported, for every listener of `key`.
    pub fn listeners_of(
        &self,
        caller: &Caller,
        key: &ConfigKey,
    ) -> Result<Vec<(String, String)>, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        Ok(self.inner.hub.listeners_of(key))
    }

    /// Key → md5 reported, for every key that a client at `ip` listens to.
    pub fn keys_of_ip(
        &self,
        caller: &Caller,
        ip: &str,
    ) -> Result<Vec<(ConfigKey, String)>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let mut keys = self.inner.hub.keys_of_ip(ip);
        keys.retain(|(key, _)| self.may_read(caller, key));
        Ok(keys)
    }

    /// Number of (listener, key) pairs watched, for stats.
    pub fn listener_count(&self) -> u64 {
        self.inner.hub.listener_count()
    }

    /// Number of keys with at least one listener, for stats.
    pub fn watched_keys(&self) -> usize {
        self.inner.hub.watched_keys()
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
        let fresh: HashSet<&ConfigKey> = items
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
                self.ip.clone(),
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

    /// Stops watching every key; returns how many were watched.
    pub fn clear(&self) -> usize {
        let keys: Vec<ConfigKey> = self.keys.lock().drain().collect();
        for key in &keys {
            self.service.inner.hub.unsubscribe(key, self.id);
        }
        keys.len()
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

impl Drop for Watch {
    fn drop(&mut self) {
        self.clear();
    }
}
