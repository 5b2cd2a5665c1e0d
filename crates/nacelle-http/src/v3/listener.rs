//! `GET /nacos/v3/admin/cs/listener?ip=` (Nacos 3's `ListenerControllerV3`): the keys a
//! client IP listens to (HTTP long polls and gRPC connections alike) with the md5 each
//! holds, as `ConfigListenerInfo` `{"queryType":"ip","listenersStatus":{groupKey: md5}}`.
//!
//! Parameters: `ip` (required: 400/10000), `all` (every namespace; default false: the
//! default namespace's keys, plus those of `namespaceId` when given), `aggregation`
//! (Nacos asks the other members too; Nacelle answers with this node's listeners). Which
//! keys are shown is the service's rule (`ConfigService::keys_of_ip_in`).

use axum::extract::State;
use axum::response::Response;
use nacelle_core::NamespaceId;

use super::admission::{Admitted, ReadConfig};
use super::config::ConfigListenerInfo;
use super::{request_param, success, V3Error};
use crate::params::Params;
use crate::AppState;

/// A `boolean` request parameter as Spring converts it (`true`/`on`/`yes`/`1`,
/// `false`/`off`/`no`/`0`, case-insensitive; absent or blank is `default`).
fn bool_param(p: &Params, name: &str, default: bool) -> Result<bool, V3Error> {
    let Some(raw) = p.non_blank(name) else {
        return Ok(default);
    };
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err(V3Error::invalid(format!("Invalid boolean value [{raw}]"))),
    }
}

/// `GET ?ip[&all][&namespaceId][&aggregation]` → `ConfigListenerInfo` by IP.
pub(crate) async fn by_ip(
    State(st): State<AppState>,
    p: Admitted<ReadConfig>,
) -> Result<Response, V3Error> {
    let ip = request_param(&p, "ip", "String")?.trim().to_string();
    let all = bool_param(&p, "all", false)?;
    // Accepted and checked; this node's listeners are the answer either way.
    let _aggregation = bool_param(&p, "aggregation", true)?;
    let namespace = match p.non_blank("namespaceId") {
        Some(raw) => Some(NamespaceId::parse(Some(raw))?),
        None => None,
    };
    let keys = st
        .service
        .listeners(&p.caller)?
        .keys_of_ip_in(&ip, all, namespace.as_ref())?;
    Ok(success(ConfigListenerInfo {
        query_type: "ip",
        listeners_status: keys
            .into_iter()
            .map(|(k, md5)| (k.group_key(), md5))
            .collect(),
    }))
}
