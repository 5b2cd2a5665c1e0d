//! [`ConfigService`]: reads from memory, writes through the store, then notifies.
//!
//! Write path: validate → take the key's write lock → store (one transaction) → update the
//! cache if the revision is newer than what it holds → release the lock → notify that key's
//! subscribers (before the call returns, or — for a key with more than
//! [`crate::hub::INLINE_WALK_MAX`] subscribers — on a task of its own).
//! Read path: a map lookup returning a shared, immutable `Arc<StoredConfig>`.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use dashmap::DashMap;
use nacelle_core::key::{check_tag, is_valid_name, DEFAULT_NAMESPACE_NAME, MAX_TENANT_LEN};
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    md5_hex, now_millis, ConfigKey, ConfigStore, ConfigType, CoreError, HistoryEntry, Namespace,
    OpSource, Page, PageRequest, PublishRecord, StoreError, StoredConfig, Variant,
};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::hub::WatchHub;
use crate::limits::Limits;
use crate::request::{PublishRequest, SearchMode, SearchQuery};

/// Number of write-lock stripes; writes of different keys rarely share one.
const WRITE_STRIPES: usize = 256;

/// A namespace with the number of configs it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceInfo {
    pub namespace: Namespace,
    pub config_count: usize,
    /// 0 for the built-in default namespace, 2 for custom ones (Nacos's values).
    pub kind: u8,
}

/// The config service. Cheap to clone: every field is shared.
#[derive(Clone)]
pub struct ConfigService {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn ConfigStore>,
    cache: DashMap<ConfigKey, Arc<StoredConfig>>,
    hub: Arc<WatchHub>,
    limits: Limits,
    ready: AtomicBool,
    /// Serialises writes of one key so that the cache sees them in commit order and a
    /// reload never races a write of the same key.
    write_locks: Box<[Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
    shutdown: CancellationToken,
    /// Told of every write this node commits (the cluster notifier), set once at wiring.
    commit_observer: std::sync::OnceLock<Arc<dyn CommitObserver>>,
    /// The cluster membership, when this node runs in a cluster.
    membership: std::sync::OnceLock<Arc<dyn crate::cluster::MembershipView>>,
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
        ConfigService {
            inner: Arc::new(Inner {
                store,
                cache: DashMap::new(),
                hub: Arc::new(WatchHub::new()),
                limits,
                ready: AtomicBool::new(false),
                write_locks,
                hasher: Default::default(),
                shutdown: CancellationToken::new(),
                commit_observer: std::sync::OnceLock::new(),
                membership: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Loads every config into memory and marks the service ready.
    pub async fn load(&self) -> Result<usize, CoreError> {
        let all = self.inner.store.load_all().await?;
        let n = all.len();
        for cfg in all {
            self.apply(Arc::new(cfg));
        }
        self.inner.ready.store(true, Ordering::Release);
        tracing::info!(
            configs = n,
            backend = self.inner.store.backend(),
            "config cache loaded"
        );
        Ok(n)
    }

    /// Installs the observer told of every local commit; only the first call takes effect.
    pub fn set_commit_observer(&self, observer: Arc<dyn CommitObserver>) -> bool {
        self.inner.commit_observer.set(observer).is_ok()
    }

    /// Installs the cluster membership view; only the first call takes effect.
    pub fn set_membership(&self, view: Arc<dyn crate::cluster::MembershipView>) -> bool {
        self.inner.membership.set(view).is_ok()
    }

    /// The cluster members, or `None` when this node runs alone.
    pub fn members(&self) -> Option<Vec<crate::cluster::MemberInfo>> {
        self.inner.membership.get().map(|m| m.members())
    }

    fn committed(&self, key: &ConfigKey, revision: i64) {
        if let Some(o) = self.inner.commit_observer.get() {
            o.committed(key, revision);
        }
    }

    /// Whether the cache is loaded.
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire)
    }

    fn ensure_ready(&self) -> Result<(), CoreError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(CoreError::NotReady("shutting down".into()));
        }
        if !self.is_ready() {
            return Err(CoreError::NotReady("config cache is loading".into()));
        }
        Ok(())
    }

    /// The store, for the change-log follower.
    pub(crate) fn store(&self) -> &Arc<dyn ConfigStore> {
        &self.inner.store
    }

    /// The newest history `nid` in the database: where following the change log starts.
    /// Read it *before* [`ConfigService::load`] so no change falls between the two.
    pub async fn change_log_position(&self) -> Result<i64, CoreError> {
        Ok(self.inner.store.max_history_nid().await?)
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The change hub, for adapters that subscribe listeners.
    pub fn hub(&self) -> &Arc<WatchHub> {
        &self.inner.hub
    }

    /// The storage backend's name.
    pub fn backend(&self) -> &'static str {
        self.inner.store.backend()
    }

    /// Cancelled when the server shuts down; held long polls answer then.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// Starts shutting down: new operations fail, waiters wake up.
    pub fn begin_shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Number of configs in memory.
    pub fn config_count(&self) -> usize {
        self.inner.cache.len()
    }

    // ---------------------------------------------------------------- reads

    /// The formal config of `key`, from memory.
    pub fn get(&self, key: &ConfigKey) -> Result<Option<Arc<StoredConfig>>, CoreError> {
        self.ensure_ready()?;
        Ok(self.inner.cache.get(key).map(|e| e.value().clone()))
    }

    /// The md5 currently held for `key`, `""` when absent.
    pub fn md5_of(&self, key: &ConfigKey) -> String {
        self.inner
            .cache
            .get(key)
            .map(|e| e.md5.clone())
            .unwrap_or_default()
    }

    /// The keys among `(key, client md5)` whose md5 differs from the server's.
    pub fn changed_keys<'a>(
        &self,
        items: impl IntoIterator<Item = (&'a ConfigKey, &'a str)>,
    ) -> Vec<ConfigKey> {
        items
            .into_iter()
            .filter(|(k, md5)| match self.inner.cache.get(*k) {
                Some(e) => e.md5 != *md5,
                None => !md5.is_empty(),
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Searches configs in memory, ordered by id.
    pub fn search(&self, q: &SearchQuery) -> Result<Page<Arc<StoredConfig>>, CoreError> {
        self.ensure_ready()?;
        let tags: Vec<&str> = q
            .config_tags
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let matches = |pattern: &str, value: &str| -> bool {
            if pattern.is_empty() {
                return true;
            }
            match q.mode {
                SearchMode::Accurate => pattern == value,
                SearchMode::Blur => wildcard_match(pattern, value),
            }
        };
        let mut hits: Vec<Arc<StoredConfig>> = self
            .inner
            .cache
            .iter()
            .filter(|e| {
                let c = e.value();
                c.key.tenant() == q.tenant
                    && matches(&q.data_id, c.key.data_id())
                    && matches(&q.group, c.key.group())
                    && matches(&q.app_name, &c.meta.app_name)
                    && (tags.is_empty() || c.meta.config_tags.split(',').any(|t| tags.contains(&t)))
            })
            .map(|e| e.value().clone())
            .collect();
        hits.sort_by_key(|c| c.id);
        let total = hits.len() as u64;
        let start = (q.page.offset() as usize).min(hits.len());
        let end = start
            .saturating_add(q.page.page_size as usize)
            .min(hits.len());
        let items = hits.drain(start..end).collect();
        Ok(Page::new(total, q.page.page_no, q.page.page_size, items))
    }

    /// Every config of a namespace (normalised id), ordered by id.
    pub fn configs_of_namespace(&self, tenant: &str) -> Result<Vec<Arc<StoredConfig>>, CoreError> {
        self.ensure_ready()?;
        let mut out: Vec<_> = self
            .inner
            .cache
            .iter()
            .filter(|e| e.key.tenant() == tenant)
            .map(|e| e.value().clone())
            .collect();
        out.sort_by_key(|c| c.id);
        Ok(out)
    }

    // ---------------------------------------------------------------- writes

    fn write_lock(&self, key: &ConfigKey) -> &Mutex<()> {
        let h = self.inner.hasher.hash_one(key);
        &self.inner.write_locks[(h as usize) % WRITE_STRIPES]
    }

    /// Puts `cfg` in the cache unless the cache already holds a newer revision.
    /// Returns whether the cache changed.
    fn apply(&self, cfg: Arc<StoredConfig>) -> bool {
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

    /// Validates and publishes a config; returns the stored version once committed and
    /// visible to readers, after its listeners were notified (or their walk started, see
    /// [`crate::hub`]).
    pub async fn publish(&self, req: PublishRequest) -> Result<Arc<StoredConfig>, CoreError> {
        self.ensure_ready()?;
        let record = self.validate_publish(req)?;
        let (stored, changed) = {
            let _guard = self.write_lock(&record.key).lock().await;
            let stored = match self.inner.store.publish(&record).await {
                Ok(s) => Arc::new(s),
                Err(StoreError::CasMismatch) => return Err(CoreError::CasMismatch),
                Err(e) => return Err(e.into()),
            };
            let changed = self.apply(stored.clone());
            (stored, changed)
        };
        // Listeners are told outside the write lock: with tens of thousands of them the
        // walk takes tens of milliseconds, which the next write of this key (or of another
        // key of the stripe) must not wait for. A listener woken late reads the cache, which
        // never goes back in revision.
        if changed {
            self.inner
                .hub
                .publish(&stored.key, &stored.md5, stored.revision);
        }
        self.committed(&stored.key, stored.revision);
        Ok(stored)
    }

    fn validate_publish(&self, req: PublishRequest) -> Result<PublishRecord, CoreError> {
        match &req.variant {
            Variant::Formal => {}
            Variant::Beta { .. } => {
                return Err(CoreError::Unsupported(
                    "beta (gray) publish is not supported yet".into(),
                ))
            }
            Variant::Tag(tag) => {
                check_tag(tag)?;
                return Err(CoreError::Unsupported(
                    "tagged configs are not supported yet".into(),
                ));
            }
        }
        if req.content.trim().is_empty() {
            return Err(CoreError::invalid(format!(
                "content is blank : {}",
                req.content
            )));
        }
        let max = self.inner.limits.max_content_bytes;
        if req.content.len() > max {
            return Err(CoreError::TooLarge(format!(
                "too long content, over {max} bytes"
            )));
        }
        let m = &req.meta;
        check_len("appName", &m.app_name, 128)?;
        check_len("desc", &m.desc, 128)?;
        check_len("use", &m.r#use, 32)?;
        check_len("effect", &m.effect, 32)?;
        check_len("schema", &m.schema, 32 * 1024)?;
        // Nacos's `c_schema` is a MySQL `text`: at most 65 535 bytes, whatever the characters.
        if m.schema.len() > 65_535 {
            return Err(CoreError::invalid(
                "invalid schema : too long, over 65535 bytes",
            ));
        }
        check_len("encryptedDataKey", &m.encrypted_data_key, 1024)?;
        check_len("src_user", &req.source.src_user, 128)?;
        let tags: Vec<&str> = m
            .config_tags
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        if tags.len() > 5 {
            return Err(CoreError::invalid("too many config_tags, over 5"));
        }
        for t in &tags {
            check_len("config_tags", t, 64)?;
        }
        let config_type = match req.config_type.as_deref().map(str::trim) {
            None | Some("") => ConfigType::Text,
            Some(t) if t.len() > 64 || !is_valid_name(t) => {
                return Err(CoreError::invalid(format!("invalid type : {t}")))
            }
            Some(t) => ConfigType::parse_lenient(t),
        };
        let md5 = md5_hex(req.content.as_bytes());
        Ok(PublishRecord {
            key: req.key,
            content: Bytes::from(req.content),
            md5,
            config_type,
            meta: nacelle_core::ConfigMeta {
                config_tags: tags.join(","),
                ..req.meta
            },
            source: req.source,
            cas_md5: req.cas_md5,
            now_ms: now_millis(),
        })
    }

    /// Removes a config (formal variant); `Ok(true)` also when nothing was stored, as Nacos
    /// answers. Listeners are told the key changed.
    pub async fn remove(
        &self,
        key: &ConfigKey,
        tag: Option<&str>,
        source: OpSource,
    ) -> Result<bool, CoreError> {
        self.ensure_ready()?;
        if let Some(tag) = tag.filter(|t| !t.is_empty()) {
            check_tag(tag)?;
            return Err(CoreError::Unsupported(
                "tagged configs are not supported yet".into(),
            ));
        }
        let outcome = {
            let _guard = self.write_lock(key).lock().await;
            let outcome = self.inner.store.remove(key, &source, now_millis()).await?;
            // Keep memory true to the database even if it had drifted (`Absent`).
            self.inner.cache.remove(key);
            outcome
        };
        // Told outside the write lock, as in `publish`.
        if let RemoveOutcome::Removed { revision } = outcome {
            self.inner.hub.publish(key, "", revision);
            self.committed(key, revision);
        }
        Ok(true)
    }

    /// Removes the configs whose row ids are in `ids` (`delType=ids`); unknown ids are
    /// ignored. Returns how many were removed.
    pub async fn remove_by_ids(&self, ids: &[i64], source: OpSource) -> Result<usize, CoreError> {
        self.ensure_ready()?;
        let keys: Vec<ConfigKey> = self
            .inner
            .cache
            .iter()
            .filter(|e| ids.contains(&e.id))
            .map(|e| e.key().clone())
            .collect();
        for key in &keys {
            self.remove(key, None, source.clone()).await?;
        }
        Ok(keys.len())
    }

    /// Re-reads `key` from the database and updates the cache (never trusting any content
    /// from elsewhere); notifies listeners when it changed.
    pub async fn reload(&self, key: &ConfigKey) -> Result<bool, CoreError> {
        // What to tell listeners: (md5, revision) of the change, if the cache changed.
        let event = {
            let _guard = self.write_lock(key).lock().await;
            match self.inner.store.get(key).await? {
                Some(cfg) => {
                    let cfg = Arc::new(cfg);
                    let changed = self
                        .inner
                        .cache
                        .get(key)
                        .map(|c| c.md5 != cfg.md5 || c.revision < cfg.revision)
                        .unwrap_or(true);
                    (changed && self.apply(cfg.clone())).then(|| (cfg.md5.clone(), cfg.revision))
                }
                None => self
                    .inner
                    .cache
                    .remove(key)
                    .map(|(_, old)| (String::new(), old.revision)),
            }
        };
        // Told outside the write lock, as in `publish`.
        match event {
            Some((md5, revision)) => {
                self.inner.hub.publish(key, &md5, revision);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    // ---------------------------------------------------------------- history

    /// History of a key, newest first.
    pub async fn history(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, CoreError> {
        Ok(self.inner.store.history_page(key, page).await?)
    }

    /// One history entry, which must belong to `key`.
    pub async fn history_entry(
        &self,
        key: &ConfigKey,
        nid: i64,
    ) -> Result<HistoryEntry, CoreError> {
        match self.inner.store.history_entry(nid).await? {
            Some(h) if &h.key == key => Ok(h),
            _ => Err(CoreError::NotFound(format!(
                "history entry {nid} of {key} does not exist"
            ))),
        }
    }

    /// The history entry before the current version of config row `config_id`.
    pub async fn history_previous(
        &self,
        key: &ConfigKey,
        config_id: i64,
    ) -> Result<HistoryEntry, CoreError> {
        match self.inner.store.history_previous(config_id).await? {
            Some(h) if &h.key == key => Ok(h),
            _ => Err(CoreError::NotFound(format!(
                "no previous version of config {config_id} ({key})"
            ))),
        }
    }

    // ---------------------------------------------------------------- namespaces

    /// The default namespace then custom ones, with config counts from memory.
    pub async fn namespaces(&self) -> Result<Vec<NamespaceInfo>, CoreError> {
        let stored = self.inner.store.list_namespaces().await?;
        let mut counts: HashMap<String, usize> = HashMap::new();
        for e in self.inner.cache.iter() {
            *counts.entry(e.key.tenant().to_string()).or_default() += 1;
        }
        let mut out = vec![NamespaceInfo {
            namespace: Namespace {
                id: String::new(),
                name: DEFAULT_NAMESPACE_NAME.to_string(),
                desc: "Public Namespace".to_string(),
            },
            config_count: counts.get("").copied().unwrap_or(0),
            kind: 0,
        }];
        for ns in stored {
            let config_count = counts.get(&ns.id).copied().unwrap_or(0);
            out.push(NamespaceInfo {
                namespace: ns,
                config_count,
                kind: 2,
            });
        }
        Ok(out)
    }

    /// One namespace by id (`""`/`public` is the default).
    pub async fn namespace(&self, id: &str) -> Result<NamespaceInfo, CoreError> {
        let id = nacelle_core::key::normalize_tenant(Some(id))?;
        self.namespaces()
            .await?
            .into_iter()
            .find(|n| n.namespace.id == id)
            .ok_or_else(|| CoreError::NotFound(format!("namespace `{id}` does not exist")))
    }

    /// Creates a namespace. A blank id gets a random UUID. Returns the id.
    pub async fn create_namespace(
        &self,
        id: Option<&str>,
        name: &str,
        desc: &str,
    ) -> Result<String, CoreError> {
        let id = match id.map(str::trim).filter(|s| !s.is_empty()) {
            Some(id) => {
                check_namespace_id(id)?;
                id.to_string()
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        check_namespace_name(name)?;
        check_len("namespaceDesc", desc, 256)?;
        let ns = Namespace {
            id: id.clone(),
            name: name.trim().to_string(),
            desc: desc.to_string(),
        };
        match self.inner.store.create_namespace(&ns, now_millis()).await {
            Ok(()) => Ok(id),
            Err(StoreError::Conflict(_)) => Err(CoreError::Conflict(format!(
                "namespace `{id}` already exists"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Renames a namespace / changes its description.
    pub async fn update_namespace(
        &self,
        id: &str,
        name: &str,
        desc: &str,
    ) -> Result<(), CoreError> {
        check_namespace_id(id)?;
        check_namespace_name(name)?;
        check_len("namespaceDesc", desc, 256)?;
        let ns = Namespace {
            id: id.to_string(),
            name: name.trim().to_string(),
            desc: desc.to_string(),
        };
        match self.inner.store.update_namespace(&ns, now_millis()).await {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound(m)) => Err(CoreError::NotFound(format!("{m} does not exist"))),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a namespace; returns whether it existed. The default cannot be deleted.
    pub async fn delete_namespace(&self, id: &str) -> Result<bool, CoreError> {
        if id.trim().is_empty() || id == DEFAULT_NAMESPACE_NAME {
            return Err(CoreError::invalid(
                "the default namespace cannot be deleted",
            ));
        }
        check_namespace_id(id)?;
        Ok(self.inner.store.delete_namespace(id).await?)
    }

    /// Checks the database answers.
    pub async fn ping_store(&self) -> Result<(), CoreError> {
        Ok(self.inner.store.ping().await?)
    }
}

fn check_len(field: &str, value: &str, max: usize) -> Result<(), CoreError> {
    if value.chars().count() > max {
        return Err(CoreError::invalid(format!(
            "invalid {field} : too long, over {max}"
        )));
    }
    Ok(())
}

fn check_namespace_id(id: &str) -> Result<(), CoreError> {
    if id.is_empty()
        || id.chars().count() > MAX_TENANT_LEN
        || !id
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return Err(CoreError::invalid(format!(
            "illegal namespace id `{id}`: use letters, digits, `_` and `-`, at most {MAX_TENANT_LEN}"
        )));
    }
    if id == DEFAULT_NAMESPACE_NAME {
        return Err(CoreError::invalid("namespace id `public` is reserved"));
    }
    Ok(())
}

fn check_namespace_name(name: &str) -> Result<(), CoreError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(CoreError::invalid("namespaceName is required"));
    }
    if name.chars().count() > 128 {
        return Err(CoreError::invalid("namespaceName is too long, over 128"));
    }
    if name.chars().any(|c| "@#$%^&*".contains(c)) {
        return Err(CoreError::invalid(format!(
            "namespaceName `{name}` contains illegal characters (@#$%^&*)"
        )));
    }
    Ok(())
}

/// SQL-`LIKE`-style match where `*` stands for any run of characters.
fn wildcard_match(pattern: &str, value: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let v: Vec<char> = value.chars().collect();
    let (mut pi, mut vi) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while vi < v.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == v[vi] {
            pi += 1;
            vi += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = vi;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            vi = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*", "anything"));
        assert!(wildcard_match("app*", "app.yaml"));
        assert!(wildcard_match("*yaml", "app.yaml"));
        assert!(wildcard_match("*p.y*", "app.yaml"));
        assert!(!wildcard_match("app", "app.yaml"));
        assert!(wildcard_match("app.yaml", "app.yaml"));
        assert!(!wildcard_match("b*", "app"));
    }

    #[test]
    fn namespace_ids() {
        assert!(check_namespace_id("dev-1_x").is_ok());
        assert!(check_namespace_id("dev.1").is_err());
        assert!(check_namespace_id("public").is_err());
        assert!(check_namespace_name("a#b").is_err());
    }
}
