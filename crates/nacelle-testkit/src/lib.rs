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
//! - [`galera`]: [`Galera`], a MariaDB Galera cluster of its own (Debian's mariadbd and
//!   galera-4) whose nodes a test SIGKILLs and brings back (IST).
//! - [`standby`]: [`PgStandby`], a PostgreSQL primary with a synchronous streaming
//!   standby behind HAProxy, whose primary a test kills and whose standby it promotes.
//! - [`daemon`]: what those two share: child processes killed by PID on drop, Debian's
//!   binaries, running as the `mysql`/`postgres` user under root.
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
pub mod daemon;
pub mod db;
pub mod galera;
pub mod logs;
pub mod per_backend;
pub mod proxy;
pub mod standby;

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
pub use galera::Galera;
pub use per_backend::run_on;
pub use proxy::{Proxy, ProxyMode};
pub use standby::PgStandby;

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

/// The ports [`free_port`] hands out: below the kernel's ephemeral range (32768–60999 by
/// default), so no outgoing connection of any process can take one between the check and
/// the server's bind, and apart from the throwaway database servers'
/// (`scripts/test-databases.sh`: 15000–19999) and the Java and Go suites' (20000–30999).
pub const TEST_PORTS: std::ops::Range<u16> = 10_000..15_000;

/// A free TCP port on 127.0.0.1 for a server that must be told its port before it starts
/// (a cluster member, whose peers need it; a binary with `--port`). Servers that can bind
/// port 0 and report it should do that instead.
///
/// The port is below the ephemeral range ([`TEST_PORTS`]), was free when checked, and is
/// never handed out twice by one process. Tests of one binary run as threads of one
/// process, and Cargo runs test binaries one at a time, so two tests never get the same
/// port.
pub fn free_port() -> anyhow::Result<u16> {
    free_port_with(&[])
}

/// A port as [`free_port`] gives, with `port + offset` free and reserved too for each of
/// `offsets` (a Nacos node binds HTTP + 1000 and HTTP + 1001 unless told otherwise).
pub fn free_port_with(offsets: &[u16]) -> anyhow::Result<u16> {
    use std::hash::{BuildHasher, Hasher};
    // Every port handed out by this process, with its offsets; a walk from a random start
    // (so that two processes started together rarely try the same ports first).
    static TAKEN: std::sync::Mutex<Option<(u16, std::collections::HashSet<u16>)>> =
        std::sync::Mutex::new(None);
    let span = TEST_PORTS.end - TEST_PORTS.start;
    let mut guard = TAKEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (next, taken) = guard.get_or_insert_with(|| {
        let start = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
            % u64::from(span);
        (
            u16::try_from(start).unwrap_or(0),
            std::collections::HashSet::new(),
        )
    });
    let free = |port: u16, taken: &std::collections::HashSet<u16>| {
        !taken.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
    };
    for _ in 0..span {
        let port = TEST_PORTS.start + *next % span;
        *next = (*next + 1) % span;
        let all: Option<Vec<u16>> = std::iter::once(Some(port))
            .chain(offsets.iter().map(|o| port.checked_add(*o)))
            .collect();
        let Some(all) = all else { continue };
        if all.iter().all(|p| free(*p, taken)) {
            taken.extend(all);
            return Ok(port);
        }
    }
    anyhow::bail!("no free port in {TEST_PORTS:?} (with offsets {offsets:?})")
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
