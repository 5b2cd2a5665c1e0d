//! [`ClusterGrpcServer`]: `/Request/request` on the cluster port. The secret is checked
//! first, on every request; then `ConfigChangeClusterSyncRequest` reloads its key and
//! `HealthCheckRequest` is answered; anything else is `302`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nacelle_proto::cluster::{ConfigChangeClusterSyncRequest, ConfigChangeClusterSyncResponse};
use nacelle_proto::response::{ErrorResponse, HealthCheckResponse};
use nacelle_proto::{types, Payload, ResponseHead};
use nacelle_service::cluster::secret_matches;
use nacelle_service::ConfigService;
use tokio::net::TcpListener;

use super::{ClusterGrpcOptions, ClusterSyncStats, SECRET_HEADER};
use crate::error::GrpcError;
use crate::errors::{error_response, fail_head, unparsable, WireError};
use crate::rpc::Methods;
use crate::stats::GrpcStats;
use crate::tcp::ConnTag;
use crate::transport::Acceptor;
use crate::wire::{self, key_of, RequestMeta};

#[derive(Debug)]
struct ClusterCtx {
    service: ConfigService,
    opts: ClusterGrpcOptions,
    stats: ClusterSyncStats,
}

/// The cluster port's server over a [`ConfigService`]. Create it, keep its
/// [`ClusterSyncStats`] if wanted, then [`ClusterGrpcServer::serve`] it.
#[derive(Debug)]
pub struct ClusterGrpcServer {
    ctx: Arc<ClusterCtx>,
}

impl ClusterGrpcServer {
    /// A server answering member calls over `service`.
    pub fn new(service: ConfigService, opts: ClusterGrpcOptions) -> Self {
        ClusterGrpcServer {
            ctx: Arc::new(ClusterCtx {
                service,
                opts,
                stats: ClusterSyncStats::default(),
            }),
        }
    }

    /// The counters of this server; the handle stays valid after the server stops.
    pub fn stats(&self) -> ClusterSyncStats {
        self.ctx.stats.clone()
    }

    /// Serves `/Request/request` on `listener` until `shutdown` completes; then stops
    /// accepting, gives in-flight calls `shutdown_grace` and cuts what is left.
    pub async fn serve<F>(self, listener: TcpListener, shutdown: F) -> Result<(), GrpcError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let ctx = self.ctx;
        if ctx.opts.secret.is_empty() {
            return Err(GrpcError::InvalidOptions(
                "the cluster port needs a cluster secret".into(),
            ));
        }
        if ctx.opts.max_inbound_message_bytes == 0 {
            return Err(GrpcError::InvalidOptions(
                "max_inbound_message_bytes must be > 0".into(),
            ));
        }
        let local = listener.local_addr().map_err(GrpcError::Listener)?;
        tracing::info!(addr = %local, "cluster gRPC server listening");
        // The connection counters of the accept loop are not reported for this port.
        let acceptor = Acceptor::start(listener, ctx.clone(), GrpcStats::new(), None);
        shutdown.await;
        acceptor.shut_down(ctx.opts.shutdown_grace).await;
        tracing::info!(addr = %local, "cluster gRPC server stopped");
        Ok(())
    }
}

/// The cluster port serves `/Request/request` only.
impl Methods for ClusterCtx {
    fn max_message(&self) -> usize {
        self.opts.max_inbound_message_bytes
    }

    async fn unary(self: Arc<Self>, tag: ConnTag, request: Payload) -> Payload {
        handle(&self, Some(tag.remote), request).await
    }
}

/// Whether the request carries the cluster secret in `metadata.headers` (the header name
/// is matched without regard to case).
fn carries_secret(meta: &RequestMeta, expected: &str) -> bool {
    meta.headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case(SECRET_HEADER) && secret_matches(v, expected))
}

/// Answers one call. Never fails: every error is a Nacos error response.
async fn handle(ctx: &ClusterCtx, remote: Option<SocketAddr>, payload: Payload) -> Payload {
    let (meta, body) = RequestMeta::take(payload);
    let (type_name, body) = (meta.type_name.as_str(), &body[..]);
    let is_sync = type_name == types::CONFIG_CHANGE_CLUSTER_SYNC_REQUEST;
    if !carries_secret(&meta, &ctx.opts.secret) {
        let n = ctx.stats.inner.refused.fetch_add(1, Ordering::Relaxed) + 1;
        // Logged at warn on the 1st, 2nd, 4th, 8th… refusal, so a scanner cannot flood the log.
        if n.is_power_of_two() {
            tracing::warn!(
                remote = ?remote,
                type_name,
                refused = n,
                "refused a cluster call without the cluster secret (is --cluster-secret the same on every member?)"
            );
        } else {
            tracing::debug!(remote = ?remote, type_name, "refused a cluster call without the cluster secret");
        }
        let e = WireError::not_member();
        let head = ResponseHead::fail(e.code, e.message, wire::request_id_of(body));
        // Nacos answers an unauthorised call with the handler's own response type.
        return if is_sync {
            sync_reply(head)
        } else {
            wire::message(&ErrorResponse::from(head))
        };
    }
    match type_name {
        types::CONFIG_CHANGE_CLUSTER_SYNC_REQUEST => sync(ctx, remote, body).await,
        types::HEALTH_CHECK_REQUEST => {
            wire::message(&HealthCheckResponse::ok(wire::request_id_of(body)))
        }
        _ => error_response(&WireError::no_handler(), wire::request_id_of(body)),
    }
}

/// `ConfigChangeClusterSyncRequest` → reload the key → `ConfigChangeClusterSyncResponse`.
async fn sync(ctx: &ClusterCtx, remote: Option<SocketAddr>, body: &[u8]) -> Payload {
    let req: ConfigChangeClusterSyncRequest = match wire::from_json(body) {
        Ok(r) => r,
        Err(e) => return unparsable(&e),
    };
    let key = match key_of(
        req.tenant.as_deref(),
        req.group.as_deref(),
        req.data_id.as_deref(),
    ) {
        Ok(k) => k,
        Err(e) => {
            ClusterSyncStats::inc(&ctx.stats.inner.failed);
            return sync_reply(fail_head(&e, req.request_id));
        }
    };
    tracing::debug!(
        %key,
        remote = ?remote,
        last_modified = req.last_modified,
        beta = ?req.beta,
        tag = ?req.tag,
        "cluster sync request"
    );
    #[cfg(feature = "fault-injection")]
    if ctx.opts.drop_notifications {
        ClusterSyncStats::inc(&ctx.stats.inner.dropped);
        tracing::warn!(%key, "fault injection: dropping a cluster notification (gRPC)");
        return sync_reply(ResponseHead::ok(req.request_id));
    }
    match ctx.service.replication().reload(&key).await {
        Ok(_) => {
            ClusterSyncStats::inc(&ctx.stats.inner.reloaded);
            sync_reply(ResponseHead::ok(req.request_id))
        }
        Err(e) => {
            ClusterSyncStats::inc(&ctx.stats.inner.failed);
            tracing::debug!(%key, error = %e, "reloading a key for a member failed");
            sync_reply(fail_head(&e, req.request_id))
        }
    }
}

fn sync_reply(head: ResponseHead) -> Payload {
    wire::message(&ConfigChangeClusterSyncResponse { head })
}
