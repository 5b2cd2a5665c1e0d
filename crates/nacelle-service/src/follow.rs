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

use crate::service::ConfigService;

/// How long a missing `nid` is waited for before it is taken as rolled back.
pub const GAP_PATIENCE: Duration = Duration::from_secs(30);
/// Rows read per query.
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
            gaps: BTreeMap::new(),
        }
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
    pub async fn poll(&mut self, service: &ConfigService) -> Result<usize, CoreError> {
        let mut reloaded = 0;
        loop {
            let store = service.store();
            let rows = match self.log {
                Log::Formal => {
                    let read = store.changes_since(self.low, BATCH);
                    service.store_call(StoreOp::ChangeLog, read).await?
                }
                Log::Gray => {
                    let read = store.gray_changes_since(self.low, BATCH);
                    service.store_call(StoreOp::ChangeLog, read).await?
                }
            };
            let full = rows.len() as u32 == BATCH;
            let mut keys: Vec<ConfigKey> = Vec::new();
            let mut last = self.low;
            for r in rows {
                last = last.max(r.nid);
                if self.seen.insert(r.nid) {
                    self.gaps.remove(&r.nid);
                    if !keys.contains(&r.key) {
                        keys.push(r.key);
                    }
                }
            }
            for key in &keys {
                service.reload(key).await?;
            }
            reloaded += keys.len();
            self.note_gaps(last);
            self.advance();
            if !full {
                return Ok(reloaded);
            }
        }
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
