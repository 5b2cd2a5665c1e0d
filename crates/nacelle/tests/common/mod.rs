//! Test support: start a real server (in-process on port 0, or the real binary) on a fresh
//! data directory, and talk to it over HTTP.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nacelle::{RunningServer, Settings};

/// Result type of tests.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A server started in-process on 127.0.0.1 with port 0 over a temporary data directory.
pub struct TestServer {
    pub server: Option<RunningServer>,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
}

impl TestServer {
    /// Starts with default settings.
    pub async fn start() -> TestResult<Self> {
        Self::start_with(|_| {}).await
    }

    /// Starts with settings adjusted by `tweak` (data dir, bind and port are set first).
    pub async fn start_with(tweak: impl FnOnce(&mut Settings)) -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        let settings = settings_for(dir.path(), tweak);
        let server = nacelle::start(&settings).await?;
        let addr = server.http_addr;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        let ts = TestServer {
            server: Some(server),
            addr,
            dir,
            http,
        };
        ts.wait_ready().await?;
        Ok(ts)
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Polls readiness until 200 (at most 20 s).
    pub async fn wait_ready(&self) -> TestResult {
        wait_ready(&self.http, self.addr).await
    }

    /// Publishes over v1 and asserts the body is `true`.
    pub async fn publish(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
        content: &str,
    ) -> TestResult {
        let resp = self
            .http
            .post(self.url("/nacos/v1/cs/configs"))
            .form(&[
                ("dataId", data_id),
                ("group", group),
                ("tenant", tenant),
                ("content", content),
            ])
            .send()
            .await?;
        let status = resp.status();
        let body = resp.text().await?;
        if status != 200 || body != "true" {
            return Err(format!("publish failed: {status} {body}").into());
        }
        Ok(())
    }

    /// GETs a config over v1: `Some(content)` on 200, `None` on 404.
    pub async fn get(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
    ) -> TestResult<Option<String>> {
        let resp = self
            .http
            .get(self.url("/nacos/v1/cs/configs"))
            .query(&[("dataId", data_id), ("group", group), ("tenant", tenant)])
            .send()
            .await?;
        match resp.status().as_u16() {
            200 => Ok(Some(resp.text().await?)),
            404 => Ok(None),
            s => Err(format!("unexpected status {s}: {}", resp.text().await?).into()),
        }
    }

    /// Graceful shutdown.
    pub async fn stop(&mut self) -> TestResult {
        if let Some(s) = self.server.take() {
            s.shutdown().await?;
        }
        Ok(())
    }
}

/// Settings for a test server on `dir`.
pub fn settings_for(dir: &Path, tweak: impl FnOnce(&mut Settings)) -> Settings {
    let mut settings = Settings {
        data_dir: dir.to_path_buf(),
        bind: "127.0.0.1".parse().expect("literal ip"),
        port: 0,
        ..Settings::default()
    };
    tweak(&mut settings);
    settings
}

/// Polls readiness until 200 (at most 20 s).
pub async fn wait_ready(http: &reqwest::Client, addr: SocketAddr) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = http
            .get(format!("http://{addr}/nacos/v1/console/health/readiness"))
            .send()
            .await;
        if let Ok(r) = r {
            if r.status() == 200 {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err("server did not become ready within 20 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Builds a `Listening-Configs` value from (dataId, group, md5, tenant) records.
pub fn listening_configs(records: &[(&str, &str, &str, Option<&str>)]) -> String {
    let mut s = String::new();
    for (d, g, m, t) in records {
        s.push_str(d);
        s.push('\u{2}');
        s.push_str(g);
        s.push('\u{2}');
        s.push_str(m);
        if let Some(t) = t {
            s.push('\u{2}');
            s.push_str(t);
        }
        s.push('\u{1}');
    }
    s
}

/// Lowercase hex md5.
pub fn md5(s: &str) -> String {
    nacelle_core::md5_hex(s.as_bytes())
}

/// The real `nacelle` binary running as a child process.
pub struct BinaryServer {
    pub child: Child,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
}

impl BinaryServer {
    /// Runs `nacelle serve --data-dir DIR --bind 127.0.0.1 --port 0` and reads the bound
    /// address from its log.
    pub fn spawn(data_dir: &Path, extra: &[&str]) -> TestResult<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nacelle"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--bind", "127.0.0.1", "--port", "0", "--log-format", "json"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(i) = line.find("http listening on ") {
                        let rest = &line[i + "http listening on ".len()..];
                        let addr: String = rest
                            .chars()
                            .take_while(|c| !c.is_whitespace() && *c != '"')
                            .collect();
                        sent = tx.send(addr).is_ok();
                    }
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(20))?.parse()?;
        Ok(BinaryServer {
            child,
            addr,
            data_dir: data_dir.to_path_buf(),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill9(&mut self) -> TestResult {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for BinaryServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
