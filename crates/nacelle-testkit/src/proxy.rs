//! A TCP proxy in front of a database server whose traffic a test cuts (the database is
//! down), blackholes (the network stopped delivering) and restores.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward both ways.
    Up,
    /// Close every connection and refuse new ones (a database that is down).
    Refuse,
    /// Keep connections open but forward nothing (a network that stopped delivering).
    Blackhole,
}

/// A TCP proxy in front of a database server that a test can cut and restore. Leaving
/// `Refuse` or `Blackhole` closes the connections held during it, like a network blip.
#[derive(Debug)]
pub struct Proxy {
    /// Where clients connect (127.0.0.1, a port of its own).
    pub addr: SocketAddr,
    mode: Arc<watch::Sender<ProxyMode>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (port 0) and forwards to `target`.
    pub async fn start(target: SocketAddr) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, _) = watch::channel(ProxyMode::Up);
        let mode = Arc::new(tx);
        let accept_mode = mode.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut rx = accept_mode.subscribe();
                let current = *rx.borrow_and_update();
                match current {
                    ProxyMode::Refuse => drop(client),
                    ProxyMode::Blackhole => {
                        tokio::spawn(async move {
                            // Hold the socket until the mode changes (or the proxy is
                            // dropped: the error), then close it.
                            let _held = client;
                            let _changed_or_dropped = rx.changed().await;
                        });
                    }
                    ProxyMode::Up => {
                        tokio::spawn(async move {
                            let Ok(mut server) = TcpStream::connect(target).await else {
                                return;
                            };
                            let mut client = client;
                            let pipe = tokio::io::copy_bidirectional(&mut client, &mut server);
                            tokio::pin!(pipe);
                            loop {
                                tokio::select! {
                                    _ = &mut pipe => return,
                                    changed = rx.changed() => {
                                        if changed.is_err() {
                                            return;
                                        }
                                        match *rx.borrow_and_update() {
                                            ProxyMode::Up => {}
                                            ProxyMode::Refuse => return,
                                            ProxyMode::Blackhole => break,
                                        }
                                    }
                                }
                            }
                            // Blackhole: stop forwarding, hold both sockets until the next
                            // change (or the proxy's drop: the error), then close them.
                            let _changed_or_dropped = rx.changed().await;
                        });
                    }
                }
            }
        });
        Ok(Proxy { addr, mode, task })
    }

    /// Switches what the proxy does; leaving `Refuse` or `Blackhole` closes the connections
    /// held during it.
    pub fn set(&self, mode: ProxyMode) {
        self.mode.send_replace(mode);
    }

    /// The database is down: drops every proxied connection and refuses new ones.
    pub fn cut(&self) {
        self.set(ProxyMode::Refuse);
    }

    /// The database is back: forwards again.
    pub fn restore(&self) {
        self.set(ProxyMode::Up);
    }

    /// The port the proxy listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
