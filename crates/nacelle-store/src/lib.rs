//! Database backends of Nacelle.
//!
//! # Layout
//! - [`sqlite`]: the embedded default, a file in the data directory (WAL, durable commits).
//! - [`open`]: picks a backend from a database URL.
//!
//! Every backend implements [`nacelle_core::ConfigStore`] with Nacos's table layout, so rows
//! written here look like rows written by Java Nacos.

pub mod sqlite;

use std::sync::Arc;

use nacelle_core::{ConfigStore, StoreError};

pub use sqlite::SqliteStore;

/// Error opening a database from a URL.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL names a backend this build does not support (yet).
    #[error("database URL scheme `{0}` is not supported yet (supported: sqlite://)")]
    Unsupported(String),
    /// The URL could not be parsed.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// Connecting or migrating failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Opens the store named by `url` (`sqlite://path`).
pub async fn open(url: &str) -> Result<Arc<dyn ConfigStore>, OpenError> {
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .or_else(|| url.strip_prefix("sqlite:").map(|_| "sqlite".to_string()))
        .ok_or_else(|| OpenError::InvalidUrl(format!("`{url}` has no scheme")))?;
    match scheme.as_str() {
        "sqlite" => Ok(Arc::new(SqliteStore::open_url(url).await?)),
        other => Err(OpenError::Unsupported(other.to_string())),
    }
}

/// Maps any sqlx error to a store error; unique violations become conflicts.
pub(crate) fn map_err(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        if db.is_unique_violation() {
            return StoreError::Conflict(db.message().to_string());
        }
    }
    StoreError::Unavailable(e.to_string())
}
