//! The rollout driver's wiring (`driver.rs`): the probes the server gives it, how this
//! node drives rollouts, and its wake-up.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// The boxed future of a probe.
pub type ProbeFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// How guards reach the outside: implemented by the server binary (over HTTP).
pub trait GuardProbe: Send + Sync + 'static {
    /// An instant query `query` against the Prometheus at `base_url`
    /// (`GET {base_url}/api/v1/query?query=…`): the values of its result (one per series
    /// of a vector, one for a scalar), or why it could not be read.
    fn prometheus<'a>(&'a self, base_url: &'a str, query: &'a str) -> ProbeFuture<'a, Vec<f64>>;
    /// A `GET` of `url`: its status, or why there was none.
    fn http<'a>(&'a self, url: &'a str) -> ProbeFuture<'a, u16>;
}

/// How this node drives rollouts.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// This node's name in the leases: unique per process.
    pub node: String,
    /// How often rollouts are looked at (leases renewed, guards evaluated).
    pub tick: Duration,
    /// How long a lease lasts without renewal: how soon another node takes over.
    pub lease: Duration,
    /// The Prometheus of guards that name none (`--prometheus-url`); a Prometheus guard
    /// may always name it.
    pub prometheus_url: Option<String>,
    /// The URL prefixes an administrator allowed guards to name (`--rollout-guard-urls`):
    /// a rollout naming any other address is refused (`rollouts/guards.rs`).
    pub guard_urls: Vec<String>,
    /// The longest a probe may take; slower is unhealthy.
    pub probe_timeout: Duration,
}

impl DriverConfig {
    /// Defaults: a tick of 1 s, a lease of 6 s, probes of 3 s at most.
    pub fn new(node: String, prometheus_url: Option<String>) -> Self {
        DriverConfig {
            node,
            tick: Duration::from_secs(1),
            lease: Duration::from_secs(6),
            prometheus_url,
            guard_urls: Vec::new(),
            probe_timeout: Duration::from_secs(3),
        }
    }
}

/// The driver's wiring, held by the component.
pub(crate) struct RolloutRuntime {
    pub(crate) config: DriverConfig,
    pub(crate) probe: Arc<dyn GuardProbe>,
    pub(crate) wake: Notify,
}
