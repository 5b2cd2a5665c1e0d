//! `/nacos/v1/cs/configs?export=true|exportV2=true` (GET), `?import=true` and
//! `?clone=true` (POST): Nacos's archive export, import and namespace clone. The archive
//! format is `crate::archive`; what is written, and how, the service decides
//! (`nacelle_service::transfer`).
//!
//! Answers as Nacos 2.4 does: `{code:200, message, data:{succCount, skipCount, failData?,
//! skipData?, unrecognizedCount?, unrecognizedData?}}` (a list only when not empty). A
//! refusal carries Nacos's result code in the same envelope (`100001` namespace missing,
//! `100002` metadata illegal, `100004` archive unreadable, `100005` nothing to import,
//! `100006` nothing selected; `400` an invalid config) with HTTP status 400 — Nacos sends
//! these with status 200.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use nacelle_core::{CoreError, NamespaceId, SamePolicy};
use nacelle_service::{CloneItem, ExportQuery, ImportReport, TransferError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::json;
use crate::archive::{self, ArchiveError, Layout};
use crate::error::ApiError;
use crate::params::{Params, PublishNames};
use crate::AppState;

/// Nacos's `ResultCodeEnum` entries of import and clone.
const NAMESPACE_NOT_EXIST: (i32, &str) = (100001, "目标 namespace 不存在");
const METADATA_ILLEGAL: i32 = 100002;
const PARSING_DATA_FAILED: i32 = 100004;
const DATA_EMPTY: (i32, &str) = (100005, "导入的文件数据为空");
const NO_SELECTED_CONFIG: (i32, &str) = (100006, "没有选择任何配置");

/// A refused import or clone: HTTP 400 with Nacos's envelope and `data.succCount` 0.
fn refusal(code: i32, message: &str) -> Response {
    let body = json!({"code": code, "message": message, "data": {"succCount": 0}});
    let mut resp = json(&body);
    *resp.status_mut() = StatusCode::BAD_REQUEST;
    resp
}

fn transfer_error(e: TransferError) -> Result<Response, ApiError> {
    match e {
        TransferError::NamespaceMissing(_) => {
            Ok(refusal(NAMESPACE_NOT_EXIST.0, NAMESPACE_NOT_EXIST.1))
        }
        TransferError::NothingToWrite(_) => Ok(refusal(DATA_EMPTY.0, DATA_EMPTY.1)),
        TransferError::Core(CoreError::Invalid(m)) => Ok(refusal(400, &m)),
        TransferError::Core(e) => Err(e.into()),
    }
}

/// Nacos's `SameConfigPolicy`; `ABORT` when absent.
fn policy_of(p: &Params) -> Result<SamePolicy, ApiError> {
    match p.non_blank("policy").map(str::trim) {
        None => Ok(SamePolicy::Abort),
        Some(v) if v.eq_ignore_ascii_case("ABORT") => Ok(SamePolicy::Abort),
        Some(v) if v.eq_ignore_ascii_case("SKIP") => Ok(SamePolicy::Skip),
        Some(v) if v.eq_ignore_ascii_case("OVERWRITE") => Ok(SamePolicy::Overwrite),
        Some(v) => Err(ApiError::Invalid(format!(
            "invalid policy : {v} (expected ABORT, SKIP or OVERWRITE)"
        ))),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Named<'a> {
    data_id: &'a str,
    group: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ItemName<'a> {
    item_name: &'a str,
}

/// The `data` of a successful import or clone, keys as Nacos sends them.
pub(crate) fn report_data(report: &ImportReport, unrecognized: &[String]) -> Value {
    let names = |list: &[nacelle_service::NamedConfig]| {
        serde_json::to_value(
            list.iter()
                .map(|n| Named {
                    data_id: &n.data_id,
                    group: &n.group,
                })
                .collect::<Vec<_>>(),
        )
        .unwrap_or(Value::Null)
    };
    let mut data = Map::new();
    data.insert("succCount".into(), report.succ_count.into());
    data.insert("skipCount".into(), report.skip_count.into());
    if !report.fail_data.is_empty() {
        data.insert("failData".into(), names(&report.fail_data));
    }
    if !report.skip_data.is_empty() {
        data.insert("skipData".into(), names(&report.skip_data));
    }
    if !unrecognized.is_empty() {
        data.insert("unrecognizedCount".into(), unrecognized.len().into());
        let items: Vec<ItemName<'_>> = unrecognized
            .iter()
            .map(|n| ItemName { item_name: n })
            .collect();
        data.insert(
            "unrecognizedData".into(),
            serde_json::to_value(items).unwrap_or(Value::Null),
        );
    }
    Value::Object(data)
}

/// `GET ?export=true` / `?exportV2=true`: the selected configs as a zip archive.
pub(crate) fn export(st: &AppState, p: &Params, layout: Layout) -> Result<Response, ApiError> {
    let ids = match p.non_blank("ids") {
        Some(raw) => raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<i64>()
                    .map_err(|_| ApiError::Invalid(format!("invalid ids : {raw}")))
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let q = ExportQuery {
        namespace: NamespaceId::parse(p.get("tenant"))?,
        data_id: p.or_empty("dataId"),
        group: p.or_empty("group"),
        app_name: p.or_empty("appName"),
        ids,
    };
    let configs = st.service.export(&p.caller, &q)?;
    zip_response(&configs, layout)
}

/// The archive of `configs` as Nacos sends an export: a zip, `application/octet-stream`,
/// `Content-Disposition: attachment;filename=nacos_config_export_<yyyyMMddHHmmss>.zip`.
pub(crate) fn zip_response(
    configs: &[nacelle_service::ConfigView],
    layout: Layout,
) -> Result<Response, ApiError> {
    let zip = archive::encode(configs, layout).map_err(ApiError::Internal)?;
    let file_name = format!(
        "attachment;filename=nacos_config_export_{}.zip",
        chrono::Utc::now().format("%Y%m%d%H%M%S")
    );
    let mut resp = (StatusCode::OK, zip).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&file_name) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

/// `POST ?import=true`: multipart `file`, `namespace` (or `tenant`), `policy`, `src_user`.
pub(crate) async fn import(st: &AppState, p: &Params) -> Result<Response, ApiError> {
    let policy = policy_of(p)?;
    let Some(file) = &p.file else {
        // Nacos answers a missing file with DATA_EMPTY and an empty `data`.
        let mut resp = json(&json!({"code": DATA_EMPTY.0, "message": DATA_EMPTY.1, "data": {}}));
        *resp.status_mut() = StatusCode::BAD_REQUEST;
        return Ok(resp);
    };
    let namespace = p
        .get("namespace")
        .or_else(|| p.get("tenant"))
        .unwrap_or_default()
        .to_string();
    let decoded = match archive::decode(file) {
        Ok(d) => d,
        Err(ArchiveError::Metadata(m)) => return Ok(refusal(METADATA_ILLEGAL, &m)),
        Err(ArchiveError::Invalid(m)) => {
            return Ok(refusal(
                PARSING_DATA_FAILED,
                &format!("invalid archive: {m}"),
            ))
        }
    };
    let src_user = p.src_user(PublishNames::V1);
    match st
        .service
        .import(&p.caller, &namespace, decoded.items, policy, &src_user)
        .await
    {
        Ok(report) => Ok(json(&json!({
            "code": 200,
            "message": "导入成功",
            "data": report_data(&report, &decoded.unrecognized),
        }))),
        Err(e) => transfer_error(e),
    }
}

/// One item of a clone's JSON body (Nacos's `SameNamespaceCloneConfigBean`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CloneBean {
    /// A number, or a string holding one (`show=all` and searches give ids as strings;
    /// Nacos's `Long cfgId` takes either).
    #[serde(default, deserialize_with = "crate::params::long_or_string")]
    cfg_id: Option<i64>,
    data_id: Option<String>,
    group: Option<String>,
}

/// `POST ?clone=true&tenant=…&policy=…` with a JSON body `[{cfgId, dataId, group}]`.
pub(crate) async fn clone(st: &AppState, p: &Params) -> Result<Response, ApiError> {
    let namespace = p.required("tenant")?.to_string();
    let policy = policy_of(p)?;
    let beans: Vec<Option<CloneBean>> = match p.json_body.as_deref() {
        None => Vec::new(),
        Some(b) if b.iter().all(u8::is_ascii_whitespace) => Vec::new(),
        Some(b) => serde_json::from_slice(b)
            .map_err(|e| ApiError::Invalid(format!("the clone body is not a config list: {e}")))?,
    };
    let items: Vec<CloneItem> = beans
        .into_iter()
        .flatten()
        .filter_map(|b| {
            Some(CloneItem {
                cfg_id: b.cfg_id?,
                data_id: b.data_id,
                group: b.group,
            })
        })
        .collect();
    if items.is_empty() {
        return Ok(refusal(NO_SELECTED_CONFIG.0, NO_SELECTED_CONFIG.1));
    }
    let src_user = p.src_user(PublishNames::V1);
    match st
        .service
        .clone_configs(&p.caller, &namespace, &items, policy, &src_user)
        .await
    {
        Ok(report) => Ok(json(&json!({
            "code": 200,
            "message": "Clone Completed Successfully",
            "data": report_data(&report, &[]),
        }))),
        Err(e) => transfer_error(e),
    }
}
