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

/// One raw HTTP/1.1 `POST /nacos/v1/cs/configs` of a form body of `size` bytes (a publish
/// whose content is `a…`), the body written while the answer is read: the answer's
/// status. The server may answer before reading the body and close; what could not be
/// written is then left unwritten.
async fn raw_publish(addr: std::net::SocketAddr, size: usize, query: &str) -> Result<u16> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut rd, mut wr) = stream.into_split();
    let head = format!(
        "POST /nacos/v1/cs/configs{query} HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {size}\r\n\r\n"
    );
    let writer = tokio::spawn(async move {
        wr.write_all(head.as_bytes()).await?;
        let prefix = b"dataId=big.txt&group=MEM&content=";
        wr.write_all(prefix).await?;
        let chunk = vec![b'a'; 64 * 1024];
        let mut left = size - prefix.len();
        while left > 0 {
            let n = left.min(chunk.len());
            wr.write_all(&chunk[..n]).await?;
            left -= n;
        }
        wr.flush().await
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let status = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let n = rd.read(&mut buf).await?;
            if n == 0 {
                anyhow::bail!("closed without an answer");
            }
            answer.extend_from_slice(&buf[..n]);
            if let Some(line) = answer
                .split(|b| *b == b'\n')
                .next()
                .filter(|_| answer.contains(&b'\n'))
            {
                let line = String::from_utf8_lossy(line);
                let code = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse::<u16>().ok())
                    .context("no status")?;
                return Ok(code);
            }
        }
    })
    .await
    .context("no answer within 120 s")??;
    // The writer ends by itself: done, or refused by a closed connection.
    writer.abort();
    Ok(status)
}

/// A process's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmHWM")
}

/// Memory before credentials: 64 concurrent anonymous 30 MiB publishes to a server with
/// authentication on are every one refused (403 once read, or 503 unread: their bodies
/// share the unauthenticated budget), and the server's peak resident memory stays under
/// 200 MiB; an authenticated 10 MB publish (its token in the query) then goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_bodies_cannot_take_the_servers_memory() -> Result<()> {
    const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");
    let dir = tempfile::tempdir()?;
    let password = "memory-test-admin-password";
    let server = nacelle_testkit::server::BinaryServer::spawn(
        NACELLE,
        dir.path(),
        &["--auth", "on", "--admin-password", password],
    )?;
    let addr = server.addr;
    let http = reqwest::Client::new();
    let login = |http: reqwest::Client| async move {
        for _ in 0..200 {
            let r = http
                .post(format!("http://{addr}/nacos/v1/auth/login"))
                .query(&[("username", "nacos"), ("password", password)])
                .send()
                .await?;
            if r.status() == 200 {
                let v: serde_json::Value = r.json().await?;
                return Ok::<String, anyhow::Error>(
                    v["accessToken"].as_str().unwrap_or("").to_string(),
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("no login")
    };
    let token = login(http.clone()).await?;
    let pid = server.child.id();
    let before = peak_rss_kib(pid)?;

    let size = 30 * 1024 * 1024;
    let tasks: Vec<_> = (0..64)
        .map(|_| tokio::spawn(raw_publish(addr, size, "")))
        .collect();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    let mut errors = Vec::new();
    for t in tasks {
        match t.await? {
            Ok(status) => *statuses.entry(status).or_default() += 1,
            Err(e) => errors.push(e.to_string()),
        }
    }
    eprintln!("errors: {errors:?}");
    let peak = peak_rss_kib(pid)?;
    eprintln!("64 anonymous 30 MiB publishes: statuses {statuses:?}; peak RSS {before} KiB before, {peak} KiB after");
    assert!(
        statuses.keys().all(|s| [403, 413, 503].contains(s)),
        "an anonymous publish was not refused: {statuses:?}"
    );
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB, not under 200 MiB");

    // A caller with a token is not held back by anonymous bodies: while one holds the
    // unauthenticated budget (its body half sent), an anonymous 10 MB publish is refused
    // unread (503) and an authenticated one (its token in the query) goes through.
    let mut holder = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "POST /nacos/v1/cs/configs HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {size}\r\n\r\n"
    );
    holder.write_all(head.as_bytes()).await?;
    holder.write_all(&vec![b'a'; 1024 * 1024]).await?;
    let content = "b".repeat(10_000_000);
    let anonymous = || {
        http.post(format!("http://{addr}/nacos/v1/cs/configs"))
            .form(&[
                ("dataId", "big.txt"),
                ("group", "MEM"),
                ("content", content.as_str()),
            ])
            .send()
    };
    let deadline = Instant::now() + WAIT;
    loop {
        let r = anonymous().await?;
        let status = r.status().as_u16();
        let body = r.text().await?;
        if status == 503 {
            assert!(body.contains("server busy"), "{body}");
            break;
        }
        assert_eq!(status, 403, "{body}");
        assert!(
            Instant::now() < deadline,
            "the held body never filled the budget"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = http
        .post(format!("http://{addr}/nacos/v1/cs/configs"))
        .query(&[("accessToken", token.as_str())])
        .form(&[
            ("dataId", "big.txt"),
            ("group", "MEM"),
            ("content", content.as_str()),
        ])
        .send()
        .await?;
    let status = r.status().as_u16();
    assert_eq!((status, r.text().await?), (200, "true".to_string()));
    let back = http
        .get(format!("http://{addr}/nacos/v1/cs/configs"))
        .query(&[
            ("dataId", "big.txt"),
            ("group", "MEM"),
            ("accessToken", token.as_str()),
        ])
        .send()
        .await?
        .text()
        .await?;
    assert_eq!(back.len(), content.len());
    drop(holder);
    Ok(())
}
