//! What every HTTP request leaves behind: its counter and latency in the server's metrics
//! (by route template, method and status), one tracing span, and a warning when it was
//! slow — plus the two read-only scrape endpoints, `/metrics` and Nacos's
//! `/nacos/actuator/prometheus`.
//!
//! One layer, [`observe`], wraps the whole router (so unmatched paths are counted too).
//! Every route of the API is a literal path (no path parameters), so a request's route
//! template is its path when that path is one of [`ROUTES`], and `unmatched` otherwise;
//! no routing information is needed (axum's `MatchedPath` would cost an allocation per
//! request). A route with path parameters would need it.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use nacelle_metrics::{timing, CONTENT_TYPE};
use tracing::field::Empty;
use tracing::Instrument;

use crate::AppState;

/// The route of a held long poll: its duration is its hold, so it is never "slow".
pub(crate) const LONG_POLL: &str = "/nacos/v1/cs/configs/listener";

/// The route templates of [`crate::router`], as metric labels. A route missing here is
/// labelled `unmatched` (still bounded); keep the list in step with the router.
const ROUTES: &[&str] = &[
    "/nacos/v1/cs/configs",
    LONG_POLL,
    "/nacos/v1/cs/listener",
    "/nacos/v1/cs/history",
    "/nacos/v1/cs/history/previous",
    "/nacos/v1/cs/history/configs",
    "/nacos/v1/console/namespaces",
    "/nacos/v1/cs/communication/dataChange",
    "/nacos/v1/core/cluster/nodes",
    "/nacos/v1/console/health/liveness",
    "/nacos/v1/console/health/readiness",
    "/nacos/v1/console/server/state",
    "/nacos/v2/cs/config",
    "/nacos/v2/cs/config/gray",
    "/nacos/v2/cs/config/gray/history",
    "/nacos/v2/cs/config/gray/promote",
    "/nacos/actuator/prometheus",
    "/metrics",
];

/// The label of every console page and asset (a bounded set, one label for all).
const CONSOLE_PAGES: &str = "/nacos/ (console pages)";

fn route_label(path: &str) -> &'static str {
    if let Some(r) = ROUTES
        .iter()
        .chain(crate::console::ROUTES)
        .chain(crate::v3::ROUTES)
        .find(|r| **r == path)
    {
        return r;
    }
    if let Some(r) = crate::v1::auth::route(path).or_else(|| crate::nacelle::route(path)) {
        return r;
    }
    if crate::console::assets::is_page(path) {
        return CONSOLE_PAGES;
    }
    "unmatched"
}

fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// The one layer around the router: observes the request ([`observed`]).
pub(crate) async fn observe(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let method = method_label(req.method());
    let route = route_label(req.uri().path());
    // A `Uri` clone shares its bytes: the path is kept without a copy.
    let path = RequestPath::Uri(req.uri().clone());
    observed::<_, true>(&st, route, method, path, next.run(req)).await
}

/// The path an authentication 403's body names ([`crate::error::fill_auth_error`]).
pub(crate) enum RequestPath {
    /// A route known in advance: the direct long poll keeps no part of its request past
    /// the hold (the request's buffer is freed before, not on the release).
    Static(&'static str),
    /// The request's own URI (its bytes shared, not copied).
    Uri(Uri),
}

impl RequestPath {
    fn as_str(&self) -> &str {
        match self {
            RequestPath::Static(p) => p,
            RequestPath::Uri(u) => u.path(),
        }
    }
}

/// What every request goes through, whether the router's layer ([`observe`]) or the
/// connection's direct path for long polls (`crate::v1::listener::direct`) runs it: times
/// `answer` inside the request's span, writes an authentication 403's body
/// ([`crate::error::fill_auth_error`]), records the request and logs it when slow.
/// `STORE_TIME`: gather the request's store time, which only the slow-request log reads
/// (off for held long polls, never "slow").
pub(crate) async fn observed<F, const STORE_TIME: bool>(
    st: &AppState,
    route: &'static str,
    method: &'static str,
    path: RequestPath,
    answer: F,
) -> Response
where
    F: Future<Output = Response>,
{
    let span = tracing::debug_span!("http", route, method, status = Empty, duration_ms = Empty);
    let started = Instant::now();
    let (resp, store) = if STORE_TIME {
        let (resp, gathered) = timing::scope(answer).instrument(span.clone()).await;
        (resp, gathered.store)
    } else {
        (answer.instrument(span.clone()).await, Duration::ZERO)
    };
    let resp = crate::error::fill_auth_error(resp, path.as_str());
    let took = started.elapsed();
    let status = resp.status().as_u16();
    let metrics = st.service.metrics();
    metrics.http_request(route, method, status, took);
    // A span no subscriber wants (the default log level) records nothing.
    if !span.is_disabled() {
        span.record("status", status);
        span.record("duration_ms", millis(took));
    }
    if took >= metrics.slow_request_threshold() && !(route == LONG_POLL && method == "POST") {
        metrics.slow_request();
        // Route, status and timings only: never a parameter or the content.
        tracing::warn!(
            parent: &span,
            route,
            method,
            status,
            duration_ms = millis(took),
            store_ms = millis(store),
            cause = timing::slow_cause(took, store),
            "slow request"
        );
    } else {
        tracing::debug!(parent: &span, "request");
    }
    resp
}

/// `GET /metrics` and `GET /nacos/actuator/prometheus`: every metric of this server in the
/// Prometheus text format. Read-only; served also while the cache loads.
pub(crate) async fn scrape(State(st): State<AppState>) -> Response {
    match st.service.metrics().encode() {
        Ok(text) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
            text,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding the metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// A duration in milliseconds, to the microsecond (for logs).
fn millis(d: std::time::Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_templates_are_one_label() {
        assert_eq!(route_label("/nacos/v2/cs/config"), "/nacos/v2/cs/config");
        assert_eq!(route_label("/nacos/v3/anything"), "unmatched");
        assert_eq!(
            route_label("/nacos/v3/admin/cs/config/list"),
            "/nacos/v3/admin/cs/config/list"
        );
        assert_eq!(route_label("/nacos/v2/cs/config/"), "unmatched");
        assert_eq!(
            route_label("/nacos/console/api/config"),
            "/nacos/console/api/config"
        );
        assert_eq!(
            route_label("/nacos/v1/auth/users/login"),
            "/nacos/v1/auth/users/login"
        );
        assert_eq!(
            route_label("/nacos/v3/auth/permission/list"),
            "/nacos/v3/auth/permission/list"
        );
        assert_eq!(route_label("/nacos/assets/app.js"), CONSOLE_PAGES);
        assert_eq!(route_label("/"), CONSOLE_PAGES);
        assert_eq!(route_label("/nacos/assets/other.js"), "unmatched");
    }
}
