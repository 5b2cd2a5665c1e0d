//! Test support of the Nacelle workspace, written once: a dev-only crate, only ever a
//! `[dev-dependencies]` entry, never published.
//!
//! # Layout
//! - [`backend`]: the databases suites run on ([`Backend`]: SQLite, MariaDB, PostgreSQL),
//!   where their servers are (`NACELLE_TEST_MYSQL_URL`, `NACELLE_TEST_POSTGRES_URL`) and the
//!   decision whether a backend is skipped.
//! - [`db`]: [`TestDb`], a database of its own per test (a uniquely named database on
//!   MariaDB/PostgreSQL, dropped when the guard drops, also when the test fails; a fresh
//!   SQLite file in a tempdir).
//! - [`proxy`]: [`Proxy`], a TCP proxy in front of a database that a test cuts, blackholes
//!   and restores.
//! - [`mod@per_backend`]: [`per_backend!`] and [`run_on`], the one way to run a test body
//!   on every backend; a skipped backend is reported (`SKIPPED <test> (<reason>)` on
//!   stderr, counted by `.ci/run`), an unreachable one fails the test.
//! - [`api`]: [`Api`], a small client of the Nacos HTTP API (publish, get, delete, search,
//!   long polls) returning status and body.
//! - `service` (feature `service`): the config service over a SQLite file, and publishing
//!   through it.
//! - `grpc` (feature `grpc`): a gRPC-only server over that service, and the real Rust client
//!   (`nacos-sdk`) with a listener recording what it is told.
//! - `server` (feature `server`): the whole server in-process on port 0, or the real
//!   binary as a child process.
//!
//! Every function returns `anyhow::Result`; its errors convert into the
//! `Box<dyn Error + Send + Sync>` some suites return ([`BoxError`]).

pub mod api;
pub mod backend;
pub mod db;
pub mod logs;
pub mod per_backend;
pub mod proxy;

#[cfg(feature = "grpc")]
pub mod grpc;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "service")]
pub mod service;

use std::time::Duration;

pub use api::{listening_configs, Api, Reply};
pub use backend::Backend;
pub use db::TestDb;
pub use per_backend::run_on;
pub use proxy::{Proxy, ProxyMode};

/// The error type of a test: what `?` turns any error into.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The result of a test (or a helper) of the suites that return [`BoxError`].
pub type TestResult<T = ()> = Result<T, BoxError>;

/// A generous bound for anything that should happen "soon": a hang detector, not a timing
/// assertion.
pub const SOON: Duration = Duration::from_secs(30);

/// Lowercase hex md5 of `s`, as the server computes it.
pub fn md5(s: &str) -> String {
    nacelle_core::md5_hex(s.as_bytes())
}

/// A free TCP port on 127.0.0.1 (bound, then released; fine for tests).
pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Prints min/median/max of measured latencies (tests print times, they do not assert
/// them).
pub fn print_latencies(what: &str, mut samples: Vec<Duration>) {
    if samples.is_empty() {
        return;
    }
    samples.sort();
    let n = samples.len();
    println!(
        "{what}: n={n} min={:?} median={:?} max={:?}",
        samples[0],
        samples[n / 2],
        samples[n - 1]
    );
}
