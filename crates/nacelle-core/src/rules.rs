//! The length and shape rules of everything a client may write besides the key (which
//! [`crate::key`] checks): config metadata, the content type, namespace names. Each limit
//! is a named constant; the service applies these functions and no adapter repeats them.

use crate::error::CoreError;
use crate::key::{is_valid_name, ConfigType};
use crate::model::ConfigMeta;

/// Longest `appName`.
pub const MAX_APP_NAME_LEN: usize = 128;
/// Longest `desc`.
pub const MAX_DESC_LEN: usize = 128;
/// Longest `use`.
pub const MAX_USE_LEN: usize = 32;
/// Longest `effect`.
pub const MAX_EFFECT_LEN: usize = 32;
/// Longest `schema` in characters.
pub const MAX_SCHEMA_CHARS: usize = 32 * 1024;
/// Longest `schema` in bytes: Nacos's `c_schema` is a MySQL `text`.
pub const MAX_SCHEMA_BYTES: usize = 65_535;
/// Longest `encryptedDataKey`.
pub const MAX_ENCRYPTED_DATA_KEY_LEN: usize = 1024;
/// Longest `src_user`.
pub const MAX_SRC_USER_LEN: usize = 128;
/// Most `config_tags` on one config.
pub const MAX_CONFIG_TAGS: usize = 5;
/// Longest single entry of `config_tags`.
pub const MAX_CONFIG_TAG_LEN: usize = 64;
/// Longest `type` name.
pub const MAX_TYPE_LEN: usize = 64;
/// Longest namespace display name.
pub const MAX_NAMESPACE_NAME_LEN: usize = 128;
/// Longest namespace description.
pub const MAX_NAMESPACE_DESC_LEN: usize = 256;
/// Characters Nacos refuses in a namespace display name.
pub const NAMESPACE_NAME_FORBIDDEN: &str = "@#$%^&*";
/// Longest publish message (characters), Nacelle's own field (`message`).
pub const MAX_MESSAGE_LEN: usize = 1024;

/// Fails when `value` has more than `max` characters.
pub fn check_len(field: &str, value: &str, max: usize) -> Result<(), CoreError> {
    if value.chars().count() > max {
        return Err(CoreError::invalid(format!(
            "invalid {field} : too long, over {max}"
        )));
    }
    Ok(())
}

/// The publish message of a write, trimmed: at most [`MAX_MESSAGE_LEN`] characters and no
/// NUL character (which PostgreSQL cannot store).
pub fn check_message(message: &str) -> Result<String, CoreError> {
    let message = message.trim();
    check_len("message", message, MAX_MESSAGE_LEN)?;
    if message.contains('\0') {
        return Err(CoreError::invalid(
            "invalid message : contains a NUL character",
        ));
    }
    Ok(message.to_string())
}

/// Checks the content of a publish: not blank, at most `max_bytes` bytes.
pub fn check_content(content: &str, max_bytes: usize) -> Result<(), CoreError> {
    if content.trim().is_empty() {
        return Err(CoreError::invalid(format!("content is blank : {content}")));
    }
    if content.len() > max_bytes {
        return Err(CoreError::TooLarge(format!(
            "too long content, over {max_bytes} bytes"
        )));
    }
    Ok(())
}

/// Checks the metadata of a publish and returns it with `config_tags` normalised (trimmed,
/// blanks dropped, joined by `,`).
pub fn check_meta(meta: ConfigMeta, src_user: &str) -> Result<ConfigMeta, CoreError> {
    check_len("appName", &meta.app_name, MAX_APP_NAME_LEN)?;
    check_len("desc", &meta.desc, MAX_DESC_LEN)?;
    check_len("use", &meta.r#use, MAX_USE_LEN)?;
    check_len("effect", &meta.effect, MAX_EFFECT_LEN)?;
    check_len("schema", &meta.schema, MAX_SCHEMA_CHARS)?;
    if meta.schema.len() > MAX_SCHEMA_BYTES {
        return Err(CoreError::invalid(format!(
            "invalid schema : too long, over {MAX_SCHEMA_BYTES} bytes"
        )));
    }
    check_len(
        "encryptedDataKey",
        &meta.encrypted_data_key,
        MAX_ENCRYPTED_DATA_KEY_LEN,
    )?;
    check_len("src_user", src_user, MAX_SRC_USER_LEN)?;
    let tags: Vec<&str> = meta
        .config_tags
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tags.len() > MAX_CONFIG_TAGS {
        return Err(CoreError::invalid(format!(
            "too many config_tags, over {MAX_CONFIG_TAGS}"
        )));
    }
    for t in &tags {
        check_len("config_tags", t, MAX_CONFIG_TAG_LEN)?;
    }
    let config_tags = tags.join(",");
    Ok(ConfigMeta {
        config_tags,
        ..meta
    })
}

/// The content type of a publish: blank or absent is `text`, unknown valid names are
/// `text` (as in Nacos), an invalid name is an error.
pub fn parse_config_type(raw: Option<&str>) -> Result<ConfigType, CoreError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(ConfigType::Text),
        Some(t) if t.len() > MAX_TYPE_LEN || !is_valid_name(t) => {
            Err(CoreError::invalid(format!("invalid type : {t}")))
        }
        Some(t) => Ok(ConfigType::parse_lenient(t)),
    }
}

/// Checks a namespace display name and returns it trimmed.
pub fn check_namespace_name(name: &str) -> Result<&str, CoreError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(CoreError::invalid("namespaceName is required"));
    }
    if name.chars().count() > MAX_NAMESPACE_NAME_LEN {
        return Err(CoreError::invalid(format!(
            "namespaceName is too long, over {MAX_NAMESPACE_NAME_LEN}"
        )));
    }
    if name.chars().any(|c| NAMESPACE_NAME_FORBIDDEN.contains(c)) {
        return Err(CoreError::invalid(format!(
            "namespaceName `{name}` contains illegal characters ({NAMESPACE_NAME_FORBIDDEN})"
        )));
    }
    Ok(name)
}

/// Checks a namespace description.
pub fn check_namespace_desc(desc: &str) -> Result<(), CoreError> {
    check_len("namespaceDesc", desc, MAX_NAMESPACE_DESC_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_rules() {
        let ok = ConfigMeta {
            config_tags: " a, ,b ".into(),
            ..ConfigMeta::default()
        };
        assert_eq!(
            check_meta(ok, "u").map(|m| m.config_tags).ok().as_deref(),
            Some("a,b")
        );
        let too_many = ConfigMeta {
            config_tags: "1,2,3,4,5,6".into(),
            ..ConfigMeta::default()
        };
        assert!(check_meta(too_many, "").is_err());
        let long_app = ConfigMeta {
            app_name: "a".repeat(MAX_APP_NAME_LEN + 1),
            ..ConfigMeta::default()
        };
        assert!(check_meta(long_app, "").is_err());
        assert!(check_meta(ConfigMeta::default(), &"u".repeat(MAX_SRC_USER_LEN + 1)).is_err());
    }

    #[test]
    fn content_and_type() {
        assert!(check_content(" ", 10).is_err());
        assert!(matches!(
            check_content("12345678901", 10),
            Err(CoreError::TooLarge(_))
        ));
        assert!(check_content("x", 10).is_ok());
        assert_eq!(parse_config_type(None).ok(), Some(ConfigType::Text));
        assert_eq!(
            parse_config_type(Some(" yaml ")).ok(),
            Some(ConfigType::Yaml)
        );
        assert_eq!(
            parse_config_type(Some("bogus")).ok(),
            Some(ConfigType::Text)
        );
        assert!(parse_config_type(Some("a b")).is_err());
    }

    #[test]
    fn namespace_names() {
        assert_eq!(check_namespace_name(" dev ").ok(), Some("dev"));
        assert!(check_namespace_name("a#b").is_err());
        assert!(check_namespace_name(" ").is_err());
        assert!(check_namespace_desc(&"d".repeat(MAX_NAMESPACE_DESC_LEN + 1)).is_err());
    }
}
