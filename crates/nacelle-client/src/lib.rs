//! A Rust client of Nacelle — and of any Nacos 2.x server — over Nacos's gRPC protocol.
//!
//! ```no_run
//! use nacelle_client::{Client, Format};
//!
//! #[derive(serde::Deserialize)]
//! struct Settings { greeting: String, port: u16 }
//!
//! # async fn demo() -> Result<(), nacelle_client::ClientError> {
//! let client = Client::builder().server_addrs(["127.0.0.1:8848"]).build().await?;
//! client.publish("app.yaml", "greeting: hello\nport: 8080\n").await?;
//! let settings = client.bind::<Settings>("app.yaml", Format::Yaml).await?;
//! println!("{}", settings.get().greeting); // always the current good version
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - `options.rs`: [`ClientBuilder`], [`ServerAddr`] (gRPC on HTTP + 1000 unless given).
//! - `client.rs`: [`Client`] — get, publish ([`PublishOptions`]: type, compare-and-set,
//!   tag, beta IPs), remove, [`Client::watch`] (a [`Watch`] stream) and
//!   [`Client::listen`] (a callback).
//! - `bind.rs`, `format.rs`: typed hot reload — [`Binding`], [`Binder`] (layers, a
//!   validator), [`BindError`]; [`Format`] (YAML, JSON, TOML, properties).
//! - `admin.rs`: [`Admin`], the HTTP calls with no gRPC form (search, history,
//!   namespaces, export/import); `gray.rs`: gray releases (list, publish by IPs or
//!   labels, promote, stop); `users.rs`: users, roles, permissions; `schemas.rs`: the
//!   JSON Schemas of config keys (list, get, set, remove, check); `webhooks.rs`:
//!   webhooks ([`Webhook`]: list, create, update, remove) and their deliveries.
//! - `session.rs`: the background session (connect, fail over, backoff, re-send the
//!   listen set on every connection, keepalive, `ConnectResetRequest`) and the refresh
//!   worker; `grpc.rs`: one registered connection; `shared.rs`: the state they share.
//! - `http_transport.rs`: the HTTP v1 long-polling transport ([`Transport`]); `http.rs`:
//!   one HTTP request with failover, shared with `admin.rs`.
//! - `auth.rs`: login and token refresh; `snapshot.rs`: the snapshot directory;
//!   `metrics.rs`: the [`Metrics`] hook; `error.rs`: [`ClientError`].
//!
//! # Invariant
//! Depends on no server crate — only `nacelle-proto` (wire types, client stubs) and
//! `nacelle-cipher` (client-side decryption of `cipher-aes-` configs). `.ci/run` checks it.

mod admin;
mod audit;
pub mod auth;
mod bind;
mod changes;
mod client;
mod clients;
mod error;
mod fetch;
mod format;
mod gray;
mod group;
mod grpc;
mod http;
mod http_transport;
mod key;
pub mod metrics;
mod options;
mod rollouts;
mod schemas;
mod secret;
mod session;
mod shared;
mod snapshot;
mod users;
mod webhooks;

pub use admin::{
    Admin, ConfigInfo, ConfigRef, HistoryEntry, ImportPolicy, ImportReport, Namespace, Page,
    Progress, UnrecognizedItem,
};
pub use audit::{AuditChain, AuditCheck, AuditEntry, AuditHead, AuditQuery};
pub use bind::{BindError, Binder, Binding, Validator};
pub use changes::{
    ChangeAction, ChangeDiff, ChangeEdit, ChangeEvent, ChangeItem, ChangeRequest, NewChange,
    ReviewPolicy,
};
pub use client::{Client, Listener, Watch};
pub use clients::{ClientInfo, GrayMd5, HoldCounts, KeyClients, NodeClients};
pub use error::{ClientError, Result};
pub use format::Format;
pub use gray::{GrayRule, GrayVariant, BETA_GRAY_NAME};
pub use group::{GroupEvent, GroupWatch};
pub use key::{namespace_id, namespace_label, IntoKey, Key, DEFAULT_GROUP, PUBLIC_NAMESPACE};
pub use metrics::{MetricEvent, Metrics};
pub use options::{
    ClientBuilder, GroupWatchMode, ServerAddr, TokenPlacement, Transport, GRPC_PORT_OFFSET,
};
pub use rollouts::{
    NewRollout, PromGuard, Rollout, RolloutAction, RolloutCohort, RolloutNodeCohort, RolloutStage,
};
pub use schemas::{Schema, SchemaCheck, SchemaProblem};
pub use shared::{Change, Config, PublishOptions};
pub use users::{Permission, RoleGrant, User};
pub use webhooks::{Webhook, WebhookDelivery, WebhookSpec};
