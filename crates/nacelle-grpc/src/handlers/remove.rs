//! `ConfigRemoveRequest` → `ConfigRemoveResponse` (success also when nothing was stored).

use super::{fail_head, key_of, unparsable};
use crate::connection::Connection;
use crate::proto::Payload;
use crate::server::Ctx;
use crate::wire::{self, RemoveRequest};

pub(super) async fn handle(ctx: &Ctx, conn: &Connection, body: &[u8]) -> Payload {
    let req: RemoveRequest = match wire::from_json(body) {
        Ok(r) => r,
        Err(e) => return unparsable(&e),
    };
    let result = match key_of(
        req.tenant.as_deref(),
        req.group.as_deref(),
        req.data_id.as_deref(),
    ) {
        Ok(key) => {
            ctx.service
                .remove(&conn.meta.caller, &key, req.tag.as_deref(), "")
                .await
        }
        Err(e) => Err(e),
    };
    let head = match result {
        Ok(_) => wire::Head::ok(req.request_id),
        Err(e) => fail_head(&e, req.request_id),
    };
    wire::reply(wire::CONFIG_REMOVE_RESPONSE, head, wire::NoFields {})
}
