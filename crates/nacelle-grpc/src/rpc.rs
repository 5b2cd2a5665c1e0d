//! gRPC over HTTP/2, served directly on the `h2` crate.
//!
//! Nacos clients use exactly two methods: the unary `/Request/request` and the
//! bidirectional `/BiRequestStream/requestBiStream`, both carrying one `Payload` message
//! type. Serving them on `h2` without a generic gRPC stack keeps a connection to the
//! HTTP/2 state, one task, and — for the bi-stream — a shared send handle: a server push
//! is framed once per change and written by the publishing task straight into the stream,
//! which wakes only the connection's task to put it on the socket.
//!
//! What the gRPC specification asks of a server and is done here: `content-type:
//! application/grpc` on the response headers, the status in trailers (`grpc-status`,
//! percent-encoded `grpc-message`), a "trailers-only" response for calls that fail before
//! any message, `UNIMPLEMENTED` for unknown methods, `RESOURCE_EXHAUSTED` for a message
//! over the size limit (as grpc-java, and so Nacos, answers), and HTTP/2 flow control
//! (received bytes are released as they are consumed). Compressed messages are refused
//! with `UNIMPLEMENTED`: Nacos clients do not compress.

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::task::AtomicWaker;
use h2::server::{self, SendResponse};
use h2::{RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use nacelle_proto::Payload;
use parking_lot::Mutex;

use crate::codec::{self, Code, Decoder, Status};
use tokio::io::{AsyncRead, AsyncWrite};

#[cfg(doc)]
use crate::tcp::TrackedIo;
use crate::tcp::{ConnTag, Switch};

/// The unary method every request/response pair goes through.
pub(crate) const UNARY_PATH: &str = "/Request/request";
/// The bidirectional stream of server pushes and their acks.
pub(crate) const STREAM_PATH: &str = "/BiRequestStream/requestBiStream";

/// How long a new TCP connection has to complete the HTTP/2 preface and settings.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most concurrent calls (streams) on one connection; an SDK uses one bi-stream and a few
/// unary calls at a time.
const MAX_CONCURRENT_STREAMS: u32 = 256;
/// Largest header block accepted (gRPC metadata of Nacos clients is a few hundred bytes).
const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// What a port serves: the unary method, and optionally the bi-stream.
pub(crate) trait Methods: Send + Sync + 'static {
    /// Largest inbound message in bytes.
    fn max_message(&self) -> usize;

    /// Answers one unary call. Never fails: errors are Nacos error responses.
    fn unary(
        self: Arc<Self>,
        tag: ConnTag,
        request: Payload,
    ) -> impl Future<Output = Payload> + Send;

    /// How long a connection may stay without any call in flight before it is closed with
    /// a GOAWAY; `None`: never.
    fn idle_connection_timeout(&self) -> Option<Duration> {
        None
    }

    /// Most server requests a client may leave unanswered on the bi-stream, or `None`
    /// when this port does not serve the bi-stream (the call is answered `UNIMPLEMENTED`).
    fn stream_limit(&self) -> Option<usize> {
        None
    }

    /// Takes over a bi-stream whose response headers are sent (only called when
    /// [`Methods::stream_limit`] is `Some`). The stream must be finished by the callee.
    fn open_stream(self: Arc<Self>, tag: ConnTag, inbound: Inbound, out: Arc<Outbound>) {
        // A port without bi-streams answers UNIMPLEMENTED and drops the stream's parts.
        drop((tag, inbound));
        out.finish(&Status::new(
            Code::Unimplemented,
            "no bi-stream on this port",
        ));
    }
}

/// Serves one accepted connection — the [`TrackedIo`] itself, or a TLS stream over it —
/// until the client closes it, the HTTP/2 connection fails, or — once `stop` is set — its
/// calls have finished after a GOAWAY.
pub(crate) async fn serve_connection<M, I>(methods: Arc<M>, tag: ConnTag, io: I, stop: Switch)
where
    M: Methods,
    I: AsyncRead + AsyncWrite + Unpin,
{
    let handshake = server::Builder::new()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .handshake::<_, Bytes>(io);
    let mut conn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            tracing::debug!(conn = %tag.id, error = %e, "HTTP/2 handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(conn = %tag.id, "no HTTP/2 preface in time; closing");
            return;
        }
    };
    let mut stop = stop.watch();
    let mut stopping = false;
    let calls = Arc::new(Calls::default());
    let mut idle = methods.idle_connection_timeout().map(|limit| IdleTimer {
        limit,
        sleep: Box::pin(tokio::time::sleep(limit)),
        armed: false,
    });
    loop {
        // The stop switch is checked with one atomic load per wake-up; its waker is only
        // registered again when this task's waker changes. The idle timer is only polled
        // while no call is in flight.
        let next = poll_fn(|cx| {
            if !stopping && stop.poll_set(cx) {
                stopping = true;
                conn.graceful_shutdown();
            }
            if let Some(idle) = idle.as_mut().filter(|_| !stopping) {
                if idle.expired(&calls, cx) {
                    tracing::debug!(conn = %tag.id, "no call for {:?}; closing", idle.limit);
                    stopping = true;
                    conn.graceful_shutdown();
                }
            }
            conn.poll_accept(cx)
        })
        .await;
        match next {
            Some(Ok((req, respond))) => dispatch(&methods, &tag, &calls, req, respond),
            Some(Err(e)) => {
                tracing::debug!(conn = %tag.id, error = %e, "HTTP/2 connection failed");
                break;
            }
            None => break,
        }
    }
}

/// The calls in flight on one connection, and the connection task to wake when the last
/// one ends (so that it arms its idle timer).
#[derive(Debug, Default)]
struct Calls {
    active: AtomicUsize,
    conn_task: AtomicWaker,
}

/// Counts one call in flight while it lives.
#[derive(Debug)]
pub(crate) struct CallGuard(Arc<Calls>);

impl CallGuard {
    fn new(calls: &Arc<Calls>) -> Self {
        calls.active.fetch_add(1, Ordering::AcqRel);
        CallGuard(calls.clone())
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.conn_task.wake();
        }
    }
}

/// Closes a connection that has had no call in flight for `limit`.
struct IdleTimer {
    limit: Duration,
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// Whether `sleep` runs from the moment the connection last became idle.
    armed: bool,
}

impl IdleTimer {
    /// Whether the connection has been idle for `limit`; makes sure the task of `cx` is
    /// woken when the last call ends or the limit passes.
    fn expired(&mut self, calls: &Calls, cx: &mut std::task::Context<'_>) -> bool {
        calls.conn_task.register(cx.waker());
        if calls.active.load(Ordering::Acquire) > 0 {
            self.armed = false;
            return false;
        }
        if !self.armed {
            self.sleep
                .as_mut()
                .reset(tokio::time::Instant::now() + self.limit);
            self.armed = true;
        }
        self.sleep.as_mut().poll(cx).is_ready()
    }
}

/// Routes one call.
fn dispatch<M: Methods>(
    methods: &Arc<M>,
    tag: &ConnTag,
    calls: &Arc<Calls>,
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    if req.method() != Method::POST {
        plain_http_error(&mut respond, StatusCode::METHOD_NOT_ALLOWED);
        return;
    }
    if !is_grpc(req.headers()) {
        plain_http_error(&mut respond, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        return;
    }
    match req.uri().path() {
        UNARY_PATH => {
            let guard = CallGuard::new(calls);
            tokio::spawn(unary(
                methods.clone(),
                tag.clone(),
                req.into_body(),
                respond,
                guard,
            ));
        }
        STREAM_PATH if methods.stream_limit().is_some() => {
            let guard = CallGuard::new(calls);
            open_stream(methods.clone(), tag, req.into_body(), respond, guard);
        }
        path => trailers_only(
            &mut respond,
            &Status::new(Code::Unimplemented, format!("unknown method {path}")),
        ),
    }
}

fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

/// The response head of every gRPC call.
fn grpc_head() -> Response<()> {
    let mut res = Response::new(());
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    res
}

/// Ends a call that failed before any message with a "trailers-only" response.
fn trailers_only(respond: &mut SendResponse<Bytes>, status: &Status) {
    let mut res = grpc_head();
    status.write_to(res.headers_mut());
    if let Err(e) = respond.send_response(res, true) {
        tracing::debug!(error = %e, "cannot answer a gRPC call");
    }
}

/// Answers a request that is not gRPC at all with a bare HTTP status.
fn plain_http_error(respond: &mut SendResponse<Bytes>, status: StatusCode) {
    let mut res = Response::new(());
    *res.status_mut() = status;
    if let Err(e) = respond.send_response(res, true) {
        tracing::debug!(error = %e, "cannot answer a non-gRPC request");
    }
}

// ------------------------------------------------------------------ unary

async fn unary<M: Methods>(
    methods: Arc<M>,
    tag: ConnTag,
    mut body: RecvStream,
    mut respond: SendResponse<Bytes>,
    _call: CallGuard,
) {
    let request = match read_single(&mut body, methods.max_message()).await {
        Ok(p) => p,
        Err(status) => {
            tracing::debug!(conn = %tag.id, %status, "refusing a unary call");
            trailers_only(&mut respond, &status);
            return;
        }
    };
    drop(body);
    let id = tag.id.clone();
    let reply = methods.unary(tag, request).await;
    let mut send = match respond.send_response(grpc_head(), false) {
        Ok(send) => send,
        Err(e) => {
            tracing::debug!(conn = %id, error = %e, "the client left before the answer");
            return;
        }
    };
    if send.send_data(codec::encode(&reply), false).is_ok() {
        // Fails only when the client reset the stream; there is no one left to answer.
        let _client_gone = send.send_trailers(Status::ok().trailers());
    }
}

/// Gives back `n` bytes of the stream's flow-control window after reading them. It fails
/// only when the stream is already gone (the client reset it), and then the next read
/// reports that; there is nothing to release any more.
fn release(body: &mut RecvStream, n: usize) {
    let _stream_gone = body.flow_control().release_capacity(n);
}

/// Reads the one message of a unary call.
async fn read_single(body: &mut RecvStream, max_message: usize) -> Result<Payload, Status> {
    let mut dec = Decoder::new(max_message);
    let mut msg = None;
    while let Some(chunk) = body.data().await {
        let chunk =
            chunk.map_err(|e| Status::new(Code::Cancelled, format!("request failed: {e}")))?;
        release(body, chunk.len());
        dec.push(chunk);
        while let Some(p) = dec.next()? {
            if msg.replace(p).is_some() {
                return Err(Status::new(
                    Code::Unimplemented,
                    "more than one request message in a unary call",
                ));
            }
        }
    }
    if dec.has_partial() {
        return Err(Status::new(
            Code::Internal,
            "the request ended inside a message",
        ));
    }
    msg.ok_or_else(|| Status::new(Code::Internal, "no request message in a unary call"))
}

// ------------------------------------------------------------------ bi-stream

fn open_stream<M: Methods>(
    methods: Arc<M>,
    tag: &ConnTag,
    body: RecvStream,
    mut respond: SendResponse<Bytes>,
    call: CallGuard,
) {
    let send = match respond.send_response(grpc_head(), false) {
        Ok(send) => send,
        Err(e) => {
            tracing::debug!(conn = %tag.id, error = %e, "cannot open the bi-stream");
            return;
        }
    };
    let limit = methods.stream_limit().unwrap_or(0);
    let inbound = Inbound::new(body, methods.max_message(), call);
    methods.open_stream(tag.clone(), inbound, Arc::new(Outbound::new(send, limit)));
}

/// The client's half of a bi-stream: its messages, in order.
#[derive(Debug)]
pub(crate) struct Inbound {
    body: RecvStream,
    dec: Decoder,
    ended: bool,
    /// Counts the bi-stream as a call in flight for as long as its session reads it.
    _call: CallGuard,
}

impl Inbound {
    fn new(body: RecvStream, max_message: usize, call: CallGuard) -> Self {
        Inbound {
            body,
            dec: Decoder::new(max_message),
            ended: false,
            _call: call,
        }
    }

    /// The next message; `Ok(None)` once the client closed its half. Cancel-safe: a
    /// received frame is consumed before the next await.
    pub async fn message(&mut self) -> Result<Option<Payload>, Status> {
        match self.message_bytes().await? {
            Some(bytes) => codec::decode(bytes).map(Some),
            None => Ok(None),
        }
    }

    /// The next message's protobuf bytes, not yet decoded (see [`crate::wire::PayloadView`]);
    /// `Ok(None)` once the client closed its half. Cancel-safe as [`Inbound::message`].
    pub async fn message_bytes(&mut self) -> Result<Option<Bytes>, Status> {
        loop {
            if let Some(p) = self.dec.next_raw()? {
                return Ok(Some(p));
            }
            if self.ended {
                if self.dec.has_partial() {
                    return Err(Status::new(
                        Code::Internal,
                        "the stream ended inside a message",
                    ));
                }
                return Ok(None);
            }
            match self.body.data().await {
                Some(Ok(chunk)) => {
                    release(&mut self.body, chunk.len());
                    self.dec.push(chunk);
                }
                Some(Err(e)) => {
                    return Err(Status::new(Code::Cancelled, format!("stream failed: {e}")))
                }
                None => self.ended = true,
            }
        }
    }
}

/// What became of a message handed to [`Outbound::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Queued on the HTTP/2 stream.
    Queued,
    /// Not sent: the client has `limit` server requests unanswered (it stopped reading).
    Full,
    /// Not sent: the stream is finished or was reset.
    Closed,
}

/// The server's half of a bi-stream, shared by the session and every task that pushes.
///
/// Sending takes a short lock and queues the frame in `h2`, which wakes the connection task
/// to write it; no task of ours runs per message. Every message we send is a server request
/// that the client answers on the stream, so the unanswered count bounds what can pile up
/// for a client that stops reading: at `limit` the stream refuses more and the connection
/// is dropped as slow.
#[derive(Debug)]
pub(crate) struct Outbound {
    state: Mutex<OutState>,
    limit: usize,
}

#[derive(Debug)]
struct OutState {
    stream: Option<SendStream<Bytes>>,
    unanswered: usize,
}

impl Outbound {
    pub(crate) fn new(stream: SendStream<Bytes>, limit: usize) -> Self {
        Outbound {
            state: Mutex::new(OutState {
                stream: Some(stream),
                unanswered: 0,
            }),
            limit,
        }
    }

    /// Queues one framed message (see [`codec::encode`]).
    pub fn send(&self, frame: Bytes) -> Sent {
        let mut state = self.state.lock();
        if state.stream.is_none() {
            return Sent::Closed;
        }
        if state.unanswered >= self.limit {
            return Sent::Full;
        }
        let sent = state
            .stream
            .as_mut()
            .map(|s| s.send_data(frame, false).is_ok());
        if sent == Some(true) {
            state.unanswered += 1;
            Sent::Queued
        } else {
            state.stream = None;
            Sent::Closed
        }
    }

    /// The client answered one of our requests.
    pub fn answered(&self) {
        let mut state = self.state.lock();
        state.unanswered = state.unanswered.saturating_sub(1);
    }

    /// Ends the stream after what is queued, with `status`. Later sends are refused.
    pub fn finish(&self, status: &Status) {
        let stream = self.state.lock().stream.take();
        if let Some(mut stream) = stream {
            // Fails only when the client reset the stream; then it is already ended.
            let _client_gone = stream.send_trailers(status.trailers());
        }
    }
}
