//! Authentication and authorization, once for every transport (docs/security.md).
//!
//! - Authentication: adapters hand the request's [`Credentials`] (a token, or a user name
//!   and password, wherever the protocol carries them) to [`ConfigService::identify`],
//!   which answers the caller's [`Identity`]; the adapter puts it in the `Caller`.
//!   [`ConfigService::login`] issues Nacos-format tokens ([`jwt`]).
//! - Authorization: every operation calls `authorize*` with its resource and action; the
//!   rule (admin, permission patterns, anonymous reads) lives here and nowhere else.
//! - The directory of users, roles and permissions is read from the database into memory
//!   at load, after every change made here, and every [`IDENTITY_REFRESH`] (a change made
//!   by another node), so a check never touches the database.
//! - Administration of users, roles and permissions (`ROLE_ADMIN` only, except a user
//!   changing their own password) is in [`admin`].

pub mod admin;
pub mod jwt;
mod password;
mod throttle;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use dashmap::DashMap;
use nacelle_core::auth::{config_resource, Directory};
use nacelle_core::{Action, AuthFailure, Caller, ConfigKey, CoreError, Identity};
use parking_lot::RwLock;

use crate::service::ConfigService;
pub use throttle::{ADDRESS_FREE_FAILURES, MAX_WAIT, PAIR_FREE_FAILURES};

/// How often the directory is re-read from the database (changes made on other nodes).
pub const IDENTITY_REFRESH: Duration = Duration::from_secs(2);
/// Nacos's default token lifetime.
pub const DEFAULT_TOKEN_TTL_S: u64 = 18_000;
/// The shortest token secret Nacos accepts, in decoded bytes.
pub const MIN_SECRET_BYTES: usize = 32;
/// Most verified tokens kept; the cache is cleared when full.
const TOKEN_CACHE_MAX: usize = 100_000;

/// How a server authenticates.
#[derive(Clone)]
pub struct AuthConfig {
    /// Off: every caller may do everything (`--auth off`).
    pub enabled: bool,
    /// Unauthenticated callers may read and listen; writes still need a user.
    pub anonymous_read: bool,
    /// The decoded token secret (at least [`MIN_SECRET_BYTES`]).
    secret: Arc<[u8]>,
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

/// A new random token secret (32 bytes, base64).
pub fn generate_secret() -> Result<String, CoreError> {
    let mut bytes = [0u8; MIN_SECRET_BYTES];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| CoreError::Invalid(format!("no randomness for a token secret: {e}")))?;
    Ok(STANDARD.encode(bytes))
}

/// A new random password: 16 letters and digits.
pub fn generate_password() -> Result<String, CoreError> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| CoreError::Invalid(format!("no randomness for a password: {e}")))?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect())
}

/// The credentials a request carried, as the adapter found them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// `Authorization: Bearer …` or `accessToken`.
    pub token: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl Credentials {
    /// Whether there is nothing to check.
    pub fn is_empty(&self) -> bool {
        self.token.is_none() && (self.username.is_none() || self.password.is_none())
    }
}

/// A successful login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub token: String,
    /// Seconds until the token expires.
    pub ttl_s: i64,
    pub global_admin: bool,
    pub username: String,
}

/// The authentication state of a service.
pub(crate) struct AuthState {
    config: RwLock<AuthConfig>,
    directory: RwLock<Arc<Directory>>,
    /// Verified tokens → (user, exp); the directory is still checked on every use.
    tokens: DashMap<Box<str>, (Arc<str>, i64)>,
    passwords: password::PasswordCache,
    throttle: throttle::Throttle,
}

impl AuthState {
    pub(crate) fn new() -> Self {
        AuthState {
            config: RwLock::new(AuthConfig::off()),
            directory: RwLock::new(Arc::new(Directory::default())),
            tokens: DashMap::new(),
            passwords: password::PasswordCache::new(),
            throttle: throttle::Throttle::default(),
        }
    }
}

fn now_s() -> i64 {
    nacelle_core::now_millis() / 1000
}

/// One audit line (target `nacelle::audit`): who did what from where, and how it went.
pub(crate) fn audit(event: &str, user: Option<&str>, caller: &Caller, detail: &str, ok: bool) {
    tracing::info!(
        target: "nacelle::audit",
        event,
        user = user.unwrap_or("-"),
        ip = %caller.ip_string(),
        protocol = caller.protocol.as_str(),
        detail,
        ok,
    );
}

impl ConfigService {
    fn auth(&self) -> &AuthState {
        &self.inner.auth
    }

    /// Sets how this server authenticates (before it serves).
    pub fn configure_auth(&self, config: AuthConfig) {
        *self.auth().config.write() = config;
        self.auth().tokens.clear();
    }

    /// Whether authentication is on.
    pub fn auth_enabled(&self) -> bool {
        self.auth().config.read().enabled
    }

    /// The lifetime of issued tokens, in seconds.
    pub fn token_ttl_s(&self) -> u64 {
        self.auth().config.read().token_ttl_s
    }

    pub(crate) fn directory(&self) -> Arc<Directory> {
        Arc::clone(&self.auth().directory.read())
    }

    /// Re-reads users, roles and permissions from the database.
    pub async fn refresh_identities(&self) -> Result<(), CoreError> {
        let records = self.inner.store.load_identities().await?;
        *self.auth().directory.write() = Arc::new(Directory::new(records));
        Ok(())
    }

    /// Keeps the directory current until shutdown (changes made by other nodes).
    pub async fn follow_identities(&self, every: Duration) {
        let token = self.shutdown_token().clone();
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self.refresh_identities().await {
                tracing::debug!(error = %e, "re-reading users and permissions failed");
            }
        }
    }

    /// Who the credentials say the caller is. Without authentication, or without
    /// credentials, the caller is anonymous. Bad credentials are [`Identity::Refused`]; a
    /// user name and password from a throttled (user, address) pair or address is
    /// [`Identity::Throttled`], without checking the password. Every secured operation
    /// then answers accordingly.
    pub async fn identify(&self, creds: &Credentials, caller: &Caller) -> Identity {
        if !self.auth_enabled() || creds.is_empty() {
            return Identity::Anonymous;
        }
        if let Some(token) = creds.token.as_deref().filter(|t| !t.is_empty()) {
            return match self.verify_token(token) {
                Ok(user) => Identity::User(user),
                Err(failure) => Identity::Refused(failure),
            };
        }
        let (Some(user), Some(password)) = (creds.username.as_deref(), creds.password.as_deref())
        else {
            return Identity::Anonymous;
        };
        match self
            .check_password(user, password, caller, "credentials")
            .await
        {
            Ok(true) => Identity::User(user.into()),
            Ok(false) => Identity::Refused(AuthFailure::UserNotFound),
            Err(CoreError::Throttled { retry_after_s }) => Identity::Throttled { retry_after_s },
            Err(_) => Identity::Refused(AuthFailure::UserNotFound),
        }
    }

    /// Checks a password under the throttle; counts and logs the outcome.
    async fn check_password(
        &self,
        user: &str,
        password: &str,
        caller: &Caller,
        event: &str,
    ) -> Result<bool, CoreError> {
        let auth = self.auth();
        if let Some(wait) = auth.throttle.wait(user, caller.ip) {
            audit(event, Some(user), caller, "throttled", false);
            return Err(CoreError::Throttled {
                retry_after_s: wait.as_secs().max(1),
            });
        }
        let entry = self
            .directory()
            .user(user)
            .filter(|u| u.enabled)
            .map(|u| Arc::clone(&u.hash));
        let ok = match entry {
            Some(hash) => auth.passwords.verify(user, password, &hash).await,
            None => false,
        };
        if ok {
            auth.throttle.succeeded(user, caller.ip);
        } else if let Some(wait) = auth.throttle.failed(user, caller.ip) {
            tracing::warn!(
                target: "nacelle::audit",
                user,
                ip = %caller.ip_string(),
                wait_s = wait.as_secs(),
                "repeated failed logins: further attempts wait"
            );
        }
        if !ok || event == "login" {
            audit(event, Some(user), caller, "", ok);
        }
        Ok(ok)
    }

    /// Verifies a token: signature, expiry, and that its user still exists, is enabled
    /// and has not changed its password since the token was issued.
    fn verify_token(&self, token: &str) -> Result<Arc<str>, AuthFailure> {
        let auth = self.auth();
        let now = now_s();
        let (user, exp) = match auth.tokens.get(token).map(|e| e.value().clone()) {
            Some((user, exp)) if exp > now => (user, exp),
            Some(_) => return Err(AuthFailure::TokenExpired),
            None => {
                let config = auth.config.read().clone();
                let claims = jwt::verify(&config.secret, token, now)?;
                let user: Arc<str> = claims.sub.into();
                if auth.tokens.len() >= TOKEN_CACHE_MAX {
                    auth.tokens.clear();
                }
                auth.tokens
                    .insert(token.into(), (Arc::clone(&user), claims.exp));
                (user, claims.exp)
            }
        };
        let dir = self.directory();
        let entry = dir.user(&user).ok_or(AuthFailure::UserNotFound)?;
        if !entry.enabled {
            return Err(AuthFailure::UserNotFound);
        }
        let issued = exp - self.token_ttl_s() as i64;
        if issued < entry.not_before {
            return Err(AuthFailure::TokenInvalid);
        }
        Ok(user)
    }

    /// Logs in: a token for `user` when `password` is right. Wrong credentials are
    /// `user not found!`, as Nacos answers.
    pub async fn login(
        &self,
        user: &str,
        password: &str,
        caller: &Caller,
    ) -> Result<Login, CoreError> {
        if !self.check_password(user, password, caller, "login").await? {
            return Err(CoreError::Auth(AuthFailure::UserNotFound));
        }
        let config = self.auth().config.read().clone();
        let dir = self.directory();
        let not_before = dir.user(user).map(|u| u.not_before).unwrap_or(0);
        // A token issued in the second its user's password changed would look older than
        // the change: it starts at the change instead.
        let exp = now_s().max(not_before) + config.token_ttl_s as i64;
        let token = jwt::sign(
            &config.secret,
            &jwt::Claims {
                sub: user.to_string(),
                exp,
            },
        );
        Ok(Login {
            token,
            ttl_s: exp - now_s(),
            global_admin: dir.is_admin(user),
            username: user.to_string(),
        })
    }

    /// Whether the caller may do `action` on the resource `resource()` builds (only built
    /// when a permission must be looked up).
    pub(crate) fn authorize(
        &self,
        caller: &Caller,
        action: Action,
        resource: impl FnOnce() -> String,
    ) -> Result<(), CoreError> {
        let anonymous_read = {
            let config = self.auth().config.read();
            if !config.enabled {
                return Ok(());
            }
            config.anonymous_read
        };
        let user = match &caller.identity {
            Identity::Trusted => return Ok(()),
            Identity::Refused(f) => return Err(CoreError::Auth(*f)),
            Identity::Throttled { retry_after_s } => {
                return Err(CoreError::Throttled {
                    retry_after_s: *retry_after_s,
                })
            }
            Identity::Anonymous if anonymous_read && action == Action::Read => return Ok(()),
            Identity::Anonymous => return Err(CoreError::Auth(AuthFailure::UserNotFound)),
            Identity::User(u) => u,
        };
        if self.directory().allows(user, &resource(), action) {
            Ok(())
        } else {
            Err(CoreError::Auth(AuthFailure::Denied))
        }
    }

    /// [`ConfigService::authorize`] for one config.
    pub(crate) fn authorize_key(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        action: Action,
    ) -> Result<(), CoreError> {
        self.authorize(caller, action, || config_resource(key))
    }

    /// Whether the caller may read `key` (filters of listings).
    pub fn may_read(&self, caller: &Caller, key: &ConfigKey) -> bool {
        self.authorize_key(caller, key, Action::Read).is_ok()
    }

    /// Only `ROLE_ADMIN` (or the server itself; anyone without authentication).
    pub(crate) fn require_admin(&self, caller: &Caller) -> Result<(), CoreError> {
        if !self.auth_enabled() {
            return Ok(());
        }
        match &caller.identity {
            Identity::Trusted => Ok(()),
            Identity::Refused(f) => Err(CoreError::Auth(*f)),
            Identity::Throttled { retry_after_s } => Err(CoreError::Throttled {
                retry_after_s: *retry_after_s,
            }),
            Identity::Anonymous => Err(CoreError::Auth(AuthFailure::UserNotFound)),
            Identity::User(u) if self.directory().is_admin(u) => Ok(()),
            Identity::User(_) => Err(CoreError::Auth(AuthFailure::Denied)),
        }
    }

    /// Whether the caller holds `ROLE_ADMIN` (true without authentication).
    pub fn is_admin(&self, caller: &Caller) -> bool {
        self.require_admin(caller).is_ok()
    }

    /// Whether namespace `ns` is listed to the caller: it has some permission in it (or
    /// may read anonymously).
    pub(crate) fn sees_namespace(&self, caller: &Caller, ns: &str) -> bool {
        let anonymous_read = {
            let config = self.auth().config.read();
            if !config.enabled {
                return true;
            }
            config.anonymous_read
        };
        match &caller.identity {
            Identity::Trusted => true,
            Identity::Refused(_) | Identity::Throttled { .. } => false,
            Identity::Anonymous => anonymous_read,
            Identity::User(u) => self.directory().sees_namespace(u, ns),
        }
    }

    /// Checks that the caller's credentials, if any, are good (the namespace listing,
    /// which filters instead of refusing, still refuses bad credentials).
    pub fn authenticated(&self, caller: &Caller) -> Result<(), CoreError> {
        if !self.auth_enabled() {
            return Ok(());
        }
        match &caller.identity {
            Identity::Refused(f) => Err(CoreError::Auth(*f)),
            Identity::Throttled { retry_after_s } => Err(CoreError::Throttled {
                retry_after_s: *retry_after_s,
            }),
            Identity::Anonymous if !self.auth().config.read().anonymous_read => {
                Err(CoreError::Auth(AuthFailure::UserNotFound))
            }
            _ => Ok(()),
        }
    }

    /// The caller's address, for the throttle of a login (tests and adapters).
    pub fn login_wait(&self, user: &str, ip: Option<IpAddr>) -> Option<Duration> {
        self.auth().throttle.wait(user, ip)
    }
}
