//! `ConfigQueryRequest` → `ConfigQueryResponse`, served from memory.

use nacelle_core::{Caller, CoreError};
use nacelle_proto::config::{ConfigQueryRequest as QueryRequest, ConfigQueryResponse};
use nacelle_proto::error_code::CONFIG_NOT_EXIST;
use nacelle_proto::{Payload, ResponseHead};
use nacelle_service::Served;

use crate::ctx::Ctx;
use crate::errors::fail_head;
use crate::wire::{self, key_of, RequestMeta};

/// The header a Nacos client sets to `true` on a query made because of a change push.
const NOTIFY_HEADER: &str = "notify";

pub(super) fn handle(ctx: &Ctx, caller: &Caller, meta: &RequestMeta, req: QueryRequest) -> Payload {
    tracing::trace!(
        data_id = ?req.data_id,
        group = ?req.group,
        tenant = ?req.tenant,
        notify = meta.header(NOTIFY_HEADER),
        "config query"
    );
    // What a gRPC caller gets of an encrypted config (its ciphertext and data key) is the
    // service's choice, made in the view it returns.
    match lookup(ctx, caller, &req) {
        Ok(Served {
            config: cfg, beta, ..
        }) => wire::message(&ConfigQueryResponse {
            head: ResponseHead::ok(req.request_id),
            content: Some(cfg.content_text().into_owned()),
            encrypted_data_key: Some(cfg.encrypted_data_key().to_string()),
            content_type: Some(cfg.config_type().as_str().to_string()),
            md5: Some(cfg.md5().to_string()),
            last_modified: cfg.modified_ms(),
            beta,
        }),
        Err(e) => wire::message(&ConfigQueryResponse::failed(fail_head(&e, req.request_id))),
    }
}

fn lookup(ctx: &Ctx, caller: &Caller, req: &QueryRequest) -> Result<Served, CoreError> {
    let key = key_of(
        req.tenant.as_deref(),
        req.group.as_deref(),
        req.data_id.as_deref(),
    )?;
    ctx.service
        .get(caller, &key, req.tag.as_deref())?
        .ok_or_else(|| CoreError::NotFound(CONFIG_NOT_EXIST.into()))
}
