//! `/nacos/v2/cs/config`: get, publish, delete in the v2 envelope.

use axum::extract::State;
use axum::response::Response;
use nacelle_core::key::check_tag;
use nacelle_core::{ConfigKey, ConfigMeta, OpSource, Variant};
use nacelle_service::PublishRequest;
use serde::Serialize;

use crate::error::{ApiError, V2Error};
use crate::params::Params;
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
    if let Some(tag) = p.non_blank("tag") {
        check_tag(tag)?;
        return Err(ApiError::Unsupported("tagged configs are not supported yet".into()).into());
    }
    match st.service.get(&key)? {
        Some(cfg) => Ok(success(String::from_utf8_lossy(&cfg.content))),
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
    let content = p.required("content")?.to_string();
    let variant = if let Some(ips) = p.header("betaIps").filter(|v| !v.trim().is_empty()) {
        Variant::Beta {
            ips: ips.split(',').map(|s| s.trim().to_string()).collect(),
        }
    } else if let Some(tag) = p.non_blank("tag") {
        Variant::Tag(tag.to_string())
    } else {
        Variant::Formal
    };
    let req = PublishRequest {
        key,
        content,
        config_type: p.get("type").map(str::to_string),
        meta: ConfigMeta {
            app_name: p.or_empty("appName"),
            desc: p.or_empty("desc"),
            r#use: p.or_empty("use"),
            effect: p.or_empty("effect"),
            schema: p.or_empty("schema"),
            config_tags: p.or_empty("configTags"),
            encrypted_data_key: p.or_empty("encryptedDataKey"),
        },
        source: OpSource {
            src_user: p.or_empty("srcUser"),
            src_ip: p.client_ip.clone(),
        },
        cas_md5: p.header("casMd5").map(str::to_string),
        variant,
    };
    st.service.publish(req).await?;
    Ok(success(true))
}

/// `DELETE /nacos/v2/cs/config?dataId&group[&namespaceId][&tag]` → `data: true`.
pub(crate) async fn delete_config(
    State(st): State<AppState>,
    p: Result<Params, ApiError>,
) -> Result<Response, V2Error> {
    let p = p?;
    let key = key_of(&p)?;
    let source = OpSource {
        src_user: p.or_empty("srcUser"),
        src_ip: p.client_ip.clone(),
    };
    st.service.remove(&key, p.get("tag"), source).await?;
    Ok(success(true))
}
