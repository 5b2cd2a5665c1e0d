//! `/nacos/v2/cs/config`: get, publish, delete in the v2 envelope.

use axum::extract::State;
use axum::response::Response;
use nacelle_core::{ConfigKey, PageRequest};
use serde::Serialize;

use crate::error::{ApiError, V2Error};
use crate::page::PageJson;
use crate::params::{Params, PublishNames};
use crate::v1::json;
use crate::AppState;

#[derive(Serialize)]
struct Envelope<T: Serialize> {
    code: i32,
    message: &'static str,
    data: T,
}

fn success<T: Serialize>(data: T) -> Response {
    json(&Envelope {
        code: 0,
        message: "success",
        data,
    })
}

fn key_of(p: &Params) -> Result<ConfigKey, ApiError> {
    let data_id = p.required("dataId")?;
    let group = p.required("group")?;
    Ok(ConfigKey::parse(p.get("namespaceId"), group, data_id)?)
}

/// `GET /nacos/v2/cs/config?dataId&group[&namespaceId][&tag]` → `data` is the content.
pub(crate) async fn get_config(
    State(st): State<AppState>,
    p: Result<Params, ApiError>,
) -> Result<Response, V2Error> {
    let p = p?;
    let key = key_of(&p)?;
    match st.service.get(&p.caller, &key, p.tag())? {
        Some(served) => {
            // An encrypted config's plaintext, as Nacos's v2 GET decrypts it.
            Ok(success(served.config.content_text()))
        }
        None => Err(ApiError::NotFound("config data not exist".into()).into()),
    }
}

/// `POST /nacos/v2/cs/config` (form) → `data: true`.
pub(crate) async fn post_config(
    State(st): State<AppState>,
    p: Result<Params, ApiError>,
) -> Result<Response, V2Error> {
    let p = p?;
    let key = key_of(&p)?;
    let req = p.publish_request(key, PublishNames::V2)?;
    st.service.publish(&p.caller, req).await?;
    Ok(success(true))
}

/// `DELETE /nacos/v2/cs/config?dataId&group[&namespaceId][&tag]` → `data: true`.
pub(crate) async fn delete_config(
    State(st): State<AppState>,
    p: Result<Params, ApiError>,
) -> Result<Response, V2Error> {
    let p = p?;
    let key = key_of(&p)?;
    let note = p.write_note(PublishNames::V2);
    if let Some(name) = p.non_blank("grayName") {
        st.service.stop_gray(&p.caller, &key, name, &note).await?;
        return Ok(success(true));
    }
    st.service
        .remove(&p.caller, &key, p.get("tag"), &note)
        .await?;
    Ok(success(true))
}

/// One gray variant as `GET /nacos/v2/cs/config/gray` lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GrayItem<'a> {
    gray_name: &'a str,
    /// Rule type: `beta`, `tag` or `tagv2`.
    r#type: &'static str,
    expr: String,
    priority: i32,
    content: std::borrow::Cow<'a, str>,
    md5: &'a str,
    last_modified: i64,
    src_user: &'a str,
    src_ip: &'a str,
}

/// `GET /nacos/v2/cs/config/gray?dataId&group[&namespaceId]` (Nacelle's extension) → the
/// key's gray variants, highest priority first.
pub(crate) async fn list_grays(
    State(st): State<AppState>,
    p: Result<Params, ApiError>,
) -> Result<Response, V2Error> {
    let p = p?;
    let key = key_of(&p)?;
    let grays = st.service.grays_of(&p.caller, &key)?;
    let items: Vec<GrayItem<'_>> = grays
        .iter()
        .map(|g| GrayItem {
            gray_name: &g.name,
            r#type: g.rule.kind(),
            expr: g.rule.expr(),
            priority: g.priority,
            content: g.config.content_text(),
            md5: g.config.md5(),
            last_modified: g.config.modified_ms(),
            src_user: &g.config.source().src_user,
            src_ip: &g.config.source().src_ip,
        })
        .collect();
    Ok(success(items))
}

/// One gray operation as `GET /nacos/v2/cs/config/gray/history` lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GrayHistoryItem<'a> {
    /// The log row's id.
    id: String,
    gray_name: &'a str,
    r#type: &'a str,
    expr: &'a str,
    priority: i32,
    /// `I`, `U` or `D`.
    op_type: &'static str,
    /// The version the operation replaced or removed (for `I`, the one inserted).
    content: &'a str,
    md5: &'a str,
    src_user: &'a str,
    src_ip: &'a str,
    last_modified_time: i64,
    /// The operation's message (`""`: none), e.g. a rollout step's.
    message: &'a str,
}

/// `GET /nacos/v2/cs/config/gray/history?dataId&group[&namespaceId][&pageNo][&pageSize]`
/// (Nacelle's extension) → the key's gray operations, newest first, each with its rule.
pub(crate) async fn gray_history(
    State(st): State<AppState>,
    p: Result<Params, ApiError>,
) -> Result<Response, V2Error> {
    let p = p?;
    let key = key_of(&p)?;
    let page = p.page_request(Some(PageRequest::MAX_PAGE_SIZE))?;
    let result = st.service.gray_history(&p.caller, &key, page).await?;
    Ok(success(PageJson::of(&result, |h| GrayHistoryItem {
        id: h.entry.nid.to_string(),
        gray_name: &h.gray_name,
        r#type: &h.rule_type,
        expr: &h.rule_expr,
        priority: h.priority,
        op_type: h.entry.op_type.as_str(),
        content: &h.entry.content,
        md5: &h.entry.md5,
        src_user: &h.entry.source.src_user,
        src_ip: &h.entry.source.src_ip,
        last_modified_time: h.entry.modified_ms,
        message: &h.entry.source.message,
    })))
}

/// `POST /nacos/v2/cs/config/gray/promote` (Nacelle's extension; form `dataId`, `group`,
/// `namespaceId`, `grayName`) → the gray's content becomes the formal config in one write,
/// the gray is removed; `data: true`.
pub(crate) async fn promote_gray(
    State(st): State<AppState>,
    p: Result<Params, ApiError>,
) -> Result<Response, V2Error> {
    let p = p?;
    let key = key_of(&p)?;
    let name = p.required("grayName")?;
    let note = p.write_note(PublishNames::V2);
    st.service
        .promote_gray(&p.caller, &key, name, &note)
        .await?;
    Ok(success(true))
}
