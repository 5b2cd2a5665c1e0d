//! The Nacelle server: settings, wiring and lifecycle. `main.rs` is a thin shell over
//! [`settings::Settings`] and [`start`]; tests start servers in-process through the same
//! [`start`] on port 0.
//!
//! # Layout
//! - [`settings`]: flags, `NACELLE_*` environment variables and the TOML file, merged with
//!   precedence flag > env > file > default.
//! - [`start`]/[`RunningServer`]: opens the store, binds listeners, loads the cache in the
//!   background (readiness waits for it) and shuts down gracefully.
//! - `lazy_store`: the store the service sees until the database could be opened.
//! - `listeners`: the ports (HTTP, gRPC, a member's cluster port, the separate TLS ports),
//!   bound with a deep accept queue, and the TLS acceptors.
//! - [`private_files`]: the data directory (0700) and the SQLite files (0600) are private;
//!   looser existing ones are reported at start.
//! - [`webhook_client`]: the HTTP client the webhook sender POSTs through.
//!
//! Every task a server spawns is either a listener's (awaited by
//! [`RunningServer::shutdown`] after it has drained its requests) or a background task on
//! the server's `TaskTracker` (database reconnect, cache load and change-log follower, the
//! history purge ([`retention`]), the cluster module's member checks and notifier queues), which all watch the server's stop
//! token and are waited for as well: once `shutdown` returns, nothing of the server runs.

mod auth_setup;
mod lazy_store;
mod listeners;
pub mod private_files;
pub mod retention;
pub mod rollout_probe;
pub mod settings;
pub mod webhook_client;

use lazy_store::{Lazy, LazyStore};
use listeners::{Ports, Served};

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use nacelle_core::ConfigStore;
use nacelle_service::{Background, ConfigService, Services};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use listeners::{bind_listener, LISTEN_BACKLOG};
pub use settings::Settings;

/// A server started by [`start`].
#[derive(Debug)]
pub struct RunningServer {
    /// The address the HTTP API listens on (the real port when 0 was asked for).
    pub http_addr: SocketAddr,
    /// The address the gRPC API listens on.
    pub grpc_addr: SocketAddr,
    /// With TLS on: the address serving HTTPS (`http_addr` itself, or the separate
    /// `tls_port`).
    pub http_tls_addr: Option<SocketAddr>,
    /// With TLS on: the address serving gRPC over TLS (`grpc_addr`, or `grpc_tls_port`).
    pub grpc_tls_addr: Option<SocketAddr>,
    /// Connection and listener counters of the gRPC adapter.
    pub grpc_stats: nacelle_grpc::GrpcStats,
    /// The cluster module, when this node runs in a cluster.
    pub cluster: Option<nacelle_cluster::Cluster>,
    /// The address of the cluster gRPC port (member-to-member calls), in a cluster.
    pub cluster_grpc_addr: Option<SocketAddr>,
    services: Services,
    stop: CancellationToken,
    /// The listeners' accept loops; each ends once it has drained its requests.
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
    /// Every other task of the server; each ends when `stop` is cancelled.
    background: TaskTracker,
}

impl RunningServer {
    /// The config service, for in-process tests and future adapters.
    pub fn service(&self) -> &ConfigService {
        &self.services.config
    }

    /// Graceful shutdown: stop accepting, answer held long polls, let in-flight requests
    /// (and so in-flight writes) finish, stop every background task, then return. The first
    /// error of a listener is returned, after every task has ended.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.services.config.begin_shutdown();
        self.stop.cancel();
        let mut first_error = None;
        for t in self.tasks {
            let ended = t.await.context("server task panicked").and_then(|r| r);
            if let Err(e) = ended {
                first_error.get_or_insert(e);
            }
        }
        // Nothing serves any more: the audit appender and the webhook enqueuer store what
        // is queued and end; the webhook sender stops.
        self.services.finish();
        self.background.close();
        self.background.wait().await;
        first_error.map_or(Ok(()), Err)
    }

    /// Waits until every task ends (they end only after [`RunningServer::shutdown`] or a
    /// fatal error).
    ///
    /// Cancel-safe: a task leaves the list only once it has ended, so dropping this future
    /// (`select!` against a signal) keeps the others for [`RunningServer::shutdown`] to wait
    /// for — otherwise shutdown would return at once and the process would exit before
    /// in-flight requests (held long polls) were answered.
    pub async fn wait(&mut self) -> anyhow::Result<()> {
        while let Some(t) = self.tasks.first_mut() {
            let ended = t.await;
            self.tasks.remove(0);
            ended.context("server task panicked")??;
        }
        Ok(())
    }
}

/// Opens the store, binds the listeners and starts serving. The config cache loads in the
/// background; readiness answers 503 until it is loaded.
pub async fn start(settings: &Settings) -> anyhow::Result<RunningServer> {
    // A cluster's prerequisites (its secret, a shared database) before anything is made.
    let cluster_secret = cluster_secret(settings)?;
    // The data directory 0700, the SQLite file 0600 (its WAL and SHM follow it); a looser
    // existing one is reported, or refused with `strict_permissions`.
    private_files::prepare(settings)?;
    let stop = CancellationToken::new();
    let background = TaskTracker::new();
    let store = open_store(settings, &stop, &background).await?;
    background.spawn(retention::run(
        store.clone(),
        settings.retention,
        stop.clone(),
    ));
    let services = Services::new(store, settings.limits())?;
    let service = services.config.clone();
    service
        .metrics()
        .set_slow_request_threshold(settings.slow_request);
    service
        .access()
        .configure_auth(auth_setup::auth_config(settings)?);
    let ports = Ports::bind(settings, &stop, &background).await?;
    let (http_addr, grpc_addr) = (ports.http_addr, ports.grpc_addr);

    let mut tasks = Vec::new();
    let grpc_stats = serve_grpc(settings, &service, ports.grpc, &stop, &mut tasks);
    serve_http(
        settings, &services, ports.http, http_addr, &stop, &mut tasks,
    );
    let cluster_grpc_addr = ports.cluster.as_ref().map(|(_, addr)| *addr);
    let cluster = match cluster_secret {
        Some(secret) => {
            serve_cluster_port(
                settings,
                &service,
                &secret,
                ports.cluster,
                &stop,
                &mut tasks,
            );
            let opts = nacelle_cluster::ClusterOptions {
                members: settings.members.clone(),
                conf_file: settings.cluster_conf(),
                self_addr: http_addr,
                secret,
                health_interval: settings.member_check_interval,
            };
            Some(nacelle_cluster::Cluster::start(
                &service,
                opts,
                stop.clone(),
                &background,
            )?)
        }
        None => None,
    };
    let follow =
        (settings.clustered() || settings.shared_database()).then_some(settings.follow_interval);
    background.spawn(load_then_follow(
        services.clone(),
        settings.clone(),
        follow,
        stop.clone(),
    ));
    // The features' background work: re-reads of what other nodes change, scheduled
    // change requests, the rollout driver, the webhooks' enqueuer and sender, the audit
    // appender; each ends at shutdown.
    services.spawn_tasks(
        &background,
        Background {
            webhook_transport: Arc::new(
                webhook_client::HttpTransport::new().context("the webhooks' HTTP client")?,
            ),
            rollout_driver: rollout_driver(settings, http_addr),
            shared: follow.is_some(),
        },
    );

    Ok(RunningServer {
        http_addr,
        grpc_addr,
        http_tls_addr: ports.http_tls_addr,
        grpc_tls_addr: ports.grpc_tls_addr,
        grpc_stats,
        cluster,
        cluster_grpc_addr,
        services,
        stop,
        tasks,
        background,
    })
}

/// The cluster secret when this node runs in a cluster (none is an error there); `None`
/// alone. A cluster on the embedded SQLite file is refused: every node would hold a
/// database of its own, and the members' notices (which name a key to re-read from the
/// shared database) would leave each with different configs.
fn cluster_secret(settings: &Settings) -> anyhow::Result<Option<String>> {
    if !settings.clustered() {
        return Ok(None);
    }
    let secret = settings.cluster_secret.clone().context(
        "cluster members are configured but there is no cluster secret: set \
         --cluster-secret, NACELLE_CLUSTER_SECRET or cluster_secret_file",
    )?;
    if !settings.shared_database() {
        anyhow::bail!(
            "cluster members are configured (--members or {}) but the database is the \
             embedded SQLite file {}, which other nodes cannot share: give every member the \
             same --db mysql://… or postgres://… (docs/cluster.md), or run a single node \
             without members",
            settings.cluster_conf().display(),
            settings.database_display()
        );
    }
    Ok(Some(secret))
}

/// Opens the store named by the settings. A wrong URL or schema is fatal at once; an
/// unreachable database is retried in the background while the server answers liveness
/// and stays not-ready.
async fn open_store(
    settings: &Settings,
    stop: &CancellationToken,
    background: &TaskTracker,
) -> anyhow::Result<Arc<dyn ConfigStore>> {
    let url = settings.database_url();
    let db_shown = settings.database_display();
    let lazy = Arc::new(Lazy::store(db_shown.clone()));
    match nacelle_store::open(&url).await {
        Ok(store) => lazy.0.set(store),
        Err(nacelle_store::OpenError::Store(e)) => {
            tracing::error!(db = %db_shown, error = %e, "database unreachable; not ready, retrying");
            background.spawn(connect_in_background(
                lazy.clone(),
                url,
                db_shown,
                stop.clone(),
            ));
        }
        Err(e) => return Err(e).with_context(|| format!("opening database {db_shown}")),
    }
    Ok(lazy)
}

/// Serves gRPC on its listeners (the main port, and the separate TLS port when there is
/// one) until `stop`; returns the adapter's counters.
fn serve_grpc(
    settings: &Settings,
    service: &ConfigService,
    listeners: Vec<Served>,
    stop: &CancellationToken,
    tasks: &mut Vec<JoinHandle<anyhow::Result<()>>>,
) -> nacelle_grpc::GrpcStats {
    let grpc = nacelle_grpc::GrpcServer::new(service.clone(), settings.grpc.clone());
    let stats = grpc.stats();
    let stop = stop.clone();
    tasks.push(tokio::spawn(async move {
        grpc.serve_on(listeners, async move { stop.cancelled().await })
            .await
            .context("grpc server failed")
    }));
    stats
}

/// Serves the HTTP API and the console on each listener until `stop`; one connection
/// count across them (the per-IP limit).
fn serve_http(
    settings: &Settings,
    services: &Services,
    listeners: Vec<Served>,
    http_addr: SocketAddr,
    stop: &CancellationToken,
    tasks: &mut Vec<JoinHandle<anyhow::Result<()>>>,
) {
    let api = nacelle_http::api(services.clone(), settings.http_options(http_addr));
    let connections = nacelle_http::ConnectionCounter::default();
    for (listener, tls) in listeners {
        let stop = stop.clone();
        let opts = nacelle_http::ServeOptions {
            max_request_bytes: settings.max_request_bytes,
            max_head_bytes: settings.max_head_bytes,
            max_connections_per_ip: settings.http_max_connections_per_ip,
            tls,
            connections: connections.clone(),
            trusted_proxies: settings.trusted_proxies.clone(),
            ..nacelle_http::ServeOptions::default()
        };
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            nacelle_http::serve_with(listener, api, opts, async move { stop.cancelled().await })
                .await
                .context("http server failed")
        }));
    }
}

/// A member's cluster gRPC port (the other members' change notices), served until `stop`.
fn serve_cluster_port(
    settings: &Settings,
    service: &ConfigService,
    secret: &str,
    listener: Option<(TcpListener, SocketAddr)>,
    stop: &CancellationToken,
    tasks: &mut Vec<JoinHandle<anyhow::Result<()>>>,
) {
    let Some((listener, _)) = listener else {
        return;
    };
    let server = nacelle_grpc::ClusterGrpcServer::new(
        service.clone(),
        settings.cluster_grpc_options(secret),
    );
    let stop = stop.clone();
    tasks.push(tokio::spawn(async move {
        server
            .serve(listener, async move { stop.cancelled().await })
            .await
            .context("cluster grpc server failed")
    }));
}

/// The rollout driver's settings and its HTTP probes (docs/rollouts.md): this process
/// drives the rollouts whose database lease it holds. `None` (logged) when no HTTP client
/// could be made.
fn rollout_driver(
    settings: &Settings,
    http_addr: SocketAddr,
) -> Option<(
    nacelle_service::DriverConfig,
    Arc<dyn nacelle_service::GuardProbe>,
)> {
    let probe_timeout = nacelle_service::DriverConfig::new(String::new(), None).probe_timeout;
    match rollout_probe::HttpProbe::new(probe_timeout) {
        Ok(probe) => {
            let node = format!("{http_addr}/{}", uuid::Uuid::new_v4().simple());
            let mut config =
                nacelle_service::DriverConfig::new(node, settings.prometheus_url.clone());
            config.guard_urls = settings.rollout_guard_urls.clone();
            Some((config, Arc::new(probe)))
        }
        Err(e) => {
            tracing::error!(error = %e, "no HTTP client for rollout guards: rollouts are not driven");
            None
        }
    }
}

/// Loads the cache (retrying with backoff while the database is unreachable), then, when
/// `follow` is set, follows the database's change log at that interval until `stop`.
async fn load_then_follow(
    services: Services,
    settings: Settings,
    follow: Option<std::time::Duration>,
    stop: CancellationToken,
) {
    let service = &services.config;
    let started = std::time::Instant::now();
    let mut delay = std::time::Duration::from_millis(500);
    let position = loop {
        let attempt = async {
            // The position is read before the load, so no change can fall between them.
            let position = service.replication().change_log_position().await?;
            let gray_position = service.replication().gray_log_position().await?;
            // Before the load marks the service ready: a login right after readiness
            // finds the first administrator.
            auth_setup::ensure_admin(service, &settings).await;
            let n = services.load().await?;
            Ok::<_, nacelle_core::CoreError>(((position, gray_position), n))
        };
        match attempt.await {
            Ok((position, n)) => {
                tracing::info!(
                    configs = n,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "ready"
                );
                break position;
            }
            Err(e) => tracing::error!(
                error = %e,
                retry_in_ms = delay.as_millis() as u64,
                "loading the config cache failed; not ready, retrying"
            ),
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.cancelled() => return,
        }
        delay = (delay * 2).min(std::time::Duration::from_secs(10));
    };
    let Some(interval) = follow else { return };
    let mut follower = nacelle_service::ChangeFollower::starting_at(position.0);
    let mut gray_follower = nacelle_service::ChangeFollower::grays_starting_at(position.1);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.cancelled() => return,
        }
        if failing {
            // The database is (perhaps) back after an outage: a failover may have put a
            // replica in its place that lacks commits this node read.
            match rewound_resync(service, &follower, &gray_follower).await {
                Ok(Some((formal, gray))) => {
                    follower = nacelle_service::ChangeFollower::starting_at(formal);
                    gray_follower = nacelle_service::ChangeFollower::grays_starting_at(gray);
                }
                Ok(None) => {}
                // Still unreachable: the poll below fails and says so.
                Err(_) => {}
            }
        }
        let polled = match follower.poll(service).await {
            Ok(n) => gray_follower.poll(service).await.map(|g| n + g),
            Err(e) => Err(e),
        };
        match polled {
            Ok(n) => {
                let metrics = service.metrics();
                metrics.follower_followed(follower.position(), follower.applied());
                if failing {
                    tracing::info!("database reachable again; following its change log");
                    failing = false;
                }
                if n > 0 {
                    tracing::debug!(
                        reloaded = n,
                        position = follower.position(),
                        "followed the change log"
                    );
                }
            }
            Err(e) => {
                service.metrics().follower_failed();
                if !failing {
                    tracing::warn!(error = %e, "following the change log failed; serving from memory and retrying");
                    failing = true;
                }
            }
        }
    }
}

/// When the change log no longer holds the newest rows the followers read (the database
/// lost commits this node had read: a failover to a replica that lacked them), reloads
/// every config from the database whatever its revisions and returns the positions to
/// follow from (read before the reload, as at start); `None` when the log is intact.
async fn rewound_resync(
    service: &ConfigService,
    follower: &nacelle_service::ChangeFollower,
    gray_follower: &nacelle_service::ChangeFollower,
) -> Result<Option<(i64, i64)>, nacelle_core::CoreError> {
    if !follower.history_rewound(service).await? && !gray_follower.history_rewound(service).await? {
        return Ok(None);
    }
    tracing::warn!(
        position = follower.position(),
        "the database's change log no longer holds changes this node read (a failover to \
         a replica that lacked them?): reloading every config from it"
    );
    let formal = service.replication().change_log_position().await?;
    let gray = service.replication().gray_log_position().await?;
    let changed = service.replication().resync().await?;
    tracing::warn!(
        changed,
        position = formal,
        "reloaded every config from the database"
    );
    Ok(Some((formal, gray)))
}

/// Retries opening the database until it works, then installs it; gives up at `stop`.
async fn connect_in_background(
    lazy: Arc<LazyStore>,
    url: String,
    db_shown: String,
    stop: CancellationToken,
) {
    let mut delay = std::time::Duration::from_millis(500);
    loop {
        let opened = tokio::select! {
            opened = async {
                tokio::time::sleep(delay).await;
                nacelle_store::open(&url).await
            } => opened,
            _ = stop.cancelled() => return,
        };
        match opened {
            Ok(store) => {
                tracing::info!(db = %db_shown, "database connected");
                lazy.0.set(store);
                return;
            }
            Err(e) => tracing::error!(
                db = %db_shown,
                error = %e,
                retry_in_ms = delay.as_millis() as u64,
                "database still unreachable; not ready"
            ),
        }
        delay = (delay * 2).min(std::time::Duration::from_secs(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn settings_for(dir: &std::path::Path) -> Settings {
        Settings {
            data_dir: dir.to_path_buf(),
            bind: std::net::Ipv4Addr::LOCALHOST.into(),
            port: 0,
            ..Settings::default()
        }
    }

    /// A burst of connections far over the 128 a plain `bind` queues is held by the kernel
    /// until the server accepts them: none has its SYN dropped (which would stall it for a
    /// second, then 3 s, 7 s…), whatever the accept loop is doing meanwhile.
    #[tokio::test]
    async fn a_burst_of_connections_waits_in_the_accept_queue() -> TestResult {
        let listener = bind_listener("127.0.0.1:0".parse()?)?;
        let addr = listener.local_addr()?;
        // Within the kernel's cap (net.core.somaxconn: 4096 since Linux 5.4, 128 before).
        let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(4096);
        let burst = somaxconn.min(900);
        let mut clients = Vec::with_capacity(burst);
        for i in 0..burst {
            // Nothing accepts yet. A dropped SYN is retried only after a second, and then
            // the queue is still full: this connect would not finish in time.
            let c =
                tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
                    .await
                    .map_err(|_| format!("connection {i} of the burst was not queued"))??;
            clients.push(c);
        }
        for _ in 0..burst {
            tokio::time::timeout(Duration::from_secs(5), listener.accept()).await??;
        }
        Ok(())
    }

    /// Shuts `server` down and checks that no task of it is left.
    async fn shutdown_leaves_nothing(server: RunningServer, at_least: usize) -> TestResult {
        let background = server.background.clone();
        assert!(
            background.len() >= at_least,
            "{} background tasks, expected at least {at_least}",
            background.len()
        );
        tokio::time::timeout(Duration::from_secs(20), server.shutdown()).await??;
        assert!(background.is_closed());
        assert_eq!(background.len(), 0, "a background task outlived shutdown");
        Ok(())
    }

    /// A clustered node runs the change-log follower, the history purge, the notifier's
    /// member follower, a queue per peer and the member health checks; none of them
    /// outlives shutdown. (A cluster needs a shared database: PostgreSQL here.)
    #[tokio::test]
    async fn shutdown_stops_every_cluster_task() -> TestResult {
        use nacelle_testkit::{per_backend::skipped, Backend, TestDb};
        if skipped(Backend::Postgres) {
            return Ok(());
        }
        let db = TestDb::create(Backend::Postgres).await?;
        let dir = tempfile::tempdir()?;
        let settings = Settings {
            db: Some(db.url.clone()),
            // A peer that never answers: its queue and health checks keep retrying.
            members: vec!["127.0.0.1:1".into()],
            cluster_secret: Some("0123456789abcdef".into()),
            // With authentication on, the directory follower runs too.
            auth: crate::settings::AuthSettings {
                token_secret: Some("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=".into()),
                ..Default::default()
            },
            follow_interval: Duration::from_millis(50),
            member_check_interval: Duration::from_millis(100),
            ..settings_for(dir.path())
        };
        let server = start(&settings).await?;
        assert!(server.cluster.is_some());
        // Let the load finish, so the follower is running rather than loading.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !server.service().is_ready() {
            assert!(std::time::Instant::now() < deadline, "never ready");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        shutdown_leaves_nothing(server, 5).await
    }

    /// Members on the embedded SQLite file: refused before anything is opened or bound,
    /// saying why and what to do; the same with a `cluster.conf`.
    #[tokio::test]
    async fn a_cluster_on_sqlite_is_refused() -> TestResult {
        let dir = tempfile::tempdir()?;
        let settings = Settings {
            members: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            cluster_secret: Some("0123456789abcdef".into()),
            ..settings_for(dir.path())
        };
        let Err(e) = start(&settings).await else {
            return Err("a cluster on SQLite started".into());
        };
        let e = format!("{e:#}");
        assert!(e.contains("SQLite") && e.contains("--db"), "{e}");
        assert!(
            !dir.path().join("nacelle.db").exists(),
            "nothing was opened"
        );
        std::fs::write(dir.path().join("cluster.conf"), "127.0.0.1:1\n")?;
        let settings = Settings {
            cluster_secret: Some("0123456789abcdef".into()),
            ..settings_for(dir.path())
        };
        assert!(start(&settings).await.is_err());
        Ok(())
    }

    /// A node whose database is unreachable retries connecting and loading in the
    /// background (and waits to purge history); shutdown stops all three.
    #[tokio::test]
    async fn shutdown_stops_the_database_retries() -> TestResult {
        let dir = tempfile::tempdir()?;
        let settings = Settings {
            db: Some("postgres://nobody:secret@127.0.0.1:1/nacelle".into()),
            ..settings_for(dir.path())
        };
        let server = start(&settings).await?;
        assert!(!server.service().is_ready());
        shutdown_leaves_nothing(server, 3).await
    }

    /// The background purge removes what the retention settings condemn while the server
    /// runs (here: all but the newest row of a key), keeps the newest row, and stops at
    /// shutdown.
    #[tokio::test]
    async fn the_background_purge_removes_condemned_history() -> TestResult {
        use nacelle_core::{ConfigKey, ConfigMeta, ConfigType, OpSource, PageRequest};
        let dir = tempfile::tempdir()?;
        let settings = Settings {
            retention: settings::Retention {
                max_age: Some(Duration::from_secs(86_400)),
                keep_per_key: Some(1),
                interval: Duration::from_millis(200),
                audit_max_age: Some(Duration::from_secs(86_400)),
                webhook_max_age: Some(Duration::from_secs(86_400)),
            },
            ..settings_for(dir.path())
        };
        let server = start(&settings).await?;
        // A second store on the server's SQLite file writes and reads the history.
        let store = nacelle_store::open(&settings.database_url()).await?;
        let key = ConfigKey::from_trusted("", "G", "purged");
        let mut newest = 0;
        for i in 0..5 {
            let content = format!("v{i}");
            let rec = nacelle_core::PublishRecord {
                key: key.clone(),
                md5: nacelle_core::md5_hex(content.as_bytes()),
                content: content.into(),
                config_type: ConfigType::Text,
                meta: ConfigMeta::default(),
                source: OpSource::default(),
                cas_md5: None,
                now_ms: nacelle_core::now_millis(),
                gray: None,
            };
            newest = store.publish(&rec).await?.revision;
        }
        // Audit entries: two older than the audit retention, then a recent one.
        let event = |time_ms: i64| nacelle_core::audit::AuditEvent {
            time_ms,
            user: "u".into(),
            address: String::new(),
            protocol: "internal".into(),
            action: "publish".into(),
            target: "public/G/purged".into(),
            outcome: "ok".into(),
            detail: String::new(),
            change_id: None,
        };
        let old = nacelle_core::now_millis() - 3 * 86_400_000;
        let now = nacelle_core::now_millis();
        let appended = store
            .append_audit(&[event(old), event(old + 1), event(now)])
            .await?;
        let recent = appended[2].seq;
        // Webhook deliveries, finished: one older than their retention, one recent (of a
        // hook id no webhook has, so the server's sender leaves them alone).
        use nacelle_core::webhook::{DeliveryClaim, DeliveryResult, DeliveryStatus, NewDelivery};
        let delivery = |event_id: &str, created_ms: i64| NewDelivery {
            hook_id: 999,
            event_id: event_id.into(),
            kind: "publish".into(),
            body: "{}".into(),
            created_ms,
        };
        store
            .enqueue_deliveries(&[delivery("old", old), delivery("new", now)])
            .await?;
        let claim = DeliveryClaim {
            owner: "test".into(),
            now_ms: now,
            lease_until_ms: now + 60_000,
            limit: 10,
        };
        for d in store.claim_deliveries(&claim).await? {
            let done = DeliveryResult {
                status: DeliveryStatus::Delivered,
                code: 200,
                error: String::new(),
                next_attempt_ms: now,
                now_ms: now,
            };
            assert!(store.finish_delivery(d.id, "test", &done).await?);
        }
        let page = PageRequest {
            page_no: 1,
            page_size: 10,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let history = store.history_page(&key, page).await?;
            let nids: Vec<i64> = history.items.iter().map(|h| h.nid).collect();
            if nids == vec![newest] {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not purged: {nids:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        loop {
            let range = store.audit_range(0, 100).await?;
            if range.head.anchor_seq == recent - 1 {
                // Only the old prefix went; the rest links to the new anchor.
                assert_eq!(range.entries.first().map(|e| e.seq), Some(recent));
                assert_eq!(range.entries[0].prev_hash, range.head.anchor_hash);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "audit not purged: {:?}",
                range.head
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        loop {
            let left = store.deliveries(999, page).await?;
            let ids: Vec<&str> = left.items.iter().map(|d| d.event_id.as_str()).collect();
            if ids == vec!["new"] {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "deliveries not purged: {ids:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The purge task at least (the load may have finished).
        shutdown_leaves_nothing(server, 1).await
    }
}
