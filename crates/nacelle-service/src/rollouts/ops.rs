//! Staged rollouts (docs/rollouts.md) as operations: the `RolloutOps` handle
//! (`rollouts(caller)`: ready service, good credentials) starts a rollout (checked as a
//! publish of its content would be: `w` on the key, the review gate, the content's type
//! and schemas), reads and lists them (`r` on the key), and makes an operator's
//! transitions (pause, resume, advance, abort: `w` on the key). Every transition is a
//! version-checked update of the rollout's row, so an operator on one node and the driver
//! on another never overwrite each other; the driver (`driver.rs`) does the rest.

use nacelle_cipher::rule::{cipher_rule, CipherRule};
use nacelle_core::audit::AuditAction;
use nacelle_core::rollout::{
    gray_name, NewRollout, Rollout, RolloutId, RolloutPlan, RolloutState, Stage,
};
use nacelle_core::{
    md5_hex, now_millis, Action, Caller, ConfigKey, ConfigMeta, CoreError, StoreError, Variant,
};
use nacelle_metrics::StoreOp;

use crate::config::audit::{key_target, Audited};
use crate::config::request::{PublishRequest, WriteNote};
use crate::config::service::ConfigService;
use nacelle_core::store::Rollouts as RolloutStore;
use std::sync::{Arc, OnceLock};

use super::guards;
use super::state::RolloutRuntime;

/// The most rollouts active (running or paused) at once across the cluster: bounds the
/// driver's work per tick and the per-rollout metric series.
pub const MAX_ACTIVE_ROLLOUTS: u32 = 100;
/// The most rollouts a listing returns.
pub const MAX_LISTED: u32 = 500;

/// A rollout to start, as a client asks for it.
#[derive(Debug, Clone)]
pub struct RolloutInput {
    pub namespace: Option<String>,
    pub group: String,
    pub data_id: String,
    pub content: String,
    /// The content's type (`yaml`, `json` …); the formal config's when absent.
    pub config_type: Option<String>,
    pub plan: RolloutPlan,
}

/// A rollout's cohort as the cluster sees it now, from the live view (docs/live-view.md):
/// of the key's listening clients, those the rollout's variant is served to, and of them
/// those that hold it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CohortProgress {
    /// Listening clients of the key on the nodes that answered.
    pub listeners: u64,
    /// Of them, the clients served the rollout's variant: the current step's cohort.
    pub cohort: u64,
    /// Of the cohort, the clients holding the rollout's content.
    pub holding: u64,
    /// Each node's part, the answering node first.
    pub nodes: Vec<NodeCohort>,
    /// Whether every node answered (else the counts are those that did).
    pub complete: bool,
}

/// One node's part of a [`CohortProgress`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCohort {
    /// The node's HTTP address.
    pub node: String,
    pub listeners: u64,
    pub cohort: u64,
    pub holding: u64,
    /// Why the node could not be asked.
    pub error: Option<String>,
}

/// The rollout operations of one caller.
#[derive(Debug)]
pub struct RolloutOps<'a> {
    service: &'a Rollouts,
    caller: &'a Caller,
}

/// How a step is named in history and transitions: `step 2/4 (25%)`, `step 1/5 (canary)`.
pub fn step_label(plan: &RolloutPlan, step: u32) -> String {
    let stages = plan.stages();
    let what = match stages.get(step as usize) {
        Some(Stage::Canary(_)) => "canary".to_string(),
        Some(Stage::Percent(p)) => format!("{p}%"),
        None => "?".to_string(),
    };
    format!("step {}/{} ({what})", step + 1, stages.len())
}

fn store_error(e: StoreError) -> CoreError {
    match e {
        StoreError::Conflict(m) => CoreError::Conflict(m),
        StoreError::CasMismatch => {
            CoreError::Conflict("the rollout changed meanwhile; try again".into())
        }
        other => other.into(),
    }
}

/// Staged rollouts: a component that owns the rollout driver's wiring and its task,
/// reaching the config core (publishes, stops and promotions of the rollout's gray, the
/// live view of its cohort) through its handle. Cheap to clone.
#[derive(Clone)]
pub struct Rollouts {
    pub(super) core: ConfigService,
    pub(super) store: Arc<dyn RolloutStore>,
    /// The driver's wiring, set once by [`Rollouts::set_driver`].
    pub(super) runtime: Arc<OnceLock<Arc<RolloutRuntime>>>,
}

impl std::fmt::Debug for Rollouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rollouts").finish_non_exhaustive()
    }
}

impl Rollouts {
    /// The staged rollouts of `core`'s keys (not driven until [`Rollouts::set_driver`]).
    pub fn new(core: &ConfigService) -> Rollouts {
        Rollouts {
            core: core.clone(),
            store: core.store().clone(),
            runtime: Arc::default(),
        }
    }

    /// The rollout operations for `caller`.
    pub fn ops<'a>(&'a self, caller: &'a Caller) -> Result<RolloutOps<'a>, CoreError> {
        self.core.guard()?;
        self.core.authenticated(caller)?;
        Ok(RolloutOps {
            service: self,
            caller,
        })
    }

    pub(crate) async fn read_rollout(&self, id: RolloutId) -> Result<Rollout, CoreError> {
        self.core
            .store_call(StoreOp::Rollouts, self.store.get_rollout(id))
            .await?
            .ok_or_else(|| CoreError::NotFound(format!("rollout {id} not found")))
    }

    /// Applies `change` to the stored rollout and writes it if nobody moved it meanwhile,
    /// re-reading and re-applying on a concurrent change (a few times). `change` refuses
    /// a transition the rollout's state does not allow.
    pub(crate) async fn transition(
        &self,
        id: RolloutId,
        change: impl Fn(&mut Rollout) -> Result<(), CoreError>,
    ) -> Result<Rollout, CoreError> {
        let mut last = CoreError::Conflict(format!("rollout {id} kept changing"));
        for _ in 0..5 {
            let mut r = self.read_rollout(id).await?;
            change(&mut r)?;
            let update = r.update(now_millis());
            match self
                .core
                .store_call(StoreOp::Rollouts, self.store.update_rollout(id, &update))
                .await
            {
                Ok(stored) => return Ok(stored),
                Err(StoreError::CasMismatch) => {
                    last = CoreError::Conflict(format!("rollout {id} kept changing"));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(last)
    }

    /// Stops the rollout's gray (its clients get the formal config at once), as the
    /// server; `Ok(false)` when there was none.
    pub(crate) async fn stop_rollout_gray(
        &self,
        r: &Rollout,
        why: &str,
    ) -> Result<bool, CoreError> {
        let note = WriteNote {
            src_user: r.author.clone(),
            message: format!("rollout {} {why}", r.id),
            change_id: None,
        };
        self.core
            .stop_gray(&Caller::internal(), &r.key, &gray_name(r.id), &note)
            .await
    }

    pub(crate) fn audit_rollout(
        &self,
        caller: &Caller,
        action: AuditAction,
        r: &Rollout,
        detail: String,
    ) {
        let event = Audited::new(action, action.as_str(), key_target(&r.key))
            .detail(format!("rollout {} {detail}", r.id));
        self.core.audit(caller, event);
    }
}

fn refuse_state(r: &Rollout, what: &str) -> CoreError {
    CoreError::Conflict(format!(
        "rollout {} is {}: cannot {what} it",
        r.id,
        r.state.as_str()
    ))
}

impl RolloutOps<'_> {
    /// Starts a rollout of `input.content` on its key under `input.plan`. Checked as a
    /// gray publish of that content would be; refused while the key has an active
    /// rollout, has no formal config, or is encrypted (`cipher-…`, not supported yet).
    ///
    /// Its guards are evaluated once before anything is published: a start is refused
    /// (nothing published) when a guard names an address no administrator allowed, cannot
    /// be evaluated, or fails already. A refused start is on record (audit).
    pub async fn start(&self, input: RolloutInput) -> Result<Rollout, CoreError> {
        let key = ConfigKey::parse(input.namespace.as_deref(), &input.group, &input.data_id)?;
        let action = AuditAction::RolloutStart;
        let refusal = Audited::of_key(action, action.as_str(), &key);
        let op = self.start_checked(key, input);
        self.service.core.on_record(self.caller, refusal, op).await
    }

    async fn start_checked(
        &self,
        key: ConfigKey,
        input: RolloutInput,
    ) -> Result<Rollout, CoreError> {
        let s = self.service;
        input.plan.check()?;
        if !matches!(cipher_rule(key.data_id()), CipherRule::Plain) {
            return Err(CoreError::invalid(
                "encrypted configs (cipher-…) cannot be rolled out in stages yet",
            ));
        }
        if let Some(p) = &input.plan.guards.prometheus {
            if p.url.is_none() && s.prometheus_url().is_none() {
                return Err(CoreError::invalid(
                    "the Prometheus guard needs a URL: give it with the guard, or start the \
                     server with --prometheus-url",
                ));
            }
        }
        s.core.authorize_key(self.caller, &key, Action::Write)?;
        s.core.review_gate(self.caller, &key)?;
        let formal = s
            .core
            .inner
            .cache
            .get(&key)
            .map(|c| c.value().clone())
            .ok_or_else(|| {
                CoreError::NotFound(
                    "config data not exist: publish the formal config before rolling out a \
                     new version of it"
                        .into(),
                )
            })?;
        let config_type = input
            .config_type
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| formal.config_type.as_str().to_string());
        // The content is checked as its first step's gray publish will be (size, type,
        // schemas), so a rollout that starts can publish every step.
        let first = input
            .plan
            .stages()
            .first()
            .cloned()
            .ok_or_else(|| CoreError::invalid("a rollout needs a step"))?;
        let probe = PublishRequest {
            key: key.clone(),
            content: input.content.clone(),
            config_type: Some(config_type),
            meta: ConfigMeta::default(),
            src_user: String::new(),
            cas_md5: None,
            variant: Variant::Gray(nacelle_core::rollout::gray_spec(
                0,
                nacelle_core::CohortDraw::Independent,
                &first,
            )?),
            message: String::new(),
            change_id: None,
        };
        let record = s.core.validate_publish(self.caller, probe)?;
        s.core.check_content_type(&record).await?;
        if record.md5 == formal.md5 {
            return Err(CoreError::invalid(
                "the content is what the config holds already: nothing to roll out",
            ));
        }
        // Only now, the caller being allowed to write the key: the guards that reach
        // outside are evaluated once, so a rollout never goes out unguarded.
        let g = &input.plan.guards;
        if g.prometheus.is_some() || g.http.is_some() {
            let Some(rt) = s.runtime.get() else {
                return Err(CoreError::invalid(
                    "this server does not drive rollouts (no HTTP client for guards): a \
                     Prometheus or health guard cannot be evaluated",
                ));
            };
            guards::check_guard_urls(rt, g)?;
            if let Some((kind, why)) = guards::probe(rt, g).await {
                return Err(CoreError::invalid(format!(
                    "the {kind} guard fails before the first step, so nothing was published: \
                     {why}"
                )));
            }
        }
        let active = s
            .core
            .store_call(
                StoreOp::Rollouts,
                s.store.list_rollouts(true, MAX_ACTIVE_ROLLOUTS),
            )
            .await?;
        if active.len() >= MAX_ACTIVE_ROLLOUTS as usize {
            return Err(CoreError::OverLimit(format!(
                "{MAX_ACTIVE_ROLLOUTS} rollouts are active already"
            )));
        }
        let new = NewRollout {
            key: key.clone(),
            content: input.content,
            config_type: record.config_type,
            base_md5: formal.md5.clone(),
            // Every rollout started now draws its cohorts anew (independent of other
            // rollouts'), whatever the adapter's plan said.
            plan: RolloutPlan {
                draw: nacelle_core::CohortDraw::Independent,
                ..input.plan
            },
            author: self.caller.operator("").to_string(),
            now_ms: now_millis(),
        };
        let id = s
            .core
            .store_call(StoreOp::Rollouts, s.store.create_rollout(&new))
            .await
            .map_err(store_error)?;
        let r = s.read_rollout(id).await?;
        s.audit_rollout(
            self.caller,
            AuditAction::RolloutStart,
            &r,
            format!(
                "{} step(s), bake {} ms{} md5={}",
                r.plan.stages().len(),
                r.plan.bake_ms,
                if r.plan.manual { ", manual" } else { "" },
                md5_hex(r.content.as_bytes())
            ),
        );
        s.wake_driver();
        Ok(r)
    }

    /// One rollout (`r` on its key).
    pub async fn get(&self, id: RolloutId) -> Result<Rollout, CoreError> {
        let r = self.service.read_rollout(id).await?;
        self.service
            .core
            .authorize_key(self.caller, &r.key, Action::Read)?;
        Ok(r)
    }

    /// The cohort of rollout `r` now, on every node (`r` on its key). Only an active
    /// rollout has a cohort; after it ended the counts are those of a gray that is gone
    /// (0 in the cohort).
    pub async fn progress(&self, r: &Rollout) -> Result<CohortProgress, CoreError> {
        let view = self
            .service
            .core
            .listeners(self.caller)?
            .key_clients(&r.key)
            .await?;
        let gray = gray_name(r.id);
        let md5 = md5_hex(r.content.as_bytes());
        let mut p = CohortProgress {
            complete: view.complete,
            ..CohortProgress::default()
        };
        for n in &view.nodes {
            let mut part = NodeCohort {
                node: n.node.clone(),
                error: n.error.clone(),
                ..NodeCohort::default()
            };
            for c in &n.clients {
                part.listeners += 1;
                if c.served_gray.as_deref() == Some(gray.as_str()) {
                    part.cohort += 1;
                    if c.held_md5 == md5 {
                        part.holding += 1;
                    }
                }
            }
            p.listeners += part.listeners;
            p.cohort += part.cohort;
            p.holding += part.holding;
            p.nodes.push(part);
        }
        Ok(p)
    }

    /// Rollouts newest first (those of keys the caller may read), at most `limit`.
    pub async fn list(&self, active_only: bool, limit: u32) -> Result<Vec<Rollout>, CoreError> {
        let s = self.service;
        let all = s
            .core
            .store_call(
                StoreOp::Rollouts,
                s.store
                    .list_rollouts(active_only, limit.clamp(1, MAX_LISTED)),
            )
            .await?;
        Ok(all
            .into_iter()
            .filter(|r| {
                s.core
                    .authorize_key(self.caller, &r.key, Action::Read)
                    .is_ok()
            })
            .collect())
    }

    /// Checks `w` on the rollout's key.
    async fn writable(&self, id: RolloutId) -> Result<Rollout, CoreError> {
        let r = self.service.read_rollout(id).await?;
        self.service
            .core
            .authorize_key(self.caller, &r.key, Action::Write)?;
        Ok(r)
    }

    fn who(&self) -> String {
        match self.caller.operator("") {
            "" => "an operator".to_string(),
            u => u.to_string(),
        }
    }

    /// Holds a running rollout at its step: its gray stays, nothing advances, guards are
    /// not evaluated until it resumes.
    pub async fn pause(&self, id: RolloutId, reason: &str) -> Result<Rollout, CoreError> {
        self.writable(id).await?;
        let why = with_reason(format!("paused by {}", self.who()), reason);
        let r = self
            .service
            .transition(id, |r| {
                if r.state != RolloutState::Running {
                    return Err(refuse_state(r, "pause"));
                }
                r.state = RolloutState::Paused;
                r.reason = why.clone();
                Ok(())
            })
            .await?;
        self.service
            .audit_rollout(self.caller, AuditAction::RolloutPause, &r, why);
        Ok(r)
    }

    /// Resumes a paused rollout; its step bakes again from now.
    pub async fn resume(&self, id: RolloutId) -> Result<Rollout, CoreError> {
        self.writable(id).await?;
        let why = format!("resumed by {}", self.who());
        let r = self
            .service
            .transition(id, |r| {
                if r.state != RolloutState::Paused {
                    return Err(refuse_state(r, "resume"));
                }
                r.state = RolloutState::Running;
                r.step_started_ms = now_millis();
                r.reason = why.clone();
                Ok(())
            })
            .await?;
        self.service
            .audit_rollout(self.caller, AuditAction::RolloutResume, &r, why);
        self.service.wake_driver();
        Ok(r)
    }

    /// Releases the current step: the driver moves to the next one (or promotes after the
    /// last) without waiting for the rest of the bake — how a manual rollout advances.
    /// A paused rollout advances once resumed.
    pub async fn advance(&self, id: RolloutId) -> Result<Rollout, CoreError> {
        self.writable(id).await?;
        let who = self.who();
        let r = self
            .service
            .transition(id, |r| {
                if !r.state.is_active() {
                    return Err(refuse_state(r, "advance"));
                }
                r.advanced_to = i64::from(r.step);
                r.reason = format!("{} released by {who}", step_label(&r.plan, r.step));
                Ok(())
            })
            .await?;
        self.service.audit_rollout(
            self.caller,
            AuditAction::RolloutAdvance,
            &r,
            r.reason.clone(),
        );
        self.service.wake_driver();
        Ok(r)
    }

    /// Stops an active rollout: its gray is stopped (its clients get the formal config
    /// at once) and the formal config is left as it is.
    pub async fn abort(&self, id: RolloutId, reason: &str) -> Result<Rollout, CoreError> {
        self.writable(id).await?;
        let why = with_reason(format!("aborted by {}", self.who()), reason);
        let r = self
            .service
            .transition(id, |r| {
                if !r.state.is_active() {
                    return Err(refuse_state(r, "abort"));
                }
                r.state = RolloutState::Aborted;
                r.reason = why.clone();
                Ok(())
            })
            .await?;
        self.service
            .audit_rollout(self.caller, AuditAction::RolloutAbort, &r, why.clone());
        self.service
            .stop_rollout_gray(&r, "aborted")
            .await
            .map_err(|e| {
                CoreError::Store(StoreError::Unavailable(format!(
                    "rollout {id} is aborted but its gray `{}` could not be stopped ({e}): \
                     stop it with `nacelle gray stop`",
                    gray_name(id)
                )))
            })?;
        Ok(r)
    }
}

fn with_reason(what: String, reason: &str) -> String {
    match reason.trim() {
        "" => what,
        r => format!("{what}: {}", r.chars().take(512).collect::<String>()),
    }
}
