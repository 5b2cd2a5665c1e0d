//! The JSON Schemas a node holds, compiled (`crate::schemas` are the operations on them),
//! apart from those operations, so that `service.rs` can hold them without depending on
//! them.

use std::collections::HashMap;
use std::sync::Arc;

use nacelle_core::pattern::Part;
use nacelle_core::{ConfigKey, NamespaceId, SchemaRecord};
use parking_lot::RwLock;

/// One schema, compiled.
pub(crate) struct Compiled {
    pub(crate) record: SchemaRecord,
    pub(crate) name: String,
    pub(crate) group: Part,
    pub(crate) data_id: Part,
    pub(crate) validator: jsonschema::Validator,
}

impl Compiled {
    pub(crate) fn covers(&self, key: &ConfigKey) -> bool {
        self.group.matches(key.group()) && self.data_id.matches(key.data_id())
    }
}

/// The schemas a node holds: by namespace, in (group, dataId) pattern order.
#[derive(Default)]
pub(crate) struct SchemaState {
    pub(crate) current: RwLock<Arc<HashMap<NamespaceId, Vec<Arc<Compiled>>>>>,
    /// One re-read at a time, so an older read never replaces a newer one.
    pub(crate) refresh: tokio::sync::Mutex<()>,
}
