//! JSON Schemas of config keys over Nacelle's own API (`/nacos/nacelle/v1/schemas`,
//! `docs/schema-validation.md`): list, read, set, remove, and check a content against the
//! schemas of its key without publishing. Reading needs read permission on the patterns'
//! keys, setting and removing `ROLE_ADMIN`. Extends [`Admin`].

use serde::Deserialize;
use serde_json::{json, Value};

use crate::admin::Admin;
use crate::error::{ClientError, Result};
use crate::key::namespace_id;

/// A schema as the server shows it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schema {
    /// The namespace (`public` for the default one).
    #[serde(default)]
    pub namespace_id: String,
    /// The group pattern (`*`, `x*`, `*x`, `*x*` or exact).
    #[serde(default)]
    pub group: String,
    /// The dataId pattern.
    #[serde(default)]
    pub data_id: String,
    /// The JSON Schema document.
    #[serde(default)]
    pub schema: Value,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// Who set it.
    #[serde(default)]
    pub src_user: String,
    /// When it was set, ms since the epoch.
    #[serde(default)]
    pub modified_time: i64,
}

/// Why a content does not pass a schema.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaProblem {
    /// The schema (`namespace>>group>>dataId`).
    #[serde(default)]
    pub schema: String,
    /// The document of a YAML stream of several (1-based).
    #[serde(default)]
    pub document: Option<usize>,
    /// JSON pointer of the failing value (`""`: the whole document); `None` when the
    /// content could not be checked (not structured, does not parse).
    #[serde(default)]
    pub path: Option<String>,
    /// The failing rule: a JSON Schema keyword, `syntax` or `content-type`.
    #[serde(default)]
    pub rule: String,
    /// Where the rule is in the schema (JSON pointer).
    #[serde(default)]
    pub schema_path: Option<String>,
    /// What is wrong.
    #[serde(default)]
    pub message: String,
    /// The whole refusal, as a publish words it.
    #[serde(default)]
    pub text: String,
}

/// The result of [`Admin::check_schemas`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SchemaCheck {
    /// Whether the content passes every schema of its key.
    #[serde(default)]
    pub valid: bool,
    /// The schemas that apply to the key.
    #[serde(default)]
    pub schemas: Vec<String>,
    /// What fails (at most 20).
    #[serde(default)]
    pub problems: Vec<SchemaProblem>,
}

fn decode<T: serde::de::DeserializeOwned>(kind: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| ClientError::Protocol(format!("{kind}: {e}")))
}

impl Admin {
    /// The schemas the caller may read, of `namespace` (read by [`crate::namespace_id`])
    /// or, with `None`, of every namespace.
    pub async fn schemas(&self, namespace: Option<&str>) -> Result<Vec<Schema>> {
        let data = self
            .send_v2("schema-list", &|http, base| {
                let req = http.get(format!("{base}/nacelle/v1/schemas"));
                match namespace {
                    Some(ns) => req.query(&[("namespaceId", namespace_id(ns))]),
                    None => req,
                }
            })
            .await?;
        decode("schema-list", data)
    }

    /// The schema of these patterns; [`ClientError::NotFound`] when there is none.
    pub async fn schema(&self, namespace: &str, group: &str, data_id: &str) -> Result<Schema> {
        let data = self
            .send_v2("schema-get", &|http, base| {
                http.get(format!("{base}/nacelle/v1/schemas")).query(&[
                    ("namespaceId", namespace_id(namespace)),
                    ("group", group),
                    ("dataId", data_id),
                ])
            })
            .await?;
        decode("schema-get", data)
    }

    /// Sets (creates or replaces) the schema of these patterns: `schema` is the JSON
    /// Schema document's text. Refused ([`ClientError::Invalid`]) when it does not
    /// compile or a pattern is not one of `*`, `x*`, `*x`, `*x*` or exact.
    pub async fn set_schema(
        &self,
        namespace: &str,
        group: &str,
        data_id: &str,
        schema: &str,
        description: &str,
    ) -> Result<Schema> {
        let body = json!({
            "namespaceId": namespace_id(namespace),
            "group": group,
            "dataId": data_id,
            "schema": schema,
            "description": description,
        });
        let data = self
            .send_v2("schema-set", &|http, base| {
                http.put(format!("{base}/nacelle/v1/schemas")).json(&body)
            })
            .await?;
        decode("schema-set", data)
    }

    /// Removes the schema of these patterns; [`ClientError::NotFound`] when there is none.
    pub async fn remove_schema(&self, namespace: &str, group: &str, data_id: &str) -> Result<()> {
        self.send_v2("schema-remove", &|http, base| {
            http.delete(format!("{base}/nacelle/v1/schemas")).query(&[
                ("namespaceId", namespace_id(namespace)),
                ("group", group),
                ("dataId", data_id),
            ])
        })
        .await?;
        Ok(())
    }

    /// Checks `content` (of `config_type`: json, yaml, properties, toml) against the
    /// schemas of the key, without publishing it.
    pub async fn check_schemas(
        &self,
        namespace: &str,
        group: &str,
        data_id: &str,
        config_type: Option<&str>,
        content: &str,
    ) -> Result<SchemaCheck> {
        let mut body = json!({
            "namespaceId": namespace_id(namespace),
            "group": group,
            "dataId": data_id,
            "content": content,
        });
        if let Some(t) = config_type {
            body["type"] = json!(t);
        }
        let data = self
            .send_v2("schema-check", &|http, base| {
                http.post(format!("{base}/nacelle/v1/schemas/check"))
                    .json(&body)
            })
            .await?;
        decode("schema-check", data)
    }
}
