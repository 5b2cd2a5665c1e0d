//! The metadata of a request reaches the handlers: headers a client puts in
//! `metadata.headers` (where Nacos clients send `accessToken`, `app`, …) are seen by the
//! handler layer — its request log names them (never their values, which may be
//! credentials), and the query handler reads the `notify` header.
//!
//! This binary installs a global log subscriber that writes into a buffer, so it holds this
//! one test only.

mod common;

use common::{RawExt, TestServer};
use nacelle_grpc::GrpcOptions;
use serde_json::json;

#[tokio::test]
async fn headers_of_a_request_reach_the_handlers() -> anyhow::Result<()> {
    let log = nacelle_testkit::logs::capture("nacelle_grpc::handlers=trace");

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
