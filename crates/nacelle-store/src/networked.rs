//! The backend of a database server (MySQL/MariaDB, PostgreSQL): one [`Backend`] over a
//! [`Server`] dialect, which says only what truly differs (how to connect, lock the
//! schema, return generated ids, check encodings, refuse values).
//!
//! A write is one transaction per attempt: the one write executor (`write.rs`) locks the
//! rows (`SELECT … FOR UPDATE`), plans and executes on a [`SqlxWrite`]; then it commits.
//! Losing a first insert to a concurrent one, or a deadlock, retries the whole transaction
//! ([`with_retries`]). [`open`] puts the store behind the deadline layer
//! ([`crate::deadline`]), which bounds every call.

use async_trait::async_trait;
use nacelle_core::store::Layered;
use nacelle_core::StoreError;
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool, Row};

use crate::deadline::{timed, Deadline};
use crate::dialect::Arg;
use crate::plan::Current;
use crate::queries::{Queries, Returns, Statement};
use crate::retry::{with_retries, TxError};
use crate::sql::{self, GeneratedIds};
use crate::store::{Backend, Checked, QuerySet, Store};
use crate::write::{Step, WriteConn};
use crate::{map_err, schema, OpenError, StoreOptions};

/// A schema script: version, description, SQL.
pub type Migration = (i64, &'static str, &'static str);

/// What differs between MySQL and PostgreSQL beyond the spelling of SQL.
#[async_trait]
pub trait Server: GeneratedIds + std::fmt::Debug + 'static {
    /// The backend's name for logs ("mysql", "postgres").
    const BACKEND: &'static str;
    /// Schema scripts, applied in order.
    const MIGRATIONS: &'static [Migration];
    /// Creates `nacelle_schema_version` when absent.
    const SCHEMA_VERSION_DDL: &'static str;
    /// The newest applied version as column `n`.
    const SCHEMA_VERSION_SQL: &'static str;
    /// The versions recorded, as column `version` (a signed 64-bit integer).
    const APPLIED_VERSIONS_SQL: &'static str;
    /// Records an applied script: version, description, ms.
    const RECORD_VERSION_SQL: &'static str;
    /// The `(t, c)` table and column names of the current database.
    const COLUMNS_SQL: &'static str;

    /// SQL run on every new connection (lock wait, session settings).
    fn session_sql(options: &StoreOptions) -> String;
    /// Starts a new connection's session: runs `session` ([`Server::session_sql`]), then
    /// whatever depends on the server the connection reached.
    async fn start_session(conn: &mut Self::Connection, session: &str) -> Result<(), sqlx::Error> {
        Self::script(conn, session).await
    }
    /// Takes the lock under which nodes apply the schema one at a time.
    async fn lock_schema(conn: &mut Self::Connection) -> Result<(), StoreError>;
    /// Releases it.
    async fn unlock_schema(conn: &mut Self::Connection) -> Result<(), StoreError>;
    /// Warns at start when the database cannot hold every character a client may send.
    async fn check_encoding(pool: &Pool<Self>) -> Result<(), StoreError>;
    /// Refuses a write whose values the database cannot store, before it reaches the
    /// database.
    fn refuse(_write: Checked<'_>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The backend of MySQL/MariaDB or PostgreSQL: one pool for everything; the store is
/// [`Store`] over it, without deadlines: [`open`] is how it is used, behind the deadline
/// layer.
#[derive(Debug)]
pub struct ServerBackend<DB: Server> {
    pool: Pool<DB>,
    queries: QuerySet,
}

/// Opens the store of `DB` behind the deadline layer: every call is bounded by
/// `options.op_timeout` (a whole-table load and a batch by multiples of it).
pub(crate) async fn open<DB: Server>(
    connect: <DB::Connection as Connection>::Options,
    options: &StoreOptions,
) -> Result<Layered<Deadline<Store<ServerBackend<DB>>>>, OpenError> {
    let backend = ServerBackend::connect(connect, options).await?;
    Ok(Layered(Deadline::new(Store(backend), options.op_timeout)))
}

impl<DB: Server> ServerBackend<DB> {
    /// Opens the pool, applies the schema scripts not yet applied and checks the columns.
    async fn connect(
        connect: <DB::Connection as Connection>::Options,
        options: &StoreOptions,
    ) -> Result<Self, OpenError> {
        let session = DB::session_sql(options);
        let pool = PoolOptions::<DB>::new()
            .max_connections(options.max_connections)
            .min_connections(0)
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(true)
            .after_connect(move |conn, _meta| {
                let session = session.clone();
                Box::pin(async move { DB::start_session(conn, &session).await })
            })
            .connect_with(connect)
            .await
            .map_err(|e| OpenError::Store(map_err(e)))?;
        let mut store = ServerBackend {
            pool,
            queries: QuerySet::new::<DB>(),
        };
        timed("migrate", options.op_timeout * 6, store.migrate())
            .await
            .map_err(OpenError::Store)?;
        if store.check_schema().await? {
            // A Nacos 2.5/3.0 database: gray writes get their history rows there too.
            tracing::info!(
                "his_config_info has publish_type (Nacos 2.5/3.0): gray writes are also \
                 recorded there, formal history reads only formal rows"
            );
            store.queries.config = Queries::for_schema::<DB>(true);
        }
        Ok(store)
    }

    /// Applies the schema scripts not yet recorded, in one transaction, under the schema
    /// lock so that nodes starting together take turns.
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        DB::lock_schema(&mut conn).await?;
        let result = Self::migrate_locked(&mut conn).await;
        let unlocked = DB::unlock_schema(&mut conn).await;
        result.and(unlocked)
    }

    async fn migrate_locked(conn: &mut DB::Connection) -> Result<(), StoreError> {
        // MySQL commits DDL implicitly; the transaction still holds the version rows.
        let mut tx = conn.begin().await.map_err(map_err)?;
        DB::script(&mut tx, DB::SCHEMA_VERSION_DDL)
            .await
            .map_err(map_err)?;
        let current = match DB::row(&mut tx, DB::SCHEMA_VERSION_SQL, &[])
            .await
            .map_err(map_err)?
        {
            Some(r) => DB::int(&r, "n")?,
            None => 0,
        };
        let latest = DB::MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        if current > latest {
            tracing::warn!(
                "database schema version {current} is newer than this build knows ({latest})"
            );
        }
        // Every script not recorded yet runs, in version order — also one numbered below
        // the newest recorded (features developed side by side took numbers in the order
        // they began; a database one of them migrated first still gets the others).
        let applied: Vec<i64> = DB::rows(&mut tx, DB::APPLIED_VERSIONS_SQL, &[])
            .await
            .map_err(map_err)?
            .iter()
            .map(|r| DB::int(r, "version"))
            .collect::<Result<_, _>>()?;
        for (version, description, script) in DB::MIGRATIONS {
            if applied.contains(version) {
                continue;
            }
            for statement in schema::statements(script) {
                DB::script(&mut tx, &statement).await.map_err(|e| {
                    StoreError::Unavailable(format!("schema script {version} failed: {e}"))
                })?;
            }
            let args = [
                Arg::Int(*version),
                Arg::Text(description),
                Arg::Int(nacelle_core::now_millis()),
            ];
            DB::run(&mut tx, DB::RECORD_VERSION_SQL, &args)
                .await
                .map_err(map_err)?;
            tracing::info!("{} schema: applied {version} ({description})", DB::BACKEND);
        }
        tx.commit().await.map_err(map_err)
    }

    /// Checks that the tables have every column we read and write (Nacos before 2.1 lacks
    /// `encrypted_data_key`), and warns about encodings that cannot hold every character.
    /// Answers whether `his_config_info` has Nacos 2.5/3.0's `publish_type`, `gray_name`
    /// and `ext_info`.
    async fn check_schema(&self) -> Result<bool, OpenError> {
        DB::check_encoding(&self.pool).await?;
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        let rows = DB::rows(&mut conn, DB::COLUMNS_SQL, &[])
            .await
            .map_err(map_err)?;
        let present = rows
            .iter()
            .map(|r| Ok((DB::text(r, "t")?, DB::text(r, "c")?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let missing = schema::missing_columns(&present);
        let has = |c: &str| {
            present.iter().any(|(t, col)| {
                t.eq_ignore_ascii_case("his_config_info") && col.eq_ignore_ascii_case(c)
            })
        };
        if missing.is_empty() {
            Ok(has("publish_type") && has("gray_name") && has("ext_info"))
        } else {
            Err(OpenError::Schema(format!(
                "the database lacks column(s) {} (a Nacos database older than 2.1?); add them \
                 with Nacos's upgrade script: Nacelle never alters Nacos's tables",
                missing.join(", ")
            )))
        }
    }
}

impl<DB: Server> ServerBackend<DB> {
    /// One attempt at `step`, in one transaction.
    async fn write_once<S: Step>(&self, step: &S) -> Result<S::Out, TxError> {
        let mut tx = self.pool.begin().await?;
        let out = step
            .run(&mut SqlxWrite::<DB> { conn: &mut tx }, &self.queries.config)
            .await?;
        tx.commit().await?;
        Ok(out)
    }
}

#[async_trait]
impl<DB: Server> Backend for ServerBackend<DB> {
    type Db = DB;

    fn name(&self) -> &'static str {
        DB::BACKEND
    }

    fn queries(&self) -> &QuerySet {
        &self.queries
    }

    fn reader(&self) -> &Pool<DB> {
        &self.pool
    }

    fn writer(&self) -> &Pool<DB> {
        &self.pool
    }

    /// Runs `step` in a transaction of its own, retried as a whole while it loses to
    /// concurrent writers.
    async fn write<S: Step>(&self, step: S) -> Result<S::Out, StoreError> {
        with_retries(|| self.write_once(&step)).await
    }

    async fn delete_logged(&self, sql: String) -> Result<u64, StoreError> {
        sql::delete_history(&self.pool, sql).await
    }

    fn refuse(&self, write: Checked<'_>) -> Result<(), StoreError> {
        DB::refuse(write)
    }
}

/// A write transaction of a sqlx backend, as the write executor uses it.
pub(crate) struct SqlxWrite<'c, DB: Server> {
    conn: &'c mut DB::Connection,
}

#[async_trait]
impl<DB: Server> WriteConn for SqlxWrite<'_, DB> {
    type Dialect = DB;
    type Error = TxError;

    fn raced(&self) -> TxError {
        TxError::Raced
    }

    async fn lock_row(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<(Current, String)>, TxError> {
        let Some(r) = DB::row(&mut *self.conn, sql, args).await? else {
            return Ok(None);
        };
        let current = Current::new(
            DB::int(&r, "id")?,
            DB::text(&r, "content")?,
            DB::text(&r, "md5")?,
            DB::text(&r, "app_name")?,
            DB::text(&r, "encrypted_data_key")?,
            DB::int(&r, "gmt_create")?,
        );
        let rule = if r.len() > 6 {
            DB::text(&r, "gray_rule")?
        } else {
            String::new()
        };
        Ok(Some((current, rule)))
    }

    async fn lock_change(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<(i64, String)>, TxError> {
        let Some(r) = DB::row(&mut *self.conn, sql, args).await? else {
            return Ok(None);
        };
        Ok(Some((DB::int(&r, "version")?, DB::text(&r, "state")?)))
    }

    async fn run(&mut self, st: &Statement<'_>, args: &[Arg<'_>]) -> Result<Option<i64>, TxError> {
        Ok(match st.returns {
            Returns::Nothing => DB::run(&mut *self.conn, st.sql, args).await.map(|_| None)?,
            returns => DB::insert_id(&mut *self.conn, st.sql, args, returns.column()).await?,
        })
    }
}
