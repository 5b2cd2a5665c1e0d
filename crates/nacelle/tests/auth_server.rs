//! Authentication of the whole server: a fresh `nacelle serve` is secure by default (the
//! real binary), and the real clients log in and work with credentials — the Rust
//! `nacos-sdk` with its HTTP login plugin — and fail clearly with wrong ones.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use nacelle_testkit::server::{secure, TestServer, ADMIN_PASSWORD};
use nacelle_testkit::{TestResult, SOON};
use serde_json::Value;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");

/// The real binary with every log line sent to a channel; killed when dropped.
struct Serve {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
    addr: SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // The process may have exited already; either way it is gone afterwards.
        let _gone = self.child.kill();
        let _reaped = self.child.wait();
    }
}

impl Serve {
    fn spawn(dir: &std::path::Path, extra: &[&str]) -> TestResult<Serve> {
        let mut child = Command::new(NACELLE)
            .arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .args(["--port", "0", "--grpc-port", "0", "--bind", "127.0.0.1"])
            .args(["--log-format", "json"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut serve = Serve {
            child,
            lines,
            log: Vec::new(),
            addr: "127.0.0.1:0".parse()?,
        };
        let line = serve.wait_line("http listening on ")?;
        let rest = &line[line.find("http listening on ").unwrap_or(0) + 18..];
        let addr: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '"')
            .collect();
        serve.addr = addr.parse()?;
        Ok(serve)
    }

    /// Waits for a log line containing `needle`.
    fn wait_line(&mut self, needle: &str) -> TestResult<String> {
        if let Some(seen) = self.log.iter().find(|l| l.contains(needle)) {
            return Ok(seen.clone());
        }
        let deadline = Instant::now() + SOON;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return Ok(line);
                    }
                }
                Err(_) => {
                    return Err(format!(
                        "no log line with {needle:?}; log so far:\n{}",
                        self.log.join("\n")
                    )
                    .into())
                }
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

#[cfg(unix)]
fn mode(path: &std::path::Path) -> TestResult<u32> {
    use std::os::unix::fs::PermissionsExt;
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
}

#[tokio::test]
async fn a_fresh_server_refuses_anonymous_writes_and_says_where_the_password_is() -> TestResult {
    let dir = tempfile::tempdir()?;
    let http = reqwest::Client::builder().timeout(SOON).build()?;
    let mut serve = Serve::spawn(dir.path(), &[])?;
    let announced = serve.wait_line("initial-admin-password")?;
    let file = dir.path().join("initial-admin-password");
    assert!(
        announced.contains(&file.display().to_string()),
        "the log names the file: {announced}"
    );
    #[cfg(unix)]
    {
        assert_eq!(mode(&file)?, 0o600);
        assert_eq!(mode(&dir.path().join("auth-token-secret"))?, 0o600);
    }
    let password = std::fs::read_to_string(&file)?
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(password.len() >= 16, "{password:?}");
    // The administrator is created before the server is ready.
    serve.wait_line("\"ready\"")?;

    // Anonymous: refused, with Nacos's body.
    let publish = |token: Option<&str>| {
        let mut form = vec![
            ("dataId", "app.yaml"),
            ("group", "DEFAULT_GROUP"),
            ("content", "a: 1"),
        ];
        if let Some(t) = token {
            form.push(("accessToken", t));
        }
        http.post(serve.url("/nacos/v1/cs/configs"))
            .form(&form)
            .send()
    };
    let r = publish(None).await?;
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await?;
    assert_eq!(body["message"], "user not found!");
    let r = http
        .get(serve.url("/nacos/v1/cs/configs"))
        .query(&[("dataId", "app.yaml"), ("group", "DEFAULT_GROUP")])
        .send()
        .await?;
    assert_eq!(r.status(), 403);
    // Health stays open (probes carry no credentials).
    let r = http
        .get(serve.url("/nacos/v1/console/health/liveness"))
        .send()
        .await?;
    assert_eq!(r.status(), 200);

    // The password from the file logs in; the token publishes and reads.
    let login: Value = http
        .post(serve.url("/nacos/v1/auth/login"))
        .form(&[("username", "nacos"), ("password", password.as_str())])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(login["globalAdmin"], true);
    let token = login["accessToken"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let r = publish(Some(&token)).await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let r = http
        .get(serve.url("/nacos/v1/cs/configs"))
        .query(&[
            ("dataId", "app.yaml"),
            ("group", "DEFAULT_GROUP"),
            ("accessToken", token.as_str()),
        ])
        .send()
        .await?;
    assert_eq!(r.text().await?, "a: 1");
    // The password itself is never logged.
    assert!(
        serve.log.iter().all(|l| !l.contains(&password)),
        "the password is in the log"
    );

    // Restarted on the same data directory: the same secret (the token still works) and no
    // new administrator.
    drop(serve);
    let mut serve = Serve::spawn(dir.path(), &[])?;
    serve.wait_line("\"ready\"")?;
    let r = http
        .get(serve.url("/nacos/v1/cs/configs"))
        .query(&[
            ("dataId", "app.yaml"),
            ("group", "DEFAULT_GROUP"),
            ("accessToken", token.as_str()),
        ])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    let again = std::fs::read_to_string(&file)?;
    assert_eq!(again.lines().next(), Some(password.as_str()));
    Ok(())
}

/// Readiness means usable: the first administrator exists before the readiness probe answers
/// 200, so a client (or test harness) that logs in as soon as the server is ready is let in.
#[tokio::test]
async fn the_configured_administrator_can_log_in_as_soon_as_the_server_is_ready() -> TestResult {
    let dir = tempfile::tempdir()?;
    let http = reqwest::Client::builder().timeout(SOON).build()?;
    let serve = Serve::spawn(dir.path(), &["--admin-password", "Ready-Pw-123456"])?;
    let deadline = Instant::now() + SOON;
    loop {
        let r = http
            .get(serve.url("/nacos/v1/console/health/readiness"))
            .send()
            .await?;
        if r.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let r = http
        .post(serve.url("/nacos/v1/auth/login"))
        .form(&[("username", "nacos"), ("password", "Ready-Pw-123456")])
        .send()
        .await?;
    let status = r.status();
    assert_eq!(
        status,
        200,
        "login right after readiness: {}",
        r.text().await?
    );
    Ok(())
}

#[tokio::test]
async fn auth_off_warns_at_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut serve = Serve::spawn(dir.path(), &["--auth", "off"])?;
    let line = serve.wait_line("authentication is OFF")?;
    assert!(line.contains("WARN"), "{line}");
    assert!(!dir.path().join("initial-admin-password").exists());
    Ok(())
}

#[test]
fn members_without_a_token_secret_refuse_to_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = Command::new(NACELLE)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--port", "0", "--grpc-port", "0", "--bind", "127.0.0.1"])
        .args(["--members", "127.0.0.1:1,127.0.0.1:2"])
        .args(["--cluster-secret", "a-cluster-secret-of-length"])
        // A cluster needs a shared database (never reached: the token secret is checked
        // before the first connection is needed).
        .args(["--db", "postgres://nobody@127.0.0.1:1/nacelle"])
        .output()?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no auth token secret"), "{err}");
    assert!(err.contains("--auth-token-secret-file"), "{err}");
    // A secret that is too short is refused as well.
    let out = Command::new(NACELLE)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--port", "0", "--auth-token-secret", "c2hvcnQ="])
        .output()?;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at least 32 bytes"), "{err}");
    Ok(())
}

#[tokio::test]
async fn the_rust_sdk_logs_in_and_works_with_credentials() -> TestResult {
    use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigServiceBuilder};
    use nacos_sdk::api::props::ClientProps;
    use std::sync::Arc;

    struct Tx(tokio::sync::mpsc::UnboundedSender<String>);
    impl ConfigChangeListener for Tx {
        fn notify(&self, r: ConfigResponse) {
            // The test may have finished; nothing to tell then.
            let _done = self.0.send(r.content().clone());
        }
    }

    let ts = TestServer::start_with(secure).await?;
    ts.admin_token().await?;
    let running = ts.server.as_ref().ok_or("no server")?;
    let cache = tempfile::tempdir()?;
    let props = |password: &str| {
        ClientProps::new()
            .server_addr(format!("127.0.0.1:{}", running.http_addr.port()))
            .remote_grpc_port(running.grpc_addr.port())
            .namespace("")
            .app_name("auth-test")
            .cache_dir(cache.path())
            .env_first(false)
            .auth_username("nacos")
            .auth_password(password)
    };
    let started = Instant::now();
    let client = ConfigServiceBuilder::new(props(ADMIN_PASSWORD))
        .enable_auth_plugin_http()
        .build()
        .await
        .map_err(|e| format!("sdk build: {e}"))?;
    println!(
        "nacos-sdk logged in and connected in {:?}",
        started.elapsed()
    );
    assert!(
        client
            .publish_config("sdk.yaml".into(), "G".into(), "v: 1".into(), None)
            .await?
    );
    let read = client.get_config("sdk.yaml".into(), "G".into()).await?;
    assert_eq!(read.content(), "v: 1");
    // (nacos-sdk 0.8 drops the first value of a key created after its listener: listen to
    // an existing key.)
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    client
        .add_listener("sdk.yaml".into(), "G".into(), Arc::new(Tx(tx)))
        .await?;
    assert!(
        client
            .publish_config("sdk.yaml".into(), "G".into(), "v: 2".into(), None)
            .await?
    );
    let got = tokio::time::timeout(SOON, rx.recv()).await?;
    assert_eq!(got.as_deref(), Some("v: 2"));
    assert!(client.remove_config("sdk.yaml".into(), "G".into()).await?);
    // What the server saw: the SDK's token on its gRPC requests, its user in history.
    let history: Value = ts
        .http
        .get(ts.url("/nacos/v1/cs/history"))
        .query(&[
            ("search", "accurate"),
            ("dataId", "sdk.yaml"),
            ("group", "G"),
            ("username", "nacos"),
            ("password", ADMIN_PASSWORD),
        ])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(history["totalCount"], 3, "{history}");

    // Wrong credentials: its gRPC requests are refused with Nacos's 403, clearly.
    let wrong_cache = tempfile::tempdir()?;
    let wrong = ConfigServiceBuilder::new(props("wrong").cache_dir(wrong_cache.path()))
        .enable_auth_plugin_http()
        .build()
        .await;
    match wrong {
        Err(e) => println!("nacos-sdk with a wrong password: {e}"),
        Ok(client) => {
            let r = client.get_config("sdk.yaml".into(), "G".into()).await;
            let e = r.err().ok_or("a read with a wrong password succeeded")?;
            println!("nacos-sdk with a wrong password: {e}");
            assert!(
                e.to_string().contains("403") || e.to_string().contains("user not found"),
                "{e}"
            );
        }
    }
    Ok(())
}
