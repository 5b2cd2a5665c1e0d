//! Moving configs in bulk: export (a selection of the cache), import (a batch of configs
//! read from an archive by an adapter) and clone (configs copied into another namespace).
//!
//! Import and clone share one path: every config is validated as a publish is (names,
//! metadata, content size, content by type under the target namespace's mode), then the
//! whole batch goes to the store in **one** transaction ([`ConfigStore::publish_batch`])
//! under the [`SamePolicy`]; after the commit each written key goes through the cache and
//! its listeners exactly as a single publish does. An invalid config refuses the whole
//! batch, whatever the policy. Under [`SamePolicy::Abort`] the batch stops at its first
//! existing key, as Nacos 2.4 and 3.x do (`batchInsertOrUpdate`): the configs before it are
//! written (counted in `succCount`), it is `failData`, the rest `skipData` and
//! `skipCount` — but in one transaction, where Nacos commits config by config.
//!
//! [`ConfigStore::publish_batch`]: nacelle_core::ConfigStore::publish_batch

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use nacelle_core::{
    BatchItem, Caller, ConfigKey, ConfigMeta, CoreError, NamespaceId, SamePolicy, StoreError,
    StoredConfig, Variant,
};

use crate::config::read::wildcard_match;
use crate::config::request::PublishRequest;
use nacelle_core::audit::AuditAction;

use crate::config::audit::Audited;
use crate::config::commit::{Effect, WriteKind};
use crate::config::service::ConfigService;
use crate::config::view::ConfigView;

/// Most configs one import or clone may hold: the batch is one transaction and is
/// validated in memory before it is written.
pub const MAX_BATCH_CONFIGS: usize = 10_000;

/// One config to import, as an archive holds it.
#[derive(Debug, Clone, Default)]
pub struct ImportItem {
    pub group: String,
    pub data_id: String,
    pub content: String,
    /// The type from the archive's metadata; blank or absent: from the dataId's extension
    /// (Nacos's rule), `text` otherwise.
    pub config_type: Option<String>,
    pub desc: String,
    pub app_name: String,
    /// Carried over by a clone; empty for an import.
    pub encrypted_data_key: String,
}

/// One config a clone copies: the source row id and, when not blank, a new dataId/group.
#[derive(Debug, Clone, Default)]
pub struct CloneItem {
    pub cfg_id: i64,
    pub data_id: Option<String>,
    pub group: Option<String>,
}

/// What to export (Nacos's `findAllConfigInfo4Export`): by row ids when any are given
/// (in any namespace), else the configs of `namespace` whose dataId matches `data_id`
/// (`*` is a wildcard; blank matches all), of group `group` and app `app_name` (blank
/// matches all).
#[derive(Debug, Clone, Default)]
pub struct ExportQuery {
    pub namespace: NamespaceId,
    pub data_id: String,
    pub group: String,
    pub app_name: String,
    pub ids: Vec<i64>,
}

/// A config named in a report: (dataId, group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedConfig {
    pub data_id: String,
    pub group: String,
}

impl NamedConfig {
    fn of(key: &ConfigKey) -> Self {
        NamedConfig {
            data_id: key.data_id().to_string(),
            group: key.group().to_string(),
        }
    }
}

/// The outcome of an import or clone, as Nacos reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Configs written (inserted or overwritten; under `ABORT`, those before the conflict).
    pub succ_count: usize,
    /// Configs not written: existing ones under `SKIP`, those after the conflict under
    /// `ABORT`.
    pub skip_count: usize,
    /// The existing key that stopped an `ABORT` import (at most one).
    pub fail_data: Vec<NamedConfig>,
    pub skip_data: Vec<NamedConfig>,
}

/// Why an import or clone was refused as a whole (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The target namespace does not exist.
    #[error("namespace {0} does not exist")]
    NamespaceMissing(String),
    /// Nothing to write: no config in the archive, none of the clone's ids exists.
    #[error("{0}")]
    NothingToWrite(String),
    /// A config of the batch is invalid, or the service or store failed.
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// The type Nacos gives a config whose metadata names none: by the dataId's extension
/// (`FileTypeEnum`: yml/yaml, txt/text, json, xml, htm/html, properties), `text` otherwise.
pub fn type_from_extension(data_id: &str) -> &'static str {
    let ext = data_id
        .rsplit_once('.')
        .map(|(_, e)| e.trim().to_ascii_lowercase());
    match ext.as_deref() {
        Some("yml" | "yaml") => "yaml",
        Some("json") => "json",
        Some("xml") => "xml",
        Some("htm" | "html") => "html",
        Some("properties") => "properties",
        _ => "text",
    }
}

impl ConfigService {
    /// The configs `q` selects, ordered by id, from memory; encrypted configs in plaintext
    /// (as Nacos exports them, so that an import encrypts them again with a fresh key).
    pub fn export(&self, caller: &Caller, q: &ExportQuery) -> Result<Vec<ConfigView>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let ids: HashSet<i64> = q.ids.iter().copied().collect();
        let selected = |c: &StoredConfig| {
            if !ids.is_empty() {
                return ids.contains(&c.id);
            }
            c.key.namespace() == &q.namespace
                && (q.data_id.trim().is_empty() || wildcard_match(&q.data_id, c.key.data_id()))
                && (q.group.trim().is_empty() || q.group == c.key.group())
                && (q.app_name.trim().is_empty() || q.app_name == c.meta.app_name)
        };
        let mut out: Vec<Arc<StoredConfig>> = self
            .inner
            .cache
            .iter()
            .filter(|e| selected(e.value()) && self.may_read(caller, e.key()))
            .map(|e| e.value().clone())
            .collect();
        out.sort_by_key(|c| c.id);
        out.into_iter().map(|c| self.view_in_plaintext(c)).collect()
    }

    /// Imports `items` into `namespace` under `policy`, all or nothing (see the module
    /// documentation). History records `src_user` and the caller's IP.
    pub async fn import(
        &self,
        caller: &Caller,
        namespace: &str,
        items: Vec<ImportItem>,
        policy: SamePolicy,
        src_user: &str,
    ) -> Result<ImportReport, TransferError> {
        let how = (AuditAction::Import, src_user);
        self.batch(caller, namespace, policy, how, || {
            if items.is_empty() {
                return Err(TransferError::NothingToWrite(
                    "the archive holds no config".into(),
                ));
            }
            Ok(items)
        })
        .await
    }

    /// An import or clone: the readiness guard, the target namespace, the configs `items`
    /// makes, then one batch write ([`Self::write_batch`]); refused or failed, it goes on
    /// record ([`Self::batch_on_record`]).
    async fn batch(
        &self,
        caller: &Caller,
        namespace: &str,
        policy: SamePolicy,
        how: (AuditAction, &str),
        items: impl FnOnce() -> Result<Vec<ImportItem>, TransferError>,
    ) -> Result<ImportReport, TransferError> {
        let mut at = None;
        let result = async {
            self.guard()?;
            let target = self.target_namespace(caller, namespace).await?;
            let items = items()?;
            self.write_batch(caller, &target, items, policy, how, &mut at)
                .await
        }
        .await;
        self.batch_on_record(caller, (how.0, namespace), at, result)
    }

    /// Copies the configs with the row ids of `items` into `namespace` (with a new dataId
    /// or group where given) under `policy`, as an import of them would. Unknown ids are
    /// left out; when none is known nothing is written.
    pub async fn clone_configs(
        &self,
        caller: &Caller,
        namespace: &str,
        items: &[CloneItem],
        policy: SamePolicy,
        src_user: &str,
    ) -> Result<ImportReport, TransferError> {
        let how = (AuditAction::Clone, src_user);
        self.batch(caller, namespace, policy, how, || {
            self.clone_items(caller, items)
        })
        .await
    }

    /// The configs a clone of `items` writes: each source the caller may read, in
    /// plaintext, under its new group and dataId where given.
    fn clone_items(
        &self,
        caller: &Caller,
        items: &[CloneItem],
    ) -> Result<Vec<ImportItem>, TransferError> {
        // The first item of an id wins, as Nacos's `toMap(…, (k1, k2) -> k1)`.
        let mut wanted: HashMap<i64, &CloneItem> = HashMap::new();
        for item in items {
            wanted.entry(item.cfg_id).or_insert(item);
        }
        let sources: Vec<Arc<StoredConfig>> = self
            .inner
            .cache
            .iter()
            .filter(|e| wanted.contains_key(&e.value().id) && self.may_read(caller, e.key()))
            .map(|e| e.value().clone())
            .collect();
        // Encrypted configs are copied by their plaintext and encrypted again, each copy
        // with a data key of its own.
        let sources = sources
            .into_iter()
            .map(|c| self.view_in_plaintext(c))
            .collect::<Result<Vec<_>, CoreError>>()?;
        let mut sources = sources;
        if sources.is_empty() {
            return Err(TransferError::NothingToWrite(
                "none of the selected configs exists".into(),
            ));
        }
        sources.sort_by_key(|c| c.id());
        let not_blank = |v: Option<&String>| v.filter(|s| !s.trim().is_empty()).cloned();
        let batch = sources
            .iter()
            .map(|c| {
                let item = wanted.get(&c.id());
                ImportItem {
                    group: not_blank(item.and_then(|i| i.group.as_ref()))
                        .unwrap_or_else(|| c.key().group().to_string()),
                    data_id: not_blank(item.and_then(|i| i.data_id.as_ref()))
                        .unwrap_or_else(|| c.key().data_id().to_string()),
                    content: c.content_text().into_owned(),
                    config_type: Some(c.config_type().as_str().to_string()),
                    desc: c.desc().to_string(),
                    app_name: c.app_name().to_string(),
                    encrypted_data_key: c.encrypted_data_key().to_string(),
                }
            })
            .collect();
        Ok(batch)
    }

    /// An import or clone refused or failed as a whole goes on record: one entry, naming
    /// the key whose check refused the batch (`at`) or else the target namespace.
    fn batch_on_record(
        &self,
        caller: &Caller,
        (action, namespace): (AuditAction, &str),
        at: Option<ConfigKey>,
        result: Result<ImportReport, TransferError>,
    ) -> Result<ImportReport, TransferError> {
        let Err(e) = &result else {
            return result;
        };
        let log_event = match action {
            AuditAction::Clone => "config.clone",
            _ => "config.import",
        };
        let refusal = match &at {
            Some(key) => Audited::of_key(action, log_event, key),
            None => {
                let ns = match namespace.trim() {
                    "" => "public",
                    ns => ns,
                };
                Audited::new(action, log_event, format!("namespace={ns}"))
            }
        };
        match e {
            TransferError::Core(e) => self.audit_refusal(caller, refusal, e),
            other => self.audit(caller, refusal.md5("").refused(other.to_string())),
        }
        result
    }

    /// The namespace a batch writes into; it must exist (the default one always does).
    async fn target_namespace(
        &self,
        caller: &Caller,
        namespace: &str,
    ) -> Result<NamespaceId, TransferError> {
        self.authenticated(caller)?;
        let id = NamespaceId::parse(Some(namespace))
            .map_err(|_| TransferError::NamespaceMissing(namespace.to_string()))?;
        if !id.is_default() && !self.namespace_exists(id.as_str()).await? {
            return Err(TransferError::NamespaceMissing(id.as_str().to_string()));
        }
        Ok(id)
    }

    /// Validates every item as a publish, then writes the batch in one store transaction,
    /// then updates the cache and tells listeners and the cluster, key by key.
    async fn write_batch(
        &self,
        caller: &Caller,
        namespace: &NamespaceId,
        items: Vec<ImportItem>,
        policy: SamePolicy,
        (action, src_user): (AuditAction, &str),
        at: &mut Option<ConfigKey>,
    ) -> Result<ImportReport, TransferError> {
        if items.len() > MAX_BATCH_CONFIGS {
            return Err(CoreError::Invalid(format!(
                "too many configs: {} (at most {MAX_BATCH_CONFIGS} in one import or clone)",
                items.len()
            ))
            .into());
        }
        let mut records = Vec::with_capacity(items.len());
        let mut seen = HashSet::with_capacity(items.len());
        for item in items {
            let name = format!("{}/{}", item.group, item.data_id);
            let in_entry = |e: CoreError| match e {
                CoreError::Invalid(m) | CoreError::TooLarge(m) => {
                    CoreError::Invalid(format!("config {name}: {m}"))
                }
                other => other,
            };
            let key = ConfigKey::parse(Some(namespace.as_str()), &item.group, &item.data_id)
                .map_err(in_entry)?;
            if !seen.insert(key.clone()) {
                return Err(CoreError::Invalid(format!("config {name} appears twice")).into());
            }
            // A refusal from here on is this key's.
            *at = Some(key.clone());
            // All or nothing: one key the caller may not write refuses the whole batch.
            self.authorize_key(caller, &key, nacelle_core::Action::Write)?;
            self.review_gate(caller, &key)?;
            let config_type = match item.config_type.as_deref().map(str::trim) {
                Some(t) if !t.is_empty() => t.to_string(),
                _ => type_from_extension(&item.data_id).to_string(),
            };
            let req = PublishRequest {
                key,
                content: item.content,
                config_type: Some(config_type),
                meta: ConfigMeta {
                    app_name: item.app_name,
                    desc: item.desc,
                    encrypted_data_key: item.encrypted_data_key,
                    ..ConfigMeta::default()
                },
                src_user: src_user.to_string(),
                cas_md5: None,
                variant: Variant::Formal,
                message: String::new(),
                change_id: None,
            };
            let record = self.validate_publish(caller, req).map_err(in_entry)?;
            // Checked by type on the plaintext, and sealed when encrypted (crate::config::cipher),
            // as a publish is.
            let record = self.checked_and_sealed(record).await.map_err(in_entry)?;
            records.push(record);
        }
        *at = None;

        let kind = match action {
            AuditAction::Clone => WriteKind::Clone,
            _ => WriteKind::Import,
        };
        let commit = self.begin(kind, records.iter().map(|r| &r.key)).await;
        let outcome = match commit
            .store(self.inner.store.publish_batch(&records, policy))
            .await
        {
            Ok(o) => o,
            Err(StoreError::CasMismatch) => return Err(CoreError::CasMismatch.into()),
            Err(e) => return Err(CoreError::from(e).into()),
        };
        let mut report = ImportReport::default();
        let mut effects = Vec::new();
        let mut events = Vec::new();
        let log_event = match kind {
            WriteKind::Clone => "config.clone",
            _ => "config.import",
        };
        for (rec, item) in records.iter().zip(outcome.items) {
            match item {
                BatchItem::Written(stored) => {
                    report.succ_count += 1;
                    let event = Audited::of_key(action, log_event, &stored.key)
                        .md5(&stored.md5)
                        .detail(format!("md5={}", stored.md5));
                    events.push(event);
                    effects.push(Effect::Formal(Arc::new(*stored)));
                }
                BatchItem::Skipped => report.skip_data.push(NamedConfig::of(&rec.key)),
                BatchItem::Conflict => report.fail_data.push(NamedConfig::of(&rec.key)),
            }
        }
        report.skip_count = report.skip_data.len();
        commit.finish(caller, effects, events).await;
        Ok(report)
    }
}
