//! Nacos HTTP v1 API under `/nacos/v1`.

pub(crate) mod auth;
pub(crate) mod cluster;
pub(crate) mod configs;
pub(crate) mod health;
pub(crate) mod history;
pub(crate) mod listener;
pub(crate) mod namespaces;
pub(crate) mod transfer;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use nacelle_core::ConfigKey;
use serde::Serialize;

use crate::error::ApiError;
use crate::params::Params;

/// Builds a key from `dataId`, `group` and `tenant` parameters (both names required).
pub(crate) fn key_from_params(p: &Params, tenant_param: &str) -> Result<ConfigKey, ApiError> {
    let data_id = p.required("dataId")?;
    let group = p.required("group")?;
    Ok(ConfigKey::parse(p.get(tenant_param), group, data_id)?)
}

/// A JSON response with Nacos's content type.
pub(crate) fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json;charset=UTF-8"),
            )],
            body,
        )
            .into_response(),
        Err(e) => ApiError::Internal(format!("serializing response: {e}")).into_response(),
    }
}

/// The body `true` that Nacos answers for successful writes.
pub(crate) fn ok_true() -> Response {
    json(&true)
}

/// Nacos's `{code, message, data}` envelope used by console endpoints.
#[derive(Debug, Serialize)]
pub(crate) struct RestResult<T: Serialize> {
    pub code: u16,
    pub message: Option<String>,
    pub data: T,
}

impl<T: Serialize> RestResult<T> {
    pub fn ok(data: T) -> Self {
        RestResult {
            code: 200,
            message: None,
            data,
        }
    }
}

/// A time in ms as Nacos's history JSON shows it: `2020-12-05T01:48:03.380+0000`.
pub(crate) fn iso_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3f+0000").to_string())
        .unwrap_or_default()
}
