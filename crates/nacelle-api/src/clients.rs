//! The live view of who runs what (docs/live-view.md): for one key, every client that
//! listens to it on each node of a cluster, the md5 each holds, and how many hold the
//! formal config, each gray variant or something else. The server builds it (each node its
//! own part, the node asked gathers the others'), clients and the CLI read it; the JSON is
//! the `data` of `GET /nacos/nacelle/v1/clients`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a client holds, measured against what the server has for the key now.
pub const HOLDS_FORMAL: &str = "formal";
/// Prefix of [`ClientInfo::holds`] for a gray variant: `gray:<name>`.
pub const HOLDS_GRAY_PREFIX: &str = "gray:";
/// The client holds an md5 that is neither the formal config's nor a gray's (an old
/// version, a config it never received, or a key that has no content).
pub const HOLDS_UNKNOWN: &str = "unknown";

/// A gray variant of the key and its md5.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrayMd5 {
    pub name: String,
    pub md5: String,
}

/// How many clients hold what.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldCounts {
    /// Clients holding the formal config's md5.
    pub formal: u64,
    /// Gray name → clients holding that gray's md5.
    pub grays: BTreeMap<String, u64>,
    /// Clients holding any other md5.
    pub unknown: u64,
    /// Every listening client.
    pub total: u64,
}

impl HoldCounts {
    /// Counts one client by its [`ClientInfo::holds`].
    pub fn count(&mut self, holds: &str) {
        self.total += 1;
        if holds == HOLDS_FORMAL {
            self.formal += 1;
        } else if let Some(name) = holds.strip_prefix(HOLDS_GRAY_PREFIX) {
            *self.grays.entry(name.to_string()).or_default() += 1;
        } else {
            self.unknown += 1;
        }
    }

    /// Adds another node's counts to these.
    pub fn add(&mut self, other: &HoldCounts) {
        self.formal += other.formal;
        self.unknown += other.unknown;
        self.total += other.total;
        for (name, n) in &other.grays {
            *self.grays.entry(name.clone()).or_default() += n;
        }
    }
}

/// One listening client of the key on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    /// The client's IP as the server trusts it (`""` when unknown).
    pub ip: String,
    /// The IP the client reports about itself, the one gray rules match (`""` when it
    /// reports none; then they match `ip`). Absent from the answers of older nodes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reported_ip: String,
    /// The application name it reported.
    pub app: String,
    /// `grpc`, `http-v1`, …
    pub protocol: String,
    /// The labels it sent (gRPC connection labels).
    pub labels: BTreeMap<String, String>,
    /// The md5 it holds: what it reported, then what it was last told of.
    pub held_md5: String,
    /// [`HOLDS_FORMAL`], `gray:<name>` or [`HOLDS_UNKNOWN`].
    pub holds: String,
    /// The md5 the server would serve it now (`""`: nothing).
    pub served_md5: String,
    /// The gray variant it would be served, `None` for the formal config.
    pub served_gray: Option<String>,
    /// Whether what it holds is what it would be served.
    pub in_sync: bool,
    /// Since when it holds `held_md5` (ms since the epoch): when it began listening with
    /// that md5 or was last told of a change. A long-polling client's watch lasts one
    /// poll, so its `since` is the start of its current poll.
    pub since: i64,
}

/// One node's part of the view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClients {
    /// The node's address (`ip:port` of its HTTP API).
    pub node: String,
    /// Whether it is the node that answered the request.
    #[serde(rename = "self")]
    pub is_self: bool,
    /// Why the node could not be asked (its clients are then unknown); `None` when it
    /// answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub counts: HoldCounts,
    pub clients: Vec<ClientInfo>,
}

/// The whole view of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyClients {
    pub namespace: String,
    pub group: String,
    pub data_id: String,
    /// The formal config's md5 (`""` when there is none).
    pub formal_md5: String,
    /// The key's gray variants, in priority order.
    pub grays: Vec<GrayMd5>,
    /// Every node's part, the answering node first.
    pub nodes: Vec<NodeClients>,
    /// The sum over the nodes that answered.
    pub total: HoldCounts,
    /// Whether every node answered (else `total` counts only those that did).
    pub complete: bool,
}

impl KeyClients {
    /// Recomputes `total` and `complete` from `nodes`.
    pub fn sum(&mut self) {
        let mut total = HoldCounts::default();
        for n in &self.nodes {
            total.add(&n.counts);
        }
        self.total = total;
        self.complete = self.nodes.iter().all(|n| n.error.is_none());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_what_is_held_and_sums_nodes() {
        let mut a = HoldCounts::default();
        for h in ["formal", "gray:canary", "gray:canary", "unknown", "formal"] {
            a.count(h);
        }
        assert_eq!((a.formal, a.unknown, a.total), (2, 1, 5));
        assert_eq!(a.grays.get("canary"), Some(&2));
        let mut view = KeyClients {
            nodes: vec![
                NodeClients {
                    counts: a.clone(),
                    ..Default::default()
                },
                NodeClients {
                    counts: a,
                    ..Default::default()
                },
                NodeClients {
                    error: Some("timed out".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        view.sum();
        assert_eq!((view.total.formal, view.total.total), (4, 10));
        assert_eq!(view.total.grays.get("canary"), Some(&4));
        assert!(!view.complete);
        let json = serde_json::to_value(&view.nodes[2]).expect("json");
        assert_eq!(json["self"], false);
        assert_eq!(json["error"], "timed out");
    }
}
