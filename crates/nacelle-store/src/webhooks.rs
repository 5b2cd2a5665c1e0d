//! Webhooks and their deliveries (`nacelle_webhook`, `nacelle_webhook_delivery`; schema
//! script 7; docs/webhooks.md): their statements, spelled once per dialect, and the code
//! shared by every backend: reads on the reader pool, writes on the writer pool (SQLite:
//! its one connection).
//!
//! A delivery is sent by one sender at a time, on any number of nodes sharing the
//! database: a claim reads due, unleased candidates and then takes each with a
//! compare-and-set `UPDATE … WHERE id = ? AND status = 'pending' AND lease_until_ms <= now`
//! (one statement per row, each its own transaction: the database's row lock makes two
//! claimers of one row take turns, and the second finds the lease set and updates
//! nothing). Only the claim's owner records the outcome, so a sender whose lease ran out
//! and whose row was claimed again cannot overwrite the newer attempt.

use nacelle_core::webhook::{
    Delivery, DeliveryClaim, DeliveryResult, DeliveryStatus, NewDelivery, Webhook,
};
use nacelle_core::{NamespaceId, Page, PageRequest, StoreError};
use sqlx::Pool;

use crate::dialect::{spell, Arg, Dialect};
use crate::map_err;
use crate::sql::{self, Exec};

/// The columns of a webhook, in the order of [`WebhookQueries::insert`] after `id`.
const WEBHOOK_COLUMNS: &str =
    "tenant_id, group_pattern, data_id_pattern, url, secret, events, enabled, description, \
     created_by, created_ms, updated_ms";

/// The columns of a delivery as read.
const DELIVERY_COLUMNS: &str =
    "id, hook_id, event_id, kind, body, status, attempts, last_code, last_error, \
     next_attempt_ms, created_ms, updated_ms";

/// The statements of webhooks and their deliveries.
#[derive(Debug, Clone)]
pub(crate) struct WebhookQueries {
    pub(crate) load: String,
    /// A new webhook: [`WEBHOOK_COLUMNS`]; the id comes back as column `id` (MySQL:
    /// `LAST_INSERT_ID()`, [`crate::sql::insert_returning_id`]).
    pub(crate) insert: String,
    pub(crate) exists: String,
    /// Every column but `id`, `created_by` and `created_ms`, then the id.
    pub(crate) update: String,
    pub(crate) delete: String,
    pub(crate) delete_deliveries_of: String,
    /// hook, event id, kind, body, due (= created), created, updated.
    pub(crate) insert_delivery: String,
    /// Candidates of a claim: now (due), now (lease), limit.
    pub(crate) claimable: String,
    /// Compare-and-set of one row: owner, lease until, id, now.
    pub(crate) claim_one: String,
    /// The rows of an owner.
    pub(crate) claimed: String,
    /// status, code, error, next attempt, now, id, owner.
    pub(crate) finish: String,
    pub(crate) count_of_hook: String,
    /// hook, limit, offset.
    pub(crate) page_of_hook: String,
    /// now (due), now (updated), id.
    pub(crate) redeliver: String,
    /// Purge candidates: before, limit.
    pub(crate) purgeable: String,
    /// `DELETE … WHERE id IN (` before the list of ids.
    pub(crate) delete_prefix: &'static str,
}

impl WebhookQueries {
    pub(crate) fn new<D: Dialect>() -> Self {
        let q = |s: String| spell::<D>(&s);
        WebhookQueries {
            load: q(format!(
                "SELECT id, {WEBHOOK_COLUMNS} FROM nacelle_webhook ORDER BY id"
            )),
            insert: q(format!(
                "INSERT INTO nacelle_webhook ({WEBHOOK_COLUMNS}) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?){}",
                D::RETURNING_ID
            )),
            exists: q(format!(
                "SELECT {} AS n FROM nacelle_webhook WHERE id = ?",
                D::signed("COUNT(*)")
            )),
            update: q(
                "UPDATE nacelle_webhook SET tenant_id = ?, group_pattern = ?, \
                 data_id_pattern = ?, url = ?, secret = ?, events = ?, enabled = ?, \
                 description = ?, updated_ms = ? WHERE id = ?"
                    .into(),
            ),
            delete: q("DELETE FROM nacelle_webhook WHERE id = ?".into()),
            delete_deliveries_of: q("DELETE FROM nacelle_webhook_delivery WHERE hook_id = ?".into()),
            insert_delivery: q(
                "INSERT INTO nacelle_webhook_delivery (hook_id, event_id, kind, \
                 body, status, attempts, last_code, last_error, next_attempt_ms, lease_owner, \
                 lease_until_ms, created_ms, updated_ms) \
                 VALUES (?, ?, ?, ?, 'pending', 0, 0, '', ?, '', 0, ?, ?)"
                    .into(),
            ),
            claimable: q(
                "SELECT id FROM nacelle_webhook_delivery WHERE status = 'pending' \
                 AND next_attempt_ms <= ? AND lease_until_ms <= ? \
                 ORDER BY next_attempt_ms, id LIMIT ?"
                    .into(),
            ),
            claim_one: q("UPDATE nacelle_webhook_delivery SET lease_owner = ?, \
                 lease_until_ms = ? WHERE id = ? AND status = 'pending' AND lease_until_ms <= ?"
                .into()),
            claimed: q(format!(
                "SELECT {DELIVERY_COLUMNS} FROM nacelle_webhook_delivery \
                 WHERE lease_owner = ? AND status = 'pending' ORDER BY next_attempt_ms, id"
            )),
            finish: q(
                "UPDATE nacelle_webhook_delivery SET status = ?, attempts = attempts + 1, \
                 last_code = ?, last_error = ?, next_attempt_ms = ?, updated_ms = ?, \
                 lease_owner = '', lease_until_ms = 0 WHERE id = ? AND lease_owner = ?"
                    .into(),
            ),
            count_of_hook: q(format!(
                "SELECT {} AS n FROM nacelle_webhook_delivery WHERE hook_id = ?",
                D::signed("COUNT(*)")
            )),
            page_of_hook: q(format!(
                "SELECT {DELIVERY_COLUMNS} FROM nacelle_webhook_delivery WHERE hook_id = ? \
                 ORDER BY id DESC LIMIT ? OFFSET ?"
            )),
            redeliver: q(
                "UPDATE nacelle_webhook_delivery SET status = 'pending', attempts = 0, \
                 next_attempt_ms = ?, updated_ms = ?, lease_owner = '', lease_until_ms = 0 \
                 WHERE id = ? AND status <> 'pending'"
                    .into(),
            ),
            purgeable: q(
                "SELECT id FROM nacelle_webhook_delivery WHERE status <> 'pending' \
                 AND created_ms < ? ORDER BY id LIMIT ?"
                    .into(),
            ),
            delete_prefix: "DELETE FROM nacelle_webhook_delivery WHERE id IN (",
        }
    }
}

/// The longest error text kept of an attempt (the column's length).
const MAX_ERROR_CHARS: usize = 1000;

fn hook_of<DB: Exec>(row: &DB::Row) -> Result<Webhook, StoreError> {
    Ok(Webhook {
        id: DB::int(row, "id")?,
        namespace: NamespaceId::from_trusted(&DB::text(row, "tenant_id")?),
        group_pattern: DB::text(row, "group_pattern")?,
        data_id_pattern: DB::text(row, "data_id_pattern")?,
        url: DB::text(row, "url")?,
        secret: DB::text(row, "secret")?,
        events: Webhook::events_of(&DB::text(row, "events")?),
        enabled: DB::int(row, "enabled")? != 0,
        description: DB::text(row, "description")?,
        created_by: DB::text(row, "created_by")?,
        created_ms: DB::int(row, "created_ms")?,
        updated_ms: DB::int(row, "updated_ms")?,
    })
}

fn delivery_of<DB: Exec>(row: &DB::Row) -> Result<Delivery, StoreError> {
    let status = DB::text(row, "status")?;
    Ok(Delivery {
        id: DB::int(row, "id")?,
        hook_id: DB::int(row, "hook_id")?,
        event_id: DB::text(row, "event_id")?,
        kind: DB::text(row, "kind")?,
        body: DB::text(row, "body")?,
        status: DeliveryStatus::parse(&status).ok_or_else(|| {
            StoreError::Unavailable(format!("unreadable webhook delivery status `{status}`"))
        })?,
        attempts: u32::try_from(DB::int(row, "attempts")?).unwrap_or(0),
        last_code: u16::try_from(DB::int(row, "last_code")?).unwrap_or(0),
        last_error: DB::text(row, "last_error")?,
        next_attempt_ms: DB::int(row, "next_attempt_ms")?,
        created_ms: DB::int(row, "created_ms")?,
        updated_ms: DB::int(row, "updated_ms")?,
    })
}

/// Every webhook, by id.
pub(crate) async fn load<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
) -> Result<Vec<Webhook>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let rows = DB::rows(&mut conn, &q.load, &[]).await.map_err(map_err)?;
    rows.iter().map(hook_of::<DB>).collect()
}

/// The fields of a webhook its owner sets (`events`: its events as stored), in the column
/// order the insert and the update share.
fn settings<'a>(h: &'a Webhook, events: &'a str) -> [Arg<'a>; 8] {
    [
        Arg::Text(h.namespace.as_str()),
        Arg::Text(&h.group_pattern),
        Arg::Text(&h.data_id_pattern),
        Arg::Text(&h.url),
        Arg::Text(&h.secret),
        Arg::Text(events),
        Arg::Int(i64::from(h.enabled)),
        Arg::Text(&h.description),
    ]
}

/// Inserts a webhook; its new id.
pub(crate) async fn create<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    h: &Webhook,
) -> Result<i64, StoreError> {
    sql::in_transaction(pool, async |conn| {
        let events = h.events_text();
        let mut args = settings(h, &events).to_vec();
        args.extend([
            Arg::Text(&h.created_by),
            Arg::Int(h.created_ms),
            Arg::Int(h.updated_ms),
        ]);
        let id = sql::insert_returning_id::<DB>(conn, &q.insert, &args, "webhook").await?;
        Ok(id)
    })
    .await
}

/// Replaces a webhook's fields; whether it exists.
pub(crate) async fn update<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    h: &Webhook,
) -> Result<bool, StoreError> {
    sql::in_transaction(pool, async |conn| {
        let events = h.events_text();
        let mut args = settings(h, &events).to_vec();
        args.extend([Arg::Int(h.updated_ms), Arg::Int(h.id)]);
        DB::run(conn, &q.update, &args).await.map_err(map_err)?;
        // MySQL counts only the rows an UPDATE changed: ask whether the row is there.
        let n = match DB::row(conn, &q.exists, &[Arg::Int(h.id)])
            .await
            .map_err(map_err)?
        {
            Some(row) => DB::int(&row, "n")?,
            None => 0,
        };
        Ok(n > 0)
    })
    .await
}

/// Deletes a webhook and its deliveries in one transaction; whether it existed.
pub(crate) async fn delete<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    id: i64,
) -> Result<bool, StoreError> {
    sql::in_transaction(pool, async |conn| {
        DB::run(conn, &q.delete_deliveries_of, &[Arg::Int(id)])
            .await
            .map_err(map_err)?;
        let done = DB::run(conn, &q.delete, &[Arg::Int(id)])
            .await
            .map_err(map_err)?;
        Ok(DB::rows_affected(&done) > 0)
    })
    .await
}

/// Inserts pending deliveries in one transaction.
pub(crate) async fn enqueue<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    deliveries: &[NewDelivery],
) -> Result<(), StoreError> {
    if deliveries.is_empty() {
        return Ok(());
    }
    sql::in_transaction(pool, async |conn| {
        for d in deliveries {
            let args = [
                Arg::Int(d.hook_id),
                Arg::Text(&d.event_id),
                Arg::Text(&d.kind),
                Arg::Text(&d.body),
                Arg::Int(d.created_ms),
                Arg::Int(d.created_ms),
                Arg::Int(d.created_ms),
            ];
            DB::run(conn, &q.insert_delivery, &args)
                .await
                .map_err(map_err)?;
        }
        Ok(())
    })
    .await
}

/// Claims due deliveries for `claim.owner`: each candidate by a compare-and-set of its
/// lease; answers the rows won.
pub(crate) async fn claim<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    claim: &DeliveryClaim,
) -> Result<Vec<Delivery>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let args = [
        Arg::Int(claim.now_ms),
        Arg::Int(claim.now_ms),
        Arg::Int(i64::from(claim.limit.max(1))),
    ];
    let rows = DB::rows(&mut conn, &q.claimable, &args)
        .await
        .map_err(map_err)?;
    let mut won = 0;
    for row in &rows {
        let id = DB::int(row, "id")?;
        let args = [
            Arg::Text(&claim.owner),
            Arg::Int(claim.lease_until_ms),
            Arg::Int(id),
            Arg::Int(claim.now_ms),
        ];
        let done = DB::run(&mut conn, &q.claim_one, &args)
            .await
            .map_err(map_err)?;
        won += DB::rows_affected(&done);
    }
    if won == 0 {
        return Ok(Vec::new());
    }
    let rows = DB::rows(&mut conn, &q.claimed, &[Arg::Text(&claim.owner)])
        .await
        .map_err(map_err)?;
    rows.iter().map(delivery_of::<DB>).collect()
}

/// Records an attempt of a delivery its owner still holds; whether it did.
pub(crate) async fn finish<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    id: i64,
    owner: &str,
    r: &DeliveryResult,
) -> Result<bool, StoreError> {
    let error: String = r.error.chars().take(MAX_ERROR_CHARS).collect();
    let args = [
        Arg::Text(r.status.as_str()),
        Arg::Int(i64::from(r.code)),
        Arg::Text(&error),
        Arg::Int(r.next_attempt_ms),
        Arg::Int(r.now_ms),
        Arg::Int(id),
        Arg::Text(owner),
    ];
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let done = DB::run(&mut conn, &q.finish, &args)
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}

/// The deliveries of one webhook, newest first.
pub(crate) async fn page<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    hook_id: i64,
    page: PageRequest,
) -> Result<Page<Delivery>, StoreError> {
    let sqls = (q.count_of_hook.as_str(), q.page_of_hook.as_str());
    sql::read_page(pool, sqls, &[Arg::Int(hook_id)], page, delivery_of::<DB>).await
}

/// Makes a finished delivery pending again; whether it was finished.
pub(crate) async fn redeliver<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    id: i64,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let args = [Arg::Int(now_ms), Arg::Int(now_ms), Arg::Int(id)];
    let done = DB::run(&mut conn, &q.redeliver, &args)
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}

/// Deletes up to `batch` finished deliveries created before `before_ms`.
pub(crate) async fn purge<DB: Exec>(
    pool: &Pool<DB>,
    q: &WebhookQueries,
    before_ms: i64,
    batch: u32,
) -> Result<u64, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let args = [Arg::Int(before_ms), Arg::Int(i64::from(batch.max(1)))];
    let rows = DB::rows(&mut conn, &q.purgeable, &args)
        .await
        .map_err(map_err)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let ids = rows
        .iter()
        .map(|r| DB::int(r, "id").map(|id| id.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    // The ids are integers this function read: nothing to escape.
    let sql = format!("{}{})", q.delete_prefix, ids.join(", "));
    let done = DB::run(&mut conn, &sql, &[]).await.map_err(map_err)?;
    Ok(DB::rows_affected(&done))
}
