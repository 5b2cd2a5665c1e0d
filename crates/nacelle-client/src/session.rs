//! The client's two background tasks: the session (connect, fail over between servers
//! with backoff, re-send the whole listen set on every new connection, keepalive, follow
//! `ConnectResetRequest`) and the refresh worker (re-read a changed key and deliver it;
//! one key at a time, so an older answer never overwrites a newer one).

use std::sync::Arc;
use std::time::Duration;

use nacelle_proto::config::{
    ConfigBatchListenRequest, ConfigChangeBatchListenResponse, ConfigListenContext,
};
use nacelle_proto::fuzzy::{
    self, ConfigFuzzyWatchChangeNotifyRequest, ConfigFuzzyWatchRequest, ConfigFuzzyWatchSyncRequest,
};
use nacelle_proto::{types, Payload};
use tokio::sync::mpsc;

use crate::error::{ClientError, Result};
use crate::grpc::{Conn, StreamEvent};
use crate::key::{namespace_id, part_matches, Key};
use crate::metrics::MetricEvent;
use crate::options::ServerAddr;
use crate::shared::{lock, Membership, Refresh, Shared};

/// Keys per `ConfigBatchListenRequest` when the whole set is re-sent.
const LISTEN_BATCH: usize = 1000;

/// How often a failed refresh is retried while connected.
const REFRESH_RETRIES: u32 = 5;

/// Connects, serves the connection until it ends, reconnects; until shutdown.
pub(crate) async fn run(shared: Arc<Shared>) {
    if shared.opts.transport == crate::options::Transport::HttpLongPolling {
        return crate::http_transport::run(shared).await;
    }
    let servers = shared.opts.servers.clone();
    let mut next = 0usize;
    let mut failed_in_round = 0usize;
    let mut backoff = shared.opts.backoff_min;
    let mut preferred: Option<ServerAddr> = None;
    loop {
        let server = preferred
            .take()
            .unwrap_or_else(|| servers[next % servers.len()].clone());
        let (ev_tx, mut events) = mpsc::unbounded_channel();
        let attempt = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            r = Conn::connect(&server, &shared.opts, ev_tx) => r,
        };
        let conn = match attempt {
            Ok(c) => Arc::new(c),
            Err(e) => {
                tracing::debug!(server = %server.label(), error = %e, "connection attempt failed");
                *lock(&shared.last_failure) = match e {
                    ClientError::Unavailable(m) => m,
                    other => other.to_string(),
                };
                next += 1;
                failed_in_round += 1;
                if failed_in_round >= servers.len() {
                    failed_in_round = 0;
                    tokio::select! {
                        () = shared.shutdown.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(shared.opts.backoff_max);
                }
                continue;
            }
        };
        failed_in_round = 0;
        backoff = shared.opts.backoff_min;
        let label = server.label();
        tracing::info!(server = %label, "connected");
        shared
            .opts
            .metrics
            .record(MetricEvent::Connected { server: &label });
        shared.conn_tx.send_replace(Some(Arc::clone(&conn)));

        let why = match resend(&shared, &conn).await {
            Err(e) => format!("re-sending the listen set failed: {e}"),
            Ok(()) => serve(&shared, &conn, &mut events, &mut preferred, &mut next).await,
        };
        shared.conn_tx.send_replace(None);
        drop(conn);
        if shared.shutdown.is_cancelled() {
            return;
        }
        tracing::warn!(server = %label, reason = %why, "disconnected; reconnecting");
        *lock(&shared.last_failure) = format!("{label}: {why}");
        shared
            .opts
            .metrics
            .record(MetricEvent::Disconnected { server: &label });
    }
}

/// Serves one connection until it ends; returns why.
async fn serve(
    shared: &Shared,
    conn: &Conn,
    events: &mut mpsc::UnboundedReceiver<StreamEvent>,
    preferred: &mut Option<ServerAddr>,
    next: &mut usize,
) -> String {
    let mut keepalive = tokio::time::interval(shared.opts.keepalive);
    keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    keepalive.tick().await;
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => return "shutdown".into(),
            ev = events.recv() => match ev {
                Some(StreamEvent::Changed(n)) => {
                    shared.refresh_later(Key::new(&n.tenant, &n.group, &n.data_id));
                }
                Some(StreamEvent::Fuzzy(p)) => on_fuzzy_push(shared, &p),
                Some(StreamEvent::Reset(target)) => {
                    *preferred = target.and_then(|(ip, port)| reset_target(shared, &ip, port));
                    if preferred.is_none() {
                        *next += 1;
                    }
                    return "the server asked for a reconnect (ConnectResetRequest)".into();
                }
                Some(StreamEvent::Closed(why)) => return why,
                None => return "stream reader ended".into(),
            },
            _ = keepalive.tick() => match conn.health_check().await {
                Ok(h) if h.is_ok() => {}
                Ok(h) => return format!("keepalive refused: {}", ClientError::from_head(&h, "health")),
                Err(e) => return format!("keepalive failed: {e}"),
            },
        }
    }
}

/// The server a `ConnectResetRequest` names (`serverIp`, `serverPort` = its HTTP port, as
/// Nacos's Java client reads it): a configured server when one matches, else that address
/// with gRPC on HTTP + 1000.
fn reset_target(shared: &Shared, ip: &str, port: u16) -> Option<ServerAddr> {
    let known = shared
        .opts
        .servers
        .iter()
        .find(|s| s.host == ip && (s.http_port == port || s.grpc_port == port));
    match known {
        Some(s) => Some(s.clone()),
        None => ServerAddr::new(ip, port).ok(),
    }
}

/// Re-sends every listened key with the md5 the client holds; a key the server reports
/// as changed is re-read, the others count as confirmed.
pub(crate) async fn resend(shared: &Shared, _conn: &Conn) -> Result<()> {
    let keys: Vec<(Key, String)> = lock(&shared.listens)
        .iter()
        .map(|(k, e)| (k.clone(), e.md5.clone()))
        .collect();
    for chunk in keys.chunks(LISTEN_BATCH) {
        listen(shared, chunk).await?;
    }
    resend_groups(shared).await
}

/// One `ConfigBatchListenRequest` for `keys`; re-reads the changed ones, confirms the
/// others.
pub(crate) async fn listen(shared: &Shared, keys: &[(Key, String)]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let contexts = keys
        .iter()
        .map(|(k, md5)| ConfigListenContext::new(&k.data_id, &k.group, &k.namespace, md5))
        .collect();
    let answer = shared
        .call("listen", &ConfigBatchListenRequest::new(true, contexts))
        .await?;
    let resp: ConfigChangeBatchListenResponse = answer
        .parse_body()
        .map_err(|e| ClientError::Protocol(format!("{}: {e}", answer.type_name())))?;
    if !resp.head.is_ok() {
        return Err(ClientError::from_head(&resp.head, "listen"));
    }
    let changed: Vec<Key> = resp
        .changed_configs
        .iter()
        .map(|c| Key::new(&c.tenant, &c.group, &c.data_id))
        .collect();
    {
        let mut listens = lock(&shared.listens);
        for (k, md5) in keys {
            if changed.contains(k) {
                continue;
            }
            if let Some(e) = listens.get_mut(k) {
                if &e.md5 == md5 {
                    e.fresh = true;
                }
            }
        }
    }
    for k in changed {
        shared.refresh_later(k);
    }
    Ok(())
}

/// A fuzzy-watch push from the stream (already acked): membership for the group
/// watches it concerns.
pub(crate) fn on_fuzzy_push(shared: &Shared, p: &Payload) {
    let mut groups = lock(&shared.groups);
    match p.type_name() {
        types::CONFIG_FUZZY_WATCH_SYNC_REQUEST => {
            let Ok(req) = p.parse::<ConfigFuzzyWatchSyncRequest>() else {
                tracing::warn!("unreadable fuzzy watch sync");
                return;
            };
            let Some(reg) = groups
                .values_mut()
                .find(|r| r.pattern == req.group_key_pattern)
            else {
                return;
            };
            for ctx in req.contexts.unwrap_or_default() {
                let Some((d, g, _)) = fuzzy::parse_group_key(&ctx.group_key) else {
                    continue;
                };
                let key = Key::new(&reg.namespace, &g, &d);
                let m = if ctx.changed_type == fuzzy::DELETE_CONFIG {
                    reg.known.remove(&ctx.group_key);
                    Membership::Gone(key)
                } else {
                    reg.known.insert(ctx.group_key.clone());
                    Membership::Present(key)
                };
                // A watch whose task ended is removed when it is dropped.
                let _task_gone = reg.tx.send(m);
            }
        }
        types::CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_REQUEST => {
            let Ok(req) = p.parse::<ConfigFuzzyWatchChangeNotifyRequest>() else {
                tracing::warn!("unreadable fuzzy watch change");
                return;
            };
            let Some((d, g, t)) = fuzzy::parse_group_key(&req.group_key) else {
                return;
            };
            for reg in groups.values_mut() {
                let same_ns = namespace_id(&reg.namespace) == namespace_id(&t);
                if !(same_ns && reg.group == g && part_matches(&reg.data_id, &d)) {
                    continue;
                }
                let key = Key::new(&reg.namespace, &g, &d);
                let m = if req.change_type == fuzzy::DELETE_CONFIG {
                    reg.known.remove(&req.group_key);
                    Membership::Gone(key)
                } else {
                    reg.known.insert(req.group_key.clone());
                    Membership::Present(key)
                };
                // As above: a finished task's registration goes with its watch.
                let _task_gone = reg.tx.send(m);
            }
        }
        _ => {}
    }
}

/// Re-sends every server-pushed group watch (`crate::group`) on a new connection, with
/// the keys held.
async fn resend_groups(shared: &Shared) -> Result<()> {
    let reqs: Vec<ConfigFuzzyWatchRequest> = lock(&shared.groups)
        .values()
        .map(|r| r.request(false))
        .collect();
    for req in reqs {
        match shared.fuzzy_watch(&req).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(pattern = ?req.group_key_pattern, "this server has no fuzzy watch: the group watch sees only its known keys")
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Stops listening to `key` on the server (`ConfigBatchListenRequest` with `listen:
/// false`). A watch of the key started meanwhile sent its listen before this check, so
/// when the key is listened again by now, its listen is re-sent after the unlisten.
pub(crate) async fn unlisten(shared: &Shared, key: &Key) -> Result<()> {
    let context = ConfigListenContext::new(&key.data_id, &key.group, &key.namespace, "");
    let answer = shared
        .call(
            "unlisten",
            &ConfigBatchListenRequest::new(false, vec![context]),
        )
        .await?;
    let resp: ConfigChangeBatchListenResponse = answer
        .parse_body()
        .map_err(|e| ClientError::Protocol(format!("{}: {e}", answer.type_name())))?;
    if !resp.head.is_ok() {
        return Err(ClientError::from_head(&resp.head, "unlisten"));
    }
    let again = lock(&shared.listens).get(key).map(|e| e.md5.clone());
    if let Some(md5) = again {
        listen(shared, &[(key.clone(), md5)]).await?;
    }
    Ok(())
}

/// The refresh worker: re-reads keys one at a time and delivers what changed.
pub(crate) async fn refresher(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Refresh>) {
    loop {
        let req = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            r = rx.recv() => match r { Some(r) => r, None => return },
        };
        if req.reply.is_none() && !shared.connected() {
            // Disconnected: the listen set is re-sent on reconnect, which re-reads every
            // key that changed; waiting for a server here would hold up the queue.
            continue;
        }
        let result = match crate::fetch::query(&shared, &req.key, None).await {
            Ok(value) => {
                shared.apply(&req.key, value);
                Ok(())
            }
            Err(e) => Err(e),
        };
        match (req.reply, result) {
            (Some(reply), result) => {
                // The caller may have given up waiting; the entry is updated either way.
                let _caller_gone = reply.send(result);
            }
            (None, Ok(())) => {}
            (None, Err(e)) => {
                tracing::warn!(key = %req.key, error = %e, attempt = req.attempt, "re-reading a changed key failed");
                // Disconnected: the listen set is re-sent on reconnect, which re-reads it.
                if shared.connected() && req.attempt < REFRESH_RETRIES {
                    let tx = shared.refresh_tx.clone();
                    let key = req.key;
                    let attempt = req.attempt + 1;
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                        let retry = Refresh {
                            key,
                            attempt,
                            reply: None,
                        };
                        if tx.send(retry).is_err() {
                            tracing::debug!("refresh worker gone (client shut down)");
                        }
                    });
                }
            }
        }
    }
}
