//! The databases suites run on, where their servers are, and whether one is skipped.
//!
//! MariaDB is found at `NACELLE_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306`),
//! PostgreSQL at `NACELLE_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432`).
//! The test command (`scripts/test.sh`) sets both to throwaway servers it starts for the
//! run (`scripts/test-databases.sh`) and stops after it.
//! Setting one to `skip` skips that backend: its tests report `SKIPPED` instead of running
//! (see [`crate::per_backend`]). A server that is configured but unreachable is not a skip:
//! the test fails and says how to start it or skip it.

use std::fmt;

/// A database backend of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// A file (the default backend).
    Sqlite,
    /// MariaDB (or MySQL).
    MariaDb,
    /// PostgreSQL.
    Postgres,
}

/// Where a backend's databases come from, as the environment decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A file in a tempdir; nothing to reach.
    File,
    /// A database server at this base URL (no database name, no trailing slash).
    Server(String),
    /// Skipped on purpose; the reason names the variable that says so.
    Skipped(String),
}

impl Backend {
    /// Every backend, in the order suites run them.
    pub const ALL: [Backend; 3] = [Backend::Sqlite, Backend::MariaDb, Backend::Postgres];

    /// The name used in test names and messages: `sqlite`, `mariadb`, `postgres`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::MariaDb => "mariadb",
            Backend::Postgres => "postgres",
        }
    }

    /// Milliseconds as this backend keeps them: MySQL's `DATETIME` holds whole seconds
    /// (Nacos's schema), the others keep milliseconds.
    pub fn stored_ms(self, ms: i64) -> i64 {
        match self {
            Backend::MariaDb => ms.div_euclid(1000) * 1000,
            _ => ms,
        }
    }

    /// The variable naming this backend's server and its default (`None` for SQLite).
    pub fn env_var(self) -> Option<(&'static str, &'static str)> {
        match self {
            Backend::Sqlite => None,
            Backend::MariaDb => Some(("NACELLE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306")),
            Backend::Postgres => Some((
                "NACELLE_TEST_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432",
            )),
        }
    }

    /// Where this backend's databases come from in this process's environment.
    pub fn target(self) -> Target {
        let value = self.env_var().and_then(|(var, _)| std::env::var(var).ok());
        self.target_from(value.as_deref())
    }

    /// [`Backend::target`] given the variable's value (pure, for tests): unset or empty
    /// means the default server, `skip` (any case) skips, anything else is the server's URL.
    pub fn target_from(self, value: Option<&str>) -> Target {
        let Some((var, default)) = self.env_var() else {
            return Target::File;
        };
        match value.map(str::trim) {
            Some(v) if v.eq_ignore_ascii_case("skip") => Target::Skipped(format!("{var}=skip")),
            Some(v) if !v.is_empty() => Target::Server(v.trim_end_matches('/').to_string()),
            _ => Target::Server(default.to_string()),
        }
    }

    /// How to make this backend's server reachable, or skip it: said when it cannot be
    /// reached.
    pub fn how_to_start(self) -> String {
        let start = match self {
            Backend::Sqlite => return String::new(),
            Backend::MariaDb | Backend::Postgres => {
                "start throwaway servers (`eval \"$(bash scripts/test-databases.sh start)\"`, \
                 as the test command `bash scripts/test.sh` does)"
            }
        };
        let (var, _) = self.env_var().unwrap_or_default();
        format!(
            "{start}, point {var} at a server, or set {var}=skip to skip the {self} tests \
             (reported as SKIPPED)"
        )
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "SQLite",
            Backend::MariaDb => "MariaDB",
            Backend::Postgres => "PostgreSQL",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_decides_the_target() {
        let maria = Backend::MariaDb;
        assert_eq!(
            maria.target_from(None),
            Target::Server("mysql://root@127.0.0.1:3306".into())
        );
        assert_eq!(maria.target_from(Some("")), maria.target_from(None));
        assert_eq!(
            maria.target_from(Some("mysql://u:p@db:3307/")),
            Target::Server("mysql://u:p@db:3307".into())
        );
        assert_eq!(
            maria.target_from(Some("skip")),
            Target::Skipped("NACELLE_TEST_MYSQL_URL=skip".into())
        );
        assert_eq!(
            Backend::Postgres.target_from(Some(" SKIP ")),
            Target::Skipped("NACELLE_TEST_POSTGRES_URL=skip".into())
        );
        assert_eq!(
            Backend::Postgres.target_from(None),
            Target::Server("postgres://postgres@127.0.0.1:5432".into())
        );
        // SQLite never skips and reaches nothing.
        assert_eq!(Backend::Sqlite.target_from(Some("skip")), Target::File);
    }

    #[test]
    fn mariadb_keeps_whole_seconds() {
        assert_eq!(
            Backend::MariaDb.stored_ms(1_700_000_000_123),
            1_700_000_000_000
        );
        assert_eq!(Backend::MariaDb.stored_ms(-1), -1000);
        assert_eq!(
            Backend::Postgres.stored_ms(1_700_000_000_123),
            1_700_000_000_123
        );
        assert_eq!(Backend::Sqlite.stored_ms(7), 7);
    }

    #[test]
    fn an_unreachable_server_says_how_to_start_or_skip_it() {
        let how = Backend::Postgres.how_to_start();
        assert!(how.contains("scripts/test-databases.sh"), "{how}");
        assert!(how.contains("NACELLE_TEST_POSTGRES_URL=skip"), "{how}");
    }
}
