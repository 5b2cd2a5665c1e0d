//! MySQL/MariaDB backend on Nacos 2.4's own tables, so Nacelle can take over an existing
//! Nacos database and Java Nacos can read what Nacelle writes.
//!
//! - Tables are created only when absent (`migrations/mysql/`), in utf8mb4; existing ones are
//!   used as they are and never altered. Our own bookkeeping lives in `nacelle_*` tables.
//! - `gmt_create`/`gmt_modified` are `DATETIME` (whole seconds) holding wall-clock time in the
//!   session's time zone, as Nacos's `NOW()` writes them; we convert with `FROM_UNIXTIME` and
//!   `UNIX_TIMESTAMP` in SQL, so the session time zone decides. It is the server's default
//!   unless the URL sets `timezone=` (e.g. `timezone=%2B08:00`).
//! - Writes lock the config row (`SELECT … FOR UPDATE`), so compare-and-set is atomic across
//!   nodes; two first publishes of one key meet at the unique key, and the loser retries and
//!   becomes an update.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    ChangeRecord, ConfigKey, ConfigMeta, ConfigStore, HistoryEntry, Namespace, OpSource, OpType,
    Page, PageRequest, PublishRecord, StoreError, StoredConfig,
};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, MySql, Transaction};

use crate::common::{
    self, change_from_row, config_from_row, history_from_row, int, split_tags, text, timed,
    with_retries, TxError,
};
use crate::options::split_url;
use crate::{map_err, OpenError, StoreOptions};

/// Schema scripts, applied in order; `nacelle_schema_version` records the applied ones.
const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "Nacos 2.4 tables (created when absent)",
    include_str!("../migrations/mysql/0001_nacos_tables.sql"),
)];

const SCHEMA_VERSION_DDL: &str = "CREATE TABLE IF NOT EXISTS `nacelle_schema_version` (\
    `version` int NOT NULL PRIMARY KEY, \
    `description` varchar(200) NOT NULL, \
    `applied_ms` bigint NOT NULL\
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";

/// A `DATETIME` column as ms since the epoch, read in the session time zone.
macro_rules! ms {
    ($col:literal, $alias:literal) => {
        concat!(
            "CAST(COALESCE(UNIX_TIMESTAMP(",
            $col,
            "), 0) * 1000 AS SIGNED) AS ",
            $alias
        )
    };
}

const CONFIG_COLUMNS: &str = concat!(
    "CAST(c.id AS SIGNED) AS id, c.data_id, c.group_id, c.tenant_id, c.content, c.md5, c.type, \
     c.app_name, c.c_desc, c.c_use, c.effect, c.c_schema, c.encrypted_data_key, c.src_user, \
     c.src_ip, ",
    ms!("c.gmt_create", "gmt_create"),
    ", ",
    ms!("c.gmt_modified", "gmt_modified"),
    ", (SELECT GROUP_CONCAT(r.tag_name ORDER BY r.nid SEPARATOR ',') FROM config_tags_relation r \
       WHERE r.id = c.id) AS config_tags, \
     CAST(COALESCE((SELECT MAX(h.nid) FROM his_config_info h WHERE h.data_id = c.data_id \
       AND h.group_id = c.group_id AND h.tenant_id = c.tenant_id), 0) AS SIGNED) AS revision"
);

const HISTORY_COLUMNS: &str = concat!(
    "CAST(id AS SIGNED) AS id, CAST(nid AS SIGNED) AS nid, data_id, group_id, tenant_id, \
     app_name, content, md5, src_user, src_ip, op_type, encrypted_data_key, ",
    ms!("gmt_create", "gmt_create"),
    ", ",
    ms!("gmt_modified", "gmt_modified")
);

/// The MySQL/MariaDB store.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    /// Bound on every operation but `load_all` (see [`StoreOptions::op_timeout`]).
    op_timeout: Duration,
}

/// What a write needs of the row it replaces, read under its row lock.
struct Current {
    id: i64,
    content: String,
    /// The stored md5 (computed from the content when the column is empty), what clients
    /// see and what compare-and-set compares with.
    md5: String,
    app_name: String,
    encrypted_data_key: String,
    created_ms: i64,
}

/// The fields of one history row.
struct HistoryRow<'a> {
    config_id: i64,
    key: &'a ConfigKey,
    app_name: &'a str,
    content: &'a str,
    encrypted_data_key: &'a str,
    source: &'a OpSource,
    op: OpType,
    now_s: i64,
}

impl MySqlStore {
    /// Connects to `url` (`mysql://user:pass@host:port/db?…`), creates Nacos's tables where
    /// absent and checks that existing ones have the columns we use.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self, OpenError> {
        let (url, options) = split_url(url, options)?;
        let mut connect = MySqlConnectOptions::from_str(&url)
            .map_err(|e| OpenError::InvalidUrl(format!("{e}")))?;
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
        let session = format!(
            "SET SESSION innodb_lock_wait_timeout = {}, SESSION group_concat_max_len = 1048576",
            options.lock_wait_secs()
        );
        let pool = MySqlPoolOptions::new()
            .max_connections(options.max_connections)
            .min_connections(0)
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(true)
            .after_connect(move |conn, _meta| {
                let session = session.clone();
                Box::pin(async move {
                    conn.execute(session.as_str()).await?;
                    Ok(())
                })
            })
            .connect_with(connect)
            .await
            .map_err(|e| OpenError::Store(map_err(e)))?;
        let store = MySqlStore {
            pool,
            op_timeout: options.op_timeout,
        };
        timed(options.op_timeout * 6, store.migrate())
            .await
            .map_err(OpenError::Store)?;
        store.check_schema().await?;
        Ok(store)
    }

    /// Applies the schema scripts not yet recorded, under a named lock so that nodes
    /// starting together take turns.
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        let locked: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(GET_LOCK(CONCAT('nacelle_schema:', MD5(DATABASE())), 30) AS SIGNED)",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(map_err)?;
        if locked != Some(1) {
            return Err(StoreError::Unavailable(
                "could not take the schema lock (another node is migrating?)".into(),
            ));
        }
        let result = Self::migrate_locked(&mut conn).await;
        let released = sqlx::query("DO RELEASE_LOCK(CONCAT('nacelle_schema:', MD5(DATABASE())))")
            .execute(&mut *conn)
            .await
            .map_err(map_err);
        result.and(released.map(|_| ()))
    }

    async fn migrate_locked(conn: &mut MySqlConnection) -> Result<(), StoreError> {
        conn.execute(SCHEMA_VERSION_DDL).await.map_err(map_err)?;
        let current: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(MAX(version), 0) AS SIGNED) FROM nacelle_schema_version",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(map_err)?;
        let latest = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        if current > latest {
            tracing::warn!(
                "database schema version {current} is newer than this build knows ({latest})"
            );
        }
        for (version, description, script) in MIGRATIONS {
            if *version <= current {
                continue;
            }
            for statement in common::statements(script) {
                conn.execute(statement.as_str()).await.map_err(|e| {
                    StoreError::Unavailable(format!("schema script {version} failed: {e}"))
                })?;
            }
            sqlx::query(
                "INSERT INTO nacelle_schema_version (version, description, applied_ms) \
                 VALUES (?, ?, ?)",
            )
            .bind(version)
            .bind(description)
            .bind(nacelle_core::now_millis())
            .execute(&mut *conn)
            .await
            .map_err(map_err)?;
            tracing::info!("mysql schema: applied {version} ({description})");
        }
        Ok(())
    }

    /// Checks that Nacos's tables have every column we read and write (Nacos before 2.1
    /// lacks `encrypted_data_key`), and warns when content cannot hold 4-byte characters.
    async fn check_schema(&self) -> Result<(), OpenError> {
        let rows = sqlx::query(
            "SELECT TABLE_NAME AS t, COLUMN_NAME AS c, COALESCE(CHARACTER_SET_NAME, '') AS cs \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| OpenError::Store(map_err(e)))?;
        let mut present = Vec::with_capacity(rows.len());
        for r in &rows {
            let (t, c, cs) = (text(r, "t")?, text(r, "c")?, text(r, "cs")?);
            if t == "config_info" && c == "content" && !cs.starts_with("utf8mb4") {
                tracing::warn!(
                    "config_info.content uses character set `{cs}`: contents with 4-byte \
                     characters (emoji) will be rejected; converting the tables to utf8mb4 \
                     lifts that"
                );
            }
            present.push((t, c));
        }
        let missing = common::missing_columns(&present);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(OpenError::Schema(format!(
                "the database lacks column(s) {} (a Nacos database older than 2.1?); add them \
                 with Nacos's upgrade script: Nacelle never alters Nacos's tables",
                missing.join(", ")
            )))
        }
    }

    /// Reads the current row of `key` and locks it until the transaction ends.
    async fn lock_current(
        tx: &mut Transaction<'_, MySql>,
        key: &ConfigKey,
    ) -> Result<Option<Current>, TxError> {
        let row = sqlx::query(concat!(
            "SELECT CAST(id AS SIGNED) AS id, content, md5, app_name, encrypted_data_key, ",
            ms!("gmt_create", "gmt_create"),
            " FROM config_info WHERE data_id = ? AND group_id = ? AND tenant_id = ? FOR UPDATE"
        ))
        .bind(key.data_id())
        .bind(key.group())
        .bind(key.tenant())
        .fetch_optional(&mut **tx)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let content = text(&r, "content")?;
        let md5 = match text(&r, "md5")? {
            m if m.is_empty() => nacelle_core::md5_hex(content.as_bytes()),
            m => m,
        };
        Ok(Some(Current {
            id: int(&r, "id")?,
            content,
            md5,
            app_name: text(&r, "app_name")?,
            encrypted_data_key: text(&r, "encrypted_data_key")?,
            created_ms: int(&r, "gmt_create")?,
        }))
    }

    /// Replaces the tag relations of config `id`, as Nacos does (delete all, insert each).
    async fn replace_tags(
        tx: &mut Transaction<'_, MySql>,
        id: i64,
        key: &ConfigKey,
        tags: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM config_tags_relation WHERE id = ?")
            .bind(id)
            .execute(&mut **tx)
            .await?;
        for tag in split_tags(tags) {
            sqlx::query(
                "INSERT INTO config_tags_relation (id, tag_name, tag_type, data_id, group_id, \
                 tenant_id) VALUES (?, ?, NULL, ?, ?, ?)",
            )
            .bind(id)
            .bind(tag)
            .bind(key.data_id())
            .bind(key.group())
            .bind(key.tenant())
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    /// Appends a history row and returns its `nid`. Its md5 is that of its content, as
    /// Nacos computes it.
    async fn insert_history(
        tx: &mut Transaction<'_, MySql>,
        h: HistoryRow<'_>,
    ) -> Result<i64, sqlx::Error> {
        let done = sqlx::query(
            "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, \
             md5, gmt_create, gmt_modified, src_user, src_ip, op_type, encrypted_data_key) \
             VALUES (?, ?, ?, ?, ?, ?, ?, FROM_UNIXTIME(?), FROM_UNIXTIME(?), ?, ?, ?, ?)",
        )
        .bind(h.config_id)
        .bind(h.key.data_id())
        .bind(h.key.group())
        .bind(h.key.tenant())
        .bind(h.app_name)
        .bind(h.content)
        .bind(nacelle_core::md5_hex(h.content.as_bytes()))
        .bind(h.now_s)
        .bind(h.now_s)
        .bind(&h.source.src_user)
        .bind(&h.source.src_ip)
        .bind(h.op.as_str())
        .bind(h.encrypted_data_key)
        .execute(&mut **tx)
        .await?;
        i64::try_from(done.last_insert_id())
            .map_err(|_| sqlx::Error::Protocol("history nid out of range".into()))
    }

    /// One attempt at a publish, in one transaction.
    async fn publish_once(&self, rec: &PublishRecord) -> Result<StoredConfig, TxError> {
        let now_s = rec.now_ms.div_euclid(1000);
        let mut tx = self.pool.begin().await?;
        let old = Self::lock_current(&mut tx, &rec.key).await?;
        if let Some(expected) = &rec.cas_md5 {
            let actual = old.as_ref().map(|o| o.md5.as_str()).unwrap_or("");
            if actual != expected {
                return Err(StoreError::CasMismatch.into());
            }
        }
        let content = String::from_utf8_lossy(&rec.content);
        let m = &rec.meta;
        let (id, created_ms, revision) = match &old {
            None => {
                let inserted = sqlx::query(
                    "INSERT INTO config_info (data_id, group_id, tenant_id, content, md5, \
                     gmt_create, gmt_modified, src_user, src_ip, app_name, c_desc, c_use, effect, \
                     type, c_schema, encrypted_data_key) VALUES (?, ?, ?, ?, ?, FROM_UNIXTIME(?), \
                     FROM_UNIXTIME(?), ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(rec.key.data_id())
                .bind(rec.key.group())
                .bind(rec.key.tenant())
                .bind(content.as_ref())
                .bind(&rec.md5)
                .bind(now_s)
                .bind(now_s)
                .bind(&rec.source.src_user)
                .bind(&rec.source.src_ip)
                .bind(&m.app_name)
                .bind(&m.desc)
                .bind(&m.r#use)
                .bind(&m.effect)
                .bind(rec.config_type.as_str())
                .bind(&m.schema)
                .bind(&m.encrypted_data_key)
                .execute(&mut *tx)
                .await;
                let id = match inserted {
                    Ok(done) => i64::try_from(done.last_insert_id())
                        .map_err(|_| StoreError::Unavailable("config id out of range".into()))?,
                    Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                        return Err(TxError::Raced)
                    }
                    Err(e) => return Err(e.into()),
                };
                Self::replace_tags(&mut tx, id, &rec.key, &m.config_tags).await?;
                // Nacos records an insert with config id 0.
                let nid = Self::insert_history(
                    &mut tx,
                    HistoryRow {
                        config_id: 0,
                        key: &rec.key,
                        app_name: &m.app_name,
                        content: &content,
                        encrypted_data_key: &m.encrypted_data_key,
                        source: &rec.source,
                        op: OpType::Insert,
                        now_s,
                    },
                )
                .await?;
                (id, now_s * 1000, nid)
            }
            Some(old) => {
                sqlx::query(
                    "UPDATE config_info SET content = ?, md5 = ?, gmt_modified = FROM_UNIXTIME(?), \
                     src_user = ?, src_ip = ?, app_name = ?, c_desc = ?, c_use = ?, effect = ?, \
                     type = ?, c_schema = ?, encrypted_data_key = ? WHERE id = ?",
                )
                .bind(content.as_ref())
                .bind(&rec.md5)
                .bind(now_s)
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
                .await?;
                Self::replace_tags(&mut tx, old.id, &rec.key, &m.config_tags).await?;
                // As Nacos does, an update's history row keeps the replaced version.
                let nid = Self::insert_history(
                    &mut tx,
                    HistoryRow {
                        config_id: old.id,
                        key: &rec.key,
                        app_name: &old.app_name,
                        content: &old.content,
                        encrypted_data_key: &old.encrypted_data_key,
                        source: &rec.source,
                        op: OpType::Update,
                        now_s,
                    },
                )
                .await?;
                (old.id, old.created_ms, nid)
            }
        };
        tx.commit().await?;
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
            modified_ms: now_s * 1000,
            revision,
        })
    }

    async fn remove_once(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, TxError> {
        let mut tx = self.pool.begin().await?;
        let Some(old) = Self::lock_current(&mut tx, key).await? else {
            return Ok(RemoveOutcome::Absent);
        };
        sqlx::query("DELETE FROM config_info WHERE id = ?")
            .bind(old.id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM config_tags_relation WHERE id = ?")
            .bind(old.id)
            .execute(&mut *tx)
            .await?;
        let nid = Self::insert_history(
            &mut tx,
            HistoryRow {
                config_id: old.id,
                key,
                app_name: &old.app_name,
                content: &old.content,
                encrypted_data_key: &old.encrypted_data_key,
                source,
                op: OpType::Delete,
                now_s: now_ms.div_euclid(1000),
            },
        )
        .await?;
        tx.commit().await?;
        Ok(RemoveOutcome::Removed { revision: nid })
    }
}

#[async_trait]
impl ConfigStore for MySqlStore {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn load_all(&self) -> Result<Vec<StoredConfig>, StoreError> {
        let sql = format!("SELECT {CONFIG_COLUMNS} FROM config_info c ORDER BY c.id");
        let rows = sqlx::query(&sql)
            .fetch_all(&self.pool)
            .await
            .map_err(map_err)?;
        rows.iter().map(config_from_row).collect()
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<StoredConfig>, StoreError> {
        timed(self.op_timeout, async {
            let sql = format!(
                "SELECT {CONFIG_COLUMNS} FROM config_info c \
                 WHERE c.data_id = ? AND c.group_id = ? AND c.tenant_id = ?"
            );
            let row = sqlx::query(&sql)
                .bind(key.data_id())
                .bind(key.group())
                .bind(key.tenant())
                .fetch_optional(&self.pool)
                .await
                .map_err(map_err)?;
            row.map(|r| config_from_row(&r)).transpose()
        })
        .await
    }

    async fn publish(&self, rec: &PublishRecord) -> Result<StoredConfig, StoreError> {
        timed(self.op_timeout, with_retries(|| self.publish_once(rec))).await
    }

    async fn remove(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        timed(
            self.op_timeout,
            with_retries(|| self.remove_once(key, source, now_ms)),
        )
        .await
    }

    async fn history_page(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, StoreError> {
        timed(self.op_timeout, async {
            let total: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM his_config_info \
                 WHERE data_id = ? AND group_id = ? AND tenant_id = ?",
            )
            .bind(key.data_id())
            .bind(key.group())
            .bind(key.tenant())
            .fetch_one(&self.pool)
            .await
            .map_err(map_err)?;
            let sql = format!(
                "SELECT {HISTORY_COLUMNS} FROM his_config_info \
                 WHERE data_id = ? AND group_id = ? AND tenant_id = ? \
                 ORDER BY nid DESC LIMIT ? OFFSET ?"
            );
            let rows = sqlx::query(&sql)
                .bind(key.data_id())
                .bind(key.group())
                .bind(key.tenant())
                .bind(page.page_size)
                .bind(page.offset())
                .fetch_all(&self.pool)
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
        })
        .await
    }

    async fn history_entry(&self, nid: i64) -> Result<Option<HistoryEntry>, StoreError> {
        timed(self.op_timeout, async {
            let sql = format!("SELECT {HISTORY_COLUMNS} FROM his_config_info WHERE nid = ?");
            let row = sqlx::query(&sql)
                .bind(nid)
                .fetch_optional(&self.pool)
                .await
                .map_err(map_err)?;
            row.map(|r| history_from_row(&r)).transpose()
        })
        .await
    }

    async fn history_previous(&self, config_id: i64) -> Result<Option<HistoryEntry>, StoreError> {
        timed(self.op_timeout, async {
            let sql = format!(
                "SELECT {HISTORY_COLUMNS} FROM his_config_info WHERE id = ? \
                 ORDER BY nid DESC LIMIT 1"
            );
            let row = sqlx::query(&sql)
                .bind(config_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(map_err)?;
            row.map(|r| history_from_row(&r)).transpose()
        })
        .await
    }

    async fn list_namespaces(&self) -> Result<Vec<Namespace>, StoreError> {
        timed(self.op_timeout, async {
            let rows = sqlx::query(
                "SELECT tenant_id, tenant_name, tenant_desc FROM tenant_info \
                 WHERE kp = '1' ORDER BY id",
            )
            .fetch_all(&self.pool)
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
        })
        .await
    }

    async fn create_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        timed(self.op_timeout, async {
            sqlx::query(
                "INSERT INTO tenant_info (kp, tenant_id, tenant_name, tenant_desc, create_source, \
                 gmt_create, gmt_modified) VALUES ('1', ?, ?, ?, 'nacos', ?, ?)",
            )
            .bind(&ns.id)
            .bind(&ns.name)
            .bind(&ns.desc)
            .bind(now_ms)
            .bind(now_ms)
            .execute(&self.pool)
            .await
            .map_err(map_err)?;
            Ok(())
        })
        .await
    }

    async fn update_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        timed(self.op_timeout, async {
            // MySQL counts only rows it changed, so match on existence separately.
            let exists: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM tenant_info WHERE kp = '1' AND tenant_id = ?",
            )
            .bind(&ns.id)
            .fetch_one(&self.pool)
            .await
            .map_err(map_err)?;
            if exists == 0 {
                return Err(StoreError::NotFound(format!("namespace `{}`", ns.id)));
            }
            sqlx::query(
                "UPDATE tenant_info SET tenant_name = ?, tenant_desc = ?, gmt_modified = ? \
                 WHERE kp = '1' AND tenant_id = ?",
            )
            .bind(&ns.name)
            .bind(&ns.desc)
            .bind(now_ms)
            .bind(&ns.id)
            .execute(&self.pool)
            .await
            .map_err(map_err)?;
            Ok(())
        })
        .await
    }

    async fn delete_namespace(&self, id: &str) -> Result<bool, StoreError> {
        timed(self.op_timeout, async {
            let done = sqlx::query("DELETE FROM tenant_info WHERE kp = '1' AND tenant_id = ?")
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(map_err)?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    async fn changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        timed(self.op_timeout, async {
            let rows = sqlx::query(concat!(
                "SELECT CAST(nid AS SIGNED) AS nid, data_id, group_id, tenant_id, op_type, ",
                ms!("gmt_modified", "gmt_modified"),
                " FROM his_config_info WHERE nid > ? ORDER BY nid LIMIT ?"
            ))
            .bind(after_nid)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(map_err)?;
            rows.iter().map(change_from_row).collect()
        })
        .await
    }

    async fn max_history_nid(&self) -> Result<i64, StoreError> {
        timed(self.op_timeout, async {
            sqlx::query_scalar("SELECT CAST(COALESCE(MAX(nid), 0) AS SIGNED) FROM his_config_info")
                .fetch_one(&self.pool)
                .await
                .map_err(map_err)
        })
        .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        timed(self.op_timeout, async {
            sqlx::query("SELECT 1")
                .execute(&self.pool)
                .await
                .map_err(map_err)?;
            Ok(())
        })
        .await
    }
}
