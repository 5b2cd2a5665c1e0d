//! Nacos error codes and the one mapping from [`CoreError`] to a gRPC error response.
//!
//! Protocol errors (server starting, unregistered connection, unknown type, unparsable
//! body) are answered with an `ErrorResponse`; errors of a config operation with that
//! operation's own response type, `resultCode 500` and the code below, as Nacos does.

use nacelle_core::CoreError;

/// Nacos's error codes (`NacosException`, `ConfigQueryResponse`).
pub(crate) mod code {
    /// The server is starting (cache not loaded) — `INVALID_SERVER_STATUS`.
    pub const SERVER_NOT_READY: i32 = 300;
    /// `ConfigQueryResponse.CONFIG_NOT_FOUND`.
    pub const CONFIG_NOT_FOUND: i32 = 300;
    /// The connection has not completed `ConnectionSetupRequest` — `UN_REGISTER`.
    pub const UNREGISTERED: i32 = 301;
    /// No handler for the request type — `NO_HANDLER`.
    pub const NO_HANDLER: i32 = 302;
    pub const INVALID_PARAM: i32 = 400;
    /// The caller may not make this call — `NO_RIGHT` (a cluster call without the secret).
    pub const NO_RIGHT: i32 = 403;
    pub const CONFLICT: i32 = 409;
    pub const SERVER_ERROR: i32 = 500;
    pub const NOT_IMPLEMENTED: i32 = 501;
    /// The body could not be parsed — `BAD_GATEWAY`.
    pub const BAD_GATEWAY: i32 = 502;
}

/// The message Nacos sends for a missing config.
pub(crate) const CONFIG_NOT_EXIST: &str = "config data not exist";
/// The message Nacos's gRPC publish handler sends on a compare-and-set failure (no space
/// after the comma, unlike HTTP v1).
pub(crate) const CAS_FAILED: &str = "Cas publish fail,server md5 may have changed.";

/// An error as it goes on the wire: `errorCode` and `message` (with `resultCode 500`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError {
    pub code: i32,
    pub message: String,
}

impl WireError {
    pub fn not_ready() -> Self {
        WireError {
            code: code::SERVER_NOT_READY,
            message: "Server is starting,please try later.".into(),
        }
    }

    pub fn unregistered() -> Self {
        WireError {
            code: code::UNREGISTERED,
            message: "Connection is unregistered.".into(),
        }
    }

    pub fn no_handler() -> Self {
        WireError {
            code: code::NO_HANDLER,
            message: "RequestHandler Not Found".into(),
        }
    }

    pub fn not_member() -> Self {
        WireError {
            code: code::NO_RIGHT,
            message: "not a cluster member: missing or wrong cluster secret".into(),
        }
    }

    pub fn bad_request(detail: impl std::fmt::Display) -> Self {
        WireError {
            code: code::BAD_GATEWAY,
            message: format!("Invalid request: {detail}"),
        }
    }
}

impl From<&CoreError> for WireError {
    /// The single place where a service error becomes a Nacos gRPC error.
    fn from(e: &CoreError) -> Self {
        let (code, message) = match e {
            CoreError::Invalid(m) | CoreError::TooLarge(m) => (code::INVALID_PARAM, m.clone()),
            CoreError::NotFound(m) => (code::CONFIG_NOT_FOUND, m.clone()),
            CoreError::Conflict(m) => (code::CONFLICT, m.clone()),
            CoreError::CasMismatch => (code::SERVER_ERROR, CAS_FAILED.to_string()),
            CoreError::Unsupported(m) => (code::NOT_IMPLEMENTED, m.clone()),
            CoreError::NotReady(_) => (code::SERVER_NOT_READY, e.to_string()),
            CoreError::Store(_) => (code::SERVER_ERROR, e.to_string()),
        };
        WireError { code, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_map_to_nacos_codes() {
        let w = WireError::from(&CoreError::CasMismatch);
        assert_eq!((w.code, w.message.as_str()), (500, CAS_FAILED));
        let w = WireError::from(&CoreError::NotFound(CONFIG_NOT_EXIST.into()));
        assert_eq!((w.code, w.message.as_str()), (300, CONFIG_NOT_EXIST));
        assert_eq!(WireError::from(&CoreError::invalid("x")).code, 400);
        assert_eq!(
            WireError::from(&CoreError::Unsupported("beta".into())).code,
            501
        );
    }
}
