//! The metadata of a request reaches the handlers: headers a client puts in
//! `metadata.headers` (where Nacos clients send `accessToken`, `app`, …) are seen by the
//! handler layer — its request log names them (never their values, which may be
//! credentials), and the query handler reads the `notify` header.
//!
//! This binary installs a global log subscriber that writes into a buffer, so it holds this
//! one test only.

mod common;

use std::io;
use std::sync::{Arc, Mutex};

use common::{RawExt, TestServer};
use nacelle_grpc::GrpcOptions;
use serde_json::json;

/// A log sink shared by every thread of the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[tokio::test]
async fn headers_of_a_request_reach_the_handlers() -> anyhow::Result<()> {
    let log = Captured::default();
    let sink = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("nacelle_grpc::handlers=trace")
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber)?;

    let server = TestServer::start(GrpcOptions::default()).await?;
    let mut c = server.raw().await?;
    c.setup("").await?;
    let r = c
        .call_with_headers(
            "ConfigQueryRequest",
            &[
                ("accessToken", "secret-token-value"),
                ("x-meta-probe", "1"),
                ("notify", "true"),
            ],
            json!({"dataId": "meta.yaml", "group": "G", "tenant": "", "requestId": "m1"}),
        )
        .await?;
    assert_eq!(r.type_name, "ConfigQueryResponse");
    assert_eq!(r.str("requestId"), Some("m1"));

    let text = log.text();
    let request_line = text
        .lines()
        .find(|l| l.contains("gRPC request") && l.contains("ConfigQueryRequest"))
        .ok_or_else(|| anyhow::anyhow!("no request log line in:\n{text}"))?;
    for name in ["accessToken", "x-meta-probe", "notify"] {
        assert!(
            request_line.contains(name),
            "{name} missing: {request_line}"
        );
    }
    let query_line = text
        .lines()
        .find(|l| l.contains("config query") && l.contains("meta.yaml"))
        .ok_or_else(|| anyhow::anyhow!("no query log line in:\n{text}"))?;
    assert!(query_line.contains("notify=\"true\""), "{query_line}");
    assert!(
        !text.contains("secret-token-value"),
        "a header value was logged:\n{text}"
    );
    Ok(())
}
