//! Test support: start a real server (in-process on port 0, or the real binary) on a fresh
//! data directory, and talk to it over HTTP.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nacelle::{RunningServer, Settings};

pub mod python;

/// Result type of tests.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The database a test server runs on. Suites written once run on each (see
/// [`per_backend!`]); the server backends get a database of their own per test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A file in the server's data directory (the default).
    Sqlite,
    /// The machine's MariaDB (127.0.0.1:3306, root).
    MariaDb,
    /// The machine's PostgreSQL (127.0.0.1:5432, postgres).
    Postgres,
}

impl Backend {
    /// Creates a database of its own for one test on a server backend (`None` for SQLite,
    /// whose file lives in the data directory).
    pub fn create_database(self) -> TestResult<Option<TestDatabase>> {
        match self {
            Backend::Sqlite => Ok(None),
            Backend::MariaDb => TestDatabase::create(DbKind::MariaDb).map(Some),
            Backend::Postgres => TestDatabase::create(DbKind::Postgres).map(Some),
        }
    }

    /// A time in ms as this backend keeps it: MySQL's `DATETIME` holds whole seconds
    /// (Nacos's schema), the others keep milliseconds.
    pub fn stored_ms(self, ms: i64) -> i64 {
        match self {
            Backend::MariaDb => ms.div_euclid(1000) * 1000,
            _ => ms,
        }
    }
}

/// Runs an `async fn NAME(backend: Backend) -> TestResult` on every backend: expands to a
/// module `NAME` with the tests `sqlite`, `mariadb` and `postgres` (shown by `cargo test`
/// as `NAME::mariadb`…). Optional arguments go to `#[tokio::test(…)]`:
/// `per_backend!(name, flavor = "multi_thread", worker_threads = 2);`.
#[allow(unused_macros)]
macro_rules! per_backend {
    ($name:ident $(, $($arg:tt)+)?) => {
        mod $name {
            #[tokio::test$(($($arg)+))?]
            async fn sqlite() -> $crate::common::TestResult {
                super::$name($crate::common::Backend::Sqlite).await
            }

            #[tokio::test$(($($arg)+))?]
            async fn mariadb() -> $crate::common::TestResult {
                super::$name($crate::common::Backend::MariaDb).await
            }

            #[tokio::test$(($($arg)+))?]
            async fn postgres() -> $crate::common::TestResult {
                super::$name($crate::common::Backend::Postgres).await
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use per_backend;

/// A server started in-process on 127.0.0.1 with port 0 over a temporary data directory,
/// on SQLite (in the data directory) or on a database of its own on MariaDB or PostgreSQL.
pub struct TestServer {
    pub server: Option<RunningServer>,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
    pub backend: Backend,
    /// The server backend's database; declared last so it is dropped after the server.
    pub db: Option<TestDatabase>,
}

impl TestServer {
    /// Starts with default settings on SQLite.
    pub async fn start() -> TestResult<Self> {
        Self::start_with(|_| {}).await
    }

    /// Starts on SQLite with settings adjusted by `tweak` (data dir, bind and port are set
    /// first).
    pub async fn start_with(tweak: impl FnOnce(&mut Settings)) -> TestResult<Self> {
        Self::start_with_on(Backend::Sqlite, tweak).await
    }

    /// Starts with default settings on `backend`.
    pub async fn start_on(backend: Backend) -> TestResult<Self> {
        Self::start_with_on(backend, |_| {}).await
    }

    /// Starts on `backend` (a fresh database for MariaDB and PostgreSQL) with settings
    /// adjusted by `tweak` (data dir, bind, port and db are set first).
    pub async fn start_with_on(
        backend: Backend,
        tweak: impl FnOnce(&mut Settings),
    ) -> TestResult<Self> {
        let dir = tempfile::tempdir()?;
        let db = backend.create_database()?;
        let settings = settings_for(dir.path(), |s| {
            s.db = db.as_ref().map(TestDatabase::url);
            tweak(s);
        });
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
            backend,
            db,
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
        // Port 0 for HTTP and gRPC unless the caller chose ports.
        let mut defaults: Vec<&str> = Vec::new();
        if !extra.contains(&"--port") {
            defaults.extend(["--port", "0"]);
        }
        if !extra.contains(&"--grpc-port") {
            defaults.extend(["--grpc-port", "0"]);
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_nacelle"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(&defaults)
            .args(["--bind", "127.0.0.1", "--log-format", "json"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            let mut early = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
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
                let _ = tx.send(Err(early.join("\n")));
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(30))? {
            Ok(addr) => addr.parse()?,
            Err(log) => return Err(format!("nacelle exited before listening:\n{log}").into()),
        };
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

/// A free TCP port on 127.0.0.1 (bound, then released; fine for tests).
pub fn free_port() -> TestResult<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// A database of its own on the machine's MariaDB or PostgreSQL, dropped when this is
/// dropped.
pub struct TestDatabase {
    pub name: String,
    pub kind: DbKind,
}

/// Which server a [`TestDatabase`] lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    MariaDb,
    Postgres,
}

impl TestDatabase {
    /// Creates a uniquely named database.
    pub fn create(kind: DbKind) -> TestResult<Self> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "nacelle_it_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        let db = TestDatabase { name, kind };
        let create = match kind {
            DbKind::MariaDb => format!("CREATE DATABASE {} CHARACTER SET utf8mb4", db.name),
            DbKind::Postgres => format!(
                "CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0",
                db.name
            ),
        };
        db.sql(&create, kind == DbKind::MariaDb)?;
        Ok(db)
    }

    fn sql(&self, statement: &str, mysql: bool) -> TestResult {
        let out = if mysql {
            Command::new("mysql")
                .args(["-uroot", "-h127.0.0.1", "-P3306", "-e", statement])
                .output()?
        } else {
            Command::new("psql")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-c",
                    statement,
                ])
                .output()?
        };
        if !out.status.success() {
            return Err(format!(
                "`{statement}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(())
    }

    /// The URL of this database, optionally through another port (a proxy).
    pub fn url_via(&self, port: u16) -> String {
        match self.kind {
            DbKind::MariaDb => format!("mysql://root@127.0.0.1:{port}/{}", self.name),
            DbKind::Postgres => format!("postgres://postgres@127.0.0.1:{port}/{}", self.name),
        }
    }

    /// The URL of this database.
    pub fn url(&self) -> String {
        self.url_via(match self.kind {
            DbKind::MariaDb => 3306,
            DbKind::Postgres => 5432,
        })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let stmt = match self.kind {
            DbKind::MariaDb => format!("DROP DATABASE IF EXISTS {}", self.name),
            DbKind::Postgres => format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        };
        let _ = self.sql(&stmt, self.kind == DbKind::MariaDb);
    }
}

/// A TCP proxy in front of a database whose connections the test can cut and restore.
pub struct CuttableProxy {
    pub port: u16,
    state: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
    task: tokio::task::JoinHandle<()>,
}

impl CuttableProxy {
    /// Proxies 127.0.0.1:<port> to `target`. The watch value is a generation: odd = cut.
    pub async fn start(target: SocketAddr) -> TestResult<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (tx, _) = tokio::sync::watch::channel(0u64);
        let state = std::sync::Arc::new(tx);
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let gen = *st.borrow();
                if gen % 2 == 1 {
                    drop(inbound);
                    continue;
                }
                let mut rx = st.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = rx.wait_for(|g| *g != gen) => {}
                    }
                });
            }
        });
        Ok(CuttableProxy { port, state, task })
    }

    /// Drops every proxied connection and refuses new ones.
    pub fn cut(&self) {
        self.state.send_modify(|g| {
            if *g % 2 == 0 {
                *g += 1
            }
        });
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.state.send_modify(|g| {
            if *g % 2 == 1 {
                *g += 1
            }
        });
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
