//! The whole server under test: in-process on 127.0.0.1 port 0 over a temporary data
//! directory ([`TestServer`]), or the real binary as a child process ([`BinaryServer`], for
//! kill -9, SIGTERM and clusters).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use nacelle::{RunningServer, Settings};

use crate::{Api, Backend, TestDb};

/// A server started in-process on 127.0.0.1 with port 0 over a temporary data directory,
/// on SQLite (in the data directory) or on a database of its own on MariaDB or PostgreSQL.
/// It derefs to its [`Api`]: `ts.publish(…)`, `ts.get(…)`, `ts.url(…)`, `ts.http`, `ts.addr`.
pub struct TestServer {
    /// The running server (`None` once stopped).
    pub server: Option<RunningServer>,
    /// Its data directory (the SQLite file lives here).
    pub dir: tempfile::TempDir,
    /// A client of its HTTP API.
    pub api: Api,
    /// The backend it runs on.
    pub backend: Backend,
    /// The server backend's database; declared last so it is dropped after the server.
    pub db: Option<TestDb>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.api.addr)
            .field("backend", &self.backend)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

impl TestServer {
    /// Starts with default settings on SQLite.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(|_| {}).await
    }

    /// Starts on SQLite with settings adjusted by `tweak` (data dir, bind and port are set
    /// first).
    pub async fn start_with(tweak: impl FnOnce(&mut Settings)) -> anyhow::Result<Self> {
        Self::start_with_on(Backend::Sqlite, tweak).await
    }

    /// Starts with default settings on `backend`.
    pub async fn start_on(backend: Backend) -> anyhow::Result<Self> {
        Self::start_with_on(backend, |_| {}).await
    }

    /// Starts on `backend` (a fresh database for MariaDB and PostgreSQL) with settings
    /// adjusted by `tweak` (data dir, bind, port and db are set first).
    pub async fn start_with_on(
        backend: Backend,
        tweak: impl FnOnce(&mut Settings),
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let db = TestDb::for_server(backend).await?;
        let settings = settings_for(dir.path(), |s| {
            s.db = db.as_ref().map(|db| db.url.clone());
            tweak(s);
        });
        let server = nacelle::start(&settings).await?;
        let api = Api::new(server.http_addr)?;
        let ts = TestServer {
            server: Some(server),
            dir,
            api,
            backend,
            db,
        };
        ts.wait_ready().await?;
        Ok(ts)
    }

    /// Graceful shutdown.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(s) = self.server.take() {
            s.shutdown().await?;
        }
        Ok(())
    }
}

impl std::ops::Deref for TestServer {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

/// The token secret of [`secure`] servers (base64 of 32 bytes).
pub const TOKEN_SECRET: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// The password of the administrator `nacos` of [`secure`] servers.
pub const ADMIN_PASSWORD: &str = "test-admin-password";

/// A `tweak` turning authentication on, with [`TOKEN_SECRET`] and [`ADMIN_PASSWORD`].
pub fn secure(s: &mut Settings) {
    s.auth = nacelle::settings::AuthSettings {
        token_secret: Some(TOKEN_SECRET.into()),
        admin_password: Some(ADMIN_PASSWORD.into()),
        ..nacelle::settings::AuthSettings::default()
    };
}

impl TestServer {
    /// Waits until the administrator of a [`secure`] server logs in (it is created right
    /// after the load) and returns its token.
    pub async fn admin_token(&self) -> anyhow::Result<String> {
        self.wait_ready().await?;
        let deadline = std::time::Instant::now() + crate::SOON;
        loop {
            let r = self
                .http
                .post(self.url("/nacos/v1/auth/login"))
                .query(&[("username", "nacos"), ("password", ADMIN_PASSWORD)])
                .send()
                .await?;
            if r.status() == 200 {
                let body: serde_json::Value = r.json().await?;
                return Ok(body["accessToken"].as_str().unwrap_or_default().to_string());
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "no administrator: {}",
                r.status()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl TestServer {
    /// Creates user `name` (password `<name>-pass-1`) with role `r-<name>` granted
    /// `action` on `resource`, as the administrator whose token is `admin`; the user's
    /// token.
    pub async fn user_granted(
        &self,
        admin: &str,
        name: &str,
        resource: &str,
        action: &str,
    ) -> anyhow::Result<String> {
        let (role, password) = (format!("r-{name}"), format!("{name}-pass-1"));
        for (path, params) in [
            (
                "/nacos/v1/auth/users",
                vec![("username", name), ("password", password.as_str())],
            ),
            (
                "/nacos/v1/auth/roles",
                vec![("role", role.as_str()), ("username", name)],
            ),
            (
                "/nacos/v1/auth/permissions",
                vec![
                    ("role", role.as_str()),
                    ("resource", resource),
                    ("action", action),
                ],
            ),
        ] {
            let r = self
                .http
                .post(self.url(path))
                .bearer_auth(admin)
                .form(&params)
                .send()
                .await?;
            let r = crate::api::Reply::read(r).await?;
            anyhow::ensure!(r.status == 200, "{path}: {} {}", r.status, r.body);
        }
        let r = self
            .http
            .post(self.url("/nacos/v1/auth/login"))
            .form(&[("username", name), ("password", password.as_str())])
            .send()
            .await?;
        let r = crate::api::Reply::read(r).await?;
        anyhow::ensure!(r.status == 200, "login of {name}: {} {}", r.status, r.body);
        Ok(r.json()?["accessToken"]
            .as_str()
            .context("no accessToken")?
            .to_string())
    }
}

/// Settings for a test server on `dir` (127.0.0.1, port 0), adjusted by `tweak`.
pub fn settings_for(dir: &Path, tweak: impl FnOnce(&mut Settings)) -> Settings {
    let mut settings = Settings {
        data_dir: dir.to_path_buf(),
        bind: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        port: 0,
        // Tests of other features run without authentication; auth tests turn it on.
        auth: nacelle::settings::AuthSettings::off(),
        ..Settings::default()
    };
    tweak(&mut settings);
    settings
}

/// The real `nacelle` binary running as a child process; killed when dropped.
#[derive(Debug)]
pub struct BinaryServer {
    /// The process.
    pub child: Child,
    /// Its HTTP address, read from its log.
    pub addr: SocketAddr,
    /// A client of its HTTP API.
    pub api: Api,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// The last lines of its log ([`BinaryServer::log_tail`]).
    log: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
}

/// Lines of a child's log kept for [`BinaryServer::log_tail`].
const LOG_KEPT: usize = 5000;

impl BinaryServer {
    /// Runs `EXE serve --data-dir DIR --bind 127.0.0.1 --port 0 --grpc-port 0 EXTRA…` (the
    /// ports only unless `extra` chooses them) and reads the bound address from its log.
    /// `exe` is the binary Cargo built for the test: `env!("CARGO_BIN_EXE_nacelle")`.
    pub fn spawn(exe: &str, data_dir: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        let mut defaults: Vec<&str> = Vec::new();
        if !extra.contains(&"--port") {
            defaults.extend(["--port", "0"]);
        }
        if !extra.contains(&"--grpc-port") {
            defaults.extend(["--grpc-port", "0"]);
        }
        // Tests of other features run without authentication; auth tests pass `--auth on`.
        if !extra.contains(&"--auth") {
            defaults.extend(["--auth", "off"]);
        }
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(&defaults)
            .args(["--bind", "127.0.0.1", "--log-format", "json"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("running {exe}"))?;
        let stderr = child.stderr.take().context("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            let mut early = Vec::new();
            // Reads the log to its end, so the child never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                {
                    let mut kept = kept
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if kept.len() == LOG_KEPT {
                        kept.pop_front();
                    }
                    kept.push_back(line.clone());
                }
                if !sent {
                    if let Some(i) = line.find("http listening on ") {
                        let rest = &line[i + "http listening on ".len()..];
                        let addr: String = rest
                            .chars()
                            .take_while(|c| !c.is_whitespace() && *c != '"')
                            .collect();
                        sent = tx.send(Ok(addr)).is_ok();
                    } else {
                        early.push(line);
                    }
                }
            }
            if !sent {
                // Err: the test stopped waiting (it timed out and said so).
                let _not_waiting = tx.send(Err(early.join("\n")));
            }
        });
        let addr: SocketAddr = match rx.recv_timeout(Duration::from_secs(30))? {
            Ok(addr) => addr.parse()?,
            Err(log) => bail!("nacelle exited before listening:\n{log}"),
        };
        Ok(BinaryServer {
            child,
            addr,
            api: Api::new(addr)?,
            data_dir: data_dir.to_path_buf(),
            log,
        })
    }

    /// The last `n` lines of its log (of the last 5000 it wrote).
    pub fn log_tail(&self, n: usize) -> Vec<String> {
        let log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        log.iter()
            .skip(log.len().saturating_sub(n))
            .cloned()
            .collect()
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        self.api.url(path)
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for BinaryServer {
    fn drop(&mut self) {
        // Errors: the process already exited and was reaped (kill9, or the test waited).
        let _exited = self.child.kill();
        let _reaped = self.child.wait();
    }
}
