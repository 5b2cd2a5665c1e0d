//! Nacelle's own HTTP API (not Nacos's): `/nacos/nacelle/v1/<resource>`, answered in the
//! v3 admin API's envelope (`{"code":0,"message":"success","data":…}`) and error codes
//! (`crate::v3`). One file per resource; each lists its paths in its `ROUTES` (the metric
//! labels, see `crate::observe`).

use axum::Router;

use crate::AppState;

pub(crate) mod audit;
pub(crate) mod changes;
pub(crate) mod clients;
mod fields;
pub(crate) mod rollouts;
pub(crate) mod schemas;
pub(crate) mod webhooks;

/// Every route of Nacelle's own API.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .merge(changes::routes())
        .merge(schemas::routes())
        .merge(audit::routes())
        .merge(clients::routes())
        .merge(webhooks::routes())
        .merge(rollouts::routes())
}

/// Whether `path` is one of them (its own metric label).
pub(crate) fn route(path: &str) -> Option<&'static str> {
    changes::ROUTES
        .iter()
        .chain(schemas::ROUTES)
        .chain(audit::ROUTES)
        .chain(clients::ROUTES)
        .chain(webhooks::ROUTES)
        .chain(rollouts::ROUTES)
        .copied()
        .find(|r| *r == path)
}
