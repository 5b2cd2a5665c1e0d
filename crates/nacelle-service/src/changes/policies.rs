//! The review policies a node holds in memory: read at load, after each local change and
//! every `POLICY_REFRESH` on a shared database; asked by the config core before every
//! direct write ([`ReviewPolicies`]).

use std::sync::Arc;

use nacelle_core::change::ReviewPolicy;
use nacelle_core::ConfigKey;
use parking_lot::RwLock;

use crate::config::gates::ReviewPolicies;

#[derive(Default)]
pub(crate) struct PolicyState {
    pub(crate) list: RwLock<Arc<Vec<ReviewPolicy>>>,
}

impl ReviewPolicies for PolicyState {
    /// The policy that covers `key` and asks the most approvals, if any.
    fn policy_of(&self, key: &ConfigKey) -> Option<ReviewPolicy> {
        self.list
            .read()
            .iter()
            .filter(|p| p.required_approvals > 0 && p.covers(key))
            .max_by_key(|p| p.required_approvals)
            .cloned()
    }
}
