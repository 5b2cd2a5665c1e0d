//! [`GrpcError`]: why the gRPC server could not start or stopped with an error. Errors of
//! single requests never surface here: they become Nacos error responses (see `errors`).

use thiserror::Error;

/// An error of the gRPC server as a whole.
#[derive(Debug, Error)]
pub enum GrpcError {
    /// The options cannot work (a zero size, count or interval).
    #[error("invalid gRPC options: {0}")]
    InvalidOptions(String),
    /// The listener's local address could not be read.
    #[error("cannot read the gRPC listener address: {0}")]
    Listener(#[source] std::io::Error),
}
