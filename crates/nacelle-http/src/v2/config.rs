//! `/nacos/v2/cs/config`: get, publish, delete in the v2 envelope.

use axum::extract::State;
use axum::response::Response;
use nacelle_core::ConfigKey;
use serde::Serialize;

use crate::error::{ApiError, V2Error};
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
        Some(served) => Ok(success(String::from_utf8_lossy(&served.config.content))),
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
    let src_user = p.src_user(PublishNames::V2);
    if let Some(name) = p.non_blank("grayName") {
        st.service
            .stop_gray(&p.caller, &key, name, &src_user)
            .await?;
        return Ok(success(true));
    }
    st.service
        .remove(&p.caller, &key, p.get("tag"), &src_user)
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
            content: String::from_utf8_lossy(&g.config.content),
            md5: &g.config.md5,
            last_modified: g.config.modified_ms,
            src_user: &g.config.source.src_user,
            src_ip: &g.config.source.src_ip,
        })
        .collect();
    Ok(success(items))
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
    let src_user = p.src_user(PublishNames::V2);
    st.service
        .promote_gray(&p.caller, &key, name, &src_user)
        .await?;
    Ok(success(true))
}
