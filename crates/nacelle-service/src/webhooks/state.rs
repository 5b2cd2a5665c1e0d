//! The webhooks' state (`crate::webhooks`): the hooks in memory, the queue of deliveries
//! between the feed (`feed.rs`) and the enqueuer, and the sender's wake-up.

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use nacelle_metrics::Metrics;

use nacelle_core::pattern::Part;
use nacelle_core::webhook::{NewDelivery, Webhook};
use nacelle_core::NamespaceId;

/// Deliveries queued at most; beyond, new ones are dropped (and counted).
pub const QUEUE_CAPACITY: usize = 10_000;

pub(crate) struct WebhookState {
    /// Every webhook, its patterns parsed: read at load, after a local change and by the
    /// sender every 2 s.
    pub(crate) hooks: RwLock<Arc<Vec<Arc<LiveHook>>>>,
    pub(crate) tx: mpsc::Sender<NewDelivery>,
    /// Taken by the enqueuer when it starts (one per service).
    pub(crate) rx: Mutex<Option<mpsc::Receiver<NewDelivery>>>,
    /// Told when deliveries were stored or made pending again: the sender looks at once.
    pub(crate) wake: Notify,
    /// Cancelled once the server stopped serving: the enqueuer flushes, the sender stops.
    pub(crate) finish: CancellationToken,
    /// Counts the deliveries the feed drops (`nacelle_webhook_dropped_total`).
    pub(crate) metrics: Metrics,
}

impl WebhookState {
    pub(crate) fn new(metrics: Metrics) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        WebhookState {
            hooks: RwLock::new(Arc::new(Vec::new())),
            tx,
            rx: Mutex::new(Some(rx)),
            wake: Notify::new(),
            finish: CancellationToken::new(),
            metrics,
        }
    }
}

/// A webhook with its patterns parsed, as the feed matches it.
#[derive(Debug)]
pub(crate) struct LiveHook {
    pub(crate) hook: Webhook,
    group: Part,
    data_id: Part,
}

impl LiveHook {
    pub(crate) fn of(hook: Webhook) -> Option<LiveHook> {
        Some(LiveHook {
            group: Part::glob(&hook.group_pattern)?,
            data_id: Part::glob(&hook.data_id_pattern)?,
            hook,
        })
    }

    pub(crate) fn matches(&self, ns: &NamespaceId, group: &str, data_id: &str) -> bool {
        self.hook.namespace == *ns && self.group.matches(group) && self.data_id.matches(data_id)
    }
}
