//! Member-to-member messages (Nacos's cluster port, HTTP port + 1001): a member that
//! committed a change tells the others which key changed, and they reload it.
//!
//! The call is a unary `/Request/request` like any other; how a member proves it is one
//! (Nacelle: a secret in `metadata.headers`) is the server's business, not the wire's.

use std::collections::BTreeMap;

use crate::config::MODULE_CONFIG;
use crate::{lenient, messages, server_request, types};

pub use crate::response::ConfigChangeClusterSyncResponse;

server_request! {
    /// `ConfigChangeClusterSyncRequest`, as Nacos 2.x writes it: `lastModified` a number,
    /// `beta` a bool, `tag` only when there is one. `beta` is also read from the string form
    /// (`"Y"`) of later versions. The receiver reloads the whole key, so `lastModified`,
    /// `beta` and `tag` are informational. Its `module` is `config`.
    pub struct ConfigChangeClusterSyncRequest {
        /// The changed config's data id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub data_id: Option<String>,
        /// Its group.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub group: Option<String>,
        /// Its namespace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tenant: Option<String>,
        /// When it changed, ms since the epoch.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub last_modified: i64,
        /// Whether the beta (gray) variant changed.
        #[serde(default, deserialize_with = "lenient::flag")]
        pub beta: bool,
        /// The tagged variant that changed, if one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tag: Option<String>,
    }
}

impl ConfigChangeClusterSyncRequest {
    /// The formal config `(data_id, group, tenant)` changed at `last_modified`.
    pub fn new(
        request_id: impl Into<String>,
        data_id: &str,
        group: &str,
        tenant: &str,
        last_modified: i64,
    ) -> Self {
        ConfigChangeClusterSyncRequest {
            request_id: Some(request_id.into()),
            headers: BTreeMap::new(),
            module: MODULE_CONFIG.to_string(),
            data_id: Some(data_id.to_string()),
            group: Some(group.to_string()),
            tenant: Some(tenant.to_string()),
            last_modified,
            beta: false,
            tag: None,
        }
    }
}

messages! {
    ConfigChangeClusterSyncRequest => types::CONFIG_CHANGE_CLUSTER_SYNC_REQUEST,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_as_nacos_2_writes_it_and_read_back() {
        let req = ConfigChangeClusterSyncRequest::new("3", "d", "G", "", 5);
        let json = serde_json::to_string(&req).expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"3","headers":{},"module":"config","dataId":"d","group":"G","tenant":"","lastModified":5,"beta":false}"#
        );
        let back: ConfigChangeClusterSyncRequest = serde_json::from_str(&json).expect("back");
        assert_eq!(back, req);
        let tagged = ConfigChangeClusterSyncRequest {
            tag: Some("t1".into()),
            beta: true,
            ..req
        };
        let json = serde_json::to_vec(&tagged).expect("json");
        assert_eq!(
            serde_json::from_slice::<ConfigChangeClusterSyncRequest>(&json).expect("back"),
            tagged
        );
    }

    #[test]
    fn read_as_java_nacos_writes_it() {
        let r: ConfigChangeClusterSyncRequest = serde_json::from_str(
            r#"{"headers":{},"requestId":"r1","dataId":"d","group":"G","tenant":"t",
                "tag":"","lastModified":0,"beta":true,"module":"config","isBatch":false}"#,
        )
        .expect("parses");
        assert_eq!(r.request_id.as_deref(), Some("r1"));
        assert_eq!(r.tenant.as_deref(), Some("t"));
        assert_eq!((r.last_modified, r.beta), (0, true));
        // The string form of later versions, and nulls.
        let r: ConfigChangeClusterSyncRequest =
            serde_json::from_str(r#"{"dataId":"d","group":"G","beta":"Y","lastModified":null}"#)
                .expect("parses");
        assert_eq!(r.data_id.as_deref(), Some("d"));
        assert!(r.beta);
        let r: ConfigChangeClusterSyncRequest =
            serde_json::from_str(r#"{"dataId":"d","beta":3}"#).expect("parses");
        assert!(!r.beta);
    }
}
