//! One registered Nacos 2.x gRPC connection: the handshake (`ServerCheckRequest`, the
//! bi-stream opened with `ConnectionSetupRequest`, a `HealthCheckRequest` until the
//! server has registered it), unary calls, and the reader of the bi-stream, which acks
//! every server request and reports pushes and resets as [`StreamEvent`]s.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use nacelle_proto::config::ConfigChangeNotifyRequest;
use nacelle_proto::connection::{
    ConnectResetRequest, ConnectionSetupRequest, HealthCheckRequest, ServerCheckRequest,
    ServerCheckResponse,
};
use nacelle_proto::grpc::bi_request_stream_client::BiRequestStreamClient;
use nacelle_proto::grpc::request_client::RequestClient;
use nacelle_proto::{types, Message, Payload, ResponseHead};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint};

use crate::error::{ClientError, Result};
use crate::options::{Options, ServerAddr};

/// The client version sent in `ConnectionSetupRequest`.
pub(crate) const CLIENT_VERSION: &str = concat!("Nacelle-Rust-Client:v", env!("CARGO_PKG_VERSION"));

/// The largest message accepted from a server (Nacos's limit is 10 MB; room for JSON).
const MAX_MESSAGE: usize = 64 << 20;

/// What the bi-stream tells the connection's owner.
#[derive(Debug)]
pub(crate) enum StreamEvent {
    /// A listened key changed (the push was acked).
    Changed(ConfigChangeNotifyRequest),
    /// A fuzzy-watch push (sync batch or change notification), acked.
    Fuzzy(Payload),
    /// The server asked for a reconnect, to this server when it named one.
    Reset(Option<(String, u16)>),
    /// The stream ended (server gone, connection cut).
    Closed(String),
}

/// A registered connection. Dropping it ends its stream and its reader.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) server: ServerAddr,
    unary: RequestClient<Channel>,
    request_timeout: Duration,
    stop: CancellationToken,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The JSON of a message; the client's own messages always serialise.
fn payload<M: Message>(msg: &M) -> Result<Payload> {
    Payload::from_message(msg).map_err(|e| ClientError::Protocol(e.to_string()))
}

/// The labels of `ConnectionSetupRequest`: Nacos's `source`, `module`, `AppName`, and the
/// user's labels both as given (as `nacos-sdk` sends them) and with Java's `app_` prefix.
fn setup_request(opts: &Options) -> ConnectionSetupRequest {
    let mut setup =
        ConnectionSetupRequest::new(CLIENT_VERSION, &opts.namespace, opts.app_name.as_deref());
    let labels = setup.labels.get_or_insert_with(HashMap::new);
    for (k, v) in &opts.labels {
        labels.insert(k.clone(), Some(v.clone()));
        labels.insert(format!("app_{k}"), Some(v.clone()));
    }
    setup
}

/// The error of a gRPC status answered to the call `what` by `server`. A refusal of the
/// request itself is said as such and not retried elsewhere: `RESOURCE_EXHAUSTED` is the
/// server's inbound size limit (Nacos: `gRPC message exceeds maximum size 10485760: …`,
/// 10 MiB by default), `INVALID_ARGUMENT`/`OUT_OF_RANGE` a bad request,
/// `UNAUTHENTICATED`/`PERMISSION_DENIED` a refusal, `UNIMPLEMENTED` a method the server
/// lacks. Anything else (`UNAVAILABLE`, a reset or broken connection, a timeout) means
/// this server could not answer: another may.
fn status_error(server: &str, what: &str, status: &tonic::Status) -> ClientError {
    use tonic::Code;
    let message = status.message();
    match status.code() {
        Code::ResourceExhausted => {
            ClientError::Invalid(format!("{what} too large for {server}: {message}"))
        }
        Code::InvalidArgument | Code::OutOfRange => {
            ClientError::Invalid(format!("{server}: {what}: {message}"))
        }
        Code::Unauthenticated | Code::PermissionDenied => ClientError::Forbidden(message.into()),
        Code::Unimplemented => ClientError::Protocol(format!("{server}: {what}: {message}")),
        _ => ClientError::Unavailable(format!("{server}: {what}: {message}")),
    }
}

impl Conn {
    /// Connects to `server` and registers; pushes and resets arrive on `events`.
    pub(crate) async fn connect(
        server: &ServerAddr,
        opts: &Options,
        events: mpsc::UnboundedSender<StreamEvent>,
    ) -> Result<Conn> {
        let unavailable = |what: &str, e: &dyn std::fmt::Display| {
            ClientError::Unavailable(format!("{}: {what}: {e}", server.label()))
        };
        let endpoint = Endpoint::from_shared(server.grpc_url())
            .map_err(|e| ClientError::Config(format!("{}: {e}", server.grpc_url())))?
            .connect_timeout(opts.connect_timeout)
            .tcp_nodelay(true);
        let channel = tokio::time::timeout(opts.connect_timeout, endpoint.connect())
            .await
            .map_err(|e| unavailable("connect", &e))?
            .map_err(|e| unavailable("connect", &e))?;
        let unary = RequestClient::new(channel.clone()).max_decoding_message_size(MAX_MESSAGE);
        let stop = CancellationToken::new();
        let conn = Conn {
            server: server.clone(),
            unary,
            request_timeout: opts.connect_timeout,
            stop: stop.clone(),
        };
        let check: ServerCheckResponse = conn
            .exchange(payload(&ServerCheckRequest {
                request_id: Some("check".into()),
            })?)
            .await?
            .parse_body()
            .map_err(|e| ClientError::Protocol(format!("ServerCheckResponse: {e}")))?;
        if !check.head.is_ok() {
            return Err(ClientError::from_head(&check.head, "check"));
        }

        // The bi-stream: the setup request first, then the acks of server requests.
        let (out_tx, out_rx) = mpsc::channel::<Payload>(64);
        out_tx
            .send(payload(&setup_request(opts))?)
            .await
            .map_err(|e| unavailable("stream", &e))?;
        let outbound =
            futures::stream::unfold((out_rx, stop.clone()), |(mut rx, stop)| async move {
                tokio::select! {
                    () = stop.cancelled() => None,
                    p = rx.recv() => p.map(|p| (p, (rx, stop))),
                }
            });
        let mut streams =
            BiRequestStreamClient::new(channel).max_decoding_message_size(MAX_MESSAGE);
        let mut inbound =
            tokio::time::timeout(opts.connect_timeout, streams.request_bi_stream(outbound))
                .await
                .map_err(|e| unavailable("bi-stream", &e))?
                .map_err(|e| unavailable("bi-stream", &e))?
                .into_inner();
        let label = server.label();
        tokio::spawn(async move {
            let why = loop {
                let msg = tokio::select! {
                    () = stop.cancelled() => return,
                    m = inbound.message() => m,
                };
                let p = match msg {
                    Ok(Some(p)) => p,
                    Ok(None) => break "stream ended".to_string(),
                    Err(status) => break format!("stream failed: {}", status.message()),
                };
                if types::is_response_type(p.type_name()) {
                    continue;
                }
                let event = match p.type_name() {
                    types::CONFIG_CHANGE_NOTIFY_REQUEST => {
                        match p.parse::<ConfigChangeNotifyRequest>() {
                            Ok(n) => Some(StreamEvent::Changed(n)),
                            Err(e) => {
                                tracing::warn!(server = %label, error = %e, "unreadable change push");
                                None
                            }
                        }
                    }
                    types::CONFIG_FUZZY_WATCH_SYNC_REQUEST
                    | types::CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_REQUEST => {
                        Some(StreamEvent::Fuzzy(p.clone()))
                    }
                    types::CONNECT_RESET_REQUEST => {
                        let target = p.parse::<ConnectResetRequest>().ok().and_then(|r| {
                            let ip = r.server_ip.filter(|ip| !ip.is_empty())?;
                            let port = r.server_port?.parse::<u16>().ok()?;
                            Some((ip, port))
                        });
                        Some(StreamEvent::Reset(target))
                    }
                    _ => None,
                };
                let ack_type = match p.type_name() {
                    types::CONFIG_CHANGE_NOTIFY_REQUEST => types::CONFIG_CHANGE_NOTIFY_RESPONSE,
                    types::CLIENT_DETECTION_REQUEST => types::CLIENT_DETECTION_RESPONSE,
                    types::CONNECT_RESET_REQUEST => types::CONNECT_RESET_RESPONSE,
                    types::CONFIG_FUZZY_WATCH_SYNC_REQUEST => {
                        types::CONFIG_FUZZY_WATCH_SYNC_RESPONSE
                    }
                    types::CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_REQUEST => {
                        types::CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_RESPONSE
                    }
                    _ => "ServerRequestResponse",
                };
                let ack = ResponseHead::ok(p.request_id());
                let body = serde_json::to_vec(&ack)
                    .map(Bytes::from)
                    .unwrap_or_default();
                if out_tx.send(Payload::new(ack_type, body)).await.is_err() {
                    break "stream closed".to_string();
                }
                let reset = matches!(event, Some(StreamEvent::Reset(_)));
                if let Some(ev) = event {
                    if events.send(ev).is_err() {
                        return;
                    }
                }
                if reset {
                    return;
                }
            };
            // The owner may be gone already; then nobody needs to know.
            let _owner_gone = events.send(StreamEvent::Closed(why));
        });

        // The server registers the connection once it read the setup request.
        let deadline = Instant::now() + opts.connect_timeout;
        loop {
            let head = conn.health_check().await?;
            if head.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(ClientError::from_head(&head, "setup"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut conn = conn;
        conn.request_timeout = opts.request_timeout;
        Ok(conn)
    }

    /// One `HealthCheckRequest`; its answer's head.
    pub(crate) async fn health_check(&self) -> Result<ResponseHead> {
        let p = self
            .exchange(payload(&HealthCheckRequest {
                request_id: Some("health".into()),
            })?)
            .await?;
        p.head()
            .map_err(|e| ClientError::Protocol(format!("{}: {e}", p.type_name())))
    }

    /// One unary call with these `headers` in `metadata.headers`; the answer.
    pub(crate) async fn call<M: Message>(
        &self,
        msg: &M,
        headers: &[(&str, &str)],
    ) -> Result<Payload> {
        let mut p = payload(msg)?;
        for (k, v) in headers {
            p = p.with_header(*k, *v);
        }
        self.exchange(p).await
    }

    async fn exchange(&self, p: Payload) -> Result<Payload> {
        let mut unary = self.unary.clone();
        let what = p.type_name().to_string();
        match tokio::time::timeout(self.request_timeout, unary.request(p)).await {
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            Ok(Err(status)) => Err(status_error(&self.server.label(), &what, &status)),
            Err(_) => Err(ClientError::Unavailable(format!(
                "{}: {what} timed out",
                self.server.label()
            ))),
        }
    }
}
