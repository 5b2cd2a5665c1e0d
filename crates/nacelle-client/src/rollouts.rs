//! Staged rollouts over Nacelle's own HTTP API (`/nacos/nacelle/v1/rollouts`,
//! `docs/rollouts.md`): start a rollout of a new content in growing steps under guards,
//! follow it, and pause, resume, advance or abort it.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::admin::{lenient_string, Admin};
use crate::error::{ClientError, Result};
use crate::key::IntoKey;

/// One step of a rollout's plan.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStage {
    /// `canary` or `percent`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub kind: String,
    /// The share of clients of a `percent` step.
    #[serde(default)]
    pub percent: Option<f64>,
    /// The label expression of the canary.
    #[serde(default)]
    pub rule: Option<String>,
}

/// A rollout as the server reports it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    pub id: i64,
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace_id: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub group: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub data_id: String,
    /// The new content's md5.
    #[serde(default, deserialize_with = "lenient_string")]
    pub md5: String,
    /// The new content (not in listings).
    #[serde(default)]
    pub content: Option<String>,
    /// `running`, `paused`, `rolled-back`, `promoted` or `aborted`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub state: String,
    /// The step being baked (1-based) and how many there are.
    #[serde(default)]
    pub step: u32,
    #[serde(default)]
    pub steps: u32,
    /// The current step's share of clients (0 for the canary).
    #[serde(default)]
    pub percent: f64,
    #[serde(default)]
    pub stages: Vec<RolloutStage>,
    #[serde(default)]
    pub bake_ms: i64,
    #[serde(default)]
    pub manual: bool,
    /// The guards as given (`prometheus`, `http`, `deliveryMs`).
    #[serde(default)]
    pub guards: Value,
    /// When the current step started, ms since the epoch.
    #[serde(default)]
    pub step_started_time: i64,
    /// Why it is in its state.
    #[serde(default, deserialize_with = "lenient_string")]
    pub reason: String,
    /// The node driving it, and until when it holds the lease.
    #[serde(default, deserialize_with = "lenient_string")]
    pub lease_holder: String,
    #[serde(default)]
    pub lease_until: i64,
    #[serde(default, deserialize_with = "lenient_string")]
    pub author: String,
    #[serde(default)]
    pub created_time: i64,
    #[serde(default)]
    pub updated_time: i64,
    /// An active rollout's cohort on every node, when one rollout was asked for.
    #[serde(default)]
    pub cohort: Option<RolloutCohort>,
}

/// A rollout's cohort now, from the live view: of the key's listening clients, those the
/// rollout's variant is served to, and of them those holding it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutCohort {
    #[serde(default)]
    pub listeners: u64,
    #[serde(default)]
    pub cohort: u64,
    #[serde(default)]
    pub holding: u64,
    /// Whether every node answered.
    #[serde(default)]
    pub complete: bool,
    #[serde(default)]
    pub nodes: Vec<RolloutNodeCohort>,
}

/// One node's part of a [`RolloutCohort`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutNodeCohort {
    #[serde(default, deserialize_with = "lenient_string")]
    pub node: String,
    #[serde(default)]
    pub listeners: u64,
    #[serde(default)]
    pub cohort: u64,
    #[serde(default)]
    pub holding: u64,
    #[serde(default)]
    pub error: Option<String>,
}

/// A Prometheus guard: unhealthy when the query returns anything (or, with a threshold,
/// a value above it).
#[derive(Debug, Clone, PartialEq)]
pub struct PromGuard {
    pub query: String,
    pub threshold: Option<f64>,
    /// The Prometheus base URL; the server's `--prometheus-url` when `None`.
    pub url: Option<String>,
}

/// A rollout to start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewRollout {
    /// Shares of clients in percent, increasing (e.g. 5, 25, 50, 100).
    pub steps: Vec<f64>,
    /// How long each step bakes, ms.
    pub bake_ms: i64,
    /// Advance only on [`RolloutAction::Advance`].
    pub manual: bool,
    /// The canary step before the shares: labels (`k=v&&k2=v2`) and/or client IPs.
    pub canary_labels: Option<String>,
    pub canary_ips: Vec<String>,
    pub prometheus: Option<PromGuard>,
    /// A health URL: non-2xx or no answer is unhealthy.
    pub health_url: Option<String>,
    /// Cohort clients that have not taken the new version this long after being told are
    /// unhealthy (ms).
    pub delivery_ms: Option<i64>,
    /// The content's type (the config's when `None`).
    pub content_type: Option<String>,
}

/// What to do to a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RolloutAction {
    Pause,
    Resume,
    /// Release the current step (how a manual rollout advances).
    Advance,
    Abort,
}

impl RolloutAction {
    fn path(self) -> &'static str {
        match self {
            RolloutAction::Pause => "pause",
            RolloutAction::Resume => "resume",
            RolloutAction::Advance => "advance",
            RolloutAction::Abort => "abort",
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(kind: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| ClientError::Protocol(format!("{kind}: {e}")))
}

impl Admin {
    /// Starts a rollout of `content` on `key` under `plan`.
    pub async fn start_rollout(
        &self,
        key: impl IntoKey,
        content: &str,
        plan: &NewRollout,
    ) -> Result<Rollout> {
        let key = key.into_key(self.client().namespace());
        let canary = (plan.canary_labels.is_some() || !plan.canary_ips.is_empty())
            .then(|| json!({"labels": plan.canary_labels, "ips": plan.canary_ips}));
        let mut guards = serde_json::Map::new();
        if let Some(p) = &plan.prometheus {
            guards.insert(
                "prometheus".into(),
                json!({"query": p.query, "threshold": p.threshold, "url": p.url}),
            );
        }
        if let Some(u) = &plan.health_url {
            guards.insert("http".into(), json!(u));
        }
        if let Some(d) = plan.delivery_ms {
            guards.insert("deliveryMs".into(), json!(d));
        }
        let body = json!({
            "namespaceId": key.namespace,
            "group": key.group,
            "dataId": key.data_id,
            "content": content,
            "type": plan.content_type,
            "steps": plan.steps,
            "bakeMs": plan.bake_ms,
            "manual": plan.manual,
            "canary": canary,
            "guards": guards,
        });
        let data = self
            .send_v2("rollout-start", &|http, base| {
                http.post(format!("{base}/nacelle/v1/rollouts")).json(&body)
            })
            .await?;
        parse("rollout", data)
    }

    /// One rollout, with its content.
    pub async fn rollout(&self, id: i64) -> Result<Rollout> {
        let id = id.to_string();
        let data = self
            .send_v2("rollout-get", &|http, base| {
                http.get(format!("{base}/nacelle/v1/rollout"))
                    .query(&[("id", id.as_str())])
            })
            .await?;
        parse("rollout", data)
    }

    /// Rollouts, newest first (only running and paused ones when `active_only`).
    pub async fn rollouts(&self, active_only: bool, limit: u32) -> Result<Vec<Rollout>> {
        let limit = limit.to_string();
        let active = if active_only { "true" } else { "false" };
        let data = self
            .send_v2("rollout-list", &|http, base| {
                http.get(format!("{base}/nacelle/v1/rollouts"))
                    .query(&[("active", active), ("limit", limit.as_str())])
            })
            .await?;
        parse("rollout list", data)
    }

    /// Does `action` to rollout `id` (`reason`: why, for pause and abort).
    pub async fn rollout_action(
        &self,
        id: i64,
        action: RolloutAction,
        reason: &str,
    ) -> Result<Rollout> {
        let id = id.to_string();
        let data = self
            .send_v2("rollout-action", &|http, base| {
                http.post(format!("{base}/nacelle/v1/rollout/{}", action.path()))
                    .form(&[("id", id.as_str()), ("reason", reason)])
            })
            .await?;
        parse("rollout", data)
    }
}
