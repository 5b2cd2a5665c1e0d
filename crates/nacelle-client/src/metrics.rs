//! The metrics hook: the client reports what it does as [`MetricEvent`]s to a [`Metrics`]
//! sink the application installs (`ClientBuilder::metrics`), which may count them in any
//! metrics library. No sink: nothing is recorded.

use std::fmt;
use std::time::Duration;

use crate::key::Key;

/// One thing the client did.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum MetricEvent<'a> {
    /// A request to the server ended (`kind`: `query`, `publish`, `remove`, `listen`,
    /// `health`, or an HTTP call's name).
    Request {
        /// What was asked.
        kind: &'static str,
        /// How long it took.
        elapsed: Duration,
        /// Whether it succeeded.
        ok: bool,
    },
    /// A connection to a server was registered.
    Connected {
        /// `host:grpc_port`.
        server: &'a str,
    },
    /// The connection to a server ended (closed, reset, keepalive failed).
    Disconnected {
        /// `host:grpc_port`.
        server: &'a str,
    },
    /// The client logged in (first login or token refresh).
    Login {
        /// `host:http_port` of the server that answered.
        server: &'a str,
        /// The token's lifetime in seconds.
        ttl_s: u64,
    },
    /// A changed value of a listened key was delivered to its listeners.
    Change {
        /// The key.
        key: &'a Key,
    },
    /// A bound value was replaced by a new good version.
    Reloaded {
        /// The key that changed.
        key: &'a Key,
    },
    /// A new version of a bound key failed to parse or validate; the last good value
    /// stays.
    Rejected {
        /// The key that changed.
        key: &'a Key,
    },
}

/// A sink of [`MetricEvent`]s. Any `Fn(&MetricEvent)` is one.
pub trait Metrics: Send + Sync {
    /// Records one event. Called on the client's tasks: keep it short, never block.
    fn record(&self, event: &MetricEvent<'_>);
}

impl<F> Metrics for F
where
    F: Fn(&MetricEvent<'_>) + Send + Sync,
{
    fn record(&self, event: &MetricEvent<'_>) {
        self(event)
    }
}

/// The installed sink, or none.
#[derive(Clone, Default)]
pub(crate) struct Sink(Option<std::sync::Arc<dyn Metrics>>);

impl Sink {
    pub(crate) fn new(m: Option<std::sync::Arc<dyn Metrics>>) -> Self {
        Sink(m)
    }

    pub(crate) fn record(&self, event: MetricEvent<'_>) {
        if let Some(m) = &self.0 {
            m.record(&event);
        }
    }
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Sink(installed)"
        } else {
            "Sink(none)"
        })
    }
}
