//! Limits against abuse (docs/security.md, "Limits"): the write rate per client IP shared
//! by HTTP and gRPC and answered as Nacos's TPS control answers (HTTP 429 with the reason,
//! gRPC `errorCode 503` "Tps Flow restricted:…"), the HTTP connections per IP, and the long
//! polls held per IP.

mod common;

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use common::grpc::Registered;
use nacelle_proto::error_code;
use nacelle_testkit::api::listening_configs;
use nacelle_testkit::md5;
use nacelle_testkit::server::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(10);

/// Writes at most `tries` times over HTTP; the first refusal (status and body), if any.
async fn http_until_refused(s: &TestServer, tries: usize) -> Result<Option<(u16, String)>> {
    for i in 0..tries {
        let r = s.try_publish("", "RATE", &format!("http-{i}"), "v").await?;
        if r.status != 200 {
            return Ok(Some((r.status, r.body)));
        }
    }
    Ok(None)
}

/// The write budget of an address is one, whatever the protocol: once HTTP writes have
/// spent it, gRPC writes from the same address are refused too, each in Nacos's format;
/// reads go on.
#[tokio::test]
async fn writes_over_the_rate_of_an_address_are_refused_on_both_protocols() -> Result<()> {
    let s = TestServer::start_with(|s| {
        s.write_rate_per_ip = 1;
        s.write_burst_per_ip = 5;
    })
    .await?;
    let grpc_addr = s.server.as_ref().context("running")?.grpc_addr;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc_addr}"))?
        .connect()
        .await?;
    let mut grpc = Registered::connect(channel).await?;

    // The burst (5) and what refills meanwhile (1/s) pass; then a refusal.
    let (status, body) = http_until_refused(&s, 50)
        .await?
        .context("never refused over HTTP")?;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body, "over the write rate limit of 1/s for 127.0.0.1\n");

    // The same address over gRPC: refused with Nacos's TPS answer (a token may have come
    // back since, so a few tries).
    let mut refused = None;
    for i in 0..5 {
        let head = grpc.publish(&format!("grpc-{i}"), "RATE", "v").await?;
        if !head.is_ok() {
            refused = Some(head);
            break;
        }
    }
    let head = refused.context("never refused over gRPC")?;
    assert_eq!(head.result_code, error_code::RESULT_FAIL);
    assert_eq!(head.error_code, error_code::OVER_THRESHOLD);
    let message = head.message.unwrap_or_default();
    assert!(
        message.starts_with("Tps Flow restricted:over the write rate limit"),
        "{message}"
    );
    // Reads are not limited.
    for _ in 0..20 {
        assert_eq!(s.get("", "RATE", "http-0").await?.as_deref(), Some("v"));
        assert!(grpc.query("http-0", "RATE").await?.head.is_ok());
    }
    Ok(())
}

/// `write_rate_per_ip = 0` turns the limit off.
#[tokio::test]
async fn a_zero_write_rate_is_no_limit() -> Result<()> {
    let s = TestServer::start_with(|s| {
        s.write_rate_per_ip = 0;
        s.write_burst_per_ip = 1;
    })
    .await?;
    assert_eq!(http_until_refused(&s, 30).await?, None);
    Ok(())
}

/// An HTTP request on a raw connection; the status line of the answer.
async fn status_line(conn: &mut tokio::net::TcpStream) -> Result<String> {
    conn.write_all(b"GET /nacos/v1/console/health/liveness HTTP/1.1\r\nHost: x\r\n\r\n")
        .await?;
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(WAIT, conn.read(&mut buf)).await??;
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    Ok(text.lines().next().unwrap_or_default().to_string())
}

/// Over `http_max_connections_per_ip` open connections from one address, a new one is
/// answered 503 and closed; once one closes, a new connection is served again.
#[tokio::test]
async fn http_connections_per_address_are_bounded() -> Result<()> {
    let s = TestServer::start_with(|s| s.http_max_connections_per_ip = 3).await?;
    let addr = s.addr;
    // The test client's pooled connection may hold one of the slots.
    let mut open = Vec::new();
    let refused = loop {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        let status = status_line(&mut conn).await?;
        if status != "HTTP/1.1 200 OK" {
            break status;
        }
        open.push(conn);
        anyhow::ensure!(open.len() <= 3, "more than 3 connections served");
    };
    assert_eq!(refused, "HTTP/1.1 503 Service Unavailable");
    assert!(open.len() >= 2, "refused after {} connections", open.len());
    open.pop();
    let deadline = Instant::now() + WAIT;
    loop {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        if status_line(&mut conn).await? == "HTTP/1.1 200 OK" {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the closed connection's slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Over `max_held_polls_per_ip` held long polls from one address, the next poll gets 503;
/// a poll that needs no holding (a change is already there) is still answered.
#[tokio::test]
async fn held_long_polls_per_address_are_bounded() -> Result<()> {
    let s = TestServer::start_with(|s| s.max_held_polls_per_ip = 1).await?;
    s.publish("", "G", "held", "v1").await?;
    let lc = listening_configs(&[("held", "G", &md5("v1"), None)]);
    let url = s.url("/nacos/v1/cs/configs/listener");
    let first = {
        let (http, url, lc) = (s.http.clone(), url.clone(), lc.clone());
        tokio::spawn(async move {
            http.post(url)
                .header("Long-Pulling-Timeout", "30000")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?
                .text()
                .await
        })
    };
    let deadline = Instant::now() + WAIT;
    loop {
        let v = s.api.listeners("", "G", "held").await?;
        if v["lisentersGroupkeyStatus"]
            .as_object()
            .is_some_and(|m| !m.is_empty())
        {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the first poll was never held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = s
        .http
        .post(&url)
        .header("Long-Pulling-Timeout", "30000")
        .form(&[("Listening-Configs", lc.as_str())])
        .send()
        .await?;
    assert_eq!(second.status(), 503);
    let body = second.text().await?;
    assert!(
        body.contains("too many long polls held for 127.0.0.1"),
        "{body}"
    );
    // A stale md5 is answered at once, without holding.
    let stale = listening_configs(&[("held", "G", &md5("old"), None)]);
    let answered = s
        .http
        .post(&url)
        .header("Long-Pulling-Timeout", "30000")
        .form(&[("Listening-Configs", stale.as_str())])
        .send()
        .await?;
    assert_eq!(answered.status(), 200);
    // The held poll is released by a change.
    s.publish("", "G", "held", "v2").await?;
    let released = tokio::time::timeout(WAIT, first).await???;
    assert_eq!(released, "held%02G%01\n");
    Ok(())
}
