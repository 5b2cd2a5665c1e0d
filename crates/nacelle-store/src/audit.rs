//! The audit trail (`nacelle_audit`, `nacelle_audit_head`; docs/audit.md), shared by every
//! backend: append (one transaction that locks the head row first, so appenders on every
//! node of a shared database take turns and `seq` stays contiguous; on SQLite the one
//! connection of its writer pool serializes them as well), the filtered page, the range a
//! verification walks, and the retention purge that moves the head's anchor; their
//! statements, spelled once per dialect (the filtered page's for each filter).
//!
//! The hash of each entry is `nacelle_api::audit::entry_hash`, the function clients
//! verify with.

use nacelle_api::audit::{entry_hash, EntryFields};
use nacelle_core::audit::{AuditEntry, AuditEvent, AuditFilter, AuditHead, AuditPurge, AuditRange};
use nacelle_core::{Page, PageRequest, StoreError};
use sqlx::Pool;

use crate::dialect::{spell, Arg, Dialect};
use crate::map_err;
use crate::sql::{self, Exec};

/// The columns of an audit entry, in the order of [`AuditQueries::insert`].
const AUDIT_COLUMNS: &str =
    "seq, time_ms, user_name, address, protocol, action, target, outcome, detail, change_id, \
     prev_hash, hash";

/// The statements of the audit trail.
#[derive(Debug, Clone)]
pub(crate) struct AuditQueries {
    /// Takes the head row's write lock (a no-op update: every dialect locks the row, and
    /// SQLite starts its write transaction here rather than upgrading a read later).
    pub(crate) lock_head: String,
    /// The head row (locked again where the dialect has `FOR UPDATE`).
    pub(crate) read_head: String,
    pub(crate) read_head_plain: String,
    pub(crate) insert: String,
    pub(crate) update_head: String,
    pub(crate) move_anchor: String,
    pub(crate) range: String,
    /// The oldest entries after the anchor, for a purge.
    pub(crate) oldest: String,
    pub(crate) delete_through: String,
}

impl AuditQueries {
    pub(crate) fn new<D: Dialect>() -> Self {
        let q = |sql: String| spell::<D>(&sql);
        let head = "SELECT last_seq, last_hash, anchor_seq, anchor_hash FROM nacelle_audit_head \
                    WHERE id = 1";
        AuditQueries {
            lock_head: q("UPDATE nacelle_audit_head SET last_seq = last_seq WHERE id = 1".into()),
            read_head: q(format!("{head}{}", D::FOR_UPDATE)),
            read_head_plain: q(head.into()),
            insert: q(format!(
                "INSERT INTO nacelle_audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )),
            update_head: q(
                "UPDATE nacelle_audit_head SET last_seq = ?, last_hash = ? WHERE id = 1".into(),
            ),
            move_anchor: q(
                "UPDATE nacelle_audit_head SET anchor_seq = ?, anchor_hash = ? WHERE id = 1".into(),
            ),
            range: q(format!(
                "SELECT {AUDIT_COLUMNS} FROM nacelle_audit WHERE seq > ? AND seq <= ? ORDER BY seq \
                 LIMIT ?"
            )),
            oldest: q(
                "SELECT seq, time_ms, hash FROM nacelle_audit WHERE seq > ? ORDER BY seq LIMIT ?"
                    .into(),
            ),
            delete_through: q("DELETE FROM nacelle_audit WHERE seq > ? AND seq <= ?".into()),
        }
    }
}

/// The longest text kept of a short field (user, address, protocol, action).
const SHORT_FIELD: usize = 255;
/// The longest text kept of a long field (target, outcome, detail).
const LONG_FIELD: usize = 4000;

/// `s` as every backend can store it, byte for byte the same: at most `max` characters,
/// NUL (which PostgreSQL cannot hold) as U+FFFD. The hash covers the stored value.
fn storable(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| if c == '\0' { '\u{FFFD}' } else { c })
        .collect()
}

/// The head row.
async fn head<DB: Exec>(conn: &mut DB::Connection, sql: &str) -> Result<AuditHead, StoreError> {
    let row = DB::row(conn, sql, &[])
        .await
        .map_err(map_err)?
        .ok_or_else(|| {
            StoreError::Unavailable(
                "nacelle_audit_head has no row (schema script 5 not run?)".into(),
            )
        })?;
    Ok(AuditHead {
        last_seq: DB::int(&row, "last_seq")?,
        last_hash: DB::text(&row, "last_hash")?,
        anchor_seq: DB::int(&row, "anchor_seq")?,
        anchor_hash: DB::text(&row, "anchor_hash")?,
    })
}

/// Appends `events` in one transaction and answers the stored entries.
pub(crate) async fn append<DB: Exec>(
    pool: &Pool<DB>,
    q: &AuditQueries,
    events: &[AuditEvent],
) -> Result<Vec<AuditEntry>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    sql::in_transaction(pool, async |conn| {
        DB::run(conn, &q.lock_head, &[]).await.map_err(map_err)?;
        let head = head::<DB>(conn, &q.read_head).await?;
        let (mut seq, mut prev) = (head.last_seq, head.last_hash);
        let mut out = Vec::with_capacity(events.len());
        for e in events {
            seq += 1;
            let event = AuditEvent {
                time_ms: e.time_ms,
                user: storable(&e.user, SHORT_FIELD),
                address: storable(&e.address, SHORT_FIELD),
                protocol: storable(&e.protocol, SHORT_FIELD),
                action: storable(&e.action, SHORT_FIELD),
                target: storable(&e.target, LONG_FIELD),
                outcome: storable(&e.outcome, LONG_FIELD),
                detail: storable(&e.detail, LONG_FIELD),
                // Change requests are numbered from 1: 0 is stored, hashed and read as none.
                change_id: e.change_id.filter(|&c| c != 0),
            };
            let hash = entry_hash(&fields(seq, &event, &prev));
            let args = [
                Arg::Int(seq),
                Arg::Int(event.time_ms),
                Arg::Text(&event.user),
                Arg::Text(&event.address),
                Arg::Text(&event.protocol),
                Arg::Text(&event.action),
                Arg::Text(&event.target),
                Arg::Text(&event.outcome),
                Arg::Text(&event.detail),
                Arg::OptInt(event.change_id),
                Arg::Text(&prev),
                Arg::Text(&hash),
            ];
            DB::run(conn, &q.insert, &args).await.map_err(map_err)?;
            out.push(AuditEntry {
                seq,
                event,
                prev_hash: std::mem::replace(&mut prev, hash.clone()),
                hash,
            });
        }
        let args = [Arg::Int(seq), Arg::Text(&prev)];
        DB::run(conn, &q.update_head, &args)
            .await
            .map_err(map_err)?;
        Ok(out)
    })
    .await
}

/// The fields the hash of entry `seq` covers.
pub(crate) fn fields<'a>(seq: i64, e: &'a AuditEvent, prev_hash: &'a str) -> EntryFields<'a> {
    EntryFields {
        seq,
        time_ms: e.time_ms,
        user: &e.user,
        address: &e.address,
        protocol: &e.protocol,
        action: &e.action,
        target: &e.target,
        outcome: &e.outcome,
        detail: &e.detail,
        change_id: e.change_id,
        prev_hash,
    }
}

/// An entry from its row.
fn entry_from_row<DB: Exec>(row: &DB::Row) -> Result<AuditEntry, StoreError> {
    let change_id = DB::int(row, "change_id")?;
    Ok(AuditEntry {
        seq: DB::int(row, "seq")?,
        event: AuditEvent {
            time_ms: DB::int(row, "time_ms")?,
            user: DB::text(row, "user_name")?,
            address: DB::text(row, "address")?,
            protocol: DB::text(row, "protocol")?,
            action: DB::text(row, "action")?,
            target: DB::text(row, "target")?,
            outcome: DB::text(row, "outcome")?,
            detail: DB::text(row, "detail")?,
            // Change requests are numbered from 1: NULL (read as 0) is none.
            change_id: (change_id != 0).then_some(change_id),
        },
        prev_hash: DB::text(row, "prev_hash")?,
        hash: DB::text(row, "hash")?,
    })
}

/// Entries matching `filter`, newest first: the statements are built for the filter and
/// spelled for `DB`.
pub(crate) async fn page<DB: Exec>(
    pool: &Pool<DB>,
    filter: &AuditFilter,
    page: PageRequest,
) -> Result<Page<AuditEntry>, StoreError> {
    let mut conds: Vec<String> = Vec::new();
    let mut args: Vec<Arg<'_>> = Vec::new();
    if let Some(since) = filter.since_ms {
        conds.push("time_ms >= ?".into());
        args.push(Arg::Int(since));
    }
    if let Some(until) = filter.until_ms {
        conds.push("time_ms < ?".into());
        args.push(Arg::Int(until));
    }
    if let Some(user) = &filter.user {
        conds.push("user_name = ?".into());
        args.push(Arg::Text(user));
    }
    if let Some(action) = &filter.action {
        conds.push("action = ?".into());
        args.push(Arg::Text(action));
    }
    if let Some(target) = filter.target.as_deref().filter(|t| !t.is_empty()) {
        // A prefix, compared by characters (the length is a number we computed).
        conds.push(format!("SUBSTR(target, 1, {}) = ?", target.chars().count()));
        args.push(Arg::Text(target));
    }
    let filter_sql = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    let count_sql = spell::<DB>(&format!(
        "SELECT COUNT(*) AS n FROM nacelle_audit{filter_sql}"
    ));
    let page_sql = spell::<DB>(&format!(
        "SELECT {AUDIT_COLUMNS} FROM nacelle_audit{filter_sql} ORDER BY seq DESC LIMIT ? OFFSET ?"
    ));
    let sqls = (count_sql.as_str(), page_sql.as_str());
    sql::read_page(pool, sqls, &args, page, entry_from_row::<DB>).await
}

/// The head, then up to `limit` entries after `after_seq` up to the head's last seq (so a
/// concurrent append never shows an entry the head read does not cover).
pub(crate) async fn range<DB: Exec>(
    pool: &Pool<DB>,
    q: &AuditQueries,
    after_seq: i64,
    limit: u32,
) -> Result<AuditRange, StoreError> {
    sql::in_transaction(pool, async |conn| {
        let head = head::<DB>(conn, &q.read_head_plain).await?;
        let args = [
            Arg::Int(after_seq),
            Arg::Int(head.last_seq),
            Arg::Int(i64::from(limit)),
        ];
        let rows = DB::rows(conn, &q.range, &args).await.map_err(map_err)?;
        let entries = rows
            .iter()
            .map(entry_from_row::<DB>)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AuditRange { head, entries })
    })
    .await
}

/// One batch of retention: the oldest entries after the anchor whose time is before
/// `before_ms` (a prefix: the walk stops at the first newer one), deleted with the anchor
/// moved to the last of them, in one transaction under the head's lock.
pub(crate) async fn purge<DB: Exec>(
    pool: &Pool<DB>,
    q: &AuditQueries,
    before_ms: i64,
    batch: u32,
) -> Result<AuditPurge, StoreError> {
    let mut tx = pool.begin().await.map_err(map_err)?;
    let conn = &mut *tx;
    DB::run(conn, &q.lock_head, &[]).await.map_err(map_err)?;
    let head = head::<DB>(conn, &q.read_head).await?;
    let args = [Arg::Int(head.anchor_seq), Arg::Int(i64::from(batch.max(1)))];
    let rows = DB::rows(conn, &q.oldest, &args).await.map_err(map_err)?;
    let mut through: Option<(i64, String)> = None;
    let mut stopped = false;
    for row in &rows {
        if DB::int(row, "time_ms")? >= before_ms {
            stopped = true;
            break;
        }
        through = Some((DB::int(row, "seq")?, DB::text(row, "hash")?));
    }
    let Some((seq, hash)) = through else {
        return Ok(AuditPurge::default());
    };
    let done = DB::run(
        conn,
        &q.delete_through,
        &[Arg::Int(head.anchor_seq), Arg::Int(seq)],
    )
    .await
    .map_err(map_err)?;
    DB::run(conn, &q.move_anchor, &[Arg::Int(seq), Arg::Text(&hash)])
        .await
        .map_err(map_err)?;
    tx.commit().await.map_err(map_err)?;
    Ok(AuditPurge {
        deleted: DB::rows_affected(&done),
        more: !stopped && rows.len() >= batch.max(1) as usize,
    })
}
