//! The queue of audit events between the operations and the appender (`crate::audit`),
//! apart from the operations on it, so that `service.rs` can hold it without depending on
//! them.

use nacelle_core::audit::AuditEvent;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Events queued at most; beyond, new events are dropped (and counted).
pub const QUEUE_CAPACITY: usize = 10_000;

/// The queue between the operations and the appender.
pub(crate) struct AuditQueue {
    pub(crate) tx: mpsc::Sender<AuditEvent>,
    /// Taken by the appender when it starts (one per service).
    pub(crate) rx: Mutex<Option<mpsc::Receiver<AuditEvent>>>,
    /// Cancelled once the server stopped serving: the appender flushes and ends.
    pub(crate) finish: CancellationToken,
}

impl AuditQueue {
    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        AuditQueue {
            tx,
            rx: Mutex::new(Some(rx)),
            finish: CancellationToken::new(),
        }
    }
}
