//! `/nacos/v3/admin/cs/config…`: Nacos 3's admin config API (`ConfigControllerV3`,
//! 3.0.3; `PUT /metadata` from 3.1), translated to the service's operations — the same
//! ones v1/v2 call, so every rule (names, limits, permissions, encryption, gray) is the
//! service's. Models: `ConfigBasicInfo`, `ConfigDetailInfo`, `ConfigGrayInfo`,
//! `ConfigListenerInfo`, `Page`.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use nacelle_core::{GrayRule, NamespaceId, SamePolicy};
use nacelle_service::{CloneItem, ConfigView, SearchMode, SearchQuery, TransferError};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::admission::{Admitted, ReadConfig, SearchConfigs, WriteConfig};
use super::{config_key, failure, namespace_id, page, success, ErrorCode, V3Error};
use crate::archive::{self, ArchiveError, Layout};
use crate::page::PageJson;
use crate::params::{Params, PublishNames};
use crate::v1::transfer::report_data;
use crate::AppState;

/// `ConfigBasicInfo`: what every v3 config model starts with (the items of `/list` and of
/// history's `/configs`). `id` is written as a string, as Nacos's `ToStringSerializer`
/// does (a JavaScript console would round a large id).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConfigBasicInfo<'a> {
    id: String,
    namespace_id: &'a str,
    group_name: &'a str,
    data_id: &'a str,
    md5: &'a str,
    r#type: &'a str,
    app_name: &'a str,
    create_time: i64,
    modify_time: i64,
}

impl<'a> ConfigBasicInfo<'a> {
    pub(super) fn of(c: &'a ConfigView) -> Self {
        ConfigBasicInfo {
            id: c.id().to_string(),
            namespace_id: namespace_id(c.key().namespace()),
            group_name: c.key().group(),
            data_id: c.key().data_id(),
            md5: c.md5(),
            r#type: c.config_type().as_str(),
            app_name: c.app_name(),
            create_time: c.created_ms(),
            modify_time: c.modified_ms(),
        }
    }
}

/// `ConfigDetailInfo` (`ConfigBasicInfo` + details), Jackson's field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigDetailInfo<'a> {
    #[serde(flatten)]
    basic: ConfigBasicInfo<'a>,
    content: std::borrow::Cow<'a, str>,
    desc: &'a str,
    encrypted_data_key: &'a str,
    create_user: &'a str,
    create_ip: &'a str,
    config_tags: &'a str,
}

impl<'a> ConfigDetailInfo<'a> {
    /// The config with its content and data key as the service shows them to the caller
    /// (an encrypted config in plaintext, as Nacos's `decryptHandler` shows it).
    fn of(c: &'a ConfigView) -> Self {
        ConfigDetailInfo {
            basic: ConfigBasicInfo::of(c),
            content: c.content_text(),
            desc: c.desc(),
            encrypted_data_key: c.encrypted_data_key(),
            create_user: &c.source().src_user,
            create_ip: &c.source().src_ip,
            config_tags: c.config_tags(),
        }
    }
}

/// `GET /nacos/v3/admin/cs/config?dataId&groupName[&namespaceId]` → `ConfigDetailInfo`
/// of the formal config; absent: 404/20004.
pub(crate) async fn get_config(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    let Some(cfg) = st.service.formal(&p.caller, &key)? else {
        return Err(V3Error::api(
            StatusCode::NOT_FOUND,
            ErrorCode::RESOURCE_NOT_FOUND,
            "Config not exist, please publish Config first.",
        ));
    };
    Ok(success(ConfigDetailInfo::of(&cfg)))
}

/// `POST /nacos/v3/admin/cs/config` (form; headers `betaIps`, `casMd5`) → `data: true`.
/// An upsert; `content` is checked after the key (blank = missing), as
/// `ConfigFormV3.validateWithContent()` does.
pub(crate) async fn publish_config(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    if p.non_blank("content").is_none() {
        return Err(V3Error::missing("content"));
    }
    let req = p.publish_request(key, PublishNames::V2)?;
    st.service.publish(&p.caller, req).await?;
    Ok(success(true))
}

/// `DELETE /nacos/v3/admin/cs/config?dataId&groupName[&namespaceId][&tag]` → `data:
/// true`, also when absent.
pub(crate) async fn delete_config(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    let note = p.write_note(PublishNames::V2);
    st.service
        .remove(&p.caller, &key, p.get("tag"), &note)
        .await?;
    Ok(success(true))
}

/// `ids=1,2` as Spring binds a required `List<Long>`: missing is 400/10000, a value that
/// is not a number 400/20002 (`NumberFormatException`).
fn ids_of(p: &Params) -> Result<Vec<i64>, V3Error> {
    let Some(raw) = p.get("ids") else {
        return Err(V3Error::api(
            StatusCode::BAD_REQUEST,
            ErrorCode::PARAMETER_MISSING,
            "Required request parameter 'ids' for method parameter type List is not present",
        ));
    };
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| V3Error::invalid(format!("For input string: \"{s}\"")))
        })
        .collect()
}

/// `DELETE /nacos/v3/admin/cs/config/batch?ids=1,2` → `data: true`; unknown ids skipped.
pub(crate) async fn delete_batch(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let ids = ids_of(&p)?;
    let note = p.write_note(PublishNames::V2);
    st.service.remove_by_ids(&p.caller, &ids, &note).await?;
    Ok(success(true))
}

/// `GET /nacos/v3/admin/cs/config/list` → `Page<ConfigBasicInfo>`. `search` is `blur`
/// (default; `*` is a wildcard) or `accurate`; `dataId`/`groupName` may be blank;
/// `appName`, `configTags`, `type` (comma-separated) and `configDetail` (the content, a
/// pattern like `dataId`) filter further.
pub(crate) async fn list(
    State(st): State<AppState>,
    p: Admitted<SearchConfigs>,
) -> Result<Response, V3Error> {
    let namespace = NamespaceId::parse(p.get("namespaceId"))?;
    let page = page(&p, None)?;
    let mode = match p.get("search").unwrap_or("blur") {
        "blur" => SearchMode::Blur,
        "accurate" => SearchMode::Accurate,
        other => {
            return Err(V3Error::invalid(format!(
                "invalid search : {other} (expected accurate or blur)"
            )))
        }
    };
    let q = SearchQuery {
        mode,
        namespace,
        data_id: p.or_empty("dataId"),
        group: p.or_empty("groupName"),
        app_name: p.or_empty("appName"),
        config_tags: p.or_empty("configTags"),
        types: p.or_empty("type"),
        content: p.or_empty("configDetail"),
        page,
    };
    let result = st.service.search(&p.caller, &q)?;
    Ok(success(PageJson::of(&result, ConfigBasicInfo::of)))
}

/// `PUT /nacos/v3/admin/cs/config/metadata?dataId&groupName[&namespaceId][&desc]
/// [&configTags]` (Nacos 3.1+) → `data: true`: the formal config's description and tags
/// change (an absent parameter leaves its field as it is), its content does not. Nacos
/// updates the two columns in place; Nacelle writes a new version with the same content
/// (so history shows the change and listeners, whose md5 is unchanged, are not woken).
pub(crate) async fn update_metadata(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    // Description and tags change in place: no new version, no history row (Nacos 3.1's
    // `updateConfigInfoMetadata`); an absent parameter keeps its field.
    match st
        .service
        .update_metadata(&p.caller, &key, p.get("desc"), p.get("configTags"))
        .await
    {
        Ok(()) => {}
        // `updateConfigInfoMetadata` throws `NacosException(NOT_FOUND, …)`, which
        // `NacosApiExceptionHandler` answers with its status and `Result.failure(SERVER_ERROR,
        // message)`.
        Err(nacelle_core::CoreError::NotFound(_)) => {
            return Err(V3Error::api(
                StatusCode::NOT_FOUND,
                ErrorCode::SERVER_ERROR,
                format!(
                    "config is not found for dataId={}, group={}",
                    key.data_id(),
                    key.group()
                ),
            ))
        }
        Err(e) => return Err(e.into()),
    }
    Ok(success(true))
}

/// `ConfigGrayInfo`: `ConfigDetailInfo` plus the gray's name and its rule as Nacos stores
/// it (a JSON string).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigGrayInfo<'a> {
    #[serde(flatten)]
    detail: ConfigDetailInfo<'a>,
    gray_name: &'a str,
    gray_rule: String,
}

/// The gray rule string Nacos stores (`GrayRuleManager`):
/// `{"type":"beta","version":"1.0.0","expr":"<ips>","priority":2147483647}`.
fn gray_rule_json(rule: &GrayRule, priority: i32) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    format!(
        r#"{{"type":{},"version":{},"expr":{},"priority":{}}}"#,
        q(rule.kind()),
        q(rule.version()),
        q(&rule.expr()),
        priority
    )
}

/// `GET /nacos/v3/admin/cs/config/beta?dataId&groupName[&namespaceId]` →
/// `ConfigGrayInfo` of the beta; none: 404/20004 "Config is not in beta.".
pub(crate) async fn get_beta(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    let grays = st.service.grays_of(&p.caller, &key)?;
    let Some(beta) = grays.iter().find(|g| matches!(g.rule, GrayRule::Beta(_))) else {
        return Err(V3Error::api(
            StatusCode::NOT_FOUND,
            ErrorCode::RESOURCE_NOT_FOUND,
            "Config is not in beta.",
        ));
    };
    let mut detail = ConfigDetailInfo::of(&beta.config);
    // Nacos's `transferToConfigGrayInfo`: the gray row's srcUser is its createUser.
    detail.create_user = &beta.config.source().src_user;
    Ok(success(ConfigGrayInfo {
        detail,
        gray_name: &beta.name,
        gray_rule: gray_rule_json(&beta.rule, beta.priority),
    }))
}

/// `DELETE /nacos/v3/admin/cs/config/beta?dataId&groupName[&namespaceId]` → `data: true`.
pub(crate) async fn stop_beta(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    st.service.stop_beta(&p.caller, &key).await?;
    Ok(success(true))
}

/// `ConfigListenerInfo`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConfigListenerInfo {
    pub query_type: &'static str,
    pub listeners_status: BTreeMap<String, String>,
}

/// `GET /nacos/v3/admin/cs/config/listener?dataId&groupName[&namespaceId]` →
/// `{"queryType":"config","listenersStatus":{"<ip>":"<md5>"}}`.
pub(crate) async fn listeners(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    let listeners = st.service.listeners(&p.caller)?.of_key(&key)?;
    Ok(success(ConfigListenerInfo {
        query_type: "config",
        listeners_status: listeners.into_iter().collect(),
    }))
}

/// `GET /nacos/v3/admin/cs/config/export?ids=…` (or by `dataId`, `groupName`,
/// `namespaceId`, `appName` when `ids` is blank) → the zip Nacos 3 writes (`<group>/<dataId>`
/// entries and `.metadata.yml`).
pub(crate) async fn export(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let ids = match p.get("ids") {
        Some(_) => ids_of(&p)?,
        None => Vec::new(),
    };
    let q = nacelle_service::ExportQuery {
        namespace: NamespaceId::parse(p.get("namespaceId"))?,
        data_id: p.or_empty("dataId"),
        group: p.or_empty("groupName"),
        app_name: p.or_empty("appName"),
        ids,
    };
    let configs = st.service.export(&p.caller, &q)?;
    Ok(crate::v1::transfer::zip_response(&configs, Layout::V2)?)
}

/// Nacos's `SameConfigPolicy` (`ABORT` when absent); anything else is Spring's failed
/// enum conversion, 400/20002.
fn policy_of(p: &Params) -> Result<SamePolicy, V3Error> {
    match p.non_blank("policy") {
        None | Some("ABORT") => Ok(SamePolicy::Abort),
        Some("SKIP") => Ok(SamePolicy::Skip),
        Some("OVERWRITE") => Ok(SamePolicy::Overwrite),
        Some(v) => Err(V3Error::invalid(format!(
            "invalid policy : {v} (expected ABORT, SKIP or OVERWRITE)"
        ))),
    }
}

/// An import or clone refused as a whole: HTTP 200 with Nacos's code and
/// `data {"succCount":0}`.
fn transfer_refusal(e: TransferError) -> Result<Response, V3Error> {
    let zero = json!({"succCount": 0});
    match e {
        TransferError::NamespaceMissing(_) => Ok(failure(ErrorCode::NAMESPACE_NOT_EXIST, zero)),
        TransferError::NothingToWrite(_) => Ok(failure(ErrorCode::DATA_EMPTY, zero)),
        TransferError::Core(e) => Err(e.into()),
    }
}

/// `POST /nacos/v3/admin/cs/config/import` (multipart `file`; `namespaceId`, `policy`,
/// `src_user`) → `data {succCount, skipCount, failData?, skipData?, unrecognizedCount?,
/// unrecognizedData?}`; refusals with HTTP 200 (22001, 100002, 100004, 100005).
pub(crate) async fn import(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let policy = policy_of(&p)?;
    let Some(file) = &p.file else {
        return Ok(failure(ErrorCode::DATA_EMPTY, json!({})));
    };
    let zero = json!({"succCount": 0});
    let decoded = match archive::decode(file) {
        Ok(d) => d,
        Err(ArchiveError::Metadata(_)) => return Ok(failure(ErrorCode::METADATA_ILLEGAL, zero)),
        Err(ArchiveError::Invalid(_)) => return Ok(failure(ErrorCode::PARSING_DATA_FAILED, zero)),
    };
    let namespace = p.or_empty("namespaceId");
    let src_user = p.or_empty("src_user");
    match st
        .service
        .import(&p.caller, &namespace, decoded.items, policy, &src_user)
        .await
    {
        Ok(report) => Ok(success(report_data(&report, &decoded.unrecognized))),
        Err(e) => transfer_refusal(e),
    }
}

/// One item of a clone's JSON body (`ConfigCloneInfo`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigCloneInfo {
    /// A number, or the string every v3 model writes ids as (Jackson coerces either).
    #[serde(default, deserialize_with = "crate::params::long_or_string")]
    config_id: Option<i64>,
    target_group_name: Option<String>,
    target_data_id: Option<String>,
}

/// `POST /nacos/v3/admin/cs/config/clone?namespaceId=<target>[&policy][&src_user]` with a
/// JSON body `[{configId, targetGroupName, targetDataId}]` → the import's `data`.
pub(crate) async fn clone(
    State(st): State<AppState>,
    p: Admitted<WriteConfig>,
) -> Result<Response, V3Error> {
    let Some(namespace) = p.get("namespaceId") else {
        return Err(V3Error::api(
            StatusCode::BAD_REQUEST,
            ErrorCode::PARAMETER_MISSING,
            "Required request parameter 'namespaceId' for method parameter type String is not present",
        ));
    };
    let policy = policy_of(&p)?;
    let beans: Vec<Option<ConfigCloneInfo>> = match p.json_body.as_deref() {
        None => Vec::new(),
        Some(b) if b.iter().all(u8::is_ascii_whitespace) => Vec::new(),
        Some(b) => serde_json::from_slice(b).map_err(|e| {
            V3Error::api(
                StatusCode::BAD_REQUEST,
                ErrorCode::PARAMETER_VALIDATE_ERROR,
                format!("JSON parse error: {e}"),
            )
        })?,
    };
    let items: Vec<CloneItem> = beans
        .into_iter()
        .flatten()
        .filter_map(|b| {
            Some(CloneItem {
                cfg_id: b.config_id?,
                data_id: b.target_data_id,
                group: b.target_group_name,
            })
        })
        .collect();
    if items.is_empty() {
        return Ok(failure(
            ErrorCode::NO_SELECTED_CONFIG,
            json!({"succCount": 0}),
        ));
    }
    let src_user = p.or_empty("src_user");
    match st
        .service
        .clone_configs(&p.caller, namespace, &items, policy, &src_user)
        .await
    {
        Ok(report) => Ok(success(report_data(&report, &[]))),
        Err(e) => transfer_refusal(e),
    }
}
