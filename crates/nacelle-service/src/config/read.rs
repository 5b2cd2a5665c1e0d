//! Reads: one config, search, every config of a namespace — all from memory.
//!
//! Which variant a caller sees is decided here and nowhere else ([`ConfigService::select`]):
//! the first gray variant of the key whose rule matches the caller, by priority (beta by
//! IP, tag, label rules); else, when the request named a tag, nothing (as Nacos 3.0
//! answers a tag it has no variant for); else the formal config. Listeners compare with
//! the md5 of exactly that variant, and notifications go by it ([`ConfigService::notify`]).

use std::sync::Arc;

use nacelle_core::gray::GrayRule;
use nacelle_core::key::tag_of;
use nacelle_core::Action;
use nacelle_core::{Caller, ConfigKey, CoreError, Gray, NamespaceId, Page, StoredConfig};

use crate::config::hub::Visible;
use crate::config::request::{SearchMode, SearchQuery};
use crate::config::service::ConfigService;
use crate::config::view::ConfigView;

/// The label (gRPC connection label, or HTTP header) by which a client names the tag it
/// wants when a request names none, as Nacos's `Vipserver-Tag`.
pub const TAG_LABEL: &str = "Vipserver-Tag";

/// What a read serves: the config as the caller is shown it and which variant of its key
/// it is.
#[derive(Debug, Clone)]
pub struct Served {
    pub config: ConfigView,
    /// Whether this is the key's beta (gray) content, served because the caller is in
    /// its beta list (`isBeta` over HTTP, `beta` over gRPC).
    pub beta: bool,
    /// The tag of the variant served, `None` for the formal config.
    pub tag: Option<Arc<str>>,
    /// The name of the gray variant served, `None` for the formal config.
    pub gray: Option<Arc<str>>,
}

/// The variant [`ConfigService::select`] chose, as stored (inside the service only: what
/// listeners compare, before it is shown to anyone).
#[derive(Debug, Clone)]
pub(crate) struct Selected {
    pub(crate) config: Arc<StoredConfig>,
    pub(crate) beta: bool,
    pub(crate) tag: Option<Arc<str>>,
    pub(crate) gray: Option<Arc<str>>,
}

impl Selected {
    fn formal(config: Arc<StoredConfig>) -> Selected {
        Selected {
            config,
            beta: false,
            tag: None,
            gray: None,
        }
    }

    fn gray(g: &Gray) -> Selected {
        Selected {
            config: g.config.clone(),
            beta: matches!(g.rule, GrayRule::Beta(_)),
            tag: match &g.rule {
                GrayRule::Tag(t) => Some(t.as_str().into()),
                _ => None,
            },
            gray: Some(g.name.clone()),
        }
    }
}

/// A gray variant of a key, as listings show it.
#[derive(Debug, Clone)]
pub struct GrayView {
    pub name: Arc<str>,
    pub rule: GrayRule,
    pub priority: i32,
    pub config: ConfigView,
}

/// A key's beta (gray) variant and the IPs it is released to.
#[derive(Debug, Clone)]
pub struct Beta {
    pub config: ConfigView,
    pub ips: Vec<String>,
}

impl ConfigService {
    /// The config `caller` sees under `key`, optionally naming a `tag` (blank means none).
    pub fn get(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        tag: Option<&str>,
    ) -> Result<Option<Served>, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        let tag = tag_of(tag)?;
        let Some(chosen) = self.select(caller, key, tag) else {
            return Ok(None);
        };
        Ok(Some(Served {
            config: self.view(caller, chosen.config)?,
            beta: chosen.beta,
            tag: chosen.tag,
            gray: chosen.gray,
        }))
    }

    /// The formal config of `key`, whoever asks and whatever gray matches them (the
    /// console edits the formal config); read permission on the key is required.
    pub fn formal(
        &self,
        caller: &Caller,
        key: &ConfigKey,
    ) -> Result<Option<ConfigView>, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        let stored = self.inner.cache.get(key).map(|e| e.value().clone());
        stored.map(|c| self.view(caller, c)).transpose()
    }

    /// Which variant of `key` `caller` sees, asking for `tag` (already checked): the first
    /// gray whose rule matches (a rule of kind tag matches the request's tag, else the
    /// caller's [`TAG_LABEL`] label); else nothing when the request named a tag; else the
    /// formal config.
    pub(crate) fn select(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        tag: Option<&str>,
    ) -> Option<Selected> {
        if let Some(set) = self.inner.grays.get(key) {
            let wanted = tag.or_else(|| caller.labels.get(TAG_LABEL));
            if let Some(g) = set.select(caller, wanted) {
                return Some(Selected::gray(g));
            }
        }
        if tag.is_some() {
            return None;
        }
        self.inner
            .cache
            .get(key)
            .map(|e| Selected::formal(e.value().clone()))
    }

    /// The beta (gray by IP) variant of `key` with its IP list, for `?beta=true` queries;
    /// `None` when the key has no beta.
    pub fn beta_of(&self, caller: &Caller, key: &ConfigKey) -> Result<Option<Beta>, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        let beta = self.inner.grays.get(key).and_then(|set| {
            set.iter().find_map(|g| match &g.rule {
                GrayRule::Beta(ips) => Some((g.config.clone(), ips.entries().to_vec())),
                _ => None,
            })
        });
        let Some((stored, ips)) = beta else {
            return Ok(None);
        };
        Ok(Some(Beta {
            config: self.view(caller, stored)?,
            ips,
        }))
    }

    /// Every gray variant of `key`, in match order (highest priority first), each as the
    /// caller is shown it.
    pub fn grays_of(&self, caller: &Caller, key: &ConfigKey) -> Result<Vec<GrayView>, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        let grays: Vec<(Arc<str>, GrayRule, i32, Arc<StoredConfig>)> = self
            .inner
            .grays
            .get(key)
            .map(|set| {
                set.iter()
                    .map(|g| (g.name.clone(), g.rule.clone(), g.priority, g.config.clone()))
                    .collect()
            })
            .unwrap_or_default();
        grays
            .into_iter()
            .map(|(name, rule, priority, stored)| {
                Ok(GrayView {
                    name,
                    rule,
                    priority,
                    config: self.view(caller, stored)?,
                })
            })
            .collect()
    }

    /// The md5 `caller` would be served for `key`, `""` when absent: what listeners compare.
    pub(crate) fn md5_for(&self, caller: &Caller, key: &ConfigKey) -> Option<String> {
        self.select(caller, key, None).map(|s| s.config.md5.clone())
    }

    /// Tells the listeners of `key` that it changed (revision `revision`): each one whose
    /// visible variant now has another md5 than the one it holds — nobody else.
    pub(crate) fn notify(&self, key: &ConfigKey, revision: i64) {
        let formal: Arc<str> = self
            .inner
            .cache
            .get(key)
            .map(|c| Arc::from(c.md5.as_str()))
            .unwrap_or_else(|| Arc::from(""));
        let hub = &self.inner.hub;
        self.inner.patterns.publish(key, self);
        let Some(set) = self.inner.grays.get(key).map(|s| s.value().clone()) else {
            hub.publish(key, &formal, revision, Visible::All(formal.clone()));
            return;
        };
        let md5s: Vec<Arc<str>> = set
            .iter()
            .map(|g| Arc::from(g.config.md5.as_str()))
            .collect();
        let visible = |caller: &Caller| -> Arc<str> {
            let wanted = caller.labels.get(TAG_LABEL);
            set.iter()
                .position(|g| g.rule.matches(caller, wanted))
                .and_then(|i| md5s.get(i).cloned())
                .unwrap_or_else(|| formal.clone())
        };
        hub.publish(key, &formal, revision, Visible::PerCaller(&visible));
    }

    /// Searches configs in memory, ordered by id.
    pub fn search(&self, caller: &Caller, q: &SearchQuery) -> Result<Page<ConfigView>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let tags: Vec<&str> = q
            .config_tags
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let matches = |pattern: &str, value: &str| search_match(q.mode, pattern, value);
        let types: Vec<&str> = q
            .types
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let mut hits: Vec<Arc<StoredConfig>> = self
            .inner
            .cache
            .iter()
            .filter(|e| {
                let c = e.value();
                c.key.namespace() == &q.namespace
                    && matches(&q.data_id, c.key.data_id())
                    && matches(&q.group, c.key.group())
                    && matches(&q.app_name, &c.meta.app_name)
                    && (tags.is_empty() || c.meta.config_tags.split(',').any(|t| tags.contains(&t)))
                    && (types.is_empty() || types.contains(&c.config_type.as_str()))
                    && (q.content.is_empty()
                        || matches(&q.content, &String::from_utf8_lossy(&c.content)))
                    && self.may_read(caller, &c.key)
            })
            .map(|e| e.value().clone())
            .collect();
        hits.sort_by_key(|c| c.id);
        let total = hits.len() as u64;
        let start = (q.page.offset() as usize).min(hits.len());
        let end = start
            .saturating_add(q.page.page_size as usize)
            .min(hits.len());
        let items = hits
            .drain(start..end)
            .map(|c| self.view(caller, c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::new(total, q.page.page_no, q.page.page_size, items))
    }

    /// Every config of a namespace, ordered by id.
    pub fn configs_of_namespace(
        &self,
        caller: &Caller,
        namespace: &NamespaceId,
    ) -> Result<Vec<ConfigView>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let mut out: Vec<_> = self
            .inner
            .cache
            .iter()
            .filter(|e| e.key.namespace() == namespace && self.may_read(caller, &e.key))
            .map(|e| e.value().clone())
            .collect();
        out.sort_by_key(|c| c.id);
        out.into_iter().map(|c| self.view(caller, c)).collect()
    }
}

/// SQL-`LIKE`-style match where `*` stands for any run of characters (the same rule as
/// permission patterns).
pub(crate) fn wildcard_match(pattern: &str, value: &str) -> bool {
    nacelle_core::auth::pattern_matches(pattern, value)
}

/// Whether `value` matches a search filter `pattern` (blank: anything) in `mode`: the one
/// place search decides a match.
pub(crate) fn search_match(mode: SearchMode, pattern: &str, value: &str) -> bool {
    if pattern.is_empty() {
        return true;
    }
    match mode {
        SearchMode::Accurate => pattern == value,
        SearchMode::Blur => wildcard_match(pattern, value),
        SearchMode::BlurIgnoreCase => {
            wildcard_match(&pattern.to_lowercase(), &value.to_lowercase())
        }
    }
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
    fn search_modes() {
        use SearchMode::*;
        assert!(search_match(Blur, "", "anything"));
        assert!(!search_match(Blur, "*app*", "My-App.yaml"));
        assert!(search_match(BlurIgnoreCase, "*app*", "My-App.yaml"));
        assert!(search_match(BlurIgnoreCase, "*APP.Y*", "my-app.yaml"));
        assert!(search_match(BlurIgnoreCase, "*配置*", "应用配置.yaml"));
        assert!(!search_match(BlurIgnoreCase, "*db*", "My-App.yaml"));
        assert!(search_match(Accurate, "app", "app"));
        assert!(!search_match(Accurate, "App", "app"));
    }
}
