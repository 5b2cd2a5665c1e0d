//! The entry point: [`serve`] / [`GrpcServer`] accept connections on a bound listener and
//! serve the two Nacos methods on each (see `rpc`) until a shutdown future completes, then
//! shut down gracefully.
//!
//! Shutdown is notify-then-wait, as a Java Nacos server's `shutdownNow()` leaves its
//! clients: the listeners close first (a client reconnecting is refused at once and tries
//! another server, or this one's successor); then every client's stream ends, once, with
//! `UNAVAILABLE` — one reconnect signal; then every connection gets a GOAWAY, in-flight
//! unary calls get `shutdown_grace` to finish, and what is left is cut.
//!
//! No `ConnectResetRequest`: the Java client (2.x and 3.x, `RpcClient`) queues one
//! reconnect for the reset (`ConnectResetRequestHandler`, which leaves the client
//! `RUNNING`) and another for the end of the stream (`GrpcClient`'s `onCompleted` /
//! `onError`), so it connects twice in a row; the re-listen sent on the first new
//! connection can then be lost with it, leaving listeners deaf until the client's
//! 3-minute full sync. The end of the stream alone is taken once: every other signal
//! (`onError`, a failed request, a failed health check) goes through the same
//! `RUNNING → UNHEALTHY` compare-and-set. The Go (`bindBiRequestStream`), Python and Rust
//! clients reconnect on the end of the stream as well.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use nacelle_proto::Payload;
use nacelle_service::ConfigService;
use nacelle_tls::TlsAcceptor;
use tokio::net::TcpListener;

use crate::ctx::Ctx;
use crate::error::GrpcError;
use crate::observe;
use crate::options::GrpcOptions;
use crate::rpc::{Inbound, Methods, Outbound};
use crate::session;
use crate::stats::GrpcStats;
use crate::tcp::ConnTag;
use crate::transport::Acceptor;

/// The gRPC server over a [`ConfigService`]. Create it, keep its [`GrpcStats`] handle for
/// metrics, then [`GrpcServer::serve`] it.
#[derive(Debug)]
pub struct GrpcServer {
    ctx: Arc<Ctx>,
}

impl GrpcServer {
    /// A server over `service` (which should be loaded, or be loading: until it is ready,
    /// requests are answered with error code 300).
    pub fn new(service: ConfigService, opts: GrpcOptions) -> Self {
        let ctx = Arc::new(Ctx::new(service, opts));
        let gauges = observe::GrpcGauges(ctx.stats.clone());
        ctx.service.metrics().add_source("grpc", gauges);
        GrpcServer { ctx }
    }

    /// The counters of this server; the handle stays valid after the server stops.
    pub fn stats(&self) -> GrpcStats {
        self.ctx.stats.clone()
    }

    /// Serves `/Request/request` and `/BiRequestStream/requestBiStream` on `listener` until
    /// `shutdown` completes, then shuts down gracefully (see the module docs). Returns once
    /// every connection is closed and the listener is dropped.
    pub async fn serve<F>(self, listener: TcpListener, shutdown: F) -> Result<(), GrpcError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.serve_on(vec![(listener, None)], shutdown).await
    }

    /// [`GrpcServer::serve`] on several listeners at once, each plain or TLS (`Some`): one
    /// server, so the connection limits, the registry and the shutdown are shared (a plain
    /// and a TLS port served side by side during a migration).
    pub async fn serve_on<F>(
        self,
        listeners: Vec<(TcpListener, Option<TlsAcceptor>)>,
        shutdown: F,
    ) -> Result<(), GrpcError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let ctx = self.ctx;
        ctx.opts.validate()?;
        let mut acceptors = Vec::new();
        let mut locals = Vec::new();
        for (listener, tls) in listeners {
            let local = listener.local_addr().map_err(GrpcError::Listener)?;
            tracing::info!(addr = %local, tls = tls.is_some(), "gRPC server listening");
            locals.push(local);
            acceptors.push(Acceptor::start(
                listener,
                ctx.clone(),
                ctx.stats.clone(),
                tls,
            ));
        }
        let local = locals
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let prober = tokio::spawn(probe_idle(ctx.clone()));
        let sweeper = tokio::spawn(sweep_pushes(ctx.clone()));

        shutdown.await;
        tracing::info!(addr = %local, "gRPC server shutting down");
        for a in &mut acceptors {
            a.stop_accepting().await;
        }
        end_streams(&ctx).await;
        // Cut the streams still in their handshake, then let every connection finish its
        // calls after a GOAWAY.
        ctx.hard_stop.cancel();
        for conn in ctx.registry.all() {
            conn.end_for_shutdown(); // one that registered while the others were ended
        }
        prober.abort();
        sweeper.abort();
        futures::future::join_all(
            acceptors
                .into_iter()
                .map(|a| a.shut_down(ctx.opts.shutdown_grace)),
        )
        .await;
        ctx.sessions.close();
        ctx.sessions.wait().await;
        tracing::info!(addr = %local, "gRPC server stopped");
        Ok(())
    }
}

/// Serves gRPC on `listener` over `service` until `shutdown` completes; see
/// [`GrpcServer::serve`]. Use [`GrpcServer`] directly to read its [`GrpcStats`].
pub async fn serve<F>(
    listener: TcpListener,
    service: ConfigService,
    opts: GrpcOptions,
    shutdown: F,
) -> Result<(), GrpcError>
where
    F: Future<Output = ()> + Send + 'static,
{
    GrpcServer::new(service, opts)
        .serve(listener, shutdown)
        .await
}

/// Refuses registrations from now on and ends every registered client's stream (see the
/// module docs), then waits (at most `shutdown_grace`) for their sessions to end.
async fn end_streams(ctx: &Ctx) {
    let conns = ctx.registry.begin_shutdown();
    tracing::info!(
        connections = conns.len(),
        "ending every client's stream; clients reconnect elsewhere"
    );
    for c in &conns {
        c.end_for_shutdown();
    }
    ctx.sessions.close();
    // Sessions end as soon as their connection is closed; a timeout only means some were
    // still in their handshake: those are cut next.
    let _grace_over = tokio::time::timeout(ctx.opts.shutdown_grace, ctx.sessions.wait()).await;
}

/// Probes connections idle longer than `idle_probe_after` with `ClientDetectionRequest`
/// and drops those that stay silent for `probe_timeout`.
async fn probe_idle(ctx: Arc<Ctx>) {
    let idle_after = ctx.opts.idle_probe_after.as_millis() as u64;
    let timeout = ctx.opts.probe_timeout.as_millis() as u64;
    let mut tick = tokio::time::interval(ctx.opts.probe_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        ctx.clock.tick();
        for conn in ctx.registry.all() {
            conn.probe_if_idle(idle_after, timeout, || ctx.server_request_id("detect"));
        }
    }
}

/// The period of the push sweeper for these options: a tenth of the shorter of the ack
/// timeout and the retry unit, within 5 ms ..= 200 ms. A push is thus declared failed or
/// resent at most one period after it is due (≤ 200 ms late with the Nacos timings of
/// 3 s and 2 × tries s).
pub(crate) fn sweep_period(opts: &GrpcOptions) -> Duration {
    (opts.push_ack_timeout.min(opts.push_retry_base) / 10)
        .clamp(Duration::from_millis(5), Duration::from_millis(200))
}

/// Times out and retries unacknowledged pushes of every connection, one pass per
/// [`sweep_period`]. One server-wide timer instead of one per push keeps the push path free
/// of timer registrations and session wake-ups; a pass visits only the connections with
/// pushes pending (`Unacked`), so idle ones cost it nothing.
async fn sweep_pushes(ctx: Arc<Ctx>) {
    let mut tick = tokio::time::interval(sweep_period(&ctx.opts));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = ctx.clock.tick();
        ctx.unacked.sweep(now, &ctx.stats);
    }
}

/// The client port serves both Nacos methods.
impl Methods for Ctx {
    fn max_message(&self) -> usize {
        self.opts.max_inbound_message_bytes
    }

    async fn unary(self: Arc<Self>, tag: ConnTag, request: Payload) -> Payload {
        observe::unary(&self, &tag, request).await
    }

    fn idle_connection_timeout(&self) -> Option<Duration> {
        Some(self.opts.idle_connection_timeout)
    }

    fn stream_limit(&self) -> Option<usize> {
        Some(self.opts.outbound_queue)
    }

    /// One session task per stream.
    fn open_stream(self: Arc<Self>, tag: ConnTag, inbound: Inbound, out: Arc<Outbound>) {
        let sessions = self.sessions.clone();
        sessions.spawn(session::run(self, tag, inbound, out));
    }
}
