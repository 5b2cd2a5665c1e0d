//! The SQLite writer: one OS thread owning one connection, committing groups of writes.
//!
//! Every publish, delete and metadata update of a config or gray is queued here. The
//! thread takes every write waiting in the queue (up to [`MAX_GROUP`]), runs them in one `BEGIN IMMEDIATE … COMMIT` transaction —
//! one fsync for the whole group — and answers each caller only after that commit, so an
//! acknowledged write is as durable as with one transaction per write. Each write executes
//! the same plan as on the other backends, through the one write executor (`write.rs`:
//! plans from `plan.rs`, statements from `queries.rs`), here on a [`GroupTx`] with
//! rusqlite's cached prepared statements on this thread, with no hand-off between
//! threads per statement (the cost that dominated the publish profile when writes went
//! through sqlx).
//!
//! A compare-and-set failure is decided before anything is written, so the group goes on;
//! any other error may leave a write half done, so the whole group is rolled back and every
//! write of it fails (none of them happened). A `ROLLBACK` that fails would leave this
//! thread's only connection inside the transaction and fail every later write: it is
//! logged, and the connection is reopened (closing it rolls the transaction back).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use nacelle_core::StoreError;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{params_from_iter, Connection, OptionalExtension};
use sqlx::Sqlite;
use tokio::sync::{mpsc, oneshot};

use crate::dialect::Arg;
use crate::plan::Current;
use crate::queries::{Queries, Returns, Statement};
use crate::write::{Step, WriteConn};

/// Most writes committed in one transaction.
pub(crate) const MAX_GROUP: usize = 512;
/// Writes that may wait in the queue before callers wait for room.
pub(crate) const QUEUE: usize = 8192;

/// A write for the writer thread, with where to send its result.
pub(crate) enum WriteOp {
    /// A write of the executor (`write.rs`: publish, batch, remove, gray removal,
    /// promotion, metadata), run inside the group's transaction: it commits or rolls back
    /// with the group, never in part.
    Step(Box<dyn Queued>),
    /// One batch of a history purge: a `DELETE` by primary key (`queries::delete_logged`),
    /// run in a transaction of its own between groups, so a failing purge never rolls back
    /// a publish; answers the rows deleted.
    PurgeHistory(String, oneshot::Sender<Result<u64, StoreError>>),
}

impl std::fmt::Debug for WriteOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteOp::Step(_) => f.write_str("WriteOp::Step"),
            WriteOp::PurgeHistory(sql, _) => write!(f, "WriteOp::PurgeHistory({sql:?})"),
        }
    }
}

/// A queued write of any [`Step`], as the writer thread runs and answers it.
pub(crate) trait Queued: Send {
    /// Runs the write inside the group's transaction; `Some(cause)` when it failed in a
    /// way that may have left part of it written, so the group must roll back.
    fn run(&mut self, tx: &mut GroupTx<'_>, q: &Queries) -> Option<String>;

    /// Sends the answer once the group ended: its own result when the group committed
    /// (`rolled_back` is `None`); else its own error, or the group's cause if it had none
    /// (or never ran).
    fn answer(self: Box<Self>, rolled_back: Option<&str>);
}

/// `step` queued with where its answer goes.
pub(crate) fn queued<S: Step>(
    step: S,
    reply: oneshot::Sender<Result<S::Out, StoreError>>,
) -> Box<dyn Queued> {
    Box::new(QueuedStep {
        step,
        reply,
        result: None,
    })
}

/// A queued [`Step`]: the write, where its answer goes, and its result once it ran.
struct QueuedStep<S: Step> {
    step: S,
    reply: oneshot::Sender<Result<S::Out, StoreError>>,
    result: Option<Result<S::Out, StoreError>>,
}

impl<S: Step> Queued for QueuedStep<S> {
    fn run(&mut self, tx: &mut GroupTx<'_>, q: &Queries) -> Option<String> {
        let result = at_once(self.step.run(tx, q));
        let cause = match &result {
            Err(e) if S::wrote_part(e) => Some(e.to_string()),
            _ => None,
        };
        self.result = Some(result);
        cause
    }

    fn answer(self: Box<Self>, rolled_back: Option<&str>) {
        let rolled =
            |msg: &str| StoreError::Unavailable(format!("sqlite write group rolled back: {msg}"));
        let result = match (self.result, rolled_back) {
            (Some(result), None) => result,
            (Some(result), Some(msg)) => result.and(Err(rolled(msg))),
            (None, msg) => Err(rolled(msg.unwrap_or("skipped"))),
        };
        answer(self.reply, result);
    }
}

/// The error of a write whose writer thread is gone.
pub(crate) fn writer_gone() -> StoreError {
    StoreError::Unavailable("the sqlite writer stopped".into())
}

fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(format!("sqlite: {e}"))
}

/// Opens the writer's connection and starts its thread. The queue closes (and the thread
/// ends) when every sender is dropped.
pub(crate) fn start(path: &Path, queries: Queries) -> Result<mpsc::Sender<WriteOp>, StoreError> {
    spawn(Writer::open(path, queries)?)
}

fn spawn(writer: Writer) -> Result<mpsc::Sender<WriteOp>, StoreError> {
    let (tx, rx) = mpsc::channel(QUEUE);
    std::thread::Builder::new()
        .name("nacelle-sqlite-writer".into())
        .spawn(move || writer.run(rx))
        .map_err(|e| StoreError::Unavailable(format!("starting the sqlite writer: {e}")))?;
    Ok(tx)
}

/// Opens a connection as the writer uses it.
fn connect(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(db_err)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(db_err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(db_err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(db_err)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// Sends a write's answer. The caller may have stopped waiting (its request was cancelled
/// or timed out); the write's outcome stands either way, so there is nobody to tell.
fn answer<T>(reply: oneshot::Sender<T>, result: T) {
    if reply.send(result).is_err() {
        tracing::debug!("a sqlite write finished after its caller stopped waiting");
    }
}

/// The writer thread's state.
struct Writer {
    path: PathBuf,
    conn: Connection,
    queries: Queries,
    /// Faults a test injects (see `tests::a_failed_rollback_reopens_the_connection`).
    #[cfg(test)]
    faults: std::sync::Arc<tests::Faults>,
}

impl Writer {
    fn open(path: &Path, queries: Queries) -> Result<Self, StoreError> {
        Ok(Writer {
            path: path.to_path_buf(),
            conn: connect(path)?,
            queries,
            #[cfg(test)]
            faults: Default::default(),
        })
    }

    fn run(mut self, mut queue: mpsc::Receiver<WriteOp>) {
        while let Some(first) = queue.blocking_recv() {
            let mut batch = Vec::with_capacity(64);
            batch.push(first);
            while batch.len() < MAX_GROUP {
                match queue.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            let mut writes = Vec::with_capacity(batch.len());
            let mut purges = Vec::new();
            for op in batch {
                match op {
                    WriteOp::Step(write) => writes.push(write),
                    WriteOp::PurgeHistory(sql, reply) => purges.push((sql, reply)),
                }
            }
            if !writes.is_empty() {
                self.run_group(writes);
            }
            for (sql, reply) in purges {
                let result = self.purge(&sql);
                answer(reply, result);
            }
        }
    }

    /// Runs one purge `DELETE` as its own (autocommit) transaction.
    fn purge(&mut self, sql: &str) -> Result<u64, StoreError> {
        if !self.conn.is_autocommit() {
            self.rollback();
        }
        let deleted = self.conn.execute(sql, []).map_err(db_err)?;
        Ok(deleted as u64)
    }

    fn run_group(&mut self, mut writes: Vec<Box<dyn Queued>>) {
        if !self.conn.is_autocommit() {
            // A transaction is still open (an earlier reopen failed): repair first.
            self.rollback();
        }
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            let msg = db_err(e).to_string();
            writes.into_iter().for_each(|w| w.answer(Some(&msg)));
            return;
        }
        // A write that failed before writing anything (a compare-and-set failure, an
        // aborted batch, a missing row) fails alone; any other failure may have left it
        // half done, so the group stops there (the rest never run) and rolls back.
        let mut abort: Option<String> = None;
        for write in &mut writes {
            let mut tx = GroupTx {
                conn: &mut self.conn,
                #[cfg(test)]
                faults: &self.faults,
            };
            abort = write.run(&mut tx, &self.queries);
            if abort.is_some() {
                break;
            }
        }
        let failed = match abort {
            Some(cause) => Some(format!("another write of the same group failed: {cause}")),
            None => match self.conn.execute_batch("COMMIT") {
                Ok(()) => None,
                Err(e) => Some(format!("commit failed: {}", db_err(e))),
            },
        };
        if failed.is_some() {
            self.rollback();
        }
        writes.into_iter().for_each(|w| w.answer(failed.as_deref()));
    }

    /// Ends the open transaction without committing. When `ROLLBACK` fails and the
    /// connection is still inside the transaction, every later `BEGIN` would fail: the
    /// cause is logged and the connection replaced by a new one (closing the old one rolls
    /// its transaction back). Should reopening fail too, the next group tries again.
    fn rollback(&mut self) {
        let Err(e) = self.try_rollback() else {
            return;
        };
        if self.conn.is_autocommit() {
            // No transaction is left open (SQLite may already have rolled it back).
            tracing::warn!("sqlite writer: ROLLBACK failed ({e}), but no transaction is open");
            return;
        }
        tracing::error!("sqlite writer: ROLLBACK failed ({e}); reopening the connection");
        match connect(&self.path) {
            Ok(fresh) => {
                let old = std::mem::replace(&mut self.conn, fresh);
                if let Err((_, e)) = old.close() {
                    tracing::error!("sqlite writer: closing the old connection failed: {e}");
                }
                tracing::info!("sqlite writer: connection reopened");
            }
            Err(e) => tracing::error!(
                "sqlite writer: reopening the connection failed ({e}); retrying before the \
                 next group"
            ),
        }
    }

    fn try_rollback(&self) -> Result<(), rusqlite::Error> {
        #[cfg(test)]
        if self.faults.take_rollback_failure() {
            return Err(rusqlite::Error::ExecuteReturnedResults);
        }
        self.conn.execute_batch("ROLLBACK")
    }
}

/// Runs a step of the write executor on this thread. Every step of a [`GroupTx`] is a
/// plain rusqlite call that never waits, so the future is ready when first polled; one
/// that is not is an error, never a blocked writer thread.
fn at_once<T>(step: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    let mut step = pin!(step);
    match step.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => result,
        Poll::Pending => Err(StoreError::Unavailable(
            "a sqlite write step waited on the writer thread".into(),
        )),
    }
}

/// The writer's connection inside its group transaction (`BEGIN IMMEDIATE` holds the
/// database's write lock, so rows read need no lock of their own).
pub(crate) struct GroupTx<'w> {
    conn: &'w mut Connection,
    #[cfg(test)]
    faults: &'w tests::Faults,
}

#[async_trait]
impl WriteConn for GroupTx<'_> {
    type Dialect = Sqlite;
    type Error = StoreError;

    fn raced(&self) -> StoreError {
        StoreError::Unavailable(
            "a new config's key was taken inside the writer's own transaction".into(),
        )
    }

    async fn lock_row(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<(Current, String)>, StoreError> {
        let text = |r: &rusqlite::Row<'_>, i: usize| {
            r.get::<_, Option<String>>(i).map(Option::unwrap_or_default)
        };
        self.conn
            .prepare_cached(sql)
            .map_err(db_err)?
            .query_row(params_from_iter(args), |r| {
                let rule = if r.as_ref().column_count() > 6 {
                    text(r, 6)?
                } else {
                    String::new()
                };
                Ok((
                    Current::new(
                        r.get(0)?,
                        text(r, 1)?,
                        text(r, 2)?,
                        text(r, 3)?,
                        text(r, 4)?,
                        r.get(5)?,
                    ),
                    rule,
                ))
            })
            .optional()
            .map_err(db_err)
    }

    async fn lock_change(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<(i64, String)>, StoreError> {
        self.conn
            .prepare_cached(sql)
            .map_err(db_err)?
            .query_row(params_from_iter(args), |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(db_err)
    }

    async fn run(
        &mut self,
        st: &Statement<'_>,
        args: &[Arg<'_>],
    ) -> Result<Option<i64>, StoreError> {
        let mut stmt = self.conn.prepare_cached(st.sql).map_err(db_err)?;
        let value = if st.returns == Returns::Nothing {
            stmt.execute(params_from_iter(args)).map(|_| None)
        } else {
            stmt.query_row(params_from_iter(args), |r| r.get(0))
                .optional()
        };
        #[cfg(test)]
        self.faults.fail_write()?;
        value.map_err(db_err)
    }
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Arg::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Arg::Int(i) => ToSqlOutput::Owned(Value::Integer(i)),
            Arg::OptInt(Some(i)) => ToSqlOutput::Owned(Value::Integer(i)),
            Arg::OptInt(None) => ToSqlOutput::Owned(Value::Null),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use bytes::Bytes;
    use nacelle_core::store::{prelude::*, RemoveOutcome};
    use nacelle_core::{ConfigKey, ConfigMeta, ConfigType, OpSource, PageRequest, PublishRecord};
    use sqlx::sqlite::SqliteConnectOptions;

    use super::*;
    use crate::SqliteStore;

    /// One-shot faults a test arms on a writer.
    #[derive(Debug, Default)]
    pub(crate) struct Faults {
        /// The next `ROLLBACK` fails without running, leaving the transaction open, as a
        /// real failed `ROLLBACK` would.
        rollback: AtomicBool,
        /// The next statement of a write fails after it ran (a write left half done).
        write: AtomicBool,
    }

    impl Faults {
        pub(crate) fn take_rollback_failure(&self) -> bool {
            self.rollback.swap(false, Ordering::SeqCst)
        }

        pub(crate) fn fail_write(&self) -> Result<(), StoreError> {
            if self.write.swap(false, Ordering::SeqCst) {
                return Err(StoreError::Unavailable("injected write failure".into()));
            }
            Ok(())
        }
    }

    fn record(data_id: &str, content: &str, now_ms: i64) -> PublishRecord {
        PublishRecord {
            key: ConfigKey::from_trusted("", "G", data_id),
            content: Bytes::from(content.to_string()),
            md5: nacelle_core::md5_hex(content.as_bytes()),
            config_type: ConfigType::Text,
            meta: ConfigMeta::default(),
            source: OpSource::default(),
            cas_md5: None,
            now_ms,
            gray: None,
        }
    }

    #[tokio::test]
    async fn a_failed_rollback_reopens_the_connection() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("db.sqlite");
        let faults = Arc::new(Faults::default());
        let armed = faults.clone();
        let opts = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let store = SqliteStore::open_with(opts, move |p, q| {
            let mut writer = Writer::open(p, q)?;
            writer.faults = armed;
            spawn(writer)
        })
        .await?;

        let a1 = store.publish(&record("a", "a1", 1_000)).await?;

        // A write fails half done, and the ROLLBACK of its group fails too.
        faults.write.store(true, Ordering::SeqCst);
        faults.rollback.store(true, Ordering::SeqCst);
        let failed = store.publish(&record("b", "b1", 2_000)).await;
        assert!(
            matches!(&failed, Err(StoreError::Unavailable(m)) if m.contains("injected")),
            "{failed:?}"
        );
        assert!(!faults.take_rollback_failure(), "the ROLLBACK fault fired");

        // The writer is usable again: later writes (insert, update, delete) succeed.
        let c1 = store.publish(&record("c", "c1", 3_000)).await?;
        let a2 = store.publish(&record("a", "a2", 4_000)).await?;
        assert_eq!(a2.id, a1.id);
        assert!(a2.revision > c1.revision && c1.revision > a1.revision);
        let d = record("d", "d1", 5_000);
        store.publish(&d).await?;
        assert!(matches!(
            store.remove(&d.key, &d.source, 6_000).await?,
            RemoveOutcome::Removed { .. }
        ));
        drop(store);

        // Reopened from the file: everything acknowledged is there, the half-done write not.
        let store = SqliteStore::open_path(&path).await?;
        let content = |data_id: &str| {
            let store = store.clone();
            let key = ConfigKey::from_trusted("", "G", data_id);
            async move { Ok::<_, StoreError>(store.get(&key).await?.map(|c| c.content)) }
        };
        assert_eq!(content("a").await?, Some(Bytes::from("a2")));
        assert_eq!(content("c").await?, Some(Bytes::from("c1")));
        assert_eq!(content("b").await?, None);
        assert_eq!(content("d").await?, None);
        let b_history = store
            .history_page(
                &ConfigKey::from_trusted("", "G", "b"),
                PageRequest {
                    page_no: 1,
                    page_size: 10,
                },
            )
            .await?;
        assert_eq!(b_history.total_count, 0);
        assert_eq!(store.changes_since(0, 100).await?.len(), 5);
        Ok(())
    }
}
