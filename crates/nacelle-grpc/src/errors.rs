//! The one mapping from [`CoreError`] to a gRPC error response (the codes themselves are
//! `nacelle_proto::error_code`), and the error answers shared by the handlers of both ports.
//!
//! Protocol errors (server starting, unregistered connection, unknown type, unparsable
//! body) are answered with an `ErrorResponse` ([`error_response`]); errors of a config
//! operation with that operation's own response type, `resultCode 500` and the mapped code
//! ([`fail_head`]), as Nacos does.

use nacelle_core::CoreError;
use nacelle_proto::error_code::{self as code, CAS_FAILED};
use nacelle_proto::response::ErrorResponse;
use nacelle_proto::{Payload, ResponseHead};

use crate::wire;

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
            message: code::SERVER_NOT_READY_MESSAGE.into(),
        }
    }

    pub fn unregistered() -> Self {
        WireError {
            code: code::UNREGISTERED,
            message: code::UNREGISTERED_MESSAGE.into(),
        }
    }

    pub fn no_handler() -> Self {
        WireError {
            code: code::NO_HANDLER,
            message: code::NO_HANDLER_MESSAGE.into(),
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
            CoreError::OverLimit(m) => (
                code::OVER_THRESHOLD,
                format!("{}{m}", code::TPS_RESTRICTED_PREFIX),
            ),
            CoreError::Store(_) | CoreError::Cipher(_) => (code::SERVER_ERROR, e.to_string()),
            // Nacos's auth filter: errorCode 403 with the reason.
            CoreError::Auth(f) => (code::NO_RIGHT, f.message().to_string()),
            CoreError::ReviewRequired(m) => (code::NO_RIGHT, m.clone()),
            CoreError::Throttled { .. } => (code::TOO_MANY_REQUESTS, e.to_string()),
        };
        WireError { code, message }
    }
}

/// An `ErrorResponse` (protocol-level errors).
pub(crate) fn error_response(e: &WireError, request_id: Option<String>) -> Payload {
    wire::message(&ErrorResponse::fail(e.code, e.message.clone(), request_id))
}

/// The head of a failed config operation, mapped from the service error.
pub(crate) fn fail_head(e: &CoreError, request_id: Option<String>) -> ResponseHead {
    let w = WireError::from(e);
    ResponseHead::fail(w.code, w.message, request_id)
}

/// The answer to an unparsable body: 502 in an `ErrorResponse`.
pub(crate) fn unparsable(e: &serde_json::Error) -> Payload {
    error_response(&WireError::bad_request(e), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacelle_proto::error_code::CONFIG_NOT_EXIST;

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
