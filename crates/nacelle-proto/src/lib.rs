//! The Nacos 2.x gRPC wire types, for servers and clients alike.
//!
//! A Nacos 2.x call carries one protobuf [`Payload`]: `metadata.type` names the message
//! (e.g. `ConfigQueryRequest`), `metadata.clientIp` is the address the client reports,
//! `metadata.headers` holds the request headers (`accessToken`, `app`, …), and
//! `body.value` is the message as UTF-8 JSON. This crate has the proto, the JSON messages
//! and the helpers between the two; it knows nothing of any server.
//!
//! ```
//! use nacelle_proto::config::{ConfigQueryRequest, ConfigQueryResponse};
//! use nacelle_proto::{Message, Payload, ResponseHead};
//!
//! // A client builds a request…
//! let req = ConfigQueryRequest::new("app.yaml", "DEFAULT_GROUP", "");
//! let payload = Payload::from_message(&req)?.with_header("accessToken", "t0k3n");
//! assert_eq!(payload.type_name(), "ConfigQueryRequest");
//! assert_eq!(payload.header("accessToken"), Some("t0k3n"));
//!
//! // …a server reads it and answers…
//! let got: ConfigQueryRequest = payload.parse()?;
//! let answer = Payload::from_message(&ConfigQueryResponse::not_found(got.request_id))?;
//!
//! // …and the client reads the answer.
//! let resp: ConfigQueryResponse = answer.parse()?;
//! assert_eq!(resp.head.error_code, nacelle_proto::error_code::CONFIG_NOT_FOUND);
//! # Ok::<(), nacelle_proto::PayloadError>(())
//! ```
//!
//! # Layout
//! - [`grpc`]: the code generated from `proto/nacos_grpc_service.proto` (with protox, no
//!   system `protoc`): the [`Payload`] / [`Metadata`] messages, `google.protobuf.Any`, and
//!   the tonic *client* stubs `request_client::RequestClient` (`/Request/request`) and
//!   `bi_request_stream_client::BiRequestStreamClient`
//!   (`/BiRequestStream/requestBiStream`). There is no server side: Nacelle serves gRPC
//!   on h2 directly.
//! - `payload`: [`Payload::new`], [`Payload::from_message`], [`Payload::parse`] and the
//!   accessors of the metadata; [`PayloadError`].
//! - [`types`]: every type name as a constant, and [`types::is_response_type`].
//! - [`error_code`]: the Nacos error codes and messages used on the wire.
//! - [`response`]: [`ResponseHead`], the fields every response carries, and the responses
//!   that carry nothing else (`ErrorResponse`, `HealthCheckResponse`, the acks).
//! - [`connection`]: the handshake and keepalive (`ServerCheck*`, `HealthCheckRequest`,
//!   `ConnectionSetupRequest`) and the server's own requests on the bi-stream
//!   (`ClientDetectionRequest`, `ConnectResetRequest`).
//! - [`config`]: the config messages (query, publish, remove, batch listen, change push).
//! - [`fuzzy`]: Nacos 3.0's fuzzy watch (`ConfigFuzzyWatch*`), group keys and patterns.
//! - [`cluster`]: `ConfigChangeClusterSyncRequest` / `…Response` between members.
//!
//! Nacelle's own API data shared with clients (the audit chain's hash, the live view) is
//! not Nacos wire format: it lives in `nacelle-api`.
//!
//! # Conventions
//! - Field names are Nacos's (camelCase; `tenant` is the namespace).
//! - Reading is lenient, as Nacos's Jackson is: unknown fields are ignored, and a missing
//!   or `null` field reads as absent (`None`) or as its default (`0`, `false`, `""`, an
//!   empty map).
//! - Writing omits absent (`None`) values, except fields some client needs present (each
//!   is noted on its type): the server's messages are written byte for byte as Nacos
//!   clients expect them.
//! - Request headers travel in [`Metadata::headers`], not in the JSON body (a Nacos client
//!   moves them there before sending; a `headers` object in a client's body is ignored).
//!   Requests the *server* sends carry an empty `"headers":{}` in the body, which the Rust
//!   `nacos-sdk` needs.
//!
//! # Invariant
//! Depends on no Nacelle crate: SDKs, tools and the server build on it, and `.ci/run`
//! fails if it ever depends on a server crate.

pub mod cluster;
pub mod config;
pub mod connection;
pub mod error_code;
pub mod fuzzy;
mod lenient;
mod payload;
pub mod response;
pub mod types;

/// Code generated from `proto/nacos_grpc_service.proto`: the `Payload`/`Metadata`
/// messages, `google.protobuf.Any` (with `Bytes` values) and the client stubs.
#[allow(
    missing_docs,
    missing_debug_implementations,
    non_camel_case_types,
    clippy::all,
    clippy::pedantic
)]
pub mod grpc {
    include!(concat!(env!("OUT_DIR"), "/nacos_proto.rs"));
}

pub use grpc::google::protobuf::Any;
pub use grpc::{Metadata, Payload};
pub use payload::{request_id_of, PayloadError};
pub use response::ResponseHead;

/// A JSON message carried in a [`Payload`], named on the wire by [`Message::TYPE`]
/// (`metadata.type`).
pub trait Message: serde::Serialize + serde::de::DeserializeOwned {
    /// The type name (`ConfigQueryRequest`, …), as in [`types`].
    const TYPE: &'static str;
}

/// Implements [`Message`] for message types.
macro_rules! messages {
    ($($ty:ty => $name:path),* $(,)?) => {
        $(impl $crate::Message for $ty {
            const TYPE: &'static str = $name;
        })*
    };
}
pub(crate) use messages;

/// Declares a request the server sends on a client's stream (or a member sends a member):
/// `requestId`, `headers` and `module`, then the message's own fields. These three are
/// declared once here so that every such request writes them alike: `headers` always, and
/// empty (the headers travel in `metadata.headers`, but the Rust `nacos-sdk` cannot read a
/// request without the field), and reads them as leniently as Nacos does.
macro_rules! server_request {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($(#[$field_attr:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// The id the answer (if any) carries.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub request_id: Option<String>,
            /// Always written, empty.
            #[serde(default, deserialize_with = "crate::lenient::string_map")]
            pub headers: ::std::collections::BTreeMap<String, String>,
            /// [`MODULE_CONFIG`](crate::config::MODULE_CONFIG) or
            /// [`MODULE_INTERNAL`](crate::connection::MODULE_INTERNAL).
            #[serde(default, deserialize_with = "crate::lenient::or_default")]
            pub module: String,
            $($(#[$field_attr])* pub $field: $ty,)*
        }
    };
}
pub(crate) use server_request;
