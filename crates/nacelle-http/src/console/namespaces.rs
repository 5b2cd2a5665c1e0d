//! `/nacos/console/api/namespaces`: list (with config counts), create, edit, delete. A
//! namespace that still holds configs is deleted only with `confirm=true` (the page asks
//! first); the service's rules decide everything else.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use super::{ok, Answer, ConsoleError};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceJson {
    id: String,
    name: String,
    desc: String,
    config_count: usize,
    /// The built-in default namespace (cannot be edited or deleted).
    builtin: bool,
}

/// `GET` → every namespace, the default first.
pub(crate) async fn list(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let list = st.service.namespaces(&p.caller)?.list().await?;
    ok(list
        .into_iter()
        .map(|n| NamespaceJson {
            id: n.namespace.id.as_str().to_string(),
            name: n.namespace.name,
            desc: n.namespace.desc,
            config_count: n.config_count,
            builtin: n.kind == 0,
        })
        .collect::<Vec<_>>())
}

/// `POST id?, name, desc` → `{id}` (a blank id gets a UUID).
pub(crate) async fn create(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let id = st
        .service
        .namespaces(&p.caller)?
        .create(
            p.get("id"),
            p.required("name")?,
            p.get("desc").unwrap_or(""),
        )
        .await?;
    ok(serde_json::json!({"id": id.as_str()}))
}

/// `PUT id, name, desc`.
pub(crate) async fn update(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    st.service
        .namespaces(&p.caller)?
        .update(
            p.required("id")?,
            p.required("name")?,
            p.get("desc").unwrap_or(""),
        )
        .await?;
    ok(true)
}

/// `DELETE id[, confirm=true]`: 409 when the namespace holds configs and `confirm` is not
/// `true`; 404 when there is no such namespace.
pub(crate) async fn delete(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let id = p.required("id")?;
    let ns = st.service.namespaces(&p.caller)?.get(id).await?;
    if ns.config_count > 0 && p.get("confirm") != Some("true") {
        return Err(ConsoleError::new(
            StatusCode::CONFLICT,
            format!(
                "namespace `{}` holds {} configs: confirm to delete it",
                ns.namespace.id, ns.config_count
            ),
        ));
    }
    if !st.service.namespaces(&p.caller)?.delete(id).await? {
        return Err(ConsoleError::new(
            StatusCode::NOT_FOUND,
            format!("namespace `{id}` does not exist"),
        ));
    }
    ok(true)
}
