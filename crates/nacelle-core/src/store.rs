//! The storage trait. SQLite, MySQL/MariaDB and PostgreSQL implement it in
//! `nacelle-store`; this crate never depends on a database driver.
//!
//! Contract for every implementation:
//! - a write returns only after its transaction has committed (config row, history row,
//!   tag relations together);
//! - every write appends one `his_config_info` row whose `nid` is the new revision;
//!   [`StoredConfig::revision`] is the largest `nid` among the history rows of its key;
//! - a history purge ([`ConfigStore::purge_history`]) never deletes the newest row of a key;
//! - `publish` with `cas_md5` is atomic against concurrent writers on any node sharing the
//!   database, and concurrent first publishes of one key never fail or duplicate it;
//! - a backend that cannot reach its database fails with [`StoreError::Unavailable`] within
//!   a few seconds instead of hanging;
//! - errors are [`StoreError`]s, never panics.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::key::{ConfigKey, NamespaceId};
use crate::model::{
    ChangeRecord, HistoryEntry, HistoryRetention, Namespace, OpSource, Page, PageRequest,
    PublishRecord, PurgeStep, StoredConfig,
};

/// Result of removing a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// The config existed and was removed; the revision is the `nid` of its `D` history row.
    Removed { revision: i64 },
    /// Nothing was stored under that key.
    Absent,
}

/// What a batch publish ([`ConfigStore::publish_batch`]) does with a record whose key
/// already holds a config (Nacos's `SameConfigPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamePolicy {
    /// Any existing key aborts the whole batch: nothing is written.
    Abort,
    /// Records whose key exists are left out; the others are written.
    Skip,
    /// Records whose key exists replace it.
    Overwrite,
}

/// What happened to one record of a committed batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchItem {
    /// Written (inserted or, under [`SamePolicy::Overwrite`], updated).
    Written(Box<StoredConfig>),
    /// Its key existed and the policy was [`SamePolicy::Skip`]; nothing written.
    Skipped,
}

/// The result of a batch publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// The transaction committed; one item per record, in the order of the records.
    Committed(Vec<BatchItem>),
    /// [`SamePolicy::Abort`] and these keys already hold a config: nothing was written.
    Aborted(Vec<ConfigKey>),
}

/// Persistent storage of configs, their history and namespaces.
#[async_trait]
pub trait ConfigStore: Send + Sync + std::fmt::Debug + 'static {
    /// A short name of the backend for logs ("sqlite", "mysql", "postgres").
    fn backend(&self) -> &'static str;

    /// Every formal config, for loading the in-memory cache at start.
    async fn load_all(&self) -> Result<Vec<StoredConfig>, StoreError>;

    /// One formal config, read from the database (used to reload a changed key).
    async fn get(&self, key: &ConfigKey) -> Result<Option<StoredConfig>, StoreError>;

    /// Inserts or updates a config in one transaction with its history row and tag
    /// relations. Honors `record.cas_md5`: on mismatch nothing is written and
    /// [`StoreError::CasMismatch`] is returned.
    async fn publish(&self, record: &PublishRecord) -> Result<StoredConfig, StoreError>;

    /// Publishes every record in **one** transaction (each with its history row and tag
    /// relations, as [`ConfigStore::publish`]), deciding per record under `policy` what to
    /// do when its key exists, from the rows read under their locks in that transaction.
    /// Either every write of the batch commits or none does. Records must have distinct
    /// keys and no `cas_md5` ([`StoreError::Rejected`] otherwise).
    async fn publish_batch(
        &self,
        records: &[PublishRecord],
        policy: SamePolicy,
    ) -> Result<BatchOutcome, StoreError>;

    /// Deletes a config in one transaction with its `D` history row.
    async fn remove(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError>;

    /// History of one key, newest first.
    async fn history_page(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, StoreError>;

    /// One history entry by `nid`.
    async fn history_entry(&self, nid: i64) -> Result<Option<HistoryEntry>, StoreError>;

    /// The newest history entry of config row `config_id`: what `/history/previous` shows.
    async fn history_previous(&self, config_id: i64) -> Result<Option<HistoryEntry>, StoreError>;

    /// Custom namespaces (`tenant_info`), oldest first. The default namespace is not stored.
    async fn list_namespaces(&self) -> Result<Vec<Namespace>, StoreError>;

    /// Creates a namespace; [`StoreError::Conflict`] when the id exists.
    async fn create_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError>;

    /// Updates name and description; [`StoreError::NotFound`] when absent.
    async fn update_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError>;

    /// Deletes a namespace; returns whether it existed.
    async fn delete_namespace(&self, id: &NamespaceId) -> Result<bool, StoreError>;

    /// The change log: history rows with `nid > after_nid`, in `nid` order, at most `limit`.
    ///
    /// Cluster members follow it to catch changes whose notification they missed. On a
    /// shared database, `nid`s are handed out when a transaction inserts its row, not when it
    /// commits: a row with a smaller `nid` can become visible shortly after one with a larger
    /// `nid` (the longest a write transaction stays open), and rolled-back inserts leave
    /// gaps that never fill. A follower should therefore re-read a short window behind its
    /// position rather than trusting that nothing below it can still appear.
    async fn changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError>;

    /// The largest `nid` in the change log, 0 when it is empty: where a follower that has
    /// just loaded everything starts.
    async fn max_history_nid(&self) -> Result<i64, StoreError>;

    /// One batch of a history purge: deletes at most `batch` `his_config_info` rows with
    /// `nid > after_nid` that `rule` condemns, in `nid` order, and never the newest row of a
    /// key (that row stays whatever its age). Call again from
    /// [`PurgeStep::resume_after`] until it is `None`.
    ///
    /// A batch finds its rows with one read and removes them with one `DELETE` of at most
    /// `batch` rows by primary key, its own short transaction, so writers wait at most for
    /// one batch. A row is only removed while a newer row of its key exists and rows are
    /// only ever removed by a purge, so purges running at once (every node of a cluster on
    /// one database) are safe: the deletes are idempotent.
    async fn purge_history(
        &self,
        rule: &HistoryRetention,
        after_nid: i64,
        batch: u32,
    ) -> Result<PurgeStep, StoreError>;

    /// Checks that the database answers (used by readiness and reconnection).
    async fn ping(&self) -> Result<(), StoreError>;
}
