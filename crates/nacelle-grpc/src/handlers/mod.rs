//! Unary requests (`/Request/request`): the checks every request goes through, then one
//! handler per request type, chosen by `metadata.type`.
//!
//! Order of checks, as Nacos does them: server not ready → 300; `ServerCheckRequest` is
//! answered before any registration; unknown type → 302; connection not registered → 301;
//! unparsable body → 502 (before the handler: each takes its request typed).
//!
//! Every handler receives its request parsed, and the request's [`RequestMeta`]: its type, the client IP the client
//! reported and the headers of `metadata.headers` (`accessToken`, `app`, …).

mod fuzzy;
mod health;
mod listen;
mod publish;
mod query;
mod remove;

use std::borrow::Cow;

use nacelle_core::Caller;
use nacelle_proto::{types, Payload};
use nacelle_service::auth::Credentials;

use crate::ctx::Ctx;
use crate::errors::{error_response, unparsable, WireError};
use crate::tcp::ConnTag;
use crate::wire::{self, RequestMeta};

/// The request types served on `/Request/request` besides `ServerCheckRequest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    HealthCheck,
    Query,
    Publish,
    Remove,
    BatchListen,
    FuzzyWatch,
}

impl Kind {
    fn of(type_name: &str) -> Option<Kind> {
        Some(match type_name {
            types::HEALTH_CHECK_REQUEST => Kind::HealthCheck,
            types::CONFIG_QUERY_REQUEST => Kind::Query,
            types::CONFIG_PUBLISH_REQUEST => Kind::Publish,
            types::CONFIG_REMOVE_REQUEST => Kind::Remove,
            types::CONFIG_BATCH_LISTEN_REQUEST => Kind::BatchListen,
            types::CONFIG_FUZZY_WATCH_REQUEST => Kind::FuzzyWatch,
            _ => return None,
        })
    }
}

/// Answers one unary request. Never fails: every error is a Nacos error response.
pub(crate) async fn unary(ctx: &Ctx, tag: Option<&ConnTag>, payload: Payload) -> Payload {
    let (meta, body) = RequestMeta::take(payload);
    let body = &body[..];
    let type_name = meta.type_name.as_str();
    // Header names only: values may be credentials (`accessToken`).
    tracing::debug!(
        conn = tag.map(|t| &*t.id),
        type_name,
        client_ip = meta.client_ip,
        headers = ?meta.header_names(),
        "gRPC request"
    );
    if !ctx.service.is_ready() {
        return error_response(&WireError::not_ready(), wire::request_id_of(body));
    }
    if type_name == types::SERVER_CHECK_REQUEST {
        let id = tag.map(|t| t.id.to_string()).unwrap_or_default();
        return health::server_check(&meta, id, wire::request_id_of(body));
    }
    let Some(kind) = Kind::of(type_name) else {
        tracing::debug!(type_name, "no handler for gRPC request type");
        return error_response(&WireError::no_handler(), wire::request_id_of(body));
    };
    let Some(conn) = tag.and_then(|t| ctx.registry.get(&t.id)) else {
        return error_response(&WireError::unregistered(), wire::request_id_of(body));
    };
    conn.touch();
    if kind == Kind::HealthCheck {
        return health::health_check(&meta, body);
    }
    let caller = request_caller(ctx, &conn.meta.caller, &meta).await;
    // The write handlers' futures hold the service's whole write path (store calls
    // included): boxed, so that they do not size this future, which every call moves
    // several times (into its task, through `observe`) — a query's included.
    // Each handler takes its request typed: an unparsable body is answered here with
    // error code 502 (Nacos's for a request it cannot read), the handler not called.
    let unparsable = |e: serde_json::Error| unparsable(&e);
    match kind {
        Kind::HealthCheck => health::health_check(&meta, body),
        Kind::Query => {
            wire::from_json(body).map_or_else(unparsable, |r| query::handle(ctx, &caller, &meta, r))
        }
        Kind::Publish => match wire::from_json(body) {
            Ok(r) => Box::pin(publish::handle(ctx, &caller, &meta, r)).await,
            Err(e) => unparsable(e),
        },
        Kind::Remove => match wire::from_json(body) {
            Ok(r) => Box::pin(remove::handle(ctx, &caller, &meta, r)).await,
            Err(e) => unparsable(e),
        },
        Kind::BatchListen => wire::from_json(body)
            .map_or_else(unparsable, |r| listen::handle(&conn, &caller, &meta, r)),
        Kind::FuzzyWatch => wire::from_json(body)
            .map_or_else(unparsable, |r| fuzzy::handle(&conn, &caller, &meta, r)),
    }
}

/// The caller of one request: the connection's, with the identity of the credentials in
/// this request's `metadata.headers` (`accessToken`, else `username` + `password`, as
/// Nacos reads them), which the service verifies.
async fn request_caller<'a>(ctx: &Ctx, conn: &'a Caller, meta: &RequestMeta) -> Cow<'a, Caller> {
    if !ctx.service.access().enabled() {
        return Cow::Borrowed(conn);
    }
    let header = |name: &str| {
        meta.header(name)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let creds = Credentials {
        token: header("accessToken"),
        username: header("username"),
        password: header("password"),
    };
    let mut caller = conn.clone();
    // Boxed for the reason the write handlers are (identification may read the store);
    // only a server with authentication on pays the allocation.
    caller.identity = Box::pin(ctx.service.access().identify(&creds, conn)).await;
    Cow::Owned(caller)
}
