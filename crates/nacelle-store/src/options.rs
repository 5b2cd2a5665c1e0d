//! Pool and timeout settings of the networked backends, and the URL query parameters that
//! set them (stripped before the URL reaches sqlx, which parses the rest: TLS, time zone…).

use std::time::Duration;

use crate::OpenError;

/// Pool size and timeouts of the MySQL/MariaDB and PostgreSQL backends.
///
/// The defaults make a write fail within a few seconds when the database is down, rather
/// than hang: a down server refuses connections, and the pool gives up after
/// `acquire_timeout`; a server that stops answering on an open connection is cut off after
/// `op_timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Most connections the pool keeps open. URL parameter `max_connections`.
    pub max_connections: u32,
    /// How long an operation waits for a connection (opening one included) before it fails
    /// with `StoreError::Unavailable`. URL parameter `acquire_timeout_ms`.
    pub acquire_timeout: Duration,
    /// The longest one operation may take in all, waiting for a connection and for row
    /// locks included (the start-up loads may take 30 times this, a batch publish one per
    /// started 100 records: `deadline.rs`). Also bounds how long the database waits for a
    /// row lock. URL parameter `op_timeout_ms`.
    pub op_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(3),
            op_timeout: Duration::from_secs(10),
        }
    }
}

impl StoreOptions {
    /// Whole seconds the database should wait for a row lock: as long as an operation may
    /// take, so a stuck lock surfaces as an error at about the same time.
    pub(crate) fn lock_wait_secs(&self) -> u64 {
        self.op_timeout.as_secs().max(1)
    }
}

/// Our own query parameters.
const OUR_PARAMS: [&str; 3] = ["max_connections", "acquire_timeout_ms", "op_timeout_ms"];

/// Splits our parameters off `url`: returns the URL sqlx should see and the options with
/// the URL's values applied over `base`.
pub(crate) fn split_url(
    url: &str,
    base: &StoreOptions,
) -> Result<(String, StoreOptions), OpenError> {
    let mut opts = base.clone();
    let Some((head, query)) = url.split_once('?') else {
        return Ok((url.to_string(), opts));
    };
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if !OUR_PARAMS.contains(&k) {
            kept.push(pair);
            continue;
        }
        let n: u64 = v.parse().map_err(|_| {
            OpenError::InvalidUrl(format!("`{k}` must be a whole number, got `{v}`"))
        })?;
        if n == 0 {
            return Err(OpenError::InvalidUrl(format!("`{k}` must be above 0")));
        }
        match k {
            "max_connections" => {
                opts.max_connections = u32::try_from(n).map_err(|_| {
                    OpenError::InvalidUrl(format!("`max_connections` is too large: {n}"))
                })?
            }
            "acquire_timeout_ms" => opts.acquire_timeout = Duration::from_millis(n),
            _ => opts.op_timeout = Duration::from_millis(n),
        }
    }
    let url = if kept.is_empty() {
        head.to_string()
    } else {
        format!("{head}?{}", kept.join("&"))
    };
    Ok((url, opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_parameters_are_taken_out_and_others_kept() -> Result<(), OpenError> {
        let base = StoreOptions::default();
        let (url, o) = split_url(
            "mysql://root@h/db?ssl-mode=REQUIRED&max_connections=3&op_timeout_ms=2500&timezone=%2B08:00",
            &base,
        )?;
        assert_eq!(url, "mysql://root@h/db?ssl-mode=REQUIRED&timezone=%2B08:00");
        assert_eq!(o.max_connections, 3);
        assert_eq!(o.op_timeout, Duration::from_millis(2500));
        assert_eq!(o.acquire_timeout, base.acquire_timeout);

        let (url, o) = split_url("postgres://u@h/db?acquire_timeout_ms=100", &base)?;
        assert_eq!(url, "postgres://u@h/db");
        assert_eq!(o.acquire_timeout, Duration::from_millis(100));

        let (url, _) = split_url("postgres://u@h/db", &base)?;
        assert_eq!(url, "postgres://u@h/db");
        Ok(())
    }

    #[test]
    fn bad_values_are_rejected() {
        let base = StoreOptions::default();
        assert!(split_url("mysql://h/db?max_connections=x", &base).is_err());
        assert!(split_url("mysql://h/db?op_timeout_ms=0", &base).is_err());
        assert!(split_url("mysql://h/db?max_connections=99999999999", &base).is_err());
    }
}
