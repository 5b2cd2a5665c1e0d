//! A small client of the Nacos HTTP API for tests: the requests suites send again and
//! again (publish, get, delete, search, long poll, waiting for readiness or a listener),
//! answering status and body. Anything unusual (odd headers, bad input) is sent with
//! [`Api::http`] directly.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

/// The v1 config endpoint.
pub const CONFIGS: &str = "/nacos/v1/cs/configs";
/// The v1 long-polling endpoint (and, with GET, the listener query).
pub const LISTENER: &str = "/nacos/v1/cs/configs/listener";
/// The readiness probe.
pub const READINESS: &str = "/nacos/v1/console/health/readiness";

/// An HTTP client bound to one server; cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct Api {
    /// The client, for requests this type has no helper for.
    pub http: reqwest::Client,
    /// The server's address.
    pub addr: SocketAddr,
}

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The body as text.
    pub body: String,
}

impl Reply {
    /// Reads a response.
    pub async fn read(resp: reqwest::Response) -> anyhow::Result<Reply> {
        let status = resp.status().as_u16();
        Ok(Reply {
            status,
            body: resp.text().await?,
        })
    }

    /// The body as JSON.
    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.body)
            .with_context(|| format!("status {}: not JSON: {}", self.status, self.body))
    }
}

impl Api {
    /// A client of the server at `addr` whose requests time out after 60 s.
    pub fn new(addr: SocketAddr) -> anyhow::Result<Api> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Api { http, addr })
    }

    /// A client of the server at `addr` whose requests carry `Authorization: Bearer
    /// <token>` (a server with authentication on).
    pub fn with_token(addr: SocketAddr, token: &str) -> anyhow::Result<Api> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse()?,
        );
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Api { http, addr })
    }

    /// A client of the server at `addr` over an existing `http` client.
    pub fn with_client(http: reqwest::Client, addr: SocketAddr) -> Api {
        Api { http, addr }
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Publishes over v1 (a form POST) and answers what the server said.
    pub async fn try_publish(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
        content: &str,
    ) -> anyhow::Result<Reply> {
        let resp = self
            .http
            .post(self.url(CONFIGS))
            .form(&[
                ("dataId", data_id),
                ("group", group),
                ("tenant", tenant),
                ("content", content),
            ])
            .send()
            .await?;
        Reply::read(resp).await
    }

    /// Publishes over v1; fails unless the answer is 200 `true`.
    pub async fn publish(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
        content: &str,
    ) -> anyhow::Result<()> {
        let r = self.try_publish(tenant, group, data_id, content).await?;
        if r.status != 200 || r.body != "true" {
            bail!("publish {data_id} failed: {} {}", r.status, r.body);
        }
        Ok(())
    }

    /// GETs a config over v1 with `extra` query parameters (e.g. `("show", "all")`).
    pub async fn get_with(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Reply> {
        let mut query = vec![("dataId", data_id), ("group", group), ("tenant", tenant)];
        query.extend_from_slice(extra);
        self.get_configs(&query).await
    }

    /// `GET /nacos/v1/cs/configs?QUERY`.
    async fn get_configs(&self, query: &[(&str, &str)]) -> anyhow::Result<Reply> {
        let resp = self.http.get(self.url(CONFIGS)).query(query).send().await?;
        Reply::read(resp).await
    }

    /// GETs a config over v1: `Some(content)` on 200, `None` on 404, an error otherwise.
    pub async fn get(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
    ) -> anyhow::Result<Option<String>> {
        let r = self.get_with(tenant, group, data_id, &[]).await?;
        match r.status {
            200 => Ok(Some(r.body)),
            404 => Ok(None),
            s => bail!("GET {data_id}: unexpected status {s}: {}", r.body),
        }
    }

    /// The full record of a config (`show=all`); fails unless 200.
    pub async fn record(&self, tenant: &str, group: &str, data_id: &str) -> anyhow::Result<Value> {
        let r = self
            .get_with(tenant, group, data_id, &[("show", "all")])
            .await?;
        if r.status != 200 {
            bail!("show=all of {data_id}: {} {}", r.status, r.body);
        }
        r.json()
    }

    /// Deletes a config over v1.
    pub async fn delete(&self, tenant: &str, group: &str, data_id: &str) -> anyhow::Result<Reply> {
        let resp = self
            .http
            .delete(self.url(CONFIGS))
            .query(&[("dataId", data_id), ("group", group), ("tenant", tenant)])
            .send()
            .await?;
        Reply::read(resp).await
    }

    /// Searches configs over v1 (`search=accurate|blur` with the given parameters).
    pub async fn search(&self, mode: &str, params: &[(&str, &str)]) -> anyhow::Result<Reply> {
        let mut query = vec![("search", mode)];
        query.extend_from_slice(params);
        self.get_configs(&query).await
    }

    /// A v1 long poll of `listening` (see [`listening_configs`]), with a
    /// `Long-Pulling-Timeout` header when `timeout_ms` is given and `extra` form fields.
    pub async fn long_poll(
        &self,
        listening: &str,
        timeout_ms: Option<u64>,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Reply> {
        let mut form: Vec<(&str, &str)> = vec![("Listening-Configs", listening)];
        form.extend_from_slice(extra);
        let mut req = self.http.post(self.url(LISTENER)).form(&form);
        if let Some(t) = timeout_ms {
            req = req.header("Long-Pulling-Timeout", t.to_string());
        }
        Reply::read(req.send().await?).await
    }

    /// Polls readiness until 200 (at most 20 s).
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = self.http.get(self.url(READINESS)).send().await {
                if r.status() == 200 {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("server at {} did not become ready within 20 s", self.addr);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The listeners the server holds for a key (`GET …/configs/listener`, Nacos's JSON).
    pub async fn listeners(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
    ) -> anyhow::Result<Value> {
        let resp = self
            .http
            .get(self.url(LISTENER))
            .query(&[("dataId", data_id), ("group", group), ("tenant", tenant)])
            .send()
            .await?;
        Ok(resp.json().await?)
    }

    /// Waits (at most `within`) until the server lists a listener of the key, of any
    /// protocol: a poll or listen sent before is then held, not on its way.
    pub async fn wait_listener(
        &self,
        tenant: &str,
        group: &str,
        data_id: &str,
        within: Duration,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let v = self.listeners(tenant, group, data_id).await?;
            if v["lisentersGroupkeyStatus"]
                .as_object()
                .is_some_and(|m| !m.is_empty())
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "no listener of {data_id} on {} within {within:?}: {v}",
                    self.addr
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Builds a `Listening-Configs` value from (dataId, group, md5, tenant) records.
pub fn listening_configs(records: &[(&str, &str, &str, Option<&str>)]) -> String {
    let mut s = String::new();
    for (d, g, m, t) in records {
        s.push_str(d);
        s.push('\u{2}');
        s.push_str(g);
        s.push('\u{2}');
        s.push_str(m);
        if let Some(t) = t {
            s.push('\u{2}');
            s.push_str(t);
        }
        s.push('\u{1}');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_configs_separates_fields_and_records() {
        assert_eq!(
            listening_configs(&[("a", "G", "m1", None), ("b", "G", "m2", Some("dev"))]),
            "a\u{2}G\u{2}m1\u{1}b\u{2}G\u{2}m2\u{2}dev\u{1}"
        );
    }
}
