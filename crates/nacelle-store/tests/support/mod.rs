//! Test databases and a cuttable TCP proxy, shared by the store's integration tests.
//!
//! Every test gets its own database (`nacelle_t_<pid>_<counter>_<random>`) on the machine's
//! MariaDB and PostgreSQL servers, dropped when its [`TestDb`] guard drops, also when the
//! test fails, so tests run in parallel. Servers are found at `NACELLE_TEST_MYSQL_URL`
//! (default `mysql://root@127.0.0.1:3306`) and `NACELLE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432`); setting one to `skip` skips that backend.

#![allow(dead_code)]

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use anyhow::Context;
use sqlx::{Connection, Executor};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The backends the suites run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    MySql,
    Postgres,
}

impl Backend {
    /// Milliseconds as the backend keeps them: MySQL's `DATETIME` holds whole seconds.
    pub fn stored_ms(self, ms: i64) -> i64 {
        match self {
            Backend::MySql => ms.div_euclid(1000) * 1000,
            _ => ms,
        }
    }

    /// The server's base URL (no database), or `None` when the backend is skipped.
    fn server(self) -> Option<String> {
        let (var, default) = match self {
            Backend::Sqlite => return None,
            Backend::MySql => ("NACELLE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306"),
            Backend::Postgres => (
                "NACELLE_TEST_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432",
            ),
        };
        match std::env::var(var) {
            Ok(v) if v == "skip" => None,
            Ok(v) if !v.is_empty() => Some(v.trim_end_matches('/').to_string()),
            _ => Some(default.to_string()),
        }
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn unique_name() -> String {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % 1_000_000;
    format!(
        "nacelle_t_{}_{}_{random}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A database of its own for one test; dropped with the guard.
#[derive(Debug)]
pub struct TestDb {
    pub backend: Backend,
    /// URL of the test database, for `nacelle_store::open`.
    pub url: String,
    /// Database name (MySQL/PostgreSQL).
    pub name: String,
    /// Server base URL (MySQL/PostgreSQL).
    server: Option<String>,
    /// Keeps the SQLite file's directory alive.
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// Creates the database, or returns `None` when the backend is skipped by env.
    pub async fn create(backend: Backend) -> anyhow::Result<Option<TestDb>> {
        if backend == Backend::Sqlite {
            let dir = tempfile::tempdir()?;
            let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
            return Ok(Some(TestDb {
                backend,
                url,
                name: String::new(),
                server: None,
                _dir: Some(dir),
            }));
        }
        let Some(server) = backend.server() else {
            eprintln!("{backend:?} skipped by environment");
            return Ok(None);
        };
        let name = unique_name();
        match backend {
            Backend::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(&server)
                    .await
                    .with_context(|| format!("connecting to MariaDB at {server}"))?;
                conn.execute(format!("CREATE DATABASE `{name}`").as_str())
                    .await?;
            }
            _ => {
                let mut conn = sqlx::PgConnection::connect(&format!("{server}/postgres"))
                    .await
                    .with_context(|| format!("connecting to PostgreSQL at {server}"))?;
                conn.execute(
                    format!("CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0")
                        .as_str(),
                )
                .await?;
            }
        }
        Ok(Some(TestDb {
            backend,
            url: format!("{server}/{name}"),
            name,
            server: Some(server),
            _dir: None,
        }))
    }

    /// The server's host:port (MySQL/PostgreSQL).
    pub fn server_addr(&self) -> anyhow::Result<SocketAddr> {
        let server = self.server.as_deref().context("no server")?;
        let after_scheme = server.split_once("://").map(|(_, r)| r).unwrap_or(server);
        let host_port = after_scheme
            .rsplit_once('@')
            .map(|(_, h)| h)
            .unwrap_or(after_scheme);
        let host_port = host_port.split('/').next().unwrap_or(host_port);
        Ok(host_port.replace("localhost", "127.0.0.1").parse()?)
    }

    /// The test database's URL with the server's address replaced by `addr`.
    pub fn url_via(&self, addr: SocketAddr) -> anyhow::Result<String> {
        let server = self.server_addr()?;
        let original = self.url.replacen(&server.to_string(), &addr.to_string(), 1);
        anyhow::ensure!(
            original != self.url,
            "server address not found in {}",
            self.url
        );
        Ok(original)
    }

    /// A direct connection to the test database, for looking at raw rows.
    pub async fn mysql(&self) -> anyhow::Result<sqlx::MySqlConnection> {
        Ok(sqlx::MySqlConnection::connect(&self.url).await?)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(server) = self.server.clone() else {
            return;
        };
        let (backend, name) = (self.backend, self.name.clone());
        // Drop runs inside the test's runtime, which cannot block on async work: use a
        // thread with a runtime of its own.
        let dropped = std::thread::spawn(move || -> anyhow::Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                if backend == Backend::MySql {
                    let mut conn = sqlx::MySqlConnection::connect(&server).await?;
                    conn.execute(format!("DROP DATABASE IF EXISTS `{name}`").as_str())
                        .await?;
                } else {
                    let mut conn =
                        sqlx::PgConnection::connect(&format!("{server}/postgres")).await?;
                    conn.execute(
                        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)").as_str(),
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not drop test database {}: {e:#}", self.name),
            Err(_) => eprintln!("dropping test database {} panicked", self.name),
        }
    }
}

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyMode {
    /// Forward both ways.
    Up,
    /// Close every connection and refuse new ones (a database that is down).
    Refuse,
    /// Keep connections open but forward nothing (a network that stopped delivering).
    Blackhole,
}

/// A TCP proxy in front of a database server that a test can cut and restore. Leaving
/// `Refuse` or `Blackhole` closes the connections held during it, like a network blip.
#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    mode: Arc<watch::Sender<ProxyMode>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, _) = watch::channel(ProxyMode::Up);
        let mode = Arc::new(tx);
        let accept_mode = mode.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut rx = accept_mode.subscribe();
                let current = *rx.borrow_and_update();
                match current {
                    ProxyMode::Refuse => drop(client),
                    ProxyMode::Blackhole => {
                        tokio::spawn(async move {
                            // Hold the socket until the mode changes, then close it.
                            let _held = client;
                            // Err: the proxy is gone; closing the socket is right either way.
                            let _ = rx.changed().await;
                        });
                    }
                    ProxyMode::Up => {
                        tokio::spawn(async move {
                            let Ok(mut server) = TcpStream::connect(target).await else {
                                return;
                            };
                            let mut client = client;
                            let pipe = tokio::io::copy_bidirectional(&mut client, &mut server);
                            tokio::pin!(pipe);
                            loop {
                                tokio::select! {
                                    _ = &mut pipe => return,
                                    changed = rx.changed() => {
                                        if changed.is_err() {
                                            return;
                                        }
                                        match *rx.borrow_and_update() {
                                            ProxyMode::Up => {}
                                            ProxyMode::Refuse => return,
                                            ProxyMode::Blackhole => break,
                                        }
                                    }
                                }
                            }
                            // Blackhole: stop forwarding, hold both sockets until the next
                            // change (or until the proxy is gone: Err), then close them.
                            let _ = rx.changed().await;
                        });
                    }
                }
            }
        });
        Ok(Proxy { addr, mode, task })
    }

    pub fn set(&self, mode: ProxyMode) {
        self.mode.send_replace(mode);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
