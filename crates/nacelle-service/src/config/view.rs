//! What the service hands a caller: finished views, never a stored record.
//!
//! Every read operation (get, the formal config, beta and grays, search, the configs of a
//! namespace, export) returns a [`ConfigView`], built by the service with the caller's
//! shaping already applied — above all the decryption of encrypted configs, whose rule
//! depends on the protocol ([`crate::cipher`]): HTTP callers are shown the plaintext,
//! gRPC and the v3 client API the ciphertext their client decrypts. A view's content and
//! data key are only reachable through [`ConfigView::content`] and
//! [`ConfigView::encrypted_data_key`], so an adapter cannot serve stored ciphertext (or a
//! data key wrapped by the master key) by forgetting a call: there is no call to forget.
//! History entries are revealed the same way before they leave the service.

use std::sync::Arc;

use bytes::Bytes;
use nacelle_core::{ConfigKey, ConfigMeta, ConfigType, OpSource, StoredConfig};

/// One config (any variant of a key) as one caller is shown it. Cloning is cheap (shared
/// record, reference-counted content). Its `Debug` shows no content and no data key.
#[derive(Clone)]
pub struct ConfigView {
    stored: Arc<StoredConfig>,
    content: Bytes,
    /// The data key to send, when it differs from the stored one (unwrapped from the master
    /// key, or removed); `None`: the stored field as it is.
    data_key: Option<Arc<str>>,
}

impl ConfigView {
    /// `stored` shown with `content` and, when given, `data_key` in place of the stored
    /// ones. Only the service builds views (the cipher module decides what is shown).
    pub(crate) fn new(
        stored: Arc<StoredConfig>,
        content: Bytes,
        data_key: Option<Arc<str>>,
    ) -> Self {
        ConfigView {
            stored,
            content,
            data_key,
        }
    }

    /// The content as this caller is served it.
    pub fn content(&self) -> &Bytes {
        &self.content
    }

    /// The content as text (invalid UTF-8 replaced, as a Java client would decode it).
    pub fn content_text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.content)
    }

    /// The data key to send as `encryptedDataKey` / `Encrypted-Data-Key` (empty: none).
    pub fn encrypted_data_key(&self) -> &str {
        match &self.data_key {
            Some(k) => k,
            None => &self.stored.meta.encrypted_data_key,
        }
    }

    /// Row id (`config_info.id`, or the gray row's).
    pub fn id(&self) -> i64 {
        self.stored.id
    }

    pub fn key(&self) -> &ConfigKey {
        &self.stored.key
    }

    /// The md5 of the stored content: what listeners compare and `Content-MD5` carries (of
    /// the ciphertext for an encrypted config, as Nacos sends it).
    pub fn md5(&self) -> &str {
        &self.stored.md5
    }

    pub fn config_type(&self) -> ConfigType {
        self.stored.config_type
    }

    pub fn app_name(&self) -> &str {
        &self.stored.meta.app_name
    }

    pub fn desc(&self) -> &str {
        &self.stored.meta.desc
    }

    /// Comma-separated tags (`config_tags`).
    pub fn config_tags(&self) -> &str {
        &self.stored.meta.config_tags
    }

    /// Nacos's `c_use` field.
    pub fn r#use(&self) -> &str {
        &self.stored.meta.r#use
    }

    pub fn effect(&self) -> &str {
        &self.stored.meta.effect
    }

    pub fn schema(&self) -> &str {
        &self.stored.meta.schema
    }

    /// The descriptive metadata (app, description, tags, use, effect, schema) to carry
    /// into a new version of the key, without a data key: content republished from a
    /// view is plaintext to an HTTP caller, and the service encrypts it afresh.
    pub fn meta_for_republish(&self) -> ConfigMeta {
        ConfigMeta {
            encrypted_data_key: String::new(),
            ..self.stored.meta.clone()
        }
    }

    /// The user and IP of the last change.
    pub fn source(&self) -> &OpSource {
        &self.stored.source
    }

    pub fn created_ms(&self) -> i64 {
        self.stored.created_ms
    }

    pub fn modified_ms(&self) -> i64 {
        self.stored.modified_ms
    }

    /// The revision of this version (the history `nid` written with it).
    pub fn revision(&self) -> i64 {
        self.stored.revision
    }
}

/// What a write tells its caller of the version it stored: enough to answer (`md5`,
/// modification time) and to compare-and-set the next write, never the stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// Row id of the version written (the gray row's for a gray).
    pub id: i64,
    /// The md5 of the stored content (of the ciphertext for an encrypted config).
    pub md5: String,
    pub modified_ms: i64,
    /// The revision of the version written.
    pub revision: i64,
}

impl Published {
    pub(crate) fn of(stored: &StoredConfig) -> Self {
        Published {
            id: stored.id,
            md5: stored.md5.clone(),
            modified_ms: stored.modified_ms,
            revision: stored.revision,
        }
    }
}

impl std::fmt::Debug for ConfigView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigView")
            .field("id", &self.stored.id)
            .field("key", &self.stored.key)
            .field("md5", &self.stored.md5)
            .field("content_bytes", &self.content.len())
            .field("has_data_key", &!self.encrypted_data_key().is_empty())
            .finish()
    }
}
