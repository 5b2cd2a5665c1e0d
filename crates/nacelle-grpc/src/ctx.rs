//! The state of the client port shared by the server (`server`: accept loop, prober, push
//! sweeper), the unary handlers (`handlers`) and the bi-stream sessions (`session`) — in a
//! file of its own, below all three, so none of them imports another for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nacelle_core::{Caller, CoreError};
use nacelle_service::ConfigService;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::connection::{CoarseClock, ConnDeps, Unacked};
use crate::options::GrpcOptions;
use crate::push::PushPolicy;
use crate::registry::Registry;
use crate::stats::GrpcStats;

/// State shared by the services, the sessions and the prober.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub service: ConfigService,
    pub opts: GrpcOptions,
    pub stats: GrpcStats,
    pub registry: Registry,
    /// Tracks session tasks so that shutdown can wait for them.
    pub sessions: TaskTracker,
    /// Cancelled to cut every stream at once (last step of shutdown): sessions still
    /// waiting for their `ConnectionSetupRequest` watch it; registered connections are
    /// closed one by one.
    pub hard_stop: CancellationToken,
    /// The time base of connection activity and push deadlines.
    pub clock: Arc<CoarseClock>,
    /// The connections with pushes pending: the push sweeper's work.
    pub unacked: Arc<Unacked>,
    next_request_id: AtomicU64,
}

impl Ctx {
    /// The state of a new server over `service`.
    pub fn new(service: ConfigService, opts: GrpcOptions) -> Self {
        let stats = GrpcStats::new();
        let registry = Registry::new(
            opts.max_connections,
            opts.max_connections_per_ip,
            stats.clone(),
        );
        Ctx {
            service,
            opts,
            stats,
            registry,
            sessions: TaskTracker::new(),
            hard_stop: CancellationToken::new(),
            clock: Arc::new(CoarseClock::new()),
            unacked: Arc::default(),
            next_request_id: AtomicU64::new(1),
        }
    }

    /// What a new connection of `caller` needs; fails when the service is not serving
    /// (loading or shutting down).
    pub fn conn_deps(&self, caller: &Caller) -> Result<ConnDeps, CoreError> {
        Ok(ConnDeps {
            watch: self.service.watch(caller)?,
            policy: PushPolicy {
                ack_timeout: self.opts.push_ack_timeout,
                retry_base: self.opts.push_retry_base,
                max_tries: self.opts.push_max_tries,
            },
            stats: self.stats.clone(),
            clock: self.clock.clone(),
            metrics: self.service.metrics().clone(),
            unacked: self.unacked.clone(),
        })
    }

    /// A request id for a server request other than a change push (pushes use the change
    /// event's sequence number; the prefix keeps the two apart).
    pub fn server_request_id(&self, prefix: &str) -> String {
        let n = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}-{n}")
    }
}
