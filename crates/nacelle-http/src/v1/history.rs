//! `/nacos/v1/cs/history`: history of a key, one entry, the previous version, and the
//! configs of a namespace.

use axum::extract::State;
use axum::response::Response;
use nacelle_core::{HistoryEntry, PageRequest};
use serde::Serialize;

use super::{iso_time, json, key_from_params};
use crate::error::ApiError;
use crate::page::PageJson;
use crate::params::Params;
use crate::AppState;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HistoryJson<'a> {
    /// Nacos puts the history row's `nid` here.
    id: String,
    last_id: i64,
    data_id: &'a str,
    group: &'a str,
    tenant: &'a str,
    app_name: &'a str,
    md5: Option<&'a str>,
    content: Option<&'a str>,
    src_ip: &'a str,
    src_user: &'a str,
    op_type: &'a str,
    created_time: String,
    last_modified_time: String,
    encrypted_data_key: &'a str,
    /// Nacelle's: the write's message; left out when there is none, so an answer without
    /// one has exactly Nacos's fields.
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    /// Nacelle's: the change request of the write, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    change_id: Option<i64>,
}

impl<'a> HistoryJson<'a> {
    /// An entry; `content` is what the caller is shown (an encrypted config's plaintext,
    /// see [`entry_json`]), `None` for page items, which carry no content.
    fn of(h: &'a HistoryEntry, content: Option<&'a str>) -> Self {
        let with_content = content.is_some();
        HistoryJson {
            id: h.nid.to_string(),
            last_id: -1,
            data_id: h.key.data_id(),
            group: h.key.group(),
            tenant: h.key.tenant(),
            app_name: &h.app_name,
            md5: with_content.then_some(h.md5.as_str()),
            content,
            src_ip: &h.source.src_ip,
            src_user: &h.source.src_user,
            op_type: h.op_type.as_str(),
            created_time: iso_time(h.created_ms),
            last_modified_time: iso_time(h.modified_ms),
            encrypted_data_key: &h.encrypted_data_key,
            message: &h.source.message,
            change_id: h.source.change_id,
        }
    }
}

fn parse_id(p: &Params, name: &str) -> Result<i64, ApiError> {
    let raw = p.required(name)?;
    raw.trim()
        .parse::<i64>()
        .map_err(|_| ApiError::Invalid(format!("invalid {name} : {raw}")))
}

/// `GET /nacos/v1/cs/history`: a page of a key's history, or one entry with `nid`.
pub(crate) async fn history(State(st): State<AppState>, p: Params) -> Result<Response, ApiError> {
    let key = key_from_params(&p, "tenant")?;
    if p.get("nid").is_some() {
        let nid = parse_id(&p, "nid")?;
        let entry = st.service.history_entry(&p.caller, &key, nid).await?;
        return entry_json(&entry);
    }
    if let Some(mode) = p.non_blank("search") {
        if mode != "accurate" {
            return Err(ApiError::Invalid(format!(
                "invalid search : {mode} (history supports accurate)"
            )));
        }
    }
    // Nacos clamps history pages to 500 items instead of rejecting larger sizes.
    let page = p.page_request(Some(PageRequest::MAX_PAGE_SIZE))?;
    let result = st.service.history(&p.caller, &key, page).await?;
    Ok(json(&PageJson::of(&result, |h| HistoryJson::of(h, None))))
}

/// `GET /nacos/v1/cs/history/previous?id=<config id>&dataId&group[&tenant]`.
pub(crate) async fn previous(State(st): State<AppState>, p: Params) -> Result<Response, ApiError> {
    let key = key_from_params(&p, "tenant")?;
    let id = parse_id(&p, "id")?;
    let entry = st.service.history_previous(&p.caller, &key, id).await?;
    entry_json(&entry)
}

/// One entry with its content as the service shows it (an encrypted config's versions
/// decrypted, as Nacos's history does).
fn entry_json(h: &HistoryEntry) -> Result<Response, ApiError> {
    Ok(json(&HistoryJson::of(h, Some(&h.content))))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceConfigJson<'a> {
    id: String,
    data_id: &'a str,
    group: &'a str,
    tenant: &'a str,
    app_name: &'a str,
    r#type: &'a str,
    md5: &'a str,
    last_modified: i64,
}

/// `GET /nacos/v1/cs/history/configs?tenant=`: every config of a namespace.
pub(crate) async fn configs_of_namespace(
    State(st): State<AppState>,
    p: Params,
) -> Result<Response, ApiError> {
    let namespace = nacelle_core::NamespaceId::parse(Some(p.required("tenant")?))?;
    let configs = st.service.configs_of_namespace(&p.caller, &namespace)?;
    let out: Vec<NamespaceConfigJson> = configs
        .iter()
        .map(|c| NamespaceConfigJson {
            id: c.id().to_string(),
            data_id: c.key().data_id(),
            group: c.key().group(),
            tenant: c.key().tenant(),
            app_name: c.app_name(),
            r#type: c.config_type().as_str(),
            md5: c.md5(),
            last_modified: c.modified_ms(),
        })
        .collect();
    Ok(json(&out))
}
