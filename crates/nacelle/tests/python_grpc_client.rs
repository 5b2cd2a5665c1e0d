//! The real Nacos Python client `nacos-sdk-python==2.0.9` — its `v2.nacos` API, which speaks
//! gRPC through grpcio (gRPC's C core: an HTTP/2 and gRPC stack independent of the h2 and
//! tonic ones the server and the Rust SDK use) — runs get, publish, compare-and-set, a 1 MiB
//! config, listen (a callback after a server push), the client's keepalive (HTTP/2 PINGs and
//! an idle `HealthCheckRequest`) and remove against a real server: in the default namespace,
//! in a custom namespace holding the same dataId, and with the namespace spelled `public`,
//! three clients at once. The test checks over HTTP that the client's writes landed, that
//! the server counted the pushes the clients acknowledged, and that their connections are
//! gone once they shut down.
//!
//! The client has no gRPC port setting: it always connects to the port of its server address
//! plus 1000. So the server runs on a chosen HTTP port P with the default gRPC port P + 1000.
//! The client runs from a virtualenv that `scripts/python-venv.sh` creates once (it installs
//! the package from PyPI). SQLite only, like the 1.x client test: the backend does not change
//! the wire protocol.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{free_port, TestResult, TestServer};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

const CLIENT_VERSION: &str = "2.0.9";
const GROUP: &str = "PY2_GROUP";
/// Longest a whole client run may take (it waits at most 30 s for each of 3 callbacks).
const RUN_TIMEOUT: Duration = Duration::from_secs(150);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `scripts/python-venv.sh "" 2.0.9` (idempotent) and returns the venv's python.
fn python_venv() -> TestResult<PathBuf> {
    let root = repo_root();
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/python-venv.sh"))
        .args(["", CLIENT_VERSION])
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "scripts/python-venv.sh failed ({}); it needs python3 with venv and PyPI",
            out.status
        )
        .into());
    }
    let stdout = String::from_utf8(out.stdout)?;
    let python = stdout
        .lines()
        .last()
        .map(PathBuf::from)
        .ok_or("scripts/python-venv.sh printed no python path")?;
    if !python.exists() {
        return Err(format!("{} does not exist", python.display()).into());
    }
    Ok(python)
}

/// Starts a server whose gRPC port is its HTTP port + 1000, the only one the client uses:
/// picks a free port P whose P + 1000 is free too, and tries again if either was taken in
/// between.
async fn start_server() -> TestResult<TestServer> {
    let mut last_error = String::new();
    for _ in 0..20 {
        let port = free_port()?;
        let Some(grpc_port) = port.checked_add(1000) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", grpc_port)).is_err() {
            continue;
        }
        match TestServer::start_with(|s| {
            s.port = port;
            s.grpc_port = None;
        })
        .await
        {
            Ok(ts) => {
                let grpc = ts.server.as_ref().ok_or("no server")?.grpc_addr;
                assert_eq!(grpc.port(), grpc_port, "gRPC port of HTTP port {port}");
                return Ok(ts);
            }
            // Another process took one of the ports meanwhile.
            Err(e) if format!("{e:#}").contains("binding") => last_error = format!("{e:#}"),
            Err(e) => return Err(e),
        }
    }
    Err(format!("no free pair of ports P, P + 1000: {last_error}").into())
}

/// Runs the client script for one namespace and key, serving its `REQUEST` lines (publishes
/// and checks by the test over HTTP). Returns its stdout lines once it printed `PASS` and
/// exited 0.
async fn run_client(
    ts: &TestServer,
    python: &Path,
    namespace: &str,
    data_id: &str,
) -> TestResult<Vec<String>> {
    let label = if namespace.is_empty() {
        "default"
    } else {
        namespace
    };
    let work = tempfile::tempdir()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/v2_grpc_roundtrip.py");
    let mut child = Command::new(python)
        .arg(&script)
        .args(["--server", &ts.addr.to_string()])
        .args(["--namespace", namespace])
        .args(["--data-id", data_id])
        .args(["--group", GROUP])
        .arg("--workdir")
        .arg(work.path())
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a hung run can be ended with everything it forked.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child.id();
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let stderr_task = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });

    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let mut lines = BufReader::new(stdout).lines();
    let mut out = Vec::new();
    let mut failure: Option<String> = None;
    loop {
        let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Err(_) => {
                failure = Some(format!("no result within {RUN_TIMEOUT:?}"));
                break;
            }
            Ok(Err(e)) => {
                failure = Some(format!("reading its output: {e}"));
                break;
            }
            Ok(Ok(None)) => break,
            Ok(Ok(Some(line))) => line,
        };
        println!("[python2 {label}] {line}");
        if let Some(request) = line.strip_prefix("REQUEST ") {
            if let Err(e) = serve_request(ts, namespace, data_id, request).await {
                failure = Some(format!("{request}: {e}"));
                out.push(line);
                break;
            }
            stdin.write_all(b"ok\n").await?;
            stdin.flush().await?;
        }
        let done = line == "PASS" || line.starts_with("FAIL ");
        out.push(line);
        if done {
            break;
        }
    }
    if failure.is_some() {
        kill_group(pgid);
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let stderr = tokio::time::timeout(Duration::from_secs(5), stderr_task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let exit = match status {
        Ok(Ok(s)) if s.success() => None,
        Ok(Ok(s)) => Some(format!("exited with {s}")),
        Ok(Err(e)) => Some(format!("wait failed: {e}")),
        Err(_) => {
            kill_group(pgid);
            Some("did not exit".to_string())
        }
    };
    let failure = failure
        .or(exit)
        .or_else(|| (out.last().map(String::as_str) != Some("PASS")).then(|| "no PASS".into()));
    if let Some(failure) = failure {
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let log = std::fs::read_to_string(work.path().join("logs/config.log")).unwrap_or_default();
        let log_tail: Vec<&str> = log.lines().rev().take(40).collect();
        let log_tail: Vec<&str> = log_tail.into_iter().rev().collect();
        return Err(format!(
            "python client ({label}): {failure}\n--- stdout\n{}\n--- stderr (tail)\n{}\n\
             --- client log (tail)\n{}",
            out.join("\n"),
            tail.join("\n"),
            log_tail.join("\n")
        )
        .into());
    }
    Ok(out)
}

/// Serves one `REQUEST` of the script over HTTP: `{"publish": CONTENT}` publishes, and
/// `{"expect": CONTENT | null}` checks what the key holds.
async fn serve_request(
    ts: &TestServer,
    namespace: &str,
    data_id: &str,
    request: &str,
) -> TestResult {
    let request: serde_json::Value = serde_json::from_str(request)?;
    if let Some(content) = request.get("publish") {
        let content = content.as_str().ok_or("publish needs a string")?;
        return ts.publish(namespace, GROUP, data_id, content).await;
    }
    if let Some(expected) = request.get("expect") {
        let got = ts.get(namespace, GROUP, data_id).await?;
        let expected = expected.as_str();
        if got.as_deref() != expected {
            return Err(format!("over HTTP the key holds {got:?}, expected {expected:?}").into());
        }
        return Ok(());
    }
    Err("unknown request".into())
}

/// SIGKILLs the process group a client run started (the script and what it forked).
fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_2_0_9_round_trip_over_grpc() -> TestResult {
    let python = tokio::task::spawn_blocking(python_venv).await??;
    let mut ts = start_server().await?;
    let stats = ts.server.as_ref().ok_or("no server")?.grpc_stats.clone();
    println!(
        "server: http {} grpc {}",
        ts.addr,
        ts.server.as_ref().ok_or("no server")?.grpc_addr
    );

    let resp = ts
        .http
        .post(ts.url("/nacos/v1/console/namespaces"))
        .form(&[
            ("customNamespaceId", "py2-dev"),
            ("namespaceName", "python2"),
            ("namespaceDesc", "namespace of the Python 2.x client test"),
        ])
        .send()
        .await?;
    assert_eq!(resp.status(), 200, "creating the namespace");
    assert_eq!(resp.text().await?, "true");

    // Three clients at once, each on its own gRPC connection: the same dataId in the default
    // namespace and in `py2-dev` must stay apart; `public` is the default namespace spelled
    // out, which pushes must echo as sent.
    let (default_ns, custom_ns, public_ns) = tokio::join!(
        run_client(&ts, &python, "", "py2-roundtrip.yaml"),
        run_client(&ts, &python, "py2-dev", "py2-roundtrip.yaml"),
        run_client(&ts, &python, "public", "py2-public.yaml"),
    );
    let failures: Vec<String> = [default_ns, custom_ns, public_ns]
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // Every client removed its configs at the end.
    for (tenant, data_id) in [
        ("", "py2-roundtrip.yaml"),
        ("", "py2-roundtrip.yaml.large"),
        ("py2-dev", "py2-roundtrip.yaml"),
        ("py2-dev", "py2-roundtrip.yaml.large"),
        ("", "py2-public.yaml"),
        ("", "py2-public.yaml.large"),
    ] {
        assert_eq!(
            ts.get(tenant, GROUP, data_id).await?,
            None,
            "{tenant}/{data_id}"
        );
    }

    // Each client acknowledged the pushes it got (at least the test's publish and the
    // remove), on the bi-stream, with its own response type.
    let s = stats.snapshot();
    println!("grpc stats after the clients: {s:?}");
    assert!(s.pushes_sent >= 6, "pushes sent: {s:?}");
    assert!(s.push_acks >= 6, "push acks: {s:?}");
    // The clients shut down: their connections and listens are gone once the server saw
    // their streams end.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = stats.snapshot();
        if s.connections == 0 && s.listened_keys == 0 {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("connections still registered 20 s after the clients left: {s:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    ts.stop().await?;
    Ok(())
}
