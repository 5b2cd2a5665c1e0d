//! [`ConfigService`]: the state every operation shares, start-up (`load`), the one
//! readiness guard, shutdown and the wiring hooks. The operations live one concern per
//! file: [`crate::config::read`], [`crate::config::write`], [`crate::config::history`], [`crate::config::namespaces`],
//! [`crate::config::watch`].
//!
//! Write path: validate → take the key's write lock → store (one transaction) → update the
//! cache if the revision is newer than what it holds → release the lock → notify that key's
//! subscribers (before the call returns, or — for a key with more than
//! [`crate::config::hub::INLINE_WALK_MAX`] subscribers — on a task of its own).
//! Read path: a map lookup returning a shared, immutable `Arc<StoredConfig>`.
//!
//! Every operation takes the [`Caller`](nacelle_core::Caller) it acts for and starts with
//! [`ConfigService::guard`]: nothing is served before the cache is loaded or after shutdown
//! began.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use nacelle_core::{
    ConfigKey, ConfigStore, CoreError, Gray, GraySet, GraySpec, StoreError, StoredConfig,
    StoredGray,
};
use nacelle_metrics::{names, Metrics, Samples, Source, StoreOp};
use tokio::sync::{Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

use crate::config::audit::log::{AuditLog, AuditSubscriber};
use crate::config::audit::Audited;
use crate::config::auth::state::AuthState;
use crate::config::cipher_state::CipherState;
use crate::config::cluster::{MemberInfo, MembershipView, CLUSTER_RESOURCE};
use crate::config::gates::{ContentGate, Gates, ReviewPolicies};
use crate::config::hub::WatchHub;
use crate::config::limits::{HeldPolls, Limits, RateLimiter};
use crate::config::patterns::PatternHub;
use nacelle_core::audit::AuditAction;
use nacelle_core::Caller;

use crate::config::key_map::KeyMap;

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
    pub(crate) cache: KeyMap<Arc<StoredConfig>>,
    /// The gray variants of the keys that have any, loaded at start like formal configs.
    /// Most keys have none, so a read of such a key costs one failed lookup here.
    pub(crate) grays: KeyMap<Arc<GraySet>>,
    /// Who listens to which key.
    pub(crate) hub: Arc<WatchHub>,
    /// Who watches which group pattern (wildcard watches).
    pub(crate) patterns: PatternHub,
    pub(crate) limits: Limits,
    /// Long polls held now (`Limits::max_held_polls`, `max_held_polls_per_ip`).
    pub(crate) held_polls: Arc<HeldPolls>,
    /// The write rate limit per client IP (`Limits::write_rate_per_ip`); `None`: off.
    pub(crate) write_rate: Option<RateLimiter>,
    /// The master key and the opened versions of encrypted configs (`crate::config::cipher`).
    pub(crate) cipher: CipherState,
    /// Users, roles, permissions, verified tokens and the login throttle (`crate::config::auth`).
    pub(crate) auth: AuthState,
    /// What features decide for the core (schemas, review policies), installed at wiring.
    pub(crate) gates: Gates,
    ready: AtomicBool,
    /// Serialises writes of one key so that the cache sees them in commit order and a
    /// reload never races a write of the same key.
    write_locks: Box<[Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
    shutdown: CancellationToken,
    /// Told of every write this node commits (the cluster notifier), set once at wiring.
    pub(crate) commit_observer: OnceLock<Arc<dyn CommitObserver>>,
    /// The cluster membership, when this node runs in a cluster.
    pub(crate) membership: OnceLock<Arc<dyn MembershipView>>,
    /// Asks the other members for their part of a live view (installed by the cluster).
    pub(crate) peer_queries: OnceLock<Arc<dyn crate::config::gates::PeerQueries>>,
    /// This server's metrics; the adapters record theirs through [`ConfigService::metrics`].
    metrics: Metrics,
    /// The audit log: events on their way to the database and to the webhooks
    /// (`crate::audit`).
    pub(crate) audit: AuditLog,
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
        let metrics = Metrics::new();
        let audit = AuditLog::new(metrics.clone());
        let service = ConfigService {
            inner: Arc::new(Inner {
                store,
                cache: KeyMap::default(),
                grays: KeyMap::default(),
                hub: Arc::new(WatchHub::new()),
                patterns: PatternHub::new(),
                cipher: CipherState::new(limits.cipher_master_key.clone()),
                write_rate: RateLimiter::new(limits.write_rate_per_ip, limits.write_burst_per_ip),
                auth: AuthState::new(),
                gates: Gates::default(),
                held_polls: Arc::default(),
                limits,
                ready: AtomicBool::new(false),
                write_locks,
                hasher: Default::default(),
                shutdown: CancellationToken::new(),
                commit_observer: OnceLock::new(),
                membership: OnceLock::new(),
                peer_queries: OnceLock::new(),
                metrics,
                audit,
            }),
        };
        // Weak: the metrics live inside the state they read.
        let state = ServiceGauges(Arc::downgrade(&service.inner));
        service.inner.metrics.add_source("service", state);
        service
    }

    /// This server's metrics (one registry per service, so per server).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Awaits one store call, recording its duration and failure under `op` (and adding
    /// it to the current request's store time). A compare-and-set mismatch is an answer,
    /// not a failure.
    pub(crate) async fn store_call<T>(
        &self,
        op: StoreOp,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = call.await;
        let ok = !matches!(&result, Err(e) if !matches!(e, StoreError::CasMismatch));
        self.inner.metrics.store_call(op, started.elapsed(), ok);
        result
    }

    /// Loads every config and every gray variant into memory and marks the service ready.
    pub async fn load(&self) -> Result<usize, CoreError> {
        let all = self
            .store_call(StoreOp::LoadAll, self.inner.store.load_all())
            .await?;
        let n = all.len();
        for cfg in all {
            self.apply(Arc::new(cfg));
        }
        let grays = self
            .store_call(StoreOp::GrayRead, self.inner.store.load_grays())
            .await?;
        let gray_count = grays.len();
        let mut by_key: HashMap<ConfigKey, Vec<StoredGray>> = HashMap::new();
        for g in grays {
            by_key.entry(g.config.key.clone()).or_default().push(g);
        }
        for (key, rows) in by_key {
            self.set_grays(&key, rows);
        }
        self.refresh_identities().await?;
        self.inner.ready.store(true, Ordering::Release);
        tracing::info!(
            configs = n,
            grays = gray_count,
            backend = self.inner.store.backend(),
            "config cache loaded"
        );
        self.warn_about_cipher_configs();
        Ok(n)
    }

    /// Replaces the gray variants of `key` in memory by `rows` (as the database holds
    /// them). A row whose rule cannot be parsed is left out with a warning. Returns
    /// whether what the cache holds changed.
    pub(crate) fn set_grays(&self, key: &ConfigKey, rows: Vec<StoredGray>) -> bool {
        let config_type = self
            .inner
            .cache
            .get(key)
            .map(|c| c.config_type)
            .unwrap_or_default();
        let mut grays = Vec::with_capacity(rows.len());
        for row in rows {
            let spec = match GraySpec::from_stored(
                &row.name,
                &row.rule_type,
                &row.rule_expr,
                row.priority,
            ) {
                Ok(spec) => spec,
                Err(e) => {
                    tracing::warn!(
                        namespace = key.namespace().as_str(),
                        group = key.group(),
                        data_id = key.data_id(),
                        gray = row.name,
                        "ignoring a gray variant whose rule cannot be read: {e}"
                    );
                    continue;
                }
            };
            let mut config = row.config;
            // Gray rows have no type of their own: they are served as the formal type.
            config.config_type = config_type;
            grays.push(Gray {
                name: spec.name.into(),
                rule: spec.rule,
                priority: spec.priority,
                config: Arc::new(config),
            });
        }
        let old = self.inner.grays.get(key).map(|g| g.clone());
        let same = match &old {
            Some(old) => {
                old.len() == grays.len()
                    && old.iter().all(|o| {
                        grays.iter().any(|g| {
                            g.name == o.name
                                && g.config.md5 == o.config.md5
                                && g.rule == o.rule
                                && g.priority == o.priority
                        })
                    })
            }
            None => grays.is_empty(),
        };
        if grays.is_empty() {
            self.inner.grays.remove(key);
        } else {
            self.inner
                .grays
                .insert(key.clone(), Arc::new(GraySet::new(grays)));
        }
        !same
    }

    /// Installs the content gate every publish passes (the schemas); only the first call
    /// takes effect.
    pub(crate) fn set_content_gate(&self, gate: Arc<dyn ContentGate>) -> bool {
        self.inner.gates.content.set(gate).is_ok()
    }

    /// Installs the review policies every direct write is checked against; only the first
    /// call takes effect.
    pub(crate) fn set_review_policies(&self, policies: Arc<dyn ReviewPolicies>) -> bool {
        self.inner.gates.review.set(policies).is_ok()
    }

    /// Records `event` for `caller` in the audit trail ([`AuditLog::record`]).
    pub(crate) fn audit(&self, caller: &Caller, event: Audited<'_>) {
        self.inner.audit.record(caller, event);
    }

    /// The audit entry of an operation on `target` that succeeded (`ok`) or was not
    /// applied.
    pub(crate) fn audit_outcome(
        &self,
        action: AuditAction,
        event: &str,
        caller: &Caller,
        target: &str,
        ok: bool,
    ) {
        let mut entry = Audited::new(action, event, target.to_string());
        if !ok {
            entry = entry.refused("not applied");
        }
        self.audit(caller, entry);
    }

    /// Installs the subscriber of the audit log (the webhooks); only the first call takes
    /// effect.
    pub(crate) fn subscribe_audit(&self, subscriber: Arc<dyn AuditSubscriber>) -> bool {
        self.inner.audit.subscriber.set(subscriber).is_ok()
    }

    /// The cluster members, or `None` when this node runs alone.
    pub(crate) fn members(&self) -> Option<Vec<MemberInfo>> {
        self.inner.membership.get().map(|m| m.members())
    }

    /// The cluster members for `caller` (`None` when this node runs alone). Their
    /// addresses, versions and counters need what Nacos's `NacosClusterController` (and
    /// Nacos 3's console) asks for: `r` on the resource [`CLUSTER_RESOURCE`], which
    /// `ROLE_ADMIN` holds and other users only through a permission naming it; members
    /// ask as [`Caller::internal`] (the adapter checked their cluster secret).
    pub fn cluster_members(&self, caller: &Caller) -> Result<Option<Vec<MemberInfo>>, CoreError> {
        self.authorize_named(caller, nacelle_core::Action::Read, CLUSTER_RESOURCE)?;
        Ok(self.members())
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

    /// Starts shutting down: new operations fail, waiters wake up. The token is cancelled
    /// before the subscribers are told ([`crate::Subscriber::close`]): a listener that subscribes
    /// and then finds the token not cancelled is among those told.
    pub fn begin_shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.hub.close_all();
    }

    /// Runs `step` every `period` until shutdown begins: the periodic re-reads of what
    /// other nodes sharing the database change (users, policies, schemas).
    pub(crate) async fn periodically<F, Fut>(&self, period: std::time::Duration, mut step: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        let token = self.shutdown_token().clone();
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            step().await;
        }
    }

    /// Number of configs in memory.
    pub fn config_count(&self) -> usize {
        self.inner.cache.len()
    }

    pub(crate) fn write_lock(&self, key: &ConfigKey) -> &Mutex<()> {
        &self.inner.write_locks[self.stripe_of(key)]
    }

    fn stripe_of(&self, key: &ConfigKey) -> usize {
        let h = self.inner.hasher.hash_one(key);
        (h as usize) % WRITE_STRIPES
    }

    /// The write locks of every key of a batch, each stripe once, taken in stripe order:
    /// a batch never waits for a stripe while holding a higher one, and a single write
    /// holds one stripe only, so batches and single writes cannot deadlock.
    pub(crate) async fn write_locks_of<'a>(
        &self,
        keys: impl Iterator<Item = &'a ConfigKey>,
    ) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = keys.map(|k| self.stripe_of(k)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut guards = Vec::with_capacity(stripes.len());
        for s in stripes {
            guards.push(self.inner.write_locks[s].lock().await);
        }
        guards
    }

    /// The revision the cache holds for `key`'s formal config (0 when it has none).
    pub(crate) fn revision_of(&self, key: &ConfigKey) -> i64 {
        self.inner
            .cache
            .get(key)
            .map(|c| c.revision)
            .unwrap_or_default()
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

/// The service's scrape-time gauges: readiness, cache, hub and cluster members.
struct ServiceGauges(Weak<Inner>);

impl Source for ServiceGauges {
    fn collect(&self, out: &mut Samples) {
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        let ready = inner.ready.load(Ordering::Acquire) && !inner.shutdown.is_cancelled();
        out.set(names::READY, if ready { 1.0 } else { 0.0 });
        out.set(names::CONFIGS, inner.cache.len() as f64);
        out.set(names::LISTENED_KEYS, inner.hub.watched_keys() as f64);
        out.set(names::LISTENERS, inner.hub.listener_count() as f64);
        out.set(names::HELD_LONG_POLLS, inner.held_polls.count() as f64);
        let Some(view) = inner.membership.get() else {
            return;
        };
        // Members are configured (`--members`, cluster.conf): a bounded label.
        for m in view.members().into_iter().filter(|m| !m.is_self) {
            let member = m.address();
            let up = if m.state == crate::config::cluster::MemberState::Up {
                1.0
            } else {
                0.0
            };
            out.set_with(
                names::CLUSTER_MEMBER_UP,
                vec![("member", member.clone())],
                up,
            );
            for (path, n) in [("grpc", m.notified.via_grpc), ("http", m.notified.via_http)] {
                out.set_with(
                    names::CLUSTER_NOTIFICATIONS,
                    vec![("member", member.clone()), ("path", path.to_string())],
                    n as f64,
                );
            }
            let failed = m.notified.failed as f64;
            out.set_with(
                names::CLUSTER_NOTIFY_FAILURES,
                vec![("member", member.clone())],
                failed,
            );
            // Every failed attempt is retried (a down member is never skipped).
            out.set_with(
                names::CLUSTER_NOTIFY_RETRIES,
                vec![("member", member)],
                failed,
            );
        }
    }
}
