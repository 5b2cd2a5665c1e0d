//! Server-to-server gRPC on the cluster port (HTTP port + 1001, 9849 by default, as Nacos):
//! a member that committed a change tells the others with a `ConfigChangeClusterSyncRequest`
//! on `/Request/request`, and each of them reloads that key from the database.
//!
//! - [`ClusterGrpcServer`] serves the cluster port over a [`ConfigService`]. Only a call
//!   carrying the cluster secret in `metadata.headers` ([`SECRET_HEADER`]) counts as a
//!   member's: nothing else a caller can send (other headers, a user agent, `clientIp`, its
//!   source address) does. Without it every request is answered with `errorCode 403`.
//! - The sending side is `nacelle_cluster::ClusterSyncClient` (one HTTP/2 channel per
//!   member, on `nacelle_proto`'s client stub), so the cluster module needs nothing of
//!   this server crate.
//!
//! A notification names a key only; the receiver never trusts content from it. The
//! message's `lastModified`, `beta` and `tag` are informational: the whole key is reloaded.
//!
//! [`ConfigService`]: nacelle_service::ConfigService

mod server;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use server::ClusterGrpcServer;

/// The `metadata.headers` entry that carries the cluster secret (the same name as the HTTP
/// header of the `dataChange` call).
pub use nacelle_service::cluster::SECRET_HEADER;

/// Options of the cluster port.
#[derive(Clone)]
pub struct ClusterGrpcOptions {
    /// The shared secret every call must carry. Must not be empty.
    pub secret: String,
    /// Test-only fault (feature `fault-injection`): accept sync requests (answer success)
    /// but drop them, as a network would lose them.
    #[cfg(feature = "fault-injection")]
    pub drop_notifications: bool,
    /// Largest inbound message in bytes (a sync request is a few hundred bytes).
    pub max_inbound_message_bytes: usize,
    /// On shutdown, how long in-flight calls get before connections are cut.
    pub shutdown_grace: Duration,
}

impl std::fmt::Debug for ClusterGrpcOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ClusterGrpcOptions");
        d.field("secret", &"***");
        #[cfg(feature = "fault-injection")]
        d.field("drop_notifications", &self.drop_notifications);
        d.field("max_inbound_message_bytes", &self.max_inbound_message_bytes)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish()
    }
}

impl ClusterGrpcOptions {
    /// Defaults around `secret`: no fault, 1 MiB messages, 2 s grace.
    pub fn new(secret: impl Into<String>) -> Self {
        ClusterGrpcOptions {
            secret: secret.into(),
            #[cfg(feature = "fault-injection")]
            drop_notifications: false,
            max_inbound_message_bytes: 1024 * 1024,
            shutdown_grace: Duration::from_secs(2),
        }
    }
}

/// Counters of the cluster port: a cheap, cloneable handle.
#[derive(Debug, Clone, Default)]
pub struct ClusterSyncStats {
    inner: Arc<SyncCounters>,
}

#[derive(Debug, Default)]
struct SyncCounters {
    reloaded: AtomicU64,
    dropped: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

/// The counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterSyncSnapshot {
    /// Sync requests from members whose key was reloaded.
    pub reloaded: u64,
    /// Sync requests dropped by the test-only fault switch.
    pub dropped: u64,
    /// Calls refused for a missing or wrong secret.
    pub refused: u64,
    /// Sync requests from members that failed (bad key, database error, not ready).
    pub failed: u64,
}

impl ClusterSyncStats {
    /// The counters now.
    pub fn snapshot(&self) -> ClusterSyncSnapshot {
        let c = &self.inner;
        ClusterSyncSnapshot {
            reloaded: c.reloaded.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
        }
    }

    fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_never_show_the_secret() {
        let shown = format!("{:?}", ClusterGrpcOptions::new("very-secret-value"));
        assert!(!shown.contains("very-secret-value"), "{shown}");
    }
}
