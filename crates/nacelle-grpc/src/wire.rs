//! The wire: JSON messages carried in `Payload.body.value`, named by `Payload.metadata.type`,
//! and helpers to build and take apart payloads.
//!
//! Reading is lenient (every field optional, `null` accepted, unknown fields ignored);
//! writing omits absent values except where a client needs the field present (noted on
//! each type). Field names are Nacos's (camelCase, `tenant` for the namespace).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::proto::google::protobuf::Any;
use crate::proto::{Metadata, Payload};

// ------------------------------------------------------------------ type names

pub(crate) const SERVER_CHECK_REQUEST: &str = "ServerCheckRequest";
pub(crate) const SERVER_CHECK_RESPONSE: &str = "ServerCheckResponse";
pub(crate) const HEALTH_CHECK_REQUEST: &str = "HealthCheckRequest";
pub(crate) const HEALTH_CHECK_RESPONSE: &str = "HealthCheckResponse";
pub(crate) const CONNECTION_SETUP_REQUEST: &str = "ConnectionSetupRequest";
pub(crate) const CONNECT_RESET_REQUEST: &str = "ConnectResetRequest";
pub(crate) const CLIENT_DETECTION_REQUEST: &str = "ClientDetectionRequest";
pub(crate) const ERROR_RESPONSE: &str = "ErrorResponse";
pub(crate) const CONFIG_QUERY_REQUEST: &str = "ConfigQueryRequest";
pub(crate) const CONFIG_QUERY_RESPONSE: &str = "ConfigQueryResponse";
pub(crate) const CONFIG_PUBLISH_REQUEST: &str = "ConfigPublishRequest";
pub(crate) const CONFIG_PUBLISH_RESPONSE: &str = "ConfigPublishResponse";
pub(crate) const CONFIG_REMOVE_REQUEST: &str = "ConfigRemoveRequest";
pub(crate) const CONFIG_REMOVE_RESPONSE: &str = "ConfigRemoveResponse";
pub(crate) const CONFIG_BATCH_LISTEN_REQUEST: &str = "ConfigBatchListenRequest";
pub(crate) const CONFIG_BATCH_LISTEN_RESPONSE: &str = "ConfigChangeBatchListenResponse";
pub(crate) const CONFIG_CHANGE_NOTIFY_REQUEST: &str = "ConfigChangeNotifyRequest";
pub(crate) const CONFIG_CHANGE_CLUSTER_SYNC_REQUEST: &str = "ConfigChangeClusterSyncRequest";
pub(crate) const CONFIG_CHANGE_CLUSTER_SYNC_RESPONSE: &str = "ConfigChangeClusterSyncResponse";

/// Whether a type name on the bi-stream is a client's answer to a server request. Any
/// response type counts as an ack (`ConfigChangeNotifyResponse` from Rust and Java,
/// `NotifySubscriberResponse` from Python 3.x).
pub(crate) fn is_response_type(type_name: &str) -> bool {
    type_name.ends_with("Response")
}

// ------------------------------------------------------------------ payloads

/// A payload with `metadata.type = type_name` and `body.value = json`.
pub(crate) fn payload(type_name: &str, json: Bytes) -> Payload {
    Payload {
        metadata: Some(Metadata {
            r#type: type_name.to_string(),
            client_ip: String::new(),
            headers: HashMap::new(),
        }),
        body: Some(Any {
            type_url: String::new(),
            value: json,
        }),
    }
}

/// The type name, the client IP the client reported and the JSON body of a payload
/// (empty strings/slices when absent).
pub(crate) fn parts(p: &Payload) -> (&str, &str, &[u8]) {
    let (type_name, client_ip) = p
        .metadata
        .as_ref()
        .map(|m| (m.r#type.as_str(), m.client_ip.as_str()))
        .unwrap_or(("", ""));
    let body = p.body.as_ref().map(|b| &b.value[..]).unwrap_or(&[]);
    (type_name, client_ip, body)
}

/// Serializes a message. Our message types cannot fail to serialize (no maps with
/// non-string keys, no custom serializers); should one ever fail, a generic error body is
/// sent instead and the failure is logged.
pub(crate) fn to_json<T: Serialize>(msg: &T) -> Bytes {
    match serde_json::to_vec(msg) {
        Ok(v) => Bytes::from(v),
        Err(e) => {
            tracing::error!(error = %e, "cannot serialize a gRPC message");
            Bytes::from_static(
                br#"{"resultCode":500,"errorCode":500,"message":"serialization failed","success":false}"#,
            )
        }
    }
}

/// Parses a request body.
pub(crate) fn from_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(body)
}

/// The `requestId` of a body, if it is a JSON object carrying a string one.
pub(crate) fn request_id_of(body: &[u8]) -> Option<String> {
    from_json::<RequestIdOnly>(body).ok()?.request_id
}

// ------------------------------------------------------------------ responses

/// The fields every response carries. The Rust SDK needs `resultCode` and `errorCode`
/// present; the Go SDK reads `success`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Head {
    pub result_code: i32,
    pub error_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub success: bool,
}

impl Head {
    /// `resultCode 200, errorCode 0`.
    pub fn ok(request_id: Option<String>) -> Self {
        Head {
            result_code: 200,
            error_code: 0,
            message: None,
            request_id,
            success: true,
        }
    }

    /// `resultCode 500` with an error code and message.
    pub fn fail(error_code: i32, message: String, request_id: Option<String>) -> Self {
        Head {
            result_code: 500,
            error_code,
            message: Some(message),
            request_id,
            success: false,
        }
    }
}

/// A response: the common head plus the fields of its type.
#[derive(Debug, Serialize)]
pub(crate) struct Reply<T: Serialize> {
    #[serde(flatten)]
    pub head: Head,
    #[serde(flatten)]
    pub body: T,
}

/// A response type without fields of its own.
#[derive(Debug, Serialize)]
pub(crate) struct NoFields {}

/// Builds a response payload.
pub(crate) fn reply<T: Serialize>(type_name: &str, head: Head, body: T) -> Payload {
    payload(type_name, to_json(&Reply { head, body }))
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerCheckFields {
    pub connection_id: String,
    /// `false`: with `true`, clients would wait for a `SetupAckRequest` we do not send.
    pub support_ability_negotiation: bool,
}

/// Fields of `ConfigQueryResponse`. `lastModified` and `beta` are always written (the Rust
/// SDK cannot parse a response without them, failures included); `tag` never is (Python
/// 3.x rejects null/"", Rust rejects a bool).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QueryFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_data_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    pub last_modified: i64,
    pub beta: bool,
}

/// Fields of `ConfigChangeBatchListenResponse`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchListenFields {
    pub changed_configs: Vec<ConfigContext>,
}

/// A key as the client named it (its tenant spelling kept).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConfigContext {
    pub data_id: String,
    pub group: String,
    pub tenant: String,
}

// ------------------------------------------------------------------ server requests

/// A request the server sends on the bi-stream. `headers` is always present (the Rust SDK
/// needs it); `module` is what Java Nacos writes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerRequest<'a, T: Serialize> {
    pub request_id: &'a str,
    pub headers: BTreeMap<String, String>,
    pub module: &'static str,
    #[serde(flatten)]
    pub body: T,
}

/// Fields of `ConfigChangeNotifyRequest`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChangeNotifyFields<'a> {
    pub data_id: &'a str,
    pub group: &'a str,
    pub tenant: &'a str,
}

/// Fields of `ConfigChangeClusterSyncRequest` as a member sends it (Nacos 2.x's JSON:
/// `lastModified` a number, `beta` a bool, `tag` only when there is one).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterSyncFields<'a> {
    pub data_id: &'a str,
    pub group: &'a str,
    pub tenant: &'a str,
    pub last_modified: i64,
    pub beta: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<&'a str>,
}

/// Serializes a server request body.
pub(crate) fn server_request<T: Serialize>(
    request_id: &str,
    module: &'static str,
    body: T,
) -> Bytes {
    to_json(&ServerRequest {
        request_id,
        headers: BTreeMap::new(),
        module,
        body,
    })
}

// ------------------------------------------------------------------ client requests

/// Only the `requestId` of a message (to echo it in early errors, and to match acks).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RequestIdOnly {
    pub request_id: Option<String>,
}

/// `ConnectionSetupRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct SetupRequest {
    pub client_version: Option<String>,
    pub tenant: Option<String>,
    pub labels: Option<HashMap<String, Option<String>>>,
}

/// `ConfigQueryRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct QueryRequest {
    pub request_id: Option<String>,
    pub data_id: Option<String>,
    pub group: Option<String>,
    pub tenant: Option<String>,
    pub tag: Option<String>,
}

/// `ConfigPublishRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct PublishRequest {
    pub request_id: Option<String>,
    pub data_id: Option<String>,
    pub group: Option<String>,
    pub tenant: Option<String>,
    pub content: Option<String>,
    pub cas_md5: Option<String>,
    pub addition_map: Option<HashMap<String, Option<String>>>,
}

/// `ConfigRemoveRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RemoveRequest {
    pub request_id: Option<String>,
    pub data_id: Option<String>,
    pub group: Option<String>,
    pub tenant: Option<String>,
    pub tag: Option<String>,
}

/// `ConfigBatchListenRequest`. `listen` defaults to true, as in the Java client.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct BatchListenRequest {
    pub request_id: Option<String>,
    pub listen: Option<bool>,
    pub config_listen_contexts: Option<Vec<ListenContext>>,
}

/// One key of a `ConfigBatchListenRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ListenContext {
    pub data_id: Option<String>,
    pub group: Option<String>,
    pub tenant: Option<String>,
    pub md5: Option<String>,
}

/// `ConfigChangeClusterSyncRequest` (member → member, on the cluster port). `beta` is a bool
/// in Nacos 2.x and `isBeta: "Y"` in later versions; both are read as any JSON value, since
/// the receiver reloads the whole key from the database either way.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ClusterSyncRequest {
    pub request_id: Option<String>,
    pub data_id: Option<String>,
    pub group: Option<String>,
    pub tenant: Option<String>,
    pub tag: Option<String>,
    pub last_modified: Option<i64>,
    pub beta: Option<serde_json::Value>,
}

/// The common head of a response, as a caller reads it back.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ResponseHead {
    pub result_code: Option<i32>,
    pub error_code: Option<i32>,
    pub message: Option<String>,
}

/// `Some(s)` unless `s` is absent or blank: on the wire an empty string means "not given".
pub(crate) fn non_blank(s: Option<&str>) -> Option<&str> {
    s.filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_carry_the_common_head() {
        let json = to_json(&Reply {
            head: Head::ok(Some("7".into())),
            body: NoFields {},
        });
        assert_eq!(
            &json[..],
            br#"{"resultCode":200,"errorCode":0,"requestId":"7","success":true}"#
        );
        let json = to_json(&Reply {
            head: Head::fail(300, "config data not exist".into(), None),
            body: QueryFields {
                content: None,
                encrypted_data_key: None,
                content_type: None,
                md5: None,
                last_modified: 0,
                beta: false,
            },
        });
        assert_eq!(
            &json[..],
            br#"{"resultCode":500,"errorCode":300,"message":"config data not exist","success":false,"lastModified":0,"beta":false}"#
        );
    }

    #[test]
    fn notify_request_shape() {
        let json = server_request(
            "12",
            "config",
            ChangeNotifyFields {
                data_id: "d",
                group: "G",
                tenant: "",
            },
        );
        assert_eq!(
            &json[..],
            br#"{"requestId":"12","headers":{},"module":"config","dataId":"d","group":"G","tenant":""}"#
        );
    }

    #[test]
    fn cluster_sync_shape_matches_nacos() {
        let json = server_request(
            "3",
            "config",
            ClusterSyncFields {
                data_id: "d",
                group: "G",
                tenant: "",
                last_modified: 5,
                beta: false,
                tag: None,
            },
        );
        assert_eq!(
            &json[..],
            br#"{"requestId":"3","headers":{},"module":"config","dataId":"d","group":"G","tenant":"","lastModified":5,"beta":false}"#
        );
        // As Java Nacos 2.x writes it, and with the string form of later versions.
        let r: ClusterSyncRequest = from_json(
            br#"{"headers":{},"requestId":"r1","dataId":"d","group":"G","tenant":"t",
                "tag":"","lastModified":0,"beta":true,"module":"config","isBatch":false}"#,
        )
        .expect("parses");
        assert_eq!(r.request_id.as_deref(), Some("r1"));
        assert_eq!(r.tenant.as_deref(), Some("t"));
        assert_eq!(r.last_modified, Some(0));
        let r: ClusterSyncRequest =
            from_json(br#"{"dataId":"d","group":"G","beta":"Y","lastModified":null}"#)
                .expect("parses");
        assert_eq!(r.data_id.as_deref(), Some("d"));
    }

    #[test]
    fn lenient_reading() {
        let r: PublishRequest = from_json(
            br#"{"dataId":"d","group":"G","tenant":null,"casMd5":null,"content":"x",
                "additionMap":{"type":"yaml","tag":null},"unknown":1}"#,
        )
        .expect("parses");
        assert_eq!(r.data_id.as_deref(), Some("d"));
        assert!(r.tenant.is_none());
        let add = r.addition_map.expect("map");
        assert_eq!(add.get("type").cloned().flatten().as_deref(), Some("yaml"));
        assert!(from_json::<PublishRequest>(b"garbage").is_err());
        assert_eq!(request_id_of(br#"{"requestId":"5"}"#).as_deref(), Some("5"));
        assert_eq!(request_id_of(b"[1]"), None);
        assert!(is_response_type("NotifySubscriberResponse"));
        assert!(!is_response_type("ConnectionSetupRequest"));
    }
}
