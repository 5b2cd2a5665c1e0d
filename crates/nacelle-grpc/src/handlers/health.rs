//! `ServerCheckRequest` (answered before registration, gives the client its connection id)
//! and `HealthCheckRequest` (the client's keepalive).

use nacelle_proto::connection::ServerCheckResponse;
use nacelle_proto::response::HealthCheckResponse;
use nacelle_proto::{Payload, ResponseHead};

use crate::wire::{self, RequestMeta};

/// `ServerCheckResponse {connectionId, supportAbilityNegotiation: true}` (as Nacos 2.3+):
/// a client that negotiates gets a `SetupAckRequest` after its setup (see `session`).
pub(super) fn server_check(
    _meta: &RequestMeta,
    connection_id: String,
    request_id: Option<String>,
) -> Payload {
    wire::message(&ServerCheckResponse {
        head: ResponseHead::ok(request_id),
        connection_id,
        support_ability_negotiation: true,
    })
}

/// `HealthCheckResponse`; the caller has already refreshed the connection's activity.
pub(super) fn health_check(_meta: &RequestMeta, body: &[u8]) -> Payload {
    wire::message(&HealthCheckResponse::ok(wire::request_id_of(body)))
}
