//! Webhooks over Nacelle's own API (`/nacos/nacelle/v1/webhooks`, docs/webhooks.md): list,
//! create, change and remove webhooks, list a webhook's deliveries and send one again. An
//! administrator only. Extends [`Admin`].

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::admin::{lenient_string, Admin, Page};
use crate::error::{ClientError, Result};
use crate::key::namespace_id;

/// A webhook as the server shows it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    #[serde(default)]
    pub id: i64,
    /// The namespace (`public` for the default one).
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace_id: String,
    /// The group pattern (`*`, `x*`, `*x`, `*x*` or exact).
    #[serde(default, deserialize_with = "lenient_string")]
    pub group: String,
    /// The dataId pattern.
    #[serde(default, deserialize_with = "lenient_string")]
    pub data_id: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub url: String,
    /// Which secret is set: `sha256:` and 12 hex digits of its SHA-256.
    #[serde(default, deserialize_with = "lenient_string")]
    pub secret_fingerprint: String,
    /// The event kinds it receives; empty: every kind.
    #[serde(default)]
    pub events: Vec<String>,
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, deserialize_with = "lenient_string")]
    pub description: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub created_by: String,
    /// ms since the epoch.
    #[serde(default)]
    pub created_time: i64,
    #[serde(default)]
    pub modified_time: i64,
}

/// One delivery of an event to a webhook.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDelivery {
    #[serde(default)]
    pub id: i64,
    #[serde(default)]
    pub hook_id: i64,
    #[serde(default, deserialize_with = "lenient_string")]
    pub event_id: String,
    /// The event kind (`publish`, `change-approved`, …).
    #[serde(default, deserialize_with = "lenient_string")]
    pub kind: String,
    /// `pending`, `delivered` or `failed`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub status: String,
    #[serde(default)]
    pub attempts: u32,
    /// The last attempt's HTTP status; `None`: no answer.
    #[serde(default)]
    pub last_code: Option<u16>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub last_error: String,
    /// When a pending delivery is tried next (ms since the epoch).
    #[serde(default)]
    pub next_attempt_time: Option<i64>,
    #[serde(default)]
    pub created_time: i64,
    #[serde(default)]
    pub modified_time: i64,
    /// The JSON body sent.
    #[serde(default)]
    pub body: Value,
}

/// The fields of a webhook to create or change; `None` leaves a field as it is (on
/// create: `*` patterns, every event kind, enabled).
#[derive(Debug, Clone, Default)]
pub struct WebhookSpec {
    /// The namespace (create only; `public` or blank: the default one).
    pub namespace: Option<String>,
    pub group: Option<String>,
    pub data_id: Option<String>,
    pub url: Option<String>,
    /// The HMAC-SHA256 key of `X-Nacelle-Signature` (8 to 256 characters).
    pub secret: Option<String>,
    /// Event kinds; an empty list: every kind.
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub description: Option<String>,
}

impl WebhookSpec {
    fn body(&self) -> Value {
        let mut m = Map::new();
        if let Some(ns) = &self.namespace {
            m.insert("namespaceId".into(), json!(namespace_id(ns)));
        }
        let texts = [
            ("group", &self.group),
            ("dataId", &self.data_id),
            ("url", &self.url),
            ("secret", &self.secret),
            ("description", &self.description),
        ];
        for (name, v) in texts {
            if let Some(v) = v {
                m.insert(name.into(), json!(v));
            }
        }
        if let Some(e) = &self.events {
            m.insert("events".into(), json!(e));
        }
        if let Some(e) = self.enabled {
            m.insert("enabled".into(), json!(e));
        }
        Value::Object(m)
    }
}

impl Admin {
    /// Every webhook.
    pub async fn webhooks(&self) -> Result<Vec<Webhook>> {
        let data = self
            .send_v2("webhook-list", &|http, base| {
                http.get(format!("{base}/nacelle/v1/webhooks"))
            })
            .await?;
        decode("webhook-list", data)
    }

    /// Creates a webhook (`url` and `secret` required).
    pub async fn create_webhook(&self, spec: &WebhookSpec) -> Result<Webhook> {
        let body = spec.body();
        let data = self
            .send_v2("webhook-create", &|http, base| {
                http.post(format!("{base}/nacelle/v1/webhooks")).json(&body)
            })
            .await?;
        decode("webhook-create", data)
    }

    /// Changes the given fields of webhook `id`.
    pub async fn update_webhook(&self, id: i64, spec: &WebhookSpec) -> Result<Webhook> {
        let mut body = spec.body();
        body["id"] = json!(id);
        let data = self
            .send_v2("webhook-update", &|http, base| {
                http.put(format!("{base}/nacelle/v1/webhooks")).json(&body)
            })
            .await?;
        decode("webhook-update", data)
    }

    /// Removes webhook `id` and its deliveries; [`ClientError::NotFound`] when there is
    /// none.
    pub async fn delete_webhook(&self, id: i64) -> Result<()> {
        let id = id.to_string();
        self.send_v2("webhook-delete", &|http, base| {
            http.delete(format!("{base}/nacelle/v1/webhooks"))
                .query(&[("id", id.as_str())])
        })
        .await?;
        Ok(())
    }

    /// A page of webhook `id`'s deliveries, newest first.
    pub async fn webhook_deliveries(
        &self,
        id: i64,
        page_no: u32,
        page_size: u32,
    ) -> Result<Page<WebhookDelivery>> {
        let q = [
            ("id", id.to_string()),
            ("pageNo", page_no.max(1).to_string()),
            ("pageSize", page_size.max(1).to_string()),
        ];
        let data = self
            .send_v2("webhook-deliveries", &|http, base| {
                http.get(format!("{base}/nacelle/v1/webhook/deliveries"))
                    .query(&q)
            })
            .await?;
        decode("webhook-deliveries", data)
    }

    /// Sends a delivered or failed delivery again.
    pub async fn redeliver_webhook(&self, delivery_id: i64) -> Result<()> {
        let id = delivery_id.to_string();
        self.send_v2("webhook-redeliver", &|http, base| {
            http.post(format!("{base}/nacelle/v1/webhook/redeliver"))
                .query(&[("deliveryId", id.as_str())])
        })
        .await?;
        Ok(())
    }
}

fn decode<T: serde::de::DeserializeOwned>(kind: &str, data: Value) -> Result<T> {
    serde_json::from_value(data).map_err(|e| ClientError::Protocol(format!("{kind} answer: {e}")))
}
