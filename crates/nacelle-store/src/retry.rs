//! The retry rule of write transactions on MySQL/PostgreSQL: an attempt that lost to a
//! concurrent one (a deadlock, a serialization failure, an insert of the same new key)
//! runs again as a whole, a definite answer is returned as it is.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use nacelle_core::StoreError;

use crate::map_err;

/// Why one attempt of a write transaction did not complete.
#[derive(Debug)]
pub(crate) enum TxError {
    /// The database failed; retried when it is a deadlock or serialization failure.
    Sql(sqlx::Error),
    /// A definite answer (CAS mismatch, not found…): returned as it is.
    Store(StoreError),
    /// Another writer inserted the same new key first: the next attempt sees its row.
    Raced,
}

impl From<sqlx::Error> for TxError {
    fn from(e: sqlx::Error) -> Self {
        TxError::Sql(e)
    }
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        TxError::Store(e)
    }
}

/// Attempts of one write before giving up on repeated deadlocks or races.
const MAX_ATTEMPTS: u32 = 10;

/// Whether the database aborted a transaction only because of concurrent ones: deadlock
/// (MySQL 1213 and PostgreSQL both report SQLSTATE 40001 or 40P01).
fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("40001" | "40P01")),
        _ => false,
    }
}

/// Runs `attempt` (one whole transaction) until it succeeds, fails definitely, or has lost
/// to concurrent writers [`MAX_ATTEMPTS`] times. The transaction of a failed attempt has been
/// rolled back (dropped) before the next one starts.
pub(crate) async fn with_retries<T, F, Fut>(mut attempt: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TxError>>,
{
    let mut n = 0;
    loop {
        n += 1;
        let last = n >= MAX_ATTEMPTS;
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(TxError::Store(e)) => return Err(e),
            Err(TxError::Sql(e)) if !is_transient(&e) || last => return Err(map_err(e)),
            Err(TxError::Raced) if last => {
                return Err(StoreError::Unavailable(format!(
                    "gave up after {MAX_ATTEMPTS} attempts: concurrent writers of the same key kept winning"
                )))
            }
            Err(TxError::Sql(e)) => tracing::debug!("retrying a write after: {e}"),
            Err(TxError::Raced) => tracing::debug!("retrying a write that raced an insert"),
        }
        tokio::time::sleep(backoff(n)).await;
    }
}

/// A short pause that grows with the attempt number, with jitter so racing writers spread.
fn backoff(attempt: u32) -> Duration {
    let jitter = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % 10;
    Duration::from_millis(u64::from(attempt) * 5 + jitter)
}
