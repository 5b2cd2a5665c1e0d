//! One bi-stream (`/BiRequestStream/requestBiStream`), from `ConnectionSetupRequest` to
//! unregistration.
//!
//! The session task owns the inbound half: it registers the connection on setup (or
//! answers `ConnectResetRequest` when a limit is reached, and ends the stream when the
//! server is stopping), matches the client's responses
//! to pushes and probes, and unregisters the connection when the stream ends, fails, or the
//! server closes it. Timing out and retrying unacknowledged pushes is the push sweeper's
//! job (see `server`).

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use nacelle_core::{Caller, Labels, Protocol, TrustedProxies};
use nacelle_proto::connection::{ConnectionSetupRequest, SetupAckRequest, APP_NAME_LABEL};
use nacelle_proto::types;

use crate::codec::{self, Status};
use crate::connection::{shutdown_status, Closer, ConnMeta, Connection};
use crate::ctx::Ctx;
use crate::registry::Refusal;
use crate::rpc::{Inbound, Outbound};
use crate::stats;
use crate::tcp::ConnTag;
use crate::wire::{self, PayloadView};

/// Runs one bi-stream until it ends, then ends the server's half with status OK (or the
/// status of the client's protocol error, or `UNAVAILABLE` when the server is stopping).
pub(crate) async fn run(ctx: Arc<Ctx>, tag: ConnTag, inbound: Inbound, out: Arc<Outbound>) {
    let closer = Arc::new(Closer::default());
    let status = serve(ctx, tag, inbound, out.clone(), closer).await;
    out.finish(&status.unwrap_or_else(Status::ok));
}

/// Returns the status to end the stream with when the client broke the protocol.
async fn serve(
    ctx: Arc<Ctx>,
    tag: ConnTag,
    mut inbound: Inbound,
    out: Arc<Outbound>,
    closer: Arc<Closer>,
) -> Option<Status> {
    // Handshake: wait for ConnectionSetupRequest; nothing else is meaningful before it. A
    // stream that stays silent as long as an idle connection may is ended.
    let setup_deadline = tokio::time::Instant::now() + ctx.opts.idle_probe_after;
    let (meta, negotiates) = loop {
        let msg = tokio::select! {
            _ = ctx.hard_stop.cancelled() => return Some(shutdown_status()),
            _ = tokio::time::sleep_until(setup_deadline) => {
                tracing::debug!(conn = %tag.id, "no ConnectionSetupRequest in time; ending the stream");
                return None;
            }
            m = inbound.message() => m,
        };
        let p = match msg {
            Ok(Some(p)) => p,
            Ok(None) => return None,
            Err(status) => {
                tracing::debug!(conn = %tag.id, %status, "bi-stream failed before setup");
                return Some(status);
            }
        };
        let (type_name, client_ip, body) = (p.type_name(), p.client_ip(), p.body());
        if type_name != types::CONNECTION_SETUP_REQUEST {
            tracing::debug!(conn = %tag.id, type_name, "ignoring a message before setup");
            continue;
        }
        match wire::from_json::<ConnectionSetupRequest>(body) {
            Ok(setup) => {
                let negotiates = setup.ability_table.is_some();
                break (
                    meta_of(&tag, client_ip, setup, &ctx.opts.trusted_proxies),
                    negotiates,
                );
            }
            Err(e) => {
                tracing::warn!(conn = %tag.id, error = %e, "unparsable ConnectionSetupRequest");
            }
        }
    };

    let deps = match ctx.conn_deps(&meta.caller) {
        Ok(deps) => deps,
        Err(e) => {
            // The service stopped serving between the handshake and now (shutdown).
            tracing::debug!(conn = %tag.id, error = %e, "not registering the connection");
            return Some(shutdown_status());
        }
    };
    let conn = Arc::new(Connection::new(
        tag.id.clone(),
        meta,
        out,
        closer.clone(),
        deps,
    ));
    if let Err(refusal) = ctx.registry.register(conn.clone()) {
        stats::inc(&ctx.stats.counters().rejected_connections);
        if refusal == Refusal::ShuttingDown {
            // Ended as every registered stream is on shutdown: no reset (see `server`).
            tracing::debug!(conn = %tag.id, "server stopping; not registering the connection");
            return Some(shutdown_status());
        }
        tracing::warn!(conn = %tag.id, client_ip = %conn.meta.client_ip, ?refusal,
            "gRPC connection refused; sending ConnectResetRequest");
        conn.reset(&ctx.server_request_id("reset"));
        // Let the reset reach the client; it closes the stream (or we stop waiting).
        let _grace_over =
            tokio::time::timeout(ctx.opts.shutdown_grace, drain(&mut inbound, &closer)).await;
        return None;
    }
    tracing::debug!(conn = %conn.id, client_ip = %conn.meta.client_ip,
        remote = %conn.meta.remote, app = %conn.meta.app_name,
        version = %conn.meta.client_version, tenant = %conn.meta.tenant,
        labels = ?conn.meta.caller.labels, "gRPC connection registered");
    if negotiates {
        // A client that sent an ability table waits for the server's (the Java client
        // reconnects without it, and uses fuzzy watch only when `fuzzyWatch` is in it).
        // Nacos sends it once registered and expects no answer.
        conn.send(&wire::message(&SetupAckRequest::new(
            ctx.server_request_id("setup"),
        )));
    }

    // Unacknowledged pushes are timed out and retried by the server's push sweeper
    // (`server::sweep_pushes`), so a push costs this task no wake-up or timer: it only wakes
    // for what the client sends.
    let mut failure = None;
    loop {
        tokio::select! {
            biased;
            _ = closer.wait() => break,
            msg = inbound.message_bytes() => match msg {
                Ok(Some(bytes)) => {
                    conn.touch();
                    if let Err(status) = on_message(&conn, bytes) {
                        tracing::debug!(conn = %conn.id, %status, "bi-stream failed");
                        failure = Some(status);
                        break;
                    }
                }
                Ok(None) => break,
                Err(status) => {
                    tracing::debug!(conn = %conn.id, %status, "bi-stream failed");
                    failure = Some(status);
                    break;
                }
            },
        }
    }
    ctx.registry.unregister(&conn);
    conn.release();
    tracing::debug!(conn = %conn.id, "gRPC connection unregistered");
    failure
}

/// A message on a registered stream: responses ack pushes and probes. Read through a
/// [`PayloadView`] (no `Payload` is built for an ack); a message the view does not take is
/// decoded in full, and one that does not decode ends the stream.
fn on_message(conn: &Connection, bytes: Bytes) -> Result<(), Status> {
    if let Some(view) = PayloadView::parse(&bytes) {
        on_parts(conn, view.type_name, view.body);
        return Ok(());
    }
    let p = codec::decode(bytes)?;
    on_parts(conn, p.type_name(), p.body());
    Ok(())
}

fn on_parts(conn: &Connection, type_name: &str, body: &[u8]) {
    if types::is_response_type(type_name) {
        conn.on_response(body);
    } else {
        tracing::debug!(conn = %conn.id, type_name, "ignoring a client request on the bi-stream");
    }
}

/// Reads and discards the inbound stream until it ends or the connection is closed.
async fn drain(inbound: &mut Inbound, closer: &Closer) {
    loop {
        tokio::select! {
            _ = closer.wait() => return,
            m = inbound.message() => match m {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            },
        }
    }
}

/// Who the client of a new stream is. Its IP follows the trusted-proxy rule: the reported
/// `metadata.clientIp` only when it equals the socket address or the socket peer is a
/// trusted proxy (Nacos believes it from anyone); the reported address is kept apart, as
/// the one gray rules match (`Caller::gray_ip`).
fn meta_of(
    tag: &ConnTag,
    reported_ip: &str,
    setup: ConnectionSetupRequest,
    trusted: &TrustedProxies,
) -> ConnMeta {
    // The labels are kept once, shared by the caller of every request of the connection.
    let labels = Labels::new(
        setup
            .labels
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect(),
    );
    let ip = trusted.resolve_reported(tag.remote.ip(), Some(reported_ip));
    let app = labels
        .get(APP_NAME_LABEL)
        .map(|a| a.trim())
        .filter(|a| !a.is_empty());
    let app_name = app.unwrap_or("-").to_string();
    let app: Option<Arc<str>> = app.map(Into::into);
    let mut caller = Caller::anonymous(Protocol::Grpc, Some(ip));
    // What the client says its address is, for gray rules only (as Nacos, which keeps the
    // setup's clientIp as the connection's and matches betas against it).
    caller.reported_ip = reported_ip
        .trim()
        .parse::<IpAddr>()
        .ok()
        .map(|r| r.to_canonical());
    caller.app_name = app;
    caller.labels = labels;
    ConnMeta {
        client_ip: ip.to_string().into(),
        app_name,
        caller,
        remote: tag.remote,
        client_version: setup.client_version.unwrap_or_default(),
        tenant: setup.tenant.unwrap_or_default(),
    }
}
