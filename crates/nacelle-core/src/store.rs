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

use crate::auth::{IdentityRecords, IdentityWrite};
use crate::error::StoreError;
use crate::key::{ConfigKey, NamespaceId};
use crate::model::{
    ChangeRecord, GrayHistoryEntry, HistoryEntry, HistoryLog, HistoryRetention, Namespace,
    OpSource, Page, PageRequest, PublishRecord, PurgeStep, StoredConfig, StoredGray,
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
    /// relations — or, when `record.gray` is set, that gray variant (`config_info_gray`)
    /// with its row in the gray change log. Honors `record.cas_md5` (against the variant
    /// written): on mismatch nothing is written and [`StoreError::CasMismatch`] is
    /// returned.
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

    /// Every gray variant of every key, for loading the cache at start: Nacelle's and Nacos
    /// 2.5/3.0's `config_info_gray`, plus Nacos 2.4's `config_info_beta` / `config_info_tag`
    /// rows that have no `config_info_gray` row of the same name.
    async fn load_grays(&self) -> Result<Vec<StoredGray>, StoreError>;

    /// The gray variants of one key, read from the database (as in [`Self::load_grays`]).
    async fn grays_of(&self, key: &ConfigKey) -> Result<Vec<StoredGray>, StoreError>;

    /// Deletes the gray variant `name` of `key` in one transaction with its `D` row in the
    /// gray change log.
    async fn remove_gray(
        &self,
        key: &ConfigKey,
        name: &str,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError>;

    /// Promotes the gray variant `name` of `record.key`: `record` (built by the service
    /// from the variant's content and the formal config's metadata; `record.gray` is
    /// `None`) becomes the formal config and the variant is deleted, in one transaction
    /// with the formal history row and the gray change-log row. [`StoreError::NotFound`]
    /// when the variant does not exist; [`StoreError::CasMismatch`] when its md5 is no
    /// longer `record.md5` (it changed since the service read it).
    async fn promote_gray(
        &self,
        record: &PublishRecord,
        name: &str,
    ) -> Result<StoredConfig, StoreError>;

    /// The gray change log (`nacelle_gray_log`): rows with `nid > after_nid`, in `nid`
    /// order, at most `limit` — the same contract as [`Self::changes_since`].
    async fn gray_changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError>;

    /// The gray change log of one key, newest first: the history of its gray operations.
    async fn gray_history(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<GrayHistoryEntry>, StoreError>;

    /// The largest `nid` of the gray change log, 0 when it is empty.
    async fn max_gray_nid(&self) -> Result<i64, StoreError>;

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

    /// One batch of a history purge of `log`: deletes at most `batch` rows with
    /// `nid > after_nid` that `rule` condemns, in `nid` order, and never the newest row of a
    /// key (that row stays whatever its age) — for the gray change log, of a key's gray
    /// variant (its revision, or the `D` row of its stop). Call again from
    /// [`PurgeStep::resume_after`] until it is `None`.
    ///
    /// A batch finds its rows with one read and removes them with one `DELETE` of at most
    /// `batch` rows by primary key, its own short transaction, so writers wait at most for
    /// one batch. A row is only removed while a newer row of its key exists and rows are
    /// only ever removed by a purge, so purges running at once (every node of a cluster on
    /// one database) are safe: the deletes are idempotent.
    async fn purge_history(
        &self,
        log: HistoryLog,
        rule: &HistoryRetention,
        after_nid: i64,
        batch: u32,
    ) -> Result<PurgeStep, StoreError>;

    /// Checks that the database answers (used by readiness and reconnection).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Every user, role binding and permission (Nacos's `users`, `roles`, `permissions`)
    /// and Nacelle's per-user token state, read in one go for the authorizer's directory.
    async fn load_identities(&self) -> Result<IdentityRecords, StoreError>;

    /// Applies one change to users, roles or permissions in one transaction. A row that
    /// already exists is [`StoreError::Conflict`]; a user, binding or grant that is absent
    /// where one must exist is [`StoreError::NotFound`].
    async fn write_identity(&self, write: &IdentityWrite) -> Result<(), StoreError>;
}
