//! The doors through which features take part in the config core's decisions without the
//! core knowing them: a feature implements a trait defined here and installs it on the
//! core once, at wiring. The core asks; the feature owns the state that answers.
//!
//! - [`ContentGate`]: content a publish would write is checked (the JSON Schemas).
//! - [`ReviewPolicies`]: the review policy governing a key, if any (the change requests'
//!   policies); the core refuses a direct write of a governed key.
//! - [`PeerQueries`]: the other cluster members' part of a live view (the cluster
//!   module, `crate::live`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use nacelle_api::clients::NodeClients;
use nacelle_core::change::ReviewPolicy;
use nacelle_core::{ConfigKey, ConfigType, CoreError};

/// The answer of a [`ContentGate`].
pub(crate) type GateFuture<'a> = Pin<Box<dyn Future<Output = Result<(), CoreError>> + Send + 'a>>;

/// Checks content before it is written (on the plaintext, for every variant and protocol).
pub(crate) trait ContentGate: Send + Sync + 'static {
    /// `Err(CoreError::Invalid)` naming the first problem when `content` may not be
    /// written to `key`.
    fn check<'a>(
        &'a self,
        key: &'a ConfigKey,
        config_type: ConfigType,
        content: &'a Bytes,
    ) -> GateFuture<'a>;
}

/// The review policies: which keys may be written only through a reviewed change.
pub(crate) trait ReviewPolicies: Send + Sync + 'static {
    /// The policy governing `key`, if any.
    fn policy_of(&self, key: &ConfigKey) -> Option<ReviewPolicy>;
}

/// The gates installed on one core; each at most once.
#[derive(Default)]
pub(crate) struct Gates {
    pub(crate) content: OnceLock<Arc<dyn ContentGate>>,
    pub(crate) review: OnceLock<Arc<dyn ReviewPolicies>>,
}

/// Asks the other cluster members for their part of a live view; implemented by the
/// cluster module, installed at wiring time (`ConfigService::set_peer_queries`).
pub trait PeerQueries: Send + Sync + 'static {
    /// Every other member's `NodeClients` for `key`; a member that cannot be asked is
    /// in the answer with its `error` set, never left out.
    fn clients_of(&self, key: &ConfigKey)
        -> Pin<Box<dyn Future<Output = Vec<NodeClients>> + Send>>;
}
