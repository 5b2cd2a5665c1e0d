//! Telling the other members which key changed. One queue per member merges repeated
//! changes of a key; a failed call is retried with delay 500 ms + n² s (n ≤ 6, Nacos's
//! schedule) and a member that is down is retried later, never skipped.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::ConfigKey;
use nacelle_service::CommitObserver;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::members::Membership;
use crate::SECRET_HEADER;

/// Delay before retry number `n` (1-based): 500 ms + n² × 1 s, n capped at 6.
pub fn retry_delay(n: u32) -> Duration {
    let n = u64::from(n.min(6));
    Duration::from_millis(500 + n * n * 1000)
}

struct MemberQueue {
    address: String,
    /// Keys waiting to be sent, with the newest revision seen for each.
    pending: Mutex<HashMap<ConfigKey, i64>>,
    wake: Notify,
    cancel: CancellationToken,
}

/// Sends change notifications to the other members.
pub struct Notifier {
    client: reqwest::Client,
    secret: String,
    membership: Arc<Membership>,
    shutdown: CancellationToken,
    queues: Mutex<HashMap<String, Arc<MemberQueue>>>,
    /// Notifications delivered.
    pub sent: AtomicU64,
    /// Failed attempts (each is retried).
    pub failed: AtomicU64,
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("members", &self.queues.lock().len())
            .field("sent", &self.sent.load(Ordering::Relaxed))
            .field("failed", &self.failed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Notifier {
    pub(crate) fn new(
        client: reqwest::Client,
        secret: String,
        membership: Arc<Membership>,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Notifier {
            client,
            secret,
            membership,
            shutdown,
            queues: Mutex::new(HashMap::new()),
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
    }

    /// Starts a queue for every new peer and stops those of removed ones.
    pub fn sync_members(self: &Arc<Self>) {
        let peers = self.membership.peers();
        let mut queues = self.queues.lock();
        queues.retain(|addr, q| {
            let keep = peers.contains(addr);
            if !keep {
                q.cancel.cancel();
            }
            keep
        });
        for addr in peers {
            if queues.contains_key(&addr) {
                continue;
            }
            let q = Arc::new(MemberQueue {
                address: addr.clone(),
                pending: Mutex::new(HashMap::new()),
                wake: Notify::new(),
                cancel: self.shutdown.child_token(),
            });
            queues.insert(addr, q.clone());
            let me = self.clone();
            tokio::spawn(async move { me.run_queue(q).await });
        }
    }

    async fn run_queue(self: Arc<Self>, q: Arc<MemberQueue>) {
        let mut attempt: u32 = 0;
        loop {
            if q.pending.lock().is_empty() {
                tokio::select! {
                    _ = q.wake.notified() => {}
                    _ = q.cancel.cancelled() => return,
                }
            }
            let batch: Vec<(ConfigKey, i64)> = q.pending.lock().drain().collect();
            let mut failed_from = None;
            for (i, (key, rev)) in batch.iter().enumerate() {
                if self.send(&q.address, key, *rev).await {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    failed_from = Some(i);
                    break;
                }
            }
            match failed_from {
                None => attempt = 0,
                Some(i) => {
                    {
                        let mut pending = q.pending.lock();
                        for (key, rev) in &batch[i..] {
                            let e = pending.entry(key.clone()).or_insert(*rev);
                            *e = (*e).max(*rev);
                        }
                    }
                    attempt = attempt.saturating_add(1);
                    let delay = retry_delay(attempt);
                    tracing::debug!(member = %q.address, attempt, ?delay, "notification failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = q.cancel.cancelled() => return,
                    }
                }
            }
        }
    }

    async fn send(&self, address: &str, key: &ConfigKey, revision: i64) -> bool {
        let url = format!("http://{address}/nacos/v1/cs/communication/dataChange");
        let mut query = vec![("dataId", key.data_id()), ("group", key.group())];
        if !key.tenant().is_empty() {
            query.push(("tenant", key.tenant()));
        }
        let rev = revision.to_string();
        let result = self
            .client
            .get(url)
            .query(&query)
            .header(SECRET_HEADER, &self.secret)
            .header("revision", rev)
            .send()
            .await;
        match result {
            Ok(r) if r.status().is_success() => true,
            Ok(r) => {
                tracing::debug!(member = address, status = %r.status(), "member refused a notification");
                false
            }
            Err(e) => {
                tracing::debug!(member = address, error = %e, "notifying a member failed");
                false
            }
        }
    }
}

impl CommitObserver for Notifier {
    fn committed(&self, key: &ConfigKey, revision: i64) {
        for q in self.queues.lock().values() {
            let mut pending = q.pending.lock();
            let e = pending.entry(key.clone()).or_insert(revision);
            *e = (*e).max(revision);
            drop(pending);
            q.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_schedule_matches_nacos() {
        assert_eq!(retry_delay(1), Duration::from_millis(1500));
        assert_eq!(retry_delay(2), Duration::from_millis(4500));
        assert_eq!(retry_delay(6), Duration::from_millis(36_500));
        assert_eq!(retry_delay(60), Duration::from_millis(36_500));
    }
}
