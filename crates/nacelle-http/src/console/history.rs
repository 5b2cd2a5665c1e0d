//! `/nacos/console/api/history`: a key's versions (who, when, from where), one version
//! with its content, and rollback (publish a version's content again as the formal
//! config, with compare-and-set on what the page showed).

use axum::extract::State;
use nacelle_core::{ConfigKey, HistoryEntry};
use serde_json::json;

use super::configs::{formal, publish_request};
use super::{key_of, ok, page_of, Answer, ConsoleError};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

fn nid_of(raw: &str) -> Result<i64, ConsoleError> {
    raw.trim()
        .parse::<i64>()
        .map_err(|_| ApiError::Invalid(format!("invalid version : {raw}")).into())
}

/// An entry as the pages show it; `content` only for one entry.
fn entry_json(h: &HistoryEntry, content: Option<String>) -> serde_json::Value {
    let mut v = json!({
        "nid": h.nid,
        "op": h.op_type.as_str(),
        "srcUser": h.source.src_user,
        "srcIp": h.source.src_ip,
        "modified": h.modified_ms,
        "md5": h.md5,
        "appName": h.app_name,
        "message": h.source.message,
        "changeId": h.source.change_id,
    });
    if let Some(c) = content {
        v["content"] = c.into();
    }
    v
}

/// A version's content as this caller is shown it.
async fn entry_content(
    st: &AppState,
    p: &Params,
    key: &ConfigKey,
    nid: i64,
) -> Result<(HistoryEntry, String), ConsoleError> {
    let h = st.service.history_entry(&p.caller, key, nid).await?;
    let content = h.content.clone();
    Ok((h, content))
}

/// The text of version `v` of `key`: a history `nid`, or `current` (the formal config
/// now, `""` when there is none).
pub(crate) async fn version_text(
    st: &AppState,
    p: &Params,
    key: &ConfigKey,
    v: &str,
) -> Result<String, ConsoleError> {
    if v.trim() == "current" {
        return match formal(&st.service, p, key)? {
            Some(c) => Ok(c.content_text().into_owned()),
            None => Ok(String::new()),
        };
    }
    Ok(entry_content(st, p, key, nid_of(v)?).await?.1)
}

/// `GET namespace, dataId, group, pageNo, pageSize` → `{total, pageNo, pages, items}`,
/// newest first. Each row holds the version it replaced (Nacos's history layout): an
/// update's row is the content before that update.
pub(crate) async fn list(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let page = st
        .service
        .history(&p.caller, &key, page_of(&p, 20)?)
        .await?;
    let items: Vec<_> = page.items.iter().map(|h| entry_json(h, None)).collect();
    ok(json!({
        "total": page.total_count,
        "pageNo": page.page_number,
        "pages": page.pages_available,
        "items": items,
    }))
}

/// `GET namespace, dataId, group, pageNo, pageSize` → `{total, pageNo, pages, items}`:
/// the key's gray operations (publish, change, promotion, stop of each gray), newest
/// first, each with the gray's name and rule as they were, who and when; `content` is the
/// version the operation replaced or removed (for a first publish, the one inserted).
pub(crate) async fn gray_list(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let page = st
        .service
        .gray_history(&p.caller, &key, page_of(&p, 20)?)
        .await?;
    let items: Vec<_> = page
        .items
        .iter()
        .map(|g| {
            let mut v = entry_json(&g.entry, Some(g.entry.content.clone()));
            v["grayName"] = g.gray_name.clone().into();
            v["ruleType"] = g.rule_type.clone().into();
            v["ruleExpr"] = g.rule_expr.clone().into();
            v["priority"] = g.priority.into();
            v
        })
        .collect();
    ok(json!({
        "total": page.total_count,
        "pageNo": page.page_number,
        "pages": page.pages_available,
        "items": items,
    }))
}

/// `GET namespace, dataId, group, nid` → one entry with its content.
pub(crate) async fn entry(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let (h, content) = entry_content(&st, &p, &key, nid_of(p.required("nid")?)?).await?;
    ok(entry_json(&h, Some(content)))
}

/// `POST namespace, dataId, group, nid[, casMd5]` → publishes that version's content as
/// the formal config (keeping the current type and metadata, or the dataId's type when
/// the config was deleted since) → `{md5}`. A version recorded by a delete holds the
/// deleted content, so rolling it back restores the config.
pub(crate) async fn rollback(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let nid = nid_of(p.required("nid")?)?;
    let (_, content) = entry_content(&st, &p, &key, nid).await?;
    let current = formal(&st.service, &p, &key)?;
    let ty = match &current {
        Some(c) => c.config_type().as_str().to_string(),
        None => nacelle_service::transfer::type_from_extension(key.data_id()).to_string(),
    };
    let mut req = publish_request(&p, key, content, Some(ty));
    if let Some(c) = &current {
        req.meta = c.meta_for_republish();
    }
    if req.message.trim().is_empty() {
        req.message = format!("rollback to revision {nid}");
    }
    let stored = st.service.publish(&p.caller, req).await?;
    ok(json!({"md5": stored.md5, "modified": stored.modified_ms}))
}

/// `POST` either `old`, `new` (two texts), or `namespace, dataId, group` with `from` and
/// `to`, each a history `nid` or `current` (the formal config now) → `{diff, changed}`.
pub(crate) async fn diff(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let (old, new, old_name, new_name) = match (p.get("old"), p.get("new")) {
        (Some(a), Some(b)) => {
            st.service.access().authenticated(&p.caller)?;
            (
                a.to_string(),
                b.to_string(),
                "current".to_string(),
                "edited".to_string(),
            )
        }
        _ => {
            let key = key_of(&p)?;
            let from = p.required("from")?;
            let to = p.required("to")?;
            (
                version_text(&st, &p, &key, from).await?,
                version_text(&st, &p, &key, to).await?,
                version_name(from),
                version_name(to),
            )
        }
    };
    let changed = old != new;
    let diff = super::configs::unified_off_thread(old, new, old_name, new_name).await?;
    ok(json!({"diff": diff, "changed": changed}))
}

fn version_name(v: &str) -> String {
    if v == "current" {
        "current".into()
    } else {
        format!("version {v}")
    }
}
