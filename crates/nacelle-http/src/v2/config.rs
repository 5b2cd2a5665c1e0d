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
    match st.service.get(&p.caller, &key, p.get("tag"))? {
        Some(served) => {
            // An encrypted config's plaintext, as Nacos's v2 GET decrypts it.
            let shown = st.service.reveal(&p.caller, &served.config)?;
            Ok(success(String::from_utf8_lossy(&shown.content)))
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
    let src_user = p.src_user(PublishNames::V2);
    st.service
        .remove(&p.caller, &key, p.get("tag"), &src_user)
        .await?;
    Ok(success(true))
}
