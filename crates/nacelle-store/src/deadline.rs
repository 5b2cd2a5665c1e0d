//! The one deadline of the networked backends: every call of a store goes through
//! [`Deadline`], a [`StoreLayer`], so no method can be left without one (the layer is
//! handed every method by `nacelle_core::store::Layered`, generated from the one list
//! of methods, `store_roles!`).
//!
//! A database that stops answering on an open connection (a network that drops packets,
//! a server that hangs) would otherwise hold a call, and the write lock of its key in the
//! service, forever; with the deadline it fails with [`StoreError::Unavailable`]. A write
//! cut off by its deadline is rolled back: its transaction is dropped with it.

use std::future::Future;
use std::time::Duration;

use nacelle_core::store::{Call, ConfigStore, Cost, StoreFuture, StoreLayer};
use nacelle_core::StoreError;

/// A whole-table read (the cache's load at start) may take this many operation deadlines:
/// it reads every config, far more rows than any other call, but must not hang either.
pub(crate) const BULK_FACTOR: u32 = 30;

/// Records of a batch publish per operation deadline: a batch's deadline grows with it, so
/// a large import is not cut off while it makes progress.
pub(crate) const BATCH_PER_DEADLINE: usize = 100;

/// `S` with every call bounded in time ([`Deadline::limit`]).
#[derive(Debug)]
pub struct Deadline<S> {
    inner: S,
    /// The deadline of one operation ([`crate::StoreOptions::op_timeout`]).
    op_timeout: Duration,
}

impl<S> Deadline<S> {
    /// `inner` with calls bounded by multiples of `op_timeout`.
    pub(crate) fn new(inner: S, op_timeout: Duration) -> Self {
        Deadline { inner, op_timeout }
    }

    /// How long a call of `cost` may take ([`deadline_for`]).
    pub fn limit(&self, cost: Cost) -> Duration {
        deadline_for(self.op_timeout, cost)
    }
}

/// How long a call of `cost` may take with an operation deadline of `op_timeout`: one
/// operation deadline, [`BULK_FACTOR`] of them for a whole-table read, one per started
/// [`BATCH_PER_DEADLINE`] records of a batch.
pub fn deadline_for(op_timeout: Duration, cost: Cost) -> Duration {
    let times = match cost {
        Cost::One => 1,
        Cost::Bulk => BULK_FACTOR,
        Cost::Batch(n) => u32::try_from(n.div_ceil(BATCH_PER_DEADLINE).max(1)).unwrap_or(u32::MAX),
    };
    op_timeout.saturating_mul(times)
}

impl<S: ConfigStore> StoreLayer for Deadline<S> {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn run<'a, T, F>(&'a self, call: Call, op: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: FnOnce(&'a dyn ConfigStore) -> StoreFuture<'a, T> + Send + 'a,
    {
        let limit = self.limit(call.cost);
        Box::pin(timed(call.name, limit, op(&self.inner)))
    }
}

/// Bounds `fut` (the operation `what`) by `limit`, so a database that stopped answering
/// turns into [`StoreError::Unavailable`] instead of a hang.
pub(crate) async fn timed<T>(
    what: &str,
    limit: Duration,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::Unavailable(format!(
            "the database did not answer within {} ms ({what})",
            limit.as_millis()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_grow_with_the_work() {
        let d = Deadline::new((), Duration::from_secs(2));
        assert_eq!(d.limit(Cost::One), Duration::from_secs(2));
        assert_eq!(d.limit(Cost::Bulk), Duration::from_secs(60));
        assert_eq!(d.limit(Cost::Batch(0)), Duration::from_secs(2));
        assert_eq!(d.limit(Cost::Batch(100)), Duration::from_secs(2));
        assert_eq!(d.limit(Cost::Batch(101)), Duration::from_secs(4));
    }
}
