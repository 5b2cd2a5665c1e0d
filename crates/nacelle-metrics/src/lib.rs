//! The metrics of one Nacelle server, in one place: every metric name, its help text and
//! its labels are defined here, recorded by the service and the adapters through
//! [`Metrics`], and rendered in the Prometheus text format (0.0.4) by [`Metrics::encode`].
//!
//! # Layout
//! - [`Metrics`]: a cheap-to-clone handle on one server's registry. Each
//!   `ConfigService` makes its own, so several servers in one process (the tests) each
//!   report their own figures; there is no process-global recorder.
//! - [`histogram`]: [`LatencyHistogram`], fixed buckets on atomics (no lock per
//!   observation).
//! - [`timing`]: the store time of the request being served, for the slow-request log.
//! - [`names`]: the metrics whose values are read from their owner's state at scrape time
//!   (gauges such as connections and held polls, the gRPC and cluster counters), filled by a
//!   [`Source`].
//!
//! **Cardinality:** every label value comes from a bounded set — a route template, an HTTP
//! method and status, a gRPC request type, a store operation, a configured cluster member.
//! No label ever carries a key (namespace, group, dataId), a client address or a
//! connection id.
//!
//! **Invariant:** depends on no crate of the workspace and does no I/O: it counts, and
//! encodes text when asked.

pub mod histogram;
pub mod timing;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use rustc_hash::FxBuildHasher;

pub use histogram::LatencyHistogram;

/// The `Content-Type` of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Default of the slow-request threshold (`--slow-request-ms`).
pub const DEFAULT_SLOW_REQUEST: Duration = Duration::from_secs(1);

/// Labels of `nacelle_http_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The route template (`/nacos/v1/cs/configs`), `unmatched` for unknown paths.
    pub route: &'static str,
    pub method: &'static str,
    pub status: u16,
}

/// Labels of `nacelle_http_request_duration_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: &'static str,
    pub method: &'static str,
}

/// Labels of `nacelle_grpc_requests_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    /// The request type (`ConfigQueryRequest`), `other` for types the server does not serve.
    pub request: &'static str,
    /// `ok` or `error`.
    pub result: &'static str,
    /// Nacos's `errorCode` (0 when ok).
    pub code: i32,
}

/// Labels of `nacelle_grpc_request_duration_seconds`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub request: &'static str,
}

/// Labels of the store and commit metrics.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    pub op: &'static str,
}

/// Labels of `nacelle_config_writes_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// The write's kind (`nacelle_service::WriteKind`): `publish`, `gray_publish`,
    /// `gray_stop`, `promote`, `remove`, `metadata`, `import`, `clone`, `change_publish`.
    pub op: &'static str,
    /// `ok`, `cas_mismatch` or `error`.
    pub result: &'static str,
}

/// Labels of `nacelle_webhook_deliveries_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    /// `delivered`, `retry` or `failed`.
    result: &'static str,
}

/// Labels of the per-rollout gauges: the rollout's id. Bounded: only active rollouts
/// (at most `nacelle_service`'s `MAX_ACTIVE_ROLLOUTS`) have series, and a rollout's
/// series go when it ends.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutLabels {
    pub rollout: String,
}

/// Labels of `nacelle_rollout_rollbacks_total`: the kind of guard that failed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RollbackLabels {
    /// `prometheus`, `http` or `delivery`.
    pub reason: &'static str,
}

/// One active rollout as this node sees it (see [`Metrics::set_rollouts`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutFigures {
    pub id: i64,
    /// The step being baked, 1-based.
    pub step: u32,
    /// Its share of clients in percent (0 for a canary step).
    pub percent: f64,
    /// This node's listeners of the key served the rollout's variant.
    pub cohort_clients: u64,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// A store operation, as the `op` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    Publish,
    Remove,
    Get,
    LoadAll,
    History,
    Namespaces,
    ChangeLog,
    Ping,
    /// Reads of gray variants (load, one key, their history).
    GrayRead,
    /// Gray writes that are not a publish: stop and promote.
    GrayWrite,
    /// A batch publish (import, clone).
    PublishBatch,
    /// A read of the users, roles and permissions (the periodic re-read, and one for a
    /// request naming a user the node does not know).
    Identities,
    /// Change requests and review policies (reads, writes, a request's publish).
    Changes,
    /// Reads and writes of the JSON Schemas of config keys.
    Schemas,
    /// The audit trail: appends, pages, ranges, purges.
    Audit,
    /// Webhooks and their deliveries (enqueue, claim, outcome, listing, purge).
    Webhooks,
    /// Staged rollouts: their rows and the drivers' leases.
    Rollouts,
}

impl StoreOp {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreOp::Publish => "publish",
            StoreOp::Remove => "remove",
            StoreOp::Get => "get",
            StoreOp::LoadAll => "load_all",
            StoreOp::History => "history",
            StoreOp::Namespaces => "namespaces",
            StoreOp::ChangeLog => "change_log",
            StoreOp::Ping => "ping",
            StoreOp::GrayRead => "gray_read",
            StoreOp::GrayWrite => "gray_write",
            StoreOp::PublishBatch => "publish_batch",
            StoreOp::Identities => "identities",
            StoreOp::Changes => "changes",
            StoreOp::Schemas => "schemas",
            StoreOp::Audit => "audit",
            StoreOp::Webhooks => "webhooks",
            StoreOp::Rollouts => "rollouts",
        }
    }
}

/// A label value by identity: the address and length of a `&'static str`. Static data never
/// moves or goes away, so equal keys are equal strings (two copies of one string are two
/// keys for the same series, which the families merge). Hashing it is two words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct StaticKey(usize, usize);

impl StaticKey {
    fn of(s: &'static str) -> Self {
        StaticKey(s.as_ptr() as usize, s.len())
    }
}

/// A request's count and duration handles.
type Handles = (Counter, LatencyHistogram);

/// Counts one request of `took` on the handles cached under `key`, made by `make` (from the
/// families) the first time. The handles are used under the read lock rather than cloned
/// out, so a request moves no reference count (every request of a route shares them).
fn record<K: std::hash::Hash + Eq>(
    cache: &RwLock<HashMap<K, Handles, FxBuildHasher>>,
    key: K,
    make: impl FnOnce() -> Handles,
    took: Duration,
) {
    let observe = |(count, duration): &Handles| {
        count.inc();
        duration.observe(took);
    };
    if let Some(handles) = cache.read().get(&key) {
        return observe(handles);
    }
    observe(cache.write().entry(key).or_insert_with(make));
}

/// Route, method and status of an HTTP request.
type HttpKey = (StaticKey, StaticKey, u16);
/// Request type and Nacos error code of a gRPC request (the result label follows the code).
type GrpcKey = (StaticKey, i32);

/// One server's metrics. Cheap to clone: every field is shared.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    /// Encoding takes the lock (a scrape); recording never does: the families below are
    /// shared with the registry.
    registry: Mutex<Registry>,
    /// Names of the sources installed, so a second adapter over the same service does not
    /// report the same series twice.
    sources: Mutex<HashSet<&'static str>>,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<RouteLabels, LatencyHistogram>,
    grpc_requests: Family<GrpcLabels, Counter>,
    grpc_duration: Family<RequestLabels, LatencyHistogram>,
    /// The handles of the HTTP and gRPC request metrics per label set, found by the
    /// identity of the label set's static strings (see [`StaticKey`]): a family hashes its
    /// label set with SipHash on every `get_or_create` (about 700 instructions per request
    /// for the two families); this is one read-locked lookup of a few words.
    http_handles: RwLock<HashMap<HttpKey, Handles, FxBuildHasher>>,
    grpc_handles: RwLock<HashMap<GrpcKey, Handles, FxBuildHasher>>,
    writes: Family<WriteLabels, Counter>,
    commit_duration: Family<OpLabels, LatencyHistogram>,
    store_duration: Family<OpLabels, LatencyHistogram>,
    store_errors: Family<OpLabels, Counter>,
    push_latency: LatencyHistogram,
    long_poll_release: LatencyHistogram,
    slow_requests: Counter,
    /// Audit events dropped (queue full, or the database down past the retry bound).
    audit_dropped: Counter,
    /// Webhook delivery attempts by result.
    webhook_deliveries: Family<ResultLabels, Counter>,
    /// Webhook deliveries never stored (queue full, database down past the retry bound).
    webhook_dropped: Counter,
    rollout_step: Family<RolloutLabels, Gauge>,
    rollout_percent: Family<RolloutLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    rollout_cohort: Family<RolloutLabels, Gauge>,
    rollbacks: Family<RollbackLabels, Counter>,
    /// The ids that have rollout series now.
    rollout_ids: Mutex<Vec<i64>>,
    follower: Arc<FollowerState>,
    slow_request_nanos: AtomicU64,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("sources", &*self.inner.sources.lock())
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric of this crate registered.
    pub fn new() -> Self {
        let mut r = Registry::default();
        let http_requests = Family::<HttpLabels, Counter>::default();
        r.register(
            "nacelle_http_requests",
            "HTTP requests answered, by route template, method and status code",
            http_requests.clone(),
        );
        let http_duration = Family::<RouteLabels, LatencyHistogram>::default();
        r.register(
            "nacelle_http_request_duration_seconds",
            "Time to answer an HTTP request (a long poll: its hold), by route template and method",
            http_duration.clone(),
        );
        let grpc_requests = Family::<GrpcLabels, Counter>::default();
        r.register(
            "nacelle_grpc_requests",
            "gRPC unary requests answered, by request type, result and Nacos error code",
            grpc_requests.clone(),
        );
        let grpc_duration = Family::<RequestLabels, LatencyHistogram>::default();
        r.register(
            "nacelle_grpc_request_duration_seconds",
            "Time to answer a gRPC unary request, by request type",
            grpc_duration.clone(),
        );
        let writes = Family::<WriteLabels, Counter>::default();
        r.register(
            "nacelle_config_writes",
            "Publishes and removes that reached the store, by result",
            writes.clone(),
        );
        let commit_duration = Family::<OpLabels, LatencyHistogram>::default();
        r.register(
            "nacelle_config_commit_duration_seconds",
            "Time from asking for a key's write lock to the committed write (lock wait + store)",
            commit_duration.clone(),
        );
        let store_duration = Family::<OpLabels, LatencyHistogram>::default();
        r.register(
            "nacelle_store_operation_duration_seconds",
            "Time of one call to the database, by operation",
            store_duration.clone(),
        );
        let store_errors = Family::<OpLabels, Counter>::default();
        r.register(
            "nacelle_store_errors",
            "Database calls that failed, by operation (a compare-and-set mismatch is not one)",
            store_errors.clone(),
        );
        let push_latency = LatencyHistogram::new();
        r.register(
            "nacelle_push_latency_seconds",
            "Time from a change reaching this node's hub (its commit, or its reload) to the gRPC client's ack of the push",
            push_latency.clone(),
        );
        let long_poll_release = LatencyHistogram::new();
        r.register(
            "nacelle_long_poll_release_seconds",
            "Time from a change reaching this node's hub to the answer of a long poll it released",
            long_poll_release.clone(),
        );
        let slow_requests = Counter::default();
        r.register(
            "nacelle_slow_requests",
            "Requests slower than the slow-request threshold (each is logged at warn)",
            slow_requests.clone(),
        );
        let audit_dropped = Counter::default();
        r.register(
            "nacelle_audit_dropped",
            "Audit events dropped: the audit queue was full, or the database stayed unreachable past the retry bound (each drop is logged at error)",
            audit_dropped.clone(),
        );
        let webhook_deliveries = Family::<ResultLabels, Counter>::default();
        r.register(
            "nacelle_webhook_deliveries",
            "Webhook delivery attempts, by result: delivered (2xx), retry (failed, tried again later), failed (given up)",
            webhook_deliveries.clone(),
        );
        let webhook_dropped = Counter::default();
        r.register(
            "nacelle_webhook_dropped",
            "Webhook deliveries dropped before they were stored: the queue was full, or the database stayed unreachable past the retry bound (each drop is logged at error)",
            webhook_dropped.clone(),
        );
        let rollout_step = Family::<RolloutLabels, Gauge>::default();
        r.register(
            "nacelle_rollout_step",
            "The step an active staged rollout is baking (1-based), by rollout id",
            rollout_step.clone(),
        );
        let rollout_percent =
            Family::<RolloutLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        r.register(
            "nacelle_rollout_percent",
            "The share of clients (percent) of an active rollout's step, 0 for a canary step",
            rollout_percent.clone(),
        );
        let rollout_cohort = Family::<RolloutLabels, Gauge>::default();
        r.register(
            "nacelle_rollout_cohort_clients",
            "Listeners on this node served an active rollout's variant",
            rollout_cohort.clone(),
        );
        let rollbacks = Family::<RollbackLabels, Counter>::default();
        r.register(
            "nacelle_rollout_rollbacks",
            "Rollouts rolled back by this node, by the kind of guard that failed",
            rollbacks.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        r.register("nacelle_build_info", "The version of this server", build);
        let follower = Arc::new(FollowerState::default());
        r.register_collector(Box::new(FollowerCollector(follower.clone())));
        Metrics {
            inner: Arc::new(Inner {
                registry: Mutex::new(r),
                sources: Mutex::new(HashSet::new()),
                http_requests,
                http_duration,
                grpc_requests,
                grpc_duration,
                http_handles: RwLock::default(),
                grpc_handles: RwLock::default(),
                writes,
                commit_duration,
                store_duration,
                store_errors,
                push_latency,
                long_poll_release,
                slow_requests,
                audit_dropped,
                webhook_deliveries,
                webhook_dropped,
                rollout_step,
                rollout_percent,
                rollout_cohort,
                rollbacks,
                rollout_ids: Mutex::new(Vec::new()),
                follower,
                slow_request_nanos: AtomicU64::new(duration_nanos(DEFAULT_SLOW_REQUEST)),
            }),
        }
    }

    /// One HTTP request answered.
    pub fn http_request(
        &self,
        route: &'static str,
        method: &'static str,
        status: u16,
        took: Duration,
    ) {
        let i = &self.inner;
        let key = (StaticKey::of(route), StaticKey::of(method), status);
        let make = || {
            (
                i.http_requests
                    .get_or_create(&HttpLabels {
                        route,
                        method,
                        status,
                    })
                    .clone(),
                i.http_duration
                    .get_or_create(&RouteLabels { route, method })
                    .clone(),
            )
        };
        record(&i.http_handles, key, make, took);
    }

    /// One gRPC unary request answered; `code` is its Nacos `errorCode` (0 when ok).
    pub fn grpc_request(&self, request: &'static str, code: i32, took: Duration) {
        let result = if code == 0 { "ok" } else { "error" };
        let i = &self.inner;
        let key = (StaticKey::of(request), code);
        let make = || {
            (
                i.grpc_requests
                    .get_or_create(&GrpcLabels {
                        request,
                        result,
                        code,
                    })
                    .clone(),
                i.grpc_duration
                    .get_or_create(&RequestLabels { request })
                    .clone(),
            )
        };
        record(&i.grpc_handles, key, make, took);
    }

    /// One call to the store took `took` (and failed, unless `ok`). Also adds to the
    /// current request's store time ([`timing`]).
    pub fn store_call(&self, op: StoreOp, took: Duration, ok: bool) {
        let labels = OpLabels { op: op.as_str() };
        self.inner
            .store_duration
            .get_or_create(&labels)
            .observe(took);
        if !ok {
            self.inner.store_errors.get_or_create(&labels).inc();
        }
        timing::add_store_time(took);
    }

    /// A write of kind `op` reached the store: `result` is `ok`, `cas_mismatch` or
    /// `error`; `took` runs from asking for the keys' write locks to the store's answer.
    pub fn write(&self, op: &'static str, result: &'static str, took: Duration) {
        self.inner
            .writes
            .get_or_create(&WriteLabels { op, result })
            .inc();
        if result == "ok" {
            self.inner
                .commit_duration
                .get_or_create(&OpLabels { op })
                .observe(took);
        }
    }

    /// A gRPC client acknowledged a push `latency` after its change reached the hub.
    pub fn push_acked(&self, latency: Duration) {
        self.inner.push_latency.observe(latency);
    }

    /// A held long poll was answered because of a change, `latency` after it reached the
    /// hub.
    pub fn long_poll_released(&self, latency: Duration) {
        self.inner.long_poll_release.observe(latency);
    }

    /// `n` audit events dropped (the caller logs it).
    pub fn audit_dropped(&self, n: u64) {
        self.inner.audit_dropped.inc_by(n);
    }

    /// One webhook delivery attempt ended: `delivered`, `retry` or `failed`.
    pub fn webhook_delivery(&self, result: &'static str) {
        self.inner
            .webhook_deliveries
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// `n` webhook deliveries dropped before they were stored (the caller logs it).
    pub fn webhook_dropped(&self, n: u64) {
        self.inner.webhook_dropped.inc_by(n);
    }

    /// The active rollouts as this node sees them now: replaces the per-rollout series
    /// (those of a rollout that ended are removed).
    pub fn set_rollouts(&self, rollouts: &[RolloutFigures]) {
        let i = &self.inner;
        let mut ids = i.rollout_ids.lock();
        for gone in ids
            .iter()
            .filter(|id| !rollouts.iter().any(|r| r.id == **id))
        {
            let labels = RolloutLabels {
                rollout: gone.to_string(),
            };
            i.rollout_step.remove(&labels);
            i.rollout_percent.remove(&labels);
            i.rollout_cohort.remove(&labels);
        }
        *ids = rollouts.iter().map(|r| r.id).collect();
        for r in rollouts {
            let labels = RolloutLabels {
                rollout: r.id.to_string(),
            };
            i.rollout_step.get_or_create(&labels).set(i64::from(r.step));
            i.rollout_percent.get_or_create(&labels).set(r.percent);
            i.rollout_cohort
                .get_or_create(&labels)
                .set(i64::try_from(r.cohort_clients).unwrap_or(i64::MAX));
        }
    }

    /// A rollout rolled back because a guard of kind `reason` (`prometheus`, `http`,
    /// `delivery`) failed.
    pub fn rollout_rollback(&self, reason: &'static str) {
        self.inner
            .rollbacks
            .get_or_create(&RollbackLabels { reason })
            .inc();
    }

    /// A request over the slow-request threshold (the caller logs it).
    pub fn slow_request(&self) {
        self.inner.slow_requests.inc();
    }

    /// Requests that take at least this long are logged at warn.
    pub fn slow_request_threshold(&self) -> Duration {
        Duration::from_nanos(self.inner.slow_request_nanos.load(Ordering::Relaxed))
    }

    /// Sets the slow-request threshold (`--slow-request-ms`; 0 logs every request).
    pub fn set_slow_request_threshold(&self, threshold: Duration) {
        self.inner
            .slow_request_nanos
            .store(duration_nanos(threshold), Ordering::Relaxed);
    }

    /// The change-log follower read the log: `seen` is the newest `nid` it has seen,
    /// `applied` the `nid` up to which every change is in the cache.
    pub fn follower_followed(&self, seen: i64, applied: i64) {
        let f = &self.inner.follower;
        f.seen.store(seen, Ordering::Relaxed);
        f.applied.store(applied, Ordering::Relaxed);
        f.last_ok_ms.store(
            duration_nanos(f.epoch.elapsed()) / 1_000_000 + 1,
            Ordering::Relaxed,
        );
    }

    /// A read of the change log failed.
    pub fn follower_failed(&self) {
        self.inner.follower.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Installs `source` under `name`, read at every scrape. Only the first source of a
    /// name is kept (two adapters over one service must not report the same series
    /// twice); returns whether this one was installed. A source should hold its state
    /// weakly if that state holds these metrics.
    pub fn add_source(&self, name: &'static str, source: impl Source) -> bool {
        if !self.inner.sources.lock().insert(name) {
            return false;
        }
        self.inner
            .registry
            .lock()
            .register_collector(Box::new(SourceCollector(Box::new(source))));
        true
    }

    /// Every metric in the Prometheus text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::prometheus_text::encode(
            &mut out,
            &self.inner.registry.lock(),
        )?;
        Ok(out)
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Where the change-log follower is (see [`Metrics::follower_followed`]).
#[derive(Debug)]
struct FollowerState {
    epoch: Instant,
    seen: AtomicI64,
    applied: AtomicI64,
    /// ms after `epoch` + 1 of the last successful read; 0 = never (no follower runs).
    last_ok_ms: AtomicU64,
    failures: AtomicU64,
}

impl Default for FollowerState {
    fn default() -> Self {
        FollowerState {
            epoch: Instant::now(),
            seen: AtomicI64::new(0),
            applied: AtomicI64::new(0),
            last_ok_ms: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }
}

#[derive(Debug)]
struct FollowerCollector(Arc<FollowerState>);

impl Collector for FollowerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let f = &self.0;
        let last = f.last_ok_ms.load(Ordering::Relaxed);
        if last == 0 {
            // This node does not follow a change log (single node on its own database).
            return Ok(());
        }
        let seen = f.seen.load(Ordering::Relaxed);
        let applied = f.applied.load(Ordering::Relaxed);
        let age_ms = (duration_nanos(f.epoch.elapsed()) / 1_000_000).saturating_sub(last - 1);
        let mut gauge = |name: &str, help: &str, v: f64| -> Result<(), fmt::Error> {
            encoder
                .encode_descriptor(name, help, None, MetricType::Gauge)?
                .encode_gauge(&v)
        };
        gauge(
            "nacelle_follower_seen_nid",
            "Newest history nid the change-log follower has seen",
            seen as f64,
        )?;
        gauge(
            "nacelle_follower_applied_nid",
            "History nid up to which every change is applied (a gap holds it back)",
            applied as f64,
        )?;
        gauge(
            "nacelle_follower_lag",
            "History nids seen but not yet applied (seen - applied)",
            seen.saturating_sub(applied) as f64,
        )?;
        gauge(
            "nacelle_follower_last_success_age_seconds",
            "Seconds since the change log was last read successfully",
            age_ms as f64 / 1000.0,
        )?;
        encoder
            .encode_descriptor(
                "nacelle_follower_failures",
                "Reads of the change log that failed",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                &f.failures.load(Ordering::Relaxed),
                None,
            )
    }
}

pub mod names {
    //! The metrics read from their owner's state at scrape time, each defined once: the
    //! service (configs, listeners, readiness, cluster members), the HTTP adapter (held
    //! long polls) and the gRPC adapter (connections, pushes) fill them from a
    //! [`Source`](super::Source).

    use super::{Desc, Kind};

    macro_rules! desc {
        ($id:ident, $name:literal, $kind:ident, $help:literal) => {
            #[doc = $help]
            pub const $id: Desc = Desc {
                name: $name,
                help: $help,
                kind: Kind::$kind,
            };
        };
    }

    desc!(
        READY,
        "nacelle_ready",
        Gauge,
        "1 when the config cache is loaded and the server is not shutting down"
    );
    desc!(
        CONFIGS,
        "nacelle_configs",
        Gauge,
        "Configs in the in-memory cache"
    );
    desc!(
        LISTENED_KEYS,
        "nacelle_listened_keys",
        Gauge,
        "Distinct keys with at least one listener (long polls and gRPC connections)"
    );
    desc!(
        LISTENERS,
        "nacelle_listeners",
        Gauge,
        "(listener, key) pairs registered in the change hub"
    );
    desc!(
        HELD_LONG_POLLS,
        "nacelle_http_held_long_polls",
        Gauge,
        "HTTP long polls currently held"
    );
    desc!(
        GRPC_CONNECTIONS,
        "nacelle_grpc_connections",
        Gauge,
        "Registered gRPC connections"
    );
    desc!(
        GRPC_TCP_CONNECTIONS,
        "nacelle_grpc_tcp_connections",
        Gauge,
        "Open TCP connections on the gRPC port (registered or not)"
    );
    desc!(
        GRPC_LISTENED_KEYS,
        "nacelle_grpc_listened_keys",
        Gauge,
        "(connection, key) listen pairs held by gRPC connections"
    );
    desc!(
        GRPC_UNACKED_CONNECTIONS,
        "nacelle_grpc_unacked_connections",
        Gauge,
        "gRPC connections with pushes awaiting an ack or a retry (after the push sweeper's last pass)"
    );
    desc!(
        GRPC_REGISTRATIONS,
        "nacelle_grpc_registrations",
        Counter,
        "gRPC connections registered (ConnectionSetupRequest accepted); one per client connection, so a client that reconnects counts again"
    );
    desc!(
        GRPC_REJECTED,
        "nacelle_grpc_rejected_connections",
        Counter,
        "gRPC registrations refused (connection limits, shutdown)"
    );
    desc!(
        GRPC_PUSHES,
        "nacelle_grpc_pushes",
        Counter,
        "ConfigChangeNotifyRequests sent, retries included"
    );
    desc!(
        GRPC_PUSH_ACKS,
        "nacelle_grpc_push_acks",
        Counter,
        "Pushes acknowledged by their client"
    );
    desc!(
        GRPC_PUSH_RETRIES,
        "nacelle_grpc_push_retries",
        Counter,
        "Pushes resent after a failed or unacknowledged try"
    );
    desc!(GRPC_DROPPED, "nacelle_grpc_dropped_connections", Counter, "gRPC connections closed by the server, by reason (slow: outbound queue full; unacked: pushes never acknowledged; idle: no answer to a probe)");
    desc!(
        CLUSTER_MEMBER_UP,
        "nacelle_cluster_member_up",
        Gauge,
        "1 when a cluster member answers its health checks (UP), else 0"
    );
    desc!(
        CLUSTER_NOTIFICATIONS,
        "nacelle_cluster_notifications",
        Counter,
        "Change notifications delivered to a member, by path (grpc, or http after gRPC failed)"
    );
    desc!(
        CLUSTER_NOTIFY_FAILURES,
        "nacelle_cluster_notify_failures",
        Counter,
        "Change notifications to a member that failed on both paths"
    );
    desc!(CLUSTER_NOTIFY_RETRIES, "nacelle_cluster_notify_retries", Counter, "Retries of change notifications to a member (every failure is retried after 500 ms + n² s)");
}

/// What kind of series a [`Desc`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Monotonic; the text format adds `_total` to the name.
    Counter,
}

/// A metric filled at scrape time: its name, help and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
}

/// State read at every scrape (see [`Metrics::add_source`]).
pub trait Source: Send + Sync + 'static {
    /// Adds the current values to `out`.
    fn collect(&self, out: &mut Samples);
}

/// A label set of a scrape-time series: (name, value) pairs.
pub type LabelPairs = Vec<(&'static str, String)>;

/// The values a [`Source`] reports in one scrape, grouped by metric.
#[derive(Debug, Default)]
pub struct Samples {
    groups: Vec<(Desc, Vec<(LabelPairs, f64)>)>,
}

impl Samples {
    /// One series of `desc` without labels.
    pub fn set(&mut self, desc: Desc, value: f64) {
        self.set_with(desc, Vec::new(), value);
    }

    /// One series of `desc` with `labels` (bounded values only, see the crate docs).
    pub fn set_with(&mut self, desc: Desc, labels: LabelPairs, value: f64) {
        match self.groups.iter_mut().find(|(d, _)| d.name == desc.name) {
            Some((_, series)) => series.push((labels, value)),
            None => self.groups.push((desc, vec![(labels, value)])),
        }
    }
}

struct SourceCollector(Box<dyn Source>);

impl fmt::Debug for SourceCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SourceCollector")
    }
}

impl Collector for SourceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut samples = Samples::default();
        self.0.collect(&mut samples);
        for (desc, series) in &samples.groups {
            let kind = match desc.kind {
                Kind::Gauge => MetricType::Gauge,
                Kind::Counter => MetricType::Counter,
            };
            let mut metric = encoder.encode_descriptor(desc.name, desc.help, None, kind)?;
            for (labels, value) in series {
                let mut one = metric.encode_family(labels)?;
                match desc.kind {
                    Kind::Gauge => one.encode_gauge(value)?,
                    Kind::Counter => one
                        .encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(
                            value, None,
                        )?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl Source for Fixed {
        fn collect(&self, out: &mut Samples) {
            out.set(names::CONFIGS, 3.0);
            out.set_with(
                names::CLUSTER_NOTIFICATIONS,
                vec![("member", "10.0.0.2:8848".into()), ("path", "grpc".into())],
                2.0,
            );
        }
    }

    fn parse(text: &str) -> prometheus_parse::Scrape {
        let lines = text.lines().map(|l| Ok(l.to_string()));
        prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text")
    }

    fn value(scrape: &prometheus_parse::Scrape, name: &str) -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .and_then(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => Some(v),
                _ => None,
            })
    }

    #[test]
    fn the_text_parses_and_shows_what_was_recorded() {
        let m = Metrics::new();
        m.http_request(
            "/nacos/v1/cs/configs",
            "GET",
            200,
            Duration::from_micros(300),
        );
        m.http_request(
            "/nacos/v1/cs/configs",
            "GET",
            200,
            Duration::from_micros(300),
        );
        m.grpc_request("ConfigQueryRequest", 0, Duration::from_micros(200));
        m.store_call(StoreOp::Publish, Duration::from_millis(2), false);
        assert!(m.add_source("fixed", Fixed));
        assert!(!m.add_source("fixed", Fixed), "one source per name");
        m.follower_followed(12, 10);
        let text = m.encode().expect("encodes");
        let scrape = parse(&text);
        assert_eq!(value(&scrape, "nacelle_http_requests_total"), Some(2.0));
        assert_eq!(value(&scrape, "nacelle_grpc_requests_total"), Some(1.0));
        assert_eq!(value(&scrape, "nacelle_store_errors_total"), Some(1.0));
        assert_eq!(value(&scrape, "nacelle_configs"), Some(3.0));
        assert_eq!(
            value(&scrape, "nacelle_cluster_notifications_total"),
            Some(2.0)
        );
        assert_eq!(value(&scrape, "nacelle_follower_lag"), Some(2.0));
        assert_eq!(value(&scrape, "nacelle_build_info"), Some(1.0));
        let count = scrape
            .samples
            .iter()
            .find(|s| s.metric == "nacelle_http_request_duration_seconds")
            .map(|s| match &s.value {
                prometheus_parse::Value::Histogram(b) => b.last().map(|b| b.count),
                _ => None,
            });
        assert_eq!(count, Some(Some(2.0)), "{text}");
    }

    /// The handle caches give every request its own label set's series: distinct label
    /// sets stay apart, and two copies of one string (two keys in the cache) count into
    /// one series.
    #[test]
    fn cached_handles_count_into_the_series_of_their_labels() {
        let m = Metrics::new();
        let copy: &'static str = String::from("GET").leak();
        for (method, status) in [("GET", 200), (copy, 200), ("GET", 404), ("POST", 200)] {
            m.http_request(
                "/nacos/v1/cs/configs",
                method,
                status,
                Duration::from_micros(5),
            );
        }
        m.grpc_request("ConfigQueryRequest", 0, Duration::from_micros(5));
        m.grpc_request("ConfigQueryRequest", 0, Duration::from_micros(5));
        m.grpc_request("ConfigQueryRequest", 300, Duration::from_micros(5));
        let scrape = parse(&m.encode().expect("encodes"));
        let count = |metric: &str, labels: &[(&str, &str)]| {
            scrape
                .samples
                .iter()
                .filter(|s| s.metric == metric)
                .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
                .map(|s| match s.value {
                    prometheus_parse::Value::Counter(v) => v,
                    _ => 0.0,
                })
                .sum::<f64>()
        };
        let http = "nacelle_http_requests_total";
        assert_eq!(count(http, &[("method", "GET"), ("status", "200")]), 2.0);
        assert_eq!(count(http, &[("method", "GET"), ("status", "404")]), 1.0);
        assert_eq!(count(http, &[("method", "POST")]), 1.0);
        let grpc = "nacelle_grpc_requests_total";
        assert_eq!(count(grpc, &[("result", "ok"), ("code", "0")]), 2.0);
        assert_eq!(count(grpc, &[("result", "error"), ("code", "300")]), 1.0);
    }
}
