//! Change requests and review policies (docs/change-requests.md), a thin adapter over the
//! service's `Changes` handle:
//! - `GET /nacos/nacelle/v1/changes?namespaceId&state&author&pageNo&pageSize` — list;
//!   `POST` (JSON body) — create; `PUT ?id&version` (JSON body) — edit.
//! - `GET /nacos/nacelle/v1/change?id` — one, with its keys, events and approvals;
//!   `GET …/change/diff?id` — every key beside the server's content, as unified diffs.
//! - `POST …/change/{open,approve,reject,comment,rebase,close,publish,schedule}?id
//!   [&version][&text][&publishAt]` — the life of a request.
//! - `GET|POST|DELETE /nacos/nacelle/v1/review-policies` — the policies.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use nacelle_core::change::{ChangeFilter, ChangeOp, ChangeRequest, ChangeState, ReviewPolicy};
use nacelle_core::NamespaceId;
use nacelle_service::{ChangeInput, ChangeView, ItemDiff, ItemInput};
use serde::{Deserialize, Serialize};

use crate::console::configs::unified;
use crate::error::ApiError;
use crate::page::PageJson;
use crate::params::Params;
use crate::v3::{namespace_id, page, success, V3Error, V3Params};
use crate::AppState;

pub(crate) const ROUTES: &[&str] = &[
    "/nacos/nacelle/v1/changes",
    "/nacos/nacelle/v1/change",
    "/nacos/nacelle/v1/change/diff",
    "/nacos/nacelle/v1/change/open",
    "/nacos/nacelle/v1/change/approve",
    "/nacos/nacelle/v1/change/reject",
    "/nacos/nacelle/v1/change/comment",
    "/nacos/nacelle/v1/change/rebase",
    "/nacos/nacelle/v1/change/close",
    "/nacos/nacelle/v1/change/publish",
    "/nacos/nacelle/v1/change/schedule",
    "/nacos/nacelle/v1/review-policies",
];

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(ROUTES[0], get(list).post(create).put(edit))
        .route(ROUTES[1], get(one))
        .route(ROUTES[2], get(diff))
        .route(ROUTES[3], post(open))
        .route(ROUTES[4], post(approve))
        .route(ROUTES[5], post(reject))
        .route(ROUTES[6], post(comment))
        .route(ROUTES[7], post(rebase))
        .route(ROUTES[8], post(close))
        .route(ROUTES[9], post(publish))
        .route(ROUTES[10], post(schedule))
        .route(
            ROUTES[11],
            get(policies).post(set_policy).delete(delete_policy),
        )
}

type Answer = Result<Response, V3Error>;

/// A change request as written by its author (the body of create and edit).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChangeBody {
    #[serde(default)]
    namespace_id: Option<String>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    items: Vec<ItemBody>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ItemBody {
    #[serde(default)]
    group: Option<String>,
    data_id: String,
    /// The new content; absent (or `remove: true`) removes the key.
    #[serde(default)]
    content: Option<String>,
    #[serde(default, rename = "type")]
    config_type: Option<String>,
    #[serde(default)]
    remove: bool,
}

fn body(p: &Params) -> Result<ChangeInput, V3Error> {
    let raw = p.json_body.as_deref().ok_or_else(|| {
        V3Error::invalid("the request needs a JSON body (Content-Type: application/json)")
    })?;
    let b: ChangeBody = serde_json::from_slice(raw)
        .map_err(|e| V3Error::invalid(format!("the JSON body is not a change request: {e}")))?;
    let mut items = Vec::with_capacity(b.items.len());
    for i in b.items {
        if i.remove && i.content.is_some() {
            return Err(V3Error::invalid(format!(
                "item {}: `remove` and `content` exclude each other",
                i.data_id
            )));
        }
        if !i.remove && i.content.is_none() {
            return Err(V3Error::invalid(format!(
                "item {}: give its `content`, or `remove: true`",
                i.data_id
            )));
        }
        items.push(ItemInput {
            group: i
                .group
                .filter(|g| !g.trim().is_empty())
                .unwrap_or_else(|| nacelle_core::DEFAULT_GROUP.to_string()),
            data_id: i.data_id,
            content: i.content,
            config_type: i.config_type,
        });
    }
    Ok(ChangeInput {
        namespace: b.namespace_id,
        title: b.title,
        description: b.description,
        items,
        draft: b.draft,
    })
}

fn id_of(p: &Params) -> Result<i64, V3Error> {
    let raw = p.non_blank("id").ok_or_else(|| V3Error::missing("id"))?;
    raw.trim()
        .parse()
        .map_err(|_| V3Error::invalid(format!("id must be a number: {raw}")))
}

fn version_of(p: &Params) -> Result<Option<i64>, V3Error> {
    p.non_blank("version")
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| V3Error::invalid(format!("version must be a number: {v}")))
        })
        .transpose()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ItemJson<'a> {
    group: &'a str,
    data_id: &'a str,
    op: &'static str,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    config_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    base_md5: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventJson<'a> {
    kind: &'static str,
    user: &'a str,
    time: i64,
    text: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChangeJson<'a> {
    id: i64,
    namespace_id: &'a str,
    title: &'a str,
    description: &'a str,
    author: &'a str,
    state: &'static str,
    stale: bool,
    version: i64,
    created_time: i64,
    updated_time: i64,
    publish_at: Option<i64>,
    item_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    required_approvals: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approvers: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    items: Option<Vec<ItemJson<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Vec<EventJson<'a>>>,
}

impl<'a> ChangeJson<'a> {
    /// A listing's entry: no keys, events or approvals.
    fn summary(c: &'a ChangeRequest) -> Self {
        ChangeJson {
            id: c.id,
            namespace_id: namespace_id(&c.namespace),
            title: &c.title,
            description: &c.description,
            author: &c.author,
            state: c.state.as_str(),
            stale: c.stale,
            version: c.version,
            created_time: c.created_ms,
            updated_time: c.updated_ms,
            publish_at: c.publish_at_ms,
            item_count: c.item_count,
            required_approvals: None,
            approvers: None,
            items: None,
            events: None,
        }
    }

    fn full(v: &'a ChangeView) -> Self {
        let c = &v.request;
        let items = c
            .items
            .iter()
            .map(|i| {
                let (config_type, content) = match &i.op {
                    ChangeOp::Publish {
                        content,
                        config_type,
                    } => (Some(config_type.as_str()), Some(content.as_str())),
                    ChangeOp::Remove => (None, None),
                };
                ItemJson {
                    group: &i.group,
                    data_id: &i.data_id,
                    op: i.op.as_str(),
                    config_type,
                    content,
                    base_md5: &i.base_md5,
                }
            })
            .collect();
        let events = c
            .events
            .iter()
            .map(|e| EventJson {
                kind: e.kind.as_str(),
                user: &e.user,
                time: e.time_ms,
                text: &e.text,
            })
            .collect();
        ChangeJson {
            required_approvals: Some(v.required_approvals),
            approvers: Some(&v.approvers),
            items: Some(items),
            events: Some(events),
            ..ChangeJson::summary(c)
        }
    }
}

fn answer(v: &ChangeView) -> Answer {
    Ok(success(ChangeJson::full(v)))
}

async fn list(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let changes = st.changes.changes(&p.caller)?;
    let state = match p.non_blank("state") {
        None => None,
        Some(s) => Some(ChangeState::parse(s).ok_or_else(|| {
            V3Error::invalid(format!(
                "state must be one of draft, open, approved, rejected, published, closed: {s}"
            ))
        })?),
    };
    let filter = ChangeFilter {
        namespace: match p.get("namespaceId") {
            None => None,
            Some(ns) => Some(NamespaceId::parse(Some(ns))?),
        },
        state,
        author: p.non_blank("author").map(str::to_string),
        namespaces: None,
    };
    let found = changes.list(&filter, page(&p, Some(500))?).await?;
    Ok(success(PageJson::of(&found, ChangeJson::summary)))
}

async fn create(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let input = body(&p)?;
    answer(&st.changes.changes(&p.caller)?.create(input).await?)
}

async fn edit(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let (id, version, input) = (id_of(&p)?, version_of(&p)?, body(&p)?);
    answer(
        &st.changes
            .changes(&p.caller)?
            .edit(id, version, input)
            .await?,
    )
}

async fn one(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    answer(&st.changes.changes(&p.caller)?.get(id_of(&p)?).await?)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DiffJson<'a> {
    group: &'a str,
    data_id: &'a str,
    op: &'static str,
    base_md5: &'a str,
    current_md5: &'a str,
    /// The key changed since the request was based: publishing would find it stale.
    moved: bool,
    current: Option<&'a str>,
    proposed: Option<&'a str>,
    diff: String,
}

async fn diff(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let items: Vec<ItemDiff> = st.changes.changes(&p.caller)?.diff(id_of(&p)?).await?;
    let rendered = tokio::task::spawn_blocking(move || {
        let diffs: Vec<String> = items
            .iter()
            .map(|d| {
                let name = format!("{}/{}", d.key.group(), d.key.data_id());
                unified(
                    d.current.as_deref().unwrap_or(""),
                    d.proposed.as_deref().unwrap_or(""),
                    &format!("{name} (server)"),
                    &format!("{name} (change)"),
                )
            })
            .collect();
        (items, diffs)
    })
    .await
    .map_err(|e| V3Error::from(ApiError::Internal(format!("diff: {e}"))))?;
    let (items, diffs) = rendered;
    let out: Vec<DiffJson> = items
        .iter()
        .zip(diffs)
        .map(|(d, diff)| DiffJson {
            group: d.key.group(),
            data_id: d.key.data_id(),
            op: d.op,
            base_md5: &d.base_md5,
            current_md5: &d.current_md5,
            moved: d.moved(),
            current: d.current.as_deref(),
            proposed: d.proposed.as_deref(),
            diff,
        })
        .collect();
    Ok(success(out))
}

/// The text parameter of an action (`text`, or its usual names).
fn text_of(p: &Params) -> String {
    ["text", "comment", "reason"]
        .iter()
        .find_map(|n| p.get(n))
        .unwrap_or("")
        .to_string()
}

async fn open(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let c = st.changes.changes(&p.caller)?;
    answer(&c.open(id_of(&p)?, version_of(&p)?).await?)
}

async fn approve(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let c = st.changes.changes(&p.caller)?;
    answer(&c.approve(id_of(&p)?, version_of(&p)?, text_of(&p)).await?)
}

async fn reject(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let c = st.changes.changes(&p.caller)?;
    answer(&c.reject(id_of(&p)?, version_of(&p)?, text_of(&p)).await?)
}

async fn comment(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let c = st.changes.changes(&p.caller)?;
    answer(&c.comment(id_of(&p)?, text_of(&p)).await?)
}

async fn rebase(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let c = st.changes.changes(&p.caller)?;
    answer(&c.rebase(id_of(&p)?, version_of(&p)?).await?)
}

async fn close(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let c = st.changes.changes(&p.caller)?;
    answer(&c.close(id_of(&p)?, text_of(&p)).await?)
}

async fn publish(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let c = st.changes.changes(&p.caller)?;
    answer(&c.publish(id_of(&p)?, version_of(&p)?).await?)
}

async fn schedule(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let at =
        match p.non_blank("publishAt") {
            None => None,
            Some(v) => Some(v.trim().parse::<i64>().map_err(|_| {
                V3Error::invalid(format!("publishAt must be ms since the epoch: {v}"))
            })?),
        };
    let c = st.changes.changes(&p.caller)?;
    answer(&c.schedule(id_of(&p)?, at).await?)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PolicyJson<'a> {
    namespace_id: &'a str,
    group_pattern: &'a str,
    required_approvals: u32,
    updated_by: &'a str,
    updated_time: i64,
}

impl<'a> PolicyJson<'a> {
    fn of(p: &'a ReviewPolicy) -> Self {
        PolicyJson {
            namespace_id: namespace_id(&p.namespace),
            group_pattern: &p.group_pattern,
            required_approvals: p.required_approvals,
            updated_by: &p.updated_by,
            updated_time: p.updated_ms,
        }
    }
}

async fn policies(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let all = st.changes.review_policies(&p.caller)?;
    Ok(success(all.iter().map(PolicyJson::of).collect::<Vec<_>>()))
}

async fn set_policy(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let raw = p
        .non_blank("requiredApprovals")
        .ok_or_else(|| V3Error::missing("requiredApprovals"))?;
    let n: u32 = raw
        .trim()
        .parse()
        .map_err(|_| V3Error::invalid(format!("requiredApprovals must be 0 to 10: {raw}")))?;
    let pattern = p.non_blank("groupPattern").unwrap_or("*");
    st.changes
        .set_review_policy(&p.caller, p.get("namespaceId"), pattern, n)
        .await?;
    Ok(success(true))
}

async fn delete_policy(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let pattern = p.non_blank("groupPattern").unwrap_or("*");
    st.changes
        .set_review_policy(&p.caller, p.get("namespaceId"), pattern, 0)
        .await?;
    Ok(success(true))
}
