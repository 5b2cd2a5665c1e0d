//! Cluster of Nacelle nodes sharing one database.
//!
//! # Layout
//! - `address`: parsing a member's `host:port` ([`parse_member`]), below both of the next.
//! - [`members`]: the member list (`--members` or `cluster.conf`, re-read when it changes),
//!   recognising this node in it, periodic health checks; it publishes the other members
//!   on a `watch` channel.
//! - [`notify`]: after a local commit, tell every other member which key changed — over
//!   gRPC on its cluster port (`ConfigChangeClusterSyncRequest`, HTTP port + 1001), else
//!   over HTTP (`dataChange`) — merging repeated changes of a key and retrying failures
//!   with backoff (500 ms + n² s, n ≤ 6). It follows the published member list.
//! - [`sync_client`]: [`ClusterSyncClient`], the gRPC sending side: one lazily connected
//!   channel per member, `nacelle_proto`'s wire types and client stub (the receiving side
//!   is `nacelle-grpc`'s cluster port).
//!
//! A member never trusts a notification's content: it reloads the key from the database.
//! Notifications only make convergence fast; every node also follows the database's
//! history (see `ConfigService::follow_changes`), so a lost one is caught up within the
//! follow interval.

mod address;
pub mod members;
pub mod notify;
mod peers;
pub mod sync_client;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nacelle_service::{ConfigService, MemberInfo, MembershipView};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use address::parse_member;
pub use members::Membership;
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
    #[error("the cluster module is already installed on this config service")]
    AlreadyStarted,
    #[error("resolving the member name {name}: {reason}")]
    Resolve { name: String, reason: String },
}

/// The running cluster module: membership plus notifier.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub membership: Arc<Membership>,
    pub notifier: Arc<Notifier>,
}

impl Cluster {
    /// Starts membership tracking and the notifier, and hooks both into `service`
    /// (commit observer and membership view). Every task runs on `tasks` and stops when
    /// `shutdown` is cancelled, so the caller can wait for them.
    pub fn start(
        service: &ConfigService,
        opts: ClusterOptions,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) -> Result<Self, ClusterError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ClusterError::Client(e.to_string()))?;
        let membership = Membership::new(&opts, client.clone())?;
        let client_for_peers = client.clone();
        let notifier = Notifier::new(
            client,
            opts.secret.clone(),
            membership.subscribe_peers(),
            shutdown.clone(),
            tasks.clone(),
        );
        if !service.replication().set_commit_observer(notifier.clone()) {
            return Err(ClusterError::AlreadyStarted);
        }
        if !service
            .replication()
            .set_membership(Arc::new(MembersWithCounts {
                membership: membership.clone(),
                notifier: notifier.clone(),
            }))
        {
            return Err(ClusterError::AlreadyStarted);
        }
        if !service
            .replication()
            .set_peer_queries(Arc::new(peers::Peers {
                membership: membership.clone(),
                client: client_for_peers,
                secret: opts.secret.clone(),
            }))
        {
            return Err(ClusterError::AlreadyStarted);
        }
        notifier.follow_members();
        membership.spawn_health_checks(opts.health_interval, shutdown, tasks);
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

    /// The notifier follows the member list: a queue for each peer the list publishes,
    /// none for a removed one, and every task gone after shutdown.
    #[tokio::test]
    async fn the_notifier_follows_published_members() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let conf = dir.path().join("cluster.conf");
        std::fs::write(&conf, "127.0.0.1:18201\n127.0.0.1:18202\n")?;
        let opts = ClusterOptions {
            members: vec![],
            conf_file: conf.clone(),
            self_addr: "127.0.0.1:18201".parse()?,
            secret: "0123456789abcdef".into(),
            health_interval: Duration::from_secs(60),
        };
        let membership = Membership::new(&opts, reqwest::Client::new())?;
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let notifier = Notifier::new(
            reqwest::Client::new(),
            opts.secret.clone(),
            membership.subscribe_peers(),
            shutdown.clone(),
            tasks.clone(),
        );
        notifier.follow_members();
        assert!(notifier.member_counts("127.0.0.1:18202").is_some());
        std::fs::write(&conf, "127.0.0.1:18201\n127.0.0.1:18203\n")?;
        assert!(membership.reload()?);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while notifier.member_counts("127.0.0.1:18203").is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "new member never followed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(notifier.member_counts("127.0.0.1:18202").is_none());
        assert_eq!(tasks.len(), 2, "the follower and one member queue");
        shutdown.cancel();
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait()).await?;
        assert!(tasks.is_empty());
        Ok(())
    }

    #[test]
    fn cluster_port_is_http_port_plus_1001() {
        assert_eq!(cluster_grpc_port(8848), Some(9849));
        assert_eq!(cluster_grpc_port(64534), Some(65535));
        assert_eq!(cluster_grpc_port(64535), None);
    }
}
