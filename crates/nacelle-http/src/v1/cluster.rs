//! Calls between cluster members: the change notification
//! (`/v1/cs/communication/dataChange`) and the member list (`/v1/core/cluster/nodes`,
//! also for administrators).
//!
//! A notification names a key only; the receiver reloads it from the database and never
//! trusts content from the message. Only a caller presenting the cluster secret counts as a
//! member: no header, user agent or source address does.

use axum::extract::State;
use axum::response::Response;
use nacelle_core::{now_millis, Caller};
use serde::Serialize;

use super::{json, key_from_params, ok_true, RestResult};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;
use nacelle_service::cluster::{secret_matches, SECRET_HEADER};

/// Rejects callers that are not cluster members.
pub(crate) fn require_member(st: &AppState, p: &Params) -> Result<(), ApiError> {
    let Some(expected) = st.options.cluster_secret.as_deref() else {
        return Err(ApiError::Forbidden(
            "cluster calls are disabled on this node (no cluster secret configured)".into(),
        ));
    };
    match p.header(SECRET_HEADER) {
        Some(given) if secret_matches(given, expected) => Ok(()),
        _ => Err(ApiError::Forbidden(
            "not a cluster member: missing or wrong cluster secret".into(),
        )),
    }
}

/// `GET|POST /nacos/v1/cs/communication/dataChange?dataId&group[&tenant]`: a member
/// committed a change of this key; reload it from the database.
pub(crate) async fn data_change(
    State(st): State<AppState>,
    p: Params,
) -> Result<Response, ApiError> {
    require_member(&st, &p)?;
    let key = key_from_params(&p, "tenant")?;
    #[cfg(feature = "fault-injection")]
    if st.options.drop_cluster_notifications {
        tracing::warn!(%key, "fault injection: dropping a cluster notification (HTTP)");
        return Ok(ok_true());
    }
    st.service.replication().reload(&key).await?;
    Ok(ok_true())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExtendInfo {
    last_refresh_time: i64,
    version: &'static str,
    /// Nacelle's own: change notifications this node sent to the member, by path.
    notified_via_grpc: u64,
    notified_via_http: u64,
    notify_failures: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeJson {
    ip: String,
    port: u16,
    state: &'static str,
    extend_info: ExtendInfo,
    address: String,
    fail_access_cnt: u32,
}

/// `GET /nacos/v1/core/cluster/nodes`: the members in Nacos's format, for an
/// administrator (Nacos: `READ` on `/v1/core/cluster`) or a member presenting the cluster
/// secret; a wrong secret is refused, not taken for a user.
pub(crate) async fn nodes(State(st): State<AppState>, p: Params) -> Result<Response, ApiError> {
    let member;
    let caller = if p.header(SECRET_HEADER).is_some() {
        require_member(&st, &p)?;
        member = Caller::internal();
        &member
    } else {
        &p.caller
    };
    let version = env!("CARGO_PKG_VERSION");
    let nodes: Vec<NodeJson> = match st.service.cluster_members(caller)? {
        Some(members) => members
            .into_iter()
            .map(|m| NodeJson {
                address: m.address(),
                ip: m.ip,
                port: m.port,
                state: m.state.as_str(),
                extend_info: ExtendInfo {
                    last_refresh_time: m.last_refresh_ms,
                    version,
                    notified_via_grpc: m.notified.via_grpc,
                    notified_via_http: m.notified.via_http,
                    notify_failures: m.notified.failed,
                },
                fail_access_cnt: m.fail_count,
            })
            .collect(),
        None => st
            .options
            .self_address
            .map(|a| NodeJson {
                ip: a.ip().to_string(),
                port: a.port(),
                state: "UP",
                extend_info: ExtendInfo {
                    last_refresh_time: now_millis(),
                    version,
                    notified_via_grpc: 0,
                    notified_via_http: 0,
                    notify_failures: 0,
                },
                address: a.to_string(),
                fail_access_cnt: 0,
            })
            .into_iter()
            .collect(),
    };
    Ok(json(&RestResult::ok(nodes)))
}
