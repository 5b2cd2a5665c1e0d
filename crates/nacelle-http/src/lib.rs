//! The HTTP adapter: Nacos's HTTP v1 and v2 config API and the console API, translated to
//! calls on [`nacelle_service::ConfigService`]. This crate is the only one that knows
//! Nacos's HTTP formats.
//!
//! # Layout
//! - [`serve`]: the accept loop (hyper, HTTP/1.1, graceful shutdown); each connection
//!   hands a long poll (`POST /nacos/v1/cs/configs/listener`) straight to its handler
//!   and every other request to the router built by [`api`].
//! - `params`: strict form/query decoding shared by every handler; `page`: Nacos's page
//!   JSON, which every family writes.
//! - `error`: the two wire error formats (v1 plain text, v2 JSON envelope), one mapping each.
//! - `v1::configs`, `v1::listener`, `v1::history`, `v1::namespaces`, `v1::health`:
//!   the 1.x API under `/nacos/v1`.
//! - `v2::config`: `/nacos/v2/cs/config`.
//! - `v3`: Nacos 3's `/nacos/v3` client and admin API (envelope and errors in
//!   `v3/mod.rs`; credentials, permission and param check in `v3/admission.rs`, one
//!   extractor every handler takes; one file per controller).
//! - `nacelle`: Nacelle's own API under `/nacos/nacelle/v1` (the v3 envelope and errors;
//!   one file per resource: `changes`, `schemas`, `audit`).
//! - `console`: the web console's JSON API (`/nacos/console/api/…`) and its pages
//!   (`/nacos/`, assets from `nacelle-console`).
//! - `observe`: per-request metrics, span and slow-request log; the scrape endpoints
//!   (`/metrics`, `/nacos/actuator/prometheus`).
//! - `fuzzing` (feature `fuzzing` only): the parsers the fuzz targets drive.

mod archive;
mod budget;
mod console;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod nacelle;
mod observe;
mod page;
mod params;
mod server;
mod v1;
mod v2;
mod v3;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use nacelle_core::TrustedProxies;
use nacelle_service::{
    Audit, ChangeRequests, ConfigService, Limits, Rollouts, Schemas, Services, Webhooks,
};

pub use budget::{BodyBudget, DEFAULT_MAX_BODY_MEMORY, DEFAULT_MAX_UNAUTHENTICATED_BODY_MEMORY};
pub use server::{
    serve, serve_with, ConnectionCounter, ServeOptions, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS_PER_IP, DEFAULT_MAX_HEAD_BYTES,
};

/// Options of the HTTP adapter.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Largest request (body or URL) in bytes; larger requests get 413. Default:
    /// [`HttpOptions::request_bytes_for`] the service's default content limit.
    pub max_request_bytes: usize,
    /// Shortest hold of a long poll. Nacos holds for max(10 s, timeout − 500 ms).
    pub long_poll_min_hold: Duration,
    /// Secret that calls from other cluster members must carry; `None` refuses them all.
    pub cluster_secret: Option<String>,
    /// This node's address as shown by `/v1/core/cluster/nodes` when it runs alone.
    pub self_address: Option<std::net::SocketAddr>,
    /// Peers whose forwarded-address headers (`X-Real-IP`, `X-Forwarded-For`) are believed;
    /// from anyone else the caller's IP is the socket address. Default: none.
    pub trusted_proxies: TrustedProxies,
    /// What all request bodies being read may take together, in bytes; a body that does
    /// not fit is refused (503) before it is read (`budget`). Default
    /// [`DEFAULT_MAX_BODY_MEMORY`].
    pub max_body_memory: usize,
    /// Of it, what the bodies of requests without a valid token in a header or the query
    /// string may take, with authentication on. Default
    /// [`DEFAULT_MAX_UNAUTHENTICATED_BODY_MEMORY`].
    pub max_unauthenticated_body_memory: usize,
    /// Test-only fault (feature `fault-injection`): accept change notifications from
    /// members but drop them, as a network would lose them.
    #[cfg(feature = "fault-injection")]
    pub drop_cluster_notifications: bool,
}

impl HttpOptions {
    /// The request limit that lets a config of `max_content_bytes` arrive in any form a
    /// client sends it: 3 × the content (a form or URL percent-encodes non-ASCII bytes to
    /// three characters) plus 64 KiB for the other parameters.
    pub fn request_bytes_for(max_content_bytes: usize) -> usize {
        max_content_bytes
            .saturating_mul(3)
            .saturating_add(64 * 1024)
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_request_bytes: HttpOptions::request_bytes_for(Limits::default().max_content_bytes),
            long_poll_min_hold: Duration::from_secs(10),
            cluster_secret: None,
            self_address: None,
            trusted_proxies: TrustedProxies::none(),
            max_body_memory: DEFAULT_MAX_BODY_MEMORY,
            max_unauthenticated_body_memory: DEFAULT_MAX_UNAUTHENTICATED_BODY_MEMORY,
            #[cfg(feature = "fault-injection")]
            drop_cluster_notifications: false,
        }
    }
}

/// Shared state of every handler: one `Arc`, since axum clones the state for every request
/// (the observing middleware and each handler's `State`) and every clone and drop of a
/// reference count touches a cache line all the runtime's workers share.
#[derive(Debug, Clone)]
pub(crate) struct AppState(Arc<Shared>);

#[derive(Debug)]
pub(crate) struct Shared {
    /// The config core: what every Nacos endpoint calls.
    pub service: ConfigService,
    /// The features Nacelle adds (its own API, `nacelle/`).
    pub changes: ChangeRequests,
    pub schemas: Schemas,
    pub webhooks: Webhooks,
    pub rollouts: Rollouts,
    pub audit: Audit,
    pub options: HttpOptions,
    /// The memory request bodies being read may take (`budget`).
    pub bodies: BodyBudget,
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The whole HTTP API, ready for [`serve`]: its router and, beside it, the state of the
/// long-poll path the connections answer directly (`v1::listener::direct`). Cloning it is
/// cheap (two reference counts).
#[derive(Debug, Clone)]
pub struct HttpApi {
    pub(crate) router: Router,
    pub(crate) state: AppState,
}

/// Builds the whole HTTP API.
pub fn api(services: Services, options: HttpOptions) -> HttpApi {
    let body_limit = options.max_request_bytes;
    let Services {
        config: service,
        changes,
        schemas,
        webhooks,
        rollouts,
        audit,
    } = services;
    let bodies = BodyBudget::new(
        options.max_body_memory,
        options.max_unauthenticated_body_memory,
    );
    let state = AppState(Arc::new(Shared {
        service,
        changes,
        schemas,
        webhooks,
        rollouts,
        audit,
        options,
        bodies,
    }));
    let api = Router::new()
        .route(
            "/nacos/v1/cs/configs",
            get(v1::configs::get_configs)
                .post(v1::configs::post_configs)
                .delete(v1::configs::delete_configs),
        )
        .route(
            "/nacos/v1/cs/configs/listener",
            // The long poll (POST) never reaches the router: each connection answers it
            // directly (`server::ConnService`, `v1::listener::direct`).
            get(v1::listener::listeners_of_key),
        )
        .route("/nacos/v1/cs/listener", get(v1::listener::keys_of_ip))
        .route("/nacos/v1/cs/history", get(v1::history::history))
        .route("/nacos/v1/cs/history/previous", get(v1::history::previous))
        .route(
            "/nacos/v1/cs/history/configs",
            get(v1::history::configs_of_namespace),
        )
        .route(
            "/nacos/v1/console/namespaces",
            get(v1::namespaces::list)
                .post(v1::namespaces::create)
                .put(v1::namespaces::update)
                .delete(v1::namespaces::delete),
        )
        .route(
            "/nacos/v1/cs/communication/dataChange",
            get(v1::cluster::data_change).post(v1::cluster::data_change),
        )
        .route("/nacos/v1/core/cluster/nodes", get(v1::cluster::nodes))
        .route(
            "/nacos/v1/console/health/liveness",
            get(v1::health::liveness),
        )
        .route(
            "/nacos/v1/console/health/readiness",
            get(v1::health::readiness),
        )
        .route(
            "/nacos/v1/console/server/state",
            get(v1::health::server_state),
        )
        .route(
            "/nacos/v2/cs/config",
            get(v2::config::get_config)
                .post(v2::config::post_config)
                .delete(v2::config::delete_config),
        )
        .route("/nacos/v2/cs/config/gray", get(v2::config::list_grays))
        .route(
            "/nacos/v2/cs/config/gray/history",
            get(v2::config::gray_history),
        )
        .route(
            "/nacos/v2/cs/config/gray/promote",
            post(v2::config::promote_gray),
        )
        .route("/nacos/actuator/prometheus", get(observe::scrape))
        .route("/metrics", get(observe::scrape))
        .merge(v1::auth::routes())
        .merge(v3::routes())
        .merge(nacelle::routes());
    let router = console::routes(api)
        // A new route also goes into observe::ROUTES (its metric label).
        .fallback(error::not_found_route)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            observe::observe,
        ))
        .with_state(state.clone());
    HttpApi { router, state }
}
