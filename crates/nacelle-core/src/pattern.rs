//! A group pattern: the set of keys a wildcard watch (Nacos 3.0's fuzzy watch) covers,
//! written `namespace>>group>>dataId`.
//!
//! The namespace is exact (normalised as every namespace is: `public` and blank are the
//! default one); group and dataId are each `*` (anything), `x*` (prefix), `*x` (suffix),
//! `*x*` (contains) or `x` (exact) — Nacos's `FuzzyGroupKeyPattern` shapes. A part of any
//! other shape (`a*b`, empty) is refused here: Nacos accepts it and never matches.

use crate::error::CoreError;
use crate::key::{ConfigKey, NamespaceId};

/// The separator of a pattern's parts.
pub const SPLITTER: &str = ">>";

/// One part of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Part {
    Any,
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
}

impl Part {
    fn parse(raw: &str, what: &str) -> Result<Part, CoreError> {
        Part::glob(raw).ok_or_else(|| {
            CoreError::invalid(format!("invalid fuzzy watch {what} pattern : {raw}"))
        })
    }

    /// `raw` as one of the five shapes (`*`, `x*`, `*x`, `*x*`, `x`); `None` for any other
    /// (empty, `a*b`, `**`). The one pattern syntax of fuzzy watches and schemas.
    pub fn glob(raw: &str) -> Option<Part> {
        if raw.is_empty() {
            return None;
        }
        if raw == "*" {
            return Some(Part::Any);
        }
        let starts = raw.starts_with('*');
        let ends = raw.len() > 1 && raw.ends_with('*');
        let inner = &raw[usize::from(starts)..raw.len() - usize::from(ends)];
        if inner.is_empty() || inner.contains('*') {
            return None;
        }
        let inner = inner.to_string();
        Some(match (starts, ends) {
            (false, false) => Part::Exact(inner),
            (false, true) => Part::Prefix(inner),
            (true, false) => Part::Suffix(inner),
            (true, true) => Part::Contains(inner),
        })
    }

    /// Whether `value` matches this part.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            Part::Any => true,
            Part::Exact(s) => value == s,
            Part::Prefix(s) => value.starts_with(s.as_str()),
            Part::Suffix(s) => value.ends_with(s.as_str()),
            Part::Contains(s) => value.contains(s.as_str()),
        }
    }
}

/// A parsed `namespace>>group>>dataId` pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupPattern {
    namespace: NamespaceId,
    group: Part,
    data_id: Part,
}

impl GroupPattern {
    /// Parses a pattern as a client sent it.
    pub fn parse(raw: &str) -> Result<GroupPattern, CoreError> {
        let parts: Vec<&str> = raw.split(SPLITTER).collect();
        let [namespace, group, data_id] = parts[..] else {
            return Err(CoreError::invalid(format!(
                "invalid fuzzy watch pattern : {raw} (expected namespace>>group>>dataId)"
            )));
        };
        if namespace.contains('*') {
            return Err(CoreError::invalid(format!(
                "invalid fuzzy watch pattern : {raw} (the namespace cannot be a wildcard)"
            )));
        }
        Ok(GroupPattern {
            namespace: NamespaceId::parse(Some(namespace))?,
            group: Part::parse(group, "group")?,
            data_id: Part::parse(data_id, "dataId")?,
        })
    }

    /// The namespace it covers.
    pub fn namespace(&self) -> &NamespaceId {
        &self.namespace
    }

    /// The group part.
    pub fn group(&self) -> &Part {
        &self.group
    }

    /// Whether `key` is one of the keys the pattern covers.
    pub fn matches(&self, key: &ConfigKey) -> bool {
        key.namespace() == &self.namespace
            && self.group.matches(key.group())
            && self.data_id.matches(key.data_id())
    }
}

/// The longest group pattern a schema or webhook may name, in characters.
pub const MAX_GROUP_PATTERN_CHARS: usize = 128;
/// The longest dataId pattern a schema or webhook may name, in characters.
pub const MAX_DATA_ID_PATTERN_CHARS: usize = 255;

/// Checks `(pattern, what, max)`: one of the five shapes, no `>>`, within its length.
pub fn check_pattern(raw: &str, what: &str, max: usize) -> Result<Part, CoreError> {
    let raw_trimmed = raw.trim();
    if raw_trimmed != raw || raw.is_empty() {
        return Err(CoreError::invalid(format!(
            "the {what} pattern is blank or has leading or trailing blanks"
        )));
    }
    if raw.chars().count() > max {
        return Err(CoreError::invalid(format!(
            "the {what} pattern is longer than {max} characters"
        )));
    }
    if raw.contains(">>") || raw.chars().any(char::is_control) {
        return Err(CoreError::invalid(format!(
            "the {what} pattern `{raw}` contains `>>` or a control character"
        )));
    }
    Part::glob(raw).ok_or_else(|| {
        CoreError::invalid(format!(
            "the {what} pattern `{raw}` is not one of `*`, `x*`, `*x`, `*x*` or an exact name"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, g: &str, d: &str) -> ConfigKey {
        ConfigKey::from_trusted(ns, g, d)
    }

    #[test]
    fn the_four_shapes_and_exact() {
        let p = GroupPattern::parse("public>>DEFAULT_GROUP>>app*").expect("valid");
        assert!(p.matches(&key("", "DEFAULT_GROUP", "app.yaml")));
        assert!(!p.matches(&key("", "DEFAULT_GROUP", "my-app")));
        assert!(!p.matches(&key("dev", "DEFAULT_GROUP", "app.yaml")));
        let p = GroupPattern::parse(">>*>>*.yaml").expect("valid");
        assert!(p.matches(&key("", "G", "a.yaml")));
        assert!(!p.matches(&key("", "G", "a.yml")));
        let p = GroupPattern::parse("dev>>*SHOP*>>x").expect("valid");
        assert!(p.matches(&key("dev", "MY_SHOP_1", "x")));
        assert!(!p.matches(&key("dev", "MY_SHOP_1", "xx")));
        assert_eq!(
            GroupPattern::parse("dev>>G>>*").expect("valid").group(),
            &Part::Exact("G".into())
        );
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in [
            "",
            "a>>b",
            "a>>b>>c>>d",
            "*>>G>>*",
            "ns>>>>*",
            "ns>>G>>a*b",
            "ns>>G>>**",
            "ns>>G>>***",
            "bad ns>>G>>*",
        ] {
            assert!(GroupPattern::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
