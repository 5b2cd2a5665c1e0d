//! The state of encrypted configs the service holds (the master key, the opened versions),
//! apart from the operations on it (`crate::config::cipher`), so that `service.rs` can hold it
//! without depending on those operations.

use std::sync::Arc;

use bytes::Bytes;
use nacelle_cipher::{CipherError, MasterKeys};

/// The state of encrypted configs: the master key and the opened versions.
#[derive(Debug, Default)]
pub(crate) struct CipherState {
    /// Wraps data keys at rest when set (`--cipher-master-key-file`): the current key
    /// wraps, previous ones still unwrap.
    pub(crate) master: Option<Arc<MasterKeys>>,
    /// The opened version of each encrypted key, checked against the stored version on
    /// every read (md5 and stored data key), so a new version — or another variant of the
    /// key — is opened afresh.
    pub(crate) opened: crate::config::key_map::KeyMap<Arc<Opened>>,
}

/// One stored version of an encrypted config, opened. Its `Debug` shows neither the key
/// nor the plaintext.
pub(crate) struct Opened {
    pub(crate) md5: String,
    pub(crate) stored_key: String,
    /// The data key in clear, as clients get it in `encryptedDataKey`.
    pub(crate) data_key: Result<Arc<str>, CipherError>,
    /// The plaintext, as HTTP callers get it.
    pub(crate) plaintext: Result<Bytes, CipherError>,
    /// md5 of the plaintext: what an HTTP client that hashes what it was served holds.
    pub(crate) plaintext_md5: Option<String>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("md5", &self.md5)
            .field("data_key", &self.data_key.as_ref().map(|_| "…"))
            .field("plaintext", &self.plaintext.as_ref().map(Bytes::len))
            .finish()
    }
}

impl CipherState {
    pub(crate) fn new(master: Option<Arc<MasterKeys>>) -> Self {
        CipherState {
            master,
            opened: Default::default(),
        }
    }
}
