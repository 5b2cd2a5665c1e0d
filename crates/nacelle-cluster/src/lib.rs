//! Cluster of Nacelle nodes sharing one database.
//!
//! # Layout
//! - [`members`]: the member list (`--members` or `cluster.conf`, re-read when it changes),
//!   recognising this node in it, periodic health checks.
//! - [`notify`]: after a local commit, tell every other member which key changed — over
//!   gRPC on its cluster port (`ConfigChangeClusterSyncRequest`, HTTP port + 1001), else
//!   over HTTP (`dataChange`) — merging repeated changes of a key and retrying failures
//!   with backoff (500 ms + n² s, n ≤ 6).
//! - [`sync_client`]: [`ClusterSyncClient`], the gRPC sending side: one lazily connected
//!   channel per member, `nacelle_proto`'s wire types and client stub (the receiving side
//!   is `nacelle-grpc`'s cluster port).
//!
//! A member never trusts a notification's content: it reloads the key from the database.
//! Notifications only make convergence fast; every node also follows the database's
//! history (see `ConfigService::follow_changes`), so a lost one is caught up within the
//! follow interval.

pub mod members;
pub mod notify;
pub mod sync_client;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nacelle_service::{ConfigService, MemberInfo, MembershipView};
use tokio_util::sync::CancellationToken;

pub use members::{parse_member, Membership};
pub use notify::Notifier;
pub use sync_client::{ClusterSyncClient, ClusterSyncError, SyncTimeouts};

/// The header that carries the cluster secret on calls between members.
pub use nacelle_service::cluster::SECRET_HEADER;

/// A member's cluster gRPC port is its HTTP port + this (9849 next to 8848), as in Nacos.
pub const CLUSTER_GRPC_PORT_OFFSET: u16 = 1001;

/// The cluster gRPC port of a member whose HTTP port is `http_port` (`None` past 65535).
pub fn cluster_grpc_port(http_port: u16) -> Option<u16> {
    http_port.checked_add(CLUSTER_GRPC_PORT_OFFSET)
}

/// Options of the cluster module.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Members given explicitly (`--members`); when empty, `conf_file` is read.
    pub members: Vec<String>,
    /// `cluster.conf` in the data directory: one `ip:port` per line, `#` comments.
    pub conf_file: PathBuf,
    /// This node's HTTP address as bound (port resolved).
    pub self_addr: SocketAddr,
    /// Shared secret sent on every call to another member.
    pub secret: String,
    /// How often members are health-checked and `cluster.conf` re-read.
    pub health_interval: Duration,
}

/// Error starting the cluster module.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("invalid member address `{0}`: expected host:port")]
    InvalidMember(String),
    #[error("reading {path}: {source}")]
    ReadConf {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("building the HTTP client for member calls: {0}")]
    Client(String),
}

/// The running cluster module: membership plus notifier.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub membership: Arc<Membership>,
    pub notifier: Arc<Notifier>,
}

impl Cluster {
    /// Starts membership tracking and the notifier, and hooks both into `service`
    /// (commit observer and membership view). Tasks stop when `shutdown` is cancelled.
    pub fn start(
        service: &ConfigService,
        opts: ClusterOptions,
        shutdown: CancellationToken,
    ) -> Result<Self, ClusterError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ClusterError::Client(e.to_string()))?;
        let membership = Membership::new(&opts, client.clone())?;
        let notifier = Notifier::new(
            client,
            opts.secret.clone(),
            membership.clone(),
            shutdown.clone(),
        );
        membership.spawn_health_checks(opts.health_interval, notifier.clone(), shutdown);
        notifier.sync_members();
        service.set_commit_observer(notifier.clone());
        service.set_membership(Arc::new(MembersWithCounts {
            membership: membership.clone(),
            notifier: notifier.clone(),
        }));
        Ok(Cluster {
            membership,
            notifier,
        })
    }
}

/// The member list as adapters show it: membership plus the notifications sent to each.
#[derive(Debug)]
struct MembersWithCounts {
    membership: Arc<Membership>,
    notifier: Arc<Notifier>,
}

impl MembershipView for MembersWithCounts {
    fn members(&self) -> Vec<MemberInfo> {
        let mut members = self.membership.members();
        for m in members.iter_mut().filter(|m| !m.is_self) {
            if let Some(c) = self.notifier.member_counts(&m.address()) {
                m.notified = c;
            }
        }
        members
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_port_is_http_port_plus_1001() {
        assert_eq!(cluster_grpc_port(8848), Some(9849));
        assert_eq!(cluster_grpc_port(64534), Some(65535));
        assert_eq!(cluster_grpc_port(64535), None);
    }
}
