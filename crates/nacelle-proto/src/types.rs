//! The type names of the messages (`Metadata.type`), as Nacos's Java classes are named.

/// Client → server (unary): the first call of a client; answered before registration.
pub const SERVER_CHECK_REQUEST: &str = "ServerCheckRequest";
/// Server → client: the answer to [`SERVER_CHECK_REQUEST`], with the connection id.
pub const SERVER_CHECK_RESPONSE: &str = "ServerCheckResponse";
/// Client → server (unary): the client's keepalive.
pub const HEALTH_CHECK_REQUEST: &str = "HealthCheckRequest";
/// Server → client: the answer to [`HEALTH_CHECK_REQUEST`].
pub const HEALTH_CHECK_RESPONSE: &str = "HealthCheckResponse";
/// Client → server, first message on the bi-stream: registers the connection.
pub const CONNECTION_SETUP_REQUEST: &str = "ConnectionSetupRequest";
/// Server → client (stream): reconnect (elsewhere).
pub const CONNECT_RESET_REQUEST: &str = "ConnectResetRequest";
/// Client → server (stream): the ack of [`CONNECT_RESET_REQUEST`].
pub const CONNECT_RESET_RESPONSE: &str = "ConnectResetResponse";
/// Server → client (stream): the server's abilities, sent once the connection is registered
/// when its `ConnectionSetupRequest` carried an `abilityTable` (no answer is expected).
pub const SETUP_ACK_REQUEST: &str = "SetupAckRequest";
/// Server → client (stream): a probe of an idle connection.
pub const CLIENT_DETECTION_REQUEST: &str = "ClientDetectionRequest";
/// Client → server (stream): the answer to [`CLIENT_DETECTION_REQUEST`].
pub const CLIENT_DETECTION_RESPONSE: &str = "ClientDetectionResponse";
/// Server → client: a protocol-level error (not ready, unregistered, no handler, bad body).
pub const ERROR_RESPONSE: &str = "ErrorResponse";
/// Client → server: read one config.
pub const CONFIG_QUERY_REQUEST: &str = "ConfigQueryRequest";
/// Server → client: the answer to [`CONFIG_QUERY_REQUEST`].
pub const CONFIG_QUERY_RESPONSE: &str = "ConfigQueryResponse";
/// Client → server: publish one config.
pub const CONFIG_PUBLISH_REQUEST: &str = "ConfigPublishRequest";
/// Server → client: the answer to [`CONFIG_PUBLISH_REQUEST`].
pub const CONFIG_PUBLISH_RESPONSE: &str = "ConfigPublishResponse";
/// Client → server: remove one config.
pub const CONFIG_REMOVE_REQUEST: &str = "ConfigRemoveRequest";
/// Server → client: the answer to [`CONFIG_REMOVE_REQUEST`].
pub const CONFIG_REMOVE_RESPONSE: &str = "ConfigRemoveResponse";
/// Client → server: start (or stop) listening to keys.
pub const CONFIG_BATCH_LISTEN_REQUEST: &str = "ConfigBatchListenRequest";
/// Server → client: the answer to [`CONFIG_BATCH_LISTEN_REQUEST`] (note the name).
pub const CONFIG_BATCH_LISTEN_RESPONSE: &str = "ConfigChangeBatchListenResponse";
/// Server → client (stream): a listened key changed.
pub const CONFIG_CHANGE_NOTIFY_REQUEST: &str = "ConfigChangeNotifyRequest";
/// Client → server (stream): the ack of [`CONFIG_CHANGE_NOTIFY_REQUEST`] (Java, Rust).
pub const CONFIG_CHANGE_NOTIFY_RESPONSE: &str = "ConfigChangeNotifyResponse";
/// Client → server (stream): the ack Python 3.x sends for any server request.
pub const NOTIFY_SUBSCRIBER_RESPONSE: &str = "NotifySubscriberResponse";
/// Member → member (cluster port): a key changed in the shared database.
pub const CONFIG_CHANGE_CLUSTER_SYNC_REQUEST: &str = "ConfigChangeClusterSyncRequest";
/// Member → member: the answer to [`CONFIG_CHANGE_CLUSTER_SYNC_REQUEST`].
pub const CONFIG_CHANGE_CLUSTER_SYNC_RESPONSE: &str = "ConfigChangeClusterSyncResponse";

/// Client → server (unary): watch or stop watching every key matching a pattern (Nacos 3.0
/// fuzzy watch).
pub const CONFIG_FUZZY_WATCH_REQUEST: &str = "ConfigFuzzyWatchRequest";
/// The answer to [`CONFIG_FUZZY_WATCH_REQUEST`].
pub const CONFIG_FUZZY_WATCH_RESPONSE: &str = "ConfigFuzzyWatchResponse";
/// Server → client (stream): a batch of the keys a pattern matches (or no longer matches).
pub const CONFIG_FUZZY_WATCH_SYNC_REQUEST: &str = "ConfigFuzzyWatchSyncRequest";
/// Client → server (stream): the ack of [`CONFIG_FUZZY_WATCH_SYNC_REQUEST`].
pub const CONFIG_FUZZY_WATCH_SYNC_RESPONSE: &str = "ConfigFuzzyWatchSyncResponse";
/// Server → client (stream): one key matching a watched pattern was added, changed or removed.
pub const CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_REQUEST: &str = "ConfigFuzzyWatchChangeNotifyRequest";
/// Client → server (stream): the ack of [`CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_REQUEST`].
pub const CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_RESPONSE: &str = "ConfigFuzzyWatchChangeNotifyResponse";

/// Whether a type name is a response. On the bi-stream any response type counts as the
/// client's answer to a server request (`ConfigChangeNotifyResponse` from Rust and Java,
/// `NotifySubscriberResponse` from Python 3.x).
pub fn is_response_type(type_name: &str) -> bool {
    type_name.ends_with("Response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_told_by_their_name() {
        assert!(is_response_type(NOTIFY_SUBSCRIBER_RESPONSE));
        assert!(is_response_type(CONFIG_BATCH_LISTEN_RESPONSE));
        assert!(!is_response_type(CONNECTION_SETUP_REQUEST));
    }
}
