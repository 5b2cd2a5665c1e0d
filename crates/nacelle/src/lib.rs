//! The Nacelle server: settings, wiring and lifecycle. `main.rs` is a thin shell over
//! [`settings::Settings`] and [`start`]; tests start servers in-process through the same
//! [`start`] on port 0.
//!
//! # Layout
//! - [`settings`]: flags, `NACELLE_*` environment variables and the TOML file, merged with
//!   precedence flag > env > file > default.
//! - [`start`]/[`RunningServer`]: opens the store, binds listeners, loads the cache in the
//!   background (readiness waits for it) and shuts down gracefully.

pub mod settings;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use nacelle_core::ConfigStore;
use nacelle_service::ConfigService;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use settings::Settings;

/// A server started by [`start`].
#[derive(Debug)]
pub struct RunningServer {
    /// The address the HTTP API listens on (the real port when 0 was asked for).
    pub http_addr: SocketAddr,
    service: ConfigService,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

impl RunningServer {
    /// The config service, for in-process tests and future adapters.
    pub fn service(&self) -> &ConfigService {
        &self.service
    }

    /// Graceful shutdown: stop accepting, answer held long polls, let in-flight requests
    /// (and so in-flight writes) finish, then return.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.service.begin_shutdown();
        self.stop.cancel();
        for t in self.tasks {
            t.await.context("server task panicked")??;
        }
        Ok(())
    }

    /// Waits until every task ends (they end only after [`RunningServer::shutdown`] or a
    /// fatal error).
    pub async fn wait(&mut self) -> anyhow::Result<()> {
        for t in self.tasks.drain(..) {
            t.await.context("server task panicked")??;
        }
        Ok(())
    }
}

/// Opens the store, binds the listeners and starts serving. The config cache loads in the
/// background; readiness answers 503 until it is loaded.
pub async fn start(settings: &Settings) -> anyhow::Result<RunningServer> {
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("creating data directory {}", settings.data_dir.display()))?;
    let url = settings.database_url();
    let store: Arc<dyn ConfigStore> = nacelle_store::open(&url)
        .await
        .with_context(|| format!("opening database {}", settings.database_display()))?;
    let service = ConfigService::new(store, settings.limits());

    let http_listener = TcpListener::bind((settings.bind, settings.port))
        .await
        .with_context(|| format!("binding HTTP on {}:{}", settings.bind, settings.port))?;
    let http_addr = http_listener.local_addr()?;
    tracing::info!("http listening on {http_addr}");

    let stop = CancellationToken::new();
    let mut tasks = Vec::new();

    let router = nacelle_http::router(service.clone(), settings.http_options());
    let http_stop = stop.clone();
    let max_request = settings.max_request_bytes;
    tasks.push(tokio::spawn(async move {
        nacelle_http::serve(http_listener, router, max_request, async move {
            http_stop.cancelled().await
        })
        .await
        .context("http server failed")
    }));

    let loader = service.clone();
    let load_stop = stop.clone();
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut delay = std::time::Duration::from_millis(500);
        loop {
            match loader.load().await {
                Ok(n) => {
                    tracing::info!(
                        configs = n,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "ready"
                    );
                    return;
                }
                Err(e) => tracing::error!(
                    error = %e,
                    retry_in_ms = delay.as_millis() as u64,
                    "loading the config cache failed; not ready, retrying"
                ),
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = load_stop.cancelled() => return,
            }
            delay = (delay * 2).min(std::time::Duration::from_secs(10));
        }
    });

    Ok(RunningServer {
        http_addr,
        service,
        stop,
        tasks,
    })
}
