//! The store on a database server (MySQL/MariaDB, PostgreSQL): one implementation of
//! [`ConfigStore`] over a [`Server`] dialect, which says only what truly differs (how to
//! connect, lock the schema, return generated ids, check encodings, refuse values).
//!
//! A write is one transaction per attempt: lock the config row (`SELECT … FOR UPDATE`), plan
//! ([`crate::plan`]), execute the plan, commit. Losing a first insert to a concurrent one, or
//! a deadlock, retries the whole transaction ([`with_retries`]); every operation but
//! `load_all` is bounded by the operation deadline.

use std::time::Duration;

use async_trait::async_trait;
use nacelle_core::auth::{IdentityRecords, IdentityWrite};
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{BatchOutcome, SamePolicy};
use nacelle_core::{
    ChangeRecord, ConfigKey, ConfigStore, GrayHistoryEntry, HistoryEntry, HistoryLog,
    HistoryRetention, Namespace, OpSource, Page, PageRequest, PublishRecord, PurgeStep, StoreError,
    StoredConfig, StoredGray,
};
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool};

use crate::common::{self, timed, with_retries, TxError};
use crate::plan::{plan_publish, plan_remove, plan_remove_gray};
use crate::queries::{Arg, Queries};
use crate::sql::{self, GeneratedIds};
use crate::{map_err, OpenError, StoreOptions};

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
    /// Records an applied script: version, description, ms.
    const RECORD_VERSION_SQL: &'static str;
    /// The `(t, c)` table and column names of the current database.
    const COLUMNS_SQL: &'static str;

    /// SQL run on every new connection (lock wait, session settings).
    fn session_sql(options: &StoreOptions) -> String;
    /// Takes the lock under which nodes apply the schema one at a time.
    async fn lock_schema(conn: &mut Self::Connection) -> Result<(), StoreError>;
    /// Releases it.
    async fn unlock_schema(conn: &mut Self::Connection) -> Result<(), StoreError>;
    /// Warns at start when the database cannot hold every character a client may send.
    async fn check_encoding(pool: &Pool<Self>) -> Result<(), StoreError>;
    /// Refuses a publish the database cannot store, before it reaches the database.
    fn refuse_publish(_rec: &PublishRecord) -> Result<(), StoreError> {
        Ok(())
    }
    /// Refuses a remove the database cannot store.
    fn refuse_remove(_key: &ConfigKey, _source: &OpSource) -> Result<(), StoreError> {
        Ok(())
    }
    /// Refuses a namespace the database cannot store.
    fn refuse_namespace(_ns: &Namespace) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The store on MySQL/MariaDB or PostgreSQL.
#[derive(Debug)]
pub struct SqlStore<DB: Server> {
    pool: Pool<DB>,
    queries: Queries,
    /// Bound on every operation but `load_all` (see [`StoreOptions::op_timeout`]).
    op_timeout: Duration,
}

impl<DB: Server> SqlStore<DB> {
    /// Opens the pool, applies the schema scripts not yet applied and checks the columns.
    pub(crate) async fn connect(
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
                Box::pin(async move { DB::script(conn, &session).await })
            })
            .connect_with(connect)
            .await
            .map_err(|e| OpenError::Store(map_err(e)))?;
        let mut store = SqlStore {
            pool,
            queries: Queries::new::<DB>(),
            op_timeout: options.op_timeout,
        };
        timed(options.op_timeout * 6, store.migrate())
            .await
            .map_err(OpenError::Store)?;
        if store.check_schema().await? {
            // A Nacos 2.5/3.0 database: gray writes get their history rows there too.
            tracing::info!(
                "his_config_info has publish_type (Nacos 2.5/3.0): gray writes are also \
                 recorded there, formal history reads only formal rows"
            );
            store.queries = Queries::for_schema::<DB>(true);
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
        for (version, description, script) in DB::MIGRATIONS {
            if *version <= current {
                continue;
            }
            for statement in common::statements(script) {
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
        let missing = common::missing_columns(&present);
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

    /// One attempt at a publish (of the formal config or of a gray), in one transaction.
    async fn publish_once(&self, rec: &PublishRecord) -> Result<StoredConfig, TxError> {
        let mut tx = self.pool.begin().await?;
        let current = match &rec.gray {
            None => sql::lock_current::<DB>(&mut tx, &self.queries, &rec.key).await?,
            Some(spec) => sql::lock_gray::<DB>(&mut tx, &self.queries, &rec.key, &spec.name)
                .await?
                .map(|(current, _)| current),
        };
        let plan = plan_publish(rec, current.as_ref(), DB::stored_ms(rec.now_ms))?;
        let (id, revision) = sql::execute::<DB>(&mut tx, &self.queries, &plan).await?;
        tx.commit().await?;
        Ok(plan
            .stored(id, revision)
            .ok_or_else(|| StoreError::Unavailable("a publish was planned as a delete".into()))?)
    }

    /// One attempt at a batch publish, in one transaction (committed only when the batch
    /// was not aborted).
    async fn publish_batch_once(
        &self,
        records: &[PublishRecord],
        policy: SamePolicy,
    ) -> Result<BatchOutcome, TxError> {
        let mut tx = self.pool.begin().await?;
        let outcome = sql::execute_batch::<DB>(&mut tx, &self.queries, records, policy).await?;
        if matches!(outcome, BatchOutcome::Committed(_)) {
            tx.commit().await?;
        }
        Ok(outcome)
    }

    /// One attempt at a remove, in one transaction.
    async fn remove_once(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, TxError> {
        let mut tx = self.pool.begin().await?;
        let current = sql::lock_current::<DB>(&mut tx, &self.queries, key).await?;
        let Some(plan) = plan_remove(key, source, current.as_ref(), DB::stored_ms(now_ms)) else {
            return Ok(RemoveOutcome::Absent);
        };
        let (_, revision) = sql::execute::<DB>(&mut tx, &self.queries, &plan).await?;
        tx.commit().await?;
        Ok(RemoveOutcome::Removed { revision })
    }
}

impl<DB: Server> SqlStore<DB> {
    /// One attempt at removing a gray, in one transaction.
    async fn remove_gray_once(
        &self,
        key: &ConfigKey,
        name: &str,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, TxError> {
        let mut tx = self.pool.begin().await?;
        let Some((current, rule)) = sql::lock_gray::<DB>(&mut tx, &self.queries, key, name).await?
        else {
            return Ok(RemoveOutcome::Absent);
        };
        let now = DB::stored_ms(now_ms);
        let Some(plan) = plan_remove_gray(key, name, rule, source, Some(&current), now) else {
            return Ok(RemoveOutcome::Absent);
        };
        let (_, revision) = sql::execute::<DB>(&mut tx, &self.queries, &plan).await?;
        tx.commit().await?;
        Ok(RemoveOutcome::Removed { revision })
    }

    /// One attempt at a promotion, in one transaction: the gray's row is locked first,
    /// then the formal one (the order every gray write takes).
    async fn promote_once(&self, rec: &PublishRecord, name: &str) -> Result<StoredConfig, TxError> {
        let mut tx = self.pool.begin().await?;
        let q = &self.queries;
        let Some((gray, rule)) = sql::lock_gray::<DB>(&mut tx, q, &rec.key, name).await? else {
            return Err(StoreError::NotFound(format!("no gray `{name}`")).into());
        };
        if gray.md5 != rec.md5 {
            return Err(StoreError::CasMismatch.into());
        }
        let now = DB::stored_ms(rec.now_ms);
        let current = sql::lock_current::<DB>(&mut tx, q, &rec.key).await?;
        let plan = plan_publish(rec, current.as_ref(), now)?;
        let (id, revision) = sql::execute::<DB>(&mut tx, q, &plan).await?;
        let source = &rec.source;
        if let Some(drop) = plan_remove_gray(&rec.key, name, rule, source, Some(&gray), now) {
            sql::execute::<DB>(&mut tx, q, &drop).await?;
        }
        tx.commit().await?;
        Ok(plan
            .stored(id, revision)
            .ok_or_else(|| StoreError::Unavailable("a promotion was planned as a delete".into()))?)
    }
}

#[async_trait]
impl<DB: Server> ConfigStore for SqlStore<DB> {
    fn backend(&self) -> &'static str {
        DB::BACKEND
    }

    async fn load_all(&self) -> Result<Vec<StoredConfig>, StoreError> {
        sql::load_all(&self.pool, &self.queries).await
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<StoredConfig>, StoreError> {
        timed(self.op_timeout, sql::get(&self.pool, &self.queries, key)).await
    }

    async fn publish(&self, rec: &PublishRecord) -> Result<StoredConfig, StoreError> {
        DB::refuse_publish(rec)?;
        timed(self.op_timeout, with_retries(|| self.publish_once(rec))).await
    }

    async fn publish_batch(
        &self,
        records: &[PublishRecord],
        policy: SamePolicy,
    ) -> Result<BatchOutcome, StoreError> {
        for rec in records {
            DB::refuse_publish(rec)?;
        }
        // A batch holds many writes: its deadline grows with it (one operation deadline per
        // started 100 records), so a large import is not cut off while it makes progress.
        let parts = u32::try_from(records.len().div_ceil(100).max(1)).unwrap_or(u32::MAX);
        timed(
            self.op_timeout.saturating_mul(parts),
            with_retries(|| self.publish_batch_once(records, policy)),
        )
        .await
    }

    async fn remove(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        DB::refuse_remove(key, source)?;
        timed(
            self.op_timeout,
            with_retries(|| self.remove_once(key, source, now_ms)),
        )
        .await
    }

    async fn load_grays(&self) -> Result<Vec<StoredGray>, StoreError> {
        sql::load_grays(&self.pool, &self.queries).await
    }

    async fn grays_of(&self, key: &ConfigKey) -> Result<Vec<StoredGray>, StoreError> {
        timed(
            self.op_timeout,
            sql::grays_of(&self.pool, &self.queries, key),
        )
        .await
    }

    async fn remove_gray(
        &self,
        key: &ConfigKey,
        name: &str,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        DB::refuse_remove(key, source)?;
        timed(
            self.op_timeout,
            with_retries(|| self.remove_gray_once(key, name, source, now_ms)),
        )
        .await
    }

    async fn promote_gray(
        &self,
        record: &PublishRecord,
        name: &str,
    ) -> Result<StoredConfig, StoreError> {
        DB::refuse_publish(record)?;
        timed(
            self.op_timeout,
            with_retries(|| self.promote_once(record, name)),
        )
        .await
    }

    async fn gray_changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        let read = sql::gray_changes_since(&self.pool, &self.queries, after_nid, limit);
        timed(self.op_timeout, read).await
    }

    async fn gray_history(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<GrayHistoryEntry>, StoreError> {
        sql::gray_history(&self.pool, &self.queries, key, page).await
    }

    async fn max_gray_nid(&self) -> Result<i64, StoreError> {
        timed(
            self.op_timeout,
            sql::max_gray_nid(&self.pool, &self.queries),
        )
        .await
    }

    async fn history_page(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, StoreError> {
        let read = sql::history_page(&self.pool, &self.queries, key, page);
        timed(self.op_timeout, read).await
    }

    async fn history_entry(&self, nid: i64) -> Result<Option<HistoryEntry>, StoreError> {
        let read = sql::history_entry(&self.pool, &self.queries, nid);
        timed(self.op_timeout, read).await
    }

    async fn history_previous(&self, config_id: i64) -> Result<Option<HistoryEntry>, StoreError> {
        let read = sql::history_previous(&self.pool, &self.queries, config_id);
        timed(self.op_timeout, read).await
    }

    async fn list_namespaces(&self) -> Result<Vec<Namespace>, StoreError> {
        timed(
            self.op_timeout,
            sql::list_namespaces(&self.pool, &self.queries),
        )
        .await
    }

    async fn create_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        DB::refuse_namespace(ns)?;
        let write = sql::create_namespace(&self.pool, &self.queries, ns, now_ms);
        timed(self.op_timeout, write).await
    }

    async fn update_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        DB::refuse_namespace(ns)?;
        let write = sql::update_namespace(&self.pool, &self.queries, ns, now_ms);
        timed(self.op_timeout, write).await
    }

    async fn delete_namespace(&self, id: &nacelle_core::NamespaceId) -> Result<bool, StoreError> {
        timed(
            self.op_timeout,
            sql::delete_namespace(&self.pool, &self.queries, id.as_str()),
        )
        .await
    }

    async fn changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        let read = sql::changes_since(&self.pool, &self.queries, after_nid, limit);
        timed(self.op_timeout, read).await
    }

    async fn max_history_nid(&self) -> Result<i64, StoreError> {
        timed(
            self.op_timeout,
            sql::max_history_nid(&self.pool, &self.queries),
        )
        .await
    }

    async fn purge_history(
        &self,
        log: HistoryLog,
        rule: &HistoryRetention,
        after_nid: i64,
        batch: u32,
    ) -> Result<PurgeStep, StoreError> {
        let delete = |sql| sql::delete_history(&self.pool, sql);
        let q = self.queries.purge_of(log);
        let step = sql::purge_batch(&self.pool, q, rule, (after_nid, batch), delete);
        timed(self.op_timeout, step).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        timed(self.op_timeout, sql::ping(&self.pool)).await
    }

    async fn load_identities(&self) -> Result<IdentityRecords, StoreError> {
        let read = crate::identity::load(&self.pool, &self.queries);
        timed(self.op_timeout, read).await
    }

    async fn write_identity(&self, write: &IdentityWrite) -> Result<(), StoreError> {
        let write = crate::identity::write(&self.pool, &self.queries, write);
        timed(self.op_timeout, write).await
    }
}
