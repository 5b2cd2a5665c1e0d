//! [`ClusterSyncClient`]: sends `ConfigChangeClusterSyncRequest` to one member's cluster
//! port over one lazily connected HTTP/2 channel, reconnected on demand after a failure.
//!
//! The wire types are `nacelle_proto`'s; the receiving side is `nacelle-grpc`'s cluster
//! port, which accepts only calls carrying the cluster secret in `metadata.headers`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::ConfigKey;
use nacelle_proto::cluster::{ConfigChangeClusterSyncRequest, ConfigChangeClusterSyncResponse};
use nacelle_proto::grpc::request_client::RequestClient;
use nacelle_proto::{Payload, PayloadError};
use tonic::transport::{Channel, Endpoint};

use crate::SECRET_HEADER;

/// Timeouts of member calls. Short, so that a member that is down costs little before the
/// caller falls back to HTTP or schedules a retry.
#[derive(Debug, Clone, Copy)]
pub struct SyncTimeouts {
    /// Establishing the TCP connection.
    pub connect: Duration,
    /// One whole call, connection included.
    pub call: Duration,
}

impl Default for SyncTimeouts {
    fn default() -> Self {
        SyncTimeouts {
            connect: Duration::from_secs(1),
            call: Duration::from_secs(3),
        }
    }
}

/// Why a sync call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterSyncError {
    /// The member's address cannot be a URL.
    #[error("invalid member address `{0}`")]
    InvalidAddress(String),
    /// The call failed at the transport level (connection refused, timeout, reset…).
    #[error("gRPC call failed: {code:?}: {message}")]
    Transport { code: tonic::Code, message: String },
    /// The member answered with an error (`errorCode 403` for a wrong secret).
    #[error("the member refused the sync: errorCode {code}: {message}")]
    Refused { code: i32, message: String },
    /// The member's answer is not a Nacos response.
    #[error("unreadable answer from the member: {0}")]
    BadResponse(String),
}

impl From<PayloadError> for ClusterSyncError {
    fn from(e: PayloadError) -> Self {
        ClusterSyncError::BadResponse(e.to_string())
    }
}

/// A client of one member's cluster port. Cloning is cheap and shares the channel.
#[derive(Clone)]
pub struct ClusterSyncClient {
    target: Arc<str>,
    rpc: RequestClient<Channel>,
    secret: Arc<str>,
    next_id: Arc<AtomicU64>,
}

impl std::fmt::Debug for ClusterSyncClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSyncClient")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl ClusterSyncClient {
    /// A client of `host:port` (the member's *cluster* port). Nothing is connected yet: the
    /// channel connects on the first call and again after it breaks. Must be called within
    /// a tokio runtime.
    pub fn new(
        host: &str,
        port: u16,
        secret: &str,
        timeouts: SyncTimeouts,
    ) -> Result<Self, ClusterSyncError> {
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let endpoint = Endpoint::from_shared(format!("http://{authority}"))
            .map_err(|_| ClusterSyncError::InvalidAddress(authority.clone()))?
            .connect_timeout(timeouts.connect)
            .timeout(timeouts.call)
            .tcp_nodelay(true);
        Ok(ClusterSyncClient {
            target: authority.into(),
            rpc: RequestClient::new(endpoint.connect_lazy()),
            secret: secret.into(),
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    /// `host:port` of the member's cluster port.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Tells the member that `key` changed (at `last_modified` ms); it reloads the key from
    /// the database. `Ok` once the member answered `resultCode 200`.
    pub async fn sync(&self, key: &ConfigKey, last_modified: i64) -> Result<(), ClusterSyncError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        let request = ConfigChangeClusterSyncRequest::new(
            id,
            key.data_id(),
            key.group(),
            key.tenant(),
            last_modified,
        );
        let payload =
            Payload::from_message(&request)?.with_header(SECRET_HEADER, self.secret.as_ref());
        let reply = self
            .rpc
            .clone()
            .request(payload)
            .await
            .map_err(|s| ClusterSyncError::Transport {
                code: s.code(),
                message: s.message().to_string(),
            })?
            .into_inner();
        // A refusal may come as an `ErrorResponse` as well as the sync response: read the
        // head of whichever it is.
        let head = if reply.type_name() == nacelle_proto::types::ERROR_RESPONSE {
            reply.head()?
        } else {
            reply.parse::<ConfigChangeClusterSyncResponse>()?.head
        };
        if head.is_ok() {
            Ok(())
        } else {
            Err(ClusterSyncError::Refused {
                code: head.error_code,
                message: head.message.unwrap_or_default(),
            })
        }
    }
}
