//! PostgreSQL backend: Nacos's tables and columns with PostgreSQL types
//! (`migrations/postgres/`), created when absent. The store itself is the shared
//! [`Store`] over a [`ServerBackend`]; this file holds only what PostgreSQL does differently.
//!
//! - `gmt_create`/`gmt_modified` are `timestamp(3)` holding UTC, whatever the session's time
//!   zone: written as `TIMESTAMP '1970-01-01' + ms * INTERVAL '1 millisecond'`, read with
//!   `EXTRACT(EPOCH FROM …)`, so milliseconds survive exactly.
//! - A first publish inserts with `ON CONFLICT DO NOTHING RETURNING id`; one that finds the
//!   key taken by a concurrent insert retries as an update. Generated ids come back with
//!   `RETURNING`.
//! - Schema scripts run in one transaction under an advisory lock.
//! - Text cannot hold the NUL character: such values are refused before the database.

use std::str::FromStr;

use async_trait::async_trait;
use nacelle_core::{ConfigKey, OpSource, StoreError};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgQueryResult};
use sqlx::{Pool, Postgres};

use crate::deadline::Deadline;
use crate::dialect::{Arg, Dialect};
use crate::networked::{self, Migration, Server, ServerBackend};
use crate::options::split_url;
use crate::sql::{Exec, GeneratedIds};
use crate::store::{Checked, Store};
use crate::{map_err, OpenError, StoreOptions};

/// The PostgreSQL store.
pub type PgStore = nacelle_core::store::Layered<Deadline<Store<ServerBackend<Postgres>>>>;

/// Key of the advisory lock taken while the schema is checked and created.
const SCHEMA_LOCK: i64 = 0x6e61_6365_6c6c_6501;

/// Connects to `url` (`postgres://user:pass@host:port/db?…`), creates the tables where
/// absent and checks that existing ones have the columns we use.
pub async fn open(url: &str, options: &StoreOptions) -> Result<PgStore, OpenError> {
    let (url, options) = split_url(url, options)?;
    let connect =
        PgConnectOptions::from_str(&url).map_err(|e| OpenError::InvalidUrl(format!("{e}")))?;
    networked::open(connect, &options).await
}

impl Dialect for Postgres {
    fn contains(haystack: &str, needle: &str) -> String {
        format!("strpos({haystack}, {needle}) > 0")
    }
    const NUMBERED_PLACEHOLDERS: bool = true;
    const TIME_PARAM: &'static str =
        "(TIMESTAMP '1970-01-01 00:00:00' + ?::bigint * INTERVAL '1 millisecond')";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const INSERT_CONFIG_TAIL: &'static str = " ON CONFLICT DO NOTHING RETURNING id";
    const INSERT_HISTORY_TAIL: &'static str = " RETURNING nid";
    const UPDATE_COUNTS_MATCHED_ROWS: bool = true;
    const RETURNING_ID: &'static str = " RETURNING id";

    fn ms(col: &str) -> String {
        format!("(EXTRACT(EPOCH FROM {col}) * 1000)::bigint")
    }
    fn tag_list() -> &'static str {
        "string_agg(r.tag_name, ',' ORDER BY r.nid)"
    }
    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
    }
}

#[async_trait]
impl GeneratedIds for Postgres {
    /// No row back from `ON CONFLICT DO NOTHING RETURNING`: the key was taken.
    async fn insert_id(
        conn: &mut PgConnection,
        sql: &str,
        args: &[Arg<'_>],
        col: &str,
    ) -> Result<Option<i64>, sqlx::Error> {
        match Self::row(conn, sql, args).await? {
            Some(row) => Self::int(&row, col)
                .map(Some)
                .map_err(|e| sqlx::Error::Protocol(e.to_string())),
            None => Ok(None),
        }
    }
}

#[async_trait]
impl Server for Postgres {
    const BACKEND: &'static str = "postgres";
    const MIGRATIONS: &'static [Migration] = &[
        (
            1,
            "Nacos 2.4 tables (created when absent)",
            include_str!("../migrations/postgres/0001_nacos_tables.sql"),
        ),
        (
            2,
            "gray release: config_info_gray (created when absent), nacelle_gray_log",
            include_str!("../migrations/postgres/0002_gray.sql"),
        ),
        (
            3,
            "authentication: nacelle_user_state",
            include_str!("../migrations/postgres/0003_auth.sql"),
        ),
        (
            4,
            "schema validation: nacelle_config_schema",
            include_str!("../migrations/postgres/0004_schemas.sql"),
        ),
        (
            5,
            "audit trail: nacelle_audit, nacelle_audit_head; nacelle_history_note",
            include_str!("../migrations/postgres/0005_audit.sql"),
        ),
        (
            6,
            "change requests: nacelle_change, nacelle_change_item, nacelle_change_event, nacelle_review_policy",
            include_str!("../migrations/postgres/0006_changes.sql"),
        ),
        (
            7,
            "webhooks: nacelle_webhook, nacelle_webhook_delivery",
            include_str!("../migrations/postgres/0007_webhooks.sql"),
        ),
        (
            8,
            "staged rollouts: nacelle_rollout; nacelle_gray_note",
            include_str!("../migrations/postgres/0008_rollouts.sql"),
        ),
    ];
    const SCHEMA_VERSION_DDL: &'static str = "CREATE TABLE IF NOT EXISTS nacelle_schema_version (\
        version integer PRIMARY KEY, \
        description varchar(200) NOT NULL, \
        applied_ms bigint NOT NULL)";
    const APPLIED_VERSIONS_SQL: &'static str =
        "SELECT version::bigint AS version FROM nacelle_schema_version";
    const SCHEMA_VERSION_SQL: &'static str =
        "SELECT COALESCE(MAX(version), 0)::bigint AS n FROM nacelle_schema_version";
    /// `$1::bigint` so the bound i64 fits; the insert casts it to the `integer` column.
    const RECORD_VERSION_SQL: &'static str = "INSERT INTO nacelle_schema_version \
        (version, description, applied_ms) VALUES ($1::bigint, $2, $3)";
    const COLUMNS_SQL: &'static str = "SELECT table_name::text AS t, column_name::text AS c \
        FROM information_schema.columns WHERE table_schema = current_schema()";

    fn session_sql(options: &StoreOptions) -> String {
        format!("SET lock_timeout = '{}s'", options.lock_wait_secs())
    }

    async fn lock_schema(conn: &mut PgConnection) -> Result<(), StoreError> {
        schema_lock(conn, "SELECT pg_advisory_lock($1)").await
    }

    async fn unlock_schema(conn: &mut PgConnection) -> Result<(), StoreError> {
        schema_lock(conn, "SELECT pg_advisory_unlock($1)").await
    }

    async fn check_encoding(pool: &Pool<Postgres>) -> Result<(), StoreError> {
        let encoding: String = sqlx::query_scalar(
            "SELECT pg_encoding_to_char(encoding)::text FROM pg_database \
             WHERE datname = current_database()",
        )
        .fetch_one(pool)
        .await
        .map_err(map_err)?;
        if encoding != "UTF8" {
            tracing::warn!(
                "the database's encoding is {encoding}, not UTF8: contents outside it will be \
                 rejected"
            );
        }
        Ok(())
    }

    fn refuse(write: Checked<'_>) -> Result<(), StoreError> {
        match write {
            Checked::Publish(rec) => {
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
                refuse_nul_in_source(&rec.source)
            }
            Checked::Remove(key, source) => {
                refuse_nul_in_key(key)?;
                refuse_nul_in_source(source)
            }
            Checked::Metadata(key, desc, config_tags) => {
                refuse_nul(&[
                    ("desc", desc.unwrap_or_default()),
                    ("config_tags", config_tags.unwrap_or_default()),
                ])?;
                refuse_nul_in_key(key)
            }
            Checked::Namespace(ns) => refuse_nul(&[
                ("namespaceId", ns.id.as_str()),
                ("namespaceName", &ns.name),
                ("namespaceDesc", &ns.desc),
            ]),
        }
    }
}

/// Takes or releases (`sql`) the schema's advisory lock.
async fn schema_lock(conn: &mut PgConnection, sql: &str) -> Result<(), StoreError> {
    Postgres::run(conn, sql, &[Arg::Int(SCHEMA_LOCK)])
        .await
        .map(|_| ())
        .map_err(map_err)
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
