//! The guards' probes of staged rollouts (docs/rollouts.md), over HTTP: a Prometheus
//! instant query (`GET {base}/api/v1/query?query=…`, its vector's or scalar's values) and a
//! health URL's status. `https://` is verified against the Mozilla roots (reqwest's
//! `rustls-tls-webpki-roots`, the feature the webhooks' client turns on for this crate).
//!
//! No redirect is followed (a 3xx is the answer), and what a failure says is this
//! server's own words — a status, a timeout, "not a Prometheus answer" — never text from
//! the remote side: a rollout's reason is readable by whoever may read its key.

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
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(HttpProbe { client })
    }
}

/// The values of a Prometheus query answer: one per series of a vector (or matrix: its
/// last sample), one for a scalar.
fn values_of(answer: &Value) -> Result<Vec<f64>, String> {
    if answer["status"] != "success" {
        // Prometheus's error types are a fixed set; its error text is not repeated.
        let kind = answer["errorType"]
            .as_str()
            .filter(|t| PROMETHEUS_ERROR_TYPES.contains(t))
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        return Err(format!("Prometheus refused the query{kind}"));
    }
    let data = &answer["data"];
    let number = |sample: &Value| -> Result<f64, String> {
        sample[1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| "a sample of the answer is not a number".to_string())
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
        _ => Err("not a Prometheus answer (no known resultType)".to_string()),
    }
}

/// The `errorType`s of Prometheus's HTTP API (`web/api/v1`).
const PROMETHEUS_ERROR_TYPES: [&str; 7] = [
    "timeout",
    "canceled",
    "execution",
    "bad_data",
    "internal",
    "unavailable",
    "not_found",
];

/// Why a request got no answer, in this server's words (no remote text).
fn no_answer(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "no answer in time".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else {
        "the request failed".to_string()
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
                .map_err(|e| no_answer(&e))?;
            let status = answer.status();
            if status.is_redirection() {
                return Err(format!(
                    "Prometheus answered HTTP {} (redirects are not followed)",
                    status.as_u16()
                ));
            }
            // Prometheus answers its JSON with 200, and with 4xx/5xx for a refused query.
            let body: Value = answer
                .json()
                .await
                .map_err(|_| format!("HTTP {}, not a Prometheus answer", status.as_u16()))?;
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
                .map_err(|e| no_answer(&e))?;
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
        // Prometheus's own error text is never repeated; its error type is.
        let error = serde_json::json!({"status": "error", "errorType": "bad_data",
            "error": "parse error: db_password=hunter2"});
        assert_eq!(
            values_of(&error),
            Err("Prometheus refused the query (bad_data)".to_string())
        );
        let odd = serde_json::json!({"status": "error", "errorType": "db_password=hunter2"});
        assert_eq!(
            values_of(&odd),
            Err("Prometheus refused the query".to_string())
        );
        let bad_sample = serde_json::json!({"status": "success", "data": {"resultType":
            "vector", "result": [{"metric": {}, "value": [1, "secret"]}]}});
        assert!(values_of(&bad_sample).is_err_and(|e| !e.contains("secret")));
    }
}
