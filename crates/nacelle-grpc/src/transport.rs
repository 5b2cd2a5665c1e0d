//! The accept loop. Every accepted TCP connection gets a connection id (`{millis}_{ip}_{port}`,
//! as Nacos names them) that tonic attaches to each request on that connection, so a unary
//! call and the bi-stream of one client are known to be the same connection.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::transport::server::Connected;

use crate::stats::{self, GrpcStats};

/// What every request on a TCP connection knows about it (tonic puts it in the request
/// extensions).
#[derive(Debug, Clone)]
pub(crate) struct ConnTag {
    /// The connection id, shared by the unary calls and the bi-stream of the connection.
    pub id: Arc<str>,
    /// The peer's socket address (the client IP when `metadata.clientIp` is empty).
    pub remote: SocketAddr,
}

/// The server's kill switch: cuts every TCP connection at once. Reads and writes check a
/// flag (one atomic load); the cancellation future is only polled to register the waker
/// when an I/O call would block, and only when the waker changed.
#[derive(Debug, Clone, Default)]
pub(crate) struct KillSwitch {
    flag: Arc<AtomicBool>,
    token: CancellationToken,
}

impl KillSwitch {
    /// Cuts every connection: their reads and writes fail from now on.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::Release);
        self.token.cancel();
    }
}

/// A TCP stream that carries its [`ConnTag`], counts itself in the stats while open, and can
/// be cut by the server's kill switch (the last step of a shutdown that clients ignore).
pub(crate) struct TrackedIo {
    io: TcpStream,
    tag: ConnTag,
    /// Set when the server cuts every connection; reads and writes then fail.
    killed: Arc<AtomicBool>,
    /// Completes when the server cuts every connection; wakes blocked reads and writes.
    kill: Pin<Box<WaitForCancellationFutureOwned>>,
    /// The waker `kill` is registered with.
    kill_waker: Option<Waker>,
    stats: GrpcStats,
}

impl TrackedIo {
    fn killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// An I/O call is about to return `Pending`: makes sure the kill switch wakes this
    /// task. Returns whether the switch has fired.
    fn watch_kill(&mut self, cx: &mut Context<'_>) -> bool {
        if self
            .kill_waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return self.killed();
        }
        if self.kill.as_mut().poll(cx).is_ready() {
            return true;
        }
        self.kill_waker = Some(cx.waker().clone());
        false
    }

    /// `res` of an I/O call, or the kill error if it would block and the switch fired.
    fn unless_killed<T>(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if res.is_pending() && self.watch_kill(cx) {
            return Poll::Ready(Err(aborted()));
        }
        res
    }
}

fn aborted() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "gRPC server stopped")
}

impl Drop for TrackedIo {
    fn drop(&mut self) {
        stats::sub(&self.stats.counters().tcp_connections, 1);
    }
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.killed() {
            return Poll::Ready(Err(aborted()));
        }
        let before = buf.filled().len();
        let res = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            quick_ack(&self.io);
        }
        self.unless_killed(cx, res)
    }
}

/// Acknowledges received data at once instead of after the kernel's delayed-ACK timer.
///
/// Clients that leave Nagle's algorithm on (nacos-sdk 0.8 does) write an HTTP/2 request in
/// two segments and hold the second until the first is acknowledged; with delayed ACKs
/// every unary call would then wait ~40 ms. Linux clears the flag after a while, so it is
/// set again after every read.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn quick_ack(io: &TcpStream) {
    if let Err(e) = io.set_quickack(true) {
        tracing::trace!(error = %e, "cannot set TCP_QUICKACK");
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn quick_ack(_io: &TcpStream) {}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.killed() {
            return Poll::Ready(Err(aborted()));
        }
        let res = Pin::new(&mut self.io).poll_write(cx, buf);
        self.unless_killed(cx, res)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.killed() {
            return Poll::Ready(Err(aborted()));
        }
        let res = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.unless_killed(cx, res)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl Connected for TrackedIo {
    type ConnectInfo = ConnTag;

    fn connect_info(&self) -> ConnTag {
        self.tag.clone()
    }
}

/// The stream of accepted connections. Accept errors (e.g. out of file descriptors) are
/// logged and retried after a short pause; they never end the stream.
pub(crate) fn incoming(
    listener: TcpListener,
    stats: GrpcStats,
    kill: KillSwitch,
) -> impl Stream<Item = Result<TrackedIo, io::Error>> {
    futures::stream::unfold(listener, move |listener| {
        let stats = stats.clone();
        let kill = kill.clone();
        async move {
            loop {
                match listener.accept().await {
                    Ok((io, remote)) => {
                        if let Err(e) = io.set_nodelay(true) {
                            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                        }
                        let id = format!(
                            "{}_{}_{}",
                            nacelle_core::now_millis(),
                            remote.ip(),
                            remote.port()
                        );
                        stats::inc(&stats.counters().tcp_connections);
                        let tracked = TrackedIo {
                            io,
                            tag: ConnTag {
                                id: id.into(),
                                remote,
                            },
                            killed: kill.flag.clone(),
                            kill: Box::pin(kill.token.clone().cancelled_owned()),
                            kill_waker: None,
                            stats,
                        };
                        return Some((Ok(tracked), listener));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "gRPC accept failed; retrying");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    })
}
