//! The authentication state a service holds (below both the service and the auth
//! operations): how it authenticates ([`AuthConfig`]), the directory of users, roles and
//! permissions, verified tokens and passwords, and the login throttle.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use dashmap::DashMap;
use nacelle_core::auth::Directory;
use nacelle_core::CoreError;
use parking_lot::RwLock;

use crate::config::auth::password::PasswordCache;
use crate::config::auth::throttle::Throttle;

/// Nacos's default token lifetime.
pub const DEFAULT_TOKEN_TTL_S: u64 = 18_000;
/// The shortest token secret Nacos accepts, in decoded bytes.
pub const MIN_SECRET_BYTES: usize = 32;
/// How a server authenticates.
#[derive(Clone)]
pub struct AuthConfig {
    /// Off: every caller may do everything (`--auth off`).
    pub enabled: bool,
    /// Unauthenticated callers may read and listen; writes still need a user.
    pub anonymous_read: bool,
    /// The decoded token secret (at least [`MIN_SECRET_BYTES`]).
    pub(crate) secret: Arc<[u8]>,
    /// Lifetime of the tokens this server issues, in seconds.
    pub token_ttl_s: u64,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("enabled", &self.enabled)
            .field("anonymous_read", &self.anonymous_read)
            .field("token_ttl_s", &self.token_ttl_s)
            .finish_non_exhaustive()
    }
}

impl AuthConfig {
    /// Authentication off.
    pub fn off() -> Self {
        AuthConfig {
            enabled: false,
            anonymous_read: false,
            secret: Arc::from(Vec::new()),
            token_ttl_s: DEFAULT_TOKEN_TTL_S,
        }
    }

    /// Authentication on, signing with `secret` (base64, as Nacos's
    /// `nacos.core.auth.plugin.nacos.token.secret.key`).
    pub fn on(secret_base64: &str, token_ttl_s: u64) -> Result<Self, CoreError> {
        Ok(AuthConfig {
            enabled: true,
            anonymous_read: false,
            secret: decode_secret(secret_base64)?.into(),
            token_ttl_s: token_ttl_s.max(1),
        })
    }
}

/// Decodes a token secret: base64 of at least [`MIN_SECRET_BYTES`] bytes.
pub fn decode_secret(text: &str) -> Result<Vec<u8>, CoreError> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|_| CoreError::Invalid("the token secret must be base64".into()))?;
    if bytes.len() < MIN_SECRET_BYTES {
        return Err(CoreError::Invalid(format!(
            "the token secret must decode to at least {MIN_SECRET_BYTES} bytes (it has {})",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// The authentication state of a service.
pub(crate) struct AuthState {
    pub(crate) config: RwLock<AuthConfig>,
    /// `config.enabled` and `config.anonymous_read`, read on every request without the
    /// lock.
    pub(crate) enabled: AtomicBool,
    pub(crate) anonymous_read: AtomicBool,
    /// `config.token_ttl_s`, read on every token check without the lock.
    pub(crate) token_ttl_s: AtomicU64,
    pub(crate) directory: RwLock<Arc<Directory>>,
    /// Verified tokens → (user, exp); the directory is still checked on every use.
    pub(crate) tokens: DashMap<Box<str>, (Arc<str>, i64)>,
    pub(crate) passwords: PasswordCache,
    pub(crate) throttle: Throttle,
    /// When the directory was last re-read for a request naming a user this node did not
    /// know. An async lock: requests arriving during that re-read wait for it rather than
    /// read the database again.
    pub(crate) unknown_user_reread: tokio::sync::Mutex<Option<Instant>>,
}

impl AuthState {
    pub(crate) fn new() -> Self {
        AuthState {
            config: RwLock::new(AuthConfig::off()),
            enabled: AtomicBool::new(false),
            anonymous_read: AtomicBool::new(false),
            token_ttl_s: AtomicU64::new(DEFAULT_TOKEN_TTL_S),
            directory: RwLock::new(Arc::new(Directory::default())),
            tokens: DashMap::new(),
            passwords: PasswordCache::new(),
            throttle: Throttle::default(),
            unknown_user_reread: tokio::sync::Mutex::new(None),
        }
    }
}
