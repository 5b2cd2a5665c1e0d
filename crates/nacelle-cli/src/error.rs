//! [`CliError`] and the exit code of each failure (documented in `docs/cli.md`).

use nacelle_client::ClientError;

/// Exit codes of the client commands.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// Any other failure (I/O, a cancelled confirmation, an unexpected answer).
    pub const FAILURE: u8 = 1;
    /// Bad usage (clap's own code for a wrong flag or argument).
    pub const USAGE: u8 = 2;
    /// The config, history entry or namespace does not exist.
    pub const NOT_FOUND: u8 = 3;
    /// No server could be reached.
    pub const UNREACHABLE: u8 = 4;
    /// Login failed, or the server refused the call.
    pub const AUTH: u8 = 5;
    /// The server rejected the request (invalid input, compare-and-set conflict).
    pub const REJECTED: u8 = 6;
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The client's error.
    #[error("{0}")]
    Client(#[from] ClientError),
    /// Something named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// Arguments that cannot work together.
    #[error("{0}")]
    Usage(String),
    /// A local file or terminal.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The user answered no.
    #[error("cancelled")]
    Cancelled,
    /// A check the command ran failed (content against the schemas of its key).
    #[error("{0}")]
    Rejected(String),
    /// `nacelle audit verify` found a bad entry (named in the message).
    #[error("audit chain broken: {0}")]
    AuditBroken(String),
    /// The profile file cannot be read or written.
    #[error("profile file {path}: {message}")]
    Profile {
        /// Its path.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl CliError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CliError {
        let what = what.into();
        move |source| CliError::Io { what, source }
    }

    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::NotFound(_) | CliError::Client(ClientError::NotFound(_)) => exit::NOT_FOUND,
            CliError::Client(ClientError::Unavailable(_)) => exit::UNREACHABLE,
            CliError::Client(ClientError::Auth(_) | ClientError::Forbidden(_)) => exit::AUTH,
            CliError::Client(
                ClientError::Invalid(_)
                | ClientError::CasConflict
                // 409: changed meanwhile (a promotion racing a gray publish), a duplicate.
                | ClientError::Server { code: 409, .. },
            ) => exit::REJECTED,
            CliError::Rejected(_) => exit::REJECTED,
            CliError::Usage(_) => exit::USAGE,
            _ => exit::FAILURE,
        }
    }
}

/// The result of a command.
pub type Result<T, E = CliError> = std::result::Result<T, E>;
