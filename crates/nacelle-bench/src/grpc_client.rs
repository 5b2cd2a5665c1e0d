//! A minimal Nacos 2.x gRPC client on tonic and the wire types of `nacelle_proto`: the
//! handshake a real SDK does (ServerCheckRequest, bi-stream, ConnectionSetupRequest, wait
//! for registration), unary calls with pre-built JSON bodies, and a stream reader that
//! acknowledges every server request and reports the arrival of change pushes.
//!
//! Each connection can be bound to its own 127.0.0.x source address, so that one target
//! port can take more connections than the ephemeral port range allows per source.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use hyper_util::rt::TokioIo;
use nacelle_proto::config::{
    addition, ConfigBatchListenRequest, ConfigListenContext, ConfigPublishRequest,
    ConfigQueryRequest,
};
use nacelle_proto::connection::{
    ConnectionSetupRequest, HealthCheckRequest, ServerCheckRequest, ServerCheckResponse,
};
use nacelle_proto::grpc::bi_request_stream_client::BiRequestStreamClient;
use nacelle_proto::grpc::request_client::RequestClient;
use nacelle_proto::{types, Payload};
use serde::Serialize;
use tokio::net::TcpSocket;
use tokio::sync::{mpsc, oneshot};
use tonic::transport::{Channel, Endpoint, Uri};

/// How long a handshake step may take before the connection counts as failed.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// Where a connection goes and which source address it binds.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub target: SocketAddr,
    /// `None`: let the kernel pick (127.0.0.1 for a loopback target).
    pub source: Option<Ipv4Addr>,
}

/// Source address of the `i`-th connection: `127.0.0.(2 + offset + i / per_source)`.
pub fn source_for(i: usize, per_source: usize, offset: usize) -> Result<Ipv4Addr> {
    let n = 2 + offset + i / per_source.max(1);
    if n > 254 {
        bail!("out of 127.0.0.x source addresses (connection {i}, {per_source} per address)");
    }
    Ok(Ipv4Addr::new(127, 0, 0, n as u8))
}

/// The head fields of every Nacos response.
pub use nacelle_proto::ResponseHead as Head;

fn describe(head: &Head, type_name: &str) -> String {
    format!(
        "{type_name} resultCode {} errorCode {} {}",
        head.result_code,
        head.error_code,
        head.message.as_deref().unwrap_or("")
    )
}

/// Counters shared by the stream readers of many connections.
#[derive(Debug, Default)]
pub struct StreamCounters {
    pub pushes: AtomicU64,
    pub probes: AtomicU64,
    pub resets: AtomicU64,
    pub closed: AtomicU64,
}

/// A change push as seen by the client: which connection, when it arrived.
pub type PushArrival = (usize, Instant);

/// The JSON of a message (the bench's messages always serialise).
fn json<T: Serialize>(msg: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(msg).unwrap_or_default())
}

/// A `ConfigQueryRequest` body.
pub fn query_body(data_id: &str, group: &str, request_id: u64) -> Bytes {
    json(&ConfigQueryRequest::new(data_id, group, "").with_request_id(request_id.to_string()))
}

/// A `ConfigPublishRequest` body.
pub fn publish_body(data_id: &str, group: &str, content: &str, request_id: u64) -> Bytes {
    json(
        &ConfigPublishRequest::new(data_id, group, "", content)
            .with_request_id(request_id.to_string())
            .with_addition(addition::TYPE, "properties"),
    )
}

/// A `ConfigBatchListenRequest` body listening to one key.
pub fn listen_body(data_id: &str, group: &str, md5: &str) -> Bytes {
    json(&ConfigBatchListenRequest {
        request_id: Some("listen".into()),
        ..ConfigBatchListenRequest::new(
            true,
            vec![ConfigListenContext::new(data_id, group, "", md5)],
        )
    })
}

async fn channel(route: Route) -> Result<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{}", route.target))?
        .connect_timeout(STEP_TIMEOUT)
        .tcp_nodelay(true);
    let Route { target, source } = route;
    let connector = tower::service_fn(move |_: Uri| async move {
        let socket = TcpSocket::new_v4()?;
        if let Some(src) = source {
            socket.bind(SocketAddr::new(IpAddr::V4(src), 0))?;
        }
        let stream = socket.connect(target).await?;
        stream.set_nodelay(true)?;
        crate::no_time_wait(&stream)?;
        Ok::<_, std::io::Error>(TokioIo::new(stream))
    });
    endpoint
        .connect_with_connector(connector)
        .await
        .with_context(|| format!("connecting to {target} from {source:?}"))
}

/// One registered gRPC connection: a unary client and a bi-stream whose reader task acks
/// server requests. Dropping it ends the stream and the connection.
#[derive(Debug)]
pub struct GrpcConn {
    /// Unary calls on this connection (clones share the HTTP/2 connection).
    pub unary: Unary,
    _stop: oneshot::Sender<()>,
}

/// The unary side of a connection; cheap to clone, clones multiplex on one connection.
#[derive(Debug, Clone)]
pub struct Unary(RequestClient<Channel>);

impl GrpcConn {
    /// Connects and performs the handshake. Change pushes are reported on `pushes` as
    /// `(index, arrival)`.
    /// Connects and sends only `ServerCheckRequest`: no bi-stream, never registered (to
    /// tell the cost of a bare HTTP/2 connection from that of a registered one).
    pub async fn connect_unregistered(route: Route) -> Result<Self> {
        let ch = channel(route).await?;
        let mut unary = RequestClient::new(ch).max_decoding_message_size(64 << 20);
        let check = server_check(&mut unary).await?;
        if !check.head.is_ok() {
            bail!("{}", describe(&check.head, types::SERVER_CHECK_RESPONSE));
        }
        let (stop, _) = oneshot::channel();
        Ok(GrpcConn {
            unary: Unary(unary),
            _stop: stop,
        })
    }

    pub async fn connect(
        route: Route,
        index: usize,
        pushes: Option<mpsc::UnboundedSender<PushArrival>>,
        counters: Arc<StreamCounters>,
    ) -> Result<Self> {
        let ch = channel(route).await?;
        let mut unary = RequestClient::new(ch.clone()).max_decoding_message_size(64 << 20);
        let check = server_check(&mut unary).await?;
        if !check.head.is_ok() || check.connection_id.is_empty() {
            bail!("{}", describe(&check.head, types::SERVER_CHECK_RESPONSE));
        }

        // The bi-stream; the setup request is its first message.
        let (out_tx, out_rx) = mpsc::channel::<Payload>(16);
        let setup = ConnectionSetupRequest::new("nacelle-bench", "", Some("nacelle-bench"));
        out_tx
            .send(Payload::new(types::CONNECTION_SETUP_REQUEST, json(&setup)))
            .await
            .map_err(|_| anyhow!("stream closed before setup"))?;
        let outbound =
            futures::stream::unfold(
                out_rx,
                |mut rx| async move { rx.recv().await.map(|p| (p, rx)) },
            );
        let mut streams = BiRequestStreamClient::new(ch);
        let mut inbound = tokio::time::timeout(STEP_TIMEOUT, streams.request_bi_stream(outbound))
            .await
            .context("opening the bi-stream timed out")??
            .into_inner();
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    _ = &mut stop_rx => break,
                    m = inbound.message() => m,
                };
                let Ok(Some(p)) = msg else {
                    counters.closed.fetch_add(1, Ordering::Relaxed);
                    break;
                };
                let at = Instant::now();
                let Some(ack) = answer_to(&p, at, (index, pushes.as_ref(), &counters)) else {
                    continue;
                };
                if out_tx.send(ack).await.is_err() {
                    break;
                }
            }
        });

        // Registration happens when the server has read the setup request.
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let health = HealthCheckRequest {
                request_id: Some("health".into()),
            };
            let (_, head) = call(&mut unary, types::HEALTH_CHECK_REQUEST, json(&health)).await?;
            if head.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "not registered: {}",
                    describe(&head, types::HEALTH_CHECK_RESPONSE)
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(GrpcConn {
            unary: Unary(unary),
            _stop: stop_tx,
        })
    }
}

/// The client's answer to a server request on the bi-stream (`None` for a response, which
/// needs none): counts it, and reports a change push's arrival on `pushes`.
pub fn answer_to(
    p: &Payload,
    at: Instant,
    (index, pushes, counters): (
        usize,
        Option<&mpsc::UnboundedSender<PushArrival>>,
        &StreamCounters,
    ),
) -> Option<Payload> {
    let ack_type = match p.type_name() {
        types::CONFIG_CHANGE_NOTIFY_REQUEST => {
            counters.pushes.fetch_add(1, Ordering::Relaxed);
            if let Some(tx) = pushes {
                // The round that wanted arrival times may be over; then the push only
                // counts.
                let _late = tx.send((index, at));
            }
            types::CONFIG_CHANGE_NOTIFY_RESPONSE
        }
        types::CLIENT_DETECTION_REQUEST => {
            counters.probes.fetch_add(1, Ordering::Relaxed);
            types::CLIENT_DETECTION_RESPONSE
        }
        types::CONNECT_RESET_REQUEST => {
            counters.resets.fetch_add(1, Ordering::Relaxed);
            types::CONNECT_RESET_RESPONSE
        }
        t if types::is_response_type(t) => return None,
        _ => "ServerRequestResponse",
    };
    let ack = Head::ok(Some(p.request_id().unwrap_or_default()));
    Some(Payload::new(ack_type, json(&ack)))
}

impl Unary {
    /// A unary call; returns the response type and its head.
    pub async fn call(&mut self, type_name: &str, body: Bytes) -> Result<(String, Head)> {
        call(&mut self.0, type_name, body).await
    }

    /// A unary call that must succeed (`resultCode 200`).
    pub async fn call_ok(&mut self, type_name: &str, body: Bytes) -> Result<Head> {
        let (t, head) = self.call(type_name, body).await?;
        if !head.is_ok() {
            bail!("{}", describe(&head, &t));
        }
        Ok(head)
    }

    /// Listens to one key; fails unless the server accepted it.
    pub async fn listen(&mut self, data_id: &str, group: &str, md5: &str) -> Result<Head> {
        self.call_ok(
            types::CONFIG_BATCH_LISTEN_REQUEST,
            listen_body(data_id, group, md5),
        )
        .await
    }
}

/// One unary call; returns the answer.
async fn exchange(
    unary: &mut RequestClient<Channel>,
    type_name: &str,
    body: Bytes,
) -> Result<Payload> {
    Ok(tokio::time::timeout(
        STEP_TIMEOUT,
        unary.request(with_token(Payload::new(type_name, body))),
    )
    .await
    .with_context(|| format!("{type_name} timed out"))?
    .map_err(|s| anyhow!("{type_name}: gRPC status {:?}: {}", s.code(), s.message()))?
    .into_inner())
}

/// One unary call; returns the answer's type and head.
/// `p` with the run's access token in `metadata.headers`, if there is one.
fn with_token(p: Payload) -> Payload {
    match crate::creds::token() {
        Some(t) => p.with_header("accessToken", t),
        None => p,
    }
}

async fn call(
    unary: &mut RequestClient<Channel>,
    type_name: &str,
    body: Bytes,
) -> Result<(String, Head)> {
    let resp = exchange(unary, type_name, body).await?;
    let t = resp.type_name();
    let head = resp
        .head()
        .with_context(|| format!("body of {t} is not JSON"))?;
    Ok((t.to_string(), head))
}

/// `ServerCheckRequest`, the first call of a client.
async fn server_check(unary: &mut RequestClient<Channel>) -> Result<ServerCheckResponse> {
    let req = ServerCheckRequest {
        request_id: Some("check".into()),
    };
    let resp = exchange(unary, types::SERVER_CHECK_REQUEST, json(&req)).await?;
    resp.parse_body()
        .with_context(|| format!("body of {} is not JSON", resp.type_name()))
}

/// Raises the soft limit of open files to the hard limit; returns the limit now in force.
pub fn raise_nofile() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("cannot raise the open-file limit: {e}");
            rlimit::getrlimit(rlimit::Resource::NOFILE)
                .map(|(soft, _)| soft)
                .unwrap_or(0)
        }
    }
}
