//! The ports a server listens on: HTTP, gRPC, the cluster port of a member, and the
//! separate TLS ports when asked for, bound with a deep accept queue; with TLS, the
//! acceptors and their certificate reloader.

use std::net::SocketAddr;

use anyhow::Context;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Settings;

/// Connections a listening port queues before they are accepted (the kernel caps it at
/// `net.core.somaxconn`, 4096 on current Linux). A whole fleet reconnects at once when a
/// node restarts or a load balancer moves it; with the 128 a plain `bind` gives, the
/// 129th connection of such a burst had its SYN dropped and retried a second later
/// (then 3 s, 7 s…). Netty under Nacos's gRPC port also asks for `somaxconn`.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds a listening port (with `SO_REUSEADDR`, as a plain bind has, so a restarted
/// node rebinds at once) queueing [`LISTEN_BACKLOG`] connections. Called inside the
/// runtime (the listener registers with its reactor).
pub fn bind_listener(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// A listener and the TLS acceptor of its connections (`None`: plain).
pub(crate) type Served = (TcpListener, Option<nacelle_tls::TlsAcceptor>);

/// Every port of a server, bound.
pub(crate) struct Ports {
    pub(crate) http_addr: SocketAddr,
    pub(crate) grpc_addr: SocketAddr,
    /// With TLS: where HTTPS is served (the HTTP port, or the separate `tls_port`).
    pub(crate) http_tls_addr: Option<SocketAddr>,
    /// With TLS: where gRPC over TLS is served.
    pub(crate) grpc_tls_addr: Option<SocketAddr>,
    /// The HTTP listeners: the main port, then the separate HTTPS port.
    pub(crate) http: Vec<Served>,
    /// The gRPC listeners: the main port, then the separate gRPC TLS port.
    pub(crate) grpc: Vec<Served>,
    /// A member's cluster gRPC port (members call each other on it).
    pub(crate) cluster: Option<(TcpListener, SocketAddr)>,
}

impl Ports {
    /// Binds every port the settings ask for (port 0: any free one) and, with TLS, reads
    /// the certificates (an unreadable or invalid file stops the start) and starts their
    /// reloader on `background`.
    pub(crate) async fn bind(
        settings: &Settings,
        stop: &CancellationToken,
        background: &TaskTracker,
    ) -> anyhow::Result<Ports> {
        let http = bind_listener(SocketAddr::new(settings.bind, settings.port))
            .with_context(|| format!("binding HTTP on {}:{}", settings.bind, settings.port))?;
        let http_addr = http.local_addr()?;
        tracing::info!("http listening on {http_addr}");

        let grpc_port = settings.effective_grpc_port(http_addr.port());
        let grpc = bind_listener(SocketAddr::new(settings.bind, grpc_port))
            .with_context(|| format!("binding gRPC on {}:{grpc_port}", settings.bind))?;
        let grpc_addr = grpc.local_addr()?;
        tracing::info!("grpc listening on {grpc_addr}");

        // Members call each other on the cluster port; it exists only in a cluster.
        let cluster = if settings.clustered() {
            let port = settings.effective_cluster_grpc_port(http_addr.port());
            let listener =
                bind_listener(SocketAddr::new(settings.bind, port)).with_context(|| {
                    format!(
                        "binding cluster gRPC on {}:{port} (nodes on one host need HTTP ports \
                         at least 2 apart: HTTP + 1001 must not be another node's HTTP + 1000)",
                        settings.bind
                    )
                })?;
            let addr = listener.local_addr()?;
            tracing::info!("cluster grpc listening on {addr}");
            Some((listener, addr))
        } else {
            None
        };

        let tls = Tls::open(settings, &http, &grpc).await?;
        if tls.is_some()
            && settings.clustered()
            && settings.tls.as_ref().is_some_and(|t| t.port.is_none())
        {
            anyhow::bail!(
                "TLS on the HTTP port in a cluster: members check each other's health and send \
                 change notifications over plain HTTP on that port; serve HTTPS on a separate \
                 --tls-port (docs/security.md, TLS)"
            );
        }
        let mut ports = Ports {
            http_addr,
            grpc_addr,
            http_tls_addr: None,
            grpc_tls_addr: None,
            http: vec![(http, tls.as_ref().and_then(|t| t.http_main.clone()))],
            grpc: vec![(grpc, tls.as_ref().and_then(|t| t.grpc_main.clone()))],
            cluster,
        };
        if let Some(t) = tls {
            ports.http_tls_addr = Some(t.http_addr);
            ports.grpc_tls_addr = Some(t.grpc_addr);
            ports.http.extend(t.http_extra);
            ports.grpc.extend(t.grpc_extra);
            background.spawn(nacelle_tls::watch(
                t.acceptors,
                t.reload_interval,
                stop.clone(),
            ));
        }
        Ok(ports)
    }
}

/// The TLS side of a server: an acceptor per protocol (their ALPN differs), which listener
/// each serves, and the reload settings.
struct Tls {
    /// The acceptor of the main HTTP port, when it serves TLS (no separate `tls_port`).
    http_main: Option<nacelle_tls::TlsAcceptor>,
    /// The acceptor of the main gRPC port, when it serves TLS.
    grpc_main: Option<nacelle_tls::TlsAcceptor>,
    /// The separate HTTPS listener, when `tls_port` is set.
    http_extra: Option<Served>,
    /// The separate gRPC TLS listener, when `grpc_tls_port` is set.
    grpc_extra: Option<Served>,
    http_addr: SocketAddr,
    grpc_addr: SocketAddr,
    acceptors: Vec<nacelle_tls::TlsAcceptor>,
    reload_interval: Option<std::time::Duration>,
}

impl Tls {
    /// Reads the certificate files (an unreadable or invalid file stops the start) and
    /// binds the separate TLS ports that are asked for; `None` without TLS settings.
    async fn open(
        settings: &Settings,
        http: &TcpListener,
        grpc: &TcpListener,
    ) -> anyhow::Result<Option<Tls>> {
        let Some(t) = &settings.tls else {
            return Ok(None);
        };
        let http_acceptor = nacelle_tls::TlsAcceptor::new(t.files.clone(), &[b"http/1.1"], "http")
            .context("TLS of the HTTP port")?;
        let grpc_acceptor = nacelle_tls::TlsAcceptor::new(t.files.clone(), &[b"h2"], "grpc")
            .context("TLS of the gRPC port")?;
        let bind = |port: u16, what: &'static str| async move {
            let l = bind_listener(SocketAddr::new(settings.bind, port))
                .with_context(|| format!("binding {what} on {}:{port}", settings.bind))?;
            let addr = l.local_addr()?;
            tracing::info!("{what} listening on {addr}");
            anyhow::Ok((l, addr))
        };
        let (http_main, http_extra, http_addr) = match t.port {
            None => (Some(http_acceptor.clone()), None, http.local_addr()?),
            Some(p) => {
                let (l, addr) = bind(p, "https").await?;
                (None, Some((l, Some(http_acceptor.clone()))), addr)
            }
        };
        let (grpc_main, grpc_extra, grpc_addr) = match t.grpc_port {
            None => (Some(grpc_acceptor.clone()), None, grpc.local_addr()?),
            Some(p) => {
                let (l, addr) = bind(p, "grpc tls").await?;
                (None, Some((l, Some(grpc_acceptor.clone()))), addr)
            }
        };
        tracing::info!(
            cert = %t.files.cert.display(),
            mutual = t.files.client_ca.is_some(),
            %http_addr,
            %grpc_addr,
            "TLS on"
        );
        Ok(Some(Tls {
            http_main,
            grpc_main,
            http_extra,
            grpc_extra,
            http_addr,
            grpc_addr,
            acceptors: vec![http_acceptor, grpc_acceptor],
            reload_interval: t.reload_interval,
        }))
    }
}
