//! The handshake, the keepalive, and the server's own requests on the bi-stream.
//!
//! A client calls `ServerCheckRequest` (unary) to learn its connection id, opens the
//! bi-stream and sends `ConnectionSetupRequest` on it (no answer), then sends
//! `HealthCheckRequest` when idle. The server may probe with `ClientDetectionRequest` and
//! send `ConnectResetRequest` to make it reconnect; the client answers both on the stream.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::response::ResponseHead;
use crate::{lenient, messages, server_request, types};

/// The `module` of the server's connection-level requests.
pub const MODULE_INTERNAL: &str = "internal";

/// `ServerCheckRequest` (unary): answered even before the connection is registered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerCheckRequest {
    /// Echoed in the response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `ServerCheckResponse {connectionId, supportAbilityNegotiation}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCheckResponse {
    /// The common fields.
    #[serde(flatten)]
    pub head: ResponseHead,
    /// The id of the client's TCP connection, shared by its unary calls and its stream.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub connection_id: String,
    /// Nacelle writes `true`, as Nacos 2.3+ does: a client that then sends an
    /// `abilityTable` in its `ConnectionSetupRequest` waits for the server's
    /// [`SetupAckRequest`] (the Java client only uses fuzzy watch once it has seen the
    /// server's `fuzzyWatch` ability there).
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub support_ability_negotiation: bool,
}

/// `HealthCheckRequest` (unary): the client's keepalive, sent when idle for ~5 s.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HealthCheckRequest {
    /// Echoed in the response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// `ConnectionSetupRequest`: the first message on the bi-stream; registers the connection.
/// No answer is sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionSetupRequest {
    /// Usually absent or `null` on this request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// E.g. `Nacos-Java-Client:v2.4.0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// The client's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// `source=sdk`, `module=config`, `AppName=…` (a `null` value reads as `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<HashMap<String, Option<String>>>,
    /// The client's abilities (Java 2.3+, Python): present (not `null`) when the client
    /// negotiates abilities and so waits for a [`SetupAckRequest`]. Its content is not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ability_table: Option<serde_json::Value>,
}

impl ConnectionSetupRequest {
    /// The setup request of a config client: `labels` `source=sdk`, `module=config` and,
    /// when given, `AppName`.
    pub fn new(client_version: &str, tenant: &str, app_name: Option<&str>) -> Self {
        let mut labels = HashMap::from([
            ("source".to_string(), Some("sdk".to_string())),
            ("module".to_string(), Some("config".to_string())),
        ]);
        if let Some(app) = app_name {
            labels.insert(APP_NAME_LABEL.to_string(), Some(app.to_string()));
        }
        ConnectionSetupRequest {
            request_id: None,
            client_version: Some(client_version.to_string()),
            tenant: Some(tenant.to_string()),
            labels: Some(labels),
            ability_table: None,
        }
    }
}

/// The label of `ConnectionSetupRequest` that carries the client's application name.
pub const APP_NAME_LABEL: &str = "AppName";

server_request! {
    /// `ClientDetectionRequest` (server → client, on the stream): a probe of an idle
    /// connection; the client answers `ClientDetectionResponse` with the same `requestId`.
    /// Its `module` is `internal`.
    pub struct ClientDetectionRequest {}
}

impl ClientDetectionRequest {
    /// A probe with this request id.
    pub fn new(request_id: impl Into<String>) -> Self {
        ClientDetectionRequest {
            request_id: Some(request_id.into()),
            headers: BTreeMap::new(),
            module: MODULE_INTERNAL.to_string(),
        }
    }
}

/// The abilities Nacelle announces in [`SetupAckRequest`] (names of Nacos's
/// `AbilityKey`s of mode SERVER): config fuzzy watch. Naming abilities are not announced.
pub const SERVER_ABILITIES: &[(&str, bool)] = &[("fuzzyWatch", true)];

server_request! {
    /// `SetupAckRequest` (server → client, on the stream): sent once after a
    /// `ConnectionSetupRequest` that carried an `abilityTable` has registered the
    /// connection; `abilityTable` maps ability names to `true`. Nacos sends it without
    /// waiting for an answer, and the Java client answers nothing. Its `module` is
    /// `internal`.
    pub struct SetupAckRequest {
        /// The server's abilities.
        #[serde(default)]
        pub ability_table: BTreeMap<String, bool>,
    }
}

impl SetupAckRequest {
    /// The ack announcing [`SERVER_ABILITIES`].
    pub fn new(request_id: impl Into<String>) -> Self {
        SetupAckRequest {
            request_id: Some(request_id.into()),
            headers: BTreeMap::new(),
            module: MODULE_INTERNAL.to_string(),
            ability_table: SERVER_ABILITIES
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        }
    }
}

server_request! {
    /// `ConnectResetRequest` (server → client, on the stream): reconnect, to
    /// `serverIp:serverPort` when given, else to any server; the client answers
    /// `ConnectResetResponse`. Its `module` is `internal`.
    pub struct ConnectResetRequest {
        /// The server to reconnect to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub server_ip: Option<String>,
        /// Its gRPC port, as a string (as Nacos writes it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub server_port: Option<String>,
    }
}

impl ConnectResetRequest {
    /// A reset to any server, with this request id.
    pub fn new(request_id: impl Into<String>) -> Self {
        ConnectResetRequest {
            request_id: Some(request_id.into()),
            headers: BTreeMap::new(),
            module: MODULE_INTERNAL.to_string(),
            server_ip: None,
            server_port: None,
        }
    }
}

messages! {
    ServerCheckRequest => types::SERVER_CHECK_REQUEST,
    ServerCheckResponse => types::SERVER_CHECK_RESPONSE,
    HealthCheckRequest => types::HEALTH_CHECK_REQUEST,
    ConnectionSetupRequest => types::CONNECTION_SETUP_REQUEST,
    ClientDetectionRequest => types::CLIENT_DETECTION_REQUEST,
    ConnectResetRequest => types::CONNECT_RESET_REQUEST,
    SetupAckRequest => types::SETUP_ACK_REQUEST,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_requests_are_written_as_the_server_always_wrote_them() {
        let json = serde_json::to_string(&ClientDetectionRequest::new("detect-1")).expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"detect-1","headers":{},"module":"internal"}"#
        );
        let json = serde_json::to_string(&ConnectResetRequest::new("reset-2")).expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"reset-2","headers":{},"module":"internal"}"#
        );
        let json = serde_json::to_string(&ServerCheckResponse {
            head: ResponseHead::ok(Some("1".into())),
            connection_id: "1700000000000_127.0.0.1_5000".into(),
            support_ability_negotiation: true,
        })
        .expect("json");
        assert_eq!(
            json,
            r#"{"resultCode":200,"errorCode":0,"requestId":"1","success":true,"connectionId":"1700000000000_127.0.0.1_5000","supportAbilityNegotiation":true}"#
        );
        // The Java client reads `abilityTable` (ability name -> bool) and needs
        // `fuzzyWatch: true` before it sends a ConfigFuzzyWatchRequest.
        let json = serde_json::to_string(&SetupAckRequest::new("ack-1")).expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"ack-1","headers":{},"module":"internal","abilityTable":{"fuzzyWatch":true}}"#
        );
    }

    #[test]
    fn setup_as_real_clients_send_it() {
        // nacos-sdk-python 2.0.9 / Java 2.x: abilities, nulls, a body `headers` object.
        let s: ConnectionSetupRequest = serde_json::from_str(
            r#"{"headers":{},"requestId":null,"clientVersion":"Nacos-Java-Client:v2.4.2",
                "abilityTable":{"supportPersistentInstanceByGrpc":true},"clientAbilities":{},
                "tenant":"dev","labels":{"source":"sdk","module":"config","AppName":null},
                "module":"internal"}"#,
        )
        .expect("parses");
        assert_eq!(
            s.client_version.as_deref(),
            Some("Nacos-Java-Client:v2.4.2")
        );
        assert_eq!(s.tenant.as_deref(), Some("dev"));
        let labels = s.labels.expect("labels");
        assert_eq!(labels.get("source"), Some(&Some("sdk".to_string())));
        assert_eq!(labels.get(APP_NAME_LABEL), Some(&None));
        assert!(s.ability_table.is_some(), "the client negotiates abilities");
        let old: ConnectionSetupRequest = serde_json::from_str(
            r#"{"clientVersion":"x","abilityTable":null,"clientAbilities":{}}"#,
        )
        .expect("parses");
        assert!(old.ability_table.is_none(), "null: no negotiation");

        let ours = ConnectionSetupRequest::new("nacelle-sdk", "", Some("app"));
        let back: ConnectionSetupRequest =
            serde_json::from_slice(&serde_json::to_vec(&ours).expect("json")).expect("back");
        assert_eq!(back, ours);
    }

    #[test]
    fn server_requests_and_answers_round_trip() {
        for r in [
            ClientDetectionRequest::new("a"),
            ClientDetectionRequest::default(),
        ] {
            let json = serde_json::to_vec(&r).expect("json");
            assert_eq!(
                serde_json::from_slice::<ClientDetectionRequest>(&json).expect("back"),
                r
            );
        }
        let reset = ConnectResetRequest {
            server_ip: Some("10.0.0.2".into()),
            server_port: Some("9848".into()),
            ..ConnectResetRequest::new("r")
        };
        let json = serde_json::to_vec(&reset).expect("json");
        assert_eq!(
            serde_json::from_slice::<ConnectResetRequest>(&json).expect("back"),
            reset
        );
        // As Java Nacos sends it: `headers` may be null.
        let r: ConnectResetRequest = serde_json::from_str(
            r#"{"headers":null,"requestId":"9","module":"internal","serverIp":null}"#,
        )
        .expect("parses");
        assert_eq!(r.request_id.as_deref(), Some("9"));
        let check: ServerCheckResponse = serde_json::from_str(
            r#"{"resultCode":200,"errorCode":0,"message":null,"requestId":null,"connectionId":"c1","success":true,"supportAbilityNegotiation":null}"#,
        )
        .expect("parses");
        assert_eq!(check.connection_id, "c1");
        assert!(check.head.is_ok());
        let req = ServerCheckRequest {
            request_id: Some("1".into()),
        };
        assert_eq!(
            serde_json::to_string(&req).expect("json"),
            r#"{"requestId":"1"}"#
        );
        let h: HealthCheckRequest =
            serde_json::from_str(r#"{"headers":{},"requestId":"h"}"#).expect("parses");
        assert_eq!(h.request_id.as_deref(), Some("h"));
    }
}
