//! `ConfigBatchListenRequest` → `ConfigChangeBatchListenResponse`.
//!
//! `listen: true` subscribes the connection to each key in the shared hub (the same index
//! the HTTP long polls use) and answers the keys whose md5 already differs; `listen: false`
//! unsubscribes. Keys are echoed with the tenant exactly as the client sent it.

use std::sync::Arc;

use nacelle_core::{ConfigKey, CoreError};

use nacelle_proto::config::{
    ConfigBatchListenRequest as BatchListenRequest, ConfigChangeBatchListenResponse, ConfigContext,
};
use nacelle_proto::{Payload, ResponseHead};

use crate::connection::Connection;
use crate::ctx::Ctx;
use crate::errors::{fail_head, unparsable};
use crate::wire::{self, key_of, RequestMeta};

pub(super) fn handle(
    ctx: &Ctx,
    conn: &Arc<Connection>,
    _meta: &RequestMeta,
    body: &[u8],
) -> Payload {
    let req: BatchListenRequest = match wire::from_json(body) {
        Ok(r) => r,
        Err(e) => return unparsable(&e),
    };
    let request_id = req.request_id.clone();
    match apply(ctx, conn, req) {
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
    ctx: &Ctx,
    conn: &Arc<Connection>,
    req: BatchListenRequest,
) -> Result<Vec<ConfigContext>, CoreError> {
    let listen = req.listen.unwrap_or(true);
    let contexts = req.config_listen_contexts.unwrap_or_default();
    let max = ctx.service.limits().max_listen_keys;
    if contexts.len() > max {
        return Err(CoreError::invalid(format!(
            "too many configs in one listen request, over {max}"
        )));
    }
    // Validate everything before changing anything.
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
    let mut changed = Vec::new();
    for (key, as_sent, md5) in items {
        if listen {
            // Subscribe first, then compare: a change landing in between is pushed.
            conn.listen(key.clone(), &as_sent.tenant, md5.clone())?;
            if ctx.service.md5_of(&key) != md5 {
                changed.push(as_sent);
            }
        } else {
            conn.unlisten(&key);
        }
    }
    Ok(changed)
}
