//! The change-log follower under the faults a replicated database brings: a gap (a
//! rolled-back or lost `nid`) below more rows than one page holds must not hold the
//! follower on that page; a reload that fails after the rows were read (the database
//! went away in between) must be retried, never skipped; and a failover to a replica that
//! lacks commits the node read (whose ids new rows then take again) is noticed, and the
//! node resynchronized. On every backend.

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
per_backend!(a_failover_that_lost_commits_the_node_read_is_noticed_and_resynchronized);

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
    let position = b.replication().change_log_position().await?;
    b.load().await?;
    // Pages of 4 rows: the gap, then more rows than a page holds.
    let mut follower = ChangeFollower::starting_at(position).with_batch(4);

    let gap_key = ConfigKey::parse(None, "G", "gap")?;
    publish(&a, &ConfigKey::parse(None, "G", "before")?, "b").await?;
    publish(&a, &gap_key, "g").await?;
    let gap = a.replication().change_log_position().await?;
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
    assert_eq!(
        follower.position(),
        a.replication().change_log_position().await?
    );
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
    let position = b.replication().change_log_position().await?;
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
    assert_eq!(
        follower.position(),
        a.replication().change_log_position().await?
    );
    Ok(())
}

/// The database a node reaches: the primary until `failed_over` is set, then the replica.
#[derive(Debug)]
struct Failover {
    primary: Arc<dyn ConfigStore>,
    replica: Arc<dyn ConfigStore>,
    failed_over: Arc<AtomicBool>,
}

impl StoreLayer for Failover {
    fn backend(&self) -> &'static str {
        self.primary.backend()
    }

    fn run<'a, T, F>(&'a self, _call: Call, op: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: FnOnce(&'a dyn ConfigStore) -> StoreFuture<'a, T> + Send + 'a,
    {
        if self.failed_over.load(Ordering::SeqCst) {
            op(self.replica.as_ref())
        } else {
            op(self.primary.as_ref())
        }
    }
}

async fn a_failover_that_lost_commits_the_node_read_is_noticed_and_resynchronized(
    backend: Backend,
) -> Result<(), BoxError> {
    // Two databases: the primary, and a replica that will lack the primary's last commit.
    let (primary_db, replica_db) = (
        TestDb::create(backend).await?,
        TestDb::create(backend).await?,
    );
    let on_primary = ConfigService::new(
        nacelle_store::open(&primary_db.url).await?,
        Limits::default(),
    );
    let on_replica = ConfigService::new(
        nacelle_store::open(&replica_db.url).await?,
        Limits::default(),
    );
    let failed_over = Arc::new(AtomicBool::new(false));
    let node = ConfigService::new(
        Arc::new(Layered(Failover {
            primary: nacelle_store::open(&primary_db.url).await?,
            replica: nacelle_store::open(&replica_db.url).await?,
            failed_over: failed_over.clone(),
        })),
        Limits::default(),
    );
    on_primary.load().await?;
    on_replica.load().await?;
    let position = node.replication().change_log_position().await?;
    node.load().await?;
    let mut follower = ChangeFollower::starting_at(position);

    let (k, j) = (
        ConfigKey::parse(None, "G", "k")?,
        ConfigKey::parse(None, "G", "j")?,
    );
    // Replicated: the same commits, the same ids, on both.
    for db in [&on_primary, &on_replica] {
        publish(db, &k, "k1").await?;
        publish(db, &j, "j1").await?;
    }
    // The primary's last commit, which never reached the replica; the node reads it.
    publish(&on_primary, &k, "k2-lost").await?;
    follower.poll(&node).await?;
    assert_eq!(content(&node, &k)?.as_deref(), Some("k2-lost"));
    assert!(!follower.history_rewound(&node).await?, "nothing lost yet");

    // Failover: the replica is the database now, and its next commit takes the lost id.
    failed_over.store(true, Ordering::SeqCst);
    publish(&on_replica, &j, "j2").await?;
    assert_eq!(
        on_replica.replication().change_log_position().await?,
        follower.position(),
        "the replica's new row took the id of the lost one"
    );
    // The follower alone would never read that row (it is not above its position), and a
    // reload of k would keep the lost value (its revision is newer than the database's).
    assert_eq!(follower.poll(&node).await?, 0);
    node.replication().reload(&k).await?;
    assert_eq!(content(&node, &k)?.as_deref(), Some("k2-lost"));
    assert_eq!(content(&node, &j)?.as_deref(), Some("j1"));

    // What the server does after an outage: notice, resynchronize, follow from there.
    assert!(follower.history_rewound(&node).await?);
    let position = node.replication().change_log_position().await?;
    assert_eq!(
        node.replication().resync().await?,
        2,
        "k back to k1, j to j2"
    );
    assert_eq!(content(&node, &k)?.as_deref(), Some("k1"));
    assert_eq!(content(&node, &j)?.as_deref(), Some("j2"));
    let mut follower = ChangeFollower::starting_at(position);
    publish(&on_replica, &k, "k3").await?;
    follower.poll(&node).await?;
    assert_eq!(content(&node, &k)?.as_deref(), Some("k3"));
    assert!(!follower.history_rewound(&node).await?);
    Ok(())
}
