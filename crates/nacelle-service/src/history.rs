//! History: a key's versions, one version, the version before the current one.

use nacelle_core::Action;
use nacelle_core::{
    Caller, ConfigKey, CoreError, GrayHistoryEntry, HistoryEntry, Page, PageRequest,
};

use nacelle_metrics::StoreOp;

use crate::service::ConfigService;

impl ConfigService {
    /// History of a key, newest first.
    pub async fn history(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        Ok(self
            .store_call(StoreOp::History, self.inner.store.history_page(key, page))
            .await?)
    }

    /// The history of a key's gray operations (publish, update, stop, promotion of its
    /// variants), newest first, each with the variant's name and rule.
    pub async fn gray_history(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<GrayHistoryEntry>, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        Ok(self
            .store_call(StoreOp::GrayRead, self.inner.store.gray_history(key, page))
            .await?)
    }

    /// One history entry, which must belong to `key`.
    pub async fn history_entry(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        nid: i64,
    ) -> Result<HistoryEntry, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        match self
            .store_call(StoreOp::History, self.inner.store.history_entry(nid))
            .await?
        {
            Some(h) if &h.key == key => Ok(h),
            _ => Err(CoreError::NotFound(format!(
                "history entry {nid} of {key} does not exist"
            ))),
        }
    }

    /// The history entry before the current version of config row `config_id`.
    pub async fn history_previous(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        config_id: i64,
    ) -> Result<HistoryEntry, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        match self
            .store_call(
                StoreOp::History,
                self.inner.store.history_previous(config_id),
            )
            .await?
        {
            Some(h) if &h.key == key => Ok(h),
            _ => Err(CoreError::NotFound(format!(
                "no previous version of config {config_id} ({key})"
            ))),
        }
    }
}
