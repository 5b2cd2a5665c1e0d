//! Building a [`Payload`] from a message and taking one apart.

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::grpc::google::protobuf::Any;
use crate::grpc::{Metadata, Payload};
use crate::response::ResponseHead;
use crate::Message;

/// Why a payload could not be read as a message.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// `metadata.type` is not the type asked for (a client that asked for a
    /// `ConfigQueryResponse` may get an `ErrorResponse`: read its [`Payload::head`]).
    #[error("expected a {expected}, got a {found:?}")]
    WrongType {
        /// The type asked for.
        expected: &'static str,
        /// `metadata.type` of the payload (empty when absent).
        found: String,
    },
    /// The body is not the JSON of the message (or a message could not be serialised).
    #[error("invalid JSON body: {0}")]
    Json(#[from] serde_json::Error),
}

static NO_HEADERS: LazyLock<HashMap<String, String>> = LazyLock::new(HashMap::new);

impl Payload {
    /// A payload with `metadata.type = type_name` and `body.value = json`; no client IP,
    /// no headers.
    pub fn new(type_name: impl Into<String>, json: impl Into<Bytes>) -> Self {
        Payload {
            metadata: Some(Metadata {
                r#type: type_name.into(),
                client_ip: String::new(),
                headers: HashMap::new(),
            }),
            body: Some(Any {
                type_url: String::new(),
                value: json.into(),
            }),
        }
    }

    /// The payload of a message: its [`Message::TYPE`] and its JSON.
    pub fn from_message<M: Message>(msg: &M) -> Result<Self, PayloadError> {
        Ok(Self::new(M::TYPE, serde_json::to_vec(msg)?))
    }

    /// Sets `metadata.clientIp` (what the client reports as its address).
    pub fn with_client_ip(mut self, client_ip: impl Into<String>) -> Self {
        self.metadata_mut().client_ip = client_ip.into();
        self
    }

    /// Adds a request header (`metadata.headers`), e.g. `accessToken`.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata_mut()
            .headers
            .insert(name.into(), value.into());
        self
    }

    fn metadata_mut(&mut self) -> &mut Metadata {
        self.metadata.get_or_insert_with(Metadata::default)
    }

    /// `metadata.type` (empty when absent).
    pub fn type_name(&self) -> &str {
        self.metadata.as_ref().map_or("", |m| m.r#type.as_str())
    }

    /// `metadata.clientIp`, the address the client reports (empty when absent). It is the
    /// client's claim, not a verified address.
    pub fn client_ip(&self) -> &str {
        self.metadata.as_ref().map_or("", |m| m.client_ip.as_str())
    }

    /// `metadata.headers` (empty when absent).
    pub fn headers(&self) -> &HashMap<String, String> {
        self.metadata.as_ref().map_or(&NO_HEADERS, |m| &m.headers)
    }

    /// One header, by its exact name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers().get(name).map(String::as_str)
    }

    /// `body.value`, the JSON of the message (empty when absent).
    pub fn body(&self) -> &[u8] {
        self.body.as_ref().map_or(&[], |b| &b.value[..])
    }

    /// Reads the body as `M`, after checking that `metadata.type` is [`Message::TYPE`].
    pub fn parse<M: Message>(&self) -> Result<M, PayloadError> {
        if self.type_name() != M::TYPE {
            return Err(PayloadError::WrongType {
                expected: M::TYPE,
                found: self.type_name().to_string(),
            });
        }
        self.parse_body()
    }

    /// Reads the body as any JSON type, whatever `metadata.type` says.
    pub fn parse_body<T: DeserializeOwned>(&self) -> Result<T, PayloadError> {
        Ok(serde_json::from_slice(self.body())?)
    }

    /// The common head of a response of any type (`ErrorResponse` included).
    pub fn head(&self) -> Result<ResponseHead, PayloadError> {
        self.parse_body()
    }

    /// The `requestId` of the body, if it is a JSON object carrying a string one (to echo
    /// it in an early error, or to match an answer to its request).
    pub fn request_id(&self) -> Option<String> {
        request_id_of(self.body())
    }
}

/// The `requestId` of a JSON body, if it is an object carrying a string one.
pub fn request_id_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct RequestIdOnly {
        #[serde(default)]
        request_id: Option<String>,
    }
    serde_json::from_slice::<RequestIdOnly>(body)
        .ok()?
        .request_id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigQueryRequest, ConfigQueryResponse};
    use crate::response::ErrorResponse;

    #[test]
    fn a_message_round_trips_through_a_payload() {
        let req = ConfigQueryRequest::new("d", "G", "t").with_request_id("9");
        let p = Payload::from_message(&req)
            .expect("serialises")
            .with_client_ip("10.0.0.1")
            .with_header("accessToken", "abc");
        assert_eq!(p.type_name(), "ConfigQueryRequest");
        assert_eq!(p.client_ip(), "10.0.0.1");
        assert_eq!(p.header("accessToken"), Some("abc"));
        assert_eq!(p.request_id().as_deref(), Some("9"));
        let back: ConfigQueryRequest = p.parse().expect("parses");
        assert_eq!(back, req);
        match p.parse::<ConfigQueryResponse>() {
            Err(PayloadError::WrongType { expected, found }) => {
                assert_eq!(
                    (expected, found.as_str()),
                    ("ConfigQueryResponse", "ConfigQueryRequest")
                );
            }
            other => panic!("expected a type error, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_payload_has_empty_parts() {
        let p = Payload::default();
        assert_eq!((p.type_name(), p.client_ip(), p.body()), ("", "", &[][..]));
        assert!(p.headers().is_empty());
        assert_eq!(p.request_id(), None);
        assert!(p.head().is_err());
    }

    #[test]
    fn the_head_of_any_response() {
        let p = Payload::from_message(&ErrorResponse::fail(
            301,
            "Connection is unregistered.",
            None,
        ))
        .expect("serialises");
        let head = p.head().expect("a head");
        assert_eq!((head.result_code, head.error_code), (500, 301));
        assert!(!head.is_ok());
        assert_eq!(request_id_of(b"[1]"), None);
        assert_eq!(request_id_of(br#"{"requestId":5}"#), None);
    }
}
