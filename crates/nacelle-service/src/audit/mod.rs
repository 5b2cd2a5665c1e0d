//! The audit trail as the service keeps it (docs/audit.md): every audited operation queues
//! an [`AuditEvent`] without waiting ([`ConfigService::audit`]); one appender task
//! ([`ConfigService::run_audit_appender`]) writes them in batches through the store's
//! `Audit` role, which chains their hashes. An audit failure never fails or delays the
//! operation it records: a full queue drops the event, and a database that stays down
//! past [`RETRY_BOUND`] makes the appender drop the batch — each drop logged at error and
//! counted (`nacelle_audit_dropped_total`).
//!
//! Crash window: an event is queued after its operation committed and appended up to a
//! batch later (milliseconds when the database answers), so a process killed in between
//! loses the events still queued — at most [`QUEUE_CAPACITY`], normally the last few
//! milliseconds' worth. A graceful shutdown flushes the queue
//! ([`ConfigService::finish_audit`]). The `tracing` audit line (target `nacelle::audit`)
//! is written at once, so the log holds what the table may have lost.
//!
//! Reading the trail (list, the range a client verifies, the server's own verification) is
//! the [`AuditTrail`] handle, for administrators only.

use std::time::Duration;

use nacelle_api::audit::{Break, EntryFields, Verifier};
use nacelle_core::audit::{AuditEntry, AuditEvent, AuditFilter, AuditRange};
use nacelle_core::{Caller, CoreError, Page, PageRequest};
use nacelle_metrics::StoreOp;
use tokio_util::sync::CancellationToken;

use crate::config::batches::{drain, with_retry};
use crate::config::service::ConfigService;
use nacelle_core::store::Audit as AuditStore;
use std::sync::Arc;

pub use crate::config::audit::{key_target, QUEUE_CAPACITY};
/// Events appended in one transaction at most.
pub const APPEND_BATCH: usize = 200;
/// How long the appender keeps retrying a batch the database refuses (backoff from
/// 100 ms doubling to 5 s) before it drops it.
pub const RETRY_BOUND: Duration = Duration::from_secs(60);
/// Entries read per step of a verification.
pub const VERIFY_PAGE: u32 = 500;

/// The audit trail as a feature: the appender that stores what the core's audit log
/// queues, and the administrators' reading of the trail. Cheap to clone.
#[derive(Clone)]
pub struct Audit {
    core: ConfigService,
    store: Arc<dyn AuditStore>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit").finish_non_exhaustive()
    }
}

impl Audit {
    /// The audit trail of `core`'s log.
    pub fn new(core: &ConfigService) -> Audit {
        Audit {
            core: core.clone(),
            store: core.store().clone(),
        }
    }

    /// The appender: takes queued events in batches of up to [`APPEND_BATCH`] and appends
    /// each batch in one transaction, retrying with backoff for up to [`RETRY_BOUND`];
    /// ends after [`ConfigService::finish_audit`], once the queue is empty. Run it once per
    /// service (a second call returns at once).
    pub async fn run_appender(&self) {
        let Some(rx) = self.core.inner.audit.rx.lock().take() else {
            return;
        };
        let finish = self.core.inner.audit.finish.clone();
        drain(rx, APPEND_BATCH, &finish, |batch| {
            self.append(batch, &finish)
        })
        .await;
    }

    /// Appends `batch`, retrying while the database refuses for up to [`RETRY_BOUND`]
    /// (once only after shutdown began); then drops it, logged and counted.
    async fn append(&self, batch: Vec<AuditEvent>, finish: &CancellationToken) {
        let stored = with_retry("appending audit entries", RETRY_BOUND, finish, || {
            self.core
                .store_call(StoreOp::Audit, self.store.append_audit(&batch))
        })
        .await;
        if let Err(e) = stored {
            self.core.metrics().audit_dropped(batch.len() as u64);
            tracing::error!(
                target: "nacelle::audit",
                dropped = batch.len(),
                error = %e,
                "audit entries could not be stored; dropped from the database trail \
                 (they are in this log)"
            );
        }
    }

    /// Tells the appender to flush the queue and end (after the server stopped serving,
    /// so the last writes' events are in it).
    pub fn finish(&self) {
        self.core.inner.audit.finish.cancel();
    }

    /// The audit trail, for an administrator: a ready service and `ROLE_ADMIN` (with
    /// authentication on).
    pub fn trail<'a>(&'a self, caller: &'a Caller) -> Result<AuditTrail<'a>, CoreError> {
        self.core.guard()?;
        self.core.require_admin(caller)?;
        Ok(AuditTrail { service: self })
    }
}

/// Reading the audit trail: what [`ConfigService::audit_trail`] hands an administrator.
#[derive(Debug)]
pub struct AuditTrail<'a> {
    service: &'a Audit,
}

/// The result of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Entries whose hash and link were checked.
    pub checked: u64,
    /// Where the walk started: the anchor retention left (0: the beginning).
    pub anchor_seq: i64,
    /// The head's last seq when the walk ended.
    pub last_seq: i64,
    /// The first bad entry; `None`: the chain is whole.
    pub broken: Option<Break>,
}

/// The fields an entry's hash covers.
pub fn entry_fields(e: &AuditEntry) -> EntryFields<'_> {
    EntryFields {
        seq: e.seq,
        time_ms: e.event.time_ms,
        user: &e.event.user,
        address: &e.event.address,
        protocol: &e.event.protocol,
        action: &e.event.action,
        target: &e.event.target,
        outcome: &e.event.outcome,
        detail: &e.event.detail,
        change_id: e.event.change_id,
        prev_hash: &e.prev_hash,
    }
}

impl AuditTrail<'_> {
    /// Entries matching `filter`, newest first.
    pub async fn list(
        &self,
        filter: &AuditFilter,
        page: PageRequest,
    ) -> Result<Page<AuditEntry>, CoreError> {
        let s = self.service;
        Ok(s.core
            .store_call(StoreOp::Audit, s.store.audit_page(filter, page))
            .await?)
    }

    /// The head and up to `limit` entries after `after_seq`: what a client verifies.
    pub async fn range(&self, after_seq: i64, limit: u32) -> Result<AuditRange, CoreError> {
        let s = self.service;
        Ok(s.core
            .store_call(StoreOp::Audit, s.store.audit_range(after_seq, limit))
            .await?)
    }

    /// Walks the whole chain from its anchor: every hash recomputed, seq contiguity and
    /// links checked, the end compared with the head. Names the first bad entry.
    pub async fn verify(&self) -> Result<Verification, CoreError> {
        let first = self.range(0, 0).await?;
        let mut v = Verifier::new(first.head.anchor_seq, &first.head.anchor_hash);
        loop {
            let range = self.range(v.position(), VERIFY_PAGE).await?;
            let broken = if range.entries.is_empty() {
                v.finish(range.head.last_seq, &range.head.last_hash).err()
            } else {
                range
                    .entries
                    .iter()
                    .find_map(|e| v.check(&entry_fields(e), &e.hash).err())
            };
            if range.entries.is_empty() || broken.is_some() {
                return Ok(Verification {
                    checked: v.checked(),
                    anchor_seq: first.head.anchor_seq,
                    last_seq: range.head.last_seq,
                    broken,
                });
            }
        }
    }
}
