//! [`ConfigService`]: the state every operation shares, start-up (`load`), the one
//! readiness guard, shutdown and the wiring hooks. The operations live one concern per
//! file: [`crate::read`], [`crate::write`], [`crate::history`], [`crate::namespaces`],
//! [`crate::watch`].
//!
//! Write path: validate → take the key's write lock → store (one transaction) → update the
//! cache if the revision is newer than what it holds → release the lock → notify that key's
//! subscribers (before the call returns, or — for a key with more than
//! [`crate::hub::INLINE_WALK_MAX`] subscribers — on a task of its own).
//! Read path: a map lookup returning a shared, immutable `Arc<StoredConfig>`.
//!
//! Every operation takes the [`Caller`](nacelle_core::Caller) it acts for and starts with
//! [`ConfigService::guard`]: nothing is served before the cache is loaded or after shutdown
//! began.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use dashmap::DashMap;
use nacelle_core::{ConfigKey, ConfigStore, CoreError, StoredConfig};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::cipher::CipherState;
use crate::cluster::{MemberInfo, MembershipView};
use crate::hub::WatchHub;
use crate::limits::Limits;

/// Number of write-lock stripes; writes of different keys rarely share one.
const WRITE_STRIPES: usize = 256;

/// The config service. Cheap to clone: every field is shared.
#[derive(Clone)]
pub struct ConfigService {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn ConfigStore>,
    /// The formal config of every key, loaded at start; reads never touch the database.
    pub(crate) cache: DashMap<ConfigKey, Arc<StoredConfig>>,
    /// Who listens to which key.
    pub(crate) hub: Arc<WatchHub>,
    pub(crate) limits: Limits,
    /// The master key and the opened versions of encrypted configs (`crate::cipher`).
    pub(crate) cipher: CipherState,
    ready: AtomicBool,
    /// Serialises writes of one key so that the cache sees them in commit order and a
    /// reload never races a write of the same key.
    write_locks: Box<[Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
    shutdown: CancellationToken,
    /// Told of every write this node commits (the cluster notifier), set once at wiring.
    commit_observer: OnceLock<Arc<dyn CommitObserver>>,
    /// The cluster membership, when this node runs in a cluster.
    membership: OnceLock<Arc<dyn MembershipView>>,
}

/// Learns of every write committed through this service, after the commit and after local
/// listeners were notified. Used to tell the other cluster members which key changed.
pub trait CommitObserver: Send + Sync + 'static {
    /// `key` changed in the database; `revision` is the history `nid` of the change.
    fn committed(&self, key: &ConfigKey, revision: i64);
}

impl fmt::Debug for ConfigService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigService")
            .field("store", &self.inner.store.backend())
            .field("configs", &self.inner.cache.len())
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl ConfigService {
    /// A service over `store`; not ready until [`ConfigService::load`] completes.
    pub fn new(store: Arc<dyn ConfigStore>, limits: Limits) -> Self {
        let write_locks = (0..WRITE_STRIPES).map(|_| Mutex::new(())).collect();
        ConfigService {
            inner: Arc::new(Inner {
                store,
                cache: DashMap::new(),
                hub: Arc::new(WatchHub::new()),
                cipher: CipherState::new(limits.cipher_master_key.clone()),
                limits,
                ready: AtomicBool::new(false),
                write_locks,
                hasher: Default::default(),
                shutdown: CancellationToken::new(),
                commit_observer: OnceLock::new(),
                membership: OnceLock::new(),
            }),
        }
    }

    /// Loads every config into memory and marks the service ready.
    pub async fn load(&self) -> Result<usize, CoreError> {
        let all = self.inner.store.load_all().await?;
        let n = all.len();
        for cfg in all {
            self.apply(Arc::new(cfg));
        }
        self.inner.ready.store(true, Ordering::Release);
        tracing::info!(
            configs = n,
            backend = self.inner.store.backend(),
            "config cache loaded"
        );
        self.warn_about_cipher_configs();
        Ok(n)
    }

    /// Installs the observer told of every local commit; only the first call takes effect.
    pub fn set_commit_observer(&self, observer: Arc<dyn CommitObserver>) -> bool {
        self.inner.commit_observer.set(observer).is_ok()
    }

    /// Installs the cluster membership view; only the first call takes effect.
    pub fn set_membership(&self, view: Arc<dyn MembershipView>) -> bool {
        self.inner.membership.set(view).is_ok()
    }

    /// The cluster members, or `None` when this node runs alone.
    pub fn members(&self) -> Option<Vec<MemberInfo>> {
        self.inner.membership.get().map(|m| m.members())
    }

    pub(crate) fn committed(&self, key: &ConfigKey, revision: i64) {
        if let Some(o) = self.inner.commit_observer.get() {
            o.committed(key, revision);
        }
    }

    /// Whether the cache is loaded (and shutdown has not begun).
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire) && !self.inner.shutdown.is_cancelled()
    }

    /// The one readiness guard every operation starts with: fails
    /// [`CoreError::NotReady`] while the cache is loading and once shutdown began.
    pub(crate) fn guard(&self) -> Result<(), CoreError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(CoreError::NotReady("shutting down".into()));
        }
        if !self.inner.ready.load(Ordering::Acquire) {
            return Err(CoreError::NotReady("config cache is loading".into()));
        }
        Ok(())
    }

    /// The store, for the change-log follower.
    pub(crate) fn store(&self) -> &Arc<dyn ConfigStore> {
        &self.inner.store
    }

    /// The newest history `nid` in the database: where following the change log starts.
    /// Read it *before* [`ConfigService::load`] so no change falls between the two.
    pub async fn change_log_position(&self) -> Result<i64, CoreError> {
        Ok(self.inner.store.max_history_nid().await?)
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The storage backend's name.
    pub fn backend(&self) -> &'static str {
        self.inner.store.backend()
    }

    /// Cancelled when the server shuts down; held long polls answer then.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// Starts shutting down: new operations fail, waiters wake up.
    pub fn begin_shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Number of configs in memory.
    pub fn config_count(&self) -> usize {
        self.inner.cache.len()
    }

    /// Checks the database answers (readiness probes; no caller, no guard).
    pub async fn ping_store(&self) -> Result<(), CoreError> {
        Ok(self.inner.store.ping().await?)
    }

    pub(crate) fn write_lock(&self, key: &ConfigKey) -> &Mutex<()> {
        let h = self.inner.hasher.hash_one(key);
        &self.inner.write_locks[(h as usize) % WRITE_STRIPES]
    }

    /// Puts `cfg` in the cache unless the cache already holds a newer revision.
    /// Returns whether the cache changed.
    pub(crate) fn apply(&self, cfg: Arc<StoredConfig>) -> bool {
        use dashmap::mapref::entry::Entry;
        match self.inner.cache.entry(cfg.key.clone()) {
            Entry::Occupied(mut o) => {
                if o.get().revision > cfg.revision {
                    return false;
                }
                o.insert(cfg);
                true
            }
            Entry::Vacant(v) => {
                v.insert(cfg);
                true
            }
        }
    }
}
