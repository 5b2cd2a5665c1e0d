//! One database per test: a uniquely named database on the MariaDB or PostgreSQL server
//! (created by [`TestDb::create`], dropped when the guard drops, also when the test fails
//! or panics, so tests run in parallel), or a fresh SQLite file in a tempdir.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context};
use sqlx::{Connection, Executor};

use crate::backend::{Backend, Target};

/// A database of its own for one test; the database (or the SQLite file's directory) goes
/// when this drops.
#[derive(Debug)]
pub struct TestDb {
    /// The backend it lives on.
    pub backend: Backend,
    /// Its URL, for `nacelle_store::open` or the server's `--db`.
    pub url: String,
    /// The database's name on the server (empty for SQLite).
    pub name: String,
    /// The server's base URL (MariaDB/PostgreSQL), to drop the database through.
    server: Option<String>,
    /// Keeps the SQLite file's directory alive.
    dir: Option<tempfile::TempDir>,
}

/// `nacelle_t_<pid>_<counter>_<random>`: unique across the tests of a process (the
/// counter) and across processes and runs (pid, random), and a plain identifier within
/// the 63 characters PostgreSQL allows.
pub fn unique_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
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

impl TestDb {
    /// Creates a database of its own on `backend`. Fails when the backend's server cannot
    /// be reached (saying how to start it or skip it), and when the backend is skipped by
    /// the environment: a test that needs a skipped backend must be run through
    /// [`crate::run_on`] or [`crate::per_backend!`], which report the skip.
    pub async fn create(backend: Backend) -> anyhow::Result<TestDb> {
        let server = match backend.target() {
            Target::File => {
                let dir = tempfile::tempdir()?;
                let url = format!("sqlite://{}", dir.path().join("db.sqlite").display());
                return Ok(TestDb {
                    backend,
                    url,
                    name: String::new(),
                    server: None,
                    dir: Some(dir),
                });
            }
            Target::Skipped(reason) => bail!(
                "{backend} is skipped ({reason}) but this test was not run through \
                 nacelle_testkit::run_on or per_backend!, which report the skip"
            ),
            Target::Server(server) => server,
        };
        let name = unique_name();
        let create = match backend {
            Backend::MariaDb => format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"),
            _ => format!("CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0"),
        };
        execute(backend, &server, &create).await.with_context(|| {
            format!(
                "cannot create a test database on {backend} at {server}: {}",
                backend.how_to_start()
            )
        })?;
        Ok(TestDb {
            backend,
            url: format!("{server}/{name}"),
            name,
            server: Some(server),
            dir: None,
        })
    }

    /// A database for a server under test: `None` on SQLite, where the server keeps its
    /// file in its own data directory; a database of its own otherwise.
    pub async fn for_server(backend: Backend) -> anyhow::Result<Option<TestDb>> {
        match backend {
            Backend::Sqlite => Ok(None),
            _ => TestDb::create(backend).await.map(Some),
        }
    }

    /// The SQLite file (`None` on the server backends).
    pub fn path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.path().join("db.sqlite"))
    }

    /// The directory holding the SQLite file (`None` on the server backends).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(tempfile::TempDir::path)
    }

    /// The server's host:port (MariaDB/PostgreSQL), e.g. to put a [`crate::Proxy`] in front.
    pub fn server_addr(&self) -> anyhow::Result<SocketAddr> {
        let server = self.server.as_deref().context("SQLite has no server")?;
        host_port(server)
    }

    /// This database's URL with the server's address replaced by `addr` (a proxy's).
    pub fn url_via(&self, addr: SocketAddr) -> anyhow::Result<String> {
        let server = self.server.as_deref().context("SQLite has no server")?;
        url_via(server, &self.name, addr)
    }

    /// A direct connection to a MariaDB test database, for looking at raw rows.
    pub async fn mysql(&self) -> anyhow::Result<sqlx::MySqlConnection> {
        Ok(sqlx::MySqlConnection::connect(&self.url).await?)
    }

    /// A direct connection to a PostgreSQL test database, for looking at raw rows.
    pub async fn postgres(&self) -> anyhow::Result<sqlx::PgConnection> {
        Ok(sqlx::PgConnection::connect(&self.url).await?)
    }
}

/// Runs one statement on the server (not in a test database).
async fn execute(backend: Backend, server: &str, statement: &str) -> anyhow::Result<()> {
    if backend == Backend::MariaDb {
        let mut conn = sqlx::MySqlConnection::connect(server).await?;
        if let Some(name) = statement.strip_prefix("DROP DATABASE IF EXISTS `") {
            // As PostgreSQL's `WITH (FORCE)`: end the sessions still on the database. A
            // server dropped without shutdown (its tasks stopped with the test's runtime,
            // which this drop blocks) may leave one inside a transaction, whose metadata
            // locks would keep the `DROP` waiting forever.
            let name = name.trim_end_matches('`');
            let ids: Vec<i64> = sqlx::query_scalar(
                "SELECT CAST(id AS SIGNED) FROM information_schema.PROCESSLIST WHERE db = ?",
            )
            .bind(name)
            .fetch_all(&mut conn)
            .await?;
            for id in ids {
                // Gone meanwhile is fine.
                let _ended = conn.execute(format!("KILL {id}").as_str()).await;
            }
        }
        conn.execute(statement).await?;
        conn.close().await?;
    } else {
        let mut conn = sqlx::PgConnection::connect(&format!("{server}/postgres")).await?;
        conn.execute(statement).await?;
        conn.close().await?;
    }
    Ok(())
}

/// The `host:port` of a server URL (`scheme://[user[:pw]@]host:port[/…]`).
fn host_port(server: &str) -> anyhow::Result<SocketAddr> {
    let after_scheme = server.split_once("://").map_or(server, |(_, r)| r);
    let host_port = after_scheme
        .rsplit_once('@')
        .map_or(after_scheme, |(_, h)| h);
    let host_port = host_port.split('/').next().unwrap_or(host_port);
    host_port
        .replace("localhost", "127.0.0.1")
        .parse()
        .with_context(|| format!("no host:port in {server}"))
}

/// `server/name` with the server's host:port replaced by `addr`.
fn url_via(server: &str, name: &str, addr: SocketAddr) -> anyhow::Result<String> {
    let after_scheme = server.split_once("://").map_or(server, |(_, r)| r);
    let original = after_scheme
        .rsplit_once('@')
        .map_or(after_scheme, |(_, h)| h);
    let original = original.split('/').next().unwrap_or(original);
    let via = server.replacen(original, &addr.to_string(), 1);
    if via == server && original != addr.to_string() {
        bail!("server address not found in {server}");
    }
    Ok(format!("{via}/{name}"))
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(server) = self.server.clone() else {
            return;
        };
        let (backend, name) = (self.backend, self.name.clone());
        let statement = match backend {
            Backend::MariaDb => format!("DROP DATABASE IF EXISTS `{name}`"),
            _ => format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        };
        // Drop may run inside a test's runtime, which cannot block on async work: use a
        // thread with a runtime of its own.
        let dropped = std::thread::spawn(move || -> anyhow::Result<()> {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(execute(backend, &server, &statement))
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not drop test database {}: {e:#}", self.name),
            Err(_) => eprintln!("dropping test database {} panicked", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_plain_identifiers() {
        let a = unique_name();
        let b = unique_name();
        assert_ne!(a, b);
        for n in [&a, &b] {
            assert!(n.starts_with("nacelle_t_"), "{n}");
            assert!(n.len() <= 63, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{n}"
            );
        }
    }

    #[test]
    fn urls_through_a_proxy() -> anyhow::Result<()> {
        let proxy: SocketAddr = "127.0.0.1:40000".parse()?;
        assert_eq!(
            url_via("mysql://root@127.0.0.1:3306", "db1", proxy)?,
            "mysql://root@127.0.0.1:40000/db1"
        );
        assert_eq!(
            url_via("postgres://u:p@localhost:5432", "db2", proxy)?,
            "postgres://u:p@127.0.0.1:40000/db2"
        );
        assert_eq!(
            host_port("postgres://postgres@127.0.0.1:5432")?,
            "127.0.0.1:5432".parse::<SocketAddr>()?
        );
        assert_eq!(
            host_port("mysql://localhost:3307")?,
            "127.0.0.1:3307".parse::<SocketAddr>()?
        );
        Ok(())
    }
}
