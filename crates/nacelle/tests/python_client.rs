//! The real Nacos Python client `nacos-sdk-python==1.0.0` (HTTP v1 with long polling) runs
//! publish, get, list, listen and remove against a server on port 0: in the default
//! namespace, in a custom namespace holding the same dataId, and with the namespace spelled
//! `public` (which the server must echo back as sent). The client runs from a virtualenv that
//! `scripts/python-venv.sh` creates once (it installs the package from PyPI).
//!
//! SQLite only, unlike the other single-node suites: this one tests the wire protocol as a
//! real client speaks it, which the backend does not change; storage on MariaDB and
//! PostgreSQL is covered by `http_api`, `long_polling`, `bad_input` and `durability`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{TestResult, TestServer};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

const GROUP: &str = "PY_GROUP";
/// Longest a whole client run may take (it waits at most 30 s for each of 3 callbacks).
const RUN_TIMEOUT: Duration = Duration::from_secs(150);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `scripts/python-venv.sh` (idempotent) and returns the venv's python.
fn python_venv() -> TestResult<PathBuf> {
    let root = repo_root();
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/python-venv.sh"))
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

/// Runs the client script for one namespace and key, serving its `REQUEST` lines (publishes
/// by the test). Returns its stdout lines once it printed `PASS` and exited 0.
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
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/v1_client_roundtrip.py");
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
        println!("[python {label}] {line}");
        if let Some(request) = line.strip_prefix("REQUEST ") {
            let request: serde_json::Value = serde_json::from_str(request)?;
            let content = request["publish"]
                .as_str()
                .ok_or_else(|| format!("unknown request {request}"))?;
            ts.publish(namespace, GROUP, data_id, content).await?;
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
        return Err(format!(
            "python client ({label}): {failure}\n--- stdout\n{}\n--- stderr (tail)\n{}",
            out.join("\n"),
            tail.join("\n")
        )
        .into());
    }
    Ok(out)
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
async fn python_client_1_0_0_round_trip_with_long_polling() -> TestResult {
    let python = tokio::task::spawn_blocking(python_venv).await??;
    let ts = TestServer::start().await?;

    let resp = ts
        .http
        .post(ts.url("/nacos/v1/console/namespaces"))
        .form(&[
            ("customNamespaceId", "py-dev"),
            ("namespaceName", "python"),
            ("namespaceDesc", "namespace of the Python client test"),
        ])
        .send()
        .await?;
    assert_eq!(resp.status(), 200, "creating the namespace");
    assert_eq!(resp.text().await?, "true");

    // Three clients at once, each with its own long poll: the same dataId in the default
    // namespace and in `py-dev` must stay apart; `public` is the default namespace spelled
    // out, which the listener must echo back as sent for the client to match its callback.
    let (default_ns, custom_ns, public_ns) = tokio::join!(
        run_client(&ts, &python, "", "py-roundtrip.yaml"),
        run_client(&ts, &python, "py-dev", "py-roundtrip.yaml"),
        run_client(&ts, &python, "public", "py-public.yaml"),
    );
    let failures: Vec<String> = [default_ns, custom_ns, public_ns]
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // Every client removed its config at the end.
    for (tenant, data_id) in [
        ("", "py-roundtrip.yaml"),
        ("py-dev", "py-roundtrip.yaml"),
        ("", "py-public.yaml"),
    ] {
        assert_eq!(
            ts.get(tenant, GROUP, data_id).await?,
            None,
            "{tenant}/{data_id}"
        );
    }
    let mut ts = ts;
    ts.stop().await?;
    Ok(())
}
