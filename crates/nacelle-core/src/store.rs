//! The storage trait. SQLite, MySQL/MariaDB and PostgreSQL implement it in
//! `nacelle-store`; this crate never depends on a database driver.
//!
//! Contract for every implementation:
//! - a write returns only after its transaction has committed (config row, history row,
//!   tag relations together);
//! - every write appends one `his_config_info` row whose `nid` is the new revision;
//! - errors are [`StoreError`]s, never panics.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::key::ConfigKey;
use crate::model::{
    HistoryEntry, Namespace, OpSource, Page, PageRequest, PublishRecord, StoredConfig,
};

/// Result of removing a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// The config existed and was removed; the revision is the `nid` of its `D` history row.
    Removed { revision: i64 },
    /// Nothing was stored under that key.
    Absent,
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
    async fn delete_namespace(&self, id: &str) -> Result<bool, StoreError>;

    /// Checks that the database answers (used by readiness and reconnection).
    async fn ping(&self) -> Result<(), StoreError>;
}
