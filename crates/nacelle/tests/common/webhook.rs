//! A webhook receiver for the tests: a real HTTP server on a local port that records what
//! it is POSTed, and checks each event's signature (HMAC-SHA256, computed here).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use hmac::{Hmac, Mac};
use nacelle_testkit::{TestResult, SOON};
use serde_json::Value;
use sha2::Sha256;
use tokio::sync::mpsc;

/// The secret the tests' hooks are created with (what [`Receiver::signed`] checks).
pub const SECRET: &str = "a-test-secret-of-the-receiver";

/// What a receiver got: the request's headers and body.
#[derive(Debug)]
pub struct Got {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub fn json(&self) -> TestResult<Value> {
        Ok(serde_json::from_slice(&self.body)?)
    }

    /// The body, once its signature under [`SECRET`] and its headers are checked.
    pub fn signed(&self) -> TestResult<Value> {
        assert_eq!(self.header("x-nacelle-signature"), sign(SECRET, &self.body));
        assert_eq!(self.header("content-type"), "application/json");
        let body = self.json()?;
        assert_eq!(self.header("x-nacelle-event"), body["kind"], "{body}");
        assert!(!self.header("x-nacelle-delivery").is_empty());
        Ok(body)
    }
}

/// A webhook receiver: a real HTTP server answering every POST to `/hook` with `status`.
pub struct Receiver {
    pub addr: SocketAddr,
    pub got: mpsc::UnboundedReceiver<Got>,
    /// The status it answers (200: it records the request).
    pub status: Arc<AtomicU16>,
    /// Events received by [`Receiver::event_matching`] that matched nothing yet.
    kept: Vec<Value>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct ReceiverState {
    tx: mpsc::UnboundedSender<Got>,
    status: Arc<AtomicU16>,
}

async fn receive(State(st): State<ReceiverState>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let status = st.status.load(Ordering::SeqCst);
    if status == 200 {
        // The test may be over; nobody to tell then.
        let _gone = st.tx.send(Got { headers, body });
    }
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl Receiver {
    /// A receiver on `addr` (port 0: any).
    pub async fn bind(addr: SocketAddr) -> TestResult<Receiver> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, got) = mpsc::unbounded_channel();
        let status = Arc::new(AtomicU16::new(200));
        let state = ReceiverState {
            tx,
            status: status.clone(),
        };
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(state);
        let task = tokio::spawn(async move {
            let _ended = axum::serve(listener, app).await;
        });
        Ok(Receiver {
            addr,
            got,
            status,
            kept: Vec::new(),
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// The next request received (a hang detector, not a timing assertion).
    pub async fn next(&mut self) -> TestResult<Got> {
        let got = tokio::time::timeout(SOON, self.got.recv())
            .await
            .map_err(|_| "no webhook request received")?;
        Ok(got.ok_or("the receiver stopped")?)
    }

    /// The next `n` requests, each checked for its signature.
    pub async fn signed(&mut self, n: usize) -> TestResult<Vec<Value>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.next().await?.signed()?);
        }
        Ok(out)
    }

    /// The first event (signature checked) that `wanted` holds of, among those received
    /// and not matched before and those arriving within [`SOON`]; an error naming `what`
    /// and every unmatched event otherwise. Deliveries arrive in any order: the events
    /// that do not match are kept for the next call.
    pub async fn event_matching(
        &mut self,
        what: &str,
        wanted: impl Fn(&Value) -> bool,
    ) -> TestResult<Value> {
        let deadline = tokio::time::Instant::now() + SOON;
        loop {
            if let Some(at) = self.kept.iter().position(&wanted) {
                return Ok(self.kept.remove(at));
            }
            match tokio::time::timeout_at(deadline, self.got.recv()).await {
                Ok(Some(got)) => self.kept.push(got.signed()?),
                Ok(None) => return Err("the receiver stopped".into()),
                Err(_) => {
                    return Err(format!(
                        "no webhook event {what} within {SOON:?}; received unmatched: {:?}",
                        self.kept
                    )
                    .into())
                }
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`, computed here.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}
