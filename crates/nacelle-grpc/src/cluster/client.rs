//! [`ClusterSyncClient`]: sends `ConfigChangeClusterSyncRequest` to one member's cluster
//! port over one lazily connected HTTP/2 channel, reconnected on demand after a failure.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::ConfigKey;
use tonic::transport::{Channel, Endpoint};

use super::SECRET_HEADER;
use crate::proto::google::protobuf::Any;
use crate::proto::request_client::RequestClient;
use crate::proto::{Metadata, Payload};
use crate::wire;

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
        let body = wire::server_request(
            &id,
            "config",
            wire::ClusterSyncFields {
                data_id: key.data_id(),
                group: key.group(),
                tenant: key.tenant(),
                last_modified,
                beta: false,
                tag: None,
            },
        );
        let payload = Payload {
            metadata: Some(Metadata {
                r#type: wire::CONFIG_CHANGE_CLUSTER_SYNC_REQUEST.to_string(),
                client_ip: String::new(),
                headers: HashMap::from([(SECRET_HEADER.to_string(), self.secret.to_string())]),
            }),
            body: Some(Any {
                type_url: String::new(),
                value: body,
            }),
        };
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
        let (_, _, body) = wire::parts(&reply);
        let head: wire::ResponseHead =
            wire::from_json(body).map_err(|e| ClusterSyncError::BadResponse(e.to_string()))?;
        match head.result_code {
            Some(200) => Ok(()),
            Some(_) => Err(ClusterSyncError::Refused {
                code: head.error_code.unwrap_or(0),
                message: head.message.unwrap_or_default(),
            }),
            None => Err(ClusterSyncError::BadResponse("no resultCode".into())),
        }
    }
}
