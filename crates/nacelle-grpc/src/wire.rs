//! Adapter-side helpers around the wire types of `nacelle_proto`: the metadata of a request
//! as the handlers see it ([`RequestMeta`]), infallible serialisation of the server's own
//! messages, and the lenient-reading helpers of the handlers.

use std::collections::HashMap;

use bytes::Bytes;
use nacelle_core::{ConfigKey, CoreError};
use nacelle_proto::{Message, Metadata, Payload};
use serde::{Deserialize, Serialize};

pub(crate) use nacelle_proto::request_id_of;

/// A quick read of a JSON body's `requestId`: the string right after the first
/// `"requestId":"`, when it holds no escape. Clients write their acks compactly
/// (`{"resultCode":200,…,"requestId":"42"}`), so this finds the id without parsing the JSON.
/// It is only a hint: a nested object or an escaped key could mislead it, so a caller
/// matches it against what it waits for and otherwise reads the body with
/// [`request_id_of`].
pub(crate) fn request_id_hint(body: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"requestId\":\"";
    // The searcher is built once: `memmem::find` builds one per call, which cost more
    // than the search itself on every ack (callgrind: ~400 instructions per push).
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(KEY));
    let start = FINDER.find(body)? + KEY.len();
    let rest = &body[start..];
    let value = &rest[..memchr::memchr(b'"', rest)?];
    if value.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(value).ok()
}

/// The metadata of one request: `metadata.type`, the client IP the client reported and the
/// request headers (`accessToken`, `app`, …), which Nacos clients put in
/// `metadata.headers`. Every unary handler receives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequestMeta {
    /// `metadata.type` (empty when absent).
    pub type_name: String,
    /// `metadata.clientIp`: the client's claim, not a verified address.
    pub client_ip: String,
    /// `metadata.headers`.
    pub headers: HashMap<String, String>,
}

impl RequestMeta {
    /// Takes a payload apart (nothing is copied): its metadata and its JSON body.
    pub fn take(p: Payload) -> (RequestMeta, Bytes) {
        let meta = p
            .metadata
            .map(
                |Metadata {
                     r#type,
                     client_ip,
                     headers,
                 }| RequestMeta {
                    type_name: r#type,
                    client_ip,
                    headers,
                },
            )
            .unwrap_or_default();
        (meta, p.body.map(|b| b.value).unwrap_or_default())
    }

    /// One header, by its exact name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The names of the headers, sorted (for logs: values may be credentials).
    pub fn header_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.headers.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// Serializes a message. The server's message types cannot fail to serialize (no maps
/// with non-string keys, no custom serializers); should one ever fail, a generic error
/// body is sent instead and the failure is logged.
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

/// The payload of one of the server's messages (see [`to_json`]).
pub(crate) fn message<M: Message>(msg: &M) -> Payload {
    Payload::new(M::TYPE, to_json(msg))
}

/// Parses a request body.
pub(crate) fn from_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(body)
}

/// `Some(s)` unless `s` is absent or blank: on the wire an empty string means "not given".
pub(crate) fn non_blank(s: Option<&str>) -> Option<&str> {
    s.filter(|v| !v.trim().is_empty())
}

/// Builds a key from the fields a client sent; the namespace is normalised here.
pub(crate) fn key_of(
    tenant: Option<&str>,
    group: Option<&str>,
    data_id: Option<&str>,
) -> Result<ConfigKey, CoreError> {
    ConfigKey::parse(tenant, group.unwrap_or(""), data_id.unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacelle_proto::response::HealthCheckResponse;

    #[test]
    fn a_payload_is_taken_apart_with_its_headers() {
        let p = Payload::new("ConfigQueryRequest", &b"{}"[..])
            .with_client_ip("10.1.2.3")
            .with_header("accessToken", "t")
            .with_header("app", "shop");
        let (meta, body) = RequestMeta::take(p);
        assert_eq!(meta.type_name, "ConfigQueryRequest");
        assert_eq!(meta.client_ip, "10.1.2.3");
        assert_eq!(meta.header("accessToken"), Some("t"));
        assert_eq!(meta.header_names(), ["accessToken", "app"]);
        assert_eq!(&body[..], b"{}");
        let (meta, body) = RequestMeta::take(Payload::default());
        assert_eq!(meta, RequestMeta::default());
        assert!(body.is_empty());
    }

    #[test]
    fn the_server_s_messages_are_framed_as_before() {
        let p = message(&HealthCheckResponse::ok(Some("7".into())));
        assert_eq!(p.type_name(), "HealthCheckResponse");
        assert_eq!(
            p.body(),
            br#"{"resultCode":200,"errorCode":0,"requestId":"7","success":true}"#
        );
        assert_eq!(non_blank(Some(" ")), None);
        assert_eq!(non_blank(Some("a")), Some("a"));
    }

    #[test]
    fn the_request_id_hint_reads_compact_acks_and_gives_up_on_anything_else() {
        // What Java's Jackson, Go's encoding/json and our own clients send.
        let java = br#"{"resultCode":200,"errorCode":0,"success":true,"requestId":"42"}"#;
        assert_eq!(request_id_hint(java), Some("42"));
        assert_eq!(request_id_hint(br#"{"requestId":"","x":1}"#), Some(""));
        // Spaces (Python's json.dumps), escapes, no id, a cut body: no hint; the caller
        // parses the JSON.
        assert_eq!(request_id_hint(br#"{"requestId": "42"}"#), None);
        assert_eq!(request_id_hint(br#"{"requestId":"4\"2"}"#), None);
        assert_eq!(request_id_hint(br#"{"resultCode":200}"#), None);
        assert_eq!(request_id_hint(br#"{"requestId":"42"#), None);
        assert_eq!(
            request_id_of(br#"{"requestId": "42"}"#).as_deref(),
            Some("42")
        );
        // A nested id comes first: only a hint, which the connection checks against its
        // pending pushes before believing it.
        let nested = br#"{"data":{"requestId":"1"},"requestId":"2"}"#;
        assert_eq!(request_id_hint(nested), Some("1"));
        assert_eq!(request_id_of(nested).as_deref(), Some("2"));
    }
}
