//! The config key and the Nacos name rules.
//!
//! Every protocol builds keys through [`ConfigKey::parse`], so the rules (default namespace,
//! allowed characters, lengths) live here and nowhere else.

use std::fmt;
use std::sync::Arc;

use crate::error::CoreError;

/// The group clients use when they name none.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The display name of the default namespace (whose id is `""`).
pub const DEFAULT_NAMESPACE_NAME: &str = "public";
/// Longest dataId Nacos accepts.
pub const MAX_DATA_ID_LEN: usize = 255;
/// Longest group name.
pub const MAX_GROUP_LEN: usize = 128;
/// Longest namespace id.
pub const MAX_TENANT_LEN: usize = 128;
/// Longest tag.
pub const MAX_TAG_LEN: usize = 16;

/// Identifies one config: (namespace, group, dataId). The namespace is already normalised:
/// the default namespace is `""`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    tenant: Arc<str>,
    group: Arc<str>,
    data_id: Arc<str>,
}

impl fmt::Debug for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.group_key())
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.group_key())
    }
}

impl ConfigKey {
    /// Validates and builds a key from what a client sent. `tenant` is normalised
    /// (`public`, `null`, blank → `""`); a blank group is an error here: adapters that
    /// default it do so explicitly.
    pub fn parse(tenant: Option<&str>, group: &str, data_id: &str) -> Result<Self, CoreError> {
        let tenant = normalize_tenant(tenant)?;
        check_data_id(data_id)?;
        check_group(group)?;
        Ok(ConfigKey {
            tenant: tenant.into(),
            group: group.into(),
            data_id: data_id.into(),
        })
    }

    /// Builds a key from values already validated (rows read back from the database).
    pub fn from_trusted(tenant: &str, group: &str, data_id: &str) -> Self {
        ConfigKey {
            tenant: tenant.into(),
            group: group.into(),
            data_id: data_id.into(),
        }
    }

    /// The namespace id (`""` for the default namespace).
    pub fn tenant(&self) -> &str {
        &self.tenant
    }
    /// The group.
    pub fn group(&self) -> &str {
        &self.group
    }
    /// The dataId.
    pub fn data_id(&self) -> &str {
        &self.data_id
    }

    /// Nacos's group key: `dataId+group[+tenant]`, with `+` and `%` escaped inside parts.
    pub fn group_key(&self) -> String {
        let mut s =
            String::with_capacity(self.data_id.len() + self.group.len() + self.tenant.len() + 2);
        escape_part(&self.data_id, &mut s);
        s.push('+');
        escape_part(&self.group, &mut s);
        if !self.tenant.is_empty() {
            s.push('+');
            escape_part(&self.tenant, &mut s);
        }
        s
    }
}

fn escape_part(part: &str, out: &mut String) {
    for c in part.chars() {
        match c {
            '+' => out.push_str("%2B"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
}

/// Nacos's character rule for names: Unicode letters and digits plus `_ - . :`.
pub fn is_valid_name(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// Normalises a namespace as the client sent it: `public`, `null` and blank mean the
/// default namespace `""`. Other values must be valid names of at most 128 characters.
pub fn normalize_tenant(tenant: Option<&str>) -> Result<String, CoreError> {
    let t = tenant.map(str::trim).unwrap_or("");
    if t.is_empty() || t == DEFAULT_NAMESPACE_NAME || t == "null" {
        return Ok(String::new());
    }
    if t.chars().count() > MAX_TENANT_LEN {
        return Err(CoreError::invalid(format!(
            "too long tenant, over {MAX_TENANT_LEN}"
        )));
    }
    if !is_valid_name(t) {
        return Err(CoreError::invalid(format!("invalid tenant : {t}")));
    }
    Ok(t.to_string())
}

/// Checks a dataId: non-blank, valid characters, at most 255 characters.
pub fn check_data_id(data_id: &str) -> Result<(), CoreError> {
    if data_id.trim().is_empty() || !is_valid_name(data_id) {
        return Err(CoreError::invalid(format!("invalid dataId : {data_id}")));
    }
    if data_id.chars().count() > MAX_DATA_ID_LEN {
        return Err(CoreError::invalid(format!(
            "invalid dataId : too long, over {MAX_DATA_ID_LEN}"
        )));
    }
    Ok(())
}

/// Checks a group: non-blank, valid characters, at most 128 characters.
pub fn check_group(group: &str) -> Result<(), CoreError> {
    if group.trim().is_empty() || !is_valid_name(group) {
        return Err(CoreError::invalid(format!("invalid group : {group}")));
    }
    if group.chars().count() > MAX_GROUP_LEN {
        return Err(CoreError::invalid(format!(
            "invalid group : too long, over {MAX_GROUP_LEN}"
        )));
    }
    Ok(())
}

/// Checks a tag: valid characters, at most 16 characters.
pub fn check_tag(tag: &str) -> Result<(), CoreError> {
    if !is_valid_name(tag) {
        return Err(CoreError::invalid(format!("invalid tag : {tag}")));
    }
    if tag.chars().count() > MAX_TAG_LEN {
        return Err(CoreError::invalid(format!(
            "invalid tag : too long, over {MAX_TAG_LEN}"
        )));
    }
    Ok(())
}

/// The content type of a config. Unknown names become [`ConfigType::Text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConfigType {
    Properties,
    Xml,
    Json,
    #[default]
    Text,
    Html,
    Yaml,
    Toml,
}

impl ConfigType {
    /// Parses a type name; unknown or blank names are `Text`, as in Nacos.
    pub fn parse_lenient(s: &str) -> Self {
        match s.trim().to_ascii_lowercase().as_str() {
            "properties" => ConfigType::Properties,
            "xml" => ConfigType::Xml,
            "json" => ConfigType::Json,
            "html" => ConfigType::Html,
            "yaml" | "yml" => ConfigType::Yaml,
            "toml" => ConfigType::Toml,
            _ => ConfigType::Text,
        }
    }

    /// The name stored in the database and sent in `Config-Type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigType::Properties => "properties",
            ConfigType::Xml => "xml",
            ConfigType::Json => "json",
            ConfigType::Text => "text",
            ConfigType::Html => "html",
            ConfigType::Yaml => "yaml",
            ConfigType::Toml => "toml",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_normalisation() {
        for t in [None, Some(""), Some("  "), Some("public"), Some("null")] {
            assert_eq!(normalize_tenant(t).ok().as_deref(), Some(""));
        }
        assert_eq!(normalize_tenant(Some("dev")).ok().as_deref(), Some("dev"));
        assert!(normalize_tenant(Some("a b")).is_err());
        assert!(normalize_tenant(Some(&"x".repeat(129))).is_err());
        assert!(normalize_tenant(Some(&"x".repeat(128))).is_ok());
    }

    #[test]
    fn name_rules() {
        assert!(is_valid_name("app.yaml"));
        assert!(is_valid_name("a_b-c.d:e"));
        assert!(is_valid_name("配置"));
        assert!(!is_valid_name("a/b"));
        assert!(!is_valid_name("a b"));
        assert!(check_data_id("").is_err());
        assert!(check_data_id(&"d".repeat(256)).is_err());
        assert!(check_data_id(&"d".repeat(255)).is_ok());
        assert!(check_group(&"g".repeat(129)).is_err());
        assert!(check_tag(&"t".repeat(17)).is_err());
    }

    #[test]
    fn group_key_escapes() {
        let k = ConfigKey::from_trusted("", "G", "a+b%c");
        assert_eq!(k.group_key(), "a%2Bb%25c+G");
        let k = ConfigKey::from_trusted("ns", "G", "d");
        assert_eq!(k.group_key(), "d+G+ns");
    }

    #[test]
    fn types() {
        assert_eq!(ConfigType::parse_lenient("YAML"), ConfigType::Yaml);
        assert_eq!(ConfigType::parse_lenient("bogus"), ConfigType::Text);
        assert_eq!(ConfigType::parse_lenient(""), ConfigType::Text);
    }
}
