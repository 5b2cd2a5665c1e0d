//! A server's Prometheus text, scraped and parsed with a Prometheus text-format parser
//! (`prometheus-parse`), as the metric tests read it.

use std::collections::BTreeSet;

use nacelle_testkit::{Api, TestResult};
use prometheus_parse::{Sample, Scrape, Value};

/// One parsed scrape.
pub struct Scraped(pub Scrape);

impl Scraped {
    /// The samples `name` whose labels include `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.samples.iter().filter(move |s| {
            s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
    }

    /// The sum of the counters or gauges `name` whose labels include `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels)
            .map(|s| match s.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
                _ => 0.0,
            })
            .sum()
    }

    /// The number of observations of the histograms `name` whose labels include `labels`
    /// (their `+Inf` buckets).
    pub fn observations(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels)
            .map(|s| match &s.value {
                Value::Histogram(buckets) => buckets
                    .iter()
                    .filter(|b| b.less_than.is_infinite())
                    .map(|b| b.count)
                    .sum(),
                _ => 0.0,
            })
            .sum()
    }

    /// Every series (name and labels), for the cardinality check.
    pub fn series(&self) -> BTreeSet<String> {
        self.0
            .samples
            .iter()
            .map(|s| format!("{}{{{}}}", s.metric, s.labels))
            .collect()
    }
}

/// GETs `path` (`/metrics`, `/nacos/actuator/prometheus`) and parses it as Prometheus
/// text; fails unless it is answered 200 with the text format's content type.
pub async fn scrape(api: &Api, path: &str) -> TestResult<Scraped> {
    let resp = api.http.get(api.url(path)).send().await?;
    assert_eq!(resp.status(), 200, "{path}");
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = resp.text().await?;
    let lines = text.lines().map(|l| Ok(l.to_string()));
    Ok(Scraped(Scrape::parse(lines)?))
}
