//! The Nacos 2.x gRPC adapter of Nacelle: the `Request` and `BiRequestStream` services that
//! Java/Go/Python 3.x/Rust 2.x clients speak, served over the shared [`ConfigService`].
//!
//! # Layout
//! - [`server`]: [`serve`] / [`GrpcServer`], the entry point: the accept loop, the
//!   notify-then-wait shutdown, the idle-connection prober and the push sweeper.
//! - `rpc`: gRPC over HTTP/2 on the `h2` crate: one task per connection, the unary method,
//!   the bi-stream's inbound reader and shared outbound half; `codec`: message framing and
//!   the gRPC status.
//! - `transport`: the accept loop (`Acceptor`: start, GOAWAY-then-cut shutdown), above
//!   `rpc`; `tcp`, below it: an accepted TCP connection (its connection id, shared by its
//!   unary calls and its bi-stream) and the switches that stop and cut connections.
//! - `ctx`: `Ctx`, the state of the client port shared by `server`, `handlers` and
//!   `session` (below all three).
//! - `session`: one bi-stream: the `ConnectionSetupRequest` handshake, acks of server
//!   pushes, unregistration when the stream ends.
//! - `connection` / `registry`: a registered connection (its outbound queue, listened
//!   keys, pending pushes) and the table of them with the connection limits.
//! - `push`: the pending-push table of one connection: ack matching and retries.
//! - `handlers`: one file per request type (`ConfigQueryRequest`, …), dispatched by the
//!   wire type name.
//! - `wire`: the request metadata every handler receives (`RequestMeta`: type, reported
//!   client IP, `metadata.headers`), `key_of` and the serialisation of the server's
//!   messages; `errors`: the one mapping from [`nacelle_core::CoreError`] to a Nacos error
//!   code and the error answers.
//! - [`options`], [`stats`], [`error`]: configuration, counters, the crate's error type.
//! - `fuzzing` (feature `fuzzing` only): the frame decoder as the fuzz targets drive it.
//! - [`cluster`]: server-to-server gRPC on the cluster port (HTTP port + 1001):
//!   [`ClusterGrpcServer`] answers `ConfigChangeClusterSyncRequest` from members holding the
//!   cluster secret (the sending side is `nacelle_cluster::ClusterSyncClient`).
//!
//! The wire types — the proto, the type names, the error codes and every JSON message —
//! are the crate `nacelle_proto`, shared with clients, the cluster module and the bench.
//!
//! # Invariants
//! - Only the gRPC adapter serves the gRPC wire format; the service never sees a `Payload`.
//! - A server push never blocks the publish path: the hub's callback queues the framed
//!   message on the connection's HTTP/2 stream; a connection that leaves
//!   `outbound_queue` server requests unanswered is disconnected.
//! - One framed notify message per change (`ChangeEvent::encoded`) is shared by every
//!   connection it goes to.
//!
//! [`ConfigService`]: nacelle_service::ConfigService

pub mod cluster;
mod codec;
mod connection;
mod ctx;
pub mod error;
mod errors;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod handlers;
mod observe;
pub mod options;
mod push;
mod registry;
mod rpc;
pub mod server;
mod session;
pub mod stats;
mod tcp;
mod transport;
mod wire;

pub use cluster::{ClusterGrpcOptions, ClusterGrpcServer, ClusterSyncStats};
pub use error::GrpcError;
pub use options::GrpcOptions;
pub use server::{serve, GrpcServer};
pub use stats::{GrpcStats, GrpcStatsSnapshot};
