//! What every HTTP request leaves behind: its counter and latency in the server's metrics
//! (by route template, method and status), one tracing span, and a warning when it was
//! slow — plus the two read-only scrape endpoints, `/metrics` and Nacos's
//! `/nacos/actuator/prometheus`.
//!
//! Two layers: [`observe`] wraps the whole router (so unmatched paths are counted too) and
//! does the timing; [`tag_route`] runs after routing, where axum knows the matched route
//! template, and hands that template back through the request's timing scope (a
//! task-local cell: nothing allocated).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use nacelle_metrics::{names, timing, Samples, Source, CONTENT_TYPE};
use tracing::field::Empty;
use tracing::Instrument;

use crate::AppState;

/// The route of a held long poll: its duration is its hold, so it is never "slow".
const LONG_POLL: &str = "/nacos/v1/cs/configs/listener";

/// The route templates of [`crate::router`], as metric labels. A template missing here is
/// labelled `other` (still bounded); keep the list in step with the router.
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
    "/nacos/actuator/prometheus",
    "/metrics",
];

fn route_label(template: &str) -> &'static str {
    ROUTES
        .iter()
        .find(|r| **r == template)
        .copied()
        .unwrap_or("other")
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

/// Outer layer: times the request inside its span, records it, logs it when slow.
pub(crate) async fn observe(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let method = method_label(req.method());
    let span = tracing::debug_span!(
        "http",
        route = Empty,
        method,
        status = Empty,
        duration_ms = Empty
    );
    let started = Instant::now();
    let (resp, gathered) = timing::scope(next.run(req)).instrument(span.clone()).await;
    let took = started.elapsed();
    let store = gathered.store;
    let route = gathered.route.unwrap_or("unmatched");
    let status = resp.status().as_u16();
    let metrics = st.service.metrics();
    metrics.http_request(route, method, status, took);
    let duration_ms = millis(took);
    span.record("route", route);
    span.record("status", status);
    span.record("duration_ms", duration_ms);
    if took >= metrics.slow_request_threshold() && !(route == LONG_POLL && method == "POST") {
        metrics.slow_request();
        // Route, status and timings only: never a parameter or the content.
        tracing::warn!(
            parent: &span,
            route,
            method,
            status,
            duration_ms,
            store_ms = millis(store),
            cause = timing::slow_cause(took, store),
            "slow request"
        );
    } else {
        tracing::debug!(parent: &span, "request");
    }
    resp
}

/// Inner layer (after routing): names the route on the span and for [`observe`].
pub(crate) async fn tag_route(matched: MatchedPath, req: Request, next: Next) -> Response {
    let route = route_label(matched.as_str());
    tracing::Span::current().record("route", route);
    timing::set_route(route);
    next.run(req).await
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

/// The HTTP adapter's scrape-time gauge: long polls held.
pub(crate) struct HeldPolls(pub std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Source for HeldPolls {
    fn collect(&self, out: &mut Samples) {
        let held = self.0.load(std::sync::atomic::Ordering::Relaxed);
        out.set(names::HELD_LONG_POLLS, held as f64);
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
        assert_eq!(route_label("/nacos/v3/anything"), "other");
    }
}
