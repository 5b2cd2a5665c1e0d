//! [`Key`]: which config a call is about (namespace, group, dataId).

use std::fmt;

/// The group a key gets when none is given, as every Nacos client fills it.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";

/// The name the default namespace (id `""`) is shown by, and the id Nacos accepts for it.
pub const PUBLIC_NAMESPACE: &str = "public";

/// The namespace id a caller's namespace means — the SDK's one place for Nacos's rule
/// (`NamespaceUtil.processNamespaceParameter`): blank, `public` and `null` are the default
/// namespace `""`; any other id is itself, trimmed.
pub fn namespace_id(namespace: &str) -> &str {
    match namespace.trim() {
        "" | PUBLIC_NAMESPACE | "null" => "",
        id => id,
    }
}

/// How a namespace id is shown (logs, paths, fuzzy-watch patterns, the CLI's tables): the
/// default namespace as `public`, any other as its id.
pub fn namespace_label(namespace: &str) -> &str {
    match namespace_id(namespace) {
        "" => PUBLIC_NAMESPACE,
        id => id,
    }
}

/// A config's key. The namespace `""` is the default one (`public`); the server applies
/// its name rules, the client only fills the default group and reads the namespace by
/// [`namespace_id`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The namespace id (`""`: the default namespace).
    pub namespace: String,
    /// The group (`DEFAULT_GROUP` when blank).
    pub group: String,
    /// The data id.
    pub data_id: String,
}

impl Key {
    /// `(namespace, group, data_id)`; a blank group is `DEFAULT_GROUP`, and the namespace
    /// is read by [`namespace_id`] (`public`, blank, `null`: the default namespace `""`).
    pub fn new(namespace: &str, group: &str, data_id: &str) -> Key {
        let group = if group.trim().is_empty() {
            DEFAULT_GROUP
        } else {
            group
        };
        Key {
            namespace: namespace_id(namespace).to_string(),
            group: group.to_string(),
            data_id: data_id.to_string(),
        }
    }
}

impl Key {
    /// The key as the v1 HTTP API names it (`dataId`, `group`, `tenant`), to which a call
    /// adds its own parameters.
    pub(crate) fn v1_params(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("dataId", &self.data_id),
            ("group", &self.group),
            ("tenant", &self.namespace),
        ]
    }

    /// The key as the v2 HTTP API names it (`dataId`, `group`, `namespaceId`).
    pub(crate) fn v2_params(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("dataId", &self.data_id),
            ("group", &self.group),
            ("namespaceId", &self.namespace),
        ]
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = namespace_label(&self.namespace);
        write!(f, "{ns}/{}/{}", self.group, self.data_id)
    }
}

/// Something that names a key within the client's namespace: a [`Key`], a `(group,
/// data_id)` pair, or a data id alone (in `DEFAULT_GROUP`).
pub trait IntoKey {
    /// The key, with `namespace` when the value names none.
    fn into_key(self, namespace: &str) -> Key;
}

impl IntoKey for Key {
    fn into_key(self, _: &str) -> Key {
        self
    }
}

impl IntoKey for &Key {
    fn into_key(self, _: &str) -> Key {
        self.clone()
    }
}

impl IntoKey for &str {
    fn into_key(self, namespace: &str) -> Key {
        Key::new(namespace, DEFAULT_GROUP, self)
    }
}

impl IntoKey for (&str, &str) {
    fn into_key(self, namespace: &str) -> Key {
        Key::new(namespace, self.0, self.1)
    }
}

/// Whether `p` is one of Nacos's part shapes: `*`, `x*`, `*x`, `*x*` or exact.
pub(crate) fn valid_part(p: &str) -> bool {
    if p == "*" {
        return true;
    }
    let inner = p.strip_prefix('*').unwrap_or(p);
    let inner = inner.strip_suffix('*').unwrap_or(inner);
    !inner.is_empty() && !inner.contains('*')
}

/// Whether `value` matches the part `p` (a valid one).
pub(crate) fn part_matches(p: &str, value: &str) -> bool {
    if p == "*" {
        return true;
    }
    match (p.strip_prefix('*'), p.strip_suffix('*')) {
        (Some(rest), _) if rest.ends_with('*') => value.contains(rest.trim_end_matches('*')),
        (Some(suffix), _) => value.ends_with(suffix),
        (None, Some(prefix)) => value.starts_with(prefix),
        (None, None) => value == p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_filled() {
        assert_eq!(
            Key::new("public", " ", "a"),
            Key::new("", DEFAULT_GROUP, "a")
        );
        assert_eq!("a".into_key("dev").to_string(), "dev/DEFAULT_GROUP/a");
        assert_eq!(("G", "a").into_key("").to_string(), "public/G/a");
    }

    #[test]
    fn one_namespace_rule() {
        for default in ["", " ", "public", "null", " public "] {
            assert_eq!(namespace_id(default), "", "{default:?}");
            assert_eq!(namespace_label(default), "public", "{default:?}");
            assert_eq!(Key::new(default, "G", "a").namespace, "", "{default:?}");
            assert_eq!("a".into_key(default).to_string(), "public/DEFAULT_GROUP/a");
        }
        assert_eq!(namespace_id(" dev "), "dev");
        assert_eq!(namespace_id("Public"), "Public");
        assert_eq!(namespace_label("dev"), "dev");
        assert_eq!(Key::new("dev", "", "a").to_string(), "dev/DEFAULT_GROUP/a");
    }

    #[test]
    fn parts_match_as_nacos_does() {
        for (p, v, m) in [
            ("*", "x", true),
            ("app*", "app.yaml", true),
            ("app*", "my-app", false),
            ("*.yaml", "app.yaml", true),
            ("*-db-*", "shop-db-1", true),
            ("*-db-*", "shop-1", false),
            ("app.yaml", "app.yaml", true),
        ] {
            assert!(valid_part(p), "{p}");
            assert_eq!(part_matches(p, v), m, "{p} {v}");
        }
        for bad in ["", "**", "a*b", "***"] {
            assert!(!valid_part(bad), "{bad}");
        }
    }
}
