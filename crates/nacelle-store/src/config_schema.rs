//! JSON Schemas of config keys (`nacelle_config_schema`, schema script 4): their statements,
//! spelled once per dialect, the one reader and the two writes, shared by every backend (SQLite on its namespace-writer pool, MySQL
//! and PostgreSQL on their pool). The store keeps the schema text as given; compiling and
//! applying it is the service's.

use nacelle_core::{NamespaceId, SchemaRecord, StoreError};
use sqlx::Pool;

use crate::dialect::{spell, Arg, Dialect};
use crate::map_err;
use crate::sql::{self, Exec};

/// The statements of `nacelle_config_schema`.
#[derive(Debug, Clone)]
pub(crate) struct SchemaQueries {
    /// Every schema, by namespace and patterns.
    pub load: String,
    /// Deletes one by (tenant, group pattern, dataId pattern).
    pub delete: String,
    /// Inserts one: tenant, group pattern, dataId pattern, schema, description, user, ms.
    pub insert: String,
}

impl SchemaQueries {
    /// The statements as `D` spells them.
    pub(crate) fn new<D: Dialect>() -> Self {
        let q = |sql: String| spell::<D>(&sql);
        SchemaQueries {
            load: q(format!(
                "SELECT tenant_id, group_pattern, data_id_pattern, schema_json, \
                 description, src_user, {} AS gmt_modified FROM nacelle_config_schema \
                 ORDER BY tenant_id, group_pattern, data_id_pattern",
                D::signed("gmt_modified")
            )),
            delete: q("DELETE FROM nacelle_config_schema WHERE tenant_id = ? \
                 AND group_pattern = ? AND data_id_pattern = ?"
                .into()),
            insert: q(
                "INSERT INTO nacelle_config_schema (tenant_id, group_pattern, \
                 data_id_pattern, schema_json, description, src_user, gmt_modified) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)"
                    .into(),
            ),
        }
    }
}

/// Every schema.
pub(crate) async fn load<DB: Exec>(
    pool: &Pool<DB>,
    q: &SchemaQueries,
) -> Result<Vec<SchemaRecord>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let rows = DB::rows(&mut conn, &q.load, &[]).await.map_err(map_err)?;
    rows.iter()
        .map(|row| {
            Ok(SchemaRecord {
                namespace: NamespaceId::from_trusted(&DB::text(row, "tenant_id")?),
                group: DB::text(row, "group_pattern")?,
                data_id: DB::text(row, "data_id_pattern")?,
                schema: DB::text(row, "schema_json")?,
                description: DB::text(row, "description")?,
                src_user: DB::text(row, "src_user")?,
                modified_ms: DB::int(row, "gmt_modified")?,
            })
        })
        .collect()
}

/// Inserts or replaces the schema of the record's namespace and patterns, in one
/// transaction (the old row, if any, deleted and the new one inserted). Two nodes
/// setting the same patterns at once: the second insert finds the unique key taken and
/// fails with [`StoreError::Conflict`], writing nothing.
pub(crate) async fn put<DB: Exec>(
    pool: &Pool<DB>,
    q: &SchemaQueries,
    rec: &SchemaRecord,
) -> Result<(), StoreError> {
    sql::in_transaction(pool, async |conn| {
        let key = [
            Arg::Text(rec.namespace.as_str()),
            Arg::Text(&rec.group),
            Arg::Text(&rec.data_id),
        ];
        DB::run(conn, &q.delete, &key).await.map_err(map_err)?;
        let args = [
            Arg::Text(rec.namespace.as_str()),
            Arg::Text(&rec.group),
            Arg::Text(&rec.data_id),
            Arg::Text(&rec.schema),
            Arg::Text(&rec.description),
            Arg::Text(&rec.src_user),
            Arg::Int(rec.modified_ms),
        ];
        match DB::run(conn, &q.insert, &args).await {
            Ok(_) => {}
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                return Err(StoreError::Conflict(format!(
                    "schema {}>>{}>>{} was set concurrently",
                    rec.namespace, rec.group, rec.data_id
                )))
            }
            Err(e) => return Err(map_err(e)),
        }
        Ok(())
    })
    .await
}

/// Deletes one schema; whether it existed.
pub(crate) async fn delete<DB: Exec>(
    pool: &Pool<DB>,
    q: &SchemaQueries,
    namespace: &NamespaceId,
    group: &str,
    data_id: &str,
) -> Result<bool, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let args = [
        Arg::Text(namespace.as_str()),
        Arg::Text(group),
        Arg::Text(data_id),
    ];
    let done = DB::run(&mut conn, &q.delete, &args)
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}
