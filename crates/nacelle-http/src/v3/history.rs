//! `/nacos/v3/admin/cs/history` (Nacos 3's `HistoryControllerV3`): a key's history
//! (`/list`), one entry by `nid`, the entry before a config's current version
//! (`/previous?id=`), and the configs of a namespace (`/configs?namespaceId=`). The same
//! service operations as `/nacos/v1/cs/history` and the console's history.
//!
//! Wire facts (alibaba/nacos 3.0.3): `HistoryControllerV3`, `HistoryService`,
//! `ResponseUtil.transferToConfigHistory*Info`, `ConfigRowMapperInjector`
//! (`ConfigHistoryRowMapper` for list items: no `md5`, no content;
//! `ConfigHistoryDetailRowMapper` for one entry), `api/config/model/ConfigBasicInfo`
//! (`id` written as a JSON string by `ToStringSerializer`), `ConfigHistoryBasicInfo`,
//! `ConfigHistoryDetailInfo`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use nacelle_core::{HistoryEntry, NamespaceId};
use nacelle_service::HistoryLookupError;
use serde::Serialize;

use super::admission::{Admitted, ReadConfig};
use super::config::ConfigBasicInfo;
use super::{config_key, namespace_id, page, request_param, success, ErrorCode, V3Error};
use crate::page::PageJson;
use crate::params::Params;
use crate::AppState;

/// Nacos clamps a history page to this many items (`Math.min(500, pageSize)`).
const MAX_HISTORY_PAGE_SIZE: u64 = 500;

/// `publish_type` of a formal history row: Nacelle's history API shows formal rows only
/// (gray changes are in the gray log).
const PUBLISH_TYPE_FORMAL: &str = "formal";

/// `ConfigHistoryBasicInfo` (`ConfigBasicInfo` + `srcIp`, `srcUser`, `opType`,
/// `publishType`), and with `detail` the fields `ConfigHistoryDetailInfo` adds (`content`,
/// `encryptedDataKey`, `grayName`, `extInfo`), Jackson's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HistoryInfo<'a> {
    /// The history row's `nid`, as a string.
    id: String,
    namespace_id: &'a str,
    group_name: &'a str,
    data_id: &'a str,
    /// `null` on list items (Nacos's list query does not read it).
    md5: Option<&'a str>,
    /// Always `null`: a history row has no `type` property to copy.
    r#type: Option<&'a str>,
    app_name: &'a str,
    create_time: i64,
    modify_time: i64,
    src_ip: &'a str,
    src_user: &'a str,
    op_type: &'a str,
    publish_type: &'a str,
    /// Nacelle's: the write's message; left out when there is none, so an answer without
    /// one has exactly Nacos's fields.
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    /// Nacelle's: the change request of the write, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    change_id: Option<i64>,
    #[serde(flatten)]
    detail: Option<HistoryDetail>,
}

/// What `ConfigHistoryDetailInfo` adds to the basic fields.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HistoryDetail {
    content: String,
    encrypted_data_key: String,
    /// `null` for a formal row, as Nacos writes it.
    gray_name: Option<String>,
    /// `null`: Nacelle keeps no `ext_info` for formal rows.
    ext_info: Option<String>,
}

impl<'a> HistoryInfo<'a> {
    fn of(h: &'a HistoryEntry, detail: Option<HistoryDetail>) -> Self {
        HistoryInfo {
            id: h.nid.to_string(),
            namespace_id: namespace_id(h.key.namespace()),
            group_name: h.key.group(),
            data_id: h.key.data_id(),
            md5: detail.as_ref().map(|_| h.md5.as_str()),
            r#type: None,
            app_name: &h.app_name,
            create_time: h.created_ms,
            modify_time: h.modified_ms,
            src_ip: &h.source.src_ip,
            src_user: &h.source.src_user,
            op_type: h.op_type.as_str(),
            publish_type: PUBLISH_TYPE_FORMAL,
            message: &h.source.message,
            change_id: h.source.change_id,
            detail,
        }
    }
}

/// The refusals of one entry as `HistoryControllerV3` answers them: an entry of another
/// key is `AccessException` (403/10001, Nacos's message); an absent one reaches
/// `BeanUtils.copyProperties(null, …)`, an `IllegalArgumentException` (400/20002).
fn lookup_error(e: HistoryLookupError) -> V3Error {
    match e {
        HistoryLookupError::OtherKey(_) => V3Error::api(
            StatusCode::FORBIDDEN,
            ErrorCode::ACCESS_DENIED,
            "Please check dataId, group or namespaceId.",
        ),
        HistoryLookupError::Absent(m) => V3Error::invalid(m),
        HistoryLookupError::Core(e) => e.into(),
    }
}

/// A `Long` request parameter (`@RequestParam("nid") Long`): missing is 400/10000, not a
/// number 400/20002 (`NumberFormatException`).
fn long_param(p: &Params, name: &str) -> Result<i64, V3Error> {
    let raw = request_param(p, name, "Long")?;
    raw.trim()
        .parse::<i64>()
        .map_err(|_| V3Error::invalid(format!("For input string: \"{raw}\"")))
}

/// One entry with its content as the service shows it (an encrypted config's history
/// decrypted, as Nacos's `HistoryService` does).
fn detail_of(h: &HistoryEntry) -> Result<Response, V3Error> {
    let detail = HistoryDetail {
        content: h.content.clone(),
        encrypted_data_key: h.encrypted_data_key.clone(),
        gray_name: None,
        ext_info: None,
    };
    Ok(success(HistoryInfo::of(h, Some(detail))))
}

/// `GET /list?dataId&groupName[&namespaceId][&pageNo][&pageSize]` →
/// `Page<ConfigHistoryBasicInfo>`, newest first; a page holds at most 500 items.
pub(crate) async fn list(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    let page = page(&p, Some(MAX_HISTORY_PAGE_SIZE))?;
    let result = st.service.history(&p.caller, &key, page).await?;
    Ok(success(PageJson::of(&result, |h| HistoryInfo::of(h, None))))
}

/// `GET ?dataId&groupName[&namespaceId]&nid` → `ConfigHistoryDetailInfo`.
pub(crate) async fn entry(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    let nid = long_param(&p, "nid")?;
    let h = st
        .service
        .history_entry_checked(&p.caller, &key, nid)
        .await
        .map_err(lookup_error)?;
    detail_of(&h)
}

/// `GET /previous?dataId&groupName[&namespaceId]&id=<config id>` → the
/// `ConfigHistoryDetailInfo` with the highest `nid` of that config row.
pub(crate) async fn previous(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    let id = long_param(&p, "id")?;
    let h = st
        .service
        .history_previous_checked(&p.caller, &key, id)
        .await
        .map_err(lookup_error)?;
    detail_of(&h)
}

/// `GET /configs?namespaceId=` (required; blank or `public` is the default namespace) →
/// `List<ConfigBasicInfo>`, every config of the namespace the caller may read.
pub(crate) async fn configs(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let namespace = NamespaceId::parse(Some(request_param(&p, "namespaceId", "String")?))?;
    let configs = st.service.configs_of_namespace(&p.caller, &namespace)?;
    let items: Vec<ConfigBasicInfo> = configs.iter().map(ConfigBasicInfo::of).collect();
    Ok(success(items))
}
