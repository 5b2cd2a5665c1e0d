//! [`Admin`]: the calls that have no gRPC form, over the HTTP API (v1, as Nacos 2.4
//! serves it; `docs/http-api.md`): search, history, namespaces, export and import. Each
//! goes to the connected server first, then the others; the token (when the client logs
//! in) travels as the `accessToken` parameter.

use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::http::{self, Build};
use crate::key::{namespace_id, IntoKey, Key};
use crate::metrics::MetricEvent;
use crate::options::ServerAddr;

/// A page of results.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// Matches in all pages.
    #[serde(default)]
    pub total_count: u64,
    /// This page's number (from 1).
    #[serde(default)]
    pub page_number: u64,
    /// How many pages there are.
    #[serde(default)]
    pub pages_available: u64,
    /// This page.
    #[serde(default = "Vec::new")]
    pub page_items: Vec<T>,
}

pub(crate) fn lenient_string<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<String, D::Error> {
    Ok(match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s,
        Some(other) => other.to_string(),
    })
}

/// A config as a search lists it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigInfo {
    /// The row id.
    #[serde(default, deserialize_with = "lenient_string")]
    pub id: String,
    /// Data id.
    #[serde(default, deserialize_with = "lenient_string")]
    pub data_id: String,
    /// Group.
    #[serde(default, deserialize_with = "lenient_string")]
    pub group: String,
    /// Namespace (`""`: the default).
    #[serde(default, deserialize_with = "lenient_string")]
    pub tenant: String,
    /// Content.
    #[serde(default, deserialize_with = "lenient_string")]
    pub content: String,
    /// md5 of the content.
    #[serde(default, deserialize_with = "lenient_string")]
    pub md5: String,
    /// Application name.
    #[serde(default, deserialize_with = "lenient_string")]
    pub app_name: String,
    /// Content type.
    #[serde(default, rename = "type", deserialize_with = "lenient_string")]
    pub content_type: String,
}

/// One history entry (Nacos keeps, on an update or delete, the version it replaced).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The entry's id (`nid`).
    #[serde(default, deserialize_with = "lenient_string")]
    pub id: String,
    /// Data id.
    #[serde(default, deserialize_with = "lenient_string")]
    pub data_id: String,
    /// Group.
    #[serde(default, deserialize_with = "lenient_string")]
    pub group: String,
    /// Namespace.
    #[serde(default, deserialize_with = "lenient_string")]
    pub tenant: String,
    /// md5 of the content (only in a single entry).
    #[serde(default, deserialize_with = "lenient_string")]
    pub md5: String,
    /// The content (only in a single entry; pages leave it out, as Nacos does).
    #[serde(default, deserialize_with = "lenient_string")]
    pub content: String,
    /// Who wrote it: address.
    #[serde(default, deserialize_with = "lenient_string")]
    pub src_ip: String,
    /// Who wrote it: user.
    #[serde(default, deserialize_with = "lenient_string")]
    pub src_user: String,
    /// `I`, `U` or `D`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub op_type: String,
    /// The write's message (Nacelle; `""`: none).
    #[serde(default, deserialize_with = "lenient_string")]
    pub message: String,
    /// When the entry was written.
    #[serde(default, deserialize_with = "lenient_string")]
    pub last_modified_time: String,
}

/// A namespace.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Namespace {
    /// Its id (`""`: the default namespace, shown as `public`).
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace: String,
    /// Display name.
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace_show_name: String,
    /// Description.
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace_desc: String,
    /// How many configs it holds.
    #[serde(default)]
    pub config_count: u64,
}

/// What an import did.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// Configs written.
    #[serde(default)]
    pub succ_count: u64,
    /// Configs not written: existing ones (policy `SKIP`), those after the conflict
    /// (policy `ABORT`).
    #[serde(default)]
    pub skip_count: u64,
    /// Entries of the archive that are no config.
    #[serde(default)]
    pub unrecognized_count: u64,
    /// Under `ABORT`: the existing key that stopped the import, as Nacos reports it (the
    /// configs before it were written, it and those after it were not).
    #[serde(default)]
    pub fail_data: Vec<ConfigRef>,
    /// Under `SKIP`: the existing keys left alone; under `ABORT`: the configs after the
    /// one that stopped it.
    #[serde(default)]
    pub skip_data: Vec<ConfigRef>,
    /// The entries of the archive that are no config.
    #[serde(default)]
    pub unrecognized_data: Vec<UnrecognizedItem>,
}

/// An entry of an imported archive that is no config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnrecognizedItem {
    /// Its name in the archive.
    #[serde(default, deserialize_with = "lenient_string")]
    pub item_name: String,
}

/// A config named in an import report.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRef {
    /// Data id.
    #[serde(default, deserialize_with = "lenient_string")]
    pub data_id: String,
    /// Group.
    #[serde(default, deserialize_with = "lenient_string")]
    pub group: String,
}

/// What an import does with keys that exist already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportPolicy {
    /// Write nothing when any key exists.
    Abort,
    /// Leave existing keys alone.
    Skip,
    /// Replace existing keys.
    Overwrite,
}

impl ImportPolicy {
    fn as_str(self) -> &'static str {
        match self {
            ImportPolicy::Abort => "ABORT",
            ImportPolicy::Skip => "SKIP",
            ImportPolicy::Overwrite => "OVERWRITE",
        }
    }
}

/// The HTTP admin calls of a [`Client`] (`client.admin()`).
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    pub(crate) fn new(client: Client) -> Admin {
        Admin { client }
    }

    /// The client the calls go through.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The servers in the order to try: the connected one first.
    fn order(&self) -> Vec<ServerAddr> {
        let mut all = self.client.servers().to_vec();
        if let Some(now) = self.client.connected_to() {
            all.retain(|s| s != &now);
            all.insert(0, now);
        }
        all
    }

    /// Sends the request built by `build` (to the first server that can be reached);
    /// the body of a 2xx answer.
    pub(crate) async fn send(&self, kind: &'static str, build: Build<'_>) -> Result<bytes::Bytes> {
        let started = Instant::now();
        let result = self.send_inner(build).await;
        self.record(kind, started, result.is_ok());
        result
    }

    fn record(&self, kind: &'static str, started: Instant, ok: bool) {
        self.client
            .shared()
            .opts
            .metrics
            .record(MetricEvent::Request {
                kind,
                elapsed: started.elapsed(),
                ok,
            });
    }

    /// Sends a request of the v2 API (`{code, message, data}`): `data` of a success; an
    /// error carries the envelope's reason (`data`, else `message`) instead of the JSON.
    pub(crate) async fn send_v2(
        &self,
        kind: &'static str,
        build: Build<'_>,
    ) -> Result<serde_json::Value> {
        let started = Instant::now();
        let result = self.send_v2_inner(build).await;
        self.record(kind, started, result.is_ok());
        result
    }

    async fn send_v2_inner(&self, build: Build<'_>) -> Result<serde_json::Value> {
        #[derive(Deserialize)]
        struct Envelope {
            #[serde(default)]
            code: i32,
            #[serde(default)]
            message: String,
            #[serde(default)]
            data: serde_json::Value,
        }
        let servers = self.order();
        let answer = http::send(self.client.shared(), &servers, build).await?;
        // Not every answer is an envelope (Spring's 403 body is not): `None` is handled
        // below — a protocol error on success, the plain HTTP error otherwise.
        let envelope: Option<Envelope> = serde_json::from_slice(&answer.body).ok();
        if answer.status.is_success() {
            let e = envelope.ok_or_else(|| {
                ClientError::Protocol(format!("not a v2 answer: {}", answer.text()))
            })?;
            if e.code != 0 {
                return Err(ClientError::Server {
                    code: e.code,
                    message: e.message,
                });
            }
            return Ok(e.data);
        }
        let error = answer.error(&servers);
        // A 403 of the auth filter is Spring's body, not an envelope: kept as is.
        let Some(e) = envelope.filter(|e| e.code != 0) else {
            return Err(error);
        };
        let reason = match e.data {
            serde_json::Value::String(s) if !s.is_empty() => s,
            _ => e.message,
        };
        Err(match error {
            ClientError::NotFound(_) => ClientError::NotFound(reason),
            ClientError::Invalid(_) => ClientError::Invalid(reason),
            ClientError::Server { code, .. } => ClientError::Server {
                code,
                message: reason,
            },
            other => other,
        })
    }

    async fn send_inner(&self, build: Build<'_>) -> Result<bytes::Bytes> {
        let servers = self.order();
        http::send(self.client.shared(), &servers, build)
            .await?
            .ok_body(&servers)
    }

    pub(crate) async fn json<T: DeserializeOwned>(
        &self,
        kind: &'static str,
        build: Build<'_>,
    ) -> Result<T> {
        let body = self.send(kind, build).await?;
        serde_json::from_slice(&body).map_err(|e| ClientError::Protocol(format!("{kind}: {e}")))
    }

    /// Searches configs of `namespace` (read by [`crate::namespace_id`]): `data_id` and `group` are patterns where `*`
    /// matches anything (blank: everything).
    pub async fn search(
        &self,
        namespace: &str,
        data_id: &str,
        group: &str,
        page_no: u32,
        page_size: u32,
    ) -> Result<Page<ConfigInfo>> {
        let namespace = namespace_id(namespace);
        let (pn, ps) = (page_no.to_string(), page_size.to_string());
        self.json("search", &|http, base| {
            http.get(format!("{base}/v1/cs/configs")).query(&[
                ("search", "blur"),
                ("dataId", data_id),
                ("group", group),
                ("tenant", namespace),
                ("pageNo", &pn),
                ("pageSize", &ps),
            ])
        })
        .await
    }

    /// A page of a key's history, newest first (entries without content).
    pub async fn history(
        &self,
        key: impl IntoKey,
        page_no: u32,
        page_size: u32,
    ) -> Result<Page<HistoryEntry>> {
        let key = self.client.key(key);
        let (pn, ps) = (page_no.to_string(), page_size.to_string());
        self.json("history", &|http, base| {
            let mut q = key.v1_params();
            q.extend([("search", "accurate"), ("pageNo", &pn), ("pageSize", &ps)]);
            http.get(format!("{base}/v1/cs/history")).query(&q)
        })
        .await
    }

    /// One history entry of `key`, with its content.
    pub async fn history_entry(&self, key: impl IntoKey, nid: &str) -> Result<HistoryEntry> {
        let key: Key = self.client.key(key);
        self.json("history-entry", &|http, base| {
            let mut q = key.v1_params();
            q.push(("nid", nid));
            http.get(format!("{base}/v1/cs/history")).query(&q)
        })
        .await
    }

    /// Stops the beta (gray release by IP) of a key.
    pub async fn stop_beta(&self, key: impl IntoKey) -> Result<()> {
        let key = self.client.key(key);
        self.send("stop-beta", &|http, base| {
            let mut q = key.v1_params();
            q.push(("beta", "true"));
            http.delete(format!("{base}/v1/cs/configs")).query(&q)
        })
        .await
        .map(drop)
    }

    /// Every namespace.
    pub async fn namespaces(&self) -> Result<Vec<Namespace>> {
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            data: Vec<Namespace>,
        }
        let a: Answer = self
            .json("namespaces", &|http, base| {
                http.get(format!("{base}/v1/console/namespaces"))
            })
            .await?;
        Ok(a.data)
    }

    /// Creates a namespace (`id` blank: the server picks a UUID).
    pub async fn create_namespace(&self, id: &str, name: &str, desc: &str) -> Result<()> {
        self.send("namespace-create", &|http, base| {
            http.post(format!("{base}/v1/console/namespaces")).form(&[
                ("customNamespaceId", id),
                ("namespaceName", name),
                ("namespaceDesc", desc),
            ])
        })
        .await
        .map(drop)
    }

    /// Deletes a namespace.
    pub async fn delete_namespace(&self, id: &str) -> Result<()> {
        self.send("namespace-delete", &|http, base| {
            http.delete(format!("{base}/v1/console/namespaces"))
                .query(&[("namespaceId", id)])
        })
        .await
        .map(drop)
    }

    /// A Nacos zip (v2 layout, `.metadata.yml`) of a namespace's configs, optionally only
    /// one group.
    pub async fn export(&self, namespace: &str, group: Option<&str>) -> Result<bytes::Bytes> {
        let namespace = namespace_id(namespace);
        self.send("export", &|http, base| {
            let mut q = vec![("exportV2", "true"), ("tenant", namespace)];
            if let Some(g) = group {
                q.push(("group", g));
            }
            http.get(format!("{base}/v1/cs/configs")).query(&q)
        })
        .await
    }

    /// Imports a Nacos zip into `namespace`.
    pub async fn import(
        &self,
        namespace: &str,
        zip: &[u8],
        policy: ImportPolicy,
    ) -> Result<ImportReport> {
        self.import_inner(namespace, zip, policy, None).await
    }

    /// [`Admin::import`], calling `progress(sent, total)` as the body goes out (bytes of
    /// the whole request; it starts again from 0 when another server is tried). When
    /// `sent == total` the server is processing the archive.
    pub async fn import_with_progress(
        &self,
        namespace: &str,
        zip: &[u8],
        policy: ImportPolicy,
        progress: Progress,
    ) -> Result<ImportReport> {
        self.import_inner(namespace, zip, policy, Some(progress))
            .await
    }

    async fn import_inner(
        &self,
        namespace: &str,
        zip: &[u8],
        policy: ImportPolicy,
        progress: Option<Progress>,
    ) -> Result<ImportReport> {
        let namespace = namespace_id(namespace);
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            data: Option<ImportReport>,
        }
        let boundary = format!("nacelle-{:x}", boundary_seed(zip));
        let body = bytes::Bytes::from(multipart(&boundary, namespace, policy.as_str(), zip));
        let a: Answer = self
            .json("import", &|http, base| {
                let req = http
                    .post(format!("{base}/v1/cs/configs"))
                    .query(&[("import", "true")])
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        format!("multipart/form-data; boundary={boundary}"),
                    );
                match &progress {
                    None => req.body(body.clone()),
                    Some(p) => req
                        .header(reqwest::header::CONTENT_LENGTH, body.len())
                        .body(reqwest::Body::wrap_stream(chunks(body.clone(), p.clone()))),
                }
            })
            .await?;
        Ok(a.data.unwrap_or_default())
    }
}

/// A progress callback: `(bytes sent, bytes in all)`.
pub type Progress = std::sync::Arc<dyn Fn(u64, u64) + Send + Sync>;

/// Bytes per chunk of a body sent with progress.
const PROGRESS_CHUNK: usize = 64 * 1024;

/// `body` in chunks, reporting each one as it is taken by the connection.
fn chunks(
    body: bytes::Bytes,
    progress: Progress,
) -> impl futures::Stream<Item = std::result::Result<bytes::Bytes, std::io::Error>> + Send + 'static
{
    let total = body.len();
    let starts = (0..total).step_by(PROGRESS_CHUNK);
    futures::stream::iter(starts.map(move |start| {
        let end = (start + PROGRESS_CHUNK).min(total);
        progress(end as u64, total as u64);
        Ok(body.slice(start..end))
    }))
}

/// A `multipart/form-data` body with the fields `namespace`, `policy` and the `file`.
fn multipart(boundary: &str, namespace: &str, policy: &str, zip: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(zip.len() + 512);
    for (name, value) in [("namespace", namespace), ("policy", policy)] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"import.zip\"\r\n\
             Content-Type: application/zip\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(zip);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

/// A number drawn from the body (its md5), for a multipart boundary that is unlikely to
/// occur in it.
fn boundary_seed(data: &[u8]) -> u128 {
    use md5::{Digest, Md5};
    u128::from_be_bytes(Md5::digest(data).into())
}

impl Client {
    /// An HTTP client of the admin API (search, history, namespaces, export/import).
    pub fn admin(&self) -> Admin {
        Admin::new(self.clone())
    }
}
