//! Running the real Nacos Python clients: their virtualenvs (`scripts/python-venv.sh`) and
//! one run of a client script under `tests/python/`, whose `REQUEST` lines the test serves.
//!
//! A script prints progress lines, `REQUEST {json}` when it needs the test to act (it then
//! waits for `ok` on stdin), and ends with `PASS` or `FAIL reason`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use nacelle_testkit::server::TestServer;
use nacelle_testkit::TestResult;

/// Longest a whole client run may take (a script waits at most 30 s for each callback).
const RUN_TIMEOUT: Duration = Duration::from_secs(150);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `scripts/python-venv.sh "" VERSION` (idempotent) and returns the venv's python, with
/// `nacos-sdk-python==VERSION`.
pub fn venv(version: &str) -> TestResult<PathBuf> {
    venv_of("nacos-sdk-python", version)
}

/// Runs `scripts/python-venv.sh "" VERSION PACKAGE` (idempotent) and returns the venv's
/// python, with `PACKAGE==VERSION` (and what it depends on).
pub fn venv_of(package: &str, version: &str) -> TestResult<PathBuf> {
    let root = repo_root();
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/python-venv.sh"))
        .args(["", version, package])
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

/// Starts a server whose gRPC port is its HTTP port + 1000, the only one the Python gRPC
/// clients use (they have no gRPC port setting): picks a free port P whose P + 1000 is free
/// too, and tries again if either was taken in between. Settings adjusted by `tweak`.
// Not every test binary that includes this module runs a gRPC client.
#[allow(dead_code)]
pub async fn start_server_grpc_plus_1000(
    tweak: impl Fn(&mut nacelle::Settings),
) -> TestResult<TestServer> {
    let mut last_error = String::new();
    for _ in 0..20 {
        let port = nacelle_testkit::free_port()?;
        let Some(grpc_port) = port.checked_add(1000) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", grpc_port)).is_err() {
            continue;
        }
        match TestServer::start_with(|s| {
            tweak(s);
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
            Err(e) => return Err(e.into()),
        }
    }
    Err(format!("no free pair of ports P, P + 1000: {last_error}").into())
}

/// One run of a client script on one key.
pub struct ClientRun<'a> {
    pub python: &'a Path,
    /// File name under `tests/python/`.
    pub script: &'a str,
    pub namespace: &'a str,
    pub group: &'a str,
    pub data_id: &'a str,
    /// The client's own log, relative to its work directory, shown when the run fails.
    pub client_log: Option<&'a str>,
    /// User name and password, for a server with authentication on.
    pub credentials: Option<(&'a str, &'a str)>,
    /// Further arguments of the script.
    pub extra_args: Vec<&'a str>,
    /// The access tokens of a change request's author and of its reviewer, for a script's
    /// `{"change": CONTENT}` requests.
    pub reviewers: Option<(&'a str, &'a str)>,
}

impl ClientRun<'_> {
    fn label(&self) -> &str {
        if self.namespace.is_empty() {
            "default"
        } else {
            self.namespace
        }
    }

    /// Runs the script against `ts` (`--server --namespace --data-id --group --workdir`),
    /// serving its `REQUEST` lines. Returns its stdout lines once it printed `PASS` and
    /// exited 0.
    pub async fn run(self, ts: &TestServer) -> TestResult<Vec<String>> {
        let label = format!("{} {}", self.script, self.label());
        let work = tempfile::tempdir()?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/python")
            .join(self.script);
        let mut child = Command::new(self.python)
            .arg(&script)
            .args(["--server", &ts.addr.to_string()])
            .args(["--namespace", self.namespace])
            .args(["--data-id", self.data_id])
            .args(["--group", self.group])
            .arg("--workdir")
            .arg(work.path())
            .args(
                self.credentials
                    .map(|(u, p)| vec!["--username", u, "--password", p])
                    .unwrap_or_default(),
            )
            .args(&self.extra_args)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so that a hung run can be ended with what it forked.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        let pgid = child.id();
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut stderr = child.stderr.take().ok_or("no stderr")?;
        let stderr_task = tokio::spawn(async move {
            let mut s = String::new();
            // What could be read is kept; a read error only shortens the report.
            let _partial = stderr.read_to_string(&mut s).await;
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
            println!("[{label}] {line}");
            if let Some(request) = line.strip_prefix("REQUEST ") {
                if let Err(e) = self.serve_request(ts, request).await {
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
            let log = self
                .client_log
                .and_then(|l| std::fs::read_to_string(work.path().join(l)).ok())
                .unwrap_or_default();
            return Err(format!(
                "python client ({label}): {failure}\n--- stdout\n{}\n--- stderr (tail)\n{}\n\
                 --- client log (tail)\n{}",
                out.join("\n"),
                tail(&stderr, 40),
                tail(&log, 40)
            )
            .into());
        }
        Ok(out)
    }

    /// Serves one `REQUEST`: `{"publish": CONTENT}` publishes the key, `{"expect": CONTENT |
    /// null}` checks over HTTP what it holds, `{"change": CONTENT}` writes CONTENT to the
    /// key through a change request (opened, approved and published by [`Self::reviewers`]).
    async fn serve_request(&self, ts: &TestServer, request: &str) -> TestResult {
        let request: serde_json::Value = serde_json::from_str(request)?;
        if let Some(content) = request.get("change") {
            let content = content.as_str().ok_or("change needs a string")?;
            let (author, reviewer) = self.reviewers.ok_or("no reviewers for a change")?;
            return change_request(ts, author, reviewer, self, content).await;
        }
        if let Some(content) = request.get("publish") {
            let content = content.as_str().ok_or("publish needs a string")?;
            ts.publish(self.namespace, self.group, self.data_id, content)
                .await?;
            return Ok(());
        }
        if let Some(expected) = request.get("expect") {
            let got = ts.get(self.namespace, self.group, self.data_id).await?;
            let expected = expected.as_str();
            if got.as_deref() != expected {
                return Err(
                    format!("over HTTP the key holds {got:?}, expected {expected:?}").into(),
                );
            }
            return Ok(());
        }
        Err("unknown request".into())
    }
}

/// Creates the namespace `id` (over HTTP, as the console does) for a client test.
pub async fn create_namespace(ts: &TestServer, id: &str, name: &str) -> TestResult {
    let resp = ts
        .http
        .post(ts.url("/nacos/v1/console/namespaces"))
        .form(&[
            ("customNamespaceId", id),
            ("namespaceName", name),
            ("namespaceDesc", "namespace of a Python client test"),
        ])
        .send()
        .await?;
    if resp.status() != 200 {
        return Err(format!("creating namespace {id}: HTTP {}", resp.status()).into());
    }
    let body = resp.text().await?;
    if body != "true" {
        return Err(format!("creating namespace {id}: {body}").into());
    }
    Ok(())
}

/// Runs the clients at once; fails with the report of every client that failed.
pub async fn run_together(ts: &TestServer, runs: Vec<ClientRun<'_>>) -> TestResult {
    let results = futures::future::join_all(runs.into_iter().map(|r| r.run(ts))).await;
    let failures: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n\n").into())
    }
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// SIGKILLs the process group a client run started (the script and what it forked).
fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid {
        // The group may already be gone (the client exited): nothing to kill then.
        let _gone = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .status();
    }
}

/// Runs `wrong_credentials.py --api API` as `run` with a wrong password: the client must
/// fail with an auth refusal (its `STEP refused` line), never hang or answer.
pub async fn assert_wrong_password_refused(
    ts: &TestServer,
    mut run: ClientRun<'_>,
    api: &'static str,
) -> TestResult {
    run.script = "wrong_credentials.py";
    run.credentials = Some(("nacos", "not-the-password"));
    run.extra_args = vec!["--api", api];
    let out = run.run(ts).await?;
    let refused = out.iter().find(|l| l.starts_with("STEP refused"));
    println!("{refused:?}");
    assert!(refused.is_some(), "{out:?}");
    Ok(())
}

/// Sets up a review policy for a client run with authentication on (the admin's token in
/// `ts.api`): the users alice (`rw` on every namespace, group and key) and bob (`rwa`: he
/// may review), `initial` in the run's key, then a policy of one approval on the run's group.
/// Returns the access tokens of alice and bob.
// Not every test binary that includes this module runs a review.
#[allow(dead_code)]
pub async fn review_policy(
    ts: &TestServer,
    run: &ClientRun<'_>,
    initial: &str,
) -> TestResult<(String, String)> {
    let admin = ts.admin_token().await?;
    let mut tokens = Vec::new();
    for (user, password, action) in [
        ("alice", "alice-pass-1", "rw"),
        ("bob", "bob-pass-1", "rwa"),
    ] {
        let role = format!("r-{user}");
        for (path, form) in [
            (
                "/nacos/v1/auth/users",
                vec![("username", user), ("password", password)],
            ),
            (
                "/nacos/v1/auth/roles",
                vec![("role", role.as_str()), ("username", user)],
            ),
            (
                "/nacos/v1/auth/permissions",
                vec![
                    ("role", role.as_str()),
                    ("resource", "*:*:*"),
                    ("action", action),
                ],
            ),
        ] {
            let r = ts
                .http
                .post(ts.url(path))
                .bearer_auth(&admin)
                .form(&form)
                .send()
                .await?;
            let status = r.status();
            let body = r.text().await?;
            if status != 200 {
                return Err(format!("{path} {form:?}: HTTP {status} {body}").into());
            }
        }
        let r = ts
            .http
            .post(ts.url("/nacos/v1/auth/login"))
            .form(&[("username", user), ("password", password)])
            .send()
            .await?;
        let login: serde_json::Value = r.json().await?;
        let token = login["accessToken"]
            .as_str()
            .ok_or_else(|| format!("login of {user}: {login}"))?;
        tokens.push(token.to_string());
    }
    // The key exists before the policy.
    ts.publish(run.namespace, run.group, run.data_id, initial)
        .await?;
    let r = ts
        .http
        .post(ts.url("/nacos/nacelle/v1/review-policies"))
        .bearer_auth(&admin)
        .form(&[
            ("namespaceId", run.namespace),
            ("groupPattern", run.group),
            ("requiredApprovals", "1"),
        ])
        .send()
        .await?;
    let status = r.status();
    let body = r.text().await?;
    if status != 200 {
        return Err(format!("setting the review policy: HTTP {status} {body}").into());
    }
    let bob = tokens.pop().ok_or("bob's token")?;
    let alice = tokens.pop().ok_or("alice's token")?;
    Ok((alice, bob))
}

/// Writes `content` to the key of `run` through a change request: opened by `author`,
/// approved by `reviewer`, published by `author`; checks each step's answer.
async fn change_request(
    ts: &TestServer,
    author: &str,
    reviewer: &str,
    run: &ClientRun<'_>,
    content: &str,
) -> TestResult {
    let body = serde_json::json!({
        "namespaceId": run.namespace,
        "title": "reviewed change of a Python client test",
        "items": [{"group": run.group, "dataId": run.data_id, "content": content}],
    });
    let r = ts
        .http
        .post(ts.url("/nacos/nacelle/v1/changes"))
        .bearer_auth(author)
        .json(&body)
        .send()
        .await?;
    let created = envelope(r, "creating the change request").await?;
    let id = created["id"].as_i64().ok_or("no id")?.to_string();
    for (token, action, state) in [
        (reviewer, "approve", "approved"),
        (author, "publish", "published"),
    ] {
        let r = ts
            .http
            .post(ts.url(&format!("/nacos/nacelle/v1/change/{action}")))
            .bearer_auth(token)
            .query(&[("id", id.as_str())])
            .send()
            .await?;
        let cr = envelope(r, action).await?;
        if cr["state"] != state {
            return Err(format!("{action}: state {}, expected {state}", cr["state"]).into());
        }
    }
    Ok(())
}

/// The `data` of a successful Nacelle answer (`{"code":0,"message":"success","data":…}`).
async fn envelope(r: reqwest::Response, what: &str) -> TestResult<serde_json::Value> {
    let status = r.status();
    let body = r.text().await?;
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("{what}: HTTP {status} {body} ({e})"))?;
    if status != 200 || v["code"] != 0 {
        return Err(format!("{what}: HTTP {status} {body}").into());
    }
    Ok(v["data"].clone())
}

/// Runs `review_policy.py --api API` as `run` (credentials of alice, the key and group of
/// `run`) on `ts` with authentication on: the client's direct writes must be refused, each
/// with its `STEP refused` line, and the change request reach its listener.
// Not every test binary that includes this module runs a review.
#[allow(dead_code)]
pub async fn assert_review_policy_refuses_and_reviewed_change_arrives(
    ts: &TestServer,
    mut run: ClientRun<'_>,
    api: &'static str,
) -> TestResult {
    const INITIAL: &str = "limit: 1\n";
    let (alice, bob) = review_policy(ts, &run, INITIAL).await?;
    run.script = "review_policy.py";
    run.credentials = Some(("alice", "alice-pass-1"));
    run.extra_args = vec!["--api", api, "--initial", INITIAL];
    run.reviewers = Some((&alice, &bob));
    let (namespace, group, data_id) = (run.namespace, run.group, run.data_id);
    let out = run.run(ts).await?;
    let refused = out.iter().filter(|l| l.starts_with("STEP refused")).count();
    assert_eq!(refused, 3, "publish, remove, publish of a new key: {out:?}");
    assert_eq!(
        ts.get(namespace, group, data_id).await?.as_deref(),
        Some("limit: 2\n")
    );
    let new_key = format!("{data_id}.new");
    assert_eq!(ts.get(namespace, group, &new_key).await?, None);
    Ok(())
}
