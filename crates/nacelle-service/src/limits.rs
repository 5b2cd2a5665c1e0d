//! Explicit limits of the service. Every one is configurable and documented in
//! `docs/configuration.md`.

/// Limits enforced by the config service and its adapters.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest config content in bytes (Nacos: 10 MB).
    pub max_content_bytes: usize,
    /// Most keys one long poll or one gRPC listen request may carry (Nacos: 10 000).
    pub max_listen_keys: usize,
    /// Most long polls held at once; beyond it clients get 503.
    pub max_held_polls: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_content_bytes: 10 * 1024 * 1024,
            max_listen_keys: 10_000,
            max_held_polls: 100_000,
        }
    }
}
