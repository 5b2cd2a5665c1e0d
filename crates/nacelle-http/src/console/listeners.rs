//! `/nacos/console/api/listeners`: the clients listening to a config (IP, app,
//! transport, the md5 each holds, in sync or not, the variant it is served) and the
//! configs a client IP listens to; `/cluster`: the members, their health and the change
//! notifications sent to each.

use axum::extract::State;
use nacelle_service::ListenerView;
use serde_json::json;

use super::{key_of, ok, Answer};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

/// One listener as the pages show it.
pub(crate) fn listener_json(l: &ListenerView) -> serde_json::Value {
    let labels: serde_json::Map<String, serde_json::Value> = l
        .listener
        .labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    json!({
        "namespace": l.key.tenant(),
        "group": l.key.group(),
        "dataId": l.key.data_id(),
        "ip": l.listener.ip_string(),
        // The address gray rules match: the one the client reports, else `ip`.
        "grayIp": l.listener.gray_ip().map(|ip| ip.to_string()).unwrap_or_default(),
        "app": l.listener.app_name.as_deref().unwrap_or(""),
        "transport": l.listener.protocol.as_str(),
        "labels": labels,
        "heldMd5": l.held_md5,
        "servedMd5": l.served_md5,
        "gray": l.gray.as_deref(),
        "inSync": l.in_sync,
    })
}

/// `GET namespace, dataId, group` → the listeners of the key.
pub(crate) async fn of_key(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let views = st.service.listeners(&p.caller)?.views_of_key(&key)?;
    ok(views.iter().map(listener_json).collect::<Vec<_>>())
}

/// `GET ip` → every key a client at that IP listens to.
pub(crate) async fn of_ip(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let ip = p.required("ip")?.trim();
    let ip = match ip.parse::<std::net::IpAddr>() {
        Ok(a) => a.to_canonical().to_string(),
        Err(_) => return Err(ApiError::Invalid(format!("invalid ip : {ip}")).into()),
    };
    let views = st.service.listeners(&p.caller)?.views_of_ip(&ip)?;
    ok(views.iter().map(listener_json).collect::<Vec<_>>())
}

/// `GET` → `{clustered, members: [{address, state, self, lastRefresh, failCount,
/// notified: {grpc, http, failed}}]}`; a node running alone shows itself.
pub(crate) async fn cluster(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    // Readiness and authentication like every other console read.
    st.service.namespaces(&p.caller)?.list().await?;
    // The member list is the administrators' (as Nacos 3's console asks `READ` on
    // `/v1/core/cluster`).
    let members = st.service.cluster_members(&p.caller)?;
    let clustered = members.is_some();
    let members = match members {
        Some(m) => m
            .iter()
            .map(|m| {
                json!({
                    "address": m.address(),
                    "state": m.state.as_str(),
                    "self": m.is_self,
                    "lastRefresh": m.last_refresh_ms,
                    "failCount": m.fail_count,
                    "notified": {
                        "grpc": m.notified.via_grpc,
                        "http": m.notified.via_http,
                        "failed": m.notified.failed,
                    },
                })
            })
            .collect::<Vec<_>>(),
        None => vec![json!({
            "address": st.options.self_address.map(|a| a.to_string()).unwrap_or_default(),
            "state": "UP",
            "self": true,
            "lastRefresh": 0,
            "failCount": 0,
            "notified": {"grpc": 0, "http": 0, "failed": 0},
        })],
    };
    ok(json!({
        "clustered": clustered,
        "members": members,
        "listeners": st.service.listeners(&p.caller)?.count(),
        "configs": st.service.config_count(),
    }))
}
