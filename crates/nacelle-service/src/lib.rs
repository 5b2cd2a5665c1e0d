//! The config service: the one place that owns validation, the commit path, the
//! in-memory cache, change notification and every decision about what a caller sees.
//! HTTP and gRPC adapters call it with a [`nacelle_core::Caller`]; it knows no database
//! driver (it talks to the store's role traits).
//!
//! # Layout
//! Two levels: the config core, and features around it that own their state.
//!
//! - `config/` — the core, [`ConfigService`] (`config/service.rs`: state, load, the
//!   readiness guard). Its operations one concern per file: `read` (get, search, from
//!   memory), `write` (publish, remove, gray, metadata, reload), `commit` (the one commit
//!   path: locks → store → cache → unlock → notify → cluster, audit), `transfer` (export,
//!   import, clone), `history`, `namespaces`, [`watch`] (listening; `hub` and `patterns`
//!   say who listens to what), `cipher` (encrypted configs), `view` ([`ConfigView`]: what
//!   reads return), [`auth`] (identity, tokens, the one authorizer, user administration),
//!   `audit` (the log every operation records in), [`follow`] (the database's change
//!   log), [`live`] (the live view), [`cluster`], [`limits`], [`request`]. `gates` holds
//!   the traits through which features take part in the core's decisions. Nothing in
//!   `config/` imports a feature.
//! - Features, each a component over the core's handle, built and wired by [`Services`]:
//!   [`changes`] ([`ChangeRequests`]: reviewed multi-key changes, the review policies),
//!   [`schemas`] ([`Schemas`]: JSON Schemas every publish is checked against),
//!   [`webhooks`] ([`Webhooks`]: fed from the audit log, durable deliveries),
//!   [`rollouts`] ([`Rollouts`]: staged rollouts and their per-node driver), [`audit`]
//!   (the appender that stores the log, and the administrators' [`audit::AuditTrail`]).

pub mod audit;
pub mod changes;
mod config;
pub mod rollouts;
pub mod schemas;
mod services;
pub mod webhooks;

pub use config::{auth, cluster, commit, follow, limits, live, request, service, transfer, watch};

pub use audit::Audit;
pub use changes::{ChangeInput, ChangeRequests, ChangeView, Changes, ItemDiff, ItemInput};
pub use config::cipher::CipherCensus;
pub use config::cluster::{MemberInfo, MemberState, MembershipView, NotifyCounts};
pub use config::commit::WriteKind;
pub use config::follow::ChangeFollower;
pub use config::history::HistoryLookupError;
pub use config::hub::{INLINE_WALK_MAX, WALK_CHUNK};
pub use config::limits::{HoldRefused, Limits, PollHold};
pub use config::live::PeerQueries;
pub use config::namespaces::{NamespaceError, NamespaceInfo, Namespaces};
pub use config::read::{Beta, GrayView, Served};
pub use config::replication::Replication;
pub use config::request::{PublishRequest, SearchMode, SearchQuery, WriteNote};
pub use config::service::{CommitObserver, ConfigService};
pub use config::transfer::{
    CloneItem, ExportQuery, ImportItem, ImportReport, NamedConfig, TransferError, MAX_BATCH_CONFIGS,
};
pub use config::view::{ConfigView, Published};
pub use config::watch::{
    Added, ChangeEvent, GroupChange, GroupSubscriber, ListenerView, Listeners, PatternError,
    PatternWatched, Subscriber, Watch, WatchItem,
};
pub use rollouts::{
    CohortProgress, DriverConfig, GuardProbe, NodeCohort, ProbeFuture, RolloutInput, RolloutOps,
    Rollouts,
};
pub use schemas::{SchemaCheck, SchemaProblem, SchemaSpec, Schemas};
pub use services::{Background, Services};
pub use webhooks::{
    WebhookAdmin, WebhookPost, WebhookSpec, WebhookTransport, WebhookView, Webhooks,
};
