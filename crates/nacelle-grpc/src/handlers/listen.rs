//! `ConfigBatchListenRequest` → `ConfigChangeBatchListenResponse`.
//!
//! `listen: true` subscribes the connection to each key in the shared hub (the same index
//! the HTTP long polls use) and answers the keys whose md5 already differs; `listen: false`
//! unsubscribes. Keys are echoed with the tenant exactly as the client sent it.

use std::collections::HashSet;
use std::sync::Arc;

use nacelle_core::{ConfigKey, CoreError};

use super::{fail_head, key_of, unparsable};
use crate::connection::Connection;
use crate::proto::Payload;
use crate::wire::{self, BatchListenFields, BatchListenRequest, ConfigContext};

pub(super) fn handle(conn: &Arc<Connection>, body: &[u8]) -> Payload {
    let req: BatchListenRequest = match wire::from_json(body) {
        Ok(r) => r,
        Err(e) => return unparsable(&e),
    };
    let request_id = req.request_id.clone();
    match apply(conn, req) {
        Ok(changed_configs) => wire::reply(
            wire::CONFIG_BATCH_LISTEN_RESPONSE,
            wire::Head::ok(request_id),
            BatchListenFields { changed_configs },
        ),
        Err(e) => wire::reply(
            wire::CONFIG_BATCH_LISTEN_RESPONSE,
            fail_head(&e, request_id),
            BatchListenFields {
                changed_configs: Vec::new(),
            },
        ),
    }
}

fn apply(conn: &Arc<Connection>, req: BatchListenRequest) -> Result<Vec<ConfigContext>, CoreError> {
    let listen = req.listen.unwrap_or(true);
    let contexts = req.config_listen_contexts.unwrap_or_default();
    // Validate every key before changing anything; the key limit is the service's.
    let mut items: Vec<(ConfigKey, ConfigContext, String)> = Vec::with_capacity(contexts.len());
    for c in contexts {
        let key = key_of(
            c.tenant.as_deref(),
            c.group.as_deref(),
            c.data_id.as_deref(),
        )?;
        let as_sent = ConfigContext {
            data_id: c.data_id.unwrap_or_default(),
            group: c.group.unwrap_or_default(),
            tenant: c.tenant.unwrap_or_default(),
        };
        items.push((key, as_sent, c.md5.unwrap_or_default()));
    }
    if !listen {
        for (key, _, _) in &items {
            conn.unlisten(key);
        }
        return Ok(Vec::new());
    }
    let changed: HashSet<ConfigKey> = conn
        .listen(
            items
                .iter()
                .map(|(key, as_sent, md5)| (key.clone(), as_sent.tenant.as_str(), md5.clone()))
                .collect(),
        )?
        .into_iter()
        .collect();
    Ok(items
        .into_iter()
        .filter(|(key, _, _)| changed.contains(key))
        .map(|(_, as_sent, _)| as_sent)
        .collect())
}
