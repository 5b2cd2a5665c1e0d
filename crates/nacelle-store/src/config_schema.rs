//! JSON Schemas of config keys (`nacelle_config_schema`, schema script 4): the one reader
//! and the two writes, shared by every backend (SQLite on its namespace-writer pool, MySQL
//! and PostgreSQL on their pool). The store keeps the schema text as given; compiling and
//! applying it is the service's.

use nacelle_core::{NamespaceId, SchemaRecord, StoreError};
use sqlx::Pool;

use crate::dialect::Arg;
use crate::map_err;
use crate::queries::Queries;
use crate::sql::Exec;

/// Every schema.
pub(crate) async fn load<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
) -> Result<Vec<SchemaRecord>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let rows = DB::rows(&mut conn, &q.schemas.load, &[])
        .await
        .map_err(map_err)?;
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
    q: &Queries,
    rec: &SchemaRecord,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await.map_err(map_err)?;
    let key = [
        Arg::Text(rec.namespace.as_str()),
        Arg::Text(&rec.group),
        Arg::Text(&rec.data_id),
    ];
    DB::run(&mut tx, &q.schemas.delete, &key)
        .await
        .map_err(map_err)?;
    let args = [
        Arg::Text(rec.namespace.as_str()),
        Arg::Text(&rec.group),
        Arg::Text(&rec.data_id),
        Arg::Text(&rec.schema),
        Arg::Text(&rec.description),
        Arg::Text(&rec.src_user),
        Arg::Int(rec.modified_ms),
    ];
    match DB::run(&mut tx, &q.schemas.insert, &args).await {
        Ok(_) => {}
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            return Err(StoreError::Conflict(format!(
                "schema {}>>{}>>{} was set concurrently",
                rec.namespace, rec.group, rec.data_id
            )))
        }
        Err(e) => return Err(map_err(e)),
    }
    tx.commit().await.map_err(map_err)
}

/// Deletes one schema; whether it existed.
pub(crate) async fn delete<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
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
    let done = DB::run(&mut conn, &q.schemas.delete, &args)
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}
