//! PostgreSQL backend: Nacos's tables and columns with PostgreSQL types
//! (`migrations/postgres/`), created when absent.
//!
//! - `gmt_create`/`gmt_modified` are `timestamp(3)` holding UTC, whatever the session's time
//!   zone: written as `TIMESTAMP '1970-01-01' + ms * INTERVAL '1 millisecond'`, read with
//!   `EXTRACT(EPOCH FROM …)`, so milliseconds survive exactly.
//! - Writes lock the config row (`SELECT … FOR UPDATE`); a first publish inserts with
//!   `ON CONFLICT DO NOTHING`, and one that finds the key taken by a concurrent insert
//!   retries as an update.
//! - Schema scripts run in one transaction under an advisory lock; `nacelle_schema_version`
//!   records them.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    ChangeRecord, ConfigKey, ConfigMeta, ConfigStore, HistoryEntry, Namespace, OpSource, OpType,
    Page, PageRequest, PublishRecord, StoreError, StoredConfig,
};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Executor, Postgres, Transaction};

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
    include_str!("../migrations/postgres/0001_nacos_tables.sql"),
)];

const SCHEMA_VERSION_DDL: &str = "CREATE TABLE IF NOT EXISTS nacelle_schema_version (\
    version integer PRIMARY KEY, \
    description varchar(200) NOT NULL, \
    applied_ms bigint NOT NULL)";

/// Key of the advisory lock taken while the schema is checked and created.
const SCHEMA_LOCK: i64 = 0x6e61_6365_6c6c_6501;

/// A `timestamp` column (UTC) as ms since the epoch.
macro_rules! ms {
    ($col:literal, $alias:literal) => {
        concat!(
            "(EXTRACT(EPOCH FROM ",
            $col,
            ") * 1000)::bigint AS ",
            $alias
        )
    };
}

/// A bound ms value as a UTC `timestamp`.
macro_rules! ts {
    ($param:literal) => {
        concat!(
            "(TIMESTAMP '1970-01-01 00:00:00' + ",
            $param,
            "::bigint * INTERVAL '1 millisecond')"
        )
    };
}

const CONFIG_COLUMNS: &str = concat!(
    "c.id, c.data_id, c.group_id, c.tenant_id, c.content, c.md5, c.type, c.app_name, c.c_desc, \
     c.c_use, c.effect, c.c_schema, c.encrypted_data_key, c.src_user, c.src_ip, ",
    ms!("c.gmt_create", "gmt_create"),
    ", ",
    ms!("c.gmt_modified", "gmt_modified"),
    ", (SELECT string_agg(r.tag_name, ',' ORDER BY r.nid) FROM config_tags_relation r \
       WHERE r.id = c.id) AS config_tags, \
     COALESCE((SELECT MAX(h.nid) FROM his_config_info h WHERE h.data_id = c.data_id \
       AND h.group_id = c.group_id AND h.tenant_id = c.tenant_id), 0) AS revision"
);

const HISTORY_COLUMNS: &str = concat!(
    "id, nid, data_id, group_id, tenant_id, app_name, content, md5, src_user, src_ip, op_type, \
     encrypted_data_key, ",
    ms!("gmt_create", "gmt_create"),
    ", ",
    ms!("gmt_modified", "gmt_modified")
);

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Bound on every operation but `load_all` (see [`StoreOptions::op_timeout`]).
    op_timeout: Duration,
}

/// What a write needs of the row it replaces, read under its row lock.
struct Current {
    id: i64,
    content: String,
    /// The stored md5 (computed from the content when the column is empty).
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
    now_ms: i64,
}

impl PgStore {
    /// Connects to `url` (`postgres://user:pass@host:port/db?…`), creates the tables where
    /// absent and checks that existing ones have the columns we use.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self, OpenError> {
        let (url, options) = split_url(url, options)?;
        let connect =
            PgConnectOptions::from_str(&url).map_err(|e| OpenError::InvalidUrl(format!("{e}")))?;
        let session = format!("SET lock_timeout = '{}s'", options.lock_wait_secs());
        let pool = PgPoolOptions::new()
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
        let store = PgStore {
            pool,
            op_timeout: options.op_timeout,
        };
        timed(options.op_timeout * 6, store.migrate())
            .await
            .map_err(OpenError::Store)?;
        store.check_schema().await?;
        Ok(store)
    }

    /// Applies the schema scripts not yet recorded, in one transaction, under an advisory
    /// lock so that nodes starting together take turns.
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(SCHEMA_LOCK)
            .execute(&mut *conn)
            .await
            .map_err(map_err)?;
        let result = Self::migrate_locked(&mut conn).await;
        let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(SCHEMA_LOCK)
            .execute(&mut *conn)
            .await
            .map_err(map_err);
        result.and(unlocked.map(|_| ()))
    }

    async fn migrate_locked(conn: &mut PgConnection) -> Result<(), StoreError> {
        let mut tx = conn.begin().await.map_err(map_err)?;
        tx.execute(SCHEMA_VERSION_DDL).await.map_err(map_err)?;
        let current: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(version), 0)::bigint FROM nacelle_schema_version",
        )
        .fetch_one(&mut *tx)
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
                tx.execute(statement.as_str()).await.map_err(|e| {
                    StoreError::Unavailable(format!("schema script {version} failed: {e}"))
                })?;
            }
            sqlx::query(
                "INSERT INTO nacelle_schema_version (version, description, applied_ms) \
                 VALUES ($1, $2, $3)",
            )
            .bind(*version as i32)
            .bind(description)
            .bind(nacelle_core::now_millis())
            .execute(&mut *tx)
            .await
            .map_err(map_err)?;
            tracing::info!("postgres schema: applied {version} ({description})");
        }
        tx.commit().await.map_err(map_err)
    }

    /// Checks that the tables have every column we read and write, and warns when the
    /// database cannot hold every Unicode character.
    async fn check_schema(&self) -> Result<(), OpenError> {
        let encoding: String = sqlx::query_scalar(
            "SELECT pg_encoding_to_char(encoding)::text FROM pg_database \
             WHERE datname = current_database()",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| OpenError::Store(map_err(e)))?;
        if encoding != "UTF8" {
            tracing::warn!(
                "the database's encoding is {encoding}, not UTF8: contents outside it will be \
                 rejected"
            );
        }
        let rows = sqlx::query(
            "SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns \
             WHERE table_schema = current_schema()",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| OpenError::Store(map_err(e)))?;
        let present = rows
            .iter()
            .map(|r| Ok((text(r, "t")?, text(r, "c")?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let missing = common::missing_columns(&present);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(OpenError::Schema(format!(
                "the database lacks column(s) {}; Nacelle does not alter existing tables",
                missing.join(", ")
            )))
        }
    }

    /// Reads the current row of `key` and locks it until the transaction ends.
    async fn lock_current(
        tx: &mut Transaction<'_, Postgres>,
        key: &ConfigKey,
    ) -> Result<Option<Current>, TxError> {
        let row = sqlx::query(concat!(
            "SELECT id, content, md5, app_name, encrypted_data_key, ",
            ms!("gmt_create", "gmt_create"),
            " FROM config_info WHERE data_id = $1 AND group_id = $2 AND tenant_id = $3 \
             FOR UPDATE"
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
        tx: &mut Transaction<'_, Postgres>,
        id: i64,
        key: &ConfigKey,
        tags: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM config_tags_relation WHERE id = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
        for tag in split_tags(tags) {
            sqlx::query(
                "INSERT INTO config_tags_relation (id, tag_name, tag_type, data_id, group_id, \
                 tenant_id) VALUES ($1, $2, NULL, $3, $4, $5)",
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
        tx: &mut Transaction<'_, Postgres>,
        h: HistoryRow<'_>,
    ) -> Result<i64, sqlx::Error> {
        sqlx::query_scalar(concat!(
            "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, \
             md5, gmt_create, gmt_modified, src_user, src_ip, op_type, encrypted_data_key) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, ",
            ts!("$8"),
            ", ",
            ts!("$8"),
            ", $9, $10, $11, $12) RETURNING nid"
        ))
        .bind(h.config_id)
        .bind(h.key.data_id())
        .bind(h.key.group())
        .bind(h.key.tenant())
        .bind(h.app_name)
        .bind(h.content)
        .bind(nacelle_core::md5_hex(h.content.as_bytes()))
        .bind(h.now_ms)
        .bind(&h.source.src_user)
        .bind(&h.source.src_ip)
        .bind(h.op.as_str())
        .bind(h.encrypted_data_key)
        .fetch_one(&mut **tx)
        .await
    }

    /// One attempt at a publish, in one transaction.
    async fn publish_once(&self, rec: &PublishRecord) -> Result<StoredConfig, TxError> {
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
                let id: Option<i64> = sqlx::query_scalar(concat!(
                    "INSERT INTO config_info (data_id, group_id, tenant_id, content, md5, \
                     gmt_create, gmt_modified, src_user, src_ip, app_name, c_desc, c_use, effect, \
                     type, c_schema, encrypted_data_key) VALUES ($1, $2, $3, $4, $5, ",
                    ts!("$6"),
                    ", ",
                    ts!("$6"),
                    ", $7, $8, $9, $10, $11, $12, $13, $14, $15) \
                     ON CONFLICT DO NOTHING RETURNING id"
                ))
                .bind(rec.key.data_id())
                .bind(rec.key.group())
                .bind(rec.key.tenant())
                .bind(content.as_ref())
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
                .fetch_optional(&mut *tx)
                .await?;
                // No row: a concurrent publish inserted the key first.
                let Some(id) = id else {
                    return Err(TxError::Raced);
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
                        now_ms: rec.now_ms,
                    },
                )
                .await?;
                (id, rec.now_ms, nid)
            }
            Some(old) => {
                sqlx::query(concat!(
                    "UPDATE config_info SET content = $1, md5 = $2, gmt_modified = ",
                    ts!("$3"),
                    ", src_user = $4, src_ip = $5, app_name = $6, c_desc = $7, c_use = $8, \
                     effect = $9, type = $10, c_schema = $11, encrypted_data_key = $12 \
                     WHERE id = $13"
                ))
                .bind(content.as_ref())
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
                        now_ms: rec.now_ms,
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
            modified_ms: rec.now_ms,
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
        sqlx::query("DELETE FROM config_info WHERE id = $1")
            .bind(old.id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM config_tags_relation WHERE id = $1")
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
                now_ms,
            },
        )
        .await?;
        tx.commit().await?;
        Ok(RemoveOutcome::Removed { revision: nid })
    }
}

/// PostgreSQL's text types cannot hold the NUL character (U+0000): a value with one is
/// refused before it reaches the database, naming the field (the database's own error,
/// `invalid byte sequence for encoding "UTF8": 0x00`, names none).
fn nul_refused(field: &str) -> StoreError {
    StoreError::Rejected(format!(
        "invalid {field} : contains the NUL character (U+0000), which PostgreSQL cannot store"
    ))
}

fn refuse_nul(fields: &[(&str, &str)]) -> Result<(), StoreError> {
    match fields.iter().find(|(_, v)| v.contains('\0')) {
        Some((field, _)) => Err(nul_refused(field)),
        None => Ok(()),
    }
}

fn refuse_nul_in_key(key: &ConfigKey) -> Result<(), StoreError> {
    refuse_nul(&[
        ("dataId", key.data_id()),
        ("group", key.group()),
        ("tenant", key.tenant()),
    ])
}

fn refuse_nul_in_source(source: &OpSource) -> Result<(), StoreError> {
    refuse_nul(&[("src_user", &source.src_user), ("src_ip", &source.src_ip)])
}

fn refuse_nul_in_namespace(ns: &Namespace) -> Result<(), StoreError> {
    refuse_nul(&[
        ("namespaceId", &ns.id),
        ("namespaceName", &ns.name),
        ("namespaceDesc", &ns.desc),
    ])
}

#[async_trait]
impl ConfigStore for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
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
                 WHERE c.data_id = $1 AND c.group_id = $2 AND c.tenant_id = $3"
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
        let m = &rec.meta;
        if rec.content.contains(&0) {
            return Err(nul_refused("content"));
        }
        refuse_nul(&[
            ("appName", &m.app_name),
            ("desc", &m.desc),
            ("use", &m.r#use),
            ("effect", &m.effect),
            ("schema", &m.schema),
            ("config_tags", &m.config_tags),
            ("encryptedDataKey", &m.encrypted_data_key),
        ])?;
        refuse_nul_in_key(&rec.key)?;
        refuse_nul_in_source(&rec.source)?;
        timed(self.op_timeout, with_retries(|| self.publish_once(rec))).await
    }

    async fn remove(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        refuse_nul_in_key(key)?;
        refuse_nul_in_source(source)?;
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
                 WHERE data_id = $1 AND group_id = $2 AND tenant_id = $3",
            )
            .bind(key.data_id())
            .bind(key.group())
            .bind(key.tenant())
            .fetch_one(&self.pool)
            .await
            .map_err(map_err)?;
            let sql = format!(
                "SELECT {HISTORY_COLUMNS} FROM his_config_info \
                 WHERE data_id = $1 AND group_id = $2 AND tenant_id = $3 \
                 ORDER BY nid DESC LIMIT $4 OFFSET $5"
            );
            let rows = sqlx::query(&sql)
                .bind(key.data_id())
                .bind(key.group())
                .bind(key.tenant())
                .bind(i64::try_from(page.page_size).unwrap_or(i64::MAX))
                .bind(i64::try_from(page.offset()).unwrap_or(i64::MAX))
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
            let sql = format!("SELECT {HISTORY_COLUMNS} FROM his_config_info WHERE nid = $1");
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
                "SELECT {HISTORY_COLUMNS} FROM his_config_info WHERE id = $1 \
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
        refuse_nul_in_namespace(ns)?;
        timed(self.op_timeout, async {
            sqlx::query(
                "INSERT INTO tenant_info (kp, tenant_id, tenant_name, tenant_desc, create_source, \
                 gmt_create, gmt_modified) VALUES ('1', $1, $2, $3, 'nacos', $4, $4)",
            )
            .bind(&ns.id)
            .bind(&ns.name)
            .bind(&ns.desc)
            .bind(now_ms)
            .execute(&self.pool)
            .await
            .map_err(map_err)?;
            Ok(())
        })
        .await
    }

    async fn update_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        refuse_nul_in_namespace(ns)?;
        timed(self.op_timeout, async {
            let done = sqlx::query(
                "UPDATE tenant_info SET tenant_name = $1, tenant_desc = $2, gmt_modified = $3 \
                 WHERE kp = '1' AND tenant_id = $4",
            )
            .bind(&ns.name)
            .bind(&ns.desc)
            .bind(now_ms)
            .bind(&ns.id)
            .execute(&self.pool)
            .await
            .map_err(map_err)?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound(format!("namespace `{}`", ns.id)));
            }
            Ok(())
        })
        .await
    }

    async fn delete_namespace(&self, id: &str) -> Result<bool, StoreError> {
        timed(self.op_timeout, async {
            let done = sqlx::query("DELETE FROM tenant_info WHERE kp = '1' AND tenant_id = $1")
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
                "SELECT nid, data_id, group_id, tenant_id, op_type, ",
                ms!("gmt_modified", "gmt_modified"),
                " FROM his_config_info WHERE nid > $1 ORDER BY nid LIMIT $2"
            ))
            .bind(after_nid)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(map_err)?;
            rows.iter().map(change_from_row).collect()
        })
        .await
    }

    async fn max_history_nid(&self) -> Result<i64, StoreError> {
        timed(self.op_timeout, async {
            sqlx::query_scalar("SELECT COALESCE(MAX(nid), 0) FROM his_config_info")
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
