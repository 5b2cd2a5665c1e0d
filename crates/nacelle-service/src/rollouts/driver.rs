//! The rollout driver (docs/rollouts.md): one task per node that, every tick, lists the
//! active rollouts, takes or renews the database lease of each (a compare-and-set
//! `UPDATE`: one node drives a rollout at a time; another takes over once the lease
//! expires) and moves the ones it holds:
//!
//! 1. the step's gray (`rollout-<id>`: the canary's label rule, or the step's `percent`
//!    rule) is published if the key does not hold it — so a new driver, or a restarted
//!    node, resumes at the step in the database and publishes nothing twice;
//! 2. while it bakes, the guards are evaluated; any failing one rolls the rollout back
//!    (the gray is stopped first: every cohort client is told at once and gets the formal
//!    config), state `rolled-back` with the reason;
//! 3. once the bake is over (or an operator released the step), the next step starts —
//!    or, after the last, the gray is promoted.
//!
//! Nothing is only in memory but the delivery guard's "lagging since" times, which a new
//! driver starts afresh. Probes (Prometheus, HTTP) are a [`GuardProbe`] the binary
//! provides, so the service stays free of an HTTP client.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::audit::AuditAction;
use nacelle_core::rollout::{
    gray_name, gray_spec, rule_is, Rollout, RolloutId, RolloutState, Stage,
};
use nacelle_core::{md5_hex, now_millis, Caller, ConfigMeta, CoreError, Variant};
use nacelle_metrics::{RolloutFigures, StoreOp};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::guards;
use super::ops::{step_label, Rollouts, MAX_ACTIVE_ROLLOUTS};
use super::state::{DriverConfig, GuardProbe, RolloutRuntime};
use crate::config::request::{PublishRequest, WriteNote};

/// What the driver remembers of a rollout between ticks (lost with the lease, which is
/// harmless: it only delays the delivery guard).
#[derive(Debug, Default)]
struct Tracker {
    /// Cohort listeners out of sync, by listener identity, since when (ms).
    lagging: HashMap<usize, i64>,
}

impl Rollouts {
    /// Wires the rollout driver (once); `false` when one was wired already.
    pub fn set_driver(&self, config: DriverConfig, probe: Arc<dyn GuardProbe>) -> bool {
        let runtime = RolloutRuntime {
            config,
            probe,
            wake: Notify::new(),
        };
        self.runtime.set(Arc::new(runtime)).is_ok()
    }

    /// The Prometheus of guards that name none.
    pub(crate) fn prometheus_url(&self) -> Option<String> {
        self.runtime
            .get()
            .and_then(|rt| rt.config.prometheus_url.clone())
    }

    /// Makes the driver look at the rollouts now rather than at its next tick.
    pub(crate) fn wake_driver(&self) {
        if let Some(rt) = self.runtime.get() {
            rt.wake.notify_one();
        }
    }

    /// Drives rollouts until shutdown (see the module's documentation). Returns at once
    /// when no driver was wired.
    pub async fn drive(&self) {
        let Some(rt) = self.runtime.get().cloned() else {
            return;
        };
        let token = self.core.shutdown_token().clone();
        let mut memory: HashMap<RolloutId, Tracker> = HashMap::new();
        loop {
            tokio::select! {
                _ = token.cancelled() => {
                    self.release_leases(&rt, memory.keys().copied()).await;
                    return;
                }
                _ = tokio::time::sleep(rt.config.tick) => {}
                _ = rt.wake.notified() => {}
            }
            if !self.core.is_ready() {
                continue;
            }
            let listed = self
                .core
                .store_call(
                    StoreOp::Rollouts,
                    self.store.list_rollouts(true, MAX_ACTIVE_ROLLOUTS),
                )
                .await;
            let active = match listed {
                Ok(active) => active,
                Err(e) => {
                    tracing::debug!(error = %e, "reading active rollouts failed");
                    continue;
                }
            };
            let figures: Vec<RolloutFigures> = active.iter().map(|r| self.figures(r)).collect();
            self.core.metrics().set_rollouts(&figures);
            let lease_ms = i64::try_from(rt.config.lease.as_millis()).unwrap_or(i64::MAX);
            let mut tasks = JoinSet::new();
            let mut held = Vec::new();
            for r in active {
                // The row was read this tick: a lease another node holds unexpired is not
                // tried (the compare-and-set would fail), and this node's own is renewed
                // only once half of it is gone — a write per rollout every few ticks, not
                // one per node and tick.
                let now = now_millis();
                let mine = r.lease_holder == rt.config.node;
                if !mine && r.lease_until_ms > now {
                    continue;
                }
                let renewed = if mine && r.lease_until_ms - now > lease_ms / 2 {
                    Ok(true)
                } else {
                    let claim = self
                        .store
                        .claim_rollout(r.id, &rt.config.node, now, lease_ms);
                    self.core.store_call(StoreOp::Rollouts, claim).await
                };
                match renewed {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::debug!(id = r.id, error = %e, "rollout lease not renewed");
                        continue;
                    }
                }
                held.push(r.id);
                let tracker = memory.remove(&r.id).unwrap_or_default();
                let (service, rt) = (self.clone(), rt.clone());
                tasks.spawn(async move {
                    let id = r.id;
                    (id, service.drive_one(&rt, r, tracker).await)
                });
            }
            memory.retain(|id, _| held.contains(id));
            while let Some(done) = tasks.join_next().await {
                if let Ok((id, tracker)) = done {
                    memory.insert(id, tracker);
                }
            }
        }
    }

    /// Gives up the leases this node holds (a graceful shutdown), so another node takes
    /// them over at its next tick rather than after they expire. Best effort, bounded.
    async fn release_leases(&self, rt: &RolloutRuntime, held: impl Iterator<Item = RolloutId>) {
        for id in held {
            // A lease of 0 ms from now: expired for everyone else a millisecond later.
            let release = self
                .store
                .claim_rollout(id, &rt.config.node, now_millis(), 0);
            match tokio::time::timeout(Duration::from_secs(1), release).await {
                Ok(Ok(_)) => tracing::debug!(id, "rollout lease released"),
                Ok(Err(e)) => tracing::debug!(id, error = %e, "rollout lease not released"),
                Err(_) => tracing::debug!(id, "rollout lease release timed out"),
            }
        }
    }

    /// This node's figures of an active rollout.
    fn figures(&self, r: &Rollout) -> RolloutFigures {
        let percent = match r.plan.stages().get(r.step as usize) {
            Some(Stage::Percent(p)) => *p,
            _ => 0.0,
        };
        RolloutFigures {
            id: r.id,
            step: r.step + 1,
            percent,
            cohort_clients: self.cohort_views(r).len() as u64,
        }
    }

    /// This node's listeners of the rollout's key served its gray.
    fn cohort_views(&self, r: &Rollout) -> Vec<crate::config::watch::ListenerView> {
        let name = gray_name(r.id);
        let internal = Caller::internal();
        let views = self
            .core
            .listeners(&internal)
            .and_then(|l| l.views_of_key(&r.key));
        views
            .unwrap_or_default()
            .into_iter()
            .filter(|v| v.gray.as_deref() == Some(name.as_str()))
            .collect()
    }

    /// One tick of a rollout this node holds the lease of.
    async fn drive_one(&self, rt: &RolloutRuntime, r: Rollout, mut tracker: Tracker) -> Tracker {
        if r.state != RolloutState::Running {
            return tracker;
        }
        let stages = r.plan.stages();
        let last = u32::try_from(stages.len()).unwrap_or(1).saturating_sub(1);
        let step = r.step.min(last);
        let Some(stage) = stages.get(step as usize) else {
            return tracker;
        };
        let md5 = md5_hex(r.content.as_bytes());
        let name = gray_name(r.id);
        let holds = self.core.inner.grays.get(&r.key).and_then(|set| {
            set.get(&name)
                .map(|g| rule_is(r.id, r.plan.draw, stage, &g.rule) && g.config.md5 == md5)
        });
        let formal_md5 = self.core.inner.cache.get(&r.key).map(|c| c.md5.clone());
        match holds {
            Some(true) => {}
            // Promoted before the state said so (a driver stopped in between).
            None if step == last && formal_md5.as_deref() == Some(md5.as_str()) => {
                self.mark_promoted(&r).await;
                return tracker;
            }
            _ => {
                if let Err(e) = self.publish_step(&r, step).await {
                    tracing::warn!(id = r.id, error = %e, "rollout step not published; retried next tick");
                }
                return tracker;
            }
        }
        if let Some((kind, why)) = self.failing_guard(rt, &r, &mut tracker).await {
            self.roll_back(&r, kind, why).await;
            return tracker;
        }
        let now = now_millis();
        let released = r.advanced_to >= i64::from(r.step);
        let baked = !r.plan.manual && now >= r.step_started_ms.saturating_add(r.plan.bake_ms);
        if !released && !baked {
            return tracker;
        }
        if step >= last {
            self.finish(&r, formal_md5.as_deref()).await;
            return tracker;
        }
        let from = r.step;
        let next = self
            .transition(r.id, |x| {
                if x.state != RolloutState::Running || x.step != from {
                    return Err(CoreError::Conflict("moved".into()));
                }
                x.step = from + 1;
                x.step_started_ms = now_millis();
                x.reason = step_label(&x.plan, x.step);
                Ok(())
            })
            .await;
        match next {
            Ok(next) => {
                let label = step_label(&next.plan, next.step);
                self.audit_rollout(&Caller::internal(), AuditAction::RolloutStep, &next, label);
                if let Err(e) = self.publish_step(&next, next.step).await {
                    tracing::warn!(id = r.id, error = %e, "rollout step not published; retried next tick");
                }
                Tracker::default()
            }
            Err(e) => {
                tracing::debug!(id = r.id, error = %e, "rollout not advanced");
                tracker
            }
        }
    }

    /// Publishes the gray of `step`, as the server, in the rollout's author's name.
    async fn publish_step(&self, r: &Rollout, step: u32) -> Result<(), CoreError> {
        let stage = r
            .plan
            .stages()
            .get(step as usize)
            .cloned()
            .ok_or_else(|| CoreError::invalid("no such step"))?;
        let req = PublishRequest {
            key: r.key.clone(),
            content: r.content.clone(),
            config_type: Some(r.config_type.as_str().to_string()),
            meta: ConfigMeta::default(),
            src_user: r.author.clone(),
            cas_md5: None,
            variant: Variant::Gray(gray_spec(r.id, r.plan.draw, &stage)?),
            message: format!("rollout {} {}", r.id, step_label(&r.plan, step)),
            change_id: None,
        };
        self.core.publish(&Caller::internal(), req).await?;
        // An operator may have ended the rollout (abort: state first, then the gray stop)
        // between this tick's read and the publish: then the gray just published must go
        // too, or it would outlive its rollout.
        let now = self.read_rollout(r.id).await?;
        if !now.state.is_active() {
            self.stop_rollout_gray(&now, now.state.as_str()).await?;
        }
        Ok(())
    }

    /// The first failing guard: its kind (the metric's label) and why.
    async fn failing_guard(
        &self,
        rt: &RolloutRuntime,
        r: &Rollout,
        tracker: &mut Tracker,
    ) -> Option<(&'static str, String)> {
        let g = &r.plan.guards;
        if let Some(failing) = guards::probe(rt, g).await {
            return Some(failing);
        }
        if let Some(bound) = g.delivery_ms {
            let now = now_millis();
            let mut lagging = HashMap::new();
            let mut late = Vec::new();
            for v in self.cohort_views(r).into_iter().filter(|v| !v.in_sync) {
                let id = Arc::as_ptr(&v.listener) as usize;
                let since = tracker.lagging.get(&id).copied().unwrap_or(now);
                lagging.insert(id, since);
                if now.saturating_sub(since) > bound {
                    late.push(v.listener.ip_string());
                }
            }
            tracker.lagging = lagging;
            if let Some(first) = late.first() {
                return Some((
                    "delivery",
                    format!(
                        "{} cohort client(s) did not take the new version within {bound} ms \
                         (e.g. {first})",
                        late.len()
                    ),
                ));
            }
        }
        None
    }

    /// Rolls `r` back: its gray stopped first (every cohort client is told at once), then
    /// the state. A stop that fails is retried at the next tick.
    async fn roll_back(&self, r: &Rollout, kind: &'static str, why: String) {
        let why: String = why.chars().take(400).collect();
        if let Err(e) = self.stop_rollout_gray(r, "rolled back").await {
            tracing::warn!(id = r.id, error = %e, "rollback: the gray could not be stopped; retried next tick");
            return;
        }
        let reason = format!("rolled back at {}: {why}", step_label(&r.plan, r.step));
        let done = self
            .transition(r.id, |x| {
                if !x.state.is_active() {
                    return Err(CoreError::Conflict("over".into()));
                }
                x.state = RolloutState::RolledBack;
                x.reason = reason.clone();
                Ok(())
            })
            .await;
        match done {
            Ok(r) => {
                self.core.metrics().rollout_rollback(kind);
                tracing::warn!(id = r.id, key = %r.key, reason = %r.reason, "rollout rolled back");
                self.audit_rollout(
                    &Caller::internal(),
                    AuditAction::RolloutRollback,
                    &r,
                    reason,
                );
            }
            Err(e) => tracing::debug!(id = r.id, error = %e, "rollback not recorded"),
        }
    }

    /// After the last step: promotes the gray, unless the formal config changed since the
    /// rollout started (then the rollout is aborted, the gray stopped: nothing is
    /// overwritten).
    async fn finish(&self, r: &Rollout, formal_md5: Option<&str>) {
        let md5 = md5_hex(r.content.as_bytes());
        if formal_md5 == Some(md5.as_str()) {
            // Someone promoted (or published) the new content already: nothing to
            // overwrite; the gray, if any, goes.
            if let Err(e) = self.stop_rollout_gray(r, "promoted").await {
                tracing::warn!(id = r.id, error = %e, "the promoted rollout's gray was not stopped");
                return;
            }
            self.mark_promoted(r).await;
            return;
        }
        if formal_md5 != Some(r.base_md5.as_str()) {
            let reason = format!(
                "aborted: the formal config changed during the rollout (md5 {} at the start, \
                 {} now); the new version was not promoted",
                r.base_md5,
                formal_md5.unwrap_or("none")
            );
            let done = self
                .transition(r.id, |x| {
                    x.state = RolloutState::Aborted;
                    x.reason = reason.clone();
                    Ok(())
                })
                .await;
            if let Ok(r) = done {
                self.audit_rollout(&Caller::internal(), AuditAction::RolloutAbort, &r, reason);
                if let Err(e) = self.stop_rollout_gray(&r, "aborted").await {
                    tracing::warn!(id = r.id, error = %e, "the aborted rollout's gray was not stopped");
                }
            }
            return;
        }
        // The state as it is now: an operator's pause or abort since this tick's read wins.
        match self.read_rollout(r.id).await {
            Ok(now) if now.state == RolloutState::Running && now.step == r.step => {}
            _ => return,
        }
        let note = WriteNote {
            src_user: r.author.clone(),
            message: format!("rollout {} promoted", r.id),
            change_id: None,
        };
        match self
            .core
            .promote_gray(&Caller::internal(), &r.key, &gray_name(r.id), &note)
            .await
        {
            Ok(_) => self.mark_promoted(r).await,
            Err(e) => {
                tracing::warn!(id = r.id, error = %e, "rollout not promoted; retried next tick")
            }
        }
    }

    async fn mark_promoted(&self, r: &Rollout) {
        let reason = format!("promoted after {}", step_label(&r.plan, r.step));
        let done = self
            .transition(r.id, |x| {
                if !x.state.is_active() {
                    return Err(CoreError::Conflict("over".into()));
                }
                x.state = RolloutState::Promoted;
                x.reason = reason.clone();
                Ok(())
            })
            .await;
        match done {
            Ok(r) => {
                tracing::info!(id = r.id, key = %r.key, "rollout promoted");
                self.audit_rollout(&Caller::internal(), AuditAction::RolloutPromote, &r, reason);
            }
            Err(e) => tracing::debug!(id = r.id, error = %e, "promotion not recorded"),
        }
    }
}
