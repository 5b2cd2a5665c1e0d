//! `/nacos/v1/console/namespaces`: list, detail, create, update, delete.

use axum::extract::State;
use axum::response::Response;
use nacelle_service::NamespaceInfo;
use serde::Serialize;

use super::{json, ok_true, RestResult};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

/// Nacos's quota shown for every namespace.
const DEFAULT_QUOTA: u32 = 200;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceJson<'a> {
    namespace: &'a str,
    namespace_show_name: &'a str,
    namespace_desc: &'a str,
    quota: u32,
    config_count: usize,
    r#type: u8,
}

impl<'a> NamespaceJson<'a> {
    fn of(n: &'a NamespaceInfo) -> Self {
        NamespaceJson {
            namespace: n.namespace.id.as_str(),
            namespace_show_name: &n.namespace.name,
            namespace_desc: &n.namespace.desc,
            quota: DEFAULT_QUOTA,
            config_count: n.config_count,
            r#type: n.kind,
        }
    }
}

/// `GET`: all namespaces; `?show=all&namespaceId=` one; `?checkNamespaceIdExist=true&customNamespaceId=`.
pub(crate) async fn list(State(st): State<AppState>, p: Params) -> Result<Response, ApiError> {
    if p.get("checkNamespaceIdExist") == Some("true") {
        let id = p.required("customNamespaceId")?;
        let exists = st.service.namespaces(&p.caller)?.exists(id).await?;
        return Ok(json(&exists));
    }
    if p.get("show") == Some("all") {
        let id = p.required("namespaceId")?;
        let ns = st.service.namespaces(&p.caller)?.get(id).await?;
        return Ok(json(&NamespaceJson::of(&ns)));
    }
    let all = st.service.namespaces(&p.caller)?.list().await?;
    let data: Vec<NamespaceJson> = all.iter().map(NamespaceJson::of).collect();
    Ok(json(&RestResult::ok(data)))
}

/// `POST customNamespaceId, namespaceName, namespaceDesc` → `true`.
pub(crate) async fn create(State(st): State<AppState>, p: Params) -> Result<Response, ApiError> {
    let name = p.required("namespaceName")?;
    st.service
        .namespaces(&p.caller)?
        .create(
            p.get("customNamespaceId"),
            name,
            p.get("namespaceDesc").unwrap_or(""),
        )
        .await?;
    Ok(ok_true())
}

/// `PUT namespace, namespaceShowName, namespaceDesc` → `true`.
pub(crate) async fn update(State(st): State<AppState>, p: Params) -> Result<Response, ApiError> {
    let id = p.required("namespace")?;
    let name = p.required("namespaceShowName")?;
    st.service
        .namespaces(&p.caller)?
        .update(id, name, p.get("namespaceDesc").unwrap_or(""))
        .await?;
    Ok(ok_true())
}

/// `DELETE namespaceId` → `true`.
pub(crate) async fn delete(State(st): State<AppState>, p: Params) -> Result<Response, ApiError> {
    let id = p.required("namespaceId")?;
    st.service.namespaces(&p.caller)?.delete(id).await?;
    Ok(ok_true())
}
