//! The guards' probes of staged rollouts (docs/rollouts.md), over HTTP: a Prometheus
//! instant query (`GET {base}/api/v1/query?query=…`, its vector's or scalar's values) and a
//! health URL's status. `https://` is verified against the Mozilla roots (reqwest's
//! `rustls-tls-webpki-roots`, the feature the webhooks' client turns on for this crate).

use std::time::Duration;

use nacelle_service::{GuardProbe, ProbeFuture};
use serde_json::Value;

/// The probes of one server: one HTTP client, every request bounded in time.
#[derive(Debug, Clone)]
pub struct HttpProbe {
    client: reqwest::Client,
}

impl HttpProbe {
    /// A probe whose requests give up after `timeout`.
    pub fn new(timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()?;
        Ok(HttpProbe { client })
    }
}

/// The values of a Prometheus query answer: one per series of a vector (or matrix: its
/// last sample), one for a scalar.
fn values_of(answer: &Value) -> Result<Vec<f64>, String> {
    if answer["status"] != "success" {
        let error = answer["error"].as_str().unwrap_or("no `status: success`");
        return Err(format!("Prometheus answered an error: {error}"));
    }
    let data = &answer["data"];
    let number = |sample: &Value| -> Result<f64, String> {
        sample[1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("not a sample: {sample}"))
    };
    match data["resultType"].as_str() {
        Some("vector") => data["result"].as_array().map_or(Ok(Vec::new()), |series| {
            series.iter().map(|s| number(&s["value"])).collect()
        }),
        Some("matrix") => data["result"].as_array().map_or(Ok(Vec::new()), |series| {
            series
                .iter()
                .filter_map(|s| s["values"].as_array().and_then(|v| v.last()))
                .map(number)
                .collect()
        }),
        Some("scalar") => Ok(vec![number(&data["result"])?]),
        other => Err(format!("unexpected result type {other:?}")),
    }
}

impl GuardProbe for HttpProbe {
    fn prometheus<'a>(&'a self, base_url: &'a str, query: &'a str) -> ProbeFuture<'a, Vec<f64>> {
        Box::pin(async move {
            let url = format!("{}/api/v1/query", base_url.trim_end_matches('/'));
            let answer = self
                .client
                .get(&url)
                .query(&[("query", query)])
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = answer.status();
            let body: Value = answer
                .json()
                .await
                .map_err(|e| format!("HTTP {status}, no JSON answer: {e}"))?;
            values_of(&body)
        })
    }

    fn http<'a>(&'a self, url: &'a str) -> ProbeFuture<'a, u16> {
        Box::pin(async move {
            let answer = self
                .client
                .get(url)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            Ok(answer.status().as_u16())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_answers_are_read() {
        let vector = serde_json::json!({"status": "success", "data": {"resultType": "vector",
            "result": [{"metric": {"a": "b"}, "value": [1.5, "2.5"]},
                       {"metric": {}, "value": [1.5, "NaN"]}]}});
        let values = values_of(&vector).unwrap_or_default();
        assert_eq!(values.len(), 2);
        assert_eq!(values[0], 2.5);
        let empty = serde_json::json!({"status": "success",
            "data": {"resultType": "vector", "result": []}});
        assert_eq!(values_of(&empty), Ok(vec![]));
        let scalar = serde_json::json!({"status": "success",
            "data": {"resultType": "scalar", "result": [1.5, "7"]}});
        assert_eq!(values_of(&scalar), Ok(vec![7.0]));
        let error = serde_json::json!({"status": "error", "error": "parse error"});
        assert!(values_of(&error).is_err_and(|e| e.contains("parse error")));
    }
}
