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
//!   by another node), so a check never touches the database. A request naming a user
//!   this node does not know (created on another node since the last re-read) re-reads it
//!   first (such re-reads at least [`UNKNOWN_USER_REREAD`] apart), so a user created on one
//!   node can use every node right away.
//! - Administration of users, roles and permissions (`ROLE_ADMIN` only, except a user
//!   changing their own password) is in [`admin`].

pub mod admin;
pub mod jwt;
mod password;
pub(crate) mod state;
mod throttle;

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use nacelle_core::auth::{config_resource, Directory};
use nacelle_core::{Action, AuthFailure, Caller, ConfigKey, CoreError, Identity, Protocol};
use nacelle_metrics::StoreOp;

use nacelle_core::audit::AuditAction;

use crate::config::audit::Audited;
use crate::config::service::ConfigService;
use state::AuthState;
pub use state::{decode_secret, AuthConfig, DEFAULT_TOKEN_TTL_S, MIN_SECRET_BYTES};
pub use throttle::{ADDRESS_FREE_FAILURES, MAX_WAIT, PAIR_FREE_FAILURES};

/// How often the directory is re-read from the database (changes made on other nodes).
pub const IDENTITY_REFRESH: Duration = Duration::from_secs(2);
/// Shortest time between the starts of two directory re-reads made for requests naming an
/// unknown user: bounds the database reads that tokens of deleted users, or made-up user
/// names, can cause (at most 4 a second, whatever the request rate).
pub const UNKNOWN_USER_REREAD: Duration = Duration::from_millis(250);
/// Most verified tokens kept; the cache is cleared when full.
const TOKEN_CACHE_MAX: usize = 100_000;

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

fn now_s() -> i64 {
    nacelle_core::now_millis() / 1000
}

impl ConfigService {
    fn auth(&self) -> &AuthState {
        &self.inner.auth
    }

    /// Whether authentication is on.
    pub(crate) fn auth_enabled(&self) -> bool {
        self.auth().enabled.load(Ordering::Acquire)
    }

    fn anonymous_read(&self) -> bool {
        self.auth().anonymous_read.load(Ordering::Acquire)
    }

    /// Whether an anonymous `caller` may read: when anonymous reads are allowed, except
    /// over an admin API (Nacos 3's `AuthAdminFilter` wants an identity there).
    fn anonymous_may_read(&self, caller: &Caller) -> bool {
        caller.protocol != Protocol::HttpV3Admin && self.anonymous_read()
    }

    /// The lifetime of issued tokens, in seconds.
    pub(crate) fn token_ttl_s(&self) -> u64 {
        self.auth().token_ttl_s.load(Ordering::Acquire)
    }

    pub(crate) fn directory(&self) -> Arc<Directory> {
        Arc::clone(&self.auth().directory.read())
    }

    /// Re-reads users, roles and permissions from the database.
    pub(crate) async fn refresh_identities(&self) -> Result<(), CoreError> {
        let records = self
            .store_call(StoreOp::Identities, self.inner.store.load_identities())
            .await?;
        *self.auth().directory.write() = Arc::new(Directory::new(records));
        Ok(())
    }

    /// Re-reads the directory for a request naming a user it does not hold (made on another
    /// node since the last re-read), so that the caller's second look-up sees every user
    /// committed before it asked. One re-read serves every request that asked before it
    /// started; re-reads start at least [`UNKNOWN_USER_REREAD`] apart (a request may wait
    /// that long for its turn).
    async fn reread_for_unknown_user(&self) {
        let asked = Instant::now();
        let mut last = self.auth().unknown_user_reread.lock().await;
        if let Some(started) = *last {
            if started >= asked {
                return;
            }
            tokio::time::sleep_until((started + UNKNOWN_USER_REREAD).into()).await;
        }
        *last = Some(Instant::now());
        if let Err(e) = self.refresh_identities().await {
            tracing::debug!(error = %e, "re-reading users for an unknown user failed");
        }
    }

    /// Keeps the directory current until shutdown (changes made by other nodes).
    pub(crate) async fn follow_identities(&self, every: Duration) {
        self.periodically(every, || async {
            if let Err(e) = self.refresh_identities().await {
                tracing::debug!(error = %e, "re-reading users and permissions failed");
            }
        })
        .await
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
            self.audit_login(event, user, caller, Some("throttled"));
            return Err(CoreError::Throttled {
                retry_after_s: wait.as_secs().max(1),
            });
        }
        let lookup = |dir: &Directory| dir.user(user).map(|u| (u.enabled, Arc::clone(&u.hash)));
        let mut found = lookup(&self.directory());
        if found.is_none() {
            self.reread_for_unknown_user().await;
            found = lookup(&self.directory());
        }
        let entry = found.filter(|(enabled, _)| *enabled).map(|(_, hash)| hash);
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
            self.audit_login(event, user, caller, (!ok).then_some("bad credentials"));
        }
        Ok(ok)
    }

    /// The audit entry of a password check: a login, or a request's user name and
    /// password (`event` `credentials`, recorded only when refused).
    fn audit_login(&self, event: &str, user: &str, caller: &Caller, refused: Option<&str>) {
        let action = match refused {
            None => AuditAction::Login,
            Some(_) => AuditAction::LoginFailed,
        };
        let mut entry = Audited::new(action, event, user.to_string()).user(Some(user));
        if let Some(reason) = refused {
            entry = entry.refused(reason);
        }
        if event != "login" {
            entry = entry.detail(event);
        }
        self.audit(caller, entry);
    }

    /// Verifies a token: signature, expiry, and that its user still exists, is enabled
    /// and has not changed its password since the token was issued.
    fn verify_token(&self, token: &str) -> Result<Arc<str>, AuthFailure> {
        let auth = self.auth();
        let now = now_s();
        let (user, exp) = match auth.tokens.get(token).map(|e| e.value().clone()) {
            Some((user, exp)) if exp >= now => (user, exp),
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
        let ttl = self.token_ttl_s() as i64;
        let dir = auth.directory.read();
        let entry = dir.user(&user).ok_or(AuthFailure::UserNotFound)?;
        if !entry.enabled {
            return Err(AuthFailure::UserNotFound);
        }
        if exp - ttl < entry.not_before {
            return Err(AuthFailure::TokenInvalid);
        }
        Ok(user)
    }

    /// Whether the caller may do `action` on the resource `resource()` builds (only built
    /// when a permission must be looked up).
    pub(crate) fn authorize(
        &self,
        caller: &Caller,
        action: Action,
        resource: impl FnOnce() -> String,
    ) -> Result<(), CoreError> {
        if !self.auth_enabled() {
            return Ok(());
        }
        let anonymous_read = self.anonymous_may_read(caller);
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
        let dir = self.auth().directory.read();
        // An administrator needs no resource string (the common case of a tool's token).
        if dir.is_admin(user) || dir.allows(user, &resource(), action) {
            Ok(())
        } else {
            Err(CoreError::Auth(AuthFailure::Denied))
        }
    }

    /// Whether the caller may do `action` on a resource Nacos names itself rather than
    /// a config (`@Secured(resource = "/v1/core/cluster")`): an administrator, or a user
    /// one of whose permission patterns matches that name (Nacos's `joinResource` of a
    /// specified resource is the bare name, so `<ns>:<group>:…` patterns never match it).
    /// Never an anonymous caller, not even with anonymous reads (those are for configs).
    pub(crate) fn authorize_named(
        &self,
        caller: &Caller,
        action: Action,
        resource: &str,
    ) -> Result<(), CoreError> {
        if matches!(caller.identity, Identity::Anonymous) {
            return self.require_admin(caller);
        }
        self.authorize(caller, action, || resource.to_string())
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
    pub(crate) fn may_read(&self, caller: &Caller, key: &ConfigKey) -> bool {
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
            Identity::User(u) if self.auth().directory.read().is_admin(u) => Ok(()),
            Identity::User(_) => Err(CoreError::Auth(AuthFailure::Denied)),
        }
    }

    /// Whether the caller holds `ROLE_ADMIN` (true without authentication).
    pub(crate) fn is_admin(&self, caller: &Caller) -> bool {
        self.require_admin(caller).is_ok()
    }

    /// Whether namespace `ns` is listed to the caller: it has some permission in it (or
    /// may read anonymously).
    pub(crate) fn sees_namespace(&self, caller: &Caller, ns: &str) -> bool {
        if !self.auth_enabled() {
            return true;
        }
        let anonymous_read = self.anonymous_read();
        match &caller.identity {
            Identity::Trusted => true,
            Identity::Refused(_) | Identity::Throttled { .. } => false,
            Identity::Anonymous => anonymous_read,
            Identity::User(u) => self.directory().sees_namespace(u, ns),
        }
    }

    /// Checks that the caller's credentials, if any, are good (the namespace listing,
    /// which filters instead of refusing, still refuses bad credentials).
    pub(crate) fn authenticated(&self, caller: &Caller) -> Result<(), CoreError> {
        if !self.auth_enabled() {
            return Ok(());
        }
        match &caller.identity {
            Identity::Refused(f) => Err(CoreError::Auth(*f)),
            Identity::Throttled { retry_after_s } => Err(CoreError::Throttled {
                retry_after_s: *retry_after_s,
            }),
            Identity::Anonymous if !self.anonymous_may_read(caller) => {
                Err(CoreError::Auth(AuthFailure::UserNotFound))
            }
            _ => Ok(()),
        }
    }
}

/// Who callers are and what they may do, as the adapters reach it: configuring
/// authentication, identifying credentials, logging in, the v3 scope checks, and the
/// administration of users ([`ConfigService::access`]).
#[derive(Clone, Copy, Debug)]
pub struct Access<'a> {
    core: &'a ConfigService,
}

impl ConfigService {
    /// Authentication and user administration.
    pub fn access(&self) -> Access<'_> {
        Access { core: self }
    }
}

impl<'a> Access<'a> {
    /// Whether authentication is on.
    pub fn enabled(&self) -> bool {
        self.core.auth_enabled()
    }

    /// Whether the caller holds `ROLE_ADMIN` (true without authentication).
    pub fn is_admin(&self, caller: &Caller) -> bool {
        self.core.is_admin(caller)
    }

    /// Whether `token` is a valid access token of a user this node knows (a signature and
    /// an expiry check, from memory: no database, no password hash). For deciding, before
    /// a request's body is read, which budget the body counts in; the operation itself
    /// checks the caller as always.
    pub fn token_is_valid(&self, token: &str) -> bool {
        self.core.verify_token(token).is_ok()
    }

    /// Checks that the caller's credentials, if any, are good.
    pub fn authenticated(&self, caller: &Caller) -> Result<(), CoreError> {
        self.core.authenticated(caller)
    }

    /// Sets how this server authenticates (before it serves).
    pub fn configure_auth(&self, config: AuthConfig) {
        let auth = self.core.auth();
        auth.enabled.store(config.enabled, Ordering::Release);
        auth.anonymous_read
            .store(config.anonymous_read, Ordering::Release);
        auth.token_ttl_s
            .store(config.token_ttl_s, Ordering::Release);
        *auth.config.write() = config;
        auth.tokens.clear();
    }
    /// Who the credentials say the caller is. Without authentication, or without
    /// credentials, the caller is anonymous. Bad credentials are [`Identity::Refused`]; a
    /// user name and password from a throttled (user, address) pair or address is
    /// [`Identity::Throttled`], without checking the password. Every secured operation
    /// then answers accordingly.
    pub async fn identify(&self, creds: &Credentials, caller: &Caller) -> Identity {
        if !self.core.auth_enabled() || creds.is_empty() {
            return Identity::Anonymous;
        }
        if let Some(token) = creds.token.as_deref().filter(|t| !t.is_empty()) {
            let mut verified = self.core.verify_token(token);
            if matches!(verified, Err(AuthFailure::UserNotFound)) {
                // A well-signed token of a user this node does not know (yet).
                self.core.reread_for_unknown_user().await;
                verified = self.core.verify_token(token);
            }
            return match verified {
                Ok(user) => Identity::User(user),
                Err(failure) => Identity::Refused(failure),
            };
        }
        let (Some(user), Some(password)) = (creds.username.as_deref(), creds.password.as_deref())
        else {
            return Identity::Anonymous;
        };
        match self
            .core
            .check_password(user, password, caller, "credentials")
            .await
        {
            Ok(true) => Identity::User(user.into()),
            Ok(false) => Identity::Refused(AuthFailure::UserNotFound),
            Err(CoreError::Throttled { retry_after_s }) => Identity::Throttled { retry_after_s },
            Err(_) => Identity::Refused(AuthFailure::UserNotFound),
        }
    }
    /// Logs in: a token for `user` when `password` is right. Wrong credentials are
    /// `user not found!`, as Nacos answers.
    pub async fn login(
        &self,
        user: &str,
        password: &str,
        caller: &Caller,
    ) -> Result<Login, CoreError> {
        self.core.guard()?;
        if !self
            .core
            .check_password(user, password, caller, "login")
            .await?
        {
            return Err(CoreError::Auth(AuthFailure::UserNotFound));
        }
        let config = self.core.auth().config.read().clone();
        let dir = self.core.directory();
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
    /// The caller's address, for the throttle of a login (tests and adapters).
    pub fn login_wait(&self, user: &str, ip: Option<IpAddr>) -> Option<Duration> {
        self.core.auth().throttle.wait(user, ip)
    }
    /// Refuses the caller unless it may do `action` on the resource a Nacos 3 v3 request
    /// names (`@Secured(signType = CONFIG)`, whose `ConfigHttpResourceParser` and
    /// `joinResource` build `<namespace>:<group>:config/<dataId>` from the request's raw
    /// parameters, a blank group as `*` and a blank dataId as `config/*`). Nacos's auth
    /// filter checks that one resource before the parameters are validated and before
    /// listings run (`/list`, history's `/configs`, listeners by IP), so a user without a
    /// permission matching it gets 403 rather than a 400 or an empty answer; the operation
    /// then still checks each key. `namespace` is the raw parameter: blank, `public` and
    /// `null` are the default namespace, an id no namespace can have is matched as sent.
    pub fn authorize_v3_scope(
        &self,
        caller: &Caller,
        action: Action,
        namespace: Option<&str>,
        group: Option<&str>,
        data_id: Option<&str>,
    ) -> Result<(), CoreError> {
        let part = |p: Option<&str>| match p.map(str::trim) {
            Some(v) if !v.is_empty() => v.to_string(),
            _ => "*".to_string(),
        };
        self.core.authorize(caller, action, || {
            let ns = match nacelle_core::NamespaceId::parse(namespace) {
                Ok(id) => id.as_str().to_string(),
                Err(_) => namespace.unwrap_or_default().trim().to_string(),
            };
            format!("{ns}:{}:config/{}", part(group), part(data_id))
        })
    }
    /// Refuses the caller unless it may do `action` on a fixed resource (Nacos's
    /// `@Secured(resource = …)`, e.g. the v3 namespace API's `/v3/admin/core/namespace`):
    /// an administrator may, another user only through a permission whose pattern
    /// matches that string (in practice `*`), as Nacos's regular-expression match allows.
    pub fn authorize_resource(
        &self,
        caller: &Caller,
        action: Action,
        resource: &str,
    ) -> Result<(), CoreError> {
        self.core.authorize(caller, action, || resource.to_string())
    }
}
