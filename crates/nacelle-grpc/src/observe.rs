//! What every unary gRPC request leaves behind: its counter and latency in the server's
//! metrics (by request type and Nacos error code), one tracing span, and a warning when it
//! was slow; and the adapter's scrape-time gauges and counters ([`GrpcGauges`]).

use std::time::Instant;

use nacelle_metrics::{names, timing, Samples, Source};
use nacelle_proto::{types, Payload};
use tracing::field::Empty;
use tracing::Instrument;

use crate::ctx::Ctx;
use crate::handlers;
use crate::stats::GrpcStats;
use crate::tcp::ConnTag;

/// The request types the client port serves, as metric labels; anything else is `other`.
const REQUEST_TYPES: &[&str] = &[
    types::SERVER_CHECK_REQUEST,
    types::HEALTH_CHECK_REQUEST,
    types::CONFIG_QUERY_REQUEST,
    types::CONFIG_PUBLISH_REQUEST,
    types::CONFIG_REMOVE_REQUEST,
    types::CONFIG_BATCH_LISTEN_REQUEST,
];

fn request_label(type_name: &str) -> &'static str {
    REQUEST_TYPES
        .iter()
        .find(|t| **t == type_name)
        .copied()
        .unwrap_or("other")
}

/// Nacos's `errorCode` of an answer, 0 when it succeeded. A success is recognised from the
/// first bytes of the body (`{"resultCode":200`, as the server writes every response);
/// anything else is read as a response head.
fn error_code(resp: &Payload) -> i32 {
    if resp.body().starts_with(br#"{"resultCode":200"#) {
        return 0;
    }
    match resp.head() {
        Ok(h) if h.result_code == 200 => 0,
        Ok(h) if h.error_code != 0 => h.error_code,
        Ok(h) => h.result_code,
        Err(_) => 500,
    }
}

/// Answers one unary request of the client port inside its span, recording it.
pub(crate) async fn unary(ctx: &Ctx, tag: &ConnTag, payload: Payload) -> Payload {
    let request = request_label(payload.type_name());
    let span = tracing::debug_span!("grpc", request, code = Empty, duration_ms = Empty);
    let started = Instant::now();
    let work = handlers::unary(ctx, Some(tag), payload);
    let (resp, gathered) = timing::scope(work).instrument(span.clone()).await;
    let store = gathered.store;
    let took = started.elapsed();
    let code = error_code(&resp);
    let metrics = ctx.service.metrics();
    metrics.grpc_request(request, code, took);
    let duration_ms = millis(took);
    span.record("code", code);
    span.record("duration_ms", duration_ms);
    if took >= metrics.slow_request_threshold() {
        metrics.slow_request();
        // Type, code and timings only: never a key or the content.
        tracing::warn!(
            parent: &span,
            request,
            code,
            duration_ms,
            store_ms = millis(store),
            cause = timing::slow_cause(took, store),
            "slow gRPC request"
        );
    } else {
        tracing::debug!(parent: &span, "gRPC request answered");
    }
    resp
}

/// The gRPC adapter's counters, read at every scrape.
pub(crate) struct GrpcGauges(pub GrpcStats);

impl Source for GrpcGauges {
    fn collect(&self, out: &mut Samples) {
        let s = self.0.snapshot();
        out.set(names::GRPC_CONNECTIONS, s.connections as f64);
        out.set(names::GRPC_TCP_CONNECTIONS, s.tcp_connections as f64);
        out.set(names::GRPC_LISTENED_KEYS, s.listened_keys as f64);
        out.set(
            names::GRPC_UNACKED_CONNECTIONS,
            s.unacked_connections as f64,
        );
        out.set(names::GRPC_REGISTRATIONS, s.registrations as f64);
        out.set(names::GRPC_REJECTED, s.rejected_connections as f64);
        out.set(names::GRPC_PUSHES, s.pushes_sent as f64);
        out.set(names::GRPC_PUSH_ACKS, s.push_acks as f64);
        out.set(names::GRPC_PUSH_RETRIES, s.push_retries as f64);
        for (reason, n) in [
            ("slow", s.dropped_slow),
            ("unacked", s.dropped_unacked),
            ("idle", s.dropped_idle),
        ] {
            out.set_with(
                names::GRPC_DROPPED,
                vec![("reason", reason.to_string())],
                n as f64,
            );
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

    /// The size of the future an async fn of this shape returns.
    fn future_size<'a, F: std::future::Future>(_: fn(&'a Ctx, &'a ConnTag, Payload) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every unary call's task holds this future, and it is moved several times on the way
    /// in (issue 34: with the write path awaited in place it was 15 328 bytes in a debug
    /// build, and copying it was 3/4 of a query's instructions): a handler with a large
    /// future must be boxed, not awaited in place. 2 344 bytes when this test was written.
    #[test]
    fn a_unary_call_is_a_small_future() {
        let size = future_size(unary);
        assert!(size <= 4096, "the unary call's future is {size} bytes");
    }

    #[test]
    fn error_codes_of_answers() {
        let ok = Payload::new(
            "ConfigQueryResponse",
            &br#"{"resultCode":200,"errorCode":0}"#[..],
        );
        assert_eq!(error_code(&ok), 0);
        let reordered = Payload::new("X", &br#"{"errorCode":0,"resultCode":200}"#[..]);
        assert_eq!(error_code(&reordered), 0);
        let missing = Payload::new(
            "ConfigQueryResponse",
            &br#"{"resultCode":500,"errorCode":300,"success":false}"#[..],
        );
        assert_eq!(error_code(&missing), 300);
        assert_eq!(error_code(&Payload::new("X", &b"not json"[..])), 500);
        assert_eq!(request_label("ConfigQueryRequest"), "ConfigQueryRequest");
        assert_eq!(request_label("SomethingElse"), "other");
    }
}
