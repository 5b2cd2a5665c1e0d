//! `/nacos/nacelle/v1/clients` (docs/live-view.md): who runs what — every client that
//! listens to a key on each node, the md5 it holds (formal, a gray, unknown) and since
//! when, with counts per node and for the cluster. `scope=local` is one node's own part:
//! what the members ask each other (with the cluster secret), or a user's look at one node.

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use nacelle_core::Caller;
use nacelle_service::cluster::SECRET_HEADER;

use crate::v3::{config_key, success, V3Error, V3Params};
use crate::AppState;

/// The paths of [`routes`].
pub(crate) const ROUTES: &[&str] = &["/nacos/nacelle/v1/clients"];

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/nacos/nacelle/v1/clients", get(of_key))
}

/// `GET namespaceId, groupName, dataId [, scope=cluster|local]` → the live view of the
/// key: `KeyClients` (cluster, the default) or this node's `NodeClients` (`local`). Read
/// permission on the key, or the cluster secret for `local`.
async fn of_key(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let key = config_key(&p)?;
    match p.non_blank("scope").map(str::trim).unwrap_or("cluster") {
        "cluster" => Ok(success(
            st.service.listeners(&p.caller)?.key_clients(&key).await?,
        )),
        "local" => {
            // A member asking presents the cluster secret and is trusted; anyone else is
            // the user their credentials say.
            let member;
            let caller = if p.header(SECRET_HEADER).is_some() {
                crate::v1::cluster::require_member(&st, &p)?;
                member = Caller::internal();
                &member
            } else {
                &p.caller
            };
            Ok(success(st.service.listeners(caller)?.clients_of_key(&key)?))
        }
        other => Err(V3Error::invalid(format!(
            "parameter 'scope' must be `cluster` or `local`, got `{other}`"
        ))),
    }
}
