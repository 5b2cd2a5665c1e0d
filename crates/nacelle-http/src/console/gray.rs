//! `/nacos/console/api/grays`: a key's gray variants with the connected listeners each
//! one currently reaches; create one by IP list (the beta), by label expression or by app
//! name (a label rule `AppName=<app>`); promote one to the formal config; abandon (stop)
//! one. Which caller a rule selects is the service's decision (`listener_views`).

use axum::extract::State;
use axum::http::StatusCode;
use nacelle_core::{GraySpec, Variant};
use serde_json::json;

use super::configs::{formal, publish_request};
use super::listeners::listener_json;
use super::{key_of, ok, Answer, ConsoleError};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

/// `GET namespace, dataId, group` → `[{name, kind, expr, priority, md5, content,
/// modified, listeners: […]}]` in match order; each gray's listeners are those the
/// service would serve that gray now.
pub(crate) async fn list(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let grays = st.service.grays_of(&p.caller, &key)?;
    let listeners = st.service.listeners(&p.caller)?.views_of_key(&key)?;
    let mut out = Vec::with_capacity(grays.len());
    for g in &grays {
        let reached: Vec<_> = listeners
            .iter()
            .filter(|l| l.gray.as_deref() == Some(&*g.name))
            .map(listener_json)
            .collect();
        out.push(json!({
            "name": &*g.name,
            "kind": g.rule.kind(),
            "expr": g.rule.expr(),
            "priority": g.priority,
            "md5": g.config.md5(),
            "content": g.config.content_text(),
            "modified": g.config.modified_ms(),
            "srcUser": g.config.source().src_user,
            "listeners": reached,
        }));
    }
    let formal_listeners = listeners.iter().filter(|l| l.gray.is_none()).count();
    ok(json!({"grays": out, "formalListeners": formal_listeners}))
}

/// `POST namespace, dataId, group, content, by=ips|labels|app` with `ips` (comma-separated
/// addresses or CIDRs), `expr` (a label expression such as `env=pre&&region=hz`) or `app`;
/// `name` and `priority` for label and app grays. The key must have a formal config.
pub(crate) async fn create(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let Some(current) = formal(&st.service, &p, &key)? else {
        return Err(ConsoleError::new(
            StatusCode::NOT_FOUND,
            format!("config {key} does not exist: publish it before a gray"),
        ));
    };
    let priority = match p.non_blank("priority").map(str::trim) {
        None => None,
        Some(v) => Some(
            v.parse::<i32>()
                .map_err(|_| ApiError::Invalid(format!("priority `{v}` is not an integer")))?,
        ),
    };
    let name = || p.required("name").map(str::trim);
    let spec = match p.required("by")? {
        "ips" => GraySpec::beta(p.required("ips")?)?,
        "labels" => GraySpec::labels(name()?, p.required("expr")?, priority)?,
        "app" => {
            let app = p.required("app")?.trim();
            GraySpec::labels(name()?, &format!("AppName={app}"), priority)?
        }
        other => {
            return Err(ApiError::Invalid(format!(
                "invalid by : {other} (expected ips, labels or app)"
            ))
            .into())
        }
    };
    let content = p.required("content")?.to_string();
    let mut req = publish_request(
        &p,
        key,
        content,
        Some(current.config_type().as_str().to_string()),
    );
    req.meta = current.meta_for_republish();
    req.cas_md5 = None;
    req.variant = Variant::Gray(spec);
    let stored = st.service.publish(&p.caller, req).await?;
    ok(json!({"md5": stored.md5}))
}

/// `POST namespace, dataId, group, name` → the gray's content becomes the formal config.
pub(crate) async fn promote(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let stored = st
        .service
        .promote_gray(&p.caller, &key, p.required("name")?, &super::note(&p))
        .await?;
    ok(json!({"md5": stored.md5}))
}

/// `POST namespace, dataId, group, name` → the gray is stopped; 404 when there was none.
pub(crate) async fn abandon(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let name = p.required("name")?;
    if !st
        .service
        .stop_gray(&p.caller, &key, name, &super::note(&p))
        .await?
    {
        return Err(ConsoleError::new(
            StatusCode::NOT_FOUND,
            format!("{key} has no gray `{name}`"),
        ));
    }
    ok(true)
}
