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
/// Namespace values that clients send to mean the default namespace, besides blank.
pub const DEFAULT_NAMESPACE_ALIASES: [&str; 2] = [DEFAULT_NAMESPACE_NAME, "null"];
/// Longest dataId Nacos accepts.
pub const MAX_DATA_ID_LEN: usize = 255;
/// Longest group name.
pub const MAX_GROUP_LEN: usize = 128;
/// Longest namespace id.
pub const MAX_TENANT_LEN: usize = 128;
/// Longest tag.
pub const MAX_TAG_LEN: usize = 16;

/// A normalised namespace id: `""` is the default namespace (`public`). Every value comes
/// from [`NamespaceId::parse`] (what a client sent) or [`NamespaceId::from_trusted`] (a row
/// read back from the database), so the "public, null and blank mean the default" rule
/// and the character rules are applied in one place.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NamespaceId(Arc<str>);

impl NamespaceId {
    /// The default namespace (`""`).
    pub fn default_namespace() -> Self {
        NamespaceId(Arc::from(""))
    }

    /// Normalises a namespace as a client sent it: `public`, `null` and blank mean the
    /// default namespace. Other values must be valid names ([`is_valid_name`]) of at most
    /// [`MAX_TENANT_LEN`] characters. Surrounding blanks are ignored.
    pub fn parse(raw: Option<&str>) -> Result<Self, CoreError> {
        let t = raw.map(str::trim).unwrap_or("");
        if t.is_empty() || DEFAULT_NAMESPACE_ALIASES.contains(&t) {
            return Ok(NamespaceId::default_namespace());
        }
        if t.chars().count() > MAX_TENANT_LEN {
            return Err(CoreError::invalid(format!(
                "too long tenant, over {MAX_TENANT_LEN}"
            )));
        }
        if !is_valid_name(t) {
            return Err(CoreError::invalid(format!("invalid tenant : {t}")));
        }
        Ok(NamespaceId(t.into()))
    }

    /// The id of a namespace to create: the same rules as [`NamespaceId::parse`], but a
    /// value that would mean the default namespace (`public`, `null`) is refused rather than
    /// silently resolved, because a namespace of that name could never be addressed.
    pub fn parse_custom(raw: &str) -> Result<Self, CoreError> {
        let t = raw.trim();
        if DEFAULT_NAMESPACE_ALIASES.contains(&t) {
            return Err(CoreError::invalid(format!(
                "namespace id `{t}` is reserved: it means the default namespace"
            )));
        }
        let id = NamespaceId::parse(Some(t))?;
        if id.is_default() {
            return Err(CoreError::invalid("namespace id is blank"));
        }
        Ok(id)
    }

    /// A value already validated (a row read back from the database).
    pub fn from_trusted(id: &str) -> Self {
        NamespaceId(id.into())
    }

    /// The id (`""` for the default namespace).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the default namespace.
    pub fn is_default(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for NamespaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl fmt::Display for NamespaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Identifies one config: (namespace, group, dataId). The namespace is already normalised:
/// the default namespace is `""`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKey {
    tenant: NamespaceId,
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
        let tenant = NamespaceId::parse(tenant)?;
        ConfigKey::new(tenant, group, data_id)
    }

    /// Validates group and dataId and builds a key in an already normalised namespace.
    pub fn new(namespace: NamespaceId, group: &str, data_id: &str) -> Result<Self, CoreError> {
        check_data_id(data_id)?;
        check_group(group)?;
        Ok(ConfigKey {
            tenant: namespace,
            group: group.into(),
            data_id: data_id.into(),
        })
    }

    /// Builds a key from values already validated (rows read back from the database).
    pub fn from_trusted(tenant: &str, group: &str, data_id: &str) -> Self {
        ConfigKey {
            tenant: NamespaceId::from_trusted(tenant),
            group: group.into(),
            data_id: data_id.into(),
        }
    }

    /// The namespace id (`""` for the default namespace).
    pub fn tenant(&self) -> &str {
        self.tenant.as_str()
    }

    /// The namespace.
    pub fn namespace(&self) -> &NamespaceId {
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
        let tenant = self.tenant.as_str();
        let mut s = String::with_capacity(self.data_id.len() + self.group.len() + tenant.len() + 2);
        escape_part(&self.data_id, &mut s);
        s.push('+');
        escape_part(&self.group, &mut s);
        if !tenant.is_empty() {
            s.push('+');
            escape_part(tenant, &mut s);
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

/// Normalises a namespace as the client sent it; see [`NamespaceId::parse`].
pub fn normalize_tenant(tenant: Option<&str>) -> Result<NamespaceId, CoreError> {
    NamespaceId::parse(tenant)
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

/// A tag as a client sent it, with the one "blank means absent" rule: `None` or a blank
/// value is no tag; anything else must pass [`check_tag`].
pub fn tag_of(raw: Option<&str>) -> Result<Option<&str>, CoreError> {
    match raw.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => {
            check_tag(t)?;
            Ok(Some(t))
        }
    }
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
            assert_eq!(
                normalize_tenant(t).ok().as_ref().map(NamespaceId::as_str),
                Some("")
            );
        }
        assert_eq!(
            normalize_tenant(Some("dev"))
                .ok()
                .as_ref()
                .map(NamespaceId::as_str),
            Some("dev")
        );
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
    fn namespace_ids_follow_tenant_rules() {
        for ok in ["dev", "a.b", "a:b", "dev-1_x", "命名"] {
            let created = NamespaceId::parse_custom(ok).expect("a valid id");
            let addressed = NamespaceId::parse(Some(ok)).expect("a valid tenant");
            assert_eq!(created, addressed, "{ok}");
        }
        for reserved in ["public", "null", " public "] {
            assert!(NamespaceId::parse_custom(reserved).is_err(), "{reserved}");
            assert!(NamespaceId::parse(Some(reserved)).expect("ok").is_default());
        }
        for bad in ["", "  ", "a b", "a/b", &"x".repeat(129)] {
            assert!(NamespaceId::parse_custom(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn blank_tag_is_no_tag() {
        assert_eq!(tag_of(None).ok(), Some(None));
        assert_eq!(tag_of(Some("")).ok(), Some(None));
        assert_eq!(tag_of(Some("  ")).ok(), Some(None));
        assert_eq!(tag_of(Some(" v1 ")).ok(), Some(Some("v1")));
        assert!(tag_of(Some("a b")).is_err());
        assert!(tag_of(Some(&"t".repeat(17))).is_err());
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
