//! One change hub for both protocols: a publish over HTTP and a publish over gRPC each
//! wake an HTTP 1.x long poll and a gRPC (nacos-sdk) listener of the same key.

mod common;

use std::time::{Duration, Instant};

use common::{recorder, TestServer, SOON};
use nacelle_grpc::GrpcOptions;

/// Starts a held long poll on `(data_id, group)` with the client's md5; resolves to the
/// response body and the instant it arrived.
fn long_poll(
    http: &reqwest::Client,
    base: &str,
    data_id: &str,
    group: &str,
    md5: &str,
) -> tokio::task::JoinHandle<anyhow::Result<(Instant, String)>> {
    let req = http
        .post(format!("{base}/nacos/v1/cs/configs/listener"))
        .header("Long-Pulling-Timeout", "30000")
        .form(&[(
            "Listening-Configs",
            format!("{data_id}\u{2}{group}\u{2}{md5}\u{1}"),
        )]);
    tokio::spawn(async move {
        let resp = req.send().await?;
        anyhow::ensure!(resp.status().is_success(), "long poll: {}", resp.status());
        let body = resp.text().await?;
        Ok((Instant::now(), body))
    })
}

#[tokio::test]
async fn http_and_grpc_publishes_reach_both_long_polls_and_grpc_listeners() -> anyhow::Result<()> {
    let server = TestServer::start(GrpcOptions::default()).await?;
    let (base, _stop_http) = server
        .start_http(nacelle_http::HttpOptions::default())
        .await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let (d, g) = ("cross".to_string(), "DEFAULT_GROUP".to_string());
    server.publish("", &g, &d, "v0").await?;

    let sdk = server.sdk("").await?;
    let (rec, mut notes) = recorder();
    sdk.client
        .add_listener(d.clone(), g.clone(), rec)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    server.wait_listens(1).await?;
    let expected_body = format!("{d}%02{g}%01\n");

    // 1. Publish over HTTP.
    let poll = long_poll(&http, &base, &d, &g, &nacelle_core::md5_hex(b"v0"));
    wait_held(&server, &d, &g, 2).await?;
    let t0 = Instant::now();
    let resp = http
        .post(format!("{base}/nacos/v1/cs/configs"))
        .form(&[
            ("dataId", d.as_str()),
            ("group", g.as_str()),
            ("content", "v1"),
        ])
        .send()
        .await?;
    anyhow::ensure!(resp.text().await? == "true", "HTTP publish failed");
    let (polled_at, body) = tokio::time::timeout(SOON, poll).await???;
    assert_eq!(body, expected_body);
    let pushed_at = notes.wait_for("v1", SOON).await?;
    println!(
        "HTTP publish → long poll answered in {:?}, gRPC listener called in {:?}",
        polled_at - t0,
        pushed_at - t0
    );

    // 2. Publish over gRPC.
    let poll = long_poll(&http, &base, &d, &g, &nacelle_core::md5_hex(b"v1"));
    wait_held(&server, &d, &g, 2).await?;
    let t0 = Instant::now();
    let publisher = server.sdk("").await?;
    let t_pub = Instant::now();
    publisher
        .client
        .publish_config(d.clone(), g.clone(), "v2".into(), None)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (polled_at, body) = tokio::time::timeout(SOON, poll).await???;
    assert_eq!(body, expected_body);
    let pushed_at = notes.wait_for("v2", SOON).await?;
    println!(
        "gRPC publish → long poll answered in {:?}, gRPC listener called in {:?} (client built in {:?})",
        polled_at - t_pub,
        pushed_at - t_pub,
        t_pub - t0
    );
    Ok(())
}

/// Waits until `n` subscribers (the gRPC listener and the held poll) are on the key.
async fn wait_held(
    server: &TestServer,
    data_id: &str,
    group: &str,
    n: usize,
) -> anyhow::Result<()> {
    let key = nacelle_core::ConfigKey::parse(None, group, data_id)?;
    let deadline = Instant::now() + SOON;
    while server
        .service
        .listeners(&nacelle_core::Caller::internal())?
        .of_key(&key)?
        .len()
        < n
    {
        anyhow::ensure!(Instant::now() < deadline, "long poll not held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}
