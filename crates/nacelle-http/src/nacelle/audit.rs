//! `/nacos/nacelle/v1/audit` (docs/audit.md): the audit trail for administrators — the
//! entries (filtered, paged, newest first), the chain as a client verifies it, and the
//! server's own verification.

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use nacelle_core::audit::{AuditAction, AuditEntry, AuditFilter};
use serde::Serialize;
use serde_json::json;

use crate::page::PageJson;
use crate::params::Params;
use crate::v3::{page, success, V3Error, V3Params};
use crate::AppState;

/// The paths of [`routes`].
pub(crate) const ROUTES: &[&str] = &[
    "/nacos/nacelle/v1/audit",
    "/nacos/nacelle/v1/audit/chain",
    "/nacos/nacelle/v1/audit/verify",
];

/// Largest page of entries.
const MAX_PAGE_SIZE: u64 = 500;
/// Largest run of the chain one request reads.
const MAX_CHAIN_LIMIT: u32 = 1000;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/nacos/nacelle/v1/audit", get(list))
        .route("/nacos/nacelle/v1/audit/chain", get(chain))
        .route("/nacos/nacelle/v1/audit/verify", get(verify))
}

/// An entry as the API shows it: every field its hash covers, and the hash.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EntryJson<'a> {
    seq: i64,
    /// ms since the epoch.
    time: i64,
    user: &'a str,
    address: &'a str,
    protocol: &'a str,
    action: &'a str,
    target: &'a str,
    outcome: &'a str,
    detail: &'a str,
    change_id: Option<i64>,
    prev_hash: &'a str,
    hash: &'a str,
}

impl<'a> EntryJson<'a> {
    fn of(e: &'a AuditEntry) -> Self {
        EntryJson {
            seq: e.seq,
            time: e.event.time_ms,
            user: &e.event.user,
            address: &e.event.address,
            protocol: &e.event.protocol,
            action: &e.event.action,
            target: &e.event.target,
            outcome: &e.event.outcome,
            detail: &e.event.detail,
            change_id: e.event.change_id,
            prev_hash: &e.prev_hash,
            hash: &e.hash,
        }
    }
}

/// An integer parameter, absent when blank; not an integer is a 400 naming it.
fn int_param(p: &Params, name: &str) -> Result<Option<i64>, V3Error> {
    match p.non_blank(name) {
        None => Ok(None),
        Some(v) => v.trim().parse::<i64>().map(Some).map_err(|_| {
            V3Error::invalid(format!("parameter '{name}' must be an integer, got `{v}`"))
        }),
    }
}

/// The filter of a listing: `since`, `until` (ms since the epoch), `user`, `key` (a
/// target prefix: `namespace/group/dataId`, `namespace/group/`, a user name), `action`
/// (one of the action names).
fn filter_of(p: &Params) -> Result<AuditFilter, V3Error> {
    let text = |name: &str| p.non_blank(name).map(|v| v.trim().to_string());
    let action = match text("action") {
        None => None,
        Some(a) => match AuditAction::parse(&a) {
            Some(known) => Some(known.as_str().to_string()),
            None => {
                let names: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
                return Err(V3Error::invalid(format!(
                    "unknown action `{a}`; one of: {}",
                    names.join(", ")
                )));
            }
        },
    };
    Ok(AuditFilter {
        since_ms: int_param(p, "since")?,
        until_ms: int_param(p, "until")?,
        user: text("user"),
        target: text("key"),
        action,
    })
}

/// `GET [since, until, user, key, action, pageNo, pageSize]` → a `Page` of entries, newest
/// first (`pageSize` at most 500).
async fn list(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let trail = st.audit.trail(&p.caller)?;
    let filter = filter_of(&p)?;
    let page = trail.list(&filter, page(&p, Some(MAX_PAGE_SIZE))?).await?;
    Ok(success(PageJson::of(&page, EntryJson::of)))
}

/// `GET [afterSeq (default 0), limit (default and at most 1000)]` → `{head: {lastSeq,
/// lastHash, anchorSeq, anchorHash}, entries}`: the entries after `afterSeq` in seq order,
/// what `nacelle audit verify` walks.
async fn chain(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let trail = st.audit.trail(&p.caller)?;
    let after = int_param(&p, "afterSeq")?.unwrap_or(0);
    let limit = match int_param(&p, "limit")? {
        None => MAX_CHAIN_LIMIT,
        Some(n) if n < 1 => {
            return Err(V3Error::invalid(format!(
                "parameter 'limit' must be at least 1, got {n}"
            )))
        }
        Some(n) => u32::try_from(n)
            .unwrap_or(MAX_CHAIN_LIMIT)
            .min(MAX_CHAIN_LIMIT),
    };
    let range = trail.range(after, limit).await?;
    let h = &range.head;
    Ok(success(json!({
        "head": {
            "lastSeq": h.last_seq,
            "lastHash": h.last_hash,
            "anchorSeq": h.anchor_seq,
            "anchorHash": h.anchor_hash,
        },
        "entries": range.entries.iter().map(EntryJson::of).collect::<Vec<_>>(),
    })))
}

/// `GET` → `{ok, checked, anchorSeq, lastSeq, broken: null | {seq, problem, message}}`:
/// the server walks the whole chain from its anchor. `seq` is the first bad entry (for a
/// gap, the first missing one), `problem` its name (`Missing`, `Altered`, …), `message`
/// the same in words.
async fn verify(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let v = st.audit.trail(&p.caller)?.verify().await?;
    let broken = v.broken.as_ref().map(|b| {
        json!({
            "seq": b.seq,
            "problem": b.problem.name(),
            "message": b.to_string(),
        })
    });
    Ok(success(json!({
        "ok": v.broken.is_none(),
        "checked": v.checked,
        "anchorSeq": v.anchor_seq,
        "lastSeq": v.last_seq,
        "broken": broken,
    })))
}
