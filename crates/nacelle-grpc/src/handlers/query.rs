//! `ConfigQueryRequest` → `ConfigQueryResponse`, served from memory.

use nacelle_core::CoreError;
use nacelle_service::Served;

use super::{fail_head, key_of, unparsable};
use crate::connection::Connection;
use crate::errors::CONFIG_NOT_EXIST;
use crate::proto::Payload;
use crate::server::Ctx;
use crate::wire::{self, QueryFields, QueryRequest};

pub(super) fn handle(ctx: &Ctx, conn: &Connection, body: &[u8]) -> Payload {
    let req: QueryRequest = match wire::from_json(body) {
        Ok(r) => r,
        Err(e) => return unparsable(&e),
    };
    match lookup(ctx, conn, &req) {
        Ok(Served {
            config: cfg, beta, ..
        }) => wire::reply(
            wire::CONFIG_QUERY_RESPONSE,
            wire::Head::ok(req.request_id),
            QueryFields {
                content: Some(String::from_utf8_lossy(&cfg.content).into_owned()),
                encrypted_data_key: Some(cfg.meta.encrypted_data_key.clone()),
                content_type: Some(cfg.config_type.as_str().to_string()),
                md5: Some(cfg.md5.clone()),
                last_modified: cfg.modified_ms,
                beta,
            },
        ),
        Err(e) => wire::reply(
            wire::CONFIG_QUERY_RESPONSE,
            fail_head(&e, req.request_id),
            QueryFields {
                content: None,
                encrypted_data_key: None,
                content_type: None,
                md5: None,
                last_modified: 0,
                beta: false,
            },
        ),
    }
}

fn lookup(ctx: &Ctx, conn: &Connection, req: &QueryRequest) -> Result<Served, CoreError> {
    let key = key_of(
        req.tenant.as_deref(),
        req.group.as_deref(),
        req.data_id.as_deref(),
    )?;
    ctx.service
        .get(&conn.meta.caller, &key, req.tag.as_deref())?
        .ok_or_else(|| CoreError::NotFound(CONFIG_NOT_EXIST.into()))
}
