//! The change-log follower under the faults a replicated database brings: a gap (a
//! rolled-back or lost `nid`) below more rows than one page holds must not hold the
//! follower on that page, and a reload that fails after the rows were read (the database
//! went away in between) must be retried, never skipped. On every backend.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::store::{Call, ConfigStore, Layered, StoreFuture, StoreLayer};
use nacelle_core::{Caller, ConfigKey, StoreError};
use nacelle_service::{ChangeFollower, ConfigService, Limits};
use nacelle_testkit::service::publish;
use nacelle_testkit::{per_backend, Backend, BoxError, TestDb};
use sqlx::Connection;

per_backend!(a_gap_below_a_full_page_does_not_hold_the_follower);
per_backend!(a_failed_reload_is_retried_by_the_next_poll);

/// The content node `service` serves for `key`, `None` when absent.
fn content(service: &ConfigService, key: &ConfigKey) -> Result<Option<String>, BoxError> {
    let served = service.get(&Caller::internal(), key, None)?;
    Ok(served.map(|s| s.config.content_text().into_owned()))
}

/// Deletes the history row `nid`: to the follower, a gap that never fills (as a rolled-back
/// transaction leaves on MySQL and PostgreSQL).
async fn delete_history_row(db: &TestDb, nid: i64) -> Result<(), BoxError> {
    let sql = match db.backend {
        Backend::Postgres => "DELETE FROM his_config_info WHERE nid = $1",
        _ => "DELETE FROM his_config_info WHERE nid = ?",
    };
    let deleted = match db.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&db.url).await?;
            sqlx::query(sql)
                .bind(nid)
                .execute(&mut conn)
                .await?
                .rows_affected()
        }
        Backend::MariaDb => {
            let mut conn = db.mysql().await?;
            sqlx::query(sql)
                .bind(nid)
                .execute(&mut conn)
                .await?
                .rows_affected()
        }
        Backend::Postgres => {
            let mut conn = db.postgres().await?;
            sqlx::query(sql)
                .bind(nid)
                .execute(&mut conn)
                .await?
                .rows_affected()
        }
    };
    assert_eq!(deleted, 1, "history row {nid}");
    Ok(())
}

async fn a_gap_below_a_full_page_does_not_hold_the_follower(
    backend: Backend,
) -> Result<(), BoxError> {
    let db = TestDb::create(backend).await?;
    let a = ConfigService::new(nacelle_store::open(&db.url).await?, Limits::default());
    let b = ConfigService::new(nacelle_store::open(&db.url).await?, Limits::default());
    a.load().await?;
    let position = b.change_log_position().await?;
    b.load().await?;
    // Pages of 4 rows: the gap, then more rows than a page holds.
    let mut follower = ChangeFollower::starting_at(position).with_batch(4);

    let gap_key = ConfigKey::parse(None, "G", "gap")?;
    publish(&a, &ConfigKey::parse(None, "G", "before")?, "b").await?;
    publish(&a, &gap_key, "g").await?;
    let gap = a.change_log_position().await?;
    let keys: Vec<ConfigKey> = (0..10)
        .map(|i| ConfigKey::parse(None, "G", &format!("k{i}")))
        .collect::<Result<_, _>>()?;
    for (i, key) in keys.iter().enumerate() {
        publish(&a, key, &format!("v{i}")).await?;
    }
    delete_history_row(&db, gap).await?;

    // Before the fix the second page started at the gap again, and again: the poll went
    // round the first page until the gap was given up on (30 s), never reaching k4…k9.
    let polled = tokio::time::timeout(Duration::from_secs(10), follower.poll(&b)).await;
    let reloaded = polled.map_err(|_| "the poll kept re-reading the page below the gap")??;
    assert_eq!(reloaded, 11, "before and k0…k9");
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(content(&b, key)?, Some(format!("v{i}")), "{key:?}");
    }
    assert_eq!(follower.applied(), gap - 1, "the gap is still waited for");
    assert_eq!(follower.position(), a.change_log_position().await?);
    Ok(())
}

/// A layer failing every `get` (the call a reload makes) while `failing` is set.
#[derive(Debug)]
struct FailingGets {
    inner: Arc<dyn ConfigStore>,
    failing: Arc<AtomicBool>,
}

impl StoreLayer for FailingGets {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn run<'a, T, F>(&'a self, call: Call, op: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: FnOnce(&'a dyn ConfigStore) -> StoreFuture<'a, T> + Send + 'a,
    {
        if call.name == "get" && self.failing.load(Ordering::SeqCst) {
            return Box::pin(async { Err(StoreError::Unavailable("connection reset".into())) });
        }
        op(self.inner.as_ref())
    }
}

async fn a_failed_reload_is_retried_by_the_next_poll(backend: Backend) -> Result<(), BoxError> {
    let db = TestDb::create(backend).await?;
    let a = ConfigService::new(nacelle_store::open(&db.url).await?, Limits::default());
    let failing = Arc::new(AtomicBool::new(false));
    let store_b = Arc::new(Layered(FailingGets {
        inner: nacelle_store::open(&db.url).await?,
        failing: failing.clone(),
    }));
    let b = ConfigService::new(store_b, Limits::default());
    a.load().await?;
    let position = b.change_log_position().await?;
    b.load().await?;
    let mut follower = ChangeFollower::starting_at(position);

    let key = ConfigKey::parse(None, "G", "k")?;
    publish(&a, &key, "v1").await?;
    // The change log is read, the reload fails: the poll fails…
    failing.store(true, Ordering::SeqCst);
    assert!(follower.poll(&b).await.is_err());
    assert_eq!(content(&b, &key)?, None);
    // …and the next one reads the row again and reloads the key (before the fix the row
    // counted as seen, and the key stayed stale until its next change).
    failing.store(false, Ordering::SeqCst);
    assert_eq!(follower.poll(&b).await?, 1);
    assert_eq!(content(&b, &key)?.as_deref(), Some("v1"));
    assert_eq!(follower.position(), a.change_log_position().await?);
    Ok(())
}
