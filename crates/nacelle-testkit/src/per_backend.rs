//! The one way to run a test body on every backend, and the one place a skip is reported.
//!
//! `per_backend!(name)` turns `async fn name(backend: Backend) -> Result<(), E>` into the
//! tests `name::sqlite`, `name::mariadb` and `name::postgres`. A backend skipped by the
//! environment (`NACELLE_TEST_MYSQL_URL=skip`…) does not show as a silent pass: the test
//! writes `SKIPPED <test> (<reason>)` straight to stderr (past libtest's capture) and
//! `.ci/run` counts those lines in its summary. A server that is not skipped but cannot be
//! reached fails the test when it creates its database ([`crate::TestDb::create`]).

use std::future::Future;
use std::io::Write;

use crate::backend::{Backend, Target};
use crate::BoxError;

/// Runs `body` on `backend`, or reports the skip when the environment skips `backend`.
pub async fn run_on<F, Fut, E>(backend: Backend, body: F) -> Result<(), BoxError>
where
    F: FnOnce(Backend) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Into<BoxError>,
{
    if skipped(backend) {
        return Ok(());
    }
    body(backend).await.map_err(Into::into)
}

/// Whether the environment skips `backend`; when it does, reports the current test as
/// skipped. For tests of one backend that are not run through [`run_on`]:
/// `if nacelle_testkit::per_backend::skipped(Backend::MariaDb) { return Ok(()); }`.
pub fn skipped(backend: Backend) -> bool {
    let Target::Skipped(reason) = backend.target() else {
        return false;
    };
    let thread = std::thread::current();
    let line = skip_line(thread.name().unwrap_or("<test>"), &reason);
    // Straight to the process's stderr: `eprintln!` would be captured and hidden by
    // libtest for a test that passes. Nothing is left to do if stderr itself is gone.
    let _stderr_gone = std::io::stderr().write_all(line.as_bytes());
    true
}

/// The line a skipped test writes (what `.ci/run` counts).
pub fn skip_line(test: &str, reason: &str) -> String {
    format!("SKIPPED {test} ({reason})\n")
}

/// Runs a body on every backend: expands to a module `NAME` with the tests `sqlite`,
/// `mariadb` and `postgres` (`cargo test` shows `NAME::mariadb`…), each through
/// [`run_on`](crate::run_on).
///
/// - `per_backend!(name);` for `async fn name(backend: Backend) -> Result<(), E>`;
/// - `per_backend!(name, flavor = "multi_thread", worker_threads = 2);` passes the
///   arguments to `#[tokio::test(…)]`;
/// - `per_backend!(with runner: a, b, c; flavor = "multi_thread");` runs each body through
///   `async fn runner(backend, body)` (e.g. one that opens a store for the body).
#[macro_export]
macro_rules! per_backend {
    (with $runner:ident: $($name:ident),+ $(,)? $(; $($arg:tt)+)?) => {
        $crate::per_backend!(@each $runner, [$($($arg)+)?], $($name),+);
    };
    (@each $runner:ident, $args:tt, $($name:ident),+) => {
        $(
            $crate::per_backend!(
                @module $name,
                (|backend| super::$runner(backend, super::$name)),
                $args
            );
        )+
    };
    (@module $name:ident, ($($call:tt)+), [$($arg:tt)*]) => {
        mod $name {
            #[tokio::test($($arg)*)]
            async fn sqlite() -> ::std::result::Result<(), $crate::BoxError> {
                $crate::run_on($crate::Backend::Sqlite, $($call)+).await
            }

            #[tokio::test($($arg)*)]
            async fn mariadb() -> ::std::result::Result<(), $crate::BoxError> {
                $crate::run_on($crate::Backend::MariaDb, $($call)+).await
            }

            #[tokio::test($($arg)*)]
            async fn postgres() -> ::std::result::Result<(), $crate::BoxError> {
                $crate::run_on($crate::Backend::Postgres, $($call)+).await
            }
        }
    };
    ($name:ident $(, $($arg:tt)+)?) => {
        $crate::per_backend!(@module $name, (super::$name), [$($($arg)+)?]);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_names_the_test_and_the_reason() {
        assert_eq!(
            skip_line("outage::mariadb", "NACELLE_TEST_MYSQL_URL=skip"),
            "SKIPPED outage::mariadb (NACELLE_TEST_MYSQL_URL=skip)\n"
        );
    }

    async fn body(backend: Backend) -> anyhow::Result<()> {
        anyhow::ensure!(backend != Backend::Postgres, "fails on {backend}");
        Ok(())
    }

    async fn through(backend: Backend, f: fn(Backend) -> BodyFuture) -> anyhow::Result<()> {
        f(backend).await
    }

    type BodyFuture = std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

    fn boxed(backend: Backend) -> BodyFuture {
        Box::pin(body(backend))
    }

    #[tokio::test]
    async fn run_on_passes_the_body_s_result_on() {
        // SQLite is never skipped, so the body always runs.
        assert!(run_on(Backend::Sqlite, body).await.is_ok());
        assert!(run_on(Backend::Sqlite, |b| through(b, boxed)).await.is_ok());
        if !matches!(Backend::Postgres.target(), Target::Skipped(_)) {
            let err = run_on(Backend::Postgres, body).await.err();
            assert_eq!(
                err.map(|e| e.to_string()).as_deref(),
                Some("fails on PostgreSQL")
            );
        }
    }
}
