//! `/nacos/v1/console/namespaces`: list, detail, create, update, delete.

use axum::extract::State;
use axum::response::Response;
use nacelle_service::NamespaceInfo;
use serde::Serialize;

use super::{json, ok_true, RestResult};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

/// Nacos's quota shown for every namespace (`NamespaceOperationService.DEFAULT_QUOTA`).
pub(crate) const DEFAULT_QUOTA: u32 = 200;

/// Nacos's `Namespace` model, Jackson's field order: the 2.x and the 3.0 API write the same
/// fields and fill them differently (this file's [`NamespaceJson::of`], and the v3 API's).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NamespaceJson<'a> {
    pub namespace: &'a str,
    pub namespace_show_name: &'a str,
    pub namespace_desc: &'a str,
    pub quota: u32,
    pub config_count: usize,
    pub r#type: u8,
}

impl<'a> NamespaceJson<'a> {
    /// As Nacos 2.x writes it: the default namespace's id empty, the service's kind.
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
