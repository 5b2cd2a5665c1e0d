//! Namespaces (Nacos's `tenant_info`, the rows with `kp = '1'`): their statements, spelled
//! once per dialect, the reader and the writes, shared by every backend (SQLite on its
//! namespace-writer pool, MySQL and PostgreSQL on their pool).

use nacelle_core::{Namespace, StoreError};
use sqlx::Pool;

use crate::dialect::{spell, Arg, Dialect};
use crate::map_err;
use crate::sql::{conn, count, Exec};

/// The statements of namespaces.
#[derive(Debug, Clone)]
pub(crate) struct NamespaceQueries {
    /// Every custom namespace, oldest first.
    pub list: String,
    /// How many namespaces have the id (column `n`).
    pub exists: String,
    /// id, name, description, created, modified.
    pub create: String,
    /// name, description, modified, id.
    pub update: String,
    /// id.
    pub delete: String,
}

impl NamespaceQueries {
    /// The statements as `D` spells them.
    pub(crate) fn new<D: Dialect>() -> Self {
        let q = |sql: String| spell::<D>(&sql);
        NamespaceQueries {
            list: q(
                "SELECT tenant_id, tenant_name, tenant_desc FROM tenant_info \
                 WHERE kp = '1' ORDER BY id"
                    .into(),
            ),
            exists: q(format!(
                "SELECT {} AS n FROM tenant_info WHERE kp = '1' AND tenant_id = ?",
                D::signed("COUNT(*)")
            )),
            create: q("INSERT INTO tenant_info (kp, tenant_id, tenant_name, \
                 tenant_desc, create_source, gmt_create, gmt_modified) \
                 VALUES ('1', ?, ?, ?, 'nacos', ?, ?)"
                .into()),
            update: q("UPDATE tenant_info SET tenant_name = ?, tenant_desc = ?, \
                 gmt_modified = ? WHERE kp = '1' AND tenant_id = ?"
                .into()),
            delete: q("DELETE FROM tenant_info WHERE kp = '1' AND tenant_id = ?".into()),
        }
    }
}

/// Custom namespaces, oldest first.
pub(crate) async fn list<DB: Exec>(
    pool: &Pool<DB>,
    q: &NamespaceQueries,
) -> Result<Vec<Namespace>, StoreError> {
    let rows = DB::rows(&mut *conn(pool).await?, &q.list, &[])
        .await
        .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok(Namespace {
                id: nacelle_core::NamespaceId::from_trusted(&DB::text(r, "tenant_id")?),
                name: DB::text(r, "tenant_name")?,
                desc: DB::text(r, "tenant_desc")?,
            })
        })
        .collect()
}

/// Creates a namespace; a taken id is a [`StoreError::Conflict`].
pub(crate) async fn create<DB: Exec>(
    pool: &Pool<DB>,
    q: &NamespaceQueries,
    ns: &Namespace,
    now_ms: i64,
) -> Result<(), StoreError> {
    let args = [
        Arg::Text(ns.id.as_str()),
        Arg::Text(&ns.name),
        Arg::Text(&ns.desc),
        Arg::Int(now_ms),
        Arg::Int(now_ms),
    ];
    DB::run(&mut *conn(pool).await?, &q.create, &args)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// Updates a namespace's name and description; [`StoreError::NotFound`] when absent.
pub(crate) async fn update<DB: Exec>(
    pool: &Pool<DB>,
    q: &NamespaceQueries,
    ns: &Namespace,
    now_ms: i64,
) -> Result<(), StoreError> {
    let absent = || StoreError::NotFound(format!("namespace `{}`", ns.id));
    if !DB::UPDATE_COUNTS_MATCHED_ROWS
        && count(pool, &q.exists, &[Arg::Text(ns.id.as_str())]).await? == 0
    {
        return Err(absent());
    }
    let args = [
        Arg::Text(&ns.name),
        Arg::Text(&ns.desc),
        Arg::Int(now_ms),
        Arg::Text(ns.id.as_str()),
    ];
    let done = DB::run(&mut *conn(pool).await?, &q.update, &args)
        .await
        .map_err(map_err)?;
    if DB::UPDATE_COUNTS_MATCHED_ROWS && DB::rows_affected(&done) == 0 {
        return Err(absent());
    }
    Ok(())
}

/// Deletes a namespace; whether it existed.
pub(crate) async fn delete<DB: Exec>(
    pool: &Pool<DB>,
    q: &NamespaceQueries,
    id: &str,
) -> Result<bool, StoreError> {
    let done = DB::run(&mut *conn(pool).await?, &q.delete, &[Arg::Text(id)])
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}
