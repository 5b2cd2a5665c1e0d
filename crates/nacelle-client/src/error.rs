//! [`ClientError`]: every way a call of the client can fail, typed.

use nacelle_proto::error_code;
use nacelle_proto::ResponseHead;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The config (or history entry, namespace) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// No server could be reached (or none answered in time).
    #[error("no server reachable: {0}")]
    Unavailable(String),
    /// The server refused the credentials or the call (Nacos error 403).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// Login failed (bad credentials, or a login answer that is not Nacos's).
    #[error("login failed: {0}")]
    Auth(String),
    /// The server rejected the request's parameters or content (Nacos error 400).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A compare-and-set publish found another md5 on the server.
    #[error("compare-and-set failed: the server's md5 has changed")]
    CasConflict,
    /// Any other failure the server reported.
    #[error("server error {code}: {message}")]
    Server {
        /// Nacos's `errorCode` (or the HTTP status).
        code: i32,
        /// Its message.
        message: String,
    },
    /// The server's answer is not what the protocol says.
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// An encrypted config could not be decrypted (or a publish encrypted).
    #[error("cipher: {0}")]
    Cipher(#[from] nacelle_cipher::CipherError),
    /// A configuration of the client itself is wrong (e.g. an unparsable server address).
    #[error("client configuration: {0}")]
    Config(String),
    /// The snapshot directory could not be read or written.
    #[error("snapshot: {0}")]
    Snapshot(#[from] std::io::Error),
    /// The client was shut down.
    #[error("the client was shut down")]
    Closed,
}

impl ClientError {
    /// Whether another server (or a later retry) might succeed.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, ClientError::Unavailable(_))
    }

    /// The error of a failed gRPC response head (`resultCode` 500) to the request `what`.
    pub(crate) fn from_head(head: &ResponseHead, what: &str) -> ClientError {
        let message = head.message.clone().unwrap_or_default();
        match head.error_code {
            // 300 is also a query's "not found", which `query` tells apart by the response
            // type before calling this.
            error_code::UNREGISTERED | error_code::SERVER_NOT_READY => {
                ClientError::Unavailable(format!("{what}: {message}"))
            }
            error_code::NO_RIGHT => ClientError::Forbidden(message),
            error_code::INVALID_PARAM => ClientError::Invalid(message),
            _ if message.starts_with("Cas publish fail") => ClientError::CasConflict,
            code => ClientError::Server { code, message },
        }
    }
}

/// The result of a client call.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// A failed exchange with a server as [`ClientError::Unavailable`]: `what` (which server,
/// which call), then reqwest's error and its causes (`error sending request: client error
/// (Connect): tcp connect error: Connection refused`) — without the request's URL, which
/// reqwest's own `Display` prints and which may carry parameters.
pub(crate) fn transport_error(what: &str, e: reqwest::Error) -> ClientError {
    let e = e.without_url();
    let mut message = format!("{what}: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        let text = cause.to_string();
        // hyper repeats its cause in its own text; show each once.
        if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    ClientError::Unavailable(message)
}
