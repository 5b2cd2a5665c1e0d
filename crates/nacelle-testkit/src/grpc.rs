//! A gRPC-only server under test (the client gRPC port over the config service on a SQLite
//! file that survives restarts), and the real Rust client (`nacos-sdk`) with a listener
//! that records what it is told.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nacelle_core::ConfigKey;
use nacelle_grpc::{GrpcError, GrpcOptions, GrpcServer, GrpcStats};
use nacelle_service::{ConfigService, Limits};
use nacos_sdk::api::config::{
    ConfigChangeListener, ConfigResponse, ConfigService as SdkConfigService, ConfigServiceBuilder,
};
use nacos_sdk::api::props::ClientProps;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::{service, Backend, TestDb, SOON};

/// The gRPC server under test, over a SQLite file that survives restarts.
pub struct TestServer {
    /// The SQLite file the service runs on.
    pub db: TestDb,
    /// The gRPC port (127.0.0.1).
    pub port: u16,
    /// The service behind the server, to publish or look at directly.
    pub service: ConfigService,
    /// The service's features, for the HTTP adapter ([`TestServer::start_http`]).
    services: nacelle_service::Services,
    /// The server's counters (connections, listened keys…).
    pub stats: GrpcStats,
    /// The options the server was started with (a restart keeps them).
    opts: GrpcOptions,
    /// Tells the running server to stop.
    stop: Option<oneshot::Sender<()>>,
    /// The running server, to wait for its end.
    task: Option<JoinHandle<Result<(), GrpcError>>>,
}

impl TestServer {
    /// Starts on a fresh SQLite file and a free port, with the service loaded.
    pub async fn start(opts: GrpcOptions) -> anyhow::Result<Self> {
        Self::start_loaded(opts, true, Limits::default()).await
    }

    /// Starts like [`TestServer::start`] with the service's limits set.
    pub async fn start_with_limits(opts: GrpcOptions, limits: Limits) -> anyhow::Result<Self> {
        Self::start_loaded(opts, true, limits).await
    }

    /// Starts over a service that was never loaded (the server is "starting").
    pub async fn start_unloaded(opts: GrpcOptions) -> anyhow::Result<Self> {
        Self::start_loaded(opts, false, Limits::default()).await
    }

    async fn start_loaded(opts: GrpcOptions, load: bool, limits: Limits) -> anyhow::Result<Self> {
        let db = TestDb::create(Backend::Sqlite).await?;
        let path = db.path().context("no SQLite file")?;
        let services = service::open_services(&path, load, limits).await?;
        let service = services.config.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mut s = TestServer {
            db,
            port,
            service: service.clone(),
            services,
            stats: GrpcStats::new(),
            opts,
            stop: None,
            task: None,
        };
        s.launch(listener, service);
        Ok(s)
    }

    fn launch(&mut self, listener: tokio::net::TcpListener, service: ConfigService) {
        let server = GrpcServer::new(service, self.opts.clone());
        self.stats = server.stats();
        let (tx, rx) = oneshot::channel::<()>();
        self.stop = Some(tx);
        self.task = Some(tokio::spawn(server.serve(listener, async {
            // A dropped sender (the TestServer is gone) stops the server too.
            let _stopped = rx.await;
        })));
    }

    /// Stops the gRPC server (graceful shutdown) and waits for it to return.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            // Err: the server already ended; the join below reports how.
            let _ended = tx.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(SOON, task)
                .await
                .context("gRPC server did not stop")???;
        }
        Ok(())
    }

    /// Stops the server and the service, then starts new ones over the same SQLite file on
    /// the same port.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await?;
        self.service.begin_shutdown();
        let path = self.db.path().context("no SQLite file")?;
        let services = service::open_services(&path, true, self.service.limits().clone()).await?;
        let service = services.config.clone();
        let deadline = Instant::now() + SOON;
        let listener = loop {
            match tokio::net::TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("rebinding port {}: {e}; retrying", self.port);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        self.service = service.clone();
        self.services = services;
        self.launch(listener, service);
        Ok(())
    }

    /// Starts the HTTP adapter over this server's service on a free port; returns its base
    /// URL and the sender that stops it (dropping it stops the adapter too).
    pub async fn start_http(
        &self,
        opts: nacelle_http::HttpOptions,
    ) -> anyhow::Result<(String, oneshot::Sender<()>)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let max = opts.max_request_bytes;
        let api = nacelle_http::api(self.services.clone(), opts);
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(nacelle_http::serve(listener, api, max, async {
            // A dropped sender stops the adapter as a sent one does.
            let _stopped = rx.await;
        }));
        Ok((format!("http://{addr}"), tx))
    }

    /// Publishes through the service directly, as the HTTP adapter or the console would.
    pub async fn publish(&self, tenant: &str, group: &str, id: &str, content: &str) -> Result<()> {
        let key = ConfigKey::parse(Some(tenant), group, id)?;
        service::publish(&self.service, &key, content).await
    }

    /// Waits until gRPC connections listen to at least `n` keys in total. (nacos-sdk sends
    /// its listen request in the background after `add_listener` returns and ignores the
    /// answer, so a change made before the listen arrives reaches it only in its 60 s check.)
    pub async fn wait_listens(&self, n: u64) -> anyhow::Result<()> {
        let deadline = Instant::now() + SOON;
        while self.stats.snapshot().listened_keys < n {
            if Instant::now() > deadline {
                bail!("listens never arrived: {:?}", self.stats.snapshot());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// A Rust SDK client on this server's gRPC port.
    pub async fn sdk(&self, namespace: &str) -> anyhow::Result<Sdk> {
        Sdk::connect(self.port, self.port, namespace, "nacelle-grpc-test").await
    }
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("port", &self.port)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            // Err: the server already ended.
            let _ended = tx.send(());
        }
    }
}

/// A `nacos-sdk` config client with its own on-disk cache dir.
pub struct Sdk {
    /// The client.
    pub client: SdkConfigService,
    /// The client's cache directory, removed with it.
    _cache: tempfile::TempDir,
}

impl std::fmt::Debug for Sdk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sdk").finish_non_exhaustive()
    }
}

impl Sdk {
    /// A client of the server whose HTTP port is `http_port` and client gRPC port is
    /// `grpc_port` (the same port for a gRPC-only server), in `namespace`.
    pub async fn connect(
        http_port: u16,
        grpc_port: u16,
        namespace: &str,
        app_name: &str,
    ) -> anyhow::Result<Sdk> {
        let cache = tempfile::tempdir()?;
        let props = ClientProps::new()
            .server_addr(format!("127.0.0.1:{http_port}"))
            .remote_grpc_port(grpc_port)
            .namespace(namespace)
            .app_name(app_name)
            .cache_dir(cache.path())
            .env_first(false);
        let client = ConfigServiceBuilder::new(props)
            .build()
            .await
            .map_err(|e| anyhow!("sdk build: {e}"))?;
        Ok(Sdk {
            client,
            _cache: cache,
        })
    }
}

/// A listener that forwards every notification to a channel, stamped with its arrival.
#[derive(Debug)]
pub struct Recorder {
    tx: mpsc::UnboundedSender<(Instant, ConfigResponse)>,
}

impl ConfigChangeListener for Recorder {
    fn notify(&self, resp: ConfigResponse) {
        // Err: the test stopped listening (dropped its Notifications).
        let _not_listening = self.tx.send((Instant::now(), resp));
    }
}

/// The receiving end of a [`Recorder`].
#[derive(Debug)]
pub struct Notifications {
    rx: mpsc::UnboundedReceiver<(Instant, ConfigResponse)>,
}

/// A recorder and its notifications.
pub fn recorder() -> (Arc<Recorder>, Notifications) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(Recorder { tx }), Notifications { rx })
}

impl Notifications {
    /// Waits for a notification whose content is `content`; returns when it arrived.
    pub async fn wait_for(&mut self, content: &str, within: Duration) -> anyhow::Result<Instant> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let got = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .map_err(|_| anyhow!("no notification with content {content:?} within {within:?}"))?
                .ok_or_else(|| anyhow!("listener dropped"))?;
            if got.1.content() == content {
                return Ok(got.0);
            }
        }
    }

    /// The next notification: when it arrived and its content.
    pub async fn next(&mut self, within: Duration) -> anyhow::Result<(Instant, String)> {
        let got = tokio::time::timeout(within, self.rx.recv())
            .await
            .map_err(|_| anyhow!("no notification within {within:?}"))?
            .ok_or_else(|| anyhow!("listener dropped"))?;
        Ok((got.0, got.1.content().clone()))
    }
}
