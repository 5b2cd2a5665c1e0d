//! Staged rollouts (docs/rollouts.md), a thin adapter over the service's `RolloutOps`:
//! - `GET /nacos/nacelle/v1/rollouts?[active=true][&limit]` — list, newest first;
//!   `POST` (JSON body) — start one.
//! - `GET /nacos/nacelle/v1/rollout?id` — one, with its content.
//! - `POST …/rollout/{pause,resume,advance,abort}?id[&reason]` — an operator's
//!   transitions.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use nacelle_core::md5_hex;
use nacelle_core::rollout::{Canary, Guards, PromGuard, Rollout, RolloutPlan, Stage};
use nacelle_service::{CohortProgress, RolloutInput};
use serde::{Deserialize, Serialize};

use crate::params::Params;
use crate::v3::{namespace_id, success, V3Error, V3Params};
use crate::AppState;

pub(crate) const ROUTES: &[&str] = &[
    "/nacos/nacelle/v1/rollouts",
    "/nacos/nacelle/v1/rollout",
    "/nacos/nacelle/v1/rollout/pause",
    "/nacos/nacelle/v1/rollout/resume",
    "/nacos/nacelle/v1/rollout/advance",
    "/nacos/nacelle/v1/rollout/abort",
];

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(ROUTES[0], get(list).post(start))
        .route(ROUTES[1], get(one))
        .route(ROUTES[2], post(pause))
        .route(ROUTES[3], post(resume))
        .route(ROUTES[4], post(advance))
        .route(ROUTES[5], post(abort))
}

type Answer = Result<Response, V3Error>;

/// A rollout as a client asks for it (the body of a start).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartBody {
    #[serde(default)]
    namespace_id: Option<String>,
    #[serde(default)]
    group: Option<String>,
    data_id: String,
    content: String,
    #[serde(default, rename = "type")]
    config_type: Option<String>,
    steps: Vec<f64>,
    bake_ms: i64,
    #[serde(default)]
    manual: bool,
    #[serde(default)]
    canary: Option<CanaryBody>,
    #[serde(default)]
    guards: Option<GuardsBody>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CanaryBody {
    #[serde(default)]
    labels: Option<String>,
    #[serde(default)]
    ips: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GuardsBody {
    #[serde(default)]
    prometheus: Option<PromBody>,
    #[serde(default)]
    http: Option<String>,
    #[serde(default)]
    delivery_ms: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PromBody {
    query: String,
    #[serde(default)]
    threshold: Option<f64>,
    #[serde(default)]
    url: Option<String>,
}

fn body(p: &Params) -> Result<RolloutInput, V3Error> {
    let raw = p.json_body.as_deref().ok_or_else(|| {
        V3Error::invalid("the request needs a JSON body (Content-Type: application/json)")
    })?;
    let b: StartBody = serde_json::from_slice(raw)
        .map_err(|e| V3Error::invalid(format!("the JSON body is not a rollout: {e}")))?;
    let guards = b.guards.unwrap_or_default();
    Ok(RolloutInput {
        namespace: b.namespace_id,
        group: b
            .group
            .filter(|g| !g.trim().is_empty())
            .unwrap_or_else(|| nacelle_core::DEFAULT_GROUP.to_string()),
        data_id: b.data_id,
        content: b.content,
        config_type: b.config_type,
        plan: RolloutPlan {
            canary: b.canary.map(|c| Canary {
                labels: c.labels,
                ips: c.ips,
            }),
            steps: b.steps,
            bake_ms: b.bake_ms,
            manual: b.manual,
            guards: Guards {
                prometheus: guards.prometheus.map(|p| PromGuard {
                    query: p.query,
                    threshold: p.threshold,
                    url: p.url,
                }),
                http: guards.http,
                delivery_ms: guards.delivery_ms,
            },
            // The service decides how a new rollout draws its cohorts.
            draw: Default::default(),
        },
    })
}

fn id_of(p: &Params) -> Result<i64, V3Error> {
    let raw = p.non_blank("id").ok_or_else(|| V3Error::missing("id"))?;
    raw.trim()
        .parse()
        .map_err(|_| V3Error::invalid(format!("id must be a number: {raw}")))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StageJson {
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GuardsJson<'a> {
    /// `{query, threshold?, url?}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    prometheus: Option<&'a PromGuard>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivery_ms: Option<i64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RolloutJson<'a> {
    id: i64,
    namespace_id: &'a str,
    group: &'a str,
    data_id: &'a str,
    #[serde(rename = "type")]
    config_type: &'static str,
    md5: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    state: &'static str,
    /// The step being baked, 1-based.
    step: u32,
    /// How many steps there are (canary included).
    steps: usize,
    /// The current step's share of clients (0 for a canary step).
    percent: f64,
    stages: Vec<StageJson>,
    bake_ms: i64,
    manual: bool,
    guards: GuardsJson<'a>,
    gray_name: String,
    step_started_time: i64,
    /// The highest step (1-based) an operator released; 0 none.
    advanced_to: i64,
    reason: &'a str,
    lease_holder: &'a str,
    lease_until: i64,
    author: &'a str,
    created_time: i64,
    updated_time: i64,
    version: i64,
    /// An active rollout's cohort on every node (answers of one rollout only).
    #[serde(skip_serializing_if = "Option::is_none")]
    cohort: Option<CohortJson>,
}

/// [`CohortProgress`] on the wire.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CohortJson {
    listeners: u64,
    cohort: u64,
    holding: u64,
    complete: bool,
    nodes: Vec<NodeCohortJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeCohortJson {
    node: String,
    listeners: u64,
    cohort: u64,
    holding: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl From<CohortProgress> for CohortJson {
    fn from(p: CohortProgress) -> Self {
        CohortJson {
            listeners: p.listeners,
            cohort: p.cohort,
            holding: p.holding,
            complete: p.complete,
            nodes: p
                .nodes
                .into_iter()
                .map(|n| NodeCohortJson {
                    node: n.node,
                    listeners: n.listeners,
                    cohort: n.cohort,
                    holding: n.holding,
                    error: n.error,
                })
                .collect(),
        }
    }
}

impl<'a> RolloutJson<'a> {
    fn of(r: &'a Rollout, with_content: bool) -> Self {
        let stages = r.plan.stages();
        let percent = match stages.get(r.step as usize) {
            Some(Stage::Percent(p)) => *p,
            _ => 0.0,
        };
        RolloutJson {
            id: r.id,
            namespace_id: namespace_id(r.key.namespace()),
            group: r.key.group(),
            data_id: r.key.data_id(),
            config_type: r.config_type.as_str(),
            md5: md5_hex(r.content.as_bytes()),
            content: with_content.then_some(r.content.as_str()),
            state: r.state.as_str(),
            step: r.step + 1,
            steps: stages.len(),
            percent,
            stages: stages
                .into_iter()
                .map(|s| match s {
                    Stage::Canary(rule) => StageJson {
                        kind: "canary",
                        percent: None,
                        rule: Some(rule),
                    },
                    Stage::Percent(p) => StageJson {
                        kind: "percent",
                        percent: Some(p),
                        rule: None,
                    },
                })
                .collect(),
            bake_ms: r.plan.bake_ms,
            manual: r.plan.manual,
            guards: GuardsJson {
                prometheus: r.plan.guards.prometheus.as_ref(),
                http: r.plan.guards.http.as_deref(),
                delivery_ms: r.plan.guards.delivery_ms,
            },
            gray_name: nacelle_core::rollout::gray_name(r.id),
            step_started_time: r.step_started_ms,
            advanced_to: r.advanced_to + 1,
            reason: &r.reason,
            lease_holder: &r.lease_holder,
            lease_until: r.lease_until_ms,
            author: &r.author,
            created_time: r.created_ms,
            updated_time: r.updated_ms,
            version: r.version,
            cohort: None,
        }
    }
}

fn answer(r: &Rollout) -> Answer {
    Ok(success(RolloutJson::of(r, true)))
}

async fn list(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let active = match p.non_blank("active").map(str::trim) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(V3Error::invalid(format!(
                "active must be true or false: {other}"
            )))
        }
    };
    let limit = match p.non_blank("limit") {
        None => 100,
        Some(l) => l
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=500).contains(l))
            .ok_or_else(|| V3Error::invalid(format!("limit must be from 1 to 500: {l}")))?,
    };
    let found = st.rollouts.ops(&p.caller)?.list(active, limit).await?;
    let items: Vec<RolloutJson> = found.iter().map(|r| RolloutJson::of(r, false)).collect();
    Ok(success(items))
}

async fn start(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let input = body(&p)?;
    answer(&st.rollouts.ops(&p.caller)?.start(input).await?)
}

async fn one(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let id = id_of(&p)?;
    let ops = st.rollouts.ops(&p.caller)?;
    let r = ops.get(id).await?;
    let mut json = RolloutJson::of(&r, true);
    if r.state.is_active() {
        json.cohort = Some(ops.progress(&r).await?.into());
    }
    Ok(success(json))
}

async fn pause(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let id = id_of(&p)?;
    let reason = p.get("reason").unwrap_or("");
    answer(&st.rollouts.ops(&p.caller)?.pause(id, reason).await?)
}

async fn resume(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let id = id_of(&p)?;
    answer(&st.rollouts.ops(&p.caller)?.resume(id).await?)
}

async fn advance(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let id = id_of(&p)?;
    answer(&st.rollouts.ops(&p.caller)?.advance(id).await?)
}

async fn abort(State(st): State<AppState>, V3Params(p): V3Params) -> Answer {
    let id = id_of(&p)?;
    let reason = p.get("reason").unwrap_or("");
    answer(&st.rollouts.ops(&p.caller)?.abort(id, reason).await?)
}
