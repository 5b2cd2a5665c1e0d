//! [`LatencyHistogram`]: a fixed-bucket histogram of durations recorded with atomics only.
//!
//! prometheus-client's `Histogram` takes a mutex on every observation; the GET and push
//! paths observe once per request from every runtime thread, so this one adds to three
//! atomics instead (bucket, count, sum in nanoseconds) and builds the cumulative buckets
//! only when scraped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds (seconds) of the latency buckets of every histogram: 100 µs to 60 s, so a
/// GET served from memory, a commit on a slow disk and a long poll held 30 s each fall in
/// a bucket of their own.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// A histogram of durations over [`LATENCY_BUCKETS`]. Cheap to clone (shared state).
#[derive(Debug, Clone, Default)]
pub struct LatencyHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Upper bounds in nanoseconds, ascending.
    bounds: Box<[u64]>,
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    counts: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Default for Inner {
    fn default() -> Self {
        let bounds: Box<[u64]> = LATENCY_BUCKETS
            .iter()
            .map(|s| (s * 1e9).round() as u64)
            .collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Inner {
            bounds,
            counts,
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = self.inner.bounds.partition_point(|&b| b < nanos);
        if let Some(c) = self.inner.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.count.fetch_add(1, Ordering::Relaxed);
        self.inner.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.inner.count.load(Ordering::Relaxed)
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // Per-bucket counts: the encoder makes them cumulative.
        let mut buckets = Vec::with_capacity(self.inner.counts.len());
        let mut count = 0;
        for (i, c) in self.inner.counts.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            count += n;
            let bound = LATENCY_BUCKETS.get(i).copied().unwrap_or(f64::INFINITY);
            buckets.push((bound, n));
        }
        let sum = self.inner.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        // The count is the sum of the buckets read, so `_count` and the `+Inf` bucket
        // always agree within one scrape.
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_bucket() {
        let h = LatencyHistogram::new();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(600));
        assert_eq!(h.count(), 4);
        let at = |i: usize| h.inner.counts[i].load(Ordering::Relaxed);
        assert_eq!(at(0), 2, "50 µs and exactly 100 µs are ≤ 0.0001 s");
        assert_eq!(at(5), 1, "3 ms is in (2.5 ms, 5 ms]");
        assert_eq!(at(LATENCY_BUCKETS.len()), 1, "10 min is +Inf");
    }
}
