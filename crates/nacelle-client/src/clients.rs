//! The live view of who runs what (`GET /nacos/nacelle/v1/clients`, docs/live-view.md):
//! every client listening to a key on each node of the cluster, the md5 it holds and
//! since when, counted as formal, per gray, or unknown. The answer's types are the wire
//! types of `nacelle-proto`, shared with the server.

pub use nacelle_api::clients::{ClientInfo, GrayMd5, HoldCounts, KeyClients, NodeClients};

use crate::admin::Admin;
use crate::error::{ClientError, Result};
use crate::key::IntoKey;

impl Admin {
    /// Who runs what for `key`, across the cluster (every member asked; one that did not
    /// answer is listed with its error and `complete` is false).
    pub async fn clients(&self, key: impl IntoKey) -> Result<KeyClients> {
        let key = self.client().key(key);
        let data = self
            .send_v2("clients", &|http, base| {
                http.get(format!("{base}/nacelle/v1/clients")).query(&[
                    ("namespaceId", key.namespace.as_str()),
                    ("groupName", key.group.as_str()),
                    ("dataId", key.data_id.as_str()),
                ])
            })
            .await?;
        serde_json::from_value(data).map_err(|e| ClientError::Protocol(format!("clients: {e}")))
    }
}
