//! Latency histograms and the printed result (a table row and one JSON line).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Latencies in microseconds.
pub struct Latencies(Histogram<u64>);

impl Latencies {
    pub fn new() -> Self {
        // 1 µs .. 10 min, 3 significant digits.
        Latencies(
            Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("constant histogram bounds are valid"),
        )
    }

    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, 600_000_000);
        // `us` is clamped into the histogram's range above, so recording cannot fail.
        let _in_range = self.0.record(us);
    }

    pub fn merge(&mut self, other: &Latencies) {
        // Both histograms are built with the same bounds, so adding cannot fail.
        let _same_bounds = self.0.add(&other.0);
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    fn ms(&self, q: f64) -> f64 {
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    /// The `q` quantile in milliseconds (rounded to µs).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        round3(self.ms(q))
    }

    pub fn summary(&self) -> Value {
        json!({
            "count": self.count(),
            "min_ms": round3(self.0.min() as f64 / 1000.0),
            "p50_ms": round3(self.ms(0.5)),
            "p99_ms": round3(self.ms(0.99)),
            "max_ms": round3(self.0.max() as f64 / 1000.0),
        })
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Prints a human table row and a JSON line for one scenario result.
pub fn report(scenario: &str, fields: Value) {
    println!("== {scenario}");
    if let Some(map) = fields.as_object() {
        for (k, v) in map {
            println!("  {k:<22} {v}");
        }
    }
    let mut line = json!({ "scenario": scenario });
    if let (Some(obj), Some(f)) = (line.as_object_mut(), fields.as_object()) {
        for (k, v) in f {
            obj.insert(k.clone(), v.clone());
        }
    }
    println!("{line}");
}
