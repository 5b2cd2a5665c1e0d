//! The accept loop of a port ([`Acceptor`]): every accepted TCP connection is wrapped in a
//! [`TrackedIo`] (its connection id, see `tcp`), on a TLS port in a TLS stream over that
//! (the handshake on the connection's task), and served by `rpc` on a task of its own;
//! shutdown closes the listener, then sends a GOAWAY on every connection, then cuts them
//! after the grace period.

use std::sync::Arc;
use std::time::Duration;

use nacelle_tls::TlsAcceptor;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::rpc::{self, Methods};
use crate::stats::GrpcStats;
use crate::tcp::{Switch, TrackedIo};

/// The accept loop of a port and the connections it serves.
pub(crate) struct Acceptor {
    /// The accept loop, until it has returned (and dropped the listener).
    task: Option<JoinHandle<()>>,
    /// Ends the accept loop.
    closing: Switch,
    kill: Switch,
    /// Sends every connection a GOAWAY.
    stop: Switch,
    conns: TaskTracker,
}

impl Acceptor {
    /// Starts accepting on `listener`; every connection is served by
    /// [`rpc::serve_connection`] on its own task (over TLS when `tls` is set) and counted
    /// in `stats`.
    pub fn start<M: Methods>(
        listener: TcpListener,
        methods: Arc<M>,
        stats: GrpcStats,
        tls: Option<TlsAcceptor>,
    ) -> Self {
        let kill = Switch::default();
        let stop = Switch::default();
        let closing = Switch::default();
        let conns = TaskTracker::new();
        let task = tokio::spawn(accept_loop(
            listener,
            methods,
            stats,
            tls,
            Switches {
                kill: kill.clone(),
                stop: stop.clone(),
                closing: closing.clone(),
            },
            conns.clone(),
        ));
        Acceptor {
            task: Some(task),
            closing,
            kill,
            stop,
            conns,
        }
    }

    /// Stops accepting: returns once the listener is closed, so a client connecting from
    /// now on is refused by the operating system (and tries another server). The
    /// connections already accepted are served on.
    pub async fn stop_accepting(&mut self) {
        self.closing.set();
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "the gRPC accept loop failed");
            }
        }
    }

    /// Stops accepting (the listener is closed), sends a GOAWAY on every connection and
    /// gives their calls `grace` to finish; then cuts what is left. Returns once every
    /// connection is closed.
    pub async fn shut_down(mut self, grace: Duration) {
        self.stop_accepting().await;
        self.stop.set();
        self.conns.close();
        if tokio::time::timeout(grace, self.conns.wait())
            .await
            .is_err()
        {
            tracing::warn!("gRPC connections still open after the grace period; cutting them");
            self.kill.set();
            self.conns.wait().await;
        }
    }
}

/// The switches an accept loop and its connections obey.
struct Switches {
    /// Cuts every connection.
    kill: Switch,
    /// Sends every connection a GOAWAY.
    stop: Switch,
    /// Ends the accept loop.
    closing: Switch,
}

/// Accepts connections until `closing` (or `stop`) is set. Accept errors (e.g. out of file
/// descriptors) are logged and retried after a short pause.
async fn accept_loop<M: Methods>(
    listener: TcpListener,
    methods: Arc<M>,
    stats: GrpcStats,
    tls: Option<TlsAcceptor>,
    switches: Switches,
    conns: TaskTracker,
) {
    let Switches {
        kill,
        stop,
        closing,
    } = switches;
    loop {
        let accepted = tokio::select! {
            _ = closing.wait() => return,
            _ = stop.wait() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((io, remote)) => {
                let io = TrackedIo::new(io, remote, &stats, &kill);
                let tag = io.tag().clone();
                let (methods, stop) = (methods.clone(), stop.clone());
                match tls.clone() {
                    None => {
                        conns.spawn(rpc::serve_connection(methods, tag, io, stop));
                    }
                    Some(tls) => {
                        conns.spawn(async move {
                            match tls.accept(io).await {
                                Ok(io) => rpc::serve_connection(methods, tag, io, stop).await,
                                Err(e) => {
                                    tracing::debug!(conn = %tag.id, error = %e, "TLS handshake failed")
                                }
                            }
                        });
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "gRPC accept failed; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
