//! The gRPC port against an independent HTTP/2 stack: nghttp2's `h2load` and `nghttp`
//! (Debian's `nghttp2-client`, installed by `.ci/run`). The server's HTTP/2 is the `h2`
//! crate with Nacelle's buffer patch (vendor/h2/NACELLE-PATCH.md: read, write and HPACK
//! buffers allocated on demand and released while a connection waits); the Rust suites
//! drive it with `h2`/tonic, whose codec carries the same patch, so this suite checks it
//! against a client that shares no code with it.
//!
//! The requests are `ServerCheckRequest`s (the one call Nacos answers before a connection
//! registers), padded to 40 KiB so that each spans several DATA frames and read buffers,
//! and 16 at a time per connection exceed the 64 KiB initial flow-control window.

mod common;

use std::path::Path;

use anyhow::{bail, ensure, Context};
use bytes::{BufMut, BytesMut};
use common::{decode, payload, TestServer};
use nacelle_grpc::GrpcOptions;
use nacelle_proto::Payload;
use prost::Message;
use serde_json::json;
use tokio::process::Command;

const UNARY: &str = "/Request/request";

/// A `ServerCheckRequest` of about `pad` bytes, gRPC-framed.
fn padded_server_check(pad: usize) -> anyhow::Result<Vec<u8>> {
    let body = serde_json::to_vec(&json!({"requestId": "1", "headers": {}}))?;
    let mut p = payload("ServerCheckRequest", "", body);
    if let Some(m) = p.metadata.as_mut() {
        m.headers.insert("pad".into(), "x".repeat(pad));
    }
    let msg = p.encode_to_vec();
    let mut buf = BytesMut::with_capacity(5 + msg.len());
    buf.put_u8(0);
    buf.put_u32(u32::try_from(msg.len())?);
    buf.extend_from_slice(&msg);
    Ok(buf.to_vec())
}

fn write_request(dir: &Path, pad: usize) -> anyhow::Result<std::path::PathBuf> {
    let path = dir.join(format!("server-check-{pad}.bin"));
    std::fs::write(&path, padded_server_check(pad)?)?;
    Ok(path)
}

/// Runs a tool of nghttp2-client; its absence is a failure that says how to install it.
async fn run(tool: &str, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let out = Command::new(tool)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| {
            format!("running `{tool}` (Debian package nghttp2-client; .ci/run installs it)")
        })?;
    ensure!(
        out.status.success(),
        "{tool} {args:?} exited {}: {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out)
}

/// The number before `label` in an h2load summary line such as
/// `requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, …`.
fn count(line: &str, label: &str) -> Option<u64> {
    let mut prev = None;
    for word in line.split([' ', ',']).filter(|w| !w.is_empty()) {
        if word == label {
            return prev;
        }
        // A word that is not a number is no count (the label's own words, `requests:`).
        prev = word.parse().ok();
    }
    None
}

#[tokio::test]
async fn h2load_many_concurrent_large_calls_all_succeed() -> anyhow::Result<()> {
    let server = TestServer::start(GrpcOptions::default()).await?;
    let dir = tempfile::tempdir()?;
    let body = write_request(dir.path(), 40 * 1024)?;
    let url = format!("http://127.0.0.1:{}{UNARY}", server.port);
    let body = body.to_string_lossy().to_string();
    let out = run(
        "h2load",
        &[
            "-n",
            "2000",
            "-c",
            "4",
            "-m",
            "16",
            "-d",
            &body,
            "-H",
            "content-type: application/grpc",
            "-H",
            "te: trailers",
            &url,
        ],
    )
    .await?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let requests = text
        .lines()
        .find(|l| l.starts_with("requests:"))
        .with_context(|| format!("no requests line in h2load's output:\n{text}"))?;
    assert_eq!(count(requests, "succeeded"), Some(2000), "{text}");
    assert_eq!(count(requests, "failed"), Some(0), "{text}");
    assert_eq!(count(requests, "errored"), Some(0), "{text}");
    let statuses = text
        .lines()
        .find(|l| l.starts_with("status codes:"))
        .with_context(|| format!("no status line in h2load's output:\n{text}"))?;
    assert_eq!(count(statuses, "2xx"), Some(2000), "{text}");
    Ok(())
}

#[tokio::test]
async fn nghttp_gets_a_well_formed_grpc_answer_to_a_large_call() -> anyhow::Result<()> {
    let server = TestServer::start(GrpcOptions::default()).await?;
    let dir = tempfile::tempdir()?;
    let url = format!("http://127.0.0.1:{}{UNARY}", server.port);
    for pad in [10, 9 * 1024, 100 * 1024] {
        let body = write_request(dir.path(), pad)?;
        let body = body.to_string_lossy().to_string();
        let out = run(
            "nghttp",
            &[
                "-d",
                &body,
                "-H",
                "content-type: application/grpc",
                "-H",
                "te: trailers",
                &url,
            ],
        )
        .await?;
        // stdout is the response body: one gRPC message.
        let buf = out.stdout;
        ensure!(buf.len() >= 5, "pad {pad}: short answer {buf:?}");
        if buf[0] != 0 {
            bail!("pad {pad}: compressed answer");
        }
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        ensure!(
            buf.len() == 5 + len,
            "pad {pad}: {} bytes for a {len}-byte message",
            buf.len()
        );
        let m = decode(&Payload::decode(&buf[5..])?)?;
        assert_eq!(m.type_name, "ServerCheckResponse", "pad {pad}: {m:?}");
        assert_eq!(m.int("resultCode"), Some(200), "pad {pad}: {m:?}");
        assert!(
            m.str("connectionId").is_some_and(|id| !id.is_empty()),
            "pad {pad}: {m:?}"
        );
    }
    Ok(())
}

#[test]
fn h2load_summary_counts_are_read() {
    let line = "requests: 2000 total, 2000 started, 1999 done, 1998 succeeded, 2 failed, 0 errored, 0 timeout";
    assert_eq!(count(line, "succeeded"), Some(1998));
    assert_eq!(count(line, "failed"), Some(2));
    assert_eq!(count(line, "total"), Some(2000));
    assert_eq!(count(line, "missing"), None);
}
