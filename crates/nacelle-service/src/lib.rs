//! The config service: the one place that owns validation, the publish pipeline, the
//! in-memory cache and change notification. HTTP and gRPC adapters call it; it knows no
//! wire format and no database driver (it talks to [`nacelle_core::ConfigStore`]).
//!
//! # Layout
//! - [`service`]: [`ConfigService`], reads from memory, writes through the store.
//! - [`cluster`]: the read-only view of cluster members adapters show.
//! - [`follow`]: following the database's change log so no node stays stale.
//! - [`hub`]: [`WatchHub`], who listens to which key; a change touches only that key's
//!   subscribers.
//! - [`limits`]: the explicit limits (content size, listened keys, held polls).
//! - [`request`]: inputs of the service operations, built by adapters.

pub mod cluster;
pub mod follow;
pub mod hub;
pub mod limits;
pub mod request;
pub mod service;

pub use cluster::{MemberInfo, MemberState, MembershipView, NotifyCounts};
pub use follow::ChangeFollower;
pub use hub::{ChangeEvent, Subscriber, Subscription, WatchHub};
pub use limits::Limits;
pub use request::{PublishRequest, SearchMode, SearchQuery};
pub use service::{CommitObserver, ConfigService, NamespaceInfo};
