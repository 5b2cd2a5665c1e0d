//! `GET /nacos/v3/client/cs/config`: Nacos 3's client (open) API read, answered as
//! `ConfigOpenApiController` (3.0.3) does: found → `Result.success(ConfigQueryResponse)`;
//! absent → HTTP 200 `{code:20004, message:"resource not found", data:null}`; validation
//! errors as plain text (the controller is not `@NacosApi`).

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;

use super::admission::{Admitted, ClientReadConfig};
use super::{config_key, failure, success, ErrorCode, V3Error};
use crate::AppState;

/// `ConfigQueryResponse` as Jackson writes it from its getters (null fields included):
/// its own fields, then those of `Response` (`resultCode` 200, `errorCode` 0, `message`
/// and `requestId` null, `success` true).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigQueryResponse<'a> {
    content: std::borrow::Cow<'a, str>,
    encrypted_data_key: &'a str,
    content_type: &'a str,
    md5: &'a str,
    last_modified: i64,
    beta: bool,
    tag: Option<String>,
    result_code: i32,
    error_code: i32,
    message: Option<&'a str>,
    request_id: Option<&'a str>,
    success: bool,
}

/// `GET /nacos/v3/client/cs/config?dataId&groupName[&namespaceId]`.
pub(crate) async fn get_config(
    State(st): State<AppState>,
    p: Admitted<ClientReadConfig>,
) -> Result<Response, V3Error> {
    let key = config_key(&p).map_err(V3Error::into_client)?;
    // The served variant (beta by the caller's IP, …) is the service's choice; the client
    // API names no tag (Nacos's chain request carries only the client IP label).
    let Some(served) = st.service.get(&p.caller, &key, None)? else {
        return Ok(failure(ErrorCode::RESOURCE_NOT_FOUND, ()));
    };
    let cfg = &served.config;
    // Over the client API an encrypted config is served as stored (the client decrypts
    // with the data key), as Nacos's query chain serves it: the service decides by the
    // caller's protocol.
    Ok(success(ConfigQueryResponse {
        content: cfg.content_text(),
        encrypted_data_key: cfg.encrypted_data_key(),
        content_type: cfg.config_type().as_str(),
        md5: cfg.md5(),
        last_modified: cfg.modified_ms(),
        beta: served.beta,
        // Nacos writes the matched tag rule here, but its client API asks with the client
        // IP as the only label, so no tag rule ever matches: always `null`.
        tag: None,
        result_code: 200,
        error_code: 0,
        message: None,
        request_id: None,
        success: true,
    }))
}
