//! The config service: the one place that owns validation, the publish pipeline, the
//! in-memory cache, change notification and every decision about what a caller sees.
//! HTTP and gRPC adapters call it with a [`nacelle_core::Caller`]; it knows no wire format
//! and no database driver (it talks to [`nacelle_core::ConfigStore`]).
//!
//! # Layout
//! - [`service`]: [`ConfigService`] — shared state, loading, the readiness guard, wiring.
//! - `read`: get (variant-aware), search, the configs of a namespace — from memory.
//! - `write`: publish, remove, reload — through the store, then the cache and listeners.
//! - `history`, `namespaces`: history entries; namespaces and their rules.
//! - [`watch`]: listening as an operation ([`Watch`]): key limit, readiness,
//!   subscribe-then-compare.
//! - `hub` (private): who listens to which key; a change touches only that key's
//!   subscribers.
//! - `patterns` (private): who watches which group pattern (wildcard watches); a change
//!   checks only the patterns of its namespace and group.
//! - `cipher`: encrypted configs (`cipher-aes-…`): sealed on publish, revealed per
//!   protocol on read, data keys wrapped by the master key.
//! - `view`: [`ConfigView`], a config as one caller is shown it — what every read
//!   returns; a stored record never leaves the service.
//! - [`audit`]: the audit trail: events queued without waiting, appended in batches by
//!   one task; the administrators' [`audit::AuditTrail`] (list, range, verify).
//! - [`auth`]: authentication (credentials → identity, Nacos tokens, the login throttle),
//!   the one authorizer every operation calls, and the administration of users, roles and
//!   permissions.
//! - [`cluster`]: the read-only view of cluster members adapters show.
//! - [`follow`]: following the database's change log so no node stays stale.
//! - [`limits`]: the explicit limits (content size, listened keys, held polls).
//! - [`request`]: inputs of the service operations, built by adapters.
//! - [`transfer`]: export, import and clone — batches written in one transaction.
//! - [`changes`]: change requests (reviewed multi-key changes, published in one
//!   transaction) and the review policies that refuse direct writes.
//! - [`schemas`]: JSON Schemas of config keys, compiled in memory; every publish of a
//!   matching key is checked against them.
//! - [`webhooks`]: webhooks fed from the audit trail; durable deliveries claimed with a
//!   lease and sent with retries through the [`webhooks::WebhookTransport`] the server
//!   wires.
//! - [`rollouts`]: staged rollouts as operations (start, read, pause, resume, advance,
//!   abort); [`rollout_driver`]: the per-node task that publishes their steps under a
//!   database lease, evaluates their guards, rolls back and promotes.

pub mod audit;
pub mod auth;
mod batches;
pub mod changes;
mod cipher;
mod cipher_state;
pub mod cluster;
pub mod commit;
pub mod follow;
mod gates;
mod history;
mod hub;
mod key_map;
pub mod limits;
pub mod live;
mod namespaces;
mod patterns;
mod read;
pub mod request;
pub mod rollouts;
pub mod schemas;
pub mod service;
mod services;
pub mod transfer;
mod view;
pub mod watch;
pub mod webhooks;
mod write;

pub use changes::{ChangeInput, ChangeRequests, ChangeView, Changes, ItemDiff, ItemInput};
pub use cipher::CipherCensus;
pub use cluster::{MemberInfo, MemberState, MembershipView, NotifyCounts};
pub use commit::WriteKind;
pub use follow::ChangeFollower;
pub use history::HistoryLookupError;
pub use hub::{INLINE_WALK_MAX, WALK_CHUNK};
pub use limits::{HoldRefused, Limits, PollHold};
pub use live::PeerQueries;
pub use namespaces::{NamespaceError, NamespaceInfo, Namespaces};
pub use read::{Beta, GrayView, Served};
pub use request::{PublishRequest, SearchMode, SearchQuery, WriteNote};
pub use rollouts::{
    CohortProgress, DriverConfig, GuardProbe, NodeCohort, ProbeFuture, RolloutInput, RolloutOps,
    Rollouts,
};
pub use schemas::{SchemaCheck, SchemaProblem, SchemaSpec, Schemas};
pub use service::{CommitObserver, ConfigService};
pub use services::{Background, Services};
pub use transfer::{
    CloneItem, ExportQuery, ImportItem, ImportReport, NamedConfig, TransferError, MAX_BATCH_CONFIGS,
};
pub use view::{ConfigView, Published};
pub use watch::{
    Added, ChangeEvent, GroupChange, GroupSubscriber, ListenerView, Listeners, PatternError,
    PatternWatched, Subscriber, Watch, WatchItem,
};
pub use webhooks::{
    WebhookAdmin, WebhookPost, WebhookSpec, WebhookTransport, WebhookView, Webhooks,
};
