//! [`Key`]: which config a call is about (namespace, group, dataId).

use std::fmt;

/// The group a key gets when none is given, as every Nacos client fills it.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";

/// A config's key. The namespace `""` is the default one (`public`); the server applies
/// its name rules, the client only fills the default group.
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
    /// `(namespace, group, data_id)`; a blank group is `DEFAULT_GROUP`, and `public` is
    /// the default namespace `""`.
    pub fn new(namespace: &str, group: &str, data_id: &str) -> Key {
        let group = if group.trim().is_empty() {
            DEFAULT_GROUP
        } else {
            group
        };
        let namespace = if namespace == "public" { "" } else { namespace };
        Key {
            namespace: namespace.to_string(),
            group: group.to_string(),
            data_id: data_id.to_string(),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = if self.namespace.is_empty() {
            "public"
        } else {
            &self.namespace
        };
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
}
