//! gRPC over HTTP/2 at the edges, driven with a raw `h2` client over a real TCP socket: what
//! the server answers to calls that are not well-formed gRPC (unknown method, wrong method
//! or content type, compressed, missing, extra or oversized messages), to messages split
//! over many DATA frames or packed into one, and to a client that does not speak HTTP/2 —
//! and that the connection (or the server) keeps serving afterwards.

mod common;

use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use common::{decode, payload, Msg, TestServer};
use h2::client::{ResponseFuture, SendRequest};
use h2::SendStream;
use http::{HeaderMap, Method, Request, StatusCode};
use nacelle_grpc::GrpcOptions;
use nacelle_proto::Payload;
use prost::Message;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Bound for anything that should happen at once (only to avoid hanging on a bug).
const WAIT: Duration = Duration::from_secs(5);

const UNARY: &str = "/Request/request";
const STREAM: &str = "/BiRequestStream/requestBiStream";

/// The inbound message limit of the test servers.
const MAX_MESSAGE: usize = 1024;

fn opts() -> GrpcOptions {
    GrpcOptions {
        max_inbound_message_bytes: MAX_MESSAGE,
        shutdown_grace: Duration::from_secs(1),
        ..GrpcOptions::default()
    }
}

// ------------------------------------------------------------------ framing

/// One gRPC message: flag byte, big-endian length, protobuf bytes.
fn frame(p: &Payload) -> Bytes {
    frame_raw(0, &p.encode_to_vec())
}

fn frame_raw(flag: u8, msg: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(5 + msg.len());
    buf.put_u8(flag);
    buf.put_u32(u32::try_from(msg.len()).unwrap_or(u32::MAX));
    buf.extend_from_slice(msg);
    buf.freeze()
}

/// A request message with a JSON body.
fn request(type_name: &str, body: &Value) -> anyhow::Result<Payload> {
    Ok(payload(type_name, "", serde_json::to_vec(body)?))
}

fn server_check() -> anyhow::Result<Payload> {
    request(
        "ServerCheckRequest",
        &json!({"requestId": "1", "headers": {}}),
    )
}

fn setup_request() -> anyhow::Result<Payload> {
    request(
        "ConnectionSetupRequest",
        &json!({"clientVersion": "test", "tenant": "", "labels": {}, "requestId": null, "headers": {}}),
    )
}

/// Splits gRPC-framed bytes into messages.
fn unframe(mut buf: &[u8]) -> anyhow::Result<Vec<Payload>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        ensure!(buf.len() >= 5, "truncated message prefix: {buf:?}");
        ensure!(buf[0] == 0, "the server sent a compressed message");
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        ensure!(buf.len() >= 5 + len, "truncated message");
        out.push(Payload::decode(&buf[5..5 + len])?);
        buf = &buf[5 + len..];
    }
    Ok(out)
}

// ------------------------------------------------------------------ the h2 client

/// One HTTP/2 connection to the server; every call on it shares the server's connection id.
struct H2Conn {
    port: u16,
    send: SendRequest<Bytes>,
    task: JoinHandle<()>,
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What came back for one call.
#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    /// The response HEADERS frame ended the stream (a "trailers-only" response).
    trailers_only: bool,
    messages: Vec<Payload>,
    /// The trailers, or the headers of a trailers-only response.
    trailers: HeaderMap,
}

impl Reply {
    fn content_type(&self) -> Option<&str> {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    fn grpc_status(&self) -> Option<&str> {
        self.trailers
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
    }

    /// `grpc-message`, percent-decoded.
    fn grpc_message(&self) -> String {
        self.trailers
            .get("grpc-message")
            .and_then(|v| v.to_str().ok())
            .map(|m| {
                percent_encoding::percent_decode_str(m)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .unwrap_or_default()
    }

    /// The single reply message of a successful unary call.
    fn single(&self) -> anyhow::Result<Msg> {
        ensure!(
            self.status == StatusCode::OK,
            "HTTP status {}: {self:?}",
            self.status
        );
        ensure!(self.grpc_status() == Some("0"), "not OK: {self:?}");
        ensure!(self.messages.len() == 1, "not one message: {self:?}");
        decode(&self.messages[0])
    }
}

impl H2Conn {
    async fn connect(port: u16) -> anyhow::Result<Self> {
        let tcp = tokio::time::timeout(WAIT, TcpStream::connect(("127.0.0.1", port)))
            .await
            .context("connect timed out")??;
        let (send, conn) = tokio::time::timeout(WAIT, h2::client::handshake(tcp))
            .await
            .context("HTTP/2 handshake timed out")??;
        let task = tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("client HTTP/2 connection ended: {e}");
            }
        });
        Ok(H2Conn { port, send, task })
    }

    /// Starts a call; `end` ends the request stream with its headers.
    async fn start(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        end: bool,
    ) -> anyhow::Result<(ResponseFuture, SendStream<Bytes>)> {
        let req = Request::builder()
            .method(method)
            .uri(format!("http://127.0.0.1:{}{path}", self.port))
            .header(http::header::CONTENT_TYPE, content_type)
            .header(http::header::TE, "trailers")
            .body(())?;
        let mut send = tokio::time::timeout(WAIT, self.send.clone().ready())
            .await
            .context("connection not ready in time")??;
        Ok(send.send_request(req, end)?)
    }

    /// A gRPC call on `path` whose request body is `frames`, one DATA frame each, the last
    /// one ending the stream (no frame at all: the headers end it).
    async fn call_frames(&self, path: &str, frames: &[Bytes]) -> anyhow::Result<Reply> {
        let (resp, mut body) = self
            .start(Method::POST, path, "application/grpc", frames.is_empty())
            .await?;
        for (i, f) in frames.iter().enumerate() {
            body.send_data(f.clone(), i + 1 == frames.len())?;
            // Let some of them leave in TCP segments of their own.
            if i % 8 == 7 {
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        read_reply(resp).await
    }

    /// A unary call carrying `p` in one DATA frame.
    async fn unary(&self, p: &Payload) -> anyhow::Result<Msg> {
        self.call_frames(UNARY, &[frame(p)]).await?.single()
    }

    /// Polls `HealthCheckRequest` until the connection is registered (resultCode 200).
    async fn wait_registered(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let r = self
                .unary(&request(
                    "HealthCheckRequest",
                    &json!({"requestId": "h", "headers": {}}),
                )?)
                .await?;
            if r.int("resultCode") == Some(200) {
                assert_eq!(r.type_name, "HealthCheckResponse");
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the connection was never registered: {r:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Opens the bi-stream, sends `ConnectionSetupRequest` and waits until the connection
    /// is registered; returns the response (headers received) and the request half.
    async fn open_registered_stream(
        &self,
    ) -> anyhow::Result<(http::Response<h2::RecvStream>, SendStream<Bytes>)> {
        let (resp, mut out) = self
            .start(Method::POST, STREAM, "application/grpc", false)
            .await?;
        out.send_data(frame(&setup_request()?), false)?;
        let resp = tokio::time::timeout(WAIT, resp)
            .await
            .context("no bi-stream headers")??;
        ensure!(resp.status() == StatusCode::OK, "bi-stream: {resp:?}");
        self.wait_registered().await?;
        Ok((resp, out))
    }

    /// Waits until the server has closed the connection (the client's connection task
    /// ended).
    async fn wait_closed(&self, what: &str) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !self.task.is_finished() {
            ensure!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Checks that the connection still answers a normal unary call.
    async fn assert_serves(&self) -> anyhow::Result<()> {
        let r = self.unary(&server_check()?).await?;
        assert_eq!(r.type_name, "ServerCheckResponse");
        assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
        Ok(())
    }
}

/// Reads a whole response: headers, messages, trailers.
async fn read_reply(resp: ResponseFuture) -> anyhow::Result<Reply> {
    let resp = tokio::time::timeout(WAIT, resp)
        .await
        .context("no response headers in time")??;
    let (parts, body) = resp.into_parts();
    let trailers_only = body.is_end_stream();
    if trailers_only {
        return Ok(Reply {
            status: parts.status,
            trailers: parts.headers.clone(),
            headers: parts.headers,
            trailers_only,
            messages: Vec::new(),
        });
    }
    let (data, trailers) = tokio::time::timeout(WAIT, read_body(body))
        .await
        .context("the response did not end in time")??;
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        trailers_only,
        messages: unframe(&data)?,
        trailers,
    })
}

async fn read_body(mut body: h2::RecvStream) -> anyhow::Result<(BytesMut, HeaderMap)> {
    let mut data = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        // Fails only when the stream is gone; the next read reports that.
        let _stream_gone = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await?.unwrap_or_default();
    Ok((data, trailers))
}

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn unknown_method_gets_a_trailers_only_unimplemented() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    let r = c
        .call_frames("/Foo/bar", &[frame(&server_check()?)])
        .await?;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.content_type(), Some("application/grpc"));
    assert!(r.trailers_only, "not a trailers-only response: {r:?}");
    assert_eq!(r.grpc_status(), Some("12"), "{r:?}");
    assert!(r.grpc_message().contains("/Foo/bar"), "{r:?}");

    // Same with no body at all.
    let r = c.call_frames("/Request/nope", &[]).await?;
    assert!(r.trailers_only, "{r:?}");
    assert_eq!(r.grpc_status(), Some("12"), "{r:?}");

    c.assert_serves().await
}

#[tokio::test]
async fn non_grpc_requests_get_plain_http_errors() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    // Wrong content type.
    let (resp, mut body) = c
        .start(Method::POST, UNARY, "application/json", false)
        .await?;
    body.send_data(Bytes::from_static(b"{\"requestId\":\"1\"}"), true)?;
    let r = read_reply(resp).await?;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{r:?}");
    assert!(r.trailers_only, "{r:?}");
    assert_eq!(r.grpc_status(), None, "{r:?}");

    // No content type at all.
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("http://127.0.0.1:{}{UNARY}", server.port))
        .body(())?;
    let mut send = c.send.clone().ready().await?;
    let (resp, _) = send.send_request(req, true)?;
    let r = read_reply(resp).await?;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{r:?}");

    // Wrong HTTP method (even with the gRPC content type).
    let (resp, _) = c
        .start(Method::GET, UNARY, "application/grpc", true)
        .await?;
    let r = read_reply(resp).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{r:?}");
    assert_eq!(r.grpc_status(), None, "{r:?}");
    let (resp, _) = c
        .start(Method::GET, STREAM, "application/json", true)
        .await?;
    let r = read_reply(resp).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{r:?}");

    // A content type with a suffix is still gRPC.
    let (resp, mut body) = c
        .start(Method::POST, UNARY, "application/grpc+proto", false)
        .await?;
    body.send_data(frame(&server_check()?), true)?;
    let r = read_reply(resp).await?.single()?;
    assert_eq!(r.type_name, "ServerCheckResponse");

    c.assert_serves().await
}

#[tokio::test]
async fn compressed_message_is_unimplemented() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    let msg = server_check()?.encode_to_vec();
    let r = c.call_frames(UNARY, &[frame_raw(1, &msg)]).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.content_type(), Some("application/grpc"));
    assert!(r.trailers_only, "{r:?}");
    assert_eq!(r.grpc_status(), Some("12"), "{r:?}");
    assert!(
        r.grpc_message().to_lowercase().contains("compress"),
        "grpc-message: {:?}",
        r.grpc_message()
    );

    c.assert_serves().await
}

#[tokio::test]
async fn unary_calls_need_exactly_one_message() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    // None: the request headers end the stream.
    let r = c.call_frames(UNARY, &[]).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.trailers_only, "{r:?}");
    assert_eq!(r.grpc_status(), Some("13"), "{r:?}");

    // None: an empty DATA frame ends the stream.
    let r = c.call_frames(UNARY, &[Bytes::new()]).await?;
    assert_eq!(r.grpc_status(), Some("13"), "{r:?}");

    // The stream ends inside a message.
    let whole = frame(&server_check()?);
    let r = c
        .call_frames(UNARY, &[whole.slice(..whole.len() - 1)])
        .await?;
    assert_eq!(r.grpc_status(), Some("13"), "{r:?}");

    // Two messages, in one DATA frame and in two.
    let mut two = BytesMut::new();
    two.extend_from_slice(&whole);
    two.extend_from_slice(&whole);
    let r = c.call_frames(UNARY, &[two.freeze()]).await?;
    assert!(r.trailers_only, "{r:?}");
    assert_eq!(r.grpc_status(), Some("12"), "{r:?}");
    assert!(r.messages.is_empty(), "{r:?}");
    let r = c
        .call_frames(UNARY, &[whole.clone(), whole.clone()])
        .await?;
    assert_eq!(r.grpc_status(), Some("12"), "{r:?}");

    // Not a Payload at all.
    let r = c
        .call_frames(UNARY, &[frame_raw(0, &[0xff, 0xff, 0xff])])
        .await?;
    assert_eq!(r.grpc_status(), Some("13"), "{r:?}");

    c.assert_serves().await
}

#[tokio::test]
async fn a_message_split_into_tiny_frames_is_reassembled() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    let whole = frame(&server_check()?);
    // 1, 2, 3, 1, 2, 3, … bytes: the prefix itself is split too.
    let mut frames = Vec::new();
    let mut at = 0;
    let mut size = 1;
    while at < whole.len() {
        let end = (at + size).min(whole.len());
        frames.push(whole.slice(at..end));
        at = end;
        size = size % 3 + 1;
    }
    assert!(frames.len() > 20, "only {} frames", frames.len());
    let r = c.call_frames(UNARY, &frames).await?;
    assert!(!r.trailers_only, "{r:?}");
    assert_eq!(r.content_type(), Some("application/grpc"));
    let m = r.single()?;
    assert_eq!(m.type_name, "ServerCheckResponse");
    assert_eq!(m.int("resultCode"), Some(200), "{m:?}");
    assert_eq!(m.str("requestId"), Some("1"));

    // The last frame ending the stream may also be empty, after the message.
    let mut frames = vec![whole.slice(..3), whole.slice(3..)];
    frames.push(Bytes::new());
    let m = c.call_frames(UNARY, &frames).await?.single()?;
    assert_eq!(m.int("resultCode"), Some(200), "{m:?}");
    Ok(())
}

#[tokio::test]
async fn two_messages_in_one_frame_on_the_bi_stream() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    // Not registered yet.
    let r = c
        .unary(&request("HealthCheckRequest", &json!({"requestId": "h0"}))?)
        .await?;
    assert_eq!(r.int("errorCode"), Some(301), "{r:?}");

    let (resp, mut out) = c
        .start(Method::POST, STREAM, "application/grpc", false)
        .await?;
    let ack = request(
        "ClientDetectionResponse",
        &json!({"resultCode": 200, "errorCode": 0, "requestId": "nothing-pending", "success": true}),
    )?;
    let mut both = BytesMut::new();
    both.extend_from_slice(&frame(&setup_request()?));
    both.extend_from_slice(&frame(&ack));
    out.send_data(both.freeze(), false)?;

    let resp = tokio::time::timeout(WAIT, resp)
        .await
        .context("no bi-stream headers")??;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers().get(http::header::CONTENT_TYPE),
        Some(&http::HeaderValue::from_static("application/grpc"))
    );
    c.wait_registered().await?;
    assert_eq!(server.stats.snapshot().connections, 1);

    // The client closes its half: the server ends the stream with OK and unregisters.
    out.send_data(Bytes::new(), true)?;
    let (data, trailers) = tokio::time::timeout(WAIT, read_body(resp.into_body()))
        .await
        .context("the bi-stream did not end")??;
    assert!(unframe(&data)?.is_empty(), "unexpected server messages");
    assert_eq!(
        trailers.get("grpc-status").and_then(|v| v.to_str().ok()),
        Some("0"),
        "{trailers:?}"
    );
    let r = c
        .unary(&request("HealthCheckRequest", &json!({"requestId": "h1"}))?)
        .await?;
    assert_eq!(r.int("errorCode"), Some(301), "still registered: {r:?}");
    c.assert_serves().await
}

#[tokio::test]
async fn oversized_unary_message_is_refused_from_its_prefix() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    // The prefix announces 1 MiB, only a few bytes follow, and the request stays open: the
    // answer must come without the rest of the body.
    let (resp, mut body) = c
        .start(Method::POST, UNARY, "application/grpc", false)
        .await?;
    let mut head = BytesMut::new();
    head.put_u8(0);
    head.put_u32(1 << 20);
    head.extend_from_slice(&[0u8; 64]);
    body.send_data(head.freeze(), false)?;
    let r = read_reply(resp).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.trailers_only, "{r:?}");
    assert_eq!(r.grpc_status(), Some("8"), "{r:?}");
    assert!(
        r.grpc_message()
            .starts_with("gRPC message exceeds maximum size"),
        "grpc-message: {:?}",
        r.grpc_message()
    );
    drop(body);

    // One byte over the limit is refused too; exactly the limit is not.
    let r = c
        .call_frames(UNARY, &[frame_raw(0, &[0u8; MAX_MESSAGE + 1])])
        .await?;
    assert_eq!(r.grpc_status(), Some("8"), "{r:?}");
    let mut at_limit = server_check()?;
    for n in 0..MAX_MESSAGE {
        if let Some(m) = at_limit.metadata.as_mut() {
            m.headers.insert("pad".into(), "x".repeat(n));
        }
        if at_limit.encoded_len() >= MAX_MESSAGE {
            break;
        }
    }
    assert_eq!(at_limit.encoded_len(), MAX_MESSAGE);
    let m = c.unary(&at_limit).await?;
    assert_eq!(m.int("resultCode"), Some(200), "{m:?}");

    // The connection keeps serving.
    c.assert_serves().await
}

#[tokio::test]
async fn oversized_message_ends_the_bi_stream() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let c = H2Conn::connect(server.port).await?;

    let (resp, mut out) = c.open_registered_stream().await?;

    // Announce 64 KiB, send a little of it, keep the stream open.
    let mut head = BytesMut::new();
    head.put_u8(0);
    head.put_u32(64 * 1024);
    head.extend_from_slice(&[0u8; 16]);
    out.send_data(head.freeze(), false)?;
    let (data, trailers) = tokio::time::timeout(WAIT, read_body(resp.into_body()))
        .await
        .context("the bi-stream did not end")??;
    assert!(unframe(&data)?.is_empty(), "unexpected server messages");
    assert_eq!(
        trailers.get("grpc-status").and_then(|v| v.to_str().ok()),
        Some("8"),
        "{trailers:?}"
    );
    let message = trailers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(|m| {
            percent_encoding::percent_decode_str(m)
                .decode_utf8_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    assert!(
        message.starts_with("gRPC message exceeds maximum size"),
        "grpc-message: {message:?}"
    );
    drop(out);

    // The connection was unregistered with its stream, and the HTTP/2 connection serves on.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let r = c
            .unary(&request("HealthCheckRequest", &json!({"requestId": "h"}))?)
            .await?;
        if r.int("errorCode") == Some(301) {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(anyhow!("still registered: {r:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.assert_serves().await?;

    // Oversized before the setup as well.
    let (resp, mut out) = c
        .start(Method::POST, STREAM, "application/grpc", false)
        .await?;
    out.send_data(frame_raw(0, &[0u8; MAX_MESSAGE + 1]), false)?;
    let r = read_reply(resp).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.grpc_status(), Some("8"), "{r:?}");
    c.assert_serves().await
}

#[tokio::test]
async fn a_client_without_the_http2_preface_is_disconnected() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;

    let garbage: [&[u8]; 2] = [
        b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n",
        &[0xde; 64],
    ];
    for bytes in garbage {
        let mut tcp = TcpStream::connect(("127.0.0.1", server.port)).await?;
        tcp.write_all(bytes).await?;
        // The server may write its SETTINGS first; read until the connection is closed.
        let closed = tokio::time::timeout(WAIT, async {
            let mut buf = [0u8; 1024];
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(
            closed.is_ok(),
            "connection not closed after garbage {bytes:?}"
        );
    }

    // A proper client is still served.
    let c = H2Conn::connect(server.port).await?;
    c.assert_serves().await?;
    Ok(())
}

/// How long a connection may stay without a call in the idle tests.
const IDLE: Duration = Duration::from_millis(300);

fn idle_opts() -> GrpcOptions {
    GrpcOptions {
        idle_connection_timeout: IDLE,
        ..opts()
    }
}

#[tokio::test]
async fn a_connection_left_without_calls_is_closed() -> anyhow::Result<()> {
    let server = TestServer::start(idle_opts()).await?;
    let c = H2Conn::connect(server.port).await?;
    c.assert_serves().await?;
    // After its last call the connection idles out: the server sends a GOAWAY and closes
    // it, which ends the client's connection task.
    c.wait_closed("an idle connection was kept open").await?;
    // The server still takes new connections.
    H2Conn::connect(server.port).await?.assert_serves().await
}

#[tokio::test]
async fn a_connection_with_an_open_bi_stream_is_not_idle() -> anyhow::Result<()> {
    let server = TestServer::start(idle_opts()).await?;
    let c = H2Conn::connect(server.port).await?;
    let (_resp, mut out) = c.open_registered_stream().await?;
    // Several idle limits without any call but the open stream: still connected. The
    // limits are those of connections opened after its last call, one after the other,
    // each closed once it went without a call for the limit.
    for _ in 0..3 {
        let idle = H2Conn::connect(server.port).await?;
        idle.assert_serves().await?;
        idle.wait_closed("a connection without calls was kept open")
            .await?;
    }
    ensure!(!c.task.is_finished(), "the connection was closed");
    assert_eq!(server.stats.snapshot().connections, 1);
    c.assert_serves().await?;

    // Once the stream ends the connection idles out.
    out.send_data(Bytes::new(), true)?;
    c.wait_closed("the connection was kept open after its stream ended")
        .await
}
