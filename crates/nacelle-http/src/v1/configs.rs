//! `/nacos/v1/cs/configs`: get (raw, `show=all`, search), publish, delete; export, import
//! and clone are in `transfer.rs`.

use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use nacelle_core::{ConfigType, NamespaceId};
use nacelle_service::{ConfigView, SearchMode, SearchQuery};
use serde::Serialize;

use super::{json, key_from_params, ok_true, RestResult};
use crate::error::ApiError;
use crate::page::PageJson;
use crate::params::{Params, PublishNames};
use crate::AppState;

/// The body Nacos sends when a config does not exist.
pub(crate) const NOT_FOUND_BODY: &str = "config data not exist\n";

/// Nacos's `Content-Type` for each config type.
pub(crate) fn content_type_of(t: ConfigType) -> &'static str {
    match t {
        ConfigType::Json => "application/json;charset=UTF-8",
        ConfigType::Xml => "application/xml;charset=UTF-8",
        ConfigType::Html => "text/html;charset=UTF-8",
        _ => "text/plain;charset=UTF-8",
    }
}

/// Nacos's no-cache headers (`Pragma`, `Expires`, `Cache-Control`).
pub(crate) fn no_cache(h: &mut HeaderMap) {
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert(
        header::EXPIRES,
        HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache,no-store"),
    );
}

/// The raw-content answer of a config GET, with Nacos's headers: the content and data key
/// as the service reveals them to this caller (an encrypted config's plaintext, with its
/// data key; `Content-MD5` stays the md5 of what is stored, as Nacos sends it).
pub(crate) fn raw_config_response(cfg: &ConfigView) -> Response {
    let mut resp = (StatusCode::OK, cfg.content().clone()).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type_of(cfg.config_type())),
    );
    if let Ok(v) = HeaderValue::from_str(cfg.md5()) {
        h.insert("Content-MD5", v);
    }
    h.insert(
        "Config-Type",
        HeaderValue::from_static(cfg.config_type().as_str()),
    );
    let modified = UNIX_EPOCH + Duration::from_millis(cfg.modified_ms().max(0) as u64);
    if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(modified)) {
        h.insert(header::LAST_MODIFIED, v);
    }
    if !cfg.encrypted_data_key().is_empty() {
        if let Ok(v) = HeaderValue::from_str(cfg.encrypted_data_key()) {
            h.insert("Encrypted-Data-Key", v);
        }
    }
    no_cache(h);
    resp
}

pub(crate) fn not_found_response() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain;charset=UTF-8")],
        NOT_FOUND_BODY,
    )
        .into_response()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigDetail<'a> {
    id: String,
    data_id: &'a str,
    group: &'a str,
    content: std::borrow::Cow<'a, str>,
    md5: &'a str,
    encrypted_data_key: &'a str,
    tenant: &'a str,
    app_name: &'a str,
    r#type: &'a str,
    create_time: i64,
    modify_time: i64,
    create_user: &'a str,
    create_ip: &'a str,
    desc: &'a str,
    r#use: &'a str,
    effect: &'a str,
    schema: &'a str,
    config_tags: &'a str,
}

impl<'a> ConfigDetail<'a> {
    /// The full record (`show=all`, `beta=true`) with its content and data key as shown
    /// to the caller; `md5` is the stored one, as Nacos shows it.
    fn of(c: &'a ConfigView) -> Self {
        ConfigDetail {
            id: c.id().to_string(),
            data_id: c.key().data_id(),
            group: c.key().group(),
            content: c.content_text(),
            md5: c.md5(),
            encrypted_data_key: c.encrypted_data_key(),
            tenant: c.key().tenant(),
            app_name: c.app_name(),
            r#type: c.config_type().as_str(),
            create_time: c.created_ms(),
            modify_time: c.modified_ms(),
            create_user: &c.source().src_user,
            create_ip: &c.source().src_ip,
            desc: c.desc(),
            r#use: c.r#use(),
            effect: c.effect(),
            schema: c.schema(),
            config_tags: c.config_tags(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SearchItem<'a> {
    id: String,
    data_id: &'a str,
    group: &'a str,
    content: std::borrow::Cow<'a, str>,
    md5: &'a str,
    tenant: &'a str,
    app_name: &'a str,
    r#type: &'a str,
}

/// `GET /nacos/v1/cs/configs`.
pub(crate) async fn get_configs(
    State(st): State<AppState>,
    p: Params,
) -> Result<Response, ApiError> {
    if let Some(mode) = p.non_blank("search") {
        return search(&st, &p, mode);
    }
    if is_true(p.get("exportV2")) {
        return super::transfer::export(&st, &p, crate::archive::Layout::V2);
    }
    if is_true(p.get("export")) {
        return super::transfer::export(&st, &p, crate::archive::Layout::V1);
    }
    let key = key_from_params(&p, "tenant")?;
    if is_true(p.get("beta")) {
        let beta = st.service.beta_of(&p.caller, &key)?;
        let ips = beta.as_ref().map(|b| b.ips.join(",")).unwrap_or_default();
        return Ok(json(&RestResult {
            code: 200,
            message: Some("query beta ok".into()),
            data: beta.as_ref().map(|b| BetaDetail {
                detail: ConfigDetail::of(&b.config),
                beta_ips: &ips,
            }),
        }));
    }
    if p.get("show") == Some("all") {
        // The formal record, whoever asks (Nacos's `detailConfigInfo` reads `config_info`
        // only): a caller on a beta IP, or naming a tag, still sees what the console edits.
        let Some(cfg) = st.service.formal(&p.caller, &key)? else {
            return Ok(not_found_response());
        };
        return Ok(json(&ConfigDetail::of(&cfg)));
    }
    let Some(served) = st.service.get(&p.caller, &key, p.tag())? else {
        return Ok(not_found_response());
    };
    let mut resp = raw_config_response(&served.config);
    let h = resp.headers_mut();
    if served.beta {
        h.insert("isBeta", HeaderValue::from_static("true"));
    }
    if let Some(tag) = served
        .tag
        .as_deref()
        .and_then(|t| HeaderValue::from_str(t).ok())
    {
        h.insert("Vipserver-Tag", tag);
    }
    Ok(resp)
}

/// A beta with its IP list, as `?beta=true` answers it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BetaDetail<'a> {
    #[serde(flatten)]
    detail: ConfigDetail<'a>,
    beta_ips: &'a str,
}

fn is_true(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn search(st: &AppState, p: &Params, mode: &str) -> Result<Response, ApiError> {
    let mode = match mode {
        "accurate" => SearchMode::Accurate,
        "blur" => SearchMode::Blur,
        other => {
            return Err(ApiError::Invalid(format!(
                "invalid search : {other} (expected accurate or blur)"
            )))
        }
    };
    // No cap on search pages, as in Nacos.
    let page = p.page_request(None)?;
    let q = SearchQuery {
        mode,
        namespace: NamespaceId::parse(p.get("tenant"))?,
        data_id: p.or_empty("dataId"),
        group: p.or_empty("group"),
        app_name: p.or_empty("appName"),
        config_tags: p.or_empty("config_tags"),
        types: String::new(),
        content: String::new(),
        page,
    };
    let result = st.service.search(&p.caller, &q)?;
    // Plaintext of an encrypted config, as Nacos's search shows (the service shows it; one
    // that cannot be opened fails the search with the reason).
    Ok(json(&PageJson::of(&result, |c| SearchItem {
        id: c.id().to_string(),
        data_id: c.key().data_id(),
        group: c.key().group(),
        content: c.content_text(),
        md5: c.md5(),
        tenant: c.key().tenant(),
        app_name: c.app_name(),
        r#type: c.config_type().as_str(),
    })))
}

/// `POST /nacos/v1/cs/configs`: publish (form body or query string).
pub(crate) async fn post_configs(
    State(st): State<AppState>,
    p: Params,
) -> Result<Response, ApiError> {
    if is_true(p.get("import")) {
        return super::transfer::import(&st, &p).await;
    }
    if is_true(p.get("clone")) {
        return super::transfer::clone(&st, &p).await;
    }
    let key = key_from_params(&p, "tenant")?;
    let req = p.publish_request(key, PublishNames::V1)?;
    st.service.publish(&p.caller, req).await?;
    Ok(ok_true())
}

/// `DELETE /nacos/v1/cs/configs`: by key, by ids (`delType=ids`), or stop a beta.
pub(crate) async fn delete_configs(
    State(st): State<AppState>,
    p: Params,
) -> Result<Response, ApiError> {
    let note = p.write_note(PublishNames::V1);
    if p.get("delType") == Some("ids") {
        let ids = parse_ids(p.required("ids")?)?;
        st.service.remove_by_ids(&p.caller, &ids, &note).await?;
        return Ok(json(&serde_json::json!({"code": 200, "data": true})));
    }
    let key = key_from_params(&p, "tenant")?;
    if let Some(name) = p.non_blank("grayName") {
        st.service.stop_gray(&p.caller, &key, name, &note).await?;
        return Ok(ok_true());
    }
    if is_true(p.get("beta")) {
        st.service.stop_beta(&p.caller, &key).await?;
        return Ok(json(&RestResult {
            code: 200,
            message: Some("stop beta ok".into()),
            data: true,
        }));
    }
    st.service
        .remove(&p.caller, &key, p.get("tag"), &note)
        .await?;
    Ok(ok_true())
}

fn parse_ids(raw: &str) -> Result<Vec<i64>, ApiError> {
    let ids: Result<Vec<i64>, _> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse::<i64>)
        .collect();
    match ids {
        Ok(ids) if !ids.is_empty() => Ok(ids),
        _ => Err(ApiError::Invalid(format!("invalid ids : {raw}"))),
    }
}
