//! Encrypted configs (`cipher-<algorithm>-…` dataIds), as Nacos's AES plugin does them,
//! plus the master-key wrapping of data keys at rest (`docs/encryption.md`).
//!
//! Two hooks, so that every variant of a key (formal, gray, tag) goes through the same
//! rule:
//! - write: [`ConfigService::seal`] turns a validated record holding the
//!   caller's plaintext into what is stored — encrypted with a fresh data key (or, when
//!   the caller brought its own `encryptedDataKey`, checked by decrypting and stored as
//!   given), with the plaintext beside it for the content check the write path makes;
//!   with a master key the stored data key is wrapped.
//! - read: [`ConfigService::view`] gives what a caller of a protocol is served of a
//!   stored config: HTTP callers get the plaintext (decrypted on the server, as Nacos's
//!   v1/v2 GET, `show=all`, search and history do), gRPC callers the ciphertext (their
//!   client decrypts, as Nacos's `ConfigQueryRequestHandler` leaves it); both get the
//!   unwrapped data key as `encryptedDataKey`.
//!
//! Opening a stored config (unwrapping its data key, decrypting its content) is done once
//! per stored version and cached in memory, so a GET of an encrypted config costs a map
//! lookup more than a plain one. A failure is cached too (and logged once per version),
//! and served as [`CoreError::Cipher`]: never a panic, never ciphertext passed off as
//! plaintext, never the plaintext in a log.

use std::sync::Arc;

use bytes::Bytes;
use nacelle_cipher::{
    cipher_rule, is_wrapped, open_data_key, wrapped_key_id, CipherError, CipherRule, DataKey,
};
use nacelle_core::{
    md5_hex, Caller, ConfigKey, CoreError, HistoryEntry, Protocol, PublishRecord, StoredConfig,
};

use crate::config::cipher_state::Opened;
use crate::config::service::ConfigService;
use crate::config::view::ConfigView;

/// How many stored encrypted configs there are, by how their data key is kept.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CipherCensus {
    /// Data key in clear (as Nacos writes it).
    pub clear: usize,
    /// Wrapped by the current master key.
    pub wrapped: usize,
    /// Wrapped by a previous master key that is still configured (to be rewrapped).
    pub previous: usize,
    /// Wrapped by a master key that is not configured (or with none configured).
    pub foreign: usize,
}

/// The prefix of a change request's sealed content (an encrypted dataId's).
const SEALED_PREFIX: &str = "nacelle-sealed-v1:";

/// A publish as it is stored, and the plaintext its content check sees when that differs
/// from what is stored (an encrypted dataId's).
pub(crate) struct Sealed {
    pub(crate) record: PublishRecord,
    pub(crate) plaintext: Option<Bytes>,
}

/// What the cipher rule makes of a publish.
enum Seal {
    /// Stored as given.
    AsGiven,
    /// The server encrypts the plaintext with a fresh data key.
    Encrypt,
    /// The caller encrypted: the record holds ciphertext and its `encryptedDataKey`.
    ClientEncrypted,
}

impl ConfigService {
    /// The cipher rule applied to a publish: for an encrypted dataId, the record turned
    /// into what is stored — its ciphertext, md5 of the ciphertext and the (wrapped) data
    /// key — together with the plaintext the content check must see; any other record as
    /// given. Checks nothing else: the caller (`ConfigService::checked_and_sealed`) checks
    /// the content by its type.
    pub(crate) fn seal(&self, mut record: PublishRecord) -> Result<Sealed, CoreError> {
        let given_key = record.meta.encrypted_data_key.trim().to_string();
        let seal = match cipher_rule(record.key.data_id()) {
            CipherRule::Plain => Seal::AsGiven,
            CipherRule::Unknown(algorithm) => {
                // Nacos stores such a config in clear, and so do we, with its warning.
                tracing::warn!(
                    namespace = record.key.namespace().as_str(),
                    group = record.key.group(),
                    data_id = record.key.data_id(),
                    algorithm,
                    "no encryption algorithm of that name (Nacelle implements `aes`); the config is stored in clear, as Nacos does"
                );
                Seal::AsGiven
            }
            CipherRule::Known(_) if given_key.is_empty() => Seal::Encrypt,
            CipherRule::Known(_) => Seal::ClientEncrypted,
        };
        match seal {
            Seal::AsGiven => Ok(Sealed {
                record,
                plaintext: None,
            }),
            Seal::Encrypt => {
                let data_key = DataKey::generate().map_err(|e| cipher_error(&record.key, &e))?;
                let plaintext = record.content.clone();
                let text = std::str::from_utf8(&plaintext)
                    .map_err(|_| CoreError::invalid("the content is not UTF-8"))?;
                let ciphertext = data_key
                    .encrypt(text)
                    .map_err(|e| cipher_error(&record.key, &e))?;
                record.md5 = md5_hex(ciphertext.as_bytes());
                record.content = Bytes::from(ciphertext);
                record.meta.encrypted_data_key =
                    self.stored_form(&record.key, data_key.as_str())?;
                Ok(Sealed {
                    record,
                    plaintext: Some(plaintext),
                })
            }
            Seal::ClientEncrypted => {
                // Stored as given; but what is given must decrypt with the given key, and
                // the plaintext is what the type check sees.
                let data_key = DataKey::parse(&given_key).map_err(|e| {
                    CoreError::invalid(format!("encryptedDataKey is not a data key: {e}"))
                })?;
                let ciphertext = std::str::from_utf8(&record.content)
                    .map_err(|_| CoreError::invalid("the content is not UTF-8"))?;
                let plaintext = data_key.decrypt(ciphertext).map_err(|e| {
                    CoreError::invalid(format!(
                        "the content of {} does not decrypt with the given encryptedDataKey: {e}",
                        record.key.data_id()
                    ))
                })?;
                record.meta.encrypted_data_key = self.stored_form(&record.key, &given_key)?;
                Ok(Sealed {
                    record,
                    plaintext: Some(Bytes::from(plaintext)),
                })
            }
        }
    }

    /// The content of a change request's publish of `key` as the request stores it: for
    /// an encrypted dataId (`cipher-<algorithm>-…` with an algorithm Nacelle implements),
    /// `nacelle-sealed-v1:<data key as stored>:<ciphertext>` — a fresh data key, wrapped by
    /// the master key when one is configured, as a config's own — so a request never holds
    /// a secret's plaintext at rest; any other content as given.
    pub(crate) fn seal_for_change(
        &self,
        key: &ConfigKey,
        content: String,
    ) -> Result<String, CoreError> {
        if !matches!(cipher_rule(key.data_id()), CipherRule::Known(_)) {
            return Ok(content);
        }
        let data_key = DataKey::generate().map_err(|e| cipher_error(key, &e))?;
        let ciphertext = data_key
            .encrypt(&content)
            .map_err(|e| cipher_error(key, &e))?;
        let stored = self.stored_form(key, data_key.as_str())?;
        Ok(format!("{SEALED_PREFIX}{stored}:{ciphertext}"))
    }

    /// The plaintext of a change request's content stored by [`Self::seal_for_change`]
    /// (content without the prefix is returned as it is). A data key that does not unwrap
    /// or a ciphertext that does not decrypt is [`CoreError::Cipher`], never empty content.
    pub(crate) fn open_from_change(
        &self,
        key: &ConfigKey,
        stored: String,
    ) -> Result<String, CoreError> {
        let Some(sealed) = stored.strip_prefix(SEALED_PREFIX) else {
            return Ok(stored);
        };
        // The ciphertext is base64 (no `:`); the stored data key may hold `:`.
        let (data_key, ciphertext) = sealed
            .rsplit_once(':')
            .ok_or_else(|| cipher_error(key, &CipherError::BadCiphertext))?;
        let master = self.inner.cipher.master.as_deref();
        let plaintext = open_data_key(data_key, master)
            .and_then(|k| DataKey::parse(&k)?.decrypt(ciphertext))
            .map_err(|e| cipher_error(key, &e))?;
        Ok(plaintext)
    }

    /// A data key as it is stored: wrapped by the master key when one is configured, else
    /// in clear (as Nacos stores it).
    fn stored_form(&self, key: &ConfigKey, data_key: &str) -> Result<String, CoreError> {
        match &self.inner.cipher.master {
            Some(m) => m.wrap(data_key).map_err(|e| cipher_error(key, &e)),
            None => Ok(data_key.to_string()),
        }
    }

    /// The read hook: `cfg` (any variant of a key) as `caller` is shown it. A config that
    /// is not encrypted is shown as stored; an encrypted one in plaintext over HTTP and as
    /// ciphertext over gRPC and the v3 client API, with its data key in clear either way. A
    /// data key that does not unwrap or content that does not decrypt is
    /// [`CoreError::Cipher`] — for every protocol and every operation, never empty content.
    pub(crate) fn view(
        &self,
        caller: &Caller,
        cfg: Arc<StoredConfig>,
    ) -> Result<ConfigView, CoreError> {
        if !matches!(cipher_rule(cfg.key.data_id()), CipherRule::Known(_))
            || cfg.meta.encrypted_data_key.is_empty()
        {
            // Nacos's decryptHandler too serves such content as stored.
            let content = cfg.content.clone();
            return Ok(ConfigView::new(cfg, content, None));
        }
        let opened = self.opened(&cfg);
        let data_key = opened
            .data_key
            .as_ref()
            .map_err(|e| cipher_error(&cfg.key, e))?
            .clone();
        let content = if serves_plaintext(caller.protocol) {
            opened
                .plaintext
                .as_ref()
                .map_err(|e| cipher_error(&cfg.key, e))?
                .clone()
        } else {
            cfg.content.clone()
        };
        Ok(ConfigView::new(cfg, content, Some(data_key)))
    }

    /// `cfg` with an encrypted config's content in plaintext and no data key, whoever
    /// asks (export and clone write the plaintext out, or encrypt it again).
    pub(crate) fn view_in_plaintext(
        &self,
        cfg: Arc<StoredConfig>,
    ) -> Result<ConfigView, CoreError> {
        if cfg.meta.encrypted_data_key.is_empty()
            || !matches!(cipher_rule(cfg.key.data_id()), CipherRule::Known(_))
        {
            let content = cfg.content.clone();
            return Ok(ConfigView::new(cfg, content, None));
        }
        let plaintext = self
            .opened(&cfg)
            .plaintext
            .as_ref()
            .map_err(|e| cipher_error(&cfg.key, e))?
            .clone();
        Ok(ConfigView::new(cfg, plaintext, Some(Arc::from(""))))
    }

    /// One history entry (formal or gray) as `caller` is shown it: an encrypted config's
    /// version in plaintext over HTTP (as Nacos's `HistoryService` shows it), with its data
    /// key unwrapped from the master key. Not cached (history reads are rare).
    pub(crate) fn reveal_history(
        &self,
        caller: &Caller,
        mut entry: HistoryEntry,
    ) -> Result<HistoryEntry, CoreError> {
        if !matches!(cipher_rule(entry.key.data_id()), CipherRule::Known(_))
            || entry.encrypted_data_key.is_empty()
        {
            return Ok(entry);
        }
        let master = self.inner.cipher.master.as_deref();
        let data_key = open_data_key(&entry.encrypted_data_key, master)
            .map_err(|e| cipher_error(&entry.key, &e))?;
        if serves_plaintext(caller.protocol) {
            entry.content = DataKey::parse(&data_key)
                .and_then(|k| k.decrypt(&entry.content))
                .map_err(|e| cipher_error(&entry.key, &e))?;
        }
        entry.encrypted_data_key = data_key;
        Ok(entry)
    }

    /// The opened form of `cfg`, from the cache when it holds this version.
    fn opened(&self, cfg: &StoredConfig) -> Arc<Opened> {
        let cache = &self.inner.cipher.opened;
        if let Some(o) = cache.get(&cfg.key) {
            if o.md5 == cfg.md5 && o.stored_key == cfg.meta.encrypted_data_key {
                return o.clone();
            }
        }
        let opened = Arc::new(self.open(cfg));
        cache.insert(cfg.key.clone(), opened.clone());
        opened
    }

    fn open(&self, cfg: &StoredConfig) -> Opened {
        let master = self.inner.cipher.master.as_deref();
        let data_key = open_data_key(&cfg.meta.encrypted_data_key, master);
        let plaintext = data_key.clone().and_then(|k| {
            let k = DataKey::parse(&k)?;
            let text = std::str::from_utf8(&cfg.content).map_err(|_| CipherError::BadCiphertext)?;
            Ok(Bytes::from(k.decrypt(text)?))
        });
        if let Err(e) = &plaintext {
            tracing::error!(
                namespace = cfg.key.namespace().as_str(),
                group = cfg.key.group(),
                data_id = cfg.key.data_id(),
                revision = cfg.revision,
                error = %e,
                "an encrypted config cannot be opened; its reads fail until this is fixed (docs/encryption.md)"
            );
        }
        Opened {
            md5: cfg.md5.clone(),
            stored_key: cfg.meta.encrypted_data_key.clone(),
            data_key: data_key.map(Arc::from),
            plaintext_md5: plaintext.as_ref().ok().map(|p| md5_hex(p)),
            plaintext,
        }
    }

    /// Whether a listener of `key` holding `client_md5` is up to date: it holds the md5 it
    /// would be served (the stored md5) — or, for an HTTP caller of an encrypted config,
    /// the md5 of the plaintext it was served: HTTP clients (Python 1.x, Java 1.x, Node)
    /// hash the content they got, while `Content-MD5` and Nacos's comparison use the
    /// ciphertext's md5, which would answer "changed" to every long poll of such a key.
    pub(crate) fn holds_current(&self, caller: &Caller, key: &ConfigKey, client_md5: &str) -> bool {
        if self.md5_for(caller, key).as_deref().unwrap_or("") == client_md5 {
            return true;
        }
        let Some(cfg) = self.select(caller, key, None).map(|s| s.config) else {
            return false;
        };
        if !serves_plaintext(caller.protocol)
            || !matches!(cipher_rule(key.data_id()), CipherRule::Known(_))
            || cfg.meta.encrypted_data_key.is_empty()
        {
            return false;
        }
        self.opened(&cfg).plaintext_md5.as_deref() == Some(client_md5)
    }

    /// Counts the encrypted configs in memory by how their data key is kept.
    pub fn cipher_census(&self) -> CipherCensus {
        let ids: Vec<&str> = self
            .inner
            .cipher
            .master
            .as_ref()
            .map(|m| m.ids())
            .unwrap_or_default();
        let mut census = CipherCensus::default();
        for e in self.inner.cache.iter() {
            let c = e.value();
            if !matches!(cipher_rule(c.key.data_id()), CipherRule::Known(_))
                || c.meta.encrypted_data_key.is_empty()
            {
                continue;
            }
            let stored = &c.meta.encrypted_data_key;
            match wrapped_key_id(stored) {
                _ if !is_wrapped(stored) => census.clear += 1,
                Some(id) if ids.first() == Some(&id) => census.wrapped += 1,
                Some(id) if ids.contains(&id) => census.previous += 1,
                _ => census.foreign += 1,
            }
        }
        census
    }

    /// Logs, once the cache is loaded, what an operator must know of the encrypted configs:
    /// data keys kept in clear (no master key, or rows written before it), and rows wrapped
    /// by a master key that is not configured (their reads fail).
    pub(crate) fn warn_about_cipher_configs(&self) {
        let census = self.cipher_census();
        let master = self.inner.cipher.master.as_ref();
        if census.clear > 0 {
            match master {
                None => tracing::warn!(
                    configs = census.clear,
                    "encrypted configs (cipher-aes-…) keep their data key in clear next to the ciphertext, as Nacos does; set --cipher-master-key-file to wrap new data keys (docs/encryption.md)"
                ),
                Some(m) => tracing::warn!(
                    configs = census.clear,
                    master_key_id = m.current().id(),
                    "encrypted configs keep their data key in clear (written by Nacos or before the master key was set); they are wrapped when next published (docs/encryption.md)"
                ),
            }
        }
        if census.previous > 0 {
            tracing::warn!(
                configs = census.previous,
                "encrypted configs have a data key wrapped by a previous master key; they read, and are rewrapped with the current key when next published (docs/encryption.md, rotation)"
            );
        }
        if census.foreign > 0 {
            let ids = master
                .map(|m| m.ids().join(","))
                .unwrap_or_else(|| "none".into());
            tracing::error!(
                configs = census.foreign,
                master_key_ids = ids.as_str(),
                "encrypted configs have a data key wrapped by a master key that is not configured; their reads fail (docs/encryption.md)"
            );
        }
    }
}

/// Whether callers of `protocol` get the plaintext of an encrypted config (the server
/// decrypts) rather than the ciphertext (the client decrypts).
fn serves_plaintext(protocol: Protocol) -> bool {
    match protocol {
        // Nacos's v1/v2 GET (ConfigServletInner), show=all, search, history, and the v3
        // admin API (ConfigControllerV3's decryptHandler): decrypted.
        Protocol::HttpV1 | Protocol::HttpV2 | Protocol::HttpV3Admin | Protocol::Internal => true,
        // ConfigQueryRequestHandler and the v3 client API (the same query chain):
        // ciphertext + encryptedDataKey; members reload from the database and never get
        // content served.
        Protocol::Grpc | Protocol::HttpV3 | Protocol::Cluster => false,
    }
}

/// A [`CipherError`] as the service reports it: the key and the reason.
fn cipher_error(key: &ConfigKey, e: &CipherError) -> CoreError {
    CoreError::Cipher(format!(
        "encrypted config {} (group {}, namespace '{}'): {e}",
        key.data_id(),
        key.group(),
        key.namespace().as_str()
    ))
}
