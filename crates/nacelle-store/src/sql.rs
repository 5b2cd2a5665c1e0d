//! The sqlx code every backend shares: [`Exec`] (the one place sqlx's generic bounds are
//! written), the config core's reads (configs, grays, history, the change logs), history
//! purges and row decoding, and the small helpers the features' modules use too (a
//! connection, a count, an insert that returns its generated id). SQLite reads through it
//! as MySQL and PostgreSQL do; writes of configs and grays go through the one executor
//! (`write.rs`).

use async_trait::async_trait;
use bytes::Bytes;
use nacelle_core::{
    ChangeRecord, ConfigKey, ConfigMeta, ConfigType, GrayHistoryEntry, HistoryEntry,
    HistoryRetention, OpSource, OpType, Page, PageRequest, PurgeStep, StoreError, StoredConfig,
    StoredGray,
};
use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use crate::dialect::{Arg, Dialect};
use crate::map_err;
use crate::queries::{self, key_args, PurgeSql, Queries};

/// What the shared code does with a database: run a statement with [`Arg`]s, read columns.
/// Implemented once, for every sqlx database that our [`Dialect`] spells.
#[async_trait]
pub trait Exec: Dialect + Sized {
    /// Binds `args` in order.
    fn bind<'q>(
        q: Query<'q, Self, <Self as Database>::Arguments<'q>>,
        args: &[Arg<'q>],
    ) -> Query<'q, Self, <Self as Database>::Arguments<'q>>;
    /// Runs a statement; returns what it reported.
    async fn run(
        conn: &mut Self::Connection,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Self::QueryResult, sqlx::Error>;
    /// Runs a statement and returns its rows.
    async fn rows(
        conn: &mut Self::Connection,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<Self::Row>, sqlx::Error>;
    /// Runs a statement and returns its first row, if any.
    async fn row(
        conn: &mut Self::Connection,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<Self::Row>, sqlx::Error>;
    /// Runs SQL without parameters as a simple query (schema scripts, session settings).
    async fn script(conn: &mut Self::Connection, sql: &str) -> Result<(), sqlx::Error>;
    /// A text column; NULL reads as "". Decoded without sqlx's type check because MySQL
    /// marks columns with a `_bin` collation (all of Nacos's) as binary, although they
    /// hold text.
    fn text(row: &Self::Row, col: &str) -> Result<String, StoreError>;
    /// An integer column (ids, nids, times in ms); NULL reads as 0.
    fn int(row: &Self::Row, col: &str) -> Result<i64, StoreError>;
}

#[async_trait]
impl<DB> Exec for DB
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> Option<i64>: Encode<'q, DB>,
    for<'r> Option<String>: Decode<'r, DB>,
    for<'r> Option<i64>: Decode<'r, DB> + Type<DB>,
    for<'c> &'c str: ColumnIndex<DB::Row>,
{
    fn bind<'q>(
        mut q: Query<'q, DB, <DB as Database>::Arguments<'q>>,
        args: &[Arg<'q>],
    ) -> Query<'q, DB, <DB as Database>::Arguments<'q>> {
        for arg in args {
            q = match *arg {
                Arg::Text(s) => q.bind(s),
                Arg::Int(i) => q.bind(i),
                Arg::OptInt(i) => q.bind(i),
            };
        }
        q
    }

    async fn run(
        conn: &mut DB::Connection,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<DB::QueryResult, sqlx::Error> {
        Self::bind(sqlx::query(sql), args).execute(conn).await
    }

    async fn rows(
        conn: &mut DB::Connection,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<DB::Row>, sqlx::Error> {
        Self::bind(sqlx::query(sql), args).fetch_all(conn).await
    }

    async fn row(
        conn: &mut DB::Connection,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<DB::Row>, sqlx::Error> {
        Self::bind(sqlx::query(sql), args)
            .fetch_optional(conn)
            .await
    }

    async fn script(conn: &mut DB::Connection, sql: &str) -> Result<(), sqlx::Error> {
        conn.execute(sql).await.map(|_| ())
    }

    fn text(row: &DB::Row, col: &str) -> Result<String, StoreError> {
        row.try_get_unchecked::<Option<String>, _>(col)
            .map(Option::unwrap_or_default)
            .map_err(map_err)
    }

    fn int(row: &DB::Row, col: &str) -> Result<i64, StoreError> {
        row.try_get::<Option<i64>, _>(col)
            .map(Option::unwrap_or_default)
            .map_err(map_err)
    }
}

/// A connection of `pool`, as an error a read reports.
pub(crate) async fn conn<DB: Exec>(
    pool: &Pool<DB>,
) -> Result<sqlx::pool::PoolConnection<DB>, StoreError> {
    pool.acquire().await.map_err(map_err)
}

/// Every formal config.
pub(crate) async fn load_all<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
) -> Result<Vec<StoredConfig>, StoreError> {
    let rows = DB::rows(&mut *conn(pool).await?, &q.load_all, &[])
        .await
        .map_err(map_err)?;
    rows.iter().map(config_from_row::<DB>).collect()
}

/// One formal config.
pub(crate) async fn get<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    key: &ConfigKey,
) -> Result<Option<StoredConfig>, StoreError> {
    let row = DB::row(&mut *conn(pool).await?, &q.get, &key_args(key))
        .await
        .map_err(map_err)?;
    row.map(|r| config_from_row::<DB>(&r)).transpose()
}

/// Where a gray row was read from: decides how its `gray_name`/`gray_rule` columns read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GraySource {
    /// `config_info_gray`: the name, and the rule as JSON.
    Gray,
    /// Nacos 2.4's `config_info_beta`: the rule column holds `beta_ips`.
    LegacyBeta,
    /// Nacos 2.4's `config_info_tag`: both columns hold `tag_id`.
    LegacyTag,
}

/// Decodes a gray row of `source`.
fn gray_from_row<DB: Exec>(row: &DB::Row, source: GraySource) -> Result<StoredGray, StoreError> {
    use nacelle_core::gray::{BETA_PRIORITY, TAG_NAME_PREFIX, TAG_PRIORITY, TYPE_BETA, TYPE_TAG};
    let config = config_from_row::<DB>(row)?;
    let name = DB::text(row, "gray_name")?;
    let rule = DB::text(row, "gray_rule")?;
    let (name, rule_type, rule_expr, priority) = match source {
        GraySource::Gray => {
            let (kind, expr, priority) = crate::plan::parse_gray_rule(&rule)?;
            (name, kind, expr, priority)
        }
        GraySource::LegacyBeta => (name, TYPE_BETA.into(), rule, BETA_PRIORITY),
        GraySource::LegacyTag => (
            format!("{TAG_NAME_PREFIX}{name}"),
            TYPE_TAG.into(),
            rule,
            TAG_PRIORITY,
        ),
    };
    Ok(StoredGray {
        name,
        rule_type,
        rule_expr,
        priority,
        config,
    })
}

/// Gray rows from the three statements (gray table, 2.4 beta, 2.4 tag), bound with `args`:
/// of a `config_info_gray` row and a 2.4 row of the same key and name, the one modified
/// later wins (Nacelle and Nacos 2.5 write both; a Nacos 2.4 node only the 2.4 row). A row
/// whose rule cannot be read is skipped with a warning rather than failing every read.
async fn read_grays<DB: Exec>(
    pool: &Pool<DB>,
    sqls: [&str; 3],
    args: &[Arg<'_>],
) -> Result<Vec<StoredGray>, StoreError> {
    let mut c = conn(pool).await?;
    let mut out: Vec<StoredGray> = Vec::new();
    let sources = [
        GraySource::Gray,
        GraySource::LegacyBeta,
        GraySource::LegacyTag,
    ];
    for (sql, source) in sqls.into_iter().zip(sources) {
        let rows = DB::rows(&mut *c, sql, args).await.map_err(map_err)?;
        for row in &rows {
            let gray = match gray_from_row::<DB>(row, source) {
                Ok(g) => g,
                Err(e) => {
                    tracing::warn!("skipping a gray row that cannot be read: {e}");
                    continue;
                }
            };
            let same = out
                .iter_mut()
                .find(|g| g.name == gray.name && g.config.key == gray.config.key);
            match same {
                None => out.push(gray),
                // Nacelle mirrors beta and tag rows into the 2.4 tables; a 2.4 row newer
                // than its mirror image was written by a Nacos 2.4 node since.
                Some(g) if gray.config.modified_ms > g.config.modified_ms => *g = gray,
                Some(_) => {}
            }
        }
    }
    Ok(out)
}

/// Every gray variant (see [`ConfigStore::load_grays`](nacelle_core::ConfigStore)).
pub(crate) async fn load_grays<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
) -> Result<Vec<StoredGray>, StoreError> {
    let sqls = [
        q.load_grays.as_str(),
        &q.load_legacy_betas,
        &q.load_legacy_tags,
    ];
    read_grays(pool, sqls, &[]).await
}

/// The gray variants of one key.
pub(crate) async fn grays_of<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    key: &ConfigKey,
) -> Result<Vec<StoredGray>, StoreError> {
    let sqls = [q.grays_of.as_str(), &q.legacy_betas_of, &q.legacy_tags_of];
    read_grays(pool, sqls, &key_args(key)).await
}

/// The gray change log after `after_nid`.
pub(crate) async fn gray_changes_since<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    after_nid: i64,
    limit: u32,
) -> Result<Vec<ChangeRecord>, StoreError> {
    change_log(pool, &q.gray_changes_since, after_nid, limit).await
}

/// The largest `nid` of the gray change log, 0 when there is none.
pub(crate) async fn max_gray_nid<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
) -> Result<i64, StoreError> {
    count(pool, &q.max_gray_nid, &[]).await
}

/// History of one key, newest first.
pub(crate) async fn history_page<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    key: &ConfigKey,
    page: PageRequest,
) -> Result<Page<HistoryEntry>, StoreError> {
    let sqls = (q.history_count.as_str(), q.history_page.as_str());
    read_page(pool, sqls, &key_args(key), page, history_from_row::<DB>).await
}

/// The gray change log of one key, newest first.
pub(crate) async fn gray_history<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    key: &ConfigKey,
    page: PageRequest,
) -> Result<Page<GrayHistoryEntry>, StoreError> {
    let sqls = (q.gray_history_count.as_str(), q.gray_history_page.as_str());
    read_page(pool, sqls, &key_args(key), page, |row| {
        let (rule_type, rule_expr, priority) =
            crate::plan::parse_gray_rule(&DB::text(row, "gray_rule")?)?;
        Ok(GrayHistoryEntry {
            entry: history_from_row::<DB>(row)?,
            gray_name: DB::text(row, "gray_name")?,
            rule_type,
            rule_expr,
            priority,
        })
    })
    .await
}

/// A page of rows, on one connection: `sqls.0` counts them (column `n`), `sqls.1` reads
/// the page; both bind `args`, the page read then the page's size and offset. `decode`
/// turns a row into an item. Every paged listing of the store reads through it (history,
/// the gray change log, change requests, audit entries, webhook deliveries).
pub(crate) async fn read_page<DB: Exec, T>(
    pool: &Pool<DB>,
    sqls: (&str, &str),
    args: &[Arg<'_>],
    page: PageRequest,
    decode: impl Fn(&DB::Row) -> Result<T, StoreError>,
) -> Result<Page<T>, StoreError> {
    let mut c = conn(pool).await?;
    let total = count_on::<DB>(&mut c, sqls.0, args).await?;
    let mut paged = args.to_vec();
    paged.extend([
        Arg::Int(i64::try_from(page.page_size).unwrap_or(i64::MAX)),
        Arg::Int(i64::try_from(page.offset()).unwrap_or(i64::MAX)),
    ]);
    let rows = DB::rows(&mut *c, sqls.1, &paged).await.map_err(map_err)?;
    let items = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
    Ok(Page::new(
        u64::try_from(total).unwrap_or(0),
        page.page_no,
        page.page_size,
        items,
    ))
}

/// One history row by the statement `sql` with one integer argument.
async fn history_by<DB: Exec>(
    pool: &Pool<DB>,
    sql: &str,
    arg: i64,
) -> Result<Option<HistoryEntry>, StoreError> {
    let row = DB::row(&mut *conn(pool).await?, sql, &[Arg::Int(arg)])
        .await
        .map_err(map_err)?;
    row.map(|r| history_from_row::<DB>(&r)).transpose()
}

/// One history entry by `nid`.
pub(crate) async fn history_entry<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    nid: i64,
) -> Result<Option<HistoryEntry>, StoreError> {
    history_by(pool, &q.history_entry, nid).await
}

/// The newest history entry of config row `config_id`.
pub(crate) async fn history_previous<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    config_id: i64,
) -> Result<Option<HistoryEntry>, StoreError> {
    history_by(pool, &q.history_previous, config_id).await
}

/// The change log after `after_nid`.
pub(crate) async fn changes_since<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    after_nid: i64,
    limit: u32,
) -> Result<Vec<ChangeRecord>, StoreError> {
    change_log(pool, &q.changes_since, after_nid, limit).await
}

/// The rows of a change log statement (`sql`: after a `nid`, at most `limit`).
async fn change_log<DB: Exec>(
    pool: &Pool<DB>,
    sql: &str,
    after_nid: i64,
    limit: u32,
) -> Result<Vec<ChangeRecord>, StoreError> {
    let args = [Arg::Int(after_nid), Arg::Int(i64::from(limit))];
    let rows = DB::rows(&mut *conn(pool).await?, sql, &args)
        .await
        .map_err(map_err)?;
    rows.iter().map(change_from_row::<DB>).collect()
}

/// The largest `nid`, 0 when there is none.
pub(crate) async fn max_history_nid<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
) -> Result<i64, StoreError> {
    count(pool, &q.max_nid, &[]).await
}

/// The integer column `n` of the first row of `sql`, 0 without a row.
pub(crate) async fn count<DB: Exec>(
    pool: &Pool<DB>,
    sql: &str,
    args: &[Arg<'_>],
) -> Result<i64, StoreError> {
    count_on::<DB>(&mut *conn(pool).await?, sql, args).await
}

/// [`count`] on a connection already held.
async fn count_on<DB: Exec>(
    conn: &mut DB::Connection,
    sql: &str,
    args: &[Arg<'_>],
) -> Result<i64, StoreError> {
    match DB::row(conn, sql, args).await.map_err(map_err)? {
        Some(r) => DB::int(&r, "n"),
        None => Ok(0),
    }
}

/// Most rows one purge batch deletes, whatever the caller asks.
pub(crate) const MAX_PURGE_BATCH: u32 = 10_000;
/// One batch reads the rows of at most this many times `batch` consecutive `nid`s.
const PURGE_WINDOW: i64 = 8;

/// The rows one purge batch deletes, and where the batch's read ended.
#[derive(Debug)]
pub(crate) struct PurgeCandidates {
    /// The condemned `nid`s, oldest first.
    pub nids: Vec<i64>,
    /// Where the next batch starts; `None` when the log is done.
    pub resume_after: Option<i64>,
}

/// The `nid`s the purge batch after `after_nid` removes: at most `batch` (capped at
/// [`MAX_PURGE_BATCH`]), oldest first, read from a window of at most [`PURGE_WINDOW`] ×
/// `batch` `nid`s; none when `rule` keeps everything.
pub(crate) async fn purge_candidates<DB: Exec>(
    pool: &Pool<DB>,
    q: &PurgeSql,
    rule: &HistoryRetention,
    after_nid: i64,
    batch: u32,
) -> Result<PurgeCandidates, StoreError> {
    let cutoff = rule.older_than_ms.map(|ms| Arg::Int(DB::time_value(ms)));
    let skip = rule.keep_per_key.map(|n| Arg::Int(i64::from(n.max(1)) - 1));
    let (sql, rule_args) = match (cutoff, skip) {
        (None, None) => {
            return Ok(PurgeCandidates {
                nids: Vec::new(),
                resume_after: None,
            })
        }
        (Some(c), None) => (&q.by_age, vec![c]),
        (None, Some(s)) => (&q.by_count, vec![s]),
        (Some(c), Some(s)) => (&q.by_age_or_count, vec![c, s]),
    };
    let batch = i64::from(batch.clamp(1, MAX_PURGE_BATCH));
    let until = after_nid.saturating_add(batch * PURGE_WINDOW);
    let mut args = vec![Arg::Int(after_nid), Arg::Int(until)];
    args.extend(rule_args);
    args.push(Arg::Int(batch));
    let mut c = conn(pool).await?;
    let rows = DB::rows(&mut *c, sql, &args).await.map_err(map_err)?;
    let nids = rows
        .iter()
        .map(|r| DB::int(r, "nid"))
        .collect::<Result<Vec<_>, _>>()?;
    let resume_after = match nids.last() {
        // A full batch: go on after its last row, inside the same window.
        Some(&last) if nids.len() as i64 >= batch => Some(last),
        // The window is done: the next one, unless the log ends in it.
        _ => {
            let newest = match DB::row(&mut *c, &q.newest, &[]).await.map_err(map_err)? {
                Some(r) => DB::int(&r, "n")?,
                None => 0,
            };
            (until < newest).then_some(until)
        }
    };
    Ok(PurgeCandidates { nids, resume_after })
}

/// One purge batch: the candidates read from `pool`, then `delete` runs their one
/// `DELETE` by primary key (its own transaction) and answers the rows it deleted. A database
/// server runs it on the pool ([`delete_history`]); SQLite hands it to its writer thread.
pub(crate) async fn purge_batch<DB, F, Fut>(
    pool: &Pool<DB>,
    q: &PurgeSql,
    rule: &HistoryRetention,
    (after_nid, batch): (i64, u32),
    delete: F,
) -> Result<PurgeStep, StoreError>
where
    DB: Exec,
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<u64, StoreError>>,
{
    let found = purge_candidates(pool, q, rule, after_nid, batch).await?;
    let deleted = if found.nids.is_empty() {
        0
    } else {
        delete(queries::delete_logged(q, &found.nids)).await?
    };
    Ok(PurgeStep {
        deleted,
        resume_after: found.resume_after,
    })
}

/// Runs a purge `DELETE` on a connection of `pool`: the rows deleted.
pub(crate) async fn delete_history<DB: Exec>(
    pool: &Pool<DB>,
    sql: String,
) -> Result<u64, StoreError> {
    let done = DB::run(&mut *conn(pool).await?, &sql, &[])
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done))
}

/// Runs `body` in one transaction on a connection of `pool`: committed when `body`
/// succeeds, rolled back when it fails (the transaction is dropped unfinished).
pub(crate) async fn in_transaction<DB: Exec, T>(
    pool: &Pool<DB>,
    body: impl AsyncFnOnce(&mut DB::Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut tx = pool.begin().await.map_err(map_err)?;
    let out = body(&mut tx).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(out)
}

/// What MySQL, which has no `RETURNING`, answers for the id of this connection's last
/// insert, as column `id`.
const LAST_INSERT_ID: &str = "SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id";

/// Runs an insert into a table of Nacelle's that ends in [`Dialect::RETURNING_ID`] and
/// answers the new row's id: from the row the insert returned or, where the dialect returns
/// none (MySQL), the id of this connection's last insert. `what` names the row for the
/// error when neither gives an id.
pub(crate) async fn insert_returning_id<DB: Exec>(
    conn: &mut DB::Connection,
    sql: &str,
    args: &[Arg<'_>],
    what: &str,
) -> Result<i64, StoreError> {
    let row = match DB::row(conn, sql, args).await.map_err(map_err)? {
        Some(row) => row,
        None => DB::row(conn, LAST_INSERT_ID, &[])
            .await
            .map_err(map_err)?
            .ok_or_else(|| StoreError::Unavailable(format!("no id for the new {what}")))?,
    };
    DB::int(&row, "id")
}

/// Checks that the database answers.
pub(crate) async fn ping<DB: Exec>(pool: &Pool<DB>) -> Result<(), StoreError> {
    DB::script(&mut *conn(pool).await?, "SELECT 1")
        .await
        .map_err(map_err)
}

/// A database that generates ids as the write executor needs them.
#[async_trait]
pub trait GeneratedIds: Exec {
    /// Runs an insert ending in the dialect's tail and returns the generated id (column
    /// `col` where the dialect returns it); `None` when the unique key was taken.
    async fn insert_id(
        conn: &mut Self::Connection,
        sql: &str,
        args: &[Arg<'_>],
        col: &str,
    ) -> Result<Option<i64>, sqlx::Error>;
}

// ------------------------------------------------------------------ row decoding
// Every backend selects the same column names, times already in ms.

/// The key columns `tenant_id`, `group_id`, `data_id`.
fn key_from_row<DB: Exec>(row: &DB::Row) -> Result<ConfigKey, StoreError> {
    Ok(ConfigKey::from_trusted(
        &DB::text(row, "tenant_id")?,
        &DB::text(row, "group_id")?,
        &DB::text(row, "data_id")?,
    ))
}

/// The `src_user` and `src_ip` columns.
fn source_from_row<DB: Exec>(row: &DB::Row) -> Result<OpSource, StoreError> {
    Ok(OpSource {
        src_user: DB::text(row, "src_user")?,
        src_ip: DB::text(row, "src_ip")?,
        ..OpSource::default()
    })
}

/// Decodes a config row. Every backend selects the columns of `config_info` under their own
/// names, with `gmt_create`/`gmt_modified` as ms, plus `config_tags` and `revision`.
pub(crate) fn config_from_row<DB: Exec>(row: &DB::Row) -> Result<StoredConfig, StoreError> {
    let key = key_from_row::<DB>(row)?;
    let content = DB::text(row, "content")?;
    let md5 = DB::text(row, "md5")?;
    let md5 = if md5.is_empty() {
        nacelle_core::md5_hex(content.as_bytes())
    } else {
        md5
    };
    Ok(StoredConfig {
        id: DB::int(row, "id")?,
        key,
        content: Bytes::from(content),
        md5,
        config_type: ConfigType::parse_lenient(&DB::text(row, "type")?),
        meta: ConfigMeta {
            app_name: DB::text(row, "app_name")?,
            desc: DB::text(row, "c_desc")?,
            r#use: DB::text(row, "c_use")?,
            effect: DB::text(row, "effect")?,
            schema: DB::text(row, "c_schema")?,
            config_tags: DB::text(row, "config_tags")?,
            encrypted_data_key: DB::text(row, "encrypted_data_key")?,
        },
        source: source_from_row::<DB>(row)?,
        created_ms: DB::int(row, "gmt_create")?,
        modified_ms: DB::int(row, "gmt_modified")?,
        revision: DB::int(row, "revision")?,
    })
}

/// Decodes a `his_config_info` row (times as ms).
pub(crate) fn history_from_row<DB: Exec>(row: &DB::Row) -> Result<HistoryEntry, StoreError> {
    let key = key_from_row::<DB>(row)?;
    Ok(HistoryEntry {
        nid: DB::int(row, "nid")?,
        config_id: DB::int(row, "id")?,
        key,
        app_name: DB::text(row, "app_name")?,
        content: DB::text(row, "content")?,
        md5: DB::text(row, "md5")?,
        source: OpSource {
            message: DB::text(row, "note_message")?,
            // Change requests are numbered from 1: NULL (read as 0) is none.
            change_id: Some(DB::int(row, "note_change_id")?).filter(|&c| c != 0),
            ..source_from_row::<DB>(row)?
        },
        op_type: OpType::parse(&DB::text(row, "op_type")?).unwrap_or(OpType::Update),
        created_ms: DB::int(row, "gmt_create")?,
        modified_ms: DB::int(row, "gmt_modified")?,
        encrypted_data_key: DB::text(row, "encrypted_data_key")?,
    })
}

/// Decodes a change-log row: `nid`, key columns, `op_type`, `gmt_modified` (ms).
pub(crate) fn change_from_row<DB: Exec>(row: &DB::Row) -> Result<ChangeRecord, StoreError> {
    let key = key_from_row::<DB>(row)?;
    Ok(ChangeRecord {
        nid: DB::int(row, "nid")?,
        key,
        op_type: OpType::parse(&DB::text(row, "op_type")?).unwrap_or(OpType::Update),
        modified_ms: DB::int(row, "gmt_modified")?,
    })
}
