//! The live view of who runs what (docs/live-view.md): for one key, every client that
//! listens to it and the md5 it holds, measured against the formal config and each gray
//! variant, on this node ([`Listeners::clients_of_key`]) and across the cluster
//! ([`ConfigService::key_clients`], which asks the other members through the
//! [`PeerQueries`] the cluster module installs).

use nacelle_api::clients::{
    ClientInfo, GrayMd5, HoldCounts, KeyClients, NodeClients, HOLDS_FORMAL, HOLDS_GRAY_PREFIX,
    HOLDS_UNKNOWN,
};
use nacelle_core::{Action, ConfigKey, CoreError};

pub use crate::config::gates::PeerQueries;
use crate::config::service::ConfigService;
use crate::config::watch::Listeners;

/// The md5s a key has now: its formal config's and each gray's.
struct Versions {
    formal: String,
    grays: Vec<GrayMd5>,
}

impl Versions {
    /// What holding `md5` means: the formal config, a gray, or neither. The formal config
    /// wins when a gray has the same content.
    fn holds(&self, md5: &str) -> String {
        if md5.is_empty() {
            return HOLDS_UNKNOWN.to_string();
        }
        if md5 == self.formal {
            return HOLDS_FORMAL.to_string();
        }
        match self.grays.iter().find(|g| g.md5 == md5) {
            Some(g) => format!("{HOLDS_GRAY_PREFIX}{}", g.name),
            None => HOLDS_UNKNOWN.to_string(),
        }
    }
}

impl ConfigService {
    fn versions_of(&self, key: &ConfigKey) -> Versions {
        let formal = self
            .inner
            .cache
            .get(key)
            .map(|e| e.value().md5.clone())
            .unwrap_or_default();
        let grays = self
            .inner
            .grays
            .get(key)
            .map(|set| {
                set.iter()
                    .map(|g| GrayMd5 {
                        name: g.name.to_string(),
                        md5: g.config.md5.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Versions { formal, grays }
    }

    /// This node's address as the cluster knows it; `"local"` when it runs alone.
    fn own_address(&self) -> String {
        self.members()
            .and_then(|ms| ms.into_iter().find(|m| m.is_self))
            .map(|m| m.address())
            .unwrap_or_else(|| "local".to_string())
    }
}

impl Listeners<'_> {
    /// The live view of `key` across the cluster: this node's clients, then every other
    /// member's (asked at once; one that cannot be asked is shown with its error), with
    /// the counts summed. Needs read permission on the key.
    pub async fn key_clients(&self, key: &ConfigKey) -> Result<KeyClients, CoreError> {
        let local = self.clients_of_key(key)?;
        let peers = self.service.inner.peer_queries.get().cloned();
        let mut nodes = vec![local];
        if let Some(peers) = peers {
            nodes.extend(peers.clients_of(key).await);
        }
        let versions = self.service.versions_of(key);
        let mut view = KeyClients {
            namespace: key.tenant().to_string(),
            group: key.group().to_string(),
            data_id: key.data_id().to_string(),
            formal_md5: versions.formal,
            grays: versions.grays,
            nodes,
            ..Default::default()
        };
        view.sum();
        Ok(view)
    }
    /// This node's part of the live view of `key`: each listening client, what it holds
    /// (formal, a gray, or unknown), what it would be served, since when; and the counts.
    pub fn clients_of_key(&self, key: &ConfigKey) -> Result<NodeClients, CoreError> {
        let service = self.service;
        service.authorize_key(self.caller, key, Action::Read)?;
        let versions = service.versions_of(key);
        let mut counts = HoldCounts::default();
        let mut clients: Vec<ClientInfo> = service
            .inner
            .hub
            .held_of(key)
            .into_iter()
            .map(|h| {
                let view = service.listener_view(key.clone(), h.caller, &h.md5);
                let holds = versions.holds(&view.held_md5);
                counts.count(&holds);
                ClientInfo {
                    ip: view.listener.ip_string(),
                    reported_ip: view
                        .listener
                        .reported_ip
                        .map(|ip| ip.to_string())
                        .unwrap_or_default(),
                    app: view.listener.app_name.as_deref().unwrap_or("").to_string(),
                    protocol: view.listener.protocol.as_str().to_string(),
                    labels: view
                        .listener
                        .labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    held_md5: view.held_md5,
                    holds,
                    served_md5: view.served_md5,
                    served_gray: view.gray.map(|g| g.to_string()),
                    in_sync: view.in_sync,
                    since: h.since_ms,
                }
            })
            .collect();
        clients.sort_by(|a, b| (&a.ip, &a.protocol, a.since).cmp(&(&b.ip, &b.protocol, b.since)));
        Ok(NodeClients {
            node: service.own_address(),
            is_self: true,
            error: None,
            counts,
            clients,
        })
    }
}
