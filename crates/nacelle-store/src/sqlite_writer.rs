//! The SQLite writer: one OS thread owning one connection, committing groups of writes.
//!
//! Every publish and delete is queued here. The thread takes every write waiting in the
//! queue (up to [`MAX_GROUP`]), runs them in one `BEGIN IMMEDIATE … COMMIT` transaction —
//! one fsync for the whole group — and answers each caller only after that commit, so an
//! acknowledged write is as durable as with one transaction per write. The statements run
//! on this thread with cached prepared statements, with no hand-off between threads per
//! statement (the cost that dominated the publish profile when writes went through sqlx).
//!
//! A compare-and-set failure is decided before anything is written, so the group goes on;
//! any other error may leave a write half done, so the whole group is rolled back and every
//! write of it fails (none of them happened).

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    ConfigKey, ConfigMeta, OpSource, OpType, PublishRecord, StoreError, StoredConfig,
};
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::{mpsc, oneshot};

use crate::common::split_tags;

/// Most writes committed in one transaction.
pub(crate) const MAX_GROUP: usize = 512;
/// Writes that may wait in the queue before callers wait for room.
pub(crate) const QUEUE: usize = 8192;

/// A write for the writer thread, with where to send its result.
#[derive(Debug)]
pub(crate) enum WriteOp {
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

/// The error of a write whose writer thread is gone.
pub(crate) fn writer_gone() -> StoreError {
    StoreError::Unavailable("the sqlite writer stopped".into())
}

fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(format!("sqlite: {e}"))
}

/// Opens the writer's connection and starts its thread. The queue closes (and the thread
/// ends) when every sender is dropped.
pub(crate) fn start(path: &Path) -> Result<mpsc::Sender<WriteOp>, StoreError> {
    let conn = Connection::open(path).map_err(db_err)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(db_err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(db_err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(db_err)?;
    conn.set_prepared_statement_cache_capacity(32);
    let (tx, rx) = mpsc::channel(QUEUE);
    std::thread::Builder::new()
        .name("nacelle-sqlite-writer".into())
        .spawn(move || run(conn, rx))
        .map_err(|e| StoreError::Unavailable(format!("starting the sqlite writer: {e}")))?;
    Ok(tx)
}

fn run(mut conn: Connection, mut queue: mpsc::Receiver<WriteOp>) {
    while let Some(first) = queue.blocking_recv() {
        let mut batch = Vec::with_capacity(64);
        batch.push(first);
        while batch.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        run_group(&mut conn, batch);
    }
}

/// A write that ran (or will not run), waiting for the commit before its answer goes out.
enum Done {
    Publish(
        Box<Result<StoredConfig, StoreError>>,
        oneshot::Sender<Result<StoredConfig, StoreError>>,
    ),
    Remove(
        Result<RemoveOutcome, StoreError>,
        oneshot::Sender<Result<RemoveOutcome, StoreError>>,
    ),
    /// Never ran because an earlier write of its group failed.
    Skipped(WriteOp),
}

fn run_group(conn: &mut Connection, batch: Vec<WriteOp>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let msg = db_err(e).to_string();
        fail_all(batch.into_iter().map(Done::Skipped).collect(), &msg);
        return;
    }
    let mut done = Vec::with_capacity(batch.len());
    let mut abort: Option<String> = None;
    for op in batch {
        if abort.is_some() {
            done.push(Done::Skipped(op));
            continue;
        }
        match op {
            WriteOp::Publish(rec, reply) => {
                let r = publish(conn, &rec);
                if let Err(e) = &r {
                    if !matches!(e, StoreError::CasMismatch) {
                        abort = Some(e.to_string());
                    }
                }
                done.push(Done::Publish(Box::new(r), reply));
            }
            WriteOp::Remove(key, source, now_ms, reply) => {
                let r = remove(conn, &key, &source, now_ms);
                if let Err(e) = &r {
                    abort = Some(e.to_string());
                }
                done.push(Done::Remove(r, reply));
            }
        }
    }
    if let Some(msg) = abort {
        let _ = conn.execute_batch("ROLLBACK");
        fail_all(
            done,
            &format!("another write of the same group failed: {msg}"),
        );
        return;
    }
    if let Err(e) = conn.execute_batch("COMMIT") {
        let _ = conn.execute_batch("ROLLBACK");
        fail_all(done, &format!("commit failed: {}", db_err(e)));
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
            Done::Skipped(op) => fail_op(op, "skipped"),
        }
    }
}

fn fail_op(op: WriteOp, msg: &str) {
    let err = || StoreError::Unavailable(format!("sqlite write group rolled back: {msg}"));
    match op {
        WriteOp::Publish(_, reply) => {
            let _ = reply.send(Err(err()));
        }
        WriteOp::Remove(_, _, _, reply) => {
            let _ = reply.send(Err(err()));
        }
    }
}

/// Answers every write of a group that did not commit. A write that failed on its own
/// keeps its own error (a compare-and-set failure stays one).
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
            Done::Skipped(op) => fail_op(op, msg),
        }
    }
}

/// What a write needs to know of the version it replaces.
struct Current {
    id: i64,
    content: String,
    md5: String,
    app_name: String,
    encrypted_data_key: String,
    config_tags: String,
    created_ms: i64,
}

fn current(conn: &Connection, key: &ConfigKey) -> Result<Option<Current>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT c.id, c.content, COALESCE(c.md5, ''), COALESCE(c.app_name, ''), \
             COALESCE(c.encrypted_data_key, ''), c.gmt_create, \
             COALESCE((SELECT group_concat(r.tag_name, ',' ORDER BY r.nid) \
               FROM config_tags_relation r WHERE r.id = c.id), '') \
             FROM config_info c WHERE c.data_id = ?1 AND c.group_id = ?2 AND c.tenant_id = ?3",
        )
        .map_err(db_err)?;
    stmt.query_row(params![key.data_id(), key.group(), key.tenant()], |r| {
        let content: String = r.get(1)?;
        let md5: String = r.get(2)?;
        Ok(Current {
            id: r.get(0)?,
            md5: if md5.is_empty() {
                nacelle_core::md5_hex(content.as_bytes())
            } else {
                md5
            },
            content,
            app_name: r.get(3)?,
            encrypted_data_key: r.get(4)?,
            created_ms: r.get(5)?,
            config_tags: r.get(6)?,
        })
    })
    .optional()
    .map_err(db_err)
}

fn insert_tags(conn: &Connection, id: i64, key: &ConfigKey, tags: &str) -> Result<(), StoreError> {
    if split_tags(tags).is_empty() {
        return Ok(());
    }
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO config_tags_relation (id, tag_name, tag_type, data_id, group_id, tenant_id) \
             VALUES (?1, ?2, NULL, ?3, ?4, ?5)",
        )
        .map_err(db_err)?;
    for tag in split_tags(tags) {
        stmt.execute(params![id, tag, key.data_id(), key.group(), key.tenant()])
            .map_err(db_err)?;
    }
    Ok(())
}

fn delete_tags(conn: &Connection, id: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM config_tags_relation WHERE id = ?1")
        .and_then(|mut s| s.execute(params![id]))
        .map_err(db_err)?;
    Ok(())
}

struct HistoryRow<'a> {
    config_id: i64,
    key: &'a ConfigKey,
    app_name: &'a str,
    content: &'a str,
    md5: &'a str,
    encrypted_data_key: &'a str,
    source: &'a OpSource,
    op: OpType,
    now_ms: i64,
}

fn insert_history(conn: &Connection, h: HistoryRow<'_>) -> Result<i64, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, md5, \
             gmt_create, gmt_modified, src_user, src_ip, op_type, encrypted_data_key) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11, ?12) RETURNING nid",
        )
        .map_err(db_err)?;
    stmt.query_row(
        params![
            h.config_id,
            h.key.data_id(),
            h.key.group(),
            h.key.tenant(),
            h.app_name,
            h.content,
            h.md5,
            h.now_ms,
            h.source.src_user,
            h.source.src_ip,
            h.op.as_str(),
            h.encrypted_data_key,
        ],
        |r| r.get(0),
    )
    .map_err(db_err)
}

fn publish(conn: &Connection, rec: &PublishRecord) -> Result<StoredConfig, StoreError> {
    let old = current(conn, &rec.key)?;
    if let Some(expected) = &rec.cas_md5 {
        let actual = old.as_ref().map(|o| o.md5.as_str()).unwrap_or("");
        if actual != expected {
            return Err(StoreError::CasMismatch);
        }
    }
    let content = String::from_utf8_lossy(&rec.content);
    let m = &rec.meta;
    let (id, created_ms, revision) = match &old {
        None => {
            let id: i64 = conn
                .prepare_cached(
                    "INSERT INTO config_info (data_id, group_id, tenant_id, content, md5, gmt_create, \
                     gmt_modified, src_user, src_ip, app_name, c_desc, c_use, effect, type, \
                     c_schema, encrypted_data_key) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) \
                     RETURNING id",
                )
                .and_then(|mut s| {
                    s.query_row(
                        params![
                            rec.key.data_id(),
                            rec.key.group(),
                            rec.key.tenant(),
                            content.as_ref(),
                            rec.md5,
                            rec.now_ms,
                            rec.source.src_user,
                            rec.source.src_ip,
                            m.app_name,
                            m.desc,
                            m.r#use,
                            m.effect,
                            rec.config_type.as_str(),
                            m.schema,
                            m.encrypted_data_key,
                        ],
                        |r| r.get(0),
                    )
                })
                .map_err(db_err)?;
            insert_tags(conn, id, &rec.key, &m.config_tags)?;
            // Nacos records inserts with config id 0 in history.
            let nid = insert_history(
                conn,
                HistoryRow {
                    config_id: 0,
                    key: &rec.key,
                    app_name: &m.app_name,
                    content: &content,
                    md5: &rec.md5,
                    encrypted_data_key: &m.encrypted_data_key,
                    source: &rec.source,
                    op: OpType::Insert,
                    now_ms: rec.now_ms,
                },
            )?;
            (id, rec.now_ms, nid)
        }
        Some(old) => {
            conn.prepare_cached(
                "UPDATE config_info SET content = ?1, md5 = ?2, gmt_modified = ?3, src_user = ?4, \
                 src_ip = ?5, app_name = ?6, c_desc = ?7, c_use = ?8, effect = ?9, type = ?10, \
                 c_schema = ?11, encrypted_data_key = ?12 WHERE id = ?13",
            )
            .and_then(|mut s| {
                s.execute(params![
                    content.as_ref(),
                    rec.md5,
                    rec.now_ms,
                    rec.source.src_user,
                    rec.source.src_ip,
                    m.app_name,
                    m.desc,
                    m.r#use,
                    m.effect,
                    rec.config_type.as_str(),
                    m.schema,
                    m.encrypted_data_key,
                    old.id,
                ])
            })
            .map_err(db_err)?;
            if split_tags(&old.config_tags) != split_tags(&m.config_tags) {
                if !old.config_tags.is_empty() {
                    delete_tags(conn, old.id)?;
                }
                insert_tags(conn, old.id, &rec.key, &m.config_tags)?;
            }
            // As Nacos does, an update's history row keeps the replaced version.
            let nid = insert_history(
                conn,
                HistoryRow {
                    config_id: old.id,
                    key: &rec.key,
                    app_name: &old.app_name,
                    content: &old.content,
                    md5: &old.md5,
                    encrypted_data_key: &old.encrypted_data_key,
                    source: &rec.source,
                    op: OpType::Update,
                    now_ms: rec.now_ms,
                },
            )?;
            (old.id, old.created_ms, nid)
        }
    };
    Ok(StoredConfig {
        id,
        key: rec.key.clone(),
        content: Bytes::clone(&rec.content),
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

fn remove(
    conn: &Connection,
    key: &ConfigKey,
    source: &OpSource,
    now_ms: i64,
) -> Result<RemoveOutcome, StoreError> {
    let Some(old) = current(conn, key)? else {
        return Ok(RemoveOutcome::Absent);
    };
    conn.prepare_cached("DELETE FROM config_info WHERE id = ?1")
        .and_then(|mut s| s.execute(params![old.id]))
        .map_err(db_err)?;
    if !old.config_tags.is_empty() {
        delete_tags(conn, old.id)?;
    }
    let nid = insert_history(
        conn,
        HistoryRow {
            config_id: old.id,
            key,
            app_name: &old.app_name,
            content: &old.content,
            md5: &old.md5,
            encrypted_data_key: &old.encrypted_data_key,
            source,
            op: OpType::Delete,
            now_ms,
        },
    )?;
    Ok(RemoveOutcome::Removed { revision: nid })
}
