//! The one commit path: every write of a config — a formal or gray publish, a gray stop or
//! promotion, a remove, a metadata change, an import or clone batch, a change request's
//! publish (and so a rollback, a tag, a rollout step, which are publishes) — goes through
//! [`ConfigService::begin`] → [`Commit::store`] → [`Commit::finish`]:
//!
//! 1. `begin` takes the write locks of the keys (each stripe once, in stripe order);
//! 2. `store` runs the write's one store call (one transaction), timed and counted in
//!    `nacelle_config_writes_total{op=<kind>}` whatever its outcome;
//! 3. `finish` brings memory to what was committed (a formal version into the cache
//!    unless it holds a newer one, a removed key out, a key's grays re-read), releases
//!    the locks, then tells each changed key's listeners once, the cluster of every
//!    committed key ([`crate::CommitObserver`]), and the audit trail (which feeds the
//!    webhooks) of the write's events.
//!
//! Listeners are told outside the locks: with tens of thousands of them a walk takes tens
//! of milliseconds, which the next write of the key (or of its stripe) must not wait for.
//! A listener woken late reads the cache, which never goes back in revision.
//!
//! What a write checks before it begins (credentials, permissions, the review gate, the
//! rate limit, content) stays with the write; what it decides under the locks (a gray
//! needs its formal config) it decides between `begin` and `store`. Nothing else may
//! change the cache of a key on behalf of a caller: the change-log follower's reload
//! ([`ConfigService::reload`]) is the one other writer, and it only copies the database.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use nacelle_core::{Caller, ConfigKey, StoreError, StoredConfig};
use nacelle_metrics::StoreOp;
use tokio::sync::MutexGuard;

use crate::config::audit::Audited;
use crate::config::service::ConfigService;

/// The kind of a write: the `op` label of `nacelle_config_writes_total` and the store
/// operation its call is timed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// A formal publish (also a rollback, which publishes an old version's content).
    Publish,
    /// A gray variant published: beta, tag, label or a rollout's step.
    GrayPublish,
    /// A gray variant stopped.
    GrayStop,
    /// A gray variant promoted to the formal config.
    Promote,
    /// A formal config removed.
    Remove,
    /// A formal config's description or tags changed in place.
    Metadata,
    /// An import batch.
    Import,
    /// A clone batch.
    Clone,
    /// A change request's items, in one transaction.
    ChangePublish,
}

impl WriteKind {
    /// Every kind, in declaration order.
    pub const ALL: [WriteKind; 9] = [
        WriteKind::Publish,
        WriteKind::GrayPublish,
        WriteKind::GrayStop,
        WriteKind::Promote,
        WriteKind::Remove,
        WriteKind::Metadata,
        WriteKind::Import,
        WriteKind::Clone,
        WriteKind::ChangePublish,
    ];

    /// The metric's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteKind::Publish => "publish",
            WriteKind::GrayPublish => "gray_publish",
            WriteKind::GrayStop => "gray_stop",
            WriteKind::Promote => "promote",
            WriteKind::Remove => "remove",
            WriteKind::Metadata => "metadata",
            WriteKind::Import => "import",
            WriteKind::Clone => "clone",
            WriteKind::ChangePublish => "change_publish",
        }
    }

    /// The store operation its call is timed under (`nacelle_store_*{op}`).
    fn store_op(self) -> StoreOp {
        match self {
            WriteKind::Publish | WriteKind::GrayPublish | WriteKind::Metadata => StoreOp::Publish,
            WriteKind::GrayStop | WriteKind::Promote => StoreOp::GrayWrite,
            WriteKind::Remove => StoreOp::Remove,
            WriteKind::Import | WriteKind::Clone => StoreOp::PublishBatch,
            WriteKind::ChangePublish => StoreOp::Changes,
        }
    }
}

/// What a committed write did to one key; [`Commit::finish`] brings memory to it.
#[derive(Debug)]
pub(crate) enum Effect {
    /// A new formal version: into the cache unless it holds a newer revision.
    Formal(Arc<StoredConfig>),
    /// The formal config is gone. `Some(revision)`: a history row was written (listeners
    /// and the cluster are told); `None`: there was nothing to remove, memory is made
    /// true to the database all the same.
    Removed(ConfigKey, Option<i64>),
    /// The key's gray variants changed in the database (at `revision`, when the write
    /// wrote a history row of its own): they are re-read.
    Grays(ConfigKey, Option<i64>),
    /// The formal row changed in place (metadata): re-read into the cache; the cluster is
    /// told, listeners are not woken (content and md5 are unchanged).
    Reread(ConfigKey),
}

/// A write in progress: its keys' write locks are held until [`Commit::finish`] (or the
/// drop of an abandoned commit).
pub(crate) struct Commit<'s> {
    service: &'s ConfigService,
    kind: WriteKind,
    started: Instant,
    locks: Vec<MutexGuard<'s, ()>>,
}

/// One key to tell after the locks are released.
struct Told {
    key: ConfigKey,
    revision: i64,
    /// Listeners are woken (the visible content changed).
    wake: bool,
    /// The cluster is told (a history row or an in-place change was committed).
    cluster: bool,
}

impl ConfigService {
    /// Begins a write of kind `kind` to `keys`: takes their write locks.
    pub(crate) async fn begin<'a>(
        &self,
        kind: WriteKind,
        keys: impl Iterator<Item = &'a ConfigKey>,
    ) -> Commit<'_> {
        // Timed from asking for the locks: a commit's duration includes its wait for them.
        let started = Instant::now();
        let locks = self.write_locks_of(keys).await;
        Commit {
            service: self,
            kind,
            started,
            locks,
        }
    }
}

impl<'s> Commit<'s> {
    /// Runs the write's store call — one transaction — timed under the kind's store
    /// operation and counted in `nacelle_config_writes_total` by its outcome (`ok`,
    /// `cas_mismatch`, `error`).
    pub(crate) async fn store<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let result = self.service.store_call(self.kind.store_op(), call).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(StoreError::CasMismatch) => "cas_mismatch",
            Err(_) => "error",
        };
        self.service
            .metrics()
            .write(self.kind.as_str(), outcome, self.started.elapsed());
        result
    }

    /// Re-reads the grays of `key` while the locks are held, for a write that must know
    /// them before it finishes (a promotion that lost its gray to a concurrent stop).
    pub(crate) async fn refresh_grays(&self, key: &ConfigKey) {
        refresh_grays(self.service, key).await;
    }

    /// Brings memory to `effects`, releases the locks, then tells listeners (each changed
    /// key once), the cluster, and the audit trail of `events` (which feeds the webhooks).
    pub(crate) async fn finish(
        self,
        caller: &Caller,
        effects: Vec<Effect>,
        events: Vec<Audited<'_>>,
    ) {
        let service = self.service;
        let mut told: Vec<Told> = Vec::with_capacity(effects.len());
        let mut tell = |key: &ConfigKey, revision: i64, wake: bool, cluster: bool| match told
            .iter_mut()
            .find(|t| &t.key == key)
        {
            Some(t) => {
                t.revision = t.revision.max(revision);
                t.wake |= wake;
                t.cluster |= cluster;
            }
            None => told.push(Told {
                key: key.clone(),
                revision,
                wake,
                cluster,
            }),
        };
        for effect in effects {
            match effect {
                Effect::Formal(stored) => {
                    let changed = service.apply(stored.clone());
                    tell(&stored.key, stored.revision, changed, true);
                }
                Effect::Removed(key, revision) => {
                    // Memory is made true to the database even if it had drifted.
                    service.inner.cache.remove(&key);
                    if let Some(revision) = revision {
                        tell(&key, revision, true, true);
                    }
                }
                Effect::Grays(key, revision) => {
                    let changed = refresh_grays(service, &key).await;
                    let at = revision.unwrap_or_else(|| service.revision_of(&key));
                    tell(&key, at, changed, revision.is_some());
                }
                Effect::Reread(key) => {
                    if let Some(revision) = reread(service, &key).await {
                        tell(&key, revision, false, true);
                    }
                }
            }
        }
        drop(self.locks);
        for t in &told {
            if t.wake {
                service.notify(&t.key, t.revision);
            }
            if t.cluster {
                service.committed(&t.key, t.revision);
            }
        }
        for event in events {
            service.audit(caller, event);
        }
    }
}

/// Re-reads the grays of `key` into memory; whether they changed. A failed read is logged
/// and counted as a change: the listeners compare against what memory holds, and the
/// change-log follower brings the grays back within its period.
async fn refresh_grays(service: &ConfigService, key: &ConfigKey) -> bool {
    match service
        .store_call(StoreOp::GrayRead, service.inner.store.grays_of(key))
        .await
    {
        Ok(rows) => service.set_grays(key, rows),
        Err(e) => {
            tracing::warn!(%key, error = %e, "gray variants not re-read after a commit; the change-log follower will");
            true
        }
    }
}

/// Re-reads the formal config of `key` into the cache; its revision, `None` when it is
/// gone or could not be read (logged; the follower catches up).
async fn reread(service: &ConfigService, key: &ConfigKey) -> Option<i64> {
    match service
        .store_call(StoreOp::Get, service.inner.store.get(key))
        .await
    {
        Ok(Some(cfg)) => {
            let revision = cfg.revision;
            service.apply(Arc::new(cfg));
            Some(revision)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(%key, error = %e, "config not re-read after a commit; the change-log follower will");
            None
        }
    }
}
