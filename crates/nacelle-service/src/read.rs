//! Reads: one config, search, every config of a namespace — all from memory.
//!
//! Which variant a caller sees is decided here and nowhere else. Only formal configs are
//! stored today (beta and tag publishes are refused), so a read that names a tag finds
//! nothing — over every protocol — and a beta query shows no beta.

use std::sync::Arc;

use nacelle_core::key::tag_of;
use nacelle_core::{Caller, ConfigKey, CoreError, NamespaceId, Page, StoredConfig};

use crate::request::{SearchMode, SearchQuery};
use crate::service::ConfigService;

/// What a read serves: the config and which variant of its key it is.
#[derive(Debug, Clone)]
pub struct Served {
    pub config: Arc<StoredConfig>,
    /// Whether this is the key's beta (gray) content, served because the caller is in
    /// its beta list (`isBeta` over HTTP, `beta` over gRPC).
    pub beta: bool,
    /// The tag of the variant served, `None` for the formal config.
    pub tag: Option<Arc<str>>,
}

/// A key's beta (gray) variant and the IPs it is released to.
#[derive(Debug, Clone)]
pub struct Beta {
    pub config: Arc<StoredConfig>,
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
        if tag_of(tag)?.is_some() {
            // No tagged variant is ever stored yet, so a tagged read finds nothing.
            return Ok(None);
        }
        Ok(self.visible(caller, key).map(|config| Served {
            config,
            beta: false,
            tag: None,
        }))
    }

    /// The beta (gray) variant of `key` with its IP list, for `?beta=true` queries; `None`
    /// when the key has no beta (none is stored yet).
    pub fn beta_of(&self, _caller: &Caller, _key: &ConfigKey) -> Result<Option<Beta>, CoreError> {
        self.guard()?;
        Ok(None)
    }

    /// What `caller` sees of `key` without a tag: the formal config.
    pub(crate) fn visible(&self, _caller: &Caller, key: &ConfigKey) -> Option<Arc<StoredConfig>> {
        self.inner.cache.get(key).map(|e| e.value().clone())
    }

    /// The md5 `caller` would be served for `key`, `""` when absent: what listeners compare.
    pub(crate) fn md5_for(&self, caller: &Caller, key: &ConfigKey) -> Option<String> {
        self.visible(caller, key).map(|c| c.md5.clone())
    }

    /// Searches configs in memory, ordered by id.
    pub fn search(
        &self,
        _caller: &Caller,
        q: &SearchQuery,
    ) -> Result<Page<Arc<StoredConfig>>, CoreError> {
        self.guard()?;
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
                c.key.namespace() == &q.namespace
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

    /// Every config of a namespace, ordered by id.
    pub fn configs_of_namespace(
        &self,
        _caller: &Caller,
        namespace: &NamespaceId,
    ) -> Result<Vec<Arc<StoredConfig>>, CoreError> {
        self.guard()?;
        let mut out: Vec<_> = self
            .inner
            .cache
            .iter()
            .filter(|e| e.key.namespace() == namespace)
            .map(|e| e.value().clone())
            .collect();
        out.sort_by_key(|c| c.id);
        Ok(out)
    }
}

/// SQL-`LIKE`-style match where `*` stands for any run of characters.
pub(crate) fn wildcard_match(pattern: &str, value: &str) -> bool {
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
}
