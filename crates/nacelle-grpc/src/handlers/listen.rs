//! `ConfigBatchListenRequest` → `ConfigChangeBatchListenResponse`.
//!
//! `listen: true` adds each key to the connection's service watch (the same index the HTTP
//! long polls use) and answers the keys whose md5 already differs; `listen: false`
//! unsubscribes. Keys are echoed with the tenant exactly as the client sent it. The key
//! limit and subscribe-then-compare are the service's.

use std::collections::HashSet;
use std::sync::Arc;

use nacelle_core::{Caller, ConfigKey, CoreError};

use nacelle_proto::config::{
    ConfigBatchListenRequest as BatchListenRequest, ConfigChangeBatchListenResponse, ConfigContext,
};
use nacelle_proto::{Payload, ResponseHead};

use crate::connection::Connection;
use crate::errors::fail_head;
use crate::wire::{self, key_of, RequestMeta};

pub(super) fn handle(
    conn: &Arc<Connection>,
    caller: &Caller,
    _meta: &RequestMeta,
    req: BatchListenRequest,
) -> Payload {
    let request_id = req.request_id.clone();
    match apply(conn, caller, req) {
        Ok(changed_configs) => wire::message(&ConfigChangeBatchListenResponse {
            head: ResponseHead::ok(request_id),
            changed_configs,
        }),
        Err(e) => wire::message(&ConfigChangeBatchListenResponse {
            head: fail_head(&e, request_id),
            changed_configs: Vec::new(),
        }),
    }
}

fn apply(
    conn: &Arc<Connection>,
    caller: &Caller,
    req: BatchListenRequest,
) -> Result<Vec<ConfigContext>, CoreError> {
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
            caller,
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
