//! A store that becomes available once the database could be opened. Until then every call
//! fails with `StoreError::Unavailable`, so the server can start, answer liveness and stay
//! not-ready while it retries the connection in the background.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use nacelle_core::auth::{IdentityRecords, IdentityWrite};
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{BatchOutcome, SamePolicy};
use nacelle_core::{
    ChangeRecord, ConfigKey, ConfigStore, GrayHistoryEntry, HistoryEntry, HistoryLog,
    HistoryRetention, Namespace, OpSource, Page, PageRequest, PublishRecord, PurgeStep, StoreError,
    StoredConfig, StoredGray,
};

/// Delegates to the real store once [`LazyStore::set`] was called.
#[derive(Debug)]
pub struct LazyStore {
    inner: OnceLock<Arc<dyn ConfigStore>>,
    /// The database as shown in errors (password masked).
    display: String,
}

impl LazyStore {
    pub fn new(display: String) -> Self {
        LazyStore {
            inner: OnceLock::new(),
            display,
        }
    }

    /// Installs the opened store. Only the first store counts: the service may already be
    /// reading from it, so a later one is dropped (with a warning; `start` opens the
    /// database either at once or in the background, never both, so it does not happen).
    pub fn set(&self, store: Arc<dyn ConfigStore>) {
        if self.inner.set(store).is_err() {
            tracing::warn!(db = %self.display, "database already connected; a second connection was dropped");
        }
    }

    fn get_store(&self) -> Result<&Arc<dyn ConfigStore>, StoreError> {
        self.inner.get().ok_or_else(|| {
            StoreError::Unavailable(format!("not connected to {} yet", self.display))
        })
    }
}

#[async_trait]
impl ConfigStore for LazyStore {
    fn backend(&self) -> &'static str {
        self.inner
            .get()
            .map(|s| s.backend())
            .unwrap_or("connecting")
    }
    async fn load_all(&self) -> Result<Vec<StoredConfig>, StoreError> {
        self.get_store()?.load_all().await
    }
    async fn get(&self, key: &ConfigKey) -> Result<Option<StoredConfig>, StoreError> {
        self.get_store()?.get(key).await
    }
    async fn publish(&self, record: &PublishRecord) -> Result<StoredConfig, StoreError> {
        self.get_store()?.publish(record).await
    }
    async fn publish_batch(
        &self,
        records: &[PublishRecord],
        policy: SamePolicy,
    ) -> Result<BatchOutcome, StoreError> {
        self.get_store()?.publish_batch(records, policy).await
    }
    async fn remove(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        self.get_store()?.remove(key, source, now_ms).await
    }
    async fn load_grays(&self) -> Result<Vec<StoredGray>, StoreError> {
        self.get_store()?.load_grays().await
    }
    async fn grays_of(&self, key: &ConfigKey) -> Result<Vec<StoredGray>, StoreError> {
        self.get_store()?.grays_of(key).await
    }
    async fn remove_gray(
        &self,
        key: &ConfigKey,
        name: &str,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        self.get_store()?
            .remove_gray(key, name, source, now_ms)
            .await
    }
    async fn promote_gray(
        &self,
        record: &PublishRecord,
        name: &str,
    ) -> Result<StoredConfig, StoreError> {
        self.get_store()?.promote_gray(record, name).await
    }
    async fn gray_changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        self.get_store()?.gray_changes_since(after_nid, limit).await
    }
    async fn gray_history(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<GrayHistoryEntry>, StoreError> {
        self.get_store()?.gray_history(key, page).await
    }
    async fn max_gray_nid(&self) -> Result<i64, StoreError> {
        self.get_store()?.max_gray_nid().await
    }
    async fn history_page(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, StoreError> {
        self.get_store()?.history_page(key, page).await
    }
    async fn history_entry(&self, nid: i64) -> Result<Option<HistoryEntry>, StoreError> {
        self.get_store()?.history_entry(nid).await
    }
    async fn history_previous(&self, config_id: i64) -> Result<Option<HistoryEntry>, StoreError> {
        self.get_store()?.history_previous(config_id).await
    }
    async fn list_namespaces(&self) -> Result<Vec<Namespace>, StoreError> {
        self.get_store()?.list_namespaces().await
    }
    async fn create_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        self.get_store()?.create_namespace(ns, now_ms).await
    }
    async fn update_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        self.get_store()?.update_namespace(ns, now_ms).await
    }
    async fn delete_namespace(&self, id: &nacelle_core::NamespaceId) -> Result<bool, StoreError> {
        self.get_store()?.delete_namespace(id).await
    }
    async fn changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        self.get_store()?.changes_since(after_nid, limit).await
    }
    async fn max_history_nid(&self) -> Result<i64, StoreError> {
        self.get_store()?.max_history_nid().await
    }
    async fn purge_history(
        &self,
        log: HistoryLog,
        rule: &HistoryRetention,
        after_nid: i64,
        batch: u32,
    ) -> Result<PurgeStep, StoreError> {
        self.get_store()?
            .purge_history(log, rule, after_nid, batch)
            .await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.get_store()?.ping().await
    }

    async fn load_identities(&self) -> Result<IdentityRecords, StoreError> {
        self.get_store()?.load_identities().await
    }

    async fn write_identity(&self, write: &IdentityWrite) -> Result<(), StoreError> {
        self.get_store()?.write_identity(write).await
    }
}
