//! The cluster port in-process: `ConfigChangeClusterSyncRequest` sent by
//! `ClusterSyncClient` makes a node reload a key another node wrote to the shared database
//! (a SQLite file here); a wrong secret is refused; the fault switch drops the request; an
//! unreachable port is a transport error the notifier can fall back from.

use std::time::Duration;

use anyhow::{anyhow, bail};
use nacelle_cluster::{ClusterSyncClient, ClusterSyncError, SyncTimeouts};
use nacelle_core::{Caller, ConfigKey};
use nacelle_grpc::{ClusterGrpcOptions, ClusterGrpcServer, ClusterSyncStats, GrpcError};
use nacelle_service::ConfigService;
use nacelle_testkit::service::{self, publish};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const SECRET: &str = "cluster-secret-for-tests-0123";

/// A node's cluster port over `service`.
struct ClusterPort {
    port: u16,
    stats: ClusterSyncStats,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), GrpcError>>>,
}

impl ClusterPort {
    async fn start(service: ConfigService, opts: ClusterGrpcOptions) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let server = ClusterGrpcServer::new(service, opts);
        let stats = server.stats();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(listener, async {
            // A dropped sender stops the server as a sent one does.
            let _stopped = rx.await;
        }));
        Ok(ClusterPort {
            port,
            stats,
            stop: Some(tx),
            task: Some(task),
        })
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            // Err: the server already ended; the join below reports how.
            let _ended = tx.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task).await???;
        }
        Ok(())
    }
}

fn content(service: &ConfigService, key: &ConfigKey) -> anyhow::Result<Option<String>> {
    Ok(service
        .get(&Caller::internal(), key, None)?
        .map(|s| s.config.content_text().into_owned()))
}

#[tokio::test]
async fn a_sync_request_reloads_the_key_and_needs_the_secret() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("nacelle.db");
    let node = service::open_sqlite(&db, true).await?;
    let writer = service::open_sqlite(&db, true).await?;
    let port = ClusterPort::start(node.clone(), ClusterGrpcOptions::new(SECRET)).await?;
    let key = ConfigKey::parse(Some("public"), "G", "synced.yaml")?;

    publish(&writer, &key, "v1").await?;
    assert_eq!(content(&node, &key)?, None, "not reloaded yet");

    let client = ClusterSyncClient::new("127.0.0.1", port.port, SECRET, SyncTimeouts::default())?;
    client.sync(&key, 0).await?;
    assert_eq!(content(&node, &key)?.as_deref(), Some("v1"));
    // The channel is reused for the next call.
    publish(&writer, &key, "v2").await?;
    client.sync(&key, 0).await?;
    assert_eq!(content(&node, &key)?.as_deref(), Some("v2"));

    let wrong = ClusterSyncClient::new(
        "127.0.0.1",
        port.port,
        "wrong-secret-wrong-secret",
        SyncTimeouts::default(),
    )?;
    publish(&writer, &key, "v3").await?;
    match wrong.sync(&key, 0).await {
        Err(ClusterSyncError::Refused { code: 403, message }) => {
            assert!(message.contains("not a cluster member"), "{message}");
        }
        other => bail!("expected a 403 refusal, got {other:?}"),
    }
    assert_eq!(content(&node, &key)?.as_deref(), Some("v2"), "no reload");

    let s = port.stats.snapshot();
    assert_eq!((s.reloaded, s.refused, s.dropped), (2, 1, 0), "{s:?}");
    port.stop().await
}

#[tokio::test]
async fn the_fault_switch_drops_sync_requests() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("nacelle.db");
    let node = service::open_sqlite(&db, true).await?;
    let writer = service::open_sqlite(&db, true).await?;
    let opts = ClusterGrpcOptions {
        drop_notifications: true,
        ..ClusterGrpcOptions::new(SECRET)
    };
    let port = ClusterPort::start(node.clone(), opts).await?;
    let key = ConfigKey::parse(None, "G", "lost")?;
    publish(&writer, &key, "v1").await?;
    let client = ClusterSyncClient::new("127.0.0.1", port.port, SECRET, SyncTimeouts::default())?;
    client.sync(&key, 0).await?;
    assert_eq!(content(&node, &key)?, None, "dropped, so not reloaded");
    assert_eq!(port.stats.snapshot().dropped, 1);
    port.stop().await
}

#[tokio::test]
async fn an_unreachable_cluster_port_is_a_transport_error() -> anyhow::Result<()> {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let client = ClusterSyncClient::new("127.0.0.1", closed, SECRET, SyncTimeouts::default())?;
    let key = ConfigKey::parse(None, "G", "k")?;
    match client.sync(&key, 0).await {
        Err(ClusterSyncError::Transport { .. }) => Ok(()),
        other => Err(anyhow!("expected a transport error, got {other:?}")),
    }
}

#[tokio::test]
async fn a_cluster_port_without_a_secret_does_not_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let node = service::open_sqlite(&dir.path().join("nacelle.db"), true).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let server = ClusterGrpcServer::new(node, ClusterGrpcOptions::new(""));
    match server.serve(listener, std::future::pending()).await {
        Err(GrpcError::InvalidOptions(_)) => Ok(()),
        other => Err(anyhow!("expected InvalidOptions, got {other:?}")),
    }
}
