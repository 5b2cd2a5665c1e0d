//! What the store's per-backend suites share.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use nacelle_core::store::ConfigStore;
use nacelle_testkit::{Backend, TestDb};

pub type TestResult = anyhow::Result<()>;

/// A time in ms since the epoch the suites count from.
pub const T0: i64 = 1_700_000_000_000;

/// Runs `body` on a store opened on a database of its own on `backend`, dropped after
/// (also when the body fails): the runner of `per_backend!(with with_store: …)`.
pub async fn with_store<F, Fut>(backend: Backend, body: F) -> TestResult
where
    F: FnOnce(Arc<dyn ConfigStore>) -> Fut,
    Fut: Future<Output = TestResult>,
{
    let db = TestDb::create(backend).await?;
    let store = nacelle_store::open(&db.url)
        .await
        .with_context(|| format!("opening {backend:?} store"))?;
    let result = body(store).await;
    drop(db);
    result
}
