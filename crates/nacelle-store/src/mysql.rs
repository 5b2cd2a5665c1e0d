//! MySQL/MariaDB backend on Nacos 2.4's own tables, so Nacelle can take over an existing
//! Nacos database and Java Nacos can read what Nacelle writes. The store itself is the
//! shared [`Store`] over a [`ServerBackend`]; this file holds only what MySQL does differently.
//!
//! - Tables are created only when absent (`migrations/mysql/`), in utf8mb4; existing ones are
//!   used as they are and never altered. Our own bookkeeping lives in `nacelle_*` tables.
//! - `gmt_create`/`gmt_modified` are `DATETIME` (whole seconds) holding wall-clock time in the
//!   session's time zone, as Nacos's `NOW()` writes them; we convert with `FROM_UNIXTIME` and
//!   `UNIX_TIMESTAMP` in SQL, so the session time zone decides. It is the server's default
//!   unless the URL sets `timezone=` (e.g. `timezone=%2B08:00`).
//! - Ids are `bigint unsigned` (read through `CAST(… AS SIGNED)`) and come back as
//!   `LAST_INSERT_ID()`; two first publishes of one key meet at the unique key, and the
//!   loser retries and becomes an update.
//! - `UPDATE` counts only the rows it changed, so a namespace update checks existence first.

use std::str::FromStr;

use async_trait::async_trait;
use nacelle_core::StoreError;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlQueryResult};
use sqlx::{MySql, Pool};

use crate::deadline::Deadline;
use crate::dialect::{Arg, Dialect};
use crate::networked::{self, Migration, Server, ServerBackend};
use crate::options::split_url;
use crate::sql::{Exec, GeneratedIds};
use crate::store::Store;
use crate::{map_err, OpenError, StoreOptions};

/// The MySQL/MariaDB store.
pub type MySqlStore = nacelle_core::store::Layered<Deadline<Store<ServerBackend<MySql>>>>;

/// Connects to `url` (`mysql://user:pass@host:port/db?…`), creates Nacos's tables where
/// absent and checks that existing ones have the columns we use.
pub async fn open(url: &str, options: &StoreOptions) -> Result<MySqlStore, OpenError> {
    let (url, options) = split_url(url, options)?;
    let mut connect =
        MySqlConnectOptions::from_str(&url).map_err(|e| OpenError::InvalidUrl(format!("{e}")))?;
    if connect.get_database().is_none_or(str::is_empty) {
        return Err(OpenError::InvalidUrl(
            "a MySQL URL must name its database: mysql://user:pass@host:3306/nacos".into(),
        ));
    }
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    let has = |name: &str| {
        query
            .split('&')
            .any(|p| p.split_once('=').map(|(k, _)| k).unwrap_or(p) == name)
    };
    if !has("timezone") && !has("time-zone") {
        // Keep the server's time zone, which is what Nacos's NOW() writes in.
        connect = connect.timezone(None);
    }
    if !has("charset") && !has("collation") {
        // Compare parameters byte-wise, like Nacos's utf8_bin columns.
        connect = connect.charset("utf8mb4").collation("utf8mb4_bin");
    }
    networked::open(connect, &options).await
}

impl Dialect for MySql {
    const NUMBERED_PLACEHOLDERS: bool = false;
    const TIME_PARAM: &'static str = "FROM_UNIXTIME(?)";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const INSERT_CONFIG_TAIL: &'static str = "";
    const INSERT_HISTORY_TAIL: &'static str = "";
    const UPDATE_COUNTS_MATCHED_ROWS: bool = false;
    const RETURNING_ID: &'static str = "";

    fn ms(col: &str) -> String {
        format!("CAST(COALESCE(UNIX_TIMESTAMP({col}), 0) * 1000 AS SIGNED)")
    }
    fn signed(expr: &str) -> String {
        format!("CAST({expr} AS SIGNED)")
    }
    fn tag_list() -> &'static str {
        "GROUP_CONCAT(r.tag_name ORDER BY r.nid SEPARATOR ',')"
    }
    /// `||` is OR in MySQL's default SQL mode.
    fn concat(a: &str, b: &str) -> String {
        format!("CONCAT({a}, {b})")
    }
    /// Whole seconds, for `FROM_UNIXTIME`.
    fn time_value(ms: i64) -> i64 {
        ms.div_euclid(1000)
    }
    fn stored_ms(ms: i64) -> i64 {
        ms.div_euclid(1000) * 1000
    }
    fn rows_affected(done: &MySqlQueryResult) -> u64 {
        done.rows_affected()
    }
}

#[async_trait]
impl GeneratedIds for MySql {
    async fn insert_id(
        conn: &mut MySqlConnection,
        sql: &str,
        args: &[Arg<'_>],
        _col: &str,
    ) -> Result<Option<i64>, sqlx::Error> {
        match Self::bind(sqlx::query(sql), args).execute(conn).await {
            Ok(done) => i64::try_from(done.last_insert_id())
                .map(Some)
                .map_err(|_| sqlx::Error::Protocol("generated id out of range".into())),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The named lock under which nodes apply the schema, one per database.
const SCHEMA_LOCK: &str = "CONCAT('nacelle_schema:', MD5(DATABASE()))";

#[async_trait]
impl Server for MySql {
    const BACKEND: &'static str = "mysql";
    const MIGRATIONS: &'static [Migration] = &[
        (
            1,
            "Nacos 2.4 tables (created when absent)",
            include_str!("../migrations/mysql/0001_nacos_tables.sql"),
        ),
        (
            2,
            "gray release: config_info_gray (created when absent), nacelle_gray_log",
            include_str!("../migrations/mysql/0002_gray.sql"),
        ),
        (
            3,
            "authentication: nacelle_user_state",
            include_str!("../migrations/mysql/0003_auth.sql"),
        ),
        (
            4,
            "schema validation: nacelle_config_schema",
            include_str!("../migrations/mysql/0004_schemas.sql"),
        ),
        (
            5,
            "audit trail: nacelle_audit, nacelle_audit_head; nacelle_history_note",
            include_str!("../migrations/mysql/0005_audit.sql"),
        ),
        (
            6,
            "change requests: nacelle_change, nacelle_change_item, nacelle_change_event, nacelle_review_policy",
            include_str!("../migrations/mysql/0006_changes.sql"),
        ),
        (
            7,
            "webhooks: nacelle_webhook, nacelle_webhook_delivery",
            include_str!("../migrations/mysql/0007_webhooks.sql"),
        ),
        (
            8,
            "staged rollouts: nacelle_rollout; nacelle_gray_note",
            include_str!("../migrations/mysql/0008_rollouts.sql"),
        ),
    ];
    const SCHEMA_VERSION_DDL: &'static str =
        "CREATE TABLE IF NOT EXISTS `nacelle_schema_version` (\
        `version` int NOT NULL PRIMARY KEY, \
        `description` varchar(200) NOT NULL, \
        `applied_ms` bigint NOT NULL\
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";
    const APPLIED_VERSIONS_SQL: &'static str =
        "SELECT CAST(version AS SIGNED) AS version FROM nacelle_schema_version";
    const SCHEMA_VERSION_SQL: &'static str =
        "SELECT CAST(COALESCE(MAX(version), 0) AS SIGNED) AS n FROM nacelle_schema_version";
    const RECORD_VERSION_SQL: &'static str =
        "INSERT INTO nacelle_schema_version (version, description, applied_ms) VALUES (?, ?, ?)";
    const COLUMNS_SQL: &'static str = "SELECT TABLE_NAME AS t, COLUMN_NAME AS c \
        FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()";

    fn session_sql(options: &StoreOptions) -> String {
        format!(
            "SET SESSION innodb_lock_wait_timeout = {}, SESSION group_concat_max_len = 1048576",
            options.lock_wait_secs()
        )
    }

    /// On a Galera node, also causal reads (`wsrep_sync_wait` bit 1): a node applies the
    /// other nodes' commits a moment after they returned there, so a member reloading a
    /// key right after the writer's notification could read the row as it was before the
    /// change and keep its old value (until its change-log follower read the change, up
    /// to a follow interval later). With causal reads, a read first waits until this node
    /// has applied every commit the cluster made before it.
    async fn start_session(conn: &mut MySqlConnection, session: &str) -> Result<(), sqlx::Error> {
        Self::script(conn, session).await?;
        let wsrep = Self::row(conn, "SHOW VARIABLES LIKE 'wsrep_on'", &[]).await?;
        let galera = match wsrep {
            Some(r) => Self::text(&r, "Value")
                .map_err(|e| sqlx::Error::Protocol(e.to_string()))?
                .eq_ignore_ascii_case("ON"),
            None => false,
        };
        if galera {
            Self::script(
                conn,
                "SET SESSION wsrep_sync_wait = @@GLOBAL.wsrep_sync_wait | 1",
            )
            .await?;
        }
        Ok(())
    }

    async fn lock_schema(conn: &mut MySqlConnection) -> Result<(), StoreError> {
        let locked: Option<i64> = sqlx::query_scalar(&format!(
            "SELECT CAST(GET_LOCK({SCHEMA_LOCK}, 30) AS SIGNED)"
        ))
        .fetch_one(conn)
        .await
        .map_err(map_err)?;
        if locked == Some(1) {
            Ok(())
        } else {
            Err(StoreError::Unavailable(
                "could not take the schema lock (another node is migrating?)".into(),
            ))
        }
    }

    async fn unlock_schema(conn: &mut MySqlConnection) -> Result<(), StoreError> {
        Self::script(conn, &format!("DO RELEASE_LOCK({SCHEMA_LOCK})"))
            .await
            .map_err(map_err)
    }

    /// Warns when `config_info.content` cannot hold 4-byte characters (Nacos's utf8).
    async fn check_encoding(pool: &Pool<MySql>) -> Result<(), StoreError> {
        let mut conn = pool.acquire().await.map_err(map_err)?;
        let row = Self::row(
            &mut conn,
            "SELECT COALESCE(CHARACTER_SET_NAME, '') AS cs FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'config_info' \
             AND COLUMN_NAME = 'content'",
            &[],
        )
        .await
        .map_err(map_err)?;
        let charset = row.map(|r| Self::text(&r, "cs")).transpose()?;
        if let Some(cs) = charset.filter(|cs| !cs.starts_with("utf8mb4")) {
            tracing::warn!(
                "config_info.content uses character set `{cs}`: contents with 4-byte \
                 characters (emoji) will be rejected; converting the tables to utf8mb4 \
                 lifts that"
            );
        }
        Ok(())
    }
}
