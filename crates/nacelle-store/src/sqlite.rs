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
    ChangeRecord, ConfigKey, ConfigMeta, ConfigStore, HistoryEntry, Namespace, OpSource, OpType,
    Page, PageRequest, PublishRecord, StoreError, StoredConfig,
};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Row, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::common::{change_from_row, config_from_row, history_from_row, split_tags, text};
use crate::map_err;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Queue of the group-commit writer task.
    writes: mpsc::Sender<WriteOp>,
}

/// Most writes committed in one transaction.
const MAX_GROUP: usize = 512;
/// Writes that may wait in the queue before callers wait for room.
const QUEUE: usize = 8192;

/// A write for the group-commit task, with where to send its result.
#[derive(Debug)]
enum WriteOp {
    Publish(
        Box<PublishRecord>,
        oneshot::Sender<Result<StoredConfig, StoreError>>,
    ),
    Remove(
        ConfigKey,
        OpSource,
        i64,
        oneshot::Sender<Result<RemoveOutcome, StoreError>>,
    ),
}

fn writer_gone() -> StoreError {
    StoreError::Unavailable("the sqlite writer stopped".into())
}

/// The group-commit writer: takes every queued write, runs them in one transaction with a
/// savepoint each, commits once, then answers each caller.
async fn group_commit(pool: SqlitePool, mut queue: mpsc::Receiver<WriteOp>) {
    let mut batch: Vec<WriteOp> = Vec::with_capacity(MAX_GROUP);
    while queue.recv_many(&mut batch, MAX_GROUP).await > 0 {
        run_group(&pool, std::mem::take(&mut batch)).await;
    }
}

enum Done {
    Publish(
        Box<Result<StoredConfig, StoreError>>,
        oneshot::Sender<Result<StoredConfig, StoreError>>,
    ),
    Remove(
        Result<RemoveOutcome, StoreError>,
        oneshot::Sender<Result<RemoveOutcome, StoreError>>,
    ),
}

async fn run_group(pool: &SqlitePool, batch: Vec<WriteOp>) {
    let mut tx = match pool.begin().await {
        Ok(tx) => tx,
        Err(e) => {
            let err = map_err(e);
            for op in batch {
                match op {
                    WriteOp::Publish(_, reply) => {
                        let _ = reply.send(Err(StoreError::Unavailable(err.to_string())));
                    }
                    WriteOp::Remove(_, _, _, reply) => {
                        let _ = reply.send(Err(StoreError::Unavailable(err.to_string())));
                    }
                }
            }
            return;
        }
    };
    let mut done = Vec::with_capacity(batch.len());
    let mut ops = batch.into_iter();
    while let Some(op) = ops.next() {
        // A compare-and-set failure is decided before anything is written, so the group
        // goes on; any other error may leave a write half done, so the group is undone.
        let (aborts, finished) = match op {
            WriteOp::Publish(rec, reply) => {
                let r = SqliteStore::publish_in(&mut tx, &rec).await;
                let aborts = matches!(&r, Err(e) if !matches!(e, StoreError::CasMismatch));
                (aborts, Done::Publish(Box::new(r), reply))
            }
            WriteOp::Remove(key, source, now_ms, reply) => {
                let r = SqliteStore::remove_in(&mut tx, &key, &source, now_ms).await;
                (r.is_err(), Done::Remove(r, reply))
            }
        };
        done.push(finished);
        if aborts {
            drop(tx);
            for op in ops {
                match op {
                    WriteOp::Publish(rec, reply) => {
                        done.push(Done::Publish(Box::new(Ok(stub_of(&rec))), reply))
                    }
                    WriteOp::Remove(_, _, _, reply) => {
                        done.push(Done::Remove(Ok(RemoveOutcome::Absent), reply))
                    }
                }
            }
            fail_all(done, "another write of the same group failed");
            return;
        }
    }
    if let Err(e) = tx.commit().await {
        fail_all(done, &format!("commit failed: {}", map_err(e)));
        return;
    }
    for d in done {
        match d {
            Done::Publish(r, reply) => {
                let _ = reply.send(*r);
            }
            Done::Remove(r, reply) => {
                let _ = reply.send(r);
            }
        }
    }
}

/// A placeholder outcome for a write that never ran; `fail_all` turns it into an error.
fn stub_of(rec: &PublishRecord) -> StoredConfig {
    StoredConfig {
        id: 0,
        key: rec.key.clone(),
        content: rec.content.clone(),
        md5: rec.md5.clone(),
        config_type: rec.config_type,
        meta: rec.meta.clone(),
        source: rec.source.clone(),
        created_ms: rec.now_ms,
        modified_ms: rec.now_ms,
        revision: 0,
    }
}

/// Answers every write of a group whose transaction did not commit: none of them happened.
fn fail_all(done: Vec<Done>, msg: &str) {
    let err = || StoreError::Unavailable(format!("sqlite write group rolled back: {msg}"));
    for d in done {
        match d {
            Done::Publish(r, reply) => {
                let _ = reply.send(r.and(Err(err())));
            }
            Done::Remove(r, reply) => {
                let _ = reply.send(r.and(Err(err())));
            }
        }
    }
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
            .connect_with(opts.read_only(true))
            .await
            .map_err(map_err)?;
        let (writes, queue) = mpsc::channel(QUEUE);
        tokio::spawn(group_commit(writer.clone(), queue));
        Ok(SqliteStore {
            writer,
            reader,
            writes,
        })
    }

    async fn current(
        tx: &mut SqliteConnection,
        key: &ConfigKey,
    ) -> Result<Option<StoredConfig>, StoreError> {
        let sql = format!(
            "SELECT {CONFIG_COLUMNS} FROM config_info c \
             WHERE c.data_id = ? AND c.group_id = ? AND c.tenant_id = ?"
        );
        let row = sqlx::query(&sql)
            .bind(key.data_id())
            .bind(key.group())
            .bind(key.tenant())
            .fetch_optional(&mut *tx)
            .await
            .map_err(map_err)?;
        row.map(|r| config_from_row(&r)).transpose()
    }

    /// Makes the tag relations of config `id` the tags of `new`, touching nothing when they
    /// are already those of `old`.
    async fn replace_tags(
        tx: &mut SqliteConnection,
        id: i64,
        key: &ConfigKey,
        old: &str,
        new: &str,
    ) -> Result<(), StoreError> {
        if split_tags(old) == split_tags(new) {
            return Ok(());
        }
        if !old.trim().is_empty() {
            sqlx::query("DELETE FROM config_tags_relation WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(map_err)?;
        }
        Self::insert_tags(tx, id, key, new).await
    }

    /// Inserts the tag relations of config `id`.
    async fn insert_tags(
        tx: &mut SqliteConnection,
        id: i64,
        key: &ConfigKey,
        tags: &str,
    ) -> Result<(), StoreError> {
        for tag in split_tags(tags) {
            sqlx::query(
                "INSERT INTO config_tags_relation (id, tag_name, tag_type, data_id, group_id, tenant_id) \
                 VALUES (?, ?, NULL, ?, ?, ?)",
            )
            .bind(id)
            .bind(tag)
            .bind(key.data_id())
            .bind(key.group())
            .bind(key.tenant())
            .execute(&mut *tx)
            .await
            .map_err(map_err)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn insert_history(
        tx: &mut SqliteConnection,
        config_id: i64,
        key: &ConfigKey,
        app_name: &str,
        content: &[u8],
        md5: &str,
        encrypted_data_key: &str,
        source: &OpSource,
        op: OpType,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, md5, \
             gmt_create, gmt_modified, src_user, src_ip, op_type, encrypted_data_key) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING nid",
        )
        .bind(config_id)
        .bind(key.data_id())
        .bind(key.group())
        .bind(key.tenant())
        .bind(app_name)
        .bind(String::from_utf8_lossy(content).as_ref())
        .bind(md5)
        .bind(now_ms)
        .bind(now_ms)
        .bind(&source.src_user)
        .bind(&source.src_ip)
        .bind(op.as_str())
        .bind(encrypted_data_key)
        .fetch_one(&mut *tx)
        .await
        .map_err(map_err)?;
        row.try_get::<i64, _>(0).map_err(map_err)
    }

    async fn submit(&self, op: WriteOp) -> Result<(), StoreError> {
        self.writes.send(op).await.map_err(|_| writer_gone())
    }

    /// One publish inside the writer's open transaction (no commit here).
    async fn publish_in(
        tx: &mut SqliteConnection,
        rec: &PublishRecord,
    ) -> Result<StoredConfig, StoreError> {
        let old = Self::current(tx, &rec.key).await?;
        if let Some(expected) = &rec.cas_md5 {
            let actual = old.as_ref().map(|o| o.md5.as_str()).unwrap_or("");
            if actual != expected {
                return Err(StoreError::CasMismatch);
            }
        }
        let content = String::from_utf8_lossy(&rec.content).into_owned();
        let m = &rec.meta;
        let (id, created_ms, revision) = match &old {
            None => {
                let row = sqlx::query(
                    "INSERT INTO config_info (data_id, group_id, tenant_id, content, md5, gmt_create, \
                     gmt_modified, src_user, src_ip, app_name, c_desc, c_use, effect, type, c_schema, \
                     encrypted_data_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                     RETURNING id",
                )
                .bind(rec.key.data_id())
                .bind(rec.key.group())
                .bind(rec.key.tenant())
                .bind(&content)
                .bind(&rec.md5)
                .bind(rec.now_ms)
                .bind(rec.now_ms)
                .bind(&rec.source.src_user)
                .bind(&rec.source.src_ip)
                .bind(&m.app_name)
                .bind(&m.desc)
                .bind(&m.r#use)
                .bind(&m.effect)
                .bind(rec.config_type.as_str())
                .bind(&m.schema)
                .bind(&m.encrypted_data_key)
                .fetch_one(&mut *tx)
                .await
                .map_err(map_err)?;
                let id: i64 = row.try_get(0).map_err(map_err)?;
                Self::insert_tags(tx, id, &rec.key, &m.config_tags).await?;
                // Nacos records inserts with config id 0 in history.
                let nid = Self::insert_history(
                    tx,
                    0,
                    &rec.key,
                    &m.app_name,
                    &rec.content,
                    &rec.md5,
                    &m.encrypted_data_key,
                    &rec.source,
                    OpType::Insert,
                    rec.now_ms,
                )
                .await?;
                (id, rec.now_ms, nid)
            }
            Some(old) => {
                sqlx::query(
                    "UPDATE config_info SET content = ?, md5 = ?, gmt_modified = ?, src_user = ?, \
                     src_ip = ?, app_name = ?, c_desc = ?, c_use = ?, effect = ?, type = ?, \
                     c_schema = ?, encrypted_data_key = ? WHERE id = ?",
                )
                .bind(&content)
                .bind(&rec.md5)
                .bind(rec.now_ms)
                .bind(&rec.source.src_user)
                .bind(&rec.source.src_ip)
                .bind(&m.app_name)
                .bind(&m.desc)
                .bind(&m.r#use)
                .bind(&m.effect)
                .bind(rec.config_type.as_str())
                .bind(&m.schema)
                .bind(&m.encrypted_data_key)
                .bind(old.id)
                .execute(&mut *tx)
                .await
                .map_err(map_err)?;
                Self::replace_tags(tx, old.id, &rec.key, &old.meta.config_tags, &m.config_tags)
                    .await?;
                // As Nacos does, an update's history row keeps the replaced version.
                let nid = Self::insert_history(
                    tx,
                    old.id,
                    &rec.key,
                    &old.meta.app_name,
                    &old.content,
                    &old.md5,
                    &old.meta.encrypted_data_key,
                    &rec.source,
                    OpType::Update,
                    rec.now_ms,
                )
                .await?;
                (old.id, old.created_ms, nid)
            }
        };
        Ok(StoredConfig {
            id,
            key: rec.key.clone(),
            content: rec.content.clone(),
            md5: rec.md5.clone(),
            config_type: rec.config_type,
            meta: ConfigMeta {
                config_tags: split_tags(&m.config_tags).join(","),
                ..m.clone()
            },
            source: rec.source.clone(),
            created_ms,
            modified_ms: rec.now_ms,
            revision,
        })
    }

    /// One delete inside the writer's open transaction (no commit here).
    async fn remove_in(
        tx: &mut SqliteConnection,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        let Some(old) = Self::current(tx, key).await? else {
            return Ok(RemoveOutcome::Absent);
        };
        sqlx::query("DELETE FROM config_info WHERE id = ?")
            .bind(old.id)
            .execute(&mut *tx)
            .await
            .map_err(map_err)?;
        if !old.meta.config_tags.is_empty() {
            sqlx::query("DELETE FROM config_tags_relation WHERE id = ?")
                .bind(old.id)
                .execute(&mut *tx)
                .await
                .map_err(map_err)?;
        }
        let nid = Self::insert_history(
            tx,
            old.id,
            key,
            &old.meta.app_name,
            &old.content,
            &old.md5,
            &old.meta.encrypted_data_key,
            source,
            OpType::Delete,
            now_ms,
        )
        .await?;
        Ok(RemoveOutcome::Removed { revision: nid })
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
    use nacelle_core::ConfigType;

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
