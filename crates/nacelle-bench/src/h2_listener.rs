//! A lean listening client for `grpc-fanout`: the Nacos 2.x handshake on the `h2` crate
//! directly, then one task per connection that drives the HTTP/2 connection and reads the
//! bi-stream itself, acknowledging each push in the same wake-up.
//!
//! The tonic client of [`crate::grpc_client`] spends four task wake-ups per push (hyper's
//! connection task, tonic's stream, our reader, hyper's request-body pipe) and about as much
//! CPU as the server; on two cores shared by both sides that CPU is part of every latency
//! the fan-out measures. This client is the measuring instrument made as cheap as the
//! protocol allows — what `fanout-ceiling` does over raw TCP, plus HTTP/2, protobuf and the
//! JSON of each message — so that the figures show the server. It does what a real SDK must
//! do for a push: decode the `Payload`, read its `requestId`, answer
//! `ConfigChangeNotifyResponse` with it. It answers every other server request too, so a
//! server's probes and resets are handled as by [`crate::grpc_client`].

use std::future::{poll_fn, Future};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use h2::client::{Connection, SendRequest};
use h2::{RecvStream, SendStream};
use nacelle_proto::connection::{ConnectionSetupRequest, HealthCheckRequest, ServerCheckRequest};
use nacelle_proto::{types, Payload, ResponseHead};
use prost::Message;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::grpc_client::{answer_to, listen_body, PushArrival, Route, StreamCounters};

/// How long a handshake step may take before the connection counts as failed.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);
const UNARY_PATH: &str = "/Request/request";
const STREAM_PATH: &str = "/BiRequestStream/requestBiStream";

/// One listening connection; dropping it ends its task, and with it the connection.
#[derive(Debug)]
pub struct LeanListener {
    _stop: oneshot::Sender<()>,
}

/// Frames one message: the gRPC prefix (uncompressed, big-endian length) and the protobuf.
fn frame(p: &Payload) -> Bytes {
    let len = p.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    // Encoding into a buffer of exactly the encoded length cannot run out of room.
    let _room_is_exact = p.encode(&mut buf);
    buf.freeze()
}

fn json<T: serde::Serialize>(msg: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(msg).unwrap_or_default())
}

/// Reassembles gRPC messages from DATA frames.
#[derive(Debug, Default)]
struct Messages {
    buf: BytesMut,
}

impl Messages {
    fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    fn next(&mut self) -> Result<Option<Payload>> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            bail!("compressed gRPC message");
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        self.buf.advance(5);
        let msg = self.buf.split_to(len);
        Ok(Some(Payload::decode(msg.freeze())?))
    }
}

fn request(target: SocketAddr, path: &str) -> Result<http::Request<()>> {
    Ok(http::Request::post(format!("http://{target}{path}"))
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header("te", "trailers")
        .body(())?)
}

/// One unary call on `send`; the connection is driven by the caller meanwhile.
async fn unary(
    send: &mut SendRequest<Bytes>,
    target: SocketAddr,
    type_name: &str,
    body: Bytes,
) -> Result<Payload> {
    let mut ready = send.clone().ready().await?;
    let (response, mut out) = ready.send_request(request(target, UNARY_PATH)?, false)?;
    out.send_data(frame(&with_token(Payload::new(type_name, body))), true)?;
    let mut body = response.await?.into_body();
    let mut messages = Messages::default();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _stream_gone = body.flow_control().release_capacity(chunk.len());
        messages.push(&chunk);
    }
    messages
        .next()?
        .with_context(|| format!("no answer to {type_name}"))
}

fn with_token(p: Payload) -> Payload {
    match crate::creds::token() {
        Some(t) => p.with_header("accessToken", t),
        None => p,
    }
}

async fn call_ok(
    send: &mut SendRequest<Bytes>,
    target: SocketAddr,
    type_name: &str,
    body: Bytes,
) -> Result<ResponseHead> {
    let answer = unary(send, target, type_name, body).await?;
    let head = answer.head()?;
    if !head.is_ok() {
        bail!(
            "{} resultCode {} errorCode {} {}",
            answer.type_name(),
            head.result_code,
            head.error_code,
            head.message.as_deref().unwrap_or("")
        );
    }
    Ok(head)
}

async fn tcp(route: Route) -> Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    if let Some(src) = route.source {
        socket.bind(SocketAddr::new(IpAddr::V4(src), 0))?;
    }
    let stream = socket.connect(route.target).await?;
    stream.set_nodelay(true)?;
    crate::no_time_wait(&stream)?;
    Ok(stream)
}

type Driven = (RecvStream, SendStream<Bytes>);

/// The handshake of a real SDK, then one listened key: ServerCheckRequest, the bi-stream
/// with ConnectionSetupRequest, health checks until registered, ConfigBatchListenRequest.
async fn setup(
    mut send: SendRequest<Bytes>,
    target: SocketAddr,
    (data_id, group, md5): (&str, &str, &str),
) -> Result<Driven> {
    let check = ServerCheckRequest {
        request_id: Some("check".into()),
    };
    call_ok(&mut send, target, types::SERVER_CHECK_REQUEST, json(&check)).await?;

    let mut ready = send.clone().ready().await?;
    let (response, mut out) = ready.send_request(request(target, STREAM_PATH)?, false)?;
    let setup = ConnectionSetupRequest::new("nacelle-bench", "", Some("nacelle-bench"));
    out.send_data(
        frame(&with_token(Payload::new(
            types::CONNECTION_SETUP_REQUEST,
            json(&setup),
        ))),
        false,
    )?;
    let inbound = response.await?.into_body();

    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let health = HealthCheckRequest {
            request_id: Some("health".into()),
        };
        let answer = unary(
            &mut send,
            target,
            types::HEALTH_CHECK_REQUEST,
            json(&health),
        )
        .await?;
        if answer.head()?.is_ok() {
            break;
        }
        if Instant::now() > deadline {
            bail!("not registered");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    call_ok(
        &mut send,
        target,
        types::CONFIG_BATCH_LISTEN_REQUEST,
        listen_body(data_id, group, md5),
    )
    .await?;
    Ok((inbound, out))
}

/// Connects, registers and listens to `key` of `group` holding `md5`; then one task drives
/// the connection and answers every server request. Change pushes are reported on `pushes`.
pub async fn listen(
    route: Route,
    index: usize,
    key: (&str, &str, &str),
    pushes: mpsc::UnboundedSender<PushArrival>,
    counters: Arc<StreamCounters>,
) -> Result<LeanListener> {
    let io = tcp(route)
        .await
        .with_context(|| format!("connecting to {} from {:?}", route.target, route.source))?;
    let (send, mut conn) = h2::client::Builder::new()
        .handshake::<_, Bytes>(io)
        .await
        .context("HTTP/2 handshake")?;
    let steps = tokio::time::timeout(STEP_TIMEOUT, setup(send, route.target, key));
    tokio::pin!(steps);
    // The connection is driven beside the handshake steps, in this task.
    let (inbound, out) = tokio::select! {
        r = &mut steps => r.map_err(|_| anyhow!("handshake timed out"))??,
        r = &mut conn => bail!("connection ended during the handshake: {r:?}"),
    };
    let (stop, stopped) = oneshot::channel();
    tokio::spawn(drive(
        conn,
        inbound,
        out,
        stopped,
        (index, pushes, counters),
    ));
    Ok(LeanListener { _stop: stop })
}

/// The steady state: one poll drives the connection, reads every message that arrived and
/// queues its answer, then drives the connection again so the answers leave in the same
/// wake-up.
async fn drive(
    mut conn: Connection<TcpStream, Bytes>,
    mut inbound: RecvStream,
    mut out: SendStream<Bytes>,
    mut stop: oneshot::Receiver<()>,
    (index, pushes, counters): (
        usize,
        mpsc::UnboundedSender<PushArrival>,
        Arc<StreamCounters>,
    ),
) {
    let mut messages = Messages::default();
    poll_fn(|cx| {
        if std::pin::Pin::new(&mut stop).poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if std::pin::Pin::new(&mut conn).poll(cx).is_ready() {
            counters.closed.fetch_add(1, Ordering::Relaxed);
            return Poll::Ready(());
        }
        let mut answered = false;
        loop {
            match inbound.poll_data(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let at = Instant::now();
                    let _stream_gone = inbound.flow_control().release_capacity(chunk.len());
                    messages.push(&chunk);
                    loop {
                        match messages.next() {
                            Ok(Some(p)) => {
                                if answer(&p, at, &mut out, (index, &pushes, &counters)).is_err() {
                                    counters.closed.fetch_add(1, Ordering::Relaxed);
                                    return Poll::Ready(());
                                }
                                answered = true;
                            }
                            Ok(None) => break,
                            Err(_) => {
                                counters.closed.fetch_add(1, Ordering::Relaxed);
                                return Poll::Ready(());
                            }
                        }
                    }
                }
                Poll::Ready(_) => {
                    counters.closed.fetch_add(1, Ordering::Relaxed);
                    return Poll::Ready(());
                }
                Poll::Pending => break,
            }
        }
        if answered && std::pin::Pin::new(&mut conn).poll(cx).is_ready() {
            counters.closed.fetch_add(1, Ordering::Relaxed);
            return Poll::Ready(());
        }
        Poll::Pending
    })
    .await;
}

/// Answers one server request on the stream; reports a change push's arrival.
fn answer(
    p: &Payload,
    at: Instant,
    out: &mut SendStream<Bytes>,
    (index, pushes, counters): (usize, &mpsc::UnboundedSender<PushArrival>, &StreamCounters),
) -> Result<(), h2::Error> {
    match answer_to(p, at, (index, Some(pushes), counters)) {
        Some(ack) => out.send_data(frame(&ack), false),
        None => Ok(()),
    }
}
