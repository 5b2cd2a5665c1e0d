//! How a node keeps in step with the database and the other cluster members, as the
//! cluster module and the change-log follower reach it ([`ConfigService::replication`]):
//! the observer told of every local commit, the membership view, the peers a live view
//! asks, the change logs' positions, and reloads from the database (never from a
//! message's content).

use std::collections::HashSet;
use std::sync::Arc;

use nacelle_core::{ConfigKey, CoreError};
use nacelle_metrics::StoreOp;

use crate::config::cluster::MembershipView;
use crate::config::gates::PeerQueries;
use crate::config::service::{CommitObserver, ConfigService};

/// The cluster's and the follower's side of the core.
#[derive(Clone, Copy, Debug)]
pub struct Replication<'a> {
    core: &'a ConfigService,
}

impl ConfigService {
    /// The cluster's and the change-log follower's side of the core.
    pub fn replication(&self) -> Replication<'_> {
        Replication { core: self }
    }
}

impl Replication<'_> {
    /// Installs the observer told of every local commit; only the first call takes effect.
    pub fn set_commit_observer(&self, observer: Arc<dyn CommitObserver>) -> bool {
        self.core.inner.commit_observer.set(observer).is_ok()
    }
    /// Installs the cluster membership view; only the first call takes effect.
    pub fn set_membership(&self, view: Arc<dyn MembershipView>) -> bool {
        self.core.inner.membership.set(view).is_ok()
    }
    /// The newest history `nid` in the database: where following the change log starts.
    /// Read it *before* [`ConfigService::load`] so no change falls between the two.
    pub async fn change_log_position(&self) -> Result<i64, CoreError> {
        Ok(self
            .core
            .store_call(StoreOp::ChangeLog, self.core.inner.store.max_history_nid())
            .await?)
    }
    /// The newest gray change-log `nid`: where following it starts (read it before
    /// [`ConfigService::load`], as [`ConfigService::change_log_position`]).
    pub async fn gray_log_position(&self) -> Result<i64, CoreError> {
        Ok(self
            .core
            .store_call(StoreOp::ChangeLog, self.core.inner.store.max_gray_nid())
            .await?)
    }
    /// Installs the cluster's peer queries; only the first call takes effect.
    pub fn set_peer_queries(&self, peers: Arc<dyn PeerQueries>) -> bool {
        self.core.inner.peer_queries.set(peers).is_ok()
    }
    /// Re-reads `key` from the database and updates the cache (never trusting any content
    /// from elsewhere); notifies listeners when it changed. Used by cluster sync and the
    /// change-log follower, on behalf of no client: it has no caller and no readiness
    /// guard, because a change must reach the cache also while it is loading.
    pub async fn reload(&self, key: &ConfigKey) -> Result<bool, CoreError> {
        self.core.reload_key(key, false).await
    }
    /// Replaces the whole cache by what the database holds now, whatever the revisions,
    /// key by key under each key's write lock, and tells the listeners of every key that
    /// changed; returns how many changed. For a node whose database lost commits it had
    /// already read (a failover to a replica that lacked them, [`crate::ChangeFollower::
    /// history_rewound`]): their revisions are gone from the database, so the rule that
    /// an older change never overwrites a newer one would keep serving the lost values.
    pub async fn resync(&self) -> Result<usize, CoreError> {
        let mut keys: HashSet<ConfigKey> = self
            .core
            .inner
            .cache
            .iter()
            .map(|e| e.key().clone())
            .collect();
        keys.extend(self.core.inner.grays.iter().map(|e| e.key().clone()));
        let all = self
            .core
            .store_call(StoreOp::LoadAll, self.core.inner.store.load_all())
            .await?;
        keys.extend(all.into_iter().map(|c| c.key));
        let grays = self
            .core
            .store_call(StoreOp::GrayRead, self.core.inner.store.load_grays())
            .await?;
        keys.extend(grays.into_iter().map(|g| g.config.key));
        let mut changed = 0;
        for key in &keys {
            if self.core.reload_key(key, true).await? {
                changed += 1;
            }
        }
        Ok(changed)
    }
}
