//! Staged rollouts (docs/rollouts.md): a new content for one key released in growing
//! steps — an optional canary (labels and/or IPs), then shares of all clients by the
//! `percent` gray rule — each baked for a while under guards, then promoted; rolled back
//! when a guard fails. This module holds the plan and the stored record, and the checks of
//! a plan; the service drives it, the store keeps it (`nacelle_rollout`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::gray::{Cohort, CohortDraw, GrayRule, GraySpec, LabelExpr};
use crate::key::{ConfigKey, ConfigType};

/// A rollout's id (`nacelle_rollout.id`).
pub type RolloutId = i64;

/// The most steps (canary included) one plan may have.
pub const MAX_STEPS: usize = 20;
/// The longest bake time of a step: 7 days.
pub const MAX_BAKE_MS: i64 = 7 * 24 * 3600 * 1000;
/// The longest delivery bound: 1 hour.
pub const MAX_DELIVERY_MS: i64 = 3600 * 1000;
/// The most canary IPs.
pub const MAX_CANARY_IPS: usize = 64;
/// The longest guard text (a query, a URL).
pub const MAX_GUARD_LEN: usize = 2048;

/// Where a rollout is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RolloutState {
    /// Steps are being published, baked and advanced.
    Running,
    /// Held at its step by an operator: the step's gray stays, nothing advances.
    Paused,
    /// A guard failed: the gray was stopped, the formal config is what everyone has.
    RolledBack,
    /// The last step was promoted: the new content is the formal config.
    Promoted,
    /// Stopped by an operator: the gray was stopped.
    Aborted,
}

impl RolloutState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutState::Running => "running",
            RolloutState::Paused => "paused",
            RolloutState::RolledBack => "rolled-back",
            RolloutState::Promoted => "promoted",
            RolloutState::Aborted => "aborted",
        }
    }

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<RolloutState> {
        [
            RolloutState::Running,
            RolloutState::Paused,
            RolloutState::RolledBack,
            RolloutState::Promoted,
            RolloutState::Aborted,
        ]
        .into_iter()
        .find(|st| st.as_str() == s.trim())
    }

    /// Running or paused: the rollout still holds its key.
    pub fn is_active(self) -> bool {
        matches!(self, RolloutState::Running | RolloutState::Paused)
    }
}

/// The canary step: clients with these labels, or at these addresses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Canary {
    /// A label expression (`k=v,…` items joined with `&&`, as tagv2), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<String>,
    /// Client IPs (plain addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
}

impl Canary {
    /// The tagv2 expression of the canary: the labels' clauses, or `ClientIp` one of the
    /// IPs (`labels || ClientIp=ip1,ip2`).
    pub fn expr(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = self.labels.as_deref().filter(|l| !l.trim().is_empty()) {
            parts.push(l.trim().to_string());
        }
        if !self.ips.is_empty() {
            parts.push(format!("ClientIp={}", self.ips.join(",")));
        }
        parts.join("||")
    }
}

/// A Prometheus instant query: unhealthy when its result is non-empty, or — with a
/// threshold — when any value of it is above the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromGuard {
    pub query: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The Prometheus base URL; the server's `--prometheus-url` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// What is watched during each bake; any failing guard rolls the rollout back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Guards {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PromGuard>,
    /// A health URL: a non-2xx answer or no answer within the probe timeout is unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// Cohort clients that have not taken the step's md5 this long after they were
    /// told are unhealthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_ms: Option<i64>,
}

impl Guards {
    /// Whether any guard is set.
    pub fn any(&self) -> bool {
        self.prometheus.is_some() || self.http.is_some() || self.delivery_ms.is_some()
    }
}

/// How a rollout proceeds. Stored as JSON (`nacelle_rollout.plan`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RolloutPlan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<Canary>,
    /// Shares of all clients in percent, strictly increasing, each 0.01 to 100.
    pub steps: Vec<f64>,
    /// How long each step bakes before it advances (ms).
    pub bake_ms: i64,
    /// Advance only when an operator says so (`advance`), not when the bake ends.
    #[serde(default)]
    pub manual: bool,
    #[serde(default)]
    pub guards: Guards,
    /// How its percentage steps draw their cohorts: [`CohortDraw::Independent`] for every
    /// rollout started now; a plan stored without it (a rollout started by an earlier
    /// version) keeps [`CohortDraw::Shifted`], so its clients stay where they were.
    #[serde(default = "shifted_draw")]
    pub draw: CohortDraw,
}

/// The draw of a stored plan that names none.
fn shifted_draw() -> CohortDraw {
    CohortDraw::Shifted
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// The canary's label/IP expression.
    Canary(String),
    /// A share of all clients.
    Percent(f64),
}

impl RolloutPlan {
    /// Checks the plan: the reasons are what a client is told.
    pub fn check(&self) -> Result<(), CoreError> {
        let bad = |m: String| Err(CoreError::invalid(m));
        if self.steps.is_empty() {
            return bad("a rollout needs at least one percentage step (e.g. 5,25,50,100)".into());
        }
        if self.stages().len() > MAX_STEPS {
            return bad(format!("at most {MAX_STEPS} steps (canary included)"));
        }
        let mut last = 0.0;
        for &p in &self.steps {
            if !(0.01..=100.0).contains(&p) || !p.is_finite() {
                return bad(format!("step {p}: a step is a percentage from 0.01 to 100"));
            }
            if p <= last {
                return bad(format!(
                    "steps must grow: {p} after {last} (give them in increasing order)"
                ));
            }
            Cohort::new(p, "check")?;
            last = p;
        }
        if !(0..=MAX_BAKE_MS).contains(&self.bake_ms) {
            return bad(format!(
                "bake time must be from 0 to 7 days, not {} ms",
                self.bake_ms
            ));
        }
        if let Some(c) = &self.canary {
            if c.labels.as_deref().is_none_or(|l| l.trim().is_empty()) && c.ips.is_empty() {
                return bad("the canary needs labels or IPs".into());
            }
            if let Some(l) = c.labels.as_deref().filter(|l| !l.trim().is_empty()) {
                LabelExpr::parse(l.trim())
                    .map_err(|e| CoreError::invalid(format!("canary labels: {e}")))?;
            }
            if c.ips.len() > MAX_CANARY_IPS {
                return bad(format!("at most {MAX_CANARY_IPS} canary IPs"));
            }
            for ip in &c.ips {
                if ip.parse::<IpAddr>().is_err() {
                    return bad(format!("canary IP `{ip}` is not an IP address"));
                }
            }
            LabelExpr::parse(&c.expr()).map_err(|e| CoreError::invalid(format!("canary: {e}")))?;
        }
        let g = &self.guards;
        if let Some(p) = &g.prometheus {
            if p.query.trim().is_empty() || p.query.len() > MAX_GUARD_LEN {
                return bad(format!(
                    "the Prometheus guard needs a query of 1 to {MAX_GUARD_LEN} characters"
                ));
            }
            if p.threshold.is_some_and(|t| !t.is_finite()) {
                return bad("the Prometheus threshold must be a finite number".into());
            }
            if let Some(u) = &p.url {
                check_url("Prometheus URL", u)?;
            }
        }
        if let Some(u) = &g.http {
            check_url("health URL", u)?;
        }
        if let Some(d) = g.delivery_ms {
            if !(1..=MAX_DELIVERY_MS).contains(&d) {
                return bad(format!(
                    "the delivery bound must be from 1 ms to 1 hour, not {d} ms"
                ));
            }
        }
        Ok(())
    }

    /// The steps in order: the canary (if any), then each percentage.
    pub fn stages(&self) -> Vec<Stage> {
        let canary = self.canary.as_ref().map(|c| Stage::Canary(c.expr()));
        canary
            .into_iter()
            .chain(self.steps.iter().map(|&p| Stage::Percent(p)))
            .collect()
    }

    /// The plan as stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// A stored plan.
    pub fn from_json(s: &str) -> Result<RolloutPlan, CoreError> {
        serde_json::from_str(s).map_err(|e| CoreError::invalid(format!("rollout plan: {e}")))
    }
}

fn check_url(what: &str, u: &str) -> Result<(), CoreError> {
    let ok = (u.starts_with("http://") || u.starts_with("https://"))
        && u.len() <= MAX_GUARD_LEN
        && !u.chars().any(char::is_whitespace);
    if ok {
        Ok(())
    } else {
        Err(CoreError::invalid(format!(
            "{what} `{u}` must be an http:// or https:// URL"
        )))
    }
}

/// The name of a rollout's gray variant.
pub fn gray_name(id: RolloutId) -> String {
    format!("rollout-{id}")
}

/// The gray of `stage` of rollout `id`, whose plan draws cohorts by `draw`: a label rule
/// for the canary, a `percent` rule seeded by the rollout (`<p>~rollout-<id>`) for a
/// share, so cohorts are nested as the share grows and another rollout draws anew.
pub fn gray_spec(id: RolloutId, draw: CohortDraw, stage: &Stage) -> Result<GraySpec, CoreError> {
    let name = gray_name(id);
    match stage {
        Stage::Canary(expr) => GraySpec::labels(&name, expr, Some(0)),
        Stage::Percent(p) => {
            GraySpec::percent(&name, Cohort::new(*p, &name)?.with_draw(draw), Some(0))
        }
    }
}

/// Whether `rule` is what `stage` of rollout `id` (cohorts drawn by `draw`) publishes.
pub fn rule_is(id: RolloutId, draw: CohortDraw, stage: &Stage, rule: &GrayRule) -> bool {
    gray_spec(id, draw, stage)
        .is_ok_and(|s| s.rule.expr() == rule.expr() && s.rule.kind() == rule.kind())
}

/// A stored rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    pub id: RolloutId,
    pub key: ConfigKey,
    /// The new content (published as the gray, promoted at the end).
    pub content: String,
    pub config_type: ConfigType,
    /// The formal config's md5 when the rollout started: a formal config changed since is
    /// not overwritten by the promotion (the rollout is aborted instead).
    pub base_md5: String,
    pub plan: RolloutPlan,
    pub state: RolloutState,
    /// The step (index into [`RolloutPlan::stages`]) being baked.
    pub step: u32,
    /// When that step was published, ms since the epoch.
    pub step_started_ms: i64,
    /// The highest step an operator released (`advance`); -1 none.
    pub advanced_to: i64,
    /// Why it is in its state (the last transition's reason).
    pub reason: String,
    /// The node driving it (its lease), and until when.
    pub lease_holder: String,
    pub lease_until_ms: i64,
    pub author: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// Bumped by every transition: updates compare it.
    pub version: i64,
}

impl Rollout {
    /// The changed fields of this rollout, as an update expecting its current version.
    pub fn update(&self, now_ms: i64) -> RolloutUpdate {
        RolloutUpdate {
            expected_version: self.version,
            state: self.state,
            step: self.step,
            step_started_ms: self.step_started_ms,
            advanced_to: self.advanced_to,
            reason: self.reason.clone(),
            now_ms,
        }
    }
}

/// A rollout to create (state running, step 0 started at `now_ms`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRollout {
    pub key: ConfigKey,
    pub content: String,
    pub config_type: ConfigType,
    pub base_md5: String,
    pub plan: RolloutPlan,
    pub author: String,
    pub now_ms: i64,
}

/// A transition: the new values of the mutable fields, applied only while the stored
/// version is `expected_version`.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutUpdate {
    pub expected_version: i64,
    pub state: RolloutState,
    pub step: u32,
    pub step_started_ms: i64,
    pub advanced_to: i64,
    pub reason: String,
    pub now_ms: i64,
}

/// The value of `nacelle_rollout.active_key` (unique): the key's md5 while the rollout is
/// active, `#<id>` once it is over, so a key has at most one active rollout across every
/// node sharing the database.
pub fn active_key(id: RolloutId, key: &ConfigKey, state: RolloutState) -> String {
    if state.is_active() {
        crate::md5_hex(
            format!("{}\u{1}{}\u{1}{}", key.tenant(), key.group(), key.data_id()).as_bytes(),
        )
    } else {
        format!("#{id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(steps: &[f64]) -> RolloutPlan {
        RolloutPlan {
            steps: steps.to_vec(),
            bake_ms: 1000,
            ..RolloutPlan::default()
        }
    }

    #[test]
    fn plans_are_checked() {
        assert!(plan(&[5.0, 25.0, 50.0, 100.0]).check().is_ok());
        for bad in [&[][..], &[0.0], &[50.0, 25.0], &[101.0], &[5.0, 5.0]] {
            assert!(plan(bad).check().is_err(), "{bad:?}");
        }
        let mut p = plan(&[10.0]);
        p.canary = Some(Canary::default());
        assert!(p.check().is_err());
        p.canary = Some(Canary {
            labels: Some("env=canary".into()),
            ips: vec!["10.0.0.1".into()],
        });
        assert!(p.check().is_ok());
        assert_eq!(p.stages().len(), 2);
        assert_eq!(
            p.stages()[0],
            Stage::Canary("env=canary||ClientIp=10.0.0.1".into())
        );
        p.canary = Some(Canary {
            labels: None,
            ips: vec!["10.0.0.0/8".into()],
        });
        assert!(p.check().is_err());
        let mut p = plan(&[10.0]);
        p.guards.http = Some("ftp://x".into());
        assert!(p.check().is_err());
        p.guards.http = Some("http://127.0.0.1:9/health".into());
        p.guards.delivery_ms = Some(0);
        assert!(p.check().is_err());
    }

    #[test]
    fn plans_round_trip_as_json() {
        let mut p = plan(&[5.0, 100.0]);
        p.guards.prometheus = Some(PromGuard {
            query: "up == 0".into(),
            threshold: Some(0.5),
            url: None,
        });
        assert_eq!(RolloutPlan::from_json(&p.to_json()).ok(), Some(p));
    }

    #[test]
    fn step_rules_are_recognised() -> Result<(), CoreError> {
        let stage = Stage::Percent(25.0);
        let independent = CohortDraw::Independent;
        let spec = gray_spec(7, independent, &stage)?;
        assert_eq!(spec.name, "rollout-7");
        assert_eq!(spec.rule.expr(), "25~rollout-7");
        assert!(rule_is(7, independent, &stage, &spec.rule));
        assert!(!rule_is(7, independent, &Stage::Percent(50.0), &spec.rule));
        assert!(!rule_is(7, CohortDraw::Shifted, &stage, &spec.rule));
        let shifted = gray_spec(7, CohortDraw::Shifted, &stage)?;
        assert_eq!(shifted.rule.expr(), "25@rollout-7");
        Ok(())
    }

    /// A plan stored before the draw was recorded (a rollout under way during the upgrade)
    /// keeps the shifted draw its first steps used; a new plan draws independently and
    /// says so in its JSON.
    #[test]
    fn stored_plans_keep_their_draw() -> Result<(), CoreError> {
        let old = RolloutPlan::from_json(r#"{"steps":[10,50],"bake_ms":1000}"#)?;
        assert_eq!(old.draw, CohortDraw::Shifted);
        let new = plan(&[10.0, 50.0]);
        assert_eq!(new.draw, CohortDraw::Independent);
        assert!(
            new.to_json().contains(r#""draw":"independent""#),
            "{}",
            new.to_json()
        );
        assert_eq!(
            RolloutPlan::from_json(&new.to_json())?.draw,
            CohortDraw::Independent
        );
        Ok(())
    }
}
