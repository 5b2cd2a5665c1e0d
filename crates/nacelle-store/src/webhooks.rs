//! Webhooks and their deliveries (`nacelle_webhook`, `nacelle_webhook_delivery`; schema
//! script 7; docs/webhooks.md), shared by every backend: reads on the reader pool, writes
//! on the writer pool (SQLite: its one connection).
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

use crate::dialect::Arg;
use crate::map_err;
use crate::queries::Queries;
use crate::sql::{self, Exec};

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
    q: &Queries,
) -> Result<Vec<Webhook>, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let rows = DB::rows(&mut conn, &q.webhooks.load, &[])
        .await
        .map_err(map_err)?;
    rows.iter().map(hook_of::<DB>).collect()
}

/// Inserts a webhook; its new id.
pub(crate) async fn create<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    h: &Webhook,
) -> Result<i64, StoreError> {
    let q = &q.webhooks;
    let mut tx = pool.begin().await.map_err(map_err)?;
    let conn = &mut *tx;
    let events = h.events_text();
    let args = [
        Arg::Text(h.namespace.as_str()),
        Arg::Text(&h.group_pattern),
        Arg::Text(&h.data_id_pattern),
        Arg::Text(&h.url),
        Arg::Text(&h.secret),
        Arg::Text(&events),
        Arg::Int(i64::from(h.enabled)),
        Arg::Text(&h.description),
        Arg::Text(&h.created_by),
        Arg::Int(h.created_ms),
        Arg::Int(h.updated_ms),
    ];
    let id = sql::insert_returning_id::<DB>(conn, &q.insert, &args, "webhook").await?;
    tx.commit().await.map_err(map_err)?;
    Ok(id)
}

/// Replaces a webhook's fields; whether it exists.
pub(crate) async fn update<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    h: &Webhook,
) -> Result<bool, StoreError> {
    let q = &q.webhooks;
    let mut tx = pool.begin().await.map_err(map_err)?;
    let conn = &mut *tx;
    let events = h.events_text();
    let args = [
        Arg::Text(h.namespace.as_str()),
        Arg::Text(&h.group_pattern),
        Arg::Text(&h.data_id_pattern),
        Arg::Text(&h.url),
        Arg::Text(&h.secret),
        Arg::Text(&events),
        Arg::Int(i64::from(h.enabled)),
        Arg::Text(&h.description),
        Arg::Int(h.updated_ms),
        Arg::Int(h.id),
    ];
    DB::run(conn, &q.update, &args).await.map_err(map_err)?;
    // MySQL counts only the rows an UPDATE changed: ask whether the row is there.
    let n = match DB::row(conn, &q.exists, &[Arg::Int(h.id)])
        .await
        .map_err(map_err)?
    {
        Some(row) => DB::int(&row, "n")?,
        None => 0,
    };
    tx.commit().await.map_err(map_err)?;
    Ok(n > 0)
}

/// Deletes a webhook and its deliveries in one transaction; whether it existed.
pub(crate) async fn delete<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    id: i64,
) -> Result<bool, StoreError> {
    let q = &q.webhooks;
    let mut tx = pool.begin().await.map_err(map_err)?;
    let conn = &mut *tx;
    DB::run(conn, &q.delete_deliveries_of, &[Arg::Int(id)])
        .await
        .map_err(map_err)?;
    let done = DB::run(conn, &q.delete, &[Arg::Int(id)])
        .await
        .map_err(map_err)?;
    tx.commit().await.map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}

/// Inserts pending deliveries in one transaction.
pub(crate) async fn enqueue<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    deliveries: &[NewDelivery],
) -> Result<(), StoreError> {
    if deliveries.is_empty() {
        return Ok(());
    }
    let q = &q.webhooks;
    let mut tx = pool.begin().await.map_err(map_err)?;
    let conn = &mut *tx;
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
    tx.commit().await.map_err(map_err)
}

/// Claims due deliveries for `claim.owner`: each candidate by a compare-and-set of its
/// lease; answers the rows won.
pub(crate) async fn claim<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    claim: &DeliveryClaim,
) -> Result<Vec<Delivery>, StoreError> {
    let q = &q.webhooks;
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
    q: &Queries,
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
    let done = DB::run(&mut conn, &q.webhooks.finish, &args)
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}

/// The deliveries of one webhook, newest first.
pub(crate) async fn page<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    hook_id: i64,
    page: PageRequest,
) -> Result<Page<Delivery>, StoreError> {
    let q = &q.webhooks;
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let total = match DB::row(&mut conn, &q.count_of_hook, &[Arg::Int(hook_id)])
        .await
        .map_err(map_err)?
    {
        Some(row) => DB::int(&row, "n")?,
        None => 0,
    };
    let args = [
        Arg::Int(hook_id),
        Arg::Int(i64::try_from(page.page_size).unwrap_or(i64::MAX)),
        Arg::Int(i64::try_from(page.offset()).unwrap_or(i64::MAX)),
    ];
    let rows = DB::rows(&mut conn, &q.page_of_hook, &args)
        .await
        .map_err(map_err)?;
    let items = rows
        .iter()
        .map(delivery_of::<DB>)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page::new(
        u64::try_from(total).unwrap_or(0),
        page.page_no,
        page.page_size,
        items,
    ))
}

/// Makes a finished delivery pending again; whether it was finished.
pub(crate) async fn redeliver<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    id: i64,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let args = [Arg::Int(now_ms), Arg::Int(now_ms), Arg::Int(id)];
    let done = DB::run(&mut conn, &q.webhooks.redeliver, &args)
        .await
        .map_err(map_err)?;
    Ok(DB::rows_affected(&done) > 0)
}

/// Deletes up to `batch` finished deliveries created before `before_ms`.
pub(crate) async fn purge<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
    before_ms: i64,
    batch: u32,
) -> Result<u64, StoreError> {
    let q = &q.webhooks;
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
