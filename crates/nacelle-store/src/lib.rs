//! Database backends of Nacelle.
//!
//! # Layout
//! - [`sqlite`]: the embedded default, a file in the data directory (WAL, durable commits);
//!   `sqlite_writer`: its group-commit writer thread (rusqlite).
//! - [`mysql`]: MySQL/MariaDB on Nacos 2.4's own tables, so an existing Nacos database works.
//! - [`postgres`]: PostgreSQL with the same tables and columns.
//! - `store`: every store role implemented once (`Store` over a `Backend`: pools, how a
//!   write step runs, how a purge deletes, refused values) for all three backends; the
//!   `QuerySet`, every statement of a backend's dialect, built once when a store opens.
//! - `networked`: the backend of MySQL and PostgreSQL (`ServerBackend` over a `Server`
//!   dialect: pool, migrations, schema check, retried transactions); `mysql.rs` and
//!   `postgres.rs` hold only what differs (connecting, schema locks, generated ids,
//!   encodings, refused values).
//! - `deadline`: the one deadline layer, in front of every call of the networked stores.
//! - `retry`: the retry rule of their write transactions.
//! - `plan`: *what* a publish or remove writes (CAS, row insert/update/delete, tag
//!   relations, the history row with Nacos's rules), computed once for every backend.
//! - `write`: the one write executor (lock the rows, plan, execute), used by the sqlx
//!   backends and the SQLite writer thread alike through a `WriteConn`.
//! - `dialect`: how the databases differ in our SQL (`Dialect`: placeholders, time
//!   conversion, casts, row locks, generated ids), `spell` and the bound value `Arg`.
//! - `queries`: the config core's statements (configs, grays, tags, history, the change
//!   logs and their purges), written once and spelled per `Dialect`; the statement list
//!   that executes a plan.
//! - `sql`: the sqlx code all three share: the config core's reads, purges, row decoding,
//!   and the small helpers the feature modules use.
//! - `options`: [`StoreOptions`] (pool size, timeouts) and the URL parameters that set them.
//! - `schema`: the columns an existing database must have; schema scripts split into
//!   statements.
//!
//! Each feature keeps its statements beside the code that runs them, shared by every
//! backend:
//! - `namespaces`: namespaces (`tenant_info`): list, create, update, delete.
//! - `identity`: users, roles, permissions and token states.
//! - `config_schema`: JSON Schemas of config keys.
//! - `changes`: change requests and review policies: reads and small writes, and their
//!   publish as a step of the one write executor.
//! - `rollouts`: staged rollouts (`nacelle_rollout`): create, read, version-checked
//!   transitions and the drivers' lease, on a sqlx pool.
//! - `audit`: the hash-chained audit trail: append, page, range, purge.
//! - `webhooks`: webhooks and their deliveries: claims by lease, outcomes, purge.
//! - [`backup`]: backup, restore and check of the SQLite file while a server runs on it.
//! - [`open`] / [`open_with`]: pick a backend from a database URL.
//!
//! Every backend implements every role of [`nacelle_core::ConfigStore`] with Nacos's table
//! layout, so rows written here look like rows written by Java Nacos. `docs/storage.md` describes URLs,
//! options, schemas and time handling.

mod audit;
pub mod backup;
mod changes;
mod config_schema;
mod deadline;
mod dialect;
mod identity;
pub mod mysql;
mod namespaces;
mod networked;
mod options;
mod plan;
pub mod postgres;
mod queries;
mod retry;
mod rollouts;
mod schema;
mod sql;
pub mod sqlite;
mod sqlite_writer;
mod store;
mod webhooks;
mod write;

use std::sync::Arc;

use nacelle_core::{ConfigStore, StoreError};

pub use deadline::{deadline_for, Deadline};
pub use mysql::MySqlStore;
pub use options::StoreOptions;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// Error opening a database from a URL.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL names a backend this build does not support.
    #[error(
        "database URL scheme `{0}` is not supported (supported: sqlite://, mysql://, postgres://)"
    )]
    Unsupported(String),
    /// The URL could not be parsed.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// The database is reachable but its tables cannot be used as they are (for example a
    /// Nacos database older than the columns Nacelle writes). Nacelle never alters Nacos's
    /// tables, so this needs a person.
    #[error("unusable database schema: {0}")]
    Schema(String),
    /// Connecting or creating the tables failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Opens the store named by `url` with default [`StoreOptions`]:
/// `sqlite://path`, `mysql://user:pass@host:3306/db`, `postgres://user@host:5432/db`
/// (also `postgresql://`).
pub async fn open(url: &str) -> Result<Arc<dyn ConfigStore>, OpenError> {
    open_with(url, &StoreOptions::default()).await
}

/// Opens the store named by `url`; `options` sets pool size and timeouts of the networked
/// backends, and parameters in the URL's query (`max_connections`, `acquire_timeout_ms`,
/// `op_timeout_ms`) override them. SQLite ignores them.
pub async fn open_with(
    url: &str,
    options: &StoreOptions,
) -> Result<Arc<dyn ConfigStore>, OpenError> {
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .or_else(|| url.strip_prefix("sqlite:").map(|_| "sqlite".to_string()))
        .ok_or_else(|| OpenError::InvalidUrl(format!("`{url}` has no scheme")))?;
    match scheme.as_str() {
        "sqlite" => Ok(Arc::new(SqliteStore::open_url(url).await?)),
        "mysql" => Ok(Arc::new(mysql::open(url, options).await?)),
        "postgres" | "postgresql" => Ok(Arc::new(postgres::open(url, options).await?)),
        other => Err(OpenError::Unsupported(other.to_string())),
    }
}

/// Maps any sqlx error to a store error: unique violations become conflicts, values the
/// database refuses to hold become [`StoreError::Rejected`], the rest `Unavailable`.
pub(crate) fn map_err(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        if db.is_unique_violation() {
            return StoreError::Conflict(db.message().to_string());
        }
        if is_data_exception(db.as_ref()) {
            return StoreError::Rejected(format!(
                "the database refused the value: {}",
                db.message()
            ));
        }
    }
    StoreError::Unavailable(e.to_string())
}

/// A data exception of MySQL or PostgreSQL: SQLSTATE class 22 (PostgreSQL's 22021 for a
/// NUL character, MySQL's 22001 "Data too long"), or MySQL 1366 "Incorrect string value",
/// which MariaDB reports as 22007 but MySQL as HY000. (SQLite's codes are not SQLSTATEs.)
fn is_data_exception(db: &dyn sqlx::error::DatabaseError) -> bool {
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return my.number() == 1366 || my.code().is_some_and(|c| c.starts_with("22"));
    }
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        return pg.code().starts_with("22");
    }
    false
}
