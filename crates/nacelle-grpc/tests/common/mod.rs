//! Test support: a real SQLite store in a tempdir, the loaded config service and the gRPC
//! server on a free port; a Rust `nacos-sdk` client factory; a raw tonic client.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use nacelle_core::{Caller, ConfigKey, ConfigMeta, Variant};
use nacelle_grpc::{GrpcError, GrpcOptions, GrpcServer, GrpcStats};
use nacelle_proto::connection::ConnectionSetupRequest;
use nacelle_proto::grpc::bi_request_stream_client::BiRequestStreamClient;
use nacelle_proto::grpc::request_client::RequestClient;
use nacelle_proto::response::ResponseHead;
use nacelle_proto::{types, Payload};
use nacelle_service::{ConfigService, Limits, PublishRequest};
use nacelle_store::SqliteStore;
use nacos_sdk::api::config::{
    ConfigChangeListener, ConfigResponse, ConfigService as SdkConfigService, ConfigServiceBuilder,
};
use nacos_sdk::api::props::ClientProps;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// A generous bound for anything that should happen "soon".
pub const SOON: Duration = Duration::from_secs(30);

/// The gRPC server under test, over a data directory that survives restarts.
pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub service: ConfigService,
    pub stats: GrpcStats,
    opts: GrpcOptions,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), GrpcError>>>,
}

impl TestServer {
    /// Starts on a fresh data dir and a free port, with the service loaded.
    pub async fn start(opts: GrpcOptions) -> anyhow::Result<Self> {
        Self::start_with_limits(opts, Limits::default()).await
    }

    /// Starts like [`TestServer::start`] with the service's limits set.
    pub async fn start_with_limits(opts: GrpcOptions, limits: Limits) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let service = open_service(&db_path(dir.path()), true, limits).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mut s = TestServer {
            dir,
            port,
            service: service.clone(),
            stats: GrpcStats::new(),
            opts,
            stop: None,
            task: None,
        };
        s.launch(listener, service);
        Ok(s)
    }

    /// Starts over a service that was never loaded (the server is "starting").
    pub async fn start_unloaded(opts: GrpcOptions) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let service = open_service(&db_path(dir.path()), false, Limits::default()).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mut s = TestServer {
            dir,
            port,
            service: service.clone(),
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
            let _ = rx.await;
        })));
    }

    /// Stops the gRPC server (graceful shutdown) and waits for it to return.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
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
        let service = open_service(
            &db_path(self.dir.path()),
            true,
            self.service.limits().clone(),
        )
        .await?;
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
        self.launch(listener, service);
        Ok(())
    }

    /// Publishes through the service directly, as the HTTP adapter or the console would.
    pub async fn publish(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
        content: &str,
    ) -> anyhow::Result<()> {
        self.service
            .publish(
                &Caller::internal(),
                PublishRequest {
                    key: ConfigKey::parse(Some(tenant), group, data_id)?,
                    content: content.to_string(),
                    config_type: Some("text".into()),
                    meta: ConfigMeta::default(),
                    src_user: String::new(),
                    cas_md5: None,
                    variant: Variant::Formal,
                },
            )
            .await?;
        Ok(())
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
        let cache = tempfile::tempdir()?;
        let props = ClientProps::new()
            .server_addr(format!("127.0.0.1:{}", self.port))
            .remote_grpc_port(self.port)
            .namespace(namespace)
            .app_name("nacelle-grpc-test")
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

    /// Starts the HTTP adapter over this server's service on a free port; returns its
    /// base URL and the sender that stops it.
    pub async fn start_http(
        &self,
        opts: nacelle_http::HttpOptions,
    ) -> anyhow::Result<(String, oneshot::Sender<()>)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let max = opts.max_request_bytes;
        let router = nacelle_http::router(self.service.clone(), opts);
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(nacelle_http::serve(listener, router, max, async {
            // A dropped sender stops the server as a sent one does.
            let _stopped = rx.await;
        }));
        Ok((format!("http://{addr}"), tx))
    }

    /// A raw protocol client on this server's gRPC port (not yet set up).
    pub async fn raw(&self) -> anyhow::Result<RawClient> {
        RawClient::connect(self.port).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

fn db_path(dir: &Path) -> PathBuf {
    dir.join("nacelle.db")
}

async fn open_service(db: &Path, load: bool, limits: Limits) -> anyhow::Result<ConfigService> {
    let store = SqliteStore::open_path(db).await?;
    let service = ConfigService::new(Arc::new(store), limits);
    if load {
        service.load().await?;
    }
    Ok(service)
}

// ------------------------------------------------------------------ the Rust SDK

/// A `nacos-sdk` config client with its own on-disk cache dir.
pub struct Sdk {
    pub client: SdkConfigService,
    _cache: tempfile::TempDir,
}

/// A listener that forwards every notification to a channel, stamped with its arrival.
pub struct Recorder {
    tx: mpsc::UnboundedSender<(Instant, ConfigResponse)>,
}

impl ConfigChangeListener for Recorder {
    fn notify(&self, resp: ConfigResponse) {
        let _ = self.tx.send((Instant::now(), resp));
    }
}

/// The receiving end of a [`Recorder`].
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
}

impl Notifications {
    /// The next notification: when it arrived and its content.
    pub async fn next(&mut self, within: Duration) -> anyhow::Result<(Instant, String)> {
        let got = tokio::time::timeout(within, self.rx.recv())
            .await
            .map_err(|_| anyhow!("no notification within {within:?}"))?
            .ok_or_else(|| anyhow!("listener dropped"))?;
        Ok((got.0, got.1.content().clone()))
    }
}

/// Prints min/median/max of measured latencies.
pub fn print_latencies(what: &str, mut samples: Vec<Duration>) {
    if samples.is_empty() {
        return;
    }
    samples.sort();
    let n = samples.len();
    println!(
        "{what}: n={n} min={:?} median={:?} max={:?}",
        samples[0],
        samples[n / 2],
        samples[n - 1]
    );
}

// ------------------------------------------------------------------ raw protocol

/// A hand-driven client: unary calls and one bi-stream over one HTTP/2 connection, so they
/// share a connection id on the server.
pub struct RawClient {
    unary: RequestClient<Channel>,
    stream: BiRequestStreamClient<Channel>,
    tx: Option<mpsc::Sender<Payload>>,
    inbound: Option<tonic::Streaming<Payload>>,
}

/// A decoded message: its type name and JSON body.
#[derive(Debug, Clone)]
pub struct Msg {
    pub type_name: String,
    pub body: Value,
}

impl Msg {
    pub fn str(&self, field: &str) -> Option<&str> {
        self.body.get(field).and_then(Value::as_str)
    }
    pub fn int(&self, field: &str) -> Option<i64> {
        self.body.get(field).and_then(Value::as_i64)
    }
}

pub fn payload(type_name: &str, client_ip: &str, body: impl Into<Bytes>) -> Payload {
    Payload::new(type_name, body).with_client_ip(client_ip)
}

/// A message's type name and its body as a JSON value (tests assert on the raw JSON, so
/// that what the server writes is checked independently of the wire types).
pub fn decode(p: &Payload) -> anyhow::Result<Msg> {
    let type_name = p.type_name().to_string();
    let body: Value = p
        .parse_body()
        .with_context(|| format!("body of {type_name} is not JSON"))?;
    Ok(Msg { type_name, body })
}

impl RawClient {
    pub async fn connect(port: u16) -> anyhow::Result<Self> {
        Self::connect_with(port, None).await
    }

    /// Connects with the given HTTP/2 receive windows (`None`: the defaults).
    pub async fn connect_with(port: u16, window: Option<u32>) -> anyhow::Result<Self> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
            .initial_stream_window_size(window)
            .initial_connection_window_size(window)
            .connect()
            .await?;
        Ok(RawClient {
            unary: RequestClient::new(channel.clone()).max_decoding_message_size(64 << 20),
            stream: BiRequestStreamClient::new(channel),
            tx: None,
            inbound: None,
        })
    }

    /// A unary call with a JSON body.
    pub async fn call(&mut self, type_name: &str, body: Value) -> anyhow::Result<Msg> {
        self.call_raw(type_name, serde_json::to_vec(&body)?).await
    }

    /// A unary call with raw body bytes.
    pub async fn call_raw(&mut self, type_name: &str, body: Vec<u8>) -> anyhow::Result<Msg> {
        self.call_payload(payload(type_name, "", body)).await
    }

    /// A unary call with a JSON body and `metadata.headers`.
    pub async fn call_with_headers(
        &mut self,
        type_name: &str,
        headers: &[(&str, &str)],
        body: Value,
    ) -> anyhow::Result<Msg> {
        let mut p = payload(type_name, "", serde_json::to_vec(&body)?);
        for (name, value) in headers {
            p = p.with_header(*name, *value);
        }
        self.call_payload(p).await
    }

    async fn call_payload(&mut self, p: Payload) -> anyhow::Result<Msg> {
        let resp = self
            .unary
            .request(p)
            .await
            .map_err(|s| anyhow!("status {:?}: {}", s.code(), s.message()))?;
        decode(&resp.into_inner())
    }

    /// A unary call that returns the gRPC status instead of failing.
    pub async fn call_status(
        &mut self,
        type_name: &str,
        body: Vec<u8>,
    ) -> Result<Payload, tonic::Status> {
        self.unary
            .request(payload(type_name, "", body))
            .await
            .map(|r| r.into_inner())
    }

    /// Opens the bi-stream without sending anything on it.
    pub async fn open_silent_stream(&mut self) -> anyhow::Result<()> {
        let (tx, rx) = mpsc::channel::<Payload>(64);
        let outbound =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|p| (p, rx)) });
        let inbound = self.stream.request_bi_stream(outbound).await?.into_inner();
        self.tx = Some(tx);
        self.inbound = Some(inbound);
        Ok(())
    }

    /// Opens the bi-stream and sends `ConnectionSetupRequest` reporting `client_ip`.
    pub async fn open_stream(&mut self, client_ip: &str) -> anyhow::Result<()> {
        let (tx, rx) = mpsc::channel::<Payload>(64);
        let outbound =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|p| (p, rx)) });
        let setup = ConnectionSetupRequest::new("raw-test", "", Some("raw"));
        tx.send(Payload::from_message(&setup)?.with_client_ip(client_ip))
            .await?;
        let inbound = self.stream.request_bi_stream(outbound).await?.into_inner();
        self.tx = Some(tx);
        self.inbound = Some(inbound);
        Ok(())
    }

    /// Opens the stream and waits until the server registered the connection.
    pub async fn setup(&mut self, client_ip: &str) -> anyhow::Result<()> {
        self.open_stream(client_ip).await?;
        let deadline = Instant::now() + SOON;
        loop {
            let r = self
                .call(types::HEALTH_CHECK_REQUEST, serde_json::json!({}))
                .await?;
            if r.int("resultCode") == Some(200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("not registered: {r:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The next message the server sends on the stream; `None` when the stream ended.
    pub async fn next(&mut self, within: Duration) -> anyhow::Result<Option<Msg>> {
        let inbound = self.inbound.as_mut().ok_or_else(|| anyhow!("no stream"))?;
        match tokio::time::timeout(within, inbound.message()).await {
            Err(_) => bail!("nothing on the stream within {within:?}"),
            Ok(Ok(Some(p))) => Ok(Some(decode(&p)?)),
            Ok(Ok(None)) | Ok(Err(_)) => Ok(None),
        }
    }

    /// Sends a response on the stream (e.g. the ack of a push).
    pub async fn respond(&self, type_name: &str, request_id: &str) -> anyhow::Result<()> {
        let body = ResponseHead::ok(Some(request_id.to_string()));
        self.tx
            .as_ref()
            .ok_or_else(|| anyhow!("no stream"))?
            .send(payload(type_name, "", serde_json::to_vec(&body)?))
            .await?;
        Ok(())
    }

    /// Listens to keys: `(dataId, group, tenant, md5)`.
    pub async fn listen(
        &mut self,
        keys: &[(&str, &str, &str, &str)],
        listen: bool,
    ) -> anyhow::Result<Msg> {
        let contexts: Vec<Value> = keys
            .iter()
            .map(|(d, g, t, m)| serde_json::json!({"dataId": d, "group": g, "tenant": t, "md5": m}))
            .collect();
        self.call(
            "ConfigBatchListenRequest",
            serde_json::json!({"listen": listen, "configListenContexts": contexts, "headers": {}}),
        )
        .await
    }

    /// Drops the stream (the client goes away).
    pub fn close_stream(&mut self) {
        self.tx = None;
        self.inbound = None;
    }
}
