//! History: a key's versions, one version, the version before the current one — each
//! entry as the caller is shown it (an encrypted config's versions decrypted over HTTP).

use nacelle_core::Action;
use nacelle_core::{
    Caller, ConfigKey, CoreError, GrayHistoryEntry, HistoryEntry, Page, PageRequest,
};

use nacelle_metrics::StoreOp;

use crate::config::service::ConfigService;

/// Why one history entry was not served.
#[derive(Debug, thiserror::Error)]
pub enum HistoryLookupError {
    /// No such entry.
    #[error("{0}")]
    Absent(String),
    /// The entry exists but belongs to another key than the one the caller named.
    #[error("{0}")]
    OtherKey(String),
    /// Not ready, not allowed, or the store failed.
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Both refusals are "not found" where a protocol does not tell them apart.
impl From<HistoryLookupError> for CoreError {
    fn from(e: HistoryLookupError) -> Self {
        match e {
            HistoryLookupError::Absent(m) | HistoryLookupError::OtherKey(m) => {
                CoreError::NotFound(m)
            }
            HistoryLookupError::Core(e) => e,
        }
    }
}

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
        let page = self
            .store_call(StoreOp::History, self.inner.store.history_page(key, page))
            .await?;
        page.try_map(|h| self.reveal_history(caller, h))
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
        let page = self
            .store_call(StoreOp::GrayRead, self.inner.store.gray_history(key, page))
            .await?;
        page.try_map(|mut g| {
            g.entry = self.reveal_history(caller, g.entry)?;
            Ok(g)
        })
    }

    /// One history entry, which must belong to `key`; an absent entry and one of another
    /// key are both "not found" (see [`ConfigService::history_entry_checked`] for the two).
    pub async fn history_entry(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        nid: i64,
    ) -> Result<HistoryEntry, CoreError> {
        Ok(self.history_entry_checked(caller, key, nid).await?)
    }

    /// One history entry, telling an absent `nid` from one that belongs to another key
    /// (Nacos 3 refuses the second as access denied: a `nid` is no licence to read a key
    /// the caller did not name).
    pub async fn history_entry_checked(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        nid: i64,
    ) -> Result<HistoryEntry, HistoryLookupError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        let found = self
            .store_call(StoreOp::History, self.inner.store.history_entry(nid))
            .await
            .map_err(CoreError::from)?;
        match found {
            Some(h) if &h.key == key => Ok(self.reveal_history(caller, h)?),
            Some(_) => Err(HistoryLookupError::OtherKey(format!(
                "history entry {nid} of {key} does not exist"
            ))),
            None => Err(HistoryLookupError::Absent(format!(
                "history entry {nid} of {key} does not exist"
            ))),
        }
    }

    /// The history entry before the current version of config row `config_id`; an absent
    /// one and one of another key are both "not found".
    pub async fn history_previous(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        config_id: i64,
    ) -> Result<HistoryEntry, CoreError> {
        Ok(self
            .history_previous_checked(caller, key, config_id)
            .await?)
    }

    /// [`ConfigService::history_previous`], telling an absent entry from one of another key.
    pub async fn history_previous_checked(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        config_id: i64,
    ) -> Result<HistoryEntry, HistoryLookupError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        let found = self
            .store_call(
                StoreOp::History,
                self.inner.store.history_previous(config_id),
            )
            .await
            .map_err(CoreError::from)?;
        match found {
            Some(h) if &h.key == key => Ok(self.reveal_history(caller, h)?),
            Some(_) => Err(HistoryLookupError::OtherKey(format!(
                "no previous version of config {config_id} ({key})"
            ))),
            None => Err(HistoryLookupError::Absent(format!(
                "no previous version of config {config_id} ({key})"
            ))),
        }
    }
}
