//! The registered connections by id, and the connection limits (total and per client IP).

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;

use crate::connection::{CloseReason, Connection};
use crate::stats::{self, GrpcStats};

/// Why a registration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    TooManyConnections,
    TooManyFromIp,
    ShuttingDown,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<Arc<str>, usize>,
    shutting_down: bool,
}

/// Registered connections. Lookups (every unary call) go through the concurrent map; the
/// counts behind the limits sit under one short mutex taken only to register and
/// unregister.
#[derive(Debug)]
pub(crate) struct Registry {
    conns: DashMap<Arc<str>, Arc<Connection>>,
    counts: Mutex<Counts>,
    max_total: usize,
    max_per_ip: usize,
    stats: GrpcStats,
}

impl Registry {
    pub fn new(max_total: usize, max_per_ip: usize, stats: GrpcStats) -> Self {
        Registry {
            conns: DashMap::new(),
            counts: Mutex::new(Counts::default()),
            max_total,
            max_per_ip,
            stats,
        }
    }

    /// Registers a connection within the limits. A connection id registered again (a
    /// second setup on one TCP connection) replaces the older registration.
    pub fn register(&self, conn: Arc<Connection>) -> Result<(), Refusal> {
        if let Some(old) = self.get(&conn.id) {
            old.close(CloseReason::Replaced);
            self.unregister(&old);
        }
        {
            let mut counts = self.counts.lock();
            if counts.shutting_down {
                return Err(Refusal::ShuttingDown);
            }
            if counts.total >= self.max_total {
                return Err(Refusal::TooManyConnections);
            }
            let from_ip = counts
                .per_ip
                .get(&conn.meta.client_ip)
                .copied()
                .unwrap_or(0);
            if from_ip >= self.max_per_ip {
                return Err(Refusal::TooManyFromIp);
            }
            counts.total += 1;
            *counts
                .per_ip
                .entry(conn.meta.client_ip.clone())
                .or_default() += 1;
        }
        self.conns.insert(conn.id.clone(), conn);
        stats::inc(&self.stats.counters().connections);
        stats::inc(&self.stats.counters().registrations);
        Ok(())
    }

    /// Removes this very connection (not a newer one registered under the same id).
    pub fn unregister(&self, conn: &Arc<Connection>) {
        let removed = self
            .conns
            .remove_if(&conn.id, |_, c| Arc::ptr_eq(c, conn))
            .is_some();
        if !removed {
            return;
        }
        {
            let mut counts = self.counts.lock();
            counts.total = counts.total.saturating_sub(1);
            if let Some(n) = counts.per_ip.get_mut(&conn.meta.client_ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.per_ip.remove(&conn.meta.client_ip);
                }
            }
        }
        stats::sub(&self.stats.counters().connections, 1);
    }

    /// The registered connection with this id.
    pub fn get(&self, id: &str) -> Option<Arc<Connection>> {
        self.conns.get(id).map(|c| c.value().clone())
    }

    /// Every registered connection (a snapshot).
    pub fn all(&self) -> Vec<Arc<Connection>> {
        self.conns.iter().map(|c| c.value().clone()).collect()
    }

    /// Refuses every registration from now on; returns the connections registered so far.
    pub fn begin_shutdown(&self) -> Vec<Arc<Connection>> {
        self.counts.lock().shutting_down = true;
        self.all()
    }
}
