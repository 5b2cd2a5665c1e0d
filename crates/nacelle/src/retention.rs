//! The history purge in the background: every `history_purge_interval_s` the server removes
//! the `his_config_info` rows its retention settings condemn ([`Retention`]), then those
//! of the gray change log, in batches of [`PURGE_BATCH`] rows with a short pause between
//! them, through [`History::purge_history`](nacelle_core::store::History::purge_history) (which never removes the newest row of a
//! config, or of a gray variant).
//!
//! Every node purges, also in a cluster sharing one database: a batch deletes by primary
//! key only rows that have a newer row of their key, so two nodes purging at once delete
//! the same rows at most twice (the second delete finds nothing) and never a row either
//! node needs. Nothing is elected, so a node that is down never stops the purge.
//!
//! The same run purges audit entries (`audit_retention_days`) and finished webhook
//! deliveries (`webhook_retention_days`, docs/webhooks.md) by age.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nacelle_core::{ConfigStore, HistoryLog, HistoryRetention, StoreError};
use tokio_util::sync::CancellationToken;

use crate::settings::Retention;

/// Rows one batch deletes at most.
pub const PURGE_BATCH: u32 = 250;
/// Pause between two batches, so writers queue behind at most one batch at a time.
const PAUSE: Duration = Duration::from_millis(10);
/// The first purge runs this long after start (or after one interval, if shorter).
const FIRST_PURGE_AFTER: Duration = Duration::from_secs(60);

/// What one purge run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PurgeReport {
    /// `his_config_info` rows deleted.
    pub deleted: u64,
    /// Rows of the gray change log (`nacelle_gray_log`) deleted.
    pub gray_deleted: u64,
    /// Batches run.
    pub batches: u32,
    /// The longest single batch (its read and its `DELETE`).
    pub longest_batch: Duration,
    /// The whole run, pauses included.
    pub elapsed: Duration,
    /// Whether `stop` ended the run before it went through the whole log.
    pub stopped: bool,
}

/// Runs one whole purge of `rule` over the history and then the gray change log, in
/// batches of `batch`, pausing `pause` between them; ends early (with what was done) once
/// `stop` is cancelled.
pub async fn purge_once(
    store: &dyn ConfigStore,
    rule: &HistoryRetention,
    batch: u32,
    pause: Duration,
    stop: &CancellationToken,
) -> Result<PurgeReport, StoreError> {
    let started = Instant::now();
    let mut report = PurgeReport::default();
    for log in HistoryLog::ALL {
        let mut after = 0;
        loop {
            let t = Instant::now();
            let step = store.purge_history(log, rule, after, batch).await?;
            report.longest_batch = report.longest_batch.max(t.elapsed());
            report.batches += 1;
            match log {
                HistoryLog::Configs => report.deleted += step.deleted,
                HistoryLog::Grays => report.gray_deleted += step.deleted,
            }
            let Some(next) = step.resume_after else { break };
            after = next;
            if !pause_unless_stopped(pause, stop).await {
                report.stopped = true;
                break;
            }
        }
        if report.stopped {
            break;
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// The pause between two batches of a purge: `pause`, or `false` (go no further) once
/// `stop` is cancelled.
async fn pause_unless_stopped(pause: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(pause) => true,
        _ = stop.cancelled() => false,
    }
}

/// What is purged by age alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aged {
    /// Audit entries (`audit_retention_days`). Each batch moves the chain's anchor, so the
    /// rest still verifies; every node may purge at once: each batch locks the chain's head.
    Audit,
    /// Finished webhook deliveries (`webhook_retention_days`); pending ones are never
    /// purged.
    Deliveries,
}

impl Aged {
    /// What the log lines call the rows.
    fn rows(self) -> &'static str {
        match self {
            Aged::Audit => "audit entries",
            Aged::Deliveries => "webhook deliveries",
        }
    }
}

impl std::fmt::Display for Aged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Aged::Audit => "audit",
            Aged::Deliveries => "webhook delivery",
        })
    }
}

/// Purges the rows of `what` older than `cutoff_ms` in batches of `batch`, pausing `pause`
/// between them; ends early once `stop` is cancelled. Answers the rows deleted.
pub async fn purge_aged_once(
    store: &dyn ConfigStore,
    what: Aged,
    cutoff_ms: i64,
    batch: u32,
    pause: Duration,
    stop: &CancellationToken,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    loop {
        let (n, more) = match what {
            Aged::Audit => {
                let step = store.purge_audit(cutoff_ms, batch).await?;
                (step.deleted, step.more)
            }
            Aged::Deliveries => {
                let n = store.purge_deliveries(cutoff_ms, batch).await?;
                // A short batch was the last one.
                (n, n >= u64::from(batch))
            }
        };
        deleted += n;
        if !more || !pause_unless_stopped(pause, stop).await {
            return Ok(deleted);
        }
    }
}

/// The background purge: runs shortly after start and then every `retention.interval`
/// until `stop`. A failed run (database unreachable) is logged and tried again at the next
/// interval.
pub(crate) async fn run(
    store: Arc<dyn ConfigStore>,
    retention: Retention,
    stop: CancellationToken,
) {
    if retention.audit_max_age.is_none() {
        tracing::info!("audit retention off: the audit trail is kept forever");
    }
    if !retention.enabled() {
        tracing::info!("history retention off: history is kept forever");
        if retention.audit_max_age.is_none() && retention.webhook_max_age.is_none() {
            return;
        }
    }
    let mut wait = retention.interval.min(FIRST_PURGE_AFTER);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
        wait = retention.interval;
        let now = nacelle_core::now_millis();
        for (what, cutoff) in [
            (Aged::Audit, retention.audit_cutoff(now)),
            (Aged::Deliveries, retention.webhook_cutoff(now)),
        ] {
            let Some(cutoff) = cutoff else { continue };
            match purge_aged_once(store.as_ref(), what, cutoff, PURGE_BATCH, PAUSE, &stop).await {
                Ok(0) => tracing::debug!("{what} purge: nothing to remove"),
                Ok(deleted) => tracing::info!(deleted, "purged {}", what.rows()),
                Err(e) => {
                    tracing::warn!(error = %e, "{what} purge failed; retrying at the next interval")
                }
            }
        }
        if !retention.enabled() {
            continue;
        }
        let rule = retention.rule(nacelle_core::now_millis());
        match purge_once(store.as_ref(), &rule, PURGE_BATCH, PAUSE, &stop).await {
            Ok(r) if r.deleted > 0 || r.gray_deleted > 0 || r.stopped => tracing::info!(
                deleted = r.deleted,
                gray_deleted = r.gray_deleted,
                batches = r.batches,
                longest_batch_ms = r.longest_batch.as_millis() as u64,
                elapsed_ms = r.elapsed.as_millis() as u64,
                stopped = r.stopped,
                "purged config history"
            ),
            Ok(r) => tracing::debug!(batches = r.batches, "history purge: nothing to remove"),
            Err(e) => {
                tracing::warn!(error = %e, "history purge failed; retrying at the next interval")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacelle_core::{md5_hex, ConfigKey, ConfigType, GraySpec, OpSource, PublishRecord};

    fn record(
        key: &ConfigKey,
        content: &str,
        now_ms: i64,
        gray: Option<GraySpec>,
    ) -> PublishRecord {
        PublishRecord {
            key: key.clone(),
            content: content.to_string().into_bytes().into(),
            md5: md5_hex(content.as_bytes()),
            config_type: ConfigType::Text,
            meta: Default::default(),
            source: OpSource::default(),
            cas_md5: None,
            now_ms,
            gray,
        }
    }

    /// One run purges the history, then the gray change log, and says how much of each.
    #[tokio::test]
    async fn a_run_purges_the_history_and_then_the_gray_log(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store = nacelle_store::open(&url).await?;
        let key = ConfigKey::parse(None, "G", "k")?;
        for (i, t) in [1_000, 2_000, 3_000].iter().enumerate() {
            store
                .publish(&record(&key, &format!("v{i}"), *t, None))
                .await?;
            let beta = GraySpec::beta("10.0.0.1")?;
            store
                .publish(&record(&key, &format!("b{i}"), *t, Some(beta)))
                .await?;
        }
        let rule = HistoryRetention {
            older_than_ms: None,
            keep_per_key: Some(1),
        };
        let stop = CancellationToken::new();
        let report = purge_once(store.as_ref(), &rule, 1, Duration::ZERO, &stop).await?;
        assert_eq!((report.deleted, report.gray_deleted), (2, 2));
        assert!(!report.stopped);
        assert!(report.batches >= 4, "batches of one row: {report:?}");
        let again = purge_once(store.as_ref(), &rule, 1, Duration::ZERO, &stop).await?;
        assert_eq!((again.deleted, again.gray_deleted), (0, 0));
        Ok(())
    }
}
