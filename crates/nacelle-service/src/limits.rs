//! Explicit limits of the service. Every one is configurable and documented in
//! `docs/configuration.md`.

use std::sync::Arc;

use nacelle_cipher::MasterKeys;
use nacelle_core::ValidationPolicy;

/// Limits and policies enforced by the config service and its adapters.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest config content in bytes (Nacos: 10 MB).
    pub max_content_bytes: usize,
    /// Most keys one long poll or one gRPC listen request may carry (Nacos: 10 000).
    pub max_listen_keys: usize,
    /// Most long polls held at once; beyond it clients get 503.
    pub max_held_polls: usize,
    /// What a publish whose content does not parse as its type does, by namespace
    /// (`reject | warn | off`; default `warn`). See `nacelle_core::content`.
    pub content_validation: ValidationPolicy,
    /// The master keys that wrap the data keys of encrypted configs at rest
    /// (`--cipher-master-key-file`: the current key, then previous ones that only unwrap);
    /// `None`: data keys are stored in clear, as Nacos does. Never a built-in default. See
    /// `docs/encryption.md`.
    pub cipher_master_key: Option<Arc<MasterKeys>>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_content_bytes: 10 * 1024 * 1024,
            max_listen_keys: 10_000,
            max_held_polls: 100_000,
            content_validation: ValidationPolicy::default(),
            cipher_master_key: None,
        }
    }
}
