//! `ConfigRemoveRequest` → `ConfigRemoveResponse` (success also when nothing was stored).

use nacelle_proto::config::ConfigRemoveRequest as RemoveRequest;
use nacelle_proto::response::ConfigRemoveResponse;
use nacelle_proto::{Payload, ResponseHead};
use nacelle_service::WriteNote;

use crate::ctx::Ctx;
use crate::errors::fail_head;
use crate::wire::{self, key_of, RequestMeta};
use nacelle_core::Caller;

pub(super) async fn handle(
    ctx: &Ctx,
    caller: &Caller,
    _meta: &RequestMeta,
    req: RemoveRequest,
) -> Payload {
    let result = match key_of(
        req.tenant.as_deref(),
        req.group.as_deref(),
        req.data_id.as_deref(),
    ) {
        Ok(key) => {
            ctx.service
                .remove(caller, &key, req.tag.as_deref(), &WriteNote::default())
                .await
        }
        Err(e) => Err(e),
    };
    let head = match result {
        Ok(_) => ResponseHead::ok(req.request_id),
        Err(e) => fail_head(&e, req.request_id),
    };
    wire::message(&ConfigRemoveResponse { head })
}
