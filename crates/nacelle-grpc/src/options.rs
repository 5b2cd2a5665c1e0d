//! [`GrpcOptions`]: every tunable of the gRPC adapter, with Nacos-like defaults.

use std::time::Duration;

use nacelle_core::TrustedProxies;
use nacelle_service::Limits;

use crate::error::GrpcError;

/// Limits and timings of the gRPC adapter. Every field can be changed; tests shorten the
/// timings so that retries and probes happen within a second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcOptions {
    /// Most registered connections at once. A connection over it is answered with a
    /// `ConnectResetRequest` and closed, so the client tries another server.
    pub max_connections: usize,
    /// Most registered connections from one client IP (the caller's IP: the socket
    /// address, or the reported `clientIp` where [`GrpcOptions::trusted_proxies`] allows
    /// it), so one misbehaving host cannot take every slot.
    pub max_connections_per_ip: usize,
    /// Largest inbound gRPC message in bytes; larger ones are rejected. Default:
    /// [`GrpcOptions::inbound_message_bytes_for`] the service's default content limit (Nacos: 10 MB).
    pub max_inbound_message_bytes: usize,
    /// Most server requests (pushes, probes) a connection may leave unanswered. A client
    /// that reaches it has stopped reading: it is disconnected rather than buffered
    /// without limit. Keep it above the service's `max_listen_keys`, so that a change of
    /// every key a client listens to, arriving while it pauses, never trips it.
    pub outbound_queue: usize,
    /// How long a pushed `ConfigChangeNotifyRequest` waits for its ack before the try
    /// counts as failed.
    pub push_ack_timeout: Duration,
    /// Unit of the retry delay: after `n` failed tries the push is resent after
    /// `n × push_retry_base` (Nacos: 2 s, so 2 × tries seconds).
    pub push_retry_base: Duration,
    /// Failed tries of one push after which the connection is unregistered (Nacos: 50).
    pub push_max_tries: u32,
    /// A connection silent for this long is sent a `ClientDetectionRequest` (Nacos: 20 s).
    /// A bi-stream that sends no `ConnectionSetupRequest` within this time is ended.
    pub idle_probe_after: Duration,
    /// How long a probed connection has to show any sign of life before it is dropped.
    pub probe_timeout: Duration,
    /// How often connections are checked for idleness.
    pub probe_interval: Duration,
    /// A TCP connection with no call in flight (no bi-stream, no unary call) for this long
    /// is closed with a GOAWAY. Nacos clients keep their bi-stream open, so this only
    /// reaps connections that were opened and left (or whose client vanished before
    /// opening its stream).
    pub idle_connection_timeout: Duration,
    /// On graceful shutdown: how long in-flight unary calls get to finish after the
    /// GOAWAY (and streams still in their handshake before they are cut).
    pub shutdown_grace: Duration,
    /// Connections from these addresses may report another client IP
    /// (`ConnectionSetupRequest`'s `metadata.clientIp`) and have it believed; from anyone
    /// else a reported IP is believed only when it equals the socket address.
    pub trusted_proxies: TrustedProxies,
}

impl Default for GrpcOptions {
    fn default() -> Self {
        GrpcOptions {
            max_connections: 200_000,
            max_connections_per_ip: 10_000,
            max_inbound_message_bytes: GrpcOptions::inbound_message_bytes_for(
                Limits::default().max_content_bytes,
            ),
            outbound_queue: 16_384,
            push_ack_timeout: Duration::from_secs(3),
            push_retry_base: Duration::from_secs(2),
            push_max_tries: 50,
            idle_probe_after: Duration::from_secs(20),
            probe_timeout: Duration::from_secs(3),
            probe_interval: Duration::from_secs(3),
            idle_connection_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(3),
            trusted_proxies: TrustedProxies::none(),
        }
    }
}

impl GrpcOptions {
    /// Nacos's inbound gRPC message limit (10 MB). The limit never goes below it, so a
    /// config over the content limit is refused by the service's content check, with a
    /// clear error, rather than cut off by the transport.
    pub const NACOS_MAX_INBOUND_MESSAGE_BYTES: usize = 10 * 1024 * 1024;

    /// Room for the JSON fields and framing around a config's content in a publish request.
    pub const MESSAGE_OVERHEAD_BYTES: usize = 64 * 1024;

    /// The inbound message limit that lets a config of `max_content_bytes` be published:
    /// content plus [`Self::MESSAGE_OVERHEAD_BYTES`], at least
    /// [`Self::NACOS_MAX_INBOUND_MESSAGE_BYTES`].
    pub fn inbound_message_bytes_for(max_content_bytes: usize) -> usize {
        Self::NACOS_MAX_INBOUND_MESSAGE_BYTES
            .max(max_content_bytes.saturating_add(Self::MESSAGE_OVERHEAD_BYTES))
    }

    /// Checks that the options can work: no zero sizes, counts or intervals.
    pub fn validate(&self) -> Result<(), GrpcError> {
        let zero = |what: &str| Err(GrpcError::InvalidOptions(format!("{what} must be > 0")));
        if self.max_connections == 0 {
            return zero("max_connections");
        }
        if self.max_connections_per_ip == 0 {
            return zero("max_connections_per_ip");
        }
        if self.max_inbound_message_bytes == 0 {
            return zero("max_inbound_message_bytes");
        }
        if self.outbound_queue == 0 {
            return zero("outbound_queue");
        }
        if self.push_max_tries == 0 {
            return zero("push_max_tries");
        }
        if self.push_ack_timeout.is_zero() {
            return zero("push_ack_timeout");
        }
        if self.probe_interval.is_zero() {
            return zero("probe_interval");
        }
        if self.probe_timeout.is_zero() {
            return zero("probe_timeout");
        }
        if self.idle_connection_timeout.is_zero() {
            return zero("idle_connection_timeout");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_zeroes_are_not() {
        assert!(GrpcOptions::default().validate().is_ok());
        let bad = GrpcOptions {
            outbound_queue: 0,
            ..GrpcOptions::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn inbound_limit_fits_the_largest_config() {
        let content = Limits::default().max_content_bytes;
        let limit = GrpcOptions::default().max_inbound_message_bytes;
        assert!(
            limit >= content + GrpcOptions::MESSAGE_OVERHEAD_BYTES,
            "{limit}"
        );
        assert_eq!(
            GrpcOptions::inbound_message_bytes_for(1024),
            GrpcOptions::NACOS_MAX_INBOUND_MESSAGE_BYTES
        );
    }
}
