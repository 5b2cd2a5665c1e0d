//! Typed errors of the domain and of storage. Protocol adapters map these to wire errors,
//! each in one place.

use thiserror::Error;

/// An error of the storage layer.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database could not be reached or the operation failed there.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A compare-and-set precondition did not hold.
    #[error("compare-and-set failed: the stored md5 differs")]
    CasMismatch,
    /// A row that must exist does not.
    #[error("not found: {0}")]
    NotFound(String),
    /// A row that must not exist already does (unique key).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The database refused a value it cannot hold (a data exception): a NUL character on
    /// PostgreSQL, a 4-byte character in a MySQL `utf8` (3-byte) column, a value longer
    /// than its column. Definite, not an outage: the request is at fault, retrying will
    /// not help. The service reports it as [`CoreError::Invalid`].
    #[error("{0}")]
    Rejected(String),
}

/// An error of the config service, the one type adapters translate to wire errors.
#[derive(Debug, Error)]
pub enum CoreError {
    /// Bad input: a name, a length, a missing parameter.
    #[error("{0}")]
    Invalid(String),
    /// The thing asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the current state (CAS, duplicate namespace).
    #[error("{0}")]
    Conflict(String),
    /// Compare-and-set publish failed because the stored md5 changed.
    #[error("Cas publish fail, server md5 may have changed.")]
    CasMismatch,
    /// Content or request exceeds a configured limit.
    #[error("{0}")]
    TooLarge(String),
    /// A feature exists on the wire but is not implemented by this server yet.
    #[error("{0}")]
    Unsupported(String),
    /// A client went over an abuse limit (the write rate of its address): Nacos's TPS
    /// control answer, HTTP 429 / gRPC error code 503. The message names the limit.
    #[error("{0}")]
    OverLimit(String),
    /// The server is starting (cache not loaded) or shutting down.
    #[error("server is not ready: {0}")]
    NotReady(String),
    /// The database failed; reads keep working from memory.
    #[error("{0}")]
    Store(#[source] StoreError),
    /// An encrypted config cannot be served: its stored data key does not unwrap (wrong or
    /// missing master key) or its content does not decrypt. A server-side condition: the
    /// message names the key and the reason, never a key or any content.
    #[error("{0}")]
    Cipher(String),
    /// Authentication or authorization refused the request (Nacos's 403 and its message).
    #[error("{0}")]
    Auth(AuthFailure),
    /// Too many failed logins from this address, or for this user from it.
    #[error("too many failed logins; retry in {retry_after_s} s")]
    Throttled { retry_after_s: u64 },
    /// A direct write to a key under a review policy: it must go through a change request
    /// (or, by an administrator, carry an emergency reason). The message names the policy.
    #[error("{0}")]
    ReviewRequired(String),
}

/// A value the database refused is bad input ([`CoreError::Invalid`]); every other store
/// error stays a [`CoreError::Store`].
impl From<StoreError> for CoreError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Rejected(m) => CoreError::Invalid(m),
            e => CoreError::Store(e),
        }
    }
}

impl CoreError {
    /// Shorthand for [`CoreError::Invalid`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        CoreError::Invalid(msg.into())
    }
}

/// Why a request is not allowed; the text is Nacos's message for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthFailure {
    /// No credentials, an unknown or disabled user, or a wrong password.
    UserNotFound,
    /// A token that is not a JWT, or one issued before its user's password changed.
    TokenInvalid,
    /// A JWT whose `alg` is not HS256/384/512 (`none` included).
    UnsupportedAlgorithm,
    /// A JWT whose signature does not verify (another secret, a tampered payload).
    InvalidSignature,
    /// A JWT past its `exp`.
    TokenExpired,
    /// A known user without the permission the operation needs.
    Denied,
}

impl AuthFailure {
    /// Nacos's message.
    pub fn message(self) -> &'static str {
        match self {
            AuthFailure::UserNotFound => "user not found!",
            AuthFailure::TokenInvalid => "token invalid!",
            AuthFailure::UnsupportedAlgorithm => "unsupported signature algorithm",
            AuthFailure::InvalidSignature => "Invalid signature",
            AuthFailure::TokenExpired => "token expired!",
            AuthFailure::Denied => "authorization failed!",
        }
    }
}

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}
