//! The audit log as operations reach it: [`AuditLog::record`] writes the `tracing` audit
//! line, hands the event to its subscriber (the webhooks' feed) and queues the entry for
//! the appender (`crate::audit`) without waiting.

use std::sync::{Arc, OnceLock};

use nacelle_core::audit::AuditEvent;
use nacelle_core::{now_millis, Caller};
use nacelle_metrics::Metrics;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::audit::event::{Audited, Subject};

/// Events queued at most; beyond, new events are dropped (and counted).
pub const QUEUE_CAPACITY: usize = 10_000;

/// Told of every event that happened (outcome `ok`) and names a subject, as it is
/// recorded; must not wait (the operation that recorded it is waiting).
pub(crate) trait AuditSubscriber: Send + Sync + 'static {
    fn recorded(&self, entry: &AuditEvent, subject: Subject);
}

/// The queue between the operations and the appender, and the event stream's subscriber.
pub(crate) struct AuditLog {
    pub(crate) tx: mpsc::Sender<AuditEvent>,
    /// Taken by the appender when it starts (one per service).
    pub(crate) rx: Mutex<Option<mpsc::Receiver<AuditEvent>>>,
    /// Cancelled once the server stopped serving: the appender flushes and ends.
    pub(crate) finish: CancellationToken,
    /// Told of the events with a subject (the webhooks), once installed.
    pub(crate) subscriber: OnceLock<Arc<dyn AuditSubscriber>>,
    metrics: Metrics,
}

impl AuditLog {
    pub(crate) fn new(metrics: Metrics) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        AuditLog {
            tx,
            rx: Mutex::new(Some(rx)),
            finish: CancellationToken::new(),
            subscriber: OnceLock::new(),
            metrics,
        }
    }

    /// Records `event` for `caller`: the `tracing` audit line at once, and the entry queued
    /// for the database without waiting (dropped and counted when the queue is full).
    pub(crate) fn record(&self, caller: &Caller, mut event: Audited<'_>) {
        let subject = event.subject.take();
        let user = event.user.or(caller.user());
        let ok = event.refused.is_none();
        let detail = match &event.refused {
            Some(reason) if event.detail.is_empty() => reason.clone(),
            Some(reason) => format!("{} ({reason})", event.detail),
            None => event.detail.clone(),
        };
        tracing::info!(
            target: "nacelle::audit",
            event = event.log_event,
            user = user.unwrap_or("-"),
            ip = %caller.ip_string(),
            protocol = caller.protocol.as_str(),
            target = event.target.as_str(),
            detail = detail.as_str(),
            ok,
        );
        let entry = AuditEvent {
            time_ms: now_millis(),
            user: user.unwrap_or_default().to_string(),
            address: caller.ip_string(),
            protocol: caller.protocol.as_str().to_string(),
            action: event.action.as_str().to_string(),
            target: event.target,
            outcome: match event.refused {
                None => "ok".to_string(),
                Some(reason) => format!("refused: {reason}"),
            },
            detail: event.detail,
            change_id: event.change_id,
        };
        // Webhooks are fed from here, with the trail: only what happened (outcome ok).
        if let (true, Some(subject), Some(to)) = (ok, subject, self.subscriber.get()) {
            to.recorded(&entry, subject);
        }
        if self.tx.try_send(entry).is_err() {
            self.metrics.audit_dropped(1);
            tracing::error!(
                target: "nacelle::audit",
                event = event.log_event,
                "audit queue full (or closed): event dropped from the database trail"
            );
        }
    }
}
