//! SQLite backend: one database file, WAL journal, `synchronous=FULL` so an acknowledged
//! write survives a crash.
//!
//! Writes go through a pool of exactly one connection: SQLite has one writer at a time, and
//! a single writer connection avoids `SQLITE_BUSY` on lock upgrades. Reads use a separate
//! pool.
//!
//! Group commit: publishes and deletes are queued to one writer task, which runs every
//! write waiting in the queue inside one transaction (each in its own savepoint, so a
//! compare-and-set failure or an error of one write does not affect the others) and then
//! commits once: one fsync for the whole group. Each caller is answered only after that
//! commit, so an acknowledged write is durable exactly as with one transaction per write.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    ChangeRecord, ConfigKey, ConfigStore, HistoryEntry, Namespace, OpSource, Page, PageRequest,
    PublishRecord, StoreError, StoredConfig,
};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::{mpsc, oneshot};

use crate::common::{change_from_row, config_from_row, history_from_row, text};
use crate::map_err;
use crate::sqlite_writer::{self, writer_gone, WriteOp};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Queue of the group-commit writer task.
    writes: mpsc::Sender<WriteOp>,
}

const CONFIG_COLUMNS: &str = "c.id, c.data_id, c.group_id, c.tenant_id, c.content, c.md5, c.type, \
    c.app_name, c.c_desc, c.c_use, c.effect, c.c_schema, c.encrypted_data_key, c.src_user, \
    c.src_ip, c.gmt_create, c.gmt_modified, \
    (SELECT group_concat(r.tag_name, ',' ORDER BY r.nid) FROM config_tags_relation r \
      WHERE r.id = c.id) AS config_tags, \
    COALESCE((SELECT max(h.nid) FROM his_config_info h WHERE h.data_id = c.data_id \
      AND h.group_id = c.group_id AND h.tenant_id = c.tenant_id), 0) AS revision";

const HISTORY_COLUMNS: &str = "id, nid, data_id, group_id, tenant_id, app_name, content, md5, \
    src_user, src_ip, op_type, gmt_create, gmt_modified, encrypted_data_key";

impl SqliteStore {
    /// Opens (creating when absent) the database file at `path` and applies migrations.
    pub async fn open_path(path: &Path) -> Result<Self, StoreError> {
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        Self::open_with(opts).await
    }

    /// Opens a `sqlite://path` URL.
    pub async fn open_url(url: &str) -> Result<Self, StoreError> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Unavailable(format!("invalid sqlite URL `{url}`: {e}")))?
            .create_if_missing(true);
        Self::open_with(opts).await
    }

    async fn open_with(opts: SqliteConnectOptions) -> Result<Self, StoreError> {
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
        let writes = sqlite_writer::start(opts.get_filename())?;
        Ok(SqliteStore {
            writer,
            reader,
            writes,
        })
    }

    async fn submit(&self, op: WriteOp) -> Result<(), StoreError> {
        self.writes.send(op).await.map_err(|_| writer_gone())
    }
}

#[async_trait]
impl ConfigStore for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn load_all(&self) -> Result<Vec<StoredConfig>, StoreError> {
        let sql = format!("SELECT {CONFIG_COLUMNS} FROM config_info c ORDER BY c.id");
        let rows = sqlx::query(&sql)
            .fetch_all(&self.reader)
            .await
            .map_err(map_err)?;
        rows.iter().map(config_from_row).collect()
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<StoredConfig>, StoreError> {
        let sql = format!(
            "SELECT {CONFIG_COLUMNS} FROM config_info c \
             WHERE c.data_id = ? AND c.group_id = ? AND c.tenant_id = ?"
        );
        let row = sqlx::query(&sql)
            .bind(key.data_id())
            .bind(key.group())
            .bind(key.tenant())
            .fetch_optional(&self.reader)
            .await
            .map_err(map_err)?;
        row.map(|r| config_from_row(&r)).transpose()
    }

    async fn publish(&self, rec: &PublishRecord) -> Result<StoredConfig, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.submit(WriteOp::Publish(Box::new(rec.clone()), reply))
            .await?;
        answer.await.map_err(|_| writer_gone())?
    }

    async fn remove(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.submit(WriteOp::Remove(key.clone(), source.clone(), now_ms, reply))
            .await?;
        answer.await.map_err(|_| writer_gone())?
    }

    async fn history_page(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, StoreError> {
        let total: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM his_config_info WHERE data_id = ? AND group_id = ? AND tenant_id = ?",
        )
        .bind(key.data_id())
        .bind(key.group())
        .bind(key.tenant())
        .fetch_one(&self.reader)
        .await
        .map_err(map_err)?;
        let sql = format!(
            "SELECT {HISTORY_COLUMNS} FROM his_config_info \
             WHERE data_id = ? AND group_id = ? AND tenant_id = ? ORDER BY nid DESC LIMIT ? OFFSET ?"
        );
        let rows = sqlx::query(&sql)
            .bind(key.data_id())
            .bind(key.group())
            .bind(key.tenant())
            .bind(page.page_size as i64)
            .bind(page.offset() as i64)
            .fetch_all(&self.reader)
            .await
            .map_err(map_err)?;
        let items = rows
            .iter()
            .map(history_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page::new(
            total.max(0) as u64,
            page.page_no,
            page.page_size,
            items,
        ))
    }

    async fn history_entry(&self, nid: i64) -> Result<Option<HistoryEntry>, StoreError> {
        let sql = format!("SELECT {HISTORY_COLUMNS} FROM his_config_info WHERE nid = ?");
        let row = sqlx::query(&sql)
            .bind(nid)
            .fetch_optional(&self.reader)
            .await
            .map_err(map_err)?;
        row.map(|r| history_from_row(&r)).transpose()
    }

    async fn history_previous(&self, config_id: i64) -> Result<Option<HistoryEntry>, StoreError> {
        let sql = format!(
            "SELECT {HISTORY_COLUMNS} FROM his_config_info WHERE nid = \
             (SELECT max(nid) FROM his_config_info WHERE id = ?)"
        );
        let row = sqlx::query(&sql)
            .bind(config_id)
            .fetch_optional(&self.reader)
            .await
            .map_err(map_err)?;
        row.map(|r| history_from_row(&r)).transpose()
    }

    async fn list_namespaces(&self) -> Result<Vec<Namespace>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant_id, tenant_name, tenant_desc FROM tenant_info WHERE kp = '1' ORDER BY id",
        )
        .fetch_all(&self.reader)
        .await
        .map_err(map_err)?;
        rows.iter()
            .map(|r| {
                Ok(Namespace {
                    id: text(r, "tenant_id")?,
                    name: text(r, "tenant_name")?,
                    desc: text(r, "tenant_desc")?,
                })
            })
            .collect()
    }

    async fn create_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO tenant_info (kp, tenant_id, tenant_name, tenant_desc, create_source, \
             gmt_create, gmt_modified) VALUES ('1', ?, ?, ?, 'nacos', ?, ?)",
        )
        .bind(&ns.id)
        .bind(&ns.name)
        .bind(&ns.desc)
        .bind(now_ms)
        .bind(now_ms)
        .execute(&self.writer)
        .await
        .map_err(map_err)?;
        Ok(())
    }

    async fn update_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE tenant_info SET tenant_name = ?, tenant_desc = ?, gmt_modified = ? \
             WHERE kp = '1' AND tenant_id = ?",
        )
        .bind(&ns.name)
        .bind(&ns.desc)
        .bind(now_ms)
        .bind(&ns.id)
        .execute(&self.writer)
        .await
        .map_err(map_err)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("namespace `{}`", ns.id)));
        }
        Ok(())
    }

    async fn delete_namespace(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM tenant_info WHERE kp = '1' AND tenant_id = ?")
            .bind(id)
            .execute(&self.writer)
            .await
            .map_err(map_err)?;
        Ok(done.rows_affected() > 0)
    }

    async fn changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT nid, data_id, group_id, tenant_id, op_type, gmt_modified FROM his_config_info \
             WHERE nid > ? ORDER BY nid LIMIT ?",
        )
        .bind(after_nid)
        .bind(limit)
        .fetch_all(&self.reader)
        .await
        .map_err(map_err)?;
        rows.iter().map(change_from_row).collect()
    }

    async fn max_history_nid(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT COALESCE(MAX(nid), 0) FROM his_config_info")
            .fetch_one(&self.reader)
            .await
            .map_err(map_err)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(map_err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use nacelle_core::{ConfigMeta, ConfigType, OpType};

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
            },
            cas_md5: None,
            now_ms: nacelle_core::now_millis(),
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
            id: "dev".into(),
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
        assert!(store.delete_namespace("dev").await?);
        assert!(!store.delete_namespace("dev").await?);
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
