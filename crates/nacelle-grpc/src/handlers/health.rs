//! `ServerCheckRequest` (answered before registration, gives the client its connection id)
//! and `HealthCheckRequest` (the client's keepalive).

use crate::proto::Payload;
use crate::wire;

/// `ServerCheckResponse {connectionId, supportAbilityNegotiation: false}`.
pub(super) fn server_check(connection_id: String, request_id: Option<String>) -> Payload {
    wire::reply(
        wire::SERVER_CHECK_RESPONSE,
        wire::Head::ok(request_id),
        wire::ServerCheckFields {
            connection_id,
            support_ability_negotiation: false,
        },
    )
}

/// `HealthCheckResponse`; the caller has already refreshed the connection's activity.
pub(super) fn health_check(body: &[u8]) -> Payload {
    wire::reply(
        wire::HEALTH_CHECK_RESPONSE,
        wire::Head::ok(wire::request_id_of(body)),
        wire::NoFields {},
    )
}
