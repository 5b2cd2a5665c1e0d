//! Health endpoints: liveness always 200; readiness 200 only once the cache is loaded.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json as json_value;

use super::json;
use crate::AppState;

/// `GET /nacos/v1/console/health/liveness`.
pub(crate) async fn liveness() -> Response {
    (StatusCode::OK, "OK").into_response()
}

/// `GET /nacos/v1/console/health/readiness`.
pub(crate) async fn readiness(State(st): State<AppState>) -> Response {
    if st.service.shutdown_token().is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "server is shutting down").into_response();
    }
    if st.service.is_ready() {
        (StatusCode::OK, "OK").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "config cache is loading").into_response()
    }
}

/// `GET /nacos/v1/console/server/state`: what some clients and consoles probe.
pub(crate) async fn server_state(State(st): State<AppState>) -> Response {
    json(&json_value!({
        "version": env!("CARGO_PKG_VERSION"),
        "server": "nacelle",
        "standalone_mode": "standalone",
        "function_mode": "config",
        "auth_enabled": st.service.access().enabled().to_string(),
        "datasource_platform": st.service.backend(),
    }))
}
