//! Telling the other members which key changed. One queue per member merges repeated
//! changes of a key; a failed call is retried with delay 500 ms + n² s (n ≤ 6, Nacos's
//! schedule) and a member that is down is retried later, never skipped.
//!
//! Each notification goes first as a `ConfigChangeClusterSyncRequest` to the member's
//! cluster gRPC port (its HTTP port + 1001, over one channel per member, reused), and when
//! that fails as the HTTP `dataChange` call. After a gRPC failure at the transport level
//! the member is sent HTTP directly for [`GRPC_PAUSE`], so a member whose cluster port is
//! unreachable costs one failed connection attempt per pause, not one per key.
//!
//! The notifier follows the member list's published peers (a `watch` channel, see
//! [`crate::members::Membership::subscribe_peers`]): a queue starts for each new peer and
//! stops for each removed one.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacelle_core::{now_millis, ConfigKey};
use nacelle_service::{CommitObserver, NotifyCounts};
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::address::parse_member;
use crate::sync_client::{ClusterSyncClient, ClusterSyncError, SyncTimeouts};
use crate::{cluster_grpc_port, SECRET_HEADER};

/// How long a member is notified over HTTP only after a gRPC call to it failed.
pub const GRPC_PAUSE: Duration = Duration::from_secs(10);

/// Delay before retry number `n` (1-based): 500 ms + n² × 1 s, n capped at 6.
pub fn retry_delay(n: u32) -> Duration {
    let n = u64::from(n.min(6));
    Duration::from_millis(500 + n * n * 1000)
}

struct MemberQueue {
    address: String,
    /// The member's cluster port; `None` when it cannot have one (HTTP port + 1001 > 65535).
    grpc: Option<ClusterSyncClient>,
    /// After a gRPC transport failure, gRPC is skipped until this instant.
    grpc_paused_until: Mutex<Option<Instant>>,
    /// Keys waiting to be sent, with the newest revision seen for each.
    pending: Mutex<HashMap<ConfigKey, i64>>,
    wake: Notify,
    cancel: CancellationToken,
    via_grpc: AtomicU64,
    via_http: AtomicU64,
    failed: AtomicU64,
}

impl MemberQueue {
    fn counts(&self) -> NotifyCounts {
        NotifyCounts {
            via_grpc: self.via_grpc.load(Ordering::Relaxed),
            via_http: self.via_http.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

/// The path a notification was delivered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivered {
    Grpc,
    Http,
}

/// Sends change notifications to the other members.
pub struct Notifier {
    client: reqwest::Client,
    secret: String,
    /// The other members' addresses, as the member list publishes them.
    peers: watch::Receiver<Vec<String>>,
    shutdown: CancellationToken,
    /// Where the member queues run, so shutdown can wait for them.
    tasks: TaskTracker,
    queues: Mutex<HashMap<String, Arc<MemberQueue>>>,
    grpc_timeouts: SyncTimeouts,
    /// Notifications delivered over gRPC (`ConfigChangeClusterSyncRequest`).
    pub sent_grpc: AtomicU64,
    /// Notifications delivered over HTTP (`dataChange`), after gRPC failed.
    pub sent_http: AtomicU64,
    /// Attempts that failed on both paths (each is retried).
    pub failed: AtomicU64,
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("members", &self.queues.lock().len())
            .field("sent_grpc", &self.sent_grpc.load(Ordering::Relaxed))
            .field("sent_http", &self.sent_http.load(Ordering::Relaxed))
            .field("failed", &self.failed.load(Ordering::Relaxed))
            .finish()
    }
}

impl Notifier {
    pub(crate) fn new(
        client: reqwest::Client,
        secret: String,
        peers: watch::Receiver<Vec<String>>,
        shutdown: CancellationToken,
        tasks: TaskTracker,
    ) -> Arc<Self> {
        Arc::new(Notifier {
            client,
            secret,
            peers,
            shutdown,
            tasks,
            queues: Mutex::new(HashMap::new()),
            grpc_timeouts: SyncTimeouts::default(),
            sent_grpc: AtomicU64::new(0),
            sent_http: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
    }

    /// Totals over every member.
    pub fn counts(&self) -> NotifyCounts {
        NotifyCounts {
            via_grpc: self.sent_grpc.load(Ordering::Relaxed),
            via_http: self.sent_http.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    /// Counts of one member (`host:port` as in the member list).
    pub fn member_counts(&self, address: &str) -> Option<NotifyCounts> {
        self.queues.lock().get(address).map(|q| q.counts())
    }

    /// The gRPC client of a member's cluster port, if it can have one.
    fn grpc_client(&self, address: &str) -> Option<ClusterSyncClient> {
        let (host, port) = parse_member(address).ok()?;
        let Some(port) = cluster_grpc_port(port) else {
            tracing::warn!(
                member = address,
                "member's HTTP port + 1001 exceeds 65535; notifying it over HTTP only"
            );
            return None;
        };
        match ClusterSyncClient::new(&host, port, &self.secret, self.grpc_timeouts) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(member = address, error = %e, "notifying this member over HTTP only");
                None
            }
        }
    }

    /// Starts the queues of the current peers, then follows the member list until
    /// shutdown, starting a queue for every new peer and stopping those of removed ones.
    pub(crate) fn follow_members(self: &Arc<Self>) {
        let mut peers = self.peers.clone();
        let current = peers.borrow_and_update().clone();
        self.sync_members(&current);
        let me = self.clone();
        self.tasks.spawn(async move {
            loop {
                tokio::select! {
                    changed = peers.changed() => {
                        if changed.is_err() {
                            // The member list is gone: nothing will change any more.
                            return;
                        }
                    }
                    _ = me.shutdown.cancelled() => return,
                }
                let current = peers.borrow_and_update().clone();
                me.sync_members(&current);
            }
        });
    }

    /// Starts a queue for every new peer and stops those of removed ones.
    fn sync_members(self: &Arc<Self>, peers: &[String]) {
        let mut queues = self.queues.lock();
        queues.retain(|addr, q| {
            let keep = peers.contains(addr);
            if !keep {
                q.cancel.cancel();
            }
            keep
        });
        for addr in peers {
            if queues.contains_key(addr) {
                continue;
            }
            let q = Arc::new(MemberQueue {
                grpc: self.grpc_client(addr),
                grpc_paused_until: Mutex::new(None),
                address: addr.clone(),
                pending: Mutex::new(HashMap::new()),
                wake: Notify::new(),
                cancel: self.shutdown.child_token(),
                via_grpc: AtomicU64::new(0),
                via_http: AtomicU64::new(0),
                failed: AtomicU64::new(0),
            });
            queues.insert(addr.clone(), q.clone());
            let me = self.clone();
            self.tasks.spawn(async move { me.run_queue(q).await });
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
                let sent = tokio::select! {
                    sent = self.send(&q, key, *rev) => sent,
                    // Shutdown, or the member left: a notification not sent is not a lost
                    // change, since every member follows the database's change log.
                    _ = q.cancel.cancelled() => return,
                };
                match sent {
                    Some(Delivered::Grpc) => {
                        self.sent_grpc.fetch_add(1, Ordering::Relaxed);
                        q.via_grpc.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Delivered::Http) => {
                        self.sent_http.fetch_add(1, Ordering::Relaxed);
                        q.via_http.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        self.failed.fetch_add(1, Ordering::Relaxed);
                        q.failed.fetch_add(1, Ordering::Relaxed);
                        failed_from = Some(i);
                        break;
                    }
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

    /// One notification: gRPC first (unless paused), then HTTP. `None` when both failed.
    async fn send(&self, q: &MemberQueue, key: &ConfigKey, revision: i64) -> Option<Delivered> {
        if let Some(grpc) = &q.grpc {
            let paused = q
                .grpc_paused_until
                .lock()
                .is_some_and(|until| Instant::now() < until);
            if !paused {
                match grpc.sync(key, now_millis()).await {
                    Ok(()) => return Some(Delivered::Grpc),
                    Err(e) => {
                        tracing::debug!(
                            member = %q.address,
                            cluster_port = grpc.target(),
                            error = %e,
                            "gRPC notification failed; falling back to HTTP"
                        );
                        if matches!(e, ClusterSyncError::Transport { .. }) {
                            *q.grpc_paused_until.lock() = Some(Instant::now() + GRPC_PAUSE);
                        }
                    }
                }
            }
        }
        self.send_http(&q.address, key, revision)
            .await
            .then_some(Delivered::Http)
    }

    async fn send_http(&self, address: &str, key: &ConfigKey, revision: i64) -> bool {
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
