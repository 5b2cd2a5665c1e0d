//! [`GrpcStats`]: counters of connections, listeners and pushes, readable at any time (for
//! the metrics endpoint and for tests).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A cheap, cloneable handle on the adapter's counters. All counters are monotonic except
/// the gauges (`tcp_connections`, `connections`, `listened_keys`, `unacked_connections`).
#[derive(Debug, Clone, Default)]
pub struct GrpcStats {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) tcp_connections: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) listened_keys: AtomicU64,
    pub(crate) registrations: AtomicU64,
    pub(crate) rejected_connections: AtomicU64,
    pub(crate) pushes_sent: AtomicU64,
    pub(crate) push_acks: AtomicU64,
    pub(crate) push_retries: AtomicU64,
    pub(crate) dropped_slow: AtomicU64,
    pub(crate) dropped_unacked: AtomicU64,
    pub(crate) dropped_idle: AtomicU64,
    pub(crate) unacked_connections: AtomicU64,
}

/// The counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GrpcStatsSnapshot {
    /// Open TCP connections (registered or not).
    pub tcp_connections: u64,
    /// Registered connections (completed `ConnectionSetupRequest`).
    pub connections: u64,
    /// (connection, key) listen pairs held by gRPC connections.
    pub listened_keys: u64,
    /// Registrations accepted since the server started (each reconnect counts again).
    pub registrations: u64,
    /// Registrations refused because of a connection limit or a shutdown.
    pub rejected_connections: u64,
    /// `ConfigChangeNotifyRequest`s sent, retries included.
    pub pushes_sent: u64,
    /// Pushes acknowledged by their client.
    pub push_acks: u64,
    /// Pushes resent after a failed or unacknowledged try.
    pub push_retries: u64,
    /// Connections closed because their outbound queue was full.
    pub dropped_slow: u64,
    /// Connections unregistered after a push failed `push_max_tries` times.
    pub dropped_unacked: u64,
    /// Connections closed because they did not answer an idle probe.
    pub dropped_idle: u64,
    /// Connections with pushes awaiting an ack or a retry after the push sweeper's last
    /// pass: the connections its next pass visits (idle ones are never visited).
    pub unacked_connections: u64,
}

impl GrpcStats {
    /// Fresh counters, all zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> GrpcStatsSnapshot {
        let c = &self.inner;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        GrpcStatsSnapshot {
            tcp_connections: get(&c.tcp_connections),
            connections: get(&c.connections),
            listened_keys: get(&c.listened_keys),
            registrations: get(&c.registrations),
            rejected_connections: get(&c.rejected_connections),
            pushes_sent: get(&c.pushes_sent),
            push_acks: get(&c.push_acks),
            push_retries: get(&c.push_retries),
            dropped_slow: get(&c.dropped_slow),
            dropped_unacked: get(&c.dropped_unacked),
            dropped_idle: get(&c.dropped_idle),
            unacked_connections: get(&c.unacked_connections),
        }
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.inner
    }
}

/// `counter += 1`.
pub(crate) fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// `gauge += n`.
pub(crate) fn add(gauge: &AtomicU64, n: u64) {
    gauge.fetch_add(n, Ordering::Relaxed);
}

/// `gauge -= n`, never below zero.
pub(crate) fn sub(gauge: &AtomicU64, n: u64) {
    // The closure always returns `Some`, so the update cannot fail.
    let _always_ok = gauge.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(n))
    });
}
