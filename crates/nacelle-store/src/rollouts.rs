//! Staged rollouts (`nacelle_rollout`, docs/rollouts.md): create, read, version-checked
//! transitions and the lease of the node driving each, on a sqlx pool shared by every
//! backend (small writes, each its own statement or short transaction); their statements,
//! spelled once per dialect.

use nacelle_core::rollout::{
    active_key, NewRollout, Rollout, RolloutId, RolloutPlan, RolloutState, RolloutUpdate,
};
use nacelle_core::{ConfigKey, ConfigType, StoreError};
use sqlx::Pool;

use crate::dialect::{spell, Arg, Dialect};
use crate::map_err;
use crate::sql::{self, Exec};

/// The columns of a rollout row.
const ROLLOUT_COLUMNS: &str = "id, tenant_id, group_id, data_id, content, \
    config_type, base_md5, plan, state, step, step_started_ms, advanced_to, reason, \
    lease_holder, lease_until_ms, author, version, created_ms, updated_ms";

/// The statements of staged rollouts, spelled by one dialect.
#[derive(Debug, Clone)]
pub(crate) struct RolloutQueries {
    /// tenant, group, dataId, content, type, base md5, plan, state, active key, author,
    /// step started, created, updated.
    pub(crate) insert: String,
    pub(crate) get: String,
    /// Newest first: limit.
    pub(crate) list_all: String,
    /// Only running or paused: limit.
    pub(crate) list_active: String,
    /// state, step, step started, advanced to, reason, active key, updated, id, version.
    pub(crate) update: String,
    /// holder, until, id, holder, now.
    pub(crate) claim: String,
}

impl RolloutQueries {
    pub(crate) fn new<D: Dialect>() -> Self {
        let q = |s: String| spell::<D>(&s);
        RolloutQueries {
            insert: q(format!(
                "INSERT INTO nacelle_rollout (tenant_id, group_id, data_id, content, \
                 config_type, base_md5, plan, state, active_key, author, step, \
                 step_started_ms, advanced_to, reason, lease_holder, lease_until_ms, version, \
                 created_ms, updated_ms) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, -1, '', '', 0, 1, ?, ?){}",
                D::RETURNING_ID
            )),
            get: q(format!(
                "SELECT {ROLLOUT_COLUMNS} FROM nacelle_rollout WHERE id = ?"
            )),
            list_all: q(format!(
                "SELECT {ROLLOUT_COLUMNS} FROM nacelle_rollout ORDER BY id DESC LIMIT ?"
            )),
            list_active: q(format!(
                "SELECT {ROLLOUT_COLUMNS} FROM nacelle_rollout WHERE state IN ('{}', '{}') \
                 ORDER BY id DESC LIMIT ?",
                nacelle_core::rollout::RolloutState::Running.as_str(),
                nacelle_core::rollout::RolloutState::Paused.as_str()
            )),
            update: q(
                "UPDATE nacelle_rollout SET state = ?, step = ?, step_started_ms = ?, \
                 advanced_to = ?, reason = ?, active_key = ?, updated_ms = ?, \
                 version = version + 1 WHERE id = ? AND version = ?"
                    .into(),
            ),
            claim: q(format!(
                "UPDATE nacelle_rollout SET lease_holder = ?, lease_until_ms = ? \
                 WHERE id = ? AND state IN ('{}', '{}') \
                 AND (lease_holder = ? OR lease_until_ms < ?)",
                nacelle_core::rollout::RolloutState::Running.as_str(),
                nacelle_core::rollout::RolloutState::Paused.as_str()
            )),
        }
    }
}

fn bad_row(what: &str, value: &str) -> StoreError {
    StoreError::Unavailable(format!("unreadable rollout row: {what} `{value}`"))
}

fn rollout_of<DB: Exec>(row: &DB::Row) -> Result<Rollout, StoreError> {
    let state = DB::text(row, "state")?;
    let plan = DB::text(row, "plan")?;
    Ok(Rollout {
        id: DB::int(row, "id")?,
        key: ConfigKey::from_trusted(
            &DB::text(row, "tenant_id")?,
            &DB::text(row, "group_id")?,
            &DB::text(row, "data_id")?,
        ),
        content: DB::text(row, "content")?,
        config_type: ConfigType::parse_lenient(&DB::text(row, "config_type")?),
        base_md5: DB::text(row, "base_md5")?,
        plan: RolloutPlan::from_json(&plan).map_err(|_| bad_row("plan", &plan))?,
        state: RolloutState::parse(&state).ok_or_else(|| bad_row("state", &state))?,
        step: u32::try_from(DB::int(row, "step")?).unwrap_or(0),
        step_started_ms: DB::int(row, "step_started_ms")?,
        advanced_to: DB::int(row, "advanced_to")?,
        reason: DB::text(row, "reason")?,
        lease_holder: DB::text(row, "lease_holder")?,
        lease_until_ms: DB::int(row, "lease_until_ms")?,
        author: DB::text(row, "author")?,
        version: DB::int(row, "version")?,
        created_ms: DB::int(row, "created_ms")?,
        updated_ms: DB::int(row, "updated_ms")?,
    })
}

/// Creates a rollout, running at step 0; its id. A key with an active rollout is
/// `Conflict` (the unique `active_key`).
pub(crate) async fn create<DB: Exec>(
    pool: &Pool<DB>,
    q: &RolloutQueries,
    new: &NewRollout,
) -> Result<RolloutId, StoreError> {
    let plan = new.plan.to_json();
    let state = RolloutState::Running;
    // Unique until the id is known: the `#…` form of a finished rollout never collides.
    let active = active_key(0, &new.key, state);
    sql::in_transaction(pool, async |conn| {
        let args = [
            Arg::Text(new.key.tenant()),
            Arg::Text(new.key.group()),
            Arg::Text(new.key.data_id()),
            Arg::Text(&new.content),
            Arg::Text(new.config_type.as_str()),
            Arg::Text(&new.base_md5),
            Arg::Text(&plan),
            Arg::Text(state.as_str()),
            Arg::Text(&active),
            Arg::Text(&new.author),
            Arg::Int(new.now_ms),
            Arg::Int(new.now_ms),
            Arg::Int(new.now_ms),
        ];
        // Only the insert can meet a unique key: the active rollout of the key.
        let id = sql::insert_returning_id::<DB>(conn, &q.insert, &args, "rollout")
            .await
            .map_err(|e| match e {
                StoreError::Conflict(_) => StoreError::Conflict(format!(
                    "config {} has an active rollout already",
                    new.key
                )),
                other => other,
            })?;
        Ok(id)
    })
    .await
}

/// One rollout.
pub(crate) async fn get<DB: Exec>(
    pool: &Pool<DB>,
    q: &RolloutQueries,
    id: RolloutId,
) -> Result<Option<Rollout>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    match DB::row(&mut conn, &q.get, &[Arg::Int(id)])
        .await
        .map_err(map_err)?
    {
        Some(row) => Ok(Some(rollout_of::<DB>(&row)?)),
        None => Ok(None),
    }
}

/// Rollouts, newest first.
pub(crate) async fn list<DB: Exec>(
    pool: &Pool<DB>,
    q: &RolloutQueries,
    active_only: bool,
    limit: u32,
) -> Result<Vec<Rollout>, StoreError> {
    let sql = if active_only {
        &q.list_active
    } else {
        &q.list_all
    };
    let mut conn = pool.acquire().await.map_err(map_err)?;
    DB::rows(&mut conn, sql, &[Arg::Int(i64::from(limit.max(1)))])
        .await
        .map_err(map_err)?
        .iter()
        .map(rollout_of::<DB>)
        .collect()
}

/// Applies a transition if the version is still the expected one.
pub(crate) async fn update<DB: Exec>(
    pool: &Pool<DB>,
    q: &RolloutQueries,
    id: RolloutId,
    u: &RolloutUpdate,
) -> Result<Rollout, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let Some(row) = DB::row(&mut conn, &q.get, &[Arg::Int(id)])
        .await
        .map_err(map_err)?
    else {
        return Err(StoreError::NotFound(format!("rollout {id}")));
    };
    let current = rollout_of::<DB>(&row)?;
    let active = active_key(id, &current.key, u.state);
    let done = DB::run(
        &mut conn,
        &q.update,
        &[
            Arg::Text(u.state.as_str()),
            Arg::Int(i64::from(u.step)),
            Arg::Int(u.step_started_ms),
            Arg::Int(u.advanced_to),
            Arg::Text(&u.reason),
            Arg::Text(&active),
            Arg::Int(u.now_ms),
            Arg::Int(id),
            Arg::Int(u.expected_version),
        ],
    )
    .await
    .map_err(map_err)?;
    if DB::rows_affected(&done) == 0 {
        return Err(StoreError::CasMismatch);
    }
    let row = DB::row(&mut conn, &q.get, &[Arg::Int(id)])
        .await
        .map_err(map_err)?
        .ok_or_else(|| StoreError::NotFound(format!("rollout {id}")))?;
    rollout_of::<DB>(&row)
}

/// Takes or renews the lease; whether `node` holds it.
pub(crate) async fn claim<DB: Exec>(
    pool: &Pool<DB>,
    q: &RolloutQueries,
    id: RolloutId,
    node: &str,
    now_ms: i64,
    lease_ms: i64,
) -> Result<bool, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let done = DB::run(
        &mut conn,
        &q.claim,
        &[
            Arg::Text(node),
            Arg::Int(now_ms.saturating_add(lease_ms)),
            Arg::Int(id),
            Arg::Text(node),
            Arg::Int(now_ms),
        ],
    )
    .await
    .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}
