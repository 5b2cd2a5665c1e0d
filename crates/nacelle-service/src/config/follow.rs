//! Following the database's change log (`his_config_info`), so a node converges even when
//! a change notification is lost, after its own restart, or after a network blip.
//!
//! Every write appends a history row with an increasing `nid`. The follower reloads the key
//! of every row it has not seen yet. Auto-increment ids may become visible out of order on
//! MySQL/PostgreSQL (a transaction that took id 6 can commit after the one that took 7), so
//! a missing id is a *gap* that is re-scanned until it shows up or has been missing for
//! [`GAP_PATIENCE`] (a rolled-back transaction leaves a gap forever).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use nacelle_core::{ConfigKey, CoreError};

use nacelle_metrics::StoreOp;

use crate::config::service::ConfigService;

/// How long a missing `nid` is waited for before it is taken as rolled back.
pub const GAP_PATIENCE: Duration = Duration::from_secs(30);
/// Rows read per query, by default.
const BATCH: u32 = 1000;

/// Which change log a follower reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Log {
    /// `his_config_info`: formal configs.
    Formal,
    /// `nacelle_gray_log`: gray variants.
    Gray,
}

/// Position of a node in the change log.
#[derive(Debug)]
pub struct ChangeFollower {
    log: Log,
    /// Every nid at or below this has been seen or given up on.
    low: i64,
    /// Seen nids above `low`.
    seen: BTreeSet<i64>,
    /// Rows read per query.
    batch: u32,
    /// The newest row read and its key: what the log must still hold at that `nid`
    /// ([`ChangeFollower::history_rewound`]).
    anchor: Option<(i64, ConfigKey)>,
    /// Missing nids above `low`, with when they were first noticed.
    gaps: BTreeMap<i64, Instant>,
}

impl ChangeFollower {
    /// Starts after `position` (the newest nid already reflected in the cache).
    pub fn starting_at(position: i64) -> Self {
        Self::of(Log::Formal, position)
    }

    /// A follower of the gray change log (`nacelle_gray_log`) after `position`: gray
    /// publishes, stops and promotions made on other nodes reach this one even when their
    /// notification is lost, with the same gap handling.
    pub fn grays_starting_at(position: i64) -> Self {
        Self::of(Log::Gray, position)
    }

    fn of(log: Log, position: i64) -> Self {
        ChangeFollower {
            log,
            low: position,
            seen: BTreeSet::new(),
            batch: BATCH,
            anchor: None,
            gaps: BTreeMap::new(),
        }
    }

    /// Reads at most `rows` rows per query (1000 by default; at least 1).
    pub fn with_batch(mut self, rows: u32) -> Self {
        self.batch = rows.max(1);
        self
    }

    /// The newest nid seen.
    pub fn position(&self) -> i64 {
        self.seen.last().copied().unwrap_or(self.low).max(self.low)
    }

    /// The nid up to which every change has been applied (or given up on); a gap holds
    /// it below [`ChangeFollower::position`].
    pub fn applied(&self) -> i64 {
        self.low
    }

    /// Reads new history rows and reloads their keys. Returns how many keys were reloaded.
    ///
    /// A row counts as seen only once its key has been reloaded: when a reload fails (the
    /// database went away between the read and the reload), the poll fails and the next
    /// one reads those rows again, so no change is skipped. The rows are read in pages
    /// that each start after the last row read: a gap keeps `low` below rows already
    /// seen, and a page starting at `low` again would read the same rows forever.
    pub async fn poll(&mut self, service: &ConfigService) -> Result<usize, CoreError> {
        let mut reloaded = 0;
        let mut after = self.low;
        loop {
            let store = service.store();
            let rows = match self.log {
                Log::Formal => {
                    let read = store.changes_since(after, self.batch);
                    service.store_call(StoreOp::ChangeLog, read).await?
                }
                Log::Gray => {
                    let read = store.gray_changes_since(after, self.batch);
                    service.store_call(StoreOp::ChangeLog, read).await?
                }
            };
            let full = rows.len() as u32 == self.batch;
            let mut keys: Vec<ConfigKey> = Vec::new();
            let mut fresh: Vec<i64> = Vec::new();
            let mut newest: Option<(i64, ConfigKey)> = None;
            for r in rows {
                after = after.max(r.nid);
                if newest.as_ref().is_none_or(|(n, _)| *n < r.nid) {
                    newest = Some((r.nid, r.key.clone()));
                }
                if r.nid > self.low && !self.seen.contains(&r.nid) {
                    fresh.push(r.nid);
                    if !keys.contains(&r.key) {
                        keys.push(r.key);
                    }
                }
            }
            for key in &keys {
                service.replication().reload(key).await?;
            }
            if let Some(newest) = newest {
                if self.anchor.as_ref().is_none_or(|(n, _)| *n < newest.0) {
                    self.anchor = Some(newest);
                }
            }
            for nid in fresh {
                self.seen.insert(nid);
                self.gaps.remove(&nid);
            }
            reloaded += keys.len();
            self.note_gaps(after);
            self.advance();
            if !full {
                return Ok(reloaded);
            }
        }
    }

    /// Whether the log no longer holds the newest row this follower read, as it read it:
    /// the database lost commits this node had read (it failed over to a replica that
    /// lacked them), and new rows may take their `nid`s again, below this follower's
    /// position, where it would never read them. Then resynchronize the node
    /// ([`ConfigService::resync`]) and follow from the database's position again. Ask it
    /// after the database was unreachable (a failover always is). A history purge that
    /// removed that row (not the newest of its key by then) also answers `true`, and the
    /// resync is then merely unneeded.
    pub async fn history_rewound(&self, service: &ConfigService) -> Result<bool, CoreError> {
        let Some((nid, key)) = &self.anchor else {
            return Ok(false);
        };
        let store = service.store();
        let rows = match self.log {
            Log::Formal => {
                let read = store.changes_since(nid - 1, 1);
                service.store_call(StoreOp::ChangeLog, read).await?
            }
            Log::Gray => {
                let read = store.gray_changes_since(nid - 1, 1);
                service.store_call(StoreOp::ChangeLog, read).await?
            }
        };
        Ok(!rows.first().is_some_and(|r| r.nid == *nid && &r.key == key))
    }

    fn note_gaps(&mut self, upto: i64) {
        let now = Instant::now();
        let mut expected = self.low + 1;
        let seen: Vec<i64> = self.seen.range(..=upto).copied().collect();
        for nid in seen {
            while expected < nid {
                self.gaps.entry(expected).or_insert(now);
                expected += 1;
            }
            expected = nid + 1;
        }
        self.gaps
            .retain(|_, first| now.duration_since(*first) < GAP_PATIENCE);
    }

    /// Moves `low` up to the first gap still waited for.
    fn advance(&mut self) {
        let first_gap = self.gaps.keys().next().copied();
        while let Some(&next) = self.seen.first() {
            let blocked = first_gap.is_some_and(|g| g < next);
            if blocked {
                break;
            }
            self.low = self.low.max(next);
            self.seen.remove(&next);
        }
        if let Some(g) = first_gap {
            self.low = self.low.max(g - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_hold_the_low_water_mark() {
        let mut f = ChangeFollower::starting_at(10);
        for nid in [11, 12, 14] {
            f.seen.insert(nid);
        }
        f.note_gaps(14);
        f.advance();
        assert_eq!(f.low, 12, "13 is missing: rows after 12 must be re-read");
        assert!(f.gaps.contains_key(&13));
        assert_eq!(f.position(), 14);
        f.seen.insert(13);
        f.gaps.remove(&13);
        f.note_gaps(14);
        f.advance();
        assert_eq!(f.low, 14);
        assert!(f.seen.is_empty());
    }
}
