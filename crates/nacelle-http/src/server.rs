//! The HTTP accept loop: hyper HTTP/1.1 with keep-alive, each request tagged with its peer
//! address, an idle timeout, and graceful shutdown (stop accepting, let in-flight requests
//! finish).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// Smallest buffer hyper accepts.
const MIN_BUF: usize = 8 * 1024;

/// Default of [`ServeOptions::idle_timeout`] (Tomcat's keep-alive timeout under Nacos).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Connection limits of the HTTP server.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Bounds the request head (long query strings, as the Python 1.x client sends whole
    /// configs in the URL) as well as the body.
    pub max_request_bytes: usize,
    /// A connection waiting this long for (the rest of) a request head is closed: an idle
    /// keep-alive connection, a client that vanished, or one sending its head too slowly.
    /// A held long poll is not affected (its request was read).
    pub idle_timeout: Duration,
}

/// [`serve_with`] with the default idle timeout.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max_request_bytes: usize,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let opts = ServeOptions {
        max_request_bytes,
        idle_timeout: DEFAULT_IDLE_TIMEOUT,
    };
    serve_with(listener, router, opts, shutdown).await
}

/// Serves `router` on `listener` until `shutdown` completes, then waits for in-flight
/// requests (held long polls are released by the service's shutdown token) and returns.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and similar: back off instead of spinning.
                        tracing::warn!(error = %e, "http accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "set_nodelay failed");
                }
                let svc = router
                    .clone()
                    .map_request(move |mut req: axum::http::Request<Incoming>| {
                        req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                        req
                    });
                let conn = http1::Builder::new()
                    .max_buf_size(opts.max_request_bytes.max(MIN_BUF))
                    .keep_alive(true)
                    .timer(TokioTimer::new())
                    .header_read_timeout(opts.idle_timeout)
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc));
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "http connection ended with an error");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
