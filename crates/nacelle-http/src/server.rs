//! The HTTP accept loop: hyper HTTP/1.1 with keep-alive, each request tagged with its peer
//! address, an idle timeout, optional TLS (the handshake runs on the connection's task), a
//! per-IP connection limit, and graceful shutdown (stop accepting, let in-flight requests
//! finish).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use nacelle_core::TrustedProxies;
use nacelle_tls::TlsAcceptor;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::budget::{Budgeted, Lane, Refusal};
use crate::{observe, HttpApi};

/// Smallest buffer hyper accepts.
const MIN_BUF: usize = 8 * 1024;

/// Default of [`ServeOptions::idle_timeout`] (Tomcat's keep-alive timeout under Nacos).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default of [`ServeOptions::max_connections_per_ip`]: as many as the gRPC port allows one
/// address (`GrpcOptions::max_connections_per_ip`). An HTTP 1.x client holds one
/// connection per long poll in flight plus its writes, so a host stays far below it; a NAT
/// gateway or a proxy in front of many clients needs it raised (or the proxy's own limit).
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 10_000;

/// Default of [`ServeOptions::max_head_bytes`]: 1 MiB.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 1024 * 1024;

/// Connection limits of the HTTP server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Bounds the request head as well as the body.
    pub max_request_bytes: usize,
    /// Largest request head (request line and headers) when smaller than
    /// `max_request_bytes`: long query strings (the Python 1.x client sends whole configs
    /// in the URL) up to it; a longer head is 414 or 431. It is also the most a
    /// connection reads ahead at once, so it bounds what each connection holds while a
    /// body streams in. Default [`DEFAULT_MAX_HEAD_BYTES`].
    pub max_head_bytes: usize,
    /// A connection waiting this long for (the rest of) a request head is closed: an idle
    /// keep-alive connection, a client that vanished, or one sending its head too slowly.
    /// A held long poll is not affected (its request was read).
    pub idle_timeout: Duration,
    /// Most open connections from one peer address (the socket's, never a forwarded
    /// header: the count is taken before any request is read). A plain connection over it
    /// is answered `503` with `Connection: close` to its first request; a TLS one is
    /// closed before the handshake.
    pub max_connections_per_ip: usize,
    /// Serve TLS on this listener (the handshake is done on the connection's task, within
    /// `nacelle_tls::HANDSHAKE_TIMEOUT`); `None`: plain HTTP.
    pub tls: Option<TlsAcceptor>,
    /// The open connections per peer address. Listeners given the same counter (a plain
    /// and a TLS port during a migration) share the limit.
    pub connections: ConnectionCounter,
    /// Peers not held to `max_connections_per_ip`: a trusted proxy carries the connections
    /// of many clients (whose held polls and writes are still limited by their forwarded
    /// address, in the service).
    pub trusted_proxies: TrustedProxies,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_request_bytes: crate::HttpOptions::default().max_request_bytes,
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            tls: None,
            connections: ConnectionCounter::default(),
            trusted_proxies: TrustedProxies::none(),
        }
    }
}

/// Open connections per peer address, shared by the listeners it is given to.
#[derive(Debug, Clone, Default)]
pub struct ConnectionCounter(Arc<CounterState>);

/// The state behind one [`ConnectionCounter`] (one reference count per slot taken).
#[derive(Debug, Default)]
struct CounterState {
    /// One short lock per accepted and per closed connection. Keyed by
    /// client addresses, so hashed with a per-process key (`ahash`), cheaper than SipHash.
    open: Mutex<HashMap<IpAddr, usize, ahash::RandomState>>,
    /// The second (Unix time) a refusal was last logged: at most one log line a second.
    logged_at: std::sync::atomic::AtomicU64,
}

impl ConnectionCounter {
    /// Counts a connection from `ip` if fewer than `max` are open; the
    /// slot is given back when it is dropped.
    pub(crate) fn take(&self, ip: IpAddr, max: usize) -> Option<ConnectionSlot> {
        let mut open = self.0.open.lock();
        let n = open.entry(ip).or_default();
        if *n >= max {
            if *n == 0 {
                open.remove(&ip);
            }
            return None;
        }
        *n += 1;
        Some(ConnectionSlot {
            counter: self.clone(),
            ip,
        })
    }

    /// Whether a refusal now should be logged (the first of each second).
    fn should_log(&self) -> bool {
        use std::sync::atomic::Ordering;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.0.logged_at.swap(now, Ordering::Relaxed) != now
    }

    /// Open connections from `ip`.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.0.open.lock().get(&ip).copied().unwrap_or(0)
    }
}

/// One counted connection; dropping it gives the slot back.
pub(crate) struct ConnectionSlot {
    counter: ConnectionCounter,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.counter.0.open.lock();
        if let Some(n) = open.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// [`serve_with`] with the default idle timeout.
pub async fn serve(
    listener: TcpListener,
    api: HttpApi,
    max_request_bytes: usize,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let opts = ServeOptions {
        max_request_bytes,
        ..ServeOptions::default()
    };
    serve_with(listener, api, opts, shutdown).await
}

/// Serves `api` on `listener` until `shutdown` completes, then waits for in-flight
/// requests (held long polls are released by the service's shutdown token) and returns.
pub async fn serve_with(
    listener: TcpListener,
    api: HttpApi,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and similar: back off instead of spinning.
                        tracing::warn!(error = %e, "http accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "set_nodelay failed");
                }
                let slot = if opts.trusted_proxies.trusts(peer.ip()) {
                    Some(None)
                } else {
                    opts.connections
                        .take(peer.ip(), opts.max_connections_per_ip)
                        .map(Some)
                };
                let log_refusal = slot.is_none() && opts.connections.should_log();
                let watcher = graceful.watcher();
                let api = api.clone();
                let tls = opts.tls.clone();
                let opts = (
                    opts.max_request_bytes.min(opts.max_head_bytes),
                    opts.idle_timeout,
                );
                tokio::spawn(async move {
                    let Some(_slot) = slot else {
                        if log_refusal {
                            tracing::warn!(%peer, "too many HTTP connections from one address; refusing (logged at most once a second)");
                        }
                        // A TLS client would need a handshake to read the answer: closed.
                        if tls.is_none() {
                            refuse(stream, opts.1).await;
                        }
                        return;
                    };
                    match tls {
                        None => serve_connection(stream, peer, api, opts, watcher).await,
                        Some(tls) => match tls.accept(stream).await {
                            Ok(stream) => serve_connection(stream, peer, api, opts, watcher).await,
                            Err(e) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        },
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Serves one connection (plain or TLS) until it closes; `opts` are the head limit (the
/// read buffer's) and the idle timeout.
async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    api: HttpApi,
    opts: (usize, Duration),
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = ConnService { api, peer };
    let conn = http1::Builder::new()
        .max_buf_size(opts.0.max(MIN_BUF))
        .keep_alive(true)
        .timer(TokioTimer::new())
        .header_read_timeout(opts.1)
        .serve_connection(TokioIo::new(io), svc);
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(%peer, error = %e, "http connection ended with an error");
    }
}

/// The service of one connection: tags each request with the peer's address, hands a long
/// poll straight to its handler (`crate::v1::listener::direct`, which says why) and every
/// other request to the router.
struct ConnService {
    api: HttpApi,
    peer: SocketAddr,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, mut req: Request<Incoming>) -> Answer {
        req.extensions_mut()
            .insert(ConnectInfo::<SocketAddr>(self.peer));
        // Before anything reads the body: its memory is reserved, or it is refused unread.
        let req = match admit(&self.api.state, req) {
            Ok(req) => req,
            Err(refused) => {
                return Answer::Refused {
                    answer: Some(*refused),
                }
            }
        };
        if req.method() == Method::POST && req.uri().path() == observe::LONG_POLL {
            let st = self.api.state.clone();
            Answer::Direct {
                answer: Box::pin(crate::v1::listener::direct(st, req)),
            }
        } else {
            // The router is always ready (axum documents it), as `oneshot` checks.
            Answer::Routed {
                answer: self.api.router.clone().oneshot(req),
            }
        }
    }
}

/// A request whose body has its memory reserved (`crate::budget`), or the answer refusing
/// it (413: larger than its pool; 503: no room now) in its API's format, the body unread.
fn admit(st: &crate::AppState, req: Request<Incoming>) -> Result<Request<Body>, Box<Response>> {
    use hyper::body::Body as _;
    if req.body().is_end_stream() {
        return Ok(req.map(Body::new));
    }
    let declared = req.body().size_hint().exact();
    let lane = lane_of(st, &req);
    match st.bodies.admit(lane, declared) {
        Ok(reservation) => {
            Ok(req.map(|b| Body::new(Budgeted::new(b, reservation, declared.is_some(), lane))))
        }
        Err(refusal) => {
            let error = match refusal {
                Refusal::TooLarge(m) => crate::error::ApiError::TooLarge(m),
                Refusal::Busy(m) => crate::error::ApiError::Unavailable(m),
            };
            let answer = refusal_for(req.uri().path(), error);
            // The client is still sending: its body is read and thrown away (nothing is
            // kept), so it reads the answer instead of a reset connection.
            tokio::spawn(discard(req.into_body(), st.options.max_request_bytes));
            Err(Box::new(answer))
        }
    }
}

/// How long a refused body is read and thrown away at most.
const DISCARD_FOR: Duration = Duration::from_secs(30);

/// Most refused bodies read and thrown away at once (each connection reading one holds up
/// to its read buffer); past it a refused connection is closed after its answer.
const MAX_DISCARDING: usize = 16;

/// Refused bodies being read and thrown away now.
static DISCARDING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Reads and drops up to `limit` bytes of a refused body (for at most [`DISCARD_FOR`]),
/// then lets the connection go; at once when [`MAX_DISCARDING`] are being read.
async fn discard(mut body: Incoming, limit: usize) {
    use http_body_util::BodyExt;
    use std::sync::atomic::Ordering;
    let taken = DISCARDING.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
        (n < MAX_DISCARDING).then_some(n + 1)
    });
    if taken.is_err() {
        return;
    }
    let _read = tokio::time::timeout(DISCARD_FOR, async {
        let mut read = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, bytes::Bytes::len);
            if read > limit {
                break;
            }
        }
    })
    .await;
    DISCARDING.fetch_sub(1, Ordering::AcqRel);
}

/// Which budget a request's body counts in: with authentication on, only a valid token
/// sent in a header (`Authorization: Bearer`, `accessToken`) or the query string
/// (`accessToken`) makes it trusted (a cheap check from memory); credentials in the body
/// cannot be known before it is read.
fn lane_of(st: &crate::AppState, req: &Request<Incoming>) -> Lane {
    let access = st.service.access();
    if !access.enabled() {
        return Lane::Trusted;
    }
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let bearer = header("authorization").and_then(|v| {
        let (scheme, token) = v.split_once(' ')?;
        scheme.eq_ignore_ascii_case("Bearer").then(|| token.trim())
    });
    let query_token = || {
        let query = req.uri().query()?;
        query.split('&').find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            name.eq_ignore_ascii_case("accessToken")
                .then(|| {
                    percent_encoding::percent_decode_str(value)
                        .decode_utf8()
                        .ok()
                })
                .flatten()
        })
    };
    let valid = bearer
        .or_else(|| header("accesstoken"))
        .is_some_and(|t| access.token_is_valid(t))
        || query_token().is_some_and(|t| access.token_is_valid(t.trim()));
    if valid {
        Lane::Trusted
    } else {
        Lane::Unauthenticated
    }
}

pin_project_lite::pin_project! {
    /// The answer of [`ConnService`]: the router's future, or a direct long poll's.
    #[project = AnswerProj]
    enum Answer {
        Routed { #[pin] answer: tower::util::Oneshot<Router, Request<Body>> },
        Direct { answer: Pin<Box<dyn Future<Output = Response> + Send>> },
        Refused { answer: Option<Response> },
    }
}

impl Future for Answer {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            AnswerProj::Routed { answer } => answer.poll(cx),
            AnswerProj::Direct { answer } => answer.as_mut().poll(cx).map(Ok),
            AnswerProj::Refused { answer } => match answer.take() {
                Some(r) => Poll::Ready(Ok(r)),
                // Polled again after it answered: a caller's bug; never completes twice.
                None => Poll::Pending,
            },
        }
    }
}

/// Answers the first request of a plain connection over the per-IP limit with 503 and
/// closes it.
async fn refuse<I>(io: I, idle_timeout: Duration)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let answer = hyper::service::service_fn(|_req: axum::http::Request<Incoming>| async {
        let mut res = axum::http::Response::new(http_body_util::Full::new(
            bytes::Bytes::from_static(b"too many connections from this address\n"),
        ));
        *res.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
        Ok::<_, Infallible>(res)
    });
    let conn = http1::Builder::new()
        .keep_alive(false)
        .timer(TokioTimer::new())
        .header_read_timeout(idle_timeout)
        .serve_connection(TokioIo::new(io), answer);
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "refused http connection ended with an error");
    }
}

/// `error` as the API at `path` renders its errors: the `{code, message, data}` envelope
/// of the v2, v3 and Nacelle APIs, the console API's JSON, Nacos v1's plain text elsewhere. For answers made
/// before a request reaches its handler (a body refused unread).
fn refusal_for(path: &str, error: crate::error::ApiError) -> Response {
    let json_api = ["/nacos/v2/", "/nacos/v3/", "/nacos/nacelle/"]
        .iter()
        .any(|prefix| path.starts_with(prefix));
    if path.starts_with("/nacos/console/api/") {
        crate::console::ConsoleError::from(error).into_response()
    } else if json_api {
        crate::error::V2Error(error).into_response()
    } else {
        error.into_response()
    }
}
