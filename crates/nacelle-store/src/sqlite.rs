//! SQLite backend: one database file, WAL journal, `synchronous=FULL` so an acknowledged
//! write survives a crash.
//!
//! Publishes, deletes and metadata updates go to the writer thread (`sqlite_writer.rs`): one OS thread with
//! its own connection that runs every write waiting in its queue in one transaction and
//! commits once (group commit: one fsync for the whole group), executing the same write
//! plans as the other backends. Each caller is answered only after that commit, so an
//! acknowledged write is durable exactly as with one transaction per write.
//!
//! Reads go through a sqlx pool and the same read code as MySQL and PostgreSQL
//! (`sql.rs`); namespace writes through a second sqlx pool of exactly one connection (SQLite
//! has one writer at a time; they wait for the writer thread's transaction through the
//! busy timeout).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use nacelle_core::StoreError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteQueryResult,
    SqliteSynchronous,
};
use sqlx::Sqlite;
use tokio::sync::{mpsc, oneshot};

use crate::dialect::Dialect;
use crate::map_err;
use crate::queries::Queries;
use crate::sqlite_writer::{self, queued, writer_gone, WriteOp};
use crate::store::{Backend, QuerySet, Store};
use crate::write::Step;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The SQLite store.
pub type SqliteStore = Store<SqliteBackend>;

/// The SQLite backend: a reader pool, a one-connection pool for namespace and identity
/// writes, and the queue of the group-commit writer thread.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    writer: SqlitePool,
    reader: SqlitePool,
    queries: QuerySet,
    /// Queue of the group-commit writer thread.
    writes: mpsc::Sender<WriteOp>,
}

/// Times are stored as ms in `INTEGER` columns; ids are `INTEGER`; `RETURNING` since 3.35.
impl Dialect for Sqlite {
    const NUMBERED_PLACEHOLDERS: bool = false;
    const TIME_PARAM: &'static str = "?";
    /// One writer at a time: the writer thread's `BEGIN IMMEDIATE` already holds the lock.
    const FOR_UPDATE: &'static str = "";
    const INSERT_CONFIG_TAIL: &'static str = " RETURNING id";
    const INSERT_HISTORY_TAIL: &'static str = " RETURNING nid";
    const UPDATE_COUNTS_MATCHED_ROWS: bool = true;
    const RETURNING_ID: &'static str = " RETURNING id";

    fn ms(col: &str) -> String {
        col.to_string()
    }
    fn tag_list() -> &'static str {
        "group_concat(r.tag_name, ',' ORDER BY r.nid)"
    }
    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }
}

impl Store<SqliteBackend> {
    /// Opens (creating when absent) the database file at `path` and applies migrations.
    pub async fn open_path(path: &Path) -> Result<Self, StoreError> {
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        Self::open_with(opts, sqlite_writer::start).await
    }

    /// Opens a `sqlite://path` URL.
    pub async fn open_url(url: &str) -> Result<Self, StoreError> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Unavailable(format!("invalid sqlite URL `{url}`: {e}")))?
            .create_if_missing(true);
        Self::open_with(opts, sqlite_writer::start).await
    }

    /// Opens the pools and starts the writer thread with `start_writer`.
    pub(crate) async fn open_with(
        opts: SqliteConnectOptions,
        start_writer: impl FnOnce(&Path, Queries) -> Result<mpsc::Sender<WriteOp>, StoreError>,
    ) -> Result<Self, StoreError> {
        let opts = opts
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(false);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(opts.clone())
            .await
            .map_err(map_err)?;
        MIGRATOR
            .run(&writer)
            .await
            .map_err(|e| StoreError::Unavailable(format!("migrating sqlite schema: {e}")))?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(opts.clone().read_only(true))
            .await
            .map_err(map_err)?;
        let queries = QuerySet::new::<Sqlite>();
        let writes = start_writer(opts.get_filename(), queries.config.clone())?;
        Ok(Store(SqliteBackend {
            writer,
            reader,
            queries,
            writes,
        }))
    }
}

impl SqliteBackend {
    async fn submit(&self, op: WriteOp) -> Result<(), StoreError> {
        self.writes.send(op).await.map_err(|_| writer_gone())
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    type Db = Sqlite;

    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn queries(&self) -> &QuerySet {
        &self.queries
    }

    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    /// Queues `step` for the writer thread and waits for its answer, which comes after
    /// its group committed.
    async fn write<S: Step>(&self, step: S) -> Result<S::Out, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.submit(WriteOp::Step(queued(step, reply))).await?;
        answer.await.map_err(|_| writer_gone())?
    }

    /// Goes to the writer thread, queued behind the writes already waiting (no lock
    /// contention with it, no busy-timeout sleeps for publishes).
    async fn delete_logged(&self, sql: String) -> Result<u64, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.submit(WriteOp::PurgeHistory(sql, reply)).await?;
        answer.await.map_err(|_| writer_gone())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use nacelle_core::store::{prelude::*, RemoveOutcome};
    use nacelle_core::{
        ConfigKey, ConfigMeta, ConfigType, Namespace, OpSource, OpType, PageRequest, PublishRecord,
    };

    fn record(key: &ConfigKey, content: &str) -> PublishRecord {
        PublishRecord {
            key: key.clone(),
            content: Bytes::from(content.to_string()),
            md5: nacelle_core::md5_hex(content.as_bytes()),
            config_type: ConfigType::Yaml,
            meta: ConfigMeta {
                config_tags: "a, b,a".into(),
                ..Default::default()
            },
            source: OpSource {
                src_user: "u".into(),
                src_ip: "127.0.0.1".into(),
                ..OpSource::default()
            },
            cas_md5: None,
            now_ms: nacelle_core::now_millis(),
            gray: None,
        }
    }

    #[tokio::test]
    async fn publish_update_remove_with_history() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = SqliteStore::open_path(&dir.path().join("db.sqlite")).await?;
        let key = ConfigKey::from_trusted("", "G", "d");
        let first = store.publish(&record(&key, "v1")).await?;
        assert_eq!(first.meta.config_tags, "a,b");
        let second = store.publish(&record(&key, "v2")).await?;
        assert!(second.revision > first.revision);
        assert_eq!(second.id, first.id);
        let got = store.get(&key).await?.ok_or("missing")?;
        assert_eq!(&got.content[..], b"v2");
        assert_eq!(got.revision, second.revision);
        assert_eq!(got.meta.config_tags, "a,b");

        let mut cas = record(&key, "v3");
        cas.cas_md5 = Some("nope".into());
        assert!(matches!(
            store.publish(&cas).await,
            Err(StoreError::CasMismatch)
        ));

        let prev = store
            .history_previous(first.id)
            .await?
            .ok_or("no previous")?;
        assert_eq!(prev.content, "v1");
        assert_eq!(prev.op_type, OpType::Update);

        assert!(matches!(
            store.remove(&key, &OpSource::default(), 1).await?,
            RemoveOutcome::Removed { .. }
        ));
        assert_eq!(
            store.remove(&key, &OpSource::default(), 1).await?,
            RemoveOutcome::Absent
        );
        let page = store
            .history_page(
                &key,
                PageRequest {
                    page_no: 1,
                    page_size: 10,
                },
            )
            .await?;
        let ops: Vec<_> = page.items.iter().map(|h| h.op_type).collect();
        assert_eq!(ops, vec![OpType::Delete, OpType::Update, OpType::Insert]);
        assert!(store.get(&key).await?.is_none());
        Ok(())
    }

    #[tokio::test]
    async fn namespaces() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = SqliteStore::open_path(&dir.path().join("db.sqlite")).await?;
        let ns = Namespace {
            id: nacelle_core::NamespaceId::from_trusted("dev"),
            name: "Dev".into(),
            desc: "d".into(),
        };
        store.create_namespace(&ns, 1).await?;
        assert!(matches!(
            store.create_namespace(&ns, 1).await,
            Err(StoreError::Conflict(_))
        ));
        store
            .update_namespace(
                &Namespace {
                    name: "Dev2".into(),
                    ..ns.clone()
                },
                2,
            )
            .await?;
        assert_eq!(store.list_namespaces().await?[0].name, "Dev2");
        assert!(
            store
                .delete_namespace(&nacelle_core::NamespaceId::from_trusted("dev"))
                .await?
        );
        assert!(
            !store
                .delete_namespace(&nacelle_core::NamespaceId::from_trusted("dev"))
                .await?
        );
        Ok(())
    }

    #[tokio::test]
    async fn group_commit_isolates_each_write() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = SqliteStore::open_path(&dir.path().join("db.sqlite")).await?;
        let mut tasks = Vec::new();
        for i in 0..200 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let key = ConfigKey::from_trusted("", "G", &format!("k{i}"));
                let mut rec = record(&key, &format!("v{i}"));
                if i % 10 == 0 {
                    // Must not exist yet → md5 "" matches; anything else fails.
                    rec.cas_md5 = Some("ffff".into());
                }
                store.publish(&rec).await
            }));
        }
        let mut ok = 0;
        let mut cas_failed = 0;
        for t in tasks {
            match t.await? {
                Ok(_) => ok += 1,
                Err(StoreError::CasMismatch) => cas_failed += 1,
                Err(e) => return Err(e.into()),
            }
        }
        assert_eq!((ok, cas_failed), (180, 20));
        assert_eq!(store.load_all().await?.len(), 180);
        assert_eq!(store.changes_since(0, 1000).await?.len(), 180);
        Ok(())
    }
}
