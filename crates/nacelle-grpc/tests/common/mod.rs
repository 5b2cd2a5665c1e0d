//! Test support of the gRPC suites: the server, the Rust SDK and the recorder come from
//! the test kit (`nacelle_testkit::grpc`); here the hand-driven wire client (`RawClient`).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use nacelle_proto::connection::ConnectionSetupRequest;
use nacelle_proto::grpc::bi_request_stream_client::BiRequestStreamClient;
use nacelle_proto::grpc::request_client::RequestClient;
use nacelle_proto::response::ResponseHead;
use nacelle_proto::{types, Payload};
// What the suites take from the kit, under the names they use (not every suite uses all).
#[allow(unused_imports)]
pub use nacelle_testkit::grpc::{recorder, TestServer};
#[allow(unused_imports)]
pub use nacelle_testkit::{print_latencies, SOON};
use serde_json::Value;
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// `server.raw()`: a raw protocol client on the test server's gRPC port (not yet set up).
pub trait RawExt {
    async fn raw(&self) -> anyhow::Result<RawClient>;
}

impl RawExt for TestServer {
    async fn raw(&self) -> anyhow::Result<RawClient> {
        RawClient::connect(self.port).await
    }
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
        Self::connect_from_with(port, None, window).await
    }

    /// Connects from the source address `source` (e.g. 127.0.0.2: a client on another
    /// host as the server sees it).
    pub async fn connect_from(port: u16, source: std::net::IpAddr) -> anyhow::Result<Self> {
        Self::connect_from_with(port, Some(source), None).await
    }

    async fn connect_from_with(
        port: u16,
        source: Option<std::net::IpAddr>,
        window: Option<u32>,
    ) -> anyhow::Result<Self> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
            .initial_stream_window_size(window)
            .initial_connection_window_size(window)
            .local_address(source)
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
        self.open_stream_labelled(client_ip, &[]).await
    }

    /// [`RawClient::open_stream`] with extra connection labels (e.g. `app_env=pre`, as a
    /// Java client sends its application labels).
    pub async fn open_stream_labelled(
        &mut self,
        client_ip: &str,
        labels: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        let mut setup = ConnectionSetupRequest::new("raw-test", "", Some("raw"));
        if let Some(map) = setup.labels.as_mut() {
            for (k, v) in labels {
                map.insert(k.to_string(), Some(v.to_string()));
            }
        }
        self.open_stream_with(client_ip, &setup).await
    }

    /// Opens the bi-stream and sends this `ConnectionSetupRequest` reporting `client_ip`.
    pub async fn open_stream_with(
        &mut self,
        client_ip: &str,
        setup: &ConnectionSetupRequest,
    ) -> anyhow::Result<()> {
        let (tx, rx) = mpsc::channel::<Payload>(64);
        let outbound =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|p| (p, rx)) });
        tx.send(Payload::from_message(setup)?.with_client_ip(client_ip))
            .await?;
        let inbound = self.stream.request_bi_stream(outbound).await?.into_inner();
        self.tx = Some(tx);
        self.inbound = Some(inbound);
        Ok(())
    }

    /// Opens the stream and waits until the server registered the connection.
    pub async fn setup(&mut self, client_ip: &str) -> anyhow::Result<()> {
        self.setup_labelled(client_ip, &[]).await
    }

    /// [`RawClient::setup`] with extra connection labels.
    pub async fn setup_labelled(
        &mut self,
        client_ip: &str,
        labels: &[(&str, &str)],
    ) -> anyhow::Result<()> {
        self.open_stream_labelled(client_ip, labels).await?;
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

    /// Waits for the stream to end, with no message before its end, and returns the status
    /// it ended with (`Ok` for a clean end).
    pub async fn ended(&mut self, within: Duration) -> anyhow::Result<tonic::Status> {
        let inbound = self.inbound.as_mut().ok_or_else(|| anyhow!("no stream"))?;
        match tokio::time::timeout(within, inbound.message()).await {
            Err(_) => bail!("the stream did not end within {within:?}"),
            Ok(Ok(Some(p))) => bail!("a message before the end: {:?}", decode(&p)?),
            Ok(Ok(None)) => Ok(tonic::Status::ok("")),
            Ok(Err(status)) => Ok(status),
        }
    }

    /// Sends a response on the stream (e.g. the ack of a push).
    pub async fn respond(&self, type_name: &str, request_id: &str) -> anyhow::Result<()> {
        let body = ResponseHead::ok(Some(request_id.to_string()));
        self.respond_raw(type_name, serde_json::to_vec(&body)?)
            .await
    }

    /// Answers on the stream with a body exactly as given.
    pub async fn respond_raw(&self, type_name: &str, body: Vec<u8>) -> anyhow::Result<()> {
        self.tx
            .as_ref()
            .ok_or_else(|| anyhow!("no stream"))?
            .send(payload(type_name, "", body))
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
