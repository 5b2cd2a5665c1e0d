//! An accepted TCP connection as the HTTP/2 layer (`rpc`) sees it: its [`ConnTag`] (the
//! connection id `{millis}_{ip}_{port}`, as Nacos names them, shared by every call on it,
//! so a unary call and the bi-stream of one client are known to be the same connection),
//! the one-atomic [`Switch`] used for the stop and kill signals, and [`TrackedIo`], the
//! stream that counts itself and can be cut.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::stats::{self, GrpcStats};

/// What every call on a TCP connection knows about it.
#[derive(Debug, Clone)]
pub(crate) struct ConnTag {
    /// The connection id, shared by the unary calls and the bi-stream of the connection.
    pub id: Arc<str>,
    /// The peer's socket address (the client IP when `metadata.clientIp` is empty).
    pub remote: SocketAddr,
}

/// A one-way switch shared by many tasks (the server's kill switch, its stop switch).
/// Checking it is one atomic load; a task that must be woken when it is set registers its
/// waker through a [`SwitchWatch`], again only when its waker changes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Switch {
    flag: Arc<AtomicBool>,
    token: CancellationToken,
}

impl Switch {
    /// Sets the switch and wakes every watcher.
    pub fn set(&self) {
        self.flag.store(true, Ordering::Release);
        self.token.cancel();
    }

    /// Completes once the switch is set.
    pub async fn wait(&self) {
        self.token.cancelled().await;
    }

    /// A watcher for one task.
    pub fn watch(&self) -> SwitchWatch {
        SwitchWatch {
            flag: self.flag.clone(),
            fut: Box::pin(self.token.clone().cancelled_owned()),
            waker: None,
        }
    }
}

/// One task's view of a [`Switch`].
pub(crate) struct SwitchWatch {
    flag: Arc<AtomicBool>,
    /// Completes when the switch is set; polled only to register a new waker.
    fut: Pin<Box<WaitForCancellationFutureOwned>>,
    /// The waker `fut` is registered with.
    waker: Option<Waker>,
}

impl SwitchWatch {
    /// Whether the switch is set; makes sure the task of `cx` is woken when it is.
    pub fn poll_set(&mut self, cx: &mut Context<'_>) -> bool {
        if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return self.flag.load(Ordering::Acquire);
        }
        if self.fut.as_mut().poll(cx).is_ready() {
            return true;
        }
        self.waker = Some(cx.waker().clone());
        false
    }

    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

/// A TCP stream that carries its [`ConnTag`], counts itself in the stats while open, and can
/// be cut by the server's kill switch (the last step of a shutdown that clients ignore).
pub(crate) struct TrackedIo {
    io: TcpStream,
    tag: ConnTag,
    /// The kill switch: once set, reads and writes fail.
    kill: SwitchWatch,
    stats: GrpcStats,
}

impl TrackedIo {
    /// Wraps an accepted connection: `TCP_NODELAY`, a connection id, counted in `stats`.
    pub fn new(io: TcpStream, remote: SocketAddr, stats: &GrpcStats, kill: &Switch) -> Self {
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
        TrackedIo {
            io,
            tag: ConnTag {
                id: id.into(),
                remote,
            },
            kill: kill.watch(),
            stats: stats.clone(),
        }
    }

    /// Who this connection is.
    pub fn tag(&self) -> &ConnTag {
        &self.tag
    }

    fn killed(&self) -> bool {
        self.kill.is_set()
    }

    /// `res` of an I/O call, or the kill error if it would block and the switch fired.
    fn unless_killed<T>(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if res.is_pending() && self.kill.poll_set(cx) {
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
