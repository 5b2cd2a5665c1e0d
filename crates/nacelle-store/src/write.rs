//! The one write executor: "read the rows under their locks, plan, execute the plan's
//! statements" for every write of a config or a gray, written once for every backend.
//!
//! A backend supplies only a [`WriteConn`]: a connection inside its write transaction
//! that reads a locked row and runs one statement. The sqlx backends (MySQL, PostgreSQL)
//! implement it over their transaction (`sql.rs`, committed and retried by
//! `networked.rs`), the SQLite writer thread over its rusqlite connection inside its
//! group transaction (`sqlite_writer.rs`, whose calls never wait). What is written is
//! decided by `plan.rs`, how it is spelled by `queries.rs`; so the backends differ only in
//! dialect and connection handling.

use async_trait::async_trait;
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    BatchItem, BatchOutcome, ConfigKey, OpSource, PublishRecord, SamePolicy, StoreError,
    StoredConfig,
};

use crate::dialect::{Arg, Dialect};
use crate::plan::{
    batch_order, plan_batch, plan_publish, plan_remove, plan_remove_gray, split_tags, BatchStep,
    Current, Plan,
};
use crate::queries::{self, key_args, Queries, Statement, Written};

/// A connection inside a write transaction, as the executor uses it.
#[async_trait]
pub(crate) trait WriteConn: Send {
    /// How the backend spells its statements.
    type Dialect: Dialect;
    /// What a failed step reports: a [`StoreError`], or more (a retryable conflict).
    type Error: From<StoreError> + Send;

    /// The error of a new config's insert that found its key taken by a concurrent insert.
    fn raced(&self) -> Self::Error;

    /// Reads the row of a lock statement (`lock_current`, `lock_gray`: `id, content, md5,
    /// app_name, encrypted_data_key, gmt_create[, gray_rule]`) under the dialect's row
    /// lock: the row and its rule column (`""` where the statement has none).
    async fn lock_row(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<(Current, String)>, Self::Error>;

    /// Reads a change request's `version` and `state` (`changes.rs`'s `lock_change`) under
    /// the dialect's row lock.
    async fn lock_change(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<(i64, String)>, Self::Error>;

    /// Runs `st` bound with `args`: the value it returns (a generated id), `None` when it
    /// returns nothing or, for an insert, when the unique key was taken.
    async fn run(
        &mut self,
        st: &Statement<'_>,
        args: &[Arg<'_>],
    ) -> Result<Option<i64>, Self::Error>;
}

/// The current row of `key`, under its lock.
pub(crate) async fn lock_current<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    key: &ConfigKey,
) -> Result<Option<Current>, C::Error> {
    let found = c.lock_row(&q.lock_current, &key_args(key)).await?;
    Ok(found.map(|(current, _)| current))
}

/// Gray `name` of `key` and its stored rule JSON, under its lock.
async fn lock_gray<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    key: &ConfigKey,
    name: &str,
) -> Result<Option<(Current, String)>, C::Error> {
    let [d, g, t] = key_args(key);
    c.lock_row(&q.lock_gray, &[d, g, t, Arg::Text(name)]).await
}

/// Time as the backend stores it (MySQL's `DATETIME`: whole seconds).
pub(crate) fn stored_ms<C: WriteConn>(ms: i64) -> i64 {
    <C::Dialect as Dialect>::stored_ms(ms)
}

/// Runs the statements of `plan`: the config row's id (generated for an insert) and the
/// new revision.
pub(crate) async fn execute<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    plan: &Plan<'_>,
) -> Result<(i64, i64), C::Error> {
    let mut written = Written::new(plan);
    for st in queries::statements::<C::Dialect>(q, plan) {
        let args = written.args(&st)?;
        let value = c.run(&st, &args).await?;
        if !written.record(&st, value) {
            return Err(c.raced());
        }
    }
    Ok(written.finish()?)
}

/// The config a committed publish plan stored.
pub(crate) fn stored(plan: &Plan<'_>, id: i64, revision: i64) -> Result<StoredConfig, StoreError> {
    plan.stored(id, revision)
        .ok_or_else(|| StoreError::Unavailable("a publish was planned as a delete".into()))
}

/// Publishes `rec` (the formal config, or the gray `rec.gray` names).
async fn publish<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    rec: &PublishRecord,
) -> Result<StoredConfig, C::Error> {
    let current = match &rec.gray {
        None => lock_current(c, q, &rec.key).await?,
        Some(spec) => lock_gray(c, q, &rec.key, &spec.name)
            .await?
            .map(|(cur, _)| cur),
    };
    let plan = plan_publish(rec, current.as_ref(), stored_ms::<C>(rec.now_ms))?;
    let (id, revision) = execute(c, q, &plan).await?;
    Ok(stored(&plan, id, revision)?)
}

/// A batch publish: locks the current row of every record in key order
/// ([`batch_order`]), decides the batch ([`plan_batch`]) and executes each written
/// record's plan, in key order too.
async fn publish_batch<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    records: &[PublishRecord],
    policy: SamePolicy,
) -> Result<BatchOutcome, C::Error> {
    let order = batch_order(records)?;
    let mut currents: Vec<Option<Current>> = vec![None; records.len()];
    for &i in &order {
        currents[i] = lock_current(c, q, &records[i].key).await?;
    }
    let steps = plan_batch(&currents, policy);
    let mut items: Vec<BatchItem> = steps
        .iter()
        .map(|s| match s {
            BatchStep::Conflict => BatchItem::Conflict,
            BatchStep::Write | BatchStep::Skip => BatchItem::Skipped,
        })
        .collect();
    for &i in order.iter().filter(|&&i| steps[i] == BatchStep::Write) {
        let rec = &records[i];
        let plan = plan_publish(rec, currents[i].as_ref(), stored_ms::<C>(rec.now_ms))?;
        let (id, revision) = execute(c, q, &plan).await?;
        items[i] = BatchItem::Written(Box::new(stored(&plan, id, revision)?));
    }
    Ok(BatchOutcome { items })
}

/// Removes the formal config of `key`.
async fn remove<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    key: &ConfigKey,
    source: &OpSource,
    now_ms: i64,
) -> Result<RemoveOutcome, C::Error> {
    let current = lock_current(c, q, key).await?;
    let Some(plan) = plan_remove(key, source, current.as_ref(), stored_ms::<C>(now_ms)) else {
        return Ok(RemoveOutcome::Absent);
    };
    let (_, revision) = execute(c, q, &plan).await?;
    Ok(RemoveOutcome::Removed { revision })
}

/// Removes gray `name` of `key`.
async fn remove_gray<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    key: &ConfigKey,
    name: &str,
    source: &OpSource,
    now_ms: i64,
) -> Result<RemoveOutcome, C::Error> {
    let Some((current, rule)) = lock_gray(c, q, key, name).await? else {
        return Ok(RemoveOutcome::Absent);
    };
    let now = stored_ms::<C>(now_ms);
    let Some(plan) = plan_remove_gray(key, name, rule, source, Some(&current), now) else {
        return Ok(RemoveOutcome::Absent);
    };
    let (_, revision) = execute(c, q, &plan).await?;
    Ok(RemoveOutcome::Removed { revision })
}

/// Promotes gray `name`: `rec` becomes the formal config and the gray goes. The gray's row
/// is locked first, then the formal one (the order every gray write takes); the checks
/// come before anything is written, so a refused promotion writes nothing.
async fn promote<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    rec: &PublishRecord,
    name: &str,
) -> Result<StoredConfig, C::Error> {
    let Some((gray, rule)) = lock_gray(c, q, &rec.key, name).await? else {
        return Err(StoreError::NotFound(format!("no gray `{name}`")).into());
    };
    if gray.md5 != rec.md5 {
        return Err(StoreError::CasMismatch.into());
    }
    let now = stored_ms::<C>(rec.now_ms);
    let current = lock_current(c, q, &rec.key).await?;
    let plan = plan_publish(rec, current.as_ref(), now)?;
    let (id, revision) = execute(c, q, &plan).await?;
    let source = &rec.source;
    if let Some(drop) = plan_remove_gray(&rec.key, name, rule, source, Some(&gray), now) {
        execute(c, q, &drop).await?;
    }
    Ok(stored(&plan, id, revision)?)
}

/// Changes the description and the tags of `key`'s formal config in place (no history
/// row, nothing else of the row touched); [`StoreError::NotFound`] when it is absent.
async fn update_metadata<C: WriteConn>(
    c: &mut C,
    q: &Queries,
    key: &ConfigKey,
    desc: Option<&str>,
    config_tags: Option<&str>,
) -> Result<(), C::Error> {
    let Some(current) = lock_current(c, q, key).await? else {
        return Err(StoreError::NotFound(format!("config `{key}`")).into());
    };
    let tags = config_tags.map(split_tags);
    for st in queries::metadata_statements(q, key, current.id, desc, tags.as_deref()) {
        let args = Written::fixed(&st)?;
        c.run(&st, &args).await?;
    }
    Ok(())
}

/// One write, as a value the executor runs on any [`WriteConn`]: the sqlx backends run
/// it in a transaction of their own (again, as a whole, when it lost to a concurrent
/// writer), the SQLite writer thread inside its group transaction.
#[async_trait]
pub(crate) trait Step: Send + Sync + 'static {
    /// What the write answers.
    type Out: Send + 'static;

    /// Runs the write on `c`, inside its transaction.
    async fn run<C: WriteConn>(&self, c: &mut C, q: &Queries) -> Result<Self::Out, C::Error>;

    /// Whether the write may have left part of itself written when it failed with `err`.
    /// Refusals decided before anything is written (a compare-and-set failure, a missing
    /// row) have not, so the writes sharing its transaction (SQLite's group) go on.
    fn wrote_part(_err: &StoreError) -> bool {
        true
    }
}

/// A publish of the formal config or of a gray.
pub(crate) struct Publish(pub PublishRecord);

#[async_trait]
impl Step for Publish {
    type Out = StoredConfig;

    async fn run<C: WriteConn>(&self, c: &mut C, q: &Queries) -> Result<StoredConfig, C::Error> {
        publish(c, q, &self.0).await
    }

    fn wrote_part(err: &StoreError) -> bool {
        !matches!(err, StoreError::CasMismatch)
    }
}

/// A batch publish under a [`SamePolicy`].
pub(crate) struct PublishBatch(pub Vec<PublishRecord>, pub SamePolicy);

#[async_trait]
impl Step for PublishBatch {
    type Out = BatchOutcome;

    async fn run<C: WriteConn>(&self, c: &mut C, q: &Queries) -> Result<BatchOutcome, C::Error> {
        publish_batch(c, q, &self.0, self.1).await
    }
}

/// The removal of a formal config: key, source, time.
pub(crate) struct Remove(pub ConfigKey, pub OpSource, pub i64);

#[async_trait]
impl Step for Remove {
    type Out = RemoveOutcome;

    async fn run<C: WriteConn>(&self, c: &mut C, q: &Queries) -> Result<RemoveOutcome, C::Error> {
        remove(c, q, &self.0, &self.1, self.2).await
    }
}

/// The removal of a gray: key, gray name, source, time.
pub(crate) struct RemoveGray(pub ConfigKey, pub String, pub OpSource, pub i64);

#[async_trait]
impl Step for RemoveGray {
    type Out = RemoveOutcome;

    async fn run<C: WriteConn>(&self, c: &mut C, q: &Queries) -> Result<RemoveOutcome, C::Error> {
        remove_gray(c, q, &self.0, &self.1, &self.2, self.3).await
    }
}

/// The promotion of a gray: the formal record it becomes, the gray's name.
pub(crate) struct Promote(pub PublishRecord, pub String);

#[async_trait]
impl Step for Promote {
    type Out = StoredConfig;

    async fn run<C: WriteConn>(&self, c: &mut C, q: &Queries) -> Result<StoredConfig, C::Error> {
        promote(c, q, &self.0, &self.1).await
    }

    fn wrote_part(err: &StoreError) -> bool {
        !matches!(err, StoreError::CasMismatch | StoreError::NotFound(_))
    }
}

/// A metadata update: key, description, tags (`None`: left as they are).
pub(crate) struct UpdateMetadata(pub ConfigKey, pub Option<String>, pub Option<String>);

#[async_trait]
impl Step for UpdateMetadata {
    type Out = ();

    async fn run<C: WriteConn>(&self, c: &mut C, q: &Queries) -> Result<(), C::Error> {
        let (desc, tags) = (self.1.as_deref(), self.2.as_deref());
        update_metadata(c, q, &self.0, desc, tags).await
    }

    fn wrote_part(err: &StoreError) -> bool {
        !matches!(err, StoreError::NotFound(_))
    }
}
