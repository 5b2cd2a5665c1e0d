//! The gRPC scenarios: query throughput, publish throughput, push fan-out and idle
//! connection capacity. Every connection does the full Nacos 2.x handshake first.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use nacelle_proto::types;
use serde_json::json;
use tokio::sync::mpsc;

use crate::client::md5_hex;
use crate::grpc_client::{
    publish_body, query_body, raise_nofile, source_for, GrpcConn, PushArrival, Route,
    StreamCounters, Unary,
};
use crate::h2_listener;
use crate::scenarios::{content_of, rss_kib, CpuMeter, GROUP, WARMUP};
use crate::stats::{report, Latencies};
use crate::{measured, Load};

/// Handshakes in flight at once while opening many connections.
const CONNECT_CONCURRENCY: usize = 64;

/// Where connections come from: `127.0.0.(2 + offset + i / per_source)`.
#[derive(Debug, Clone, Copy)]
pub struct Sources {
    pub per_source: usize,
    pub offset: usize,
}

impl Sources {
    fn route(&self, target: SocketAddr, i: usize) -> Result<Route> {
        Ok(Route {
            target,
            source: Some(source_for(i, self.per_source, self.offset)?),
        })
    }
}

fn plain(target: SocketAddr) -> Route {
    Route {
        target,
        source: None,
    }
}

async fn publish_grpc(conn: &mut Unary, data_id: &str, content: &str, rid: u64) -> Result<()> {
    let (t, head) = conn
        .call(
            types::CONFIG_PUBLISH_REQUEST,
            publish_body(data_id, GROUP, content, rid),
        )
        .await?;
    if t != types::CONFIG_PUBLISH_RESPONSE || !head.is_ok() {
        bail!(
            "publish {data_id}: {t} resultCode {} errorCode {} {}",
            head.result_code,
            head.error_code,
            head.message.unwrap_or_default()
        );
    }
    Ok(())
}

/// How far each connection of the `connections` scenario goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    /// HTTP/2 connection and `ServerCheckRequest` only (not registered).
    Check,
    /// Full handshake (bi-stream, `ConnectionSetupRequest`), no listen.
    Registered,
    /// Full handshake and one listened key (what the target is about).
    Listening,
}

/// The outcome of opening many connections.
pub(crate) struct Opened<C = GrpcConn> {
    pub(crate) conns: Vec<C>,
    failed: usize,
    pub(crate) first_error: Option<String>,
    pub(crate) took: Duration,
}

impl<C> Opened<C> {
    fn map<D>(self, f: impl Fn(C) -> D) -> Opened<D> {
        Opened {
            conns: self.conns.into_iter().map(f).collect(),
            failed: self.failed,
            first_error: self.first_error,
            took: self.took,
        }
    }
}

/// The client `grpc-fanout`'s listeners run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListenerClient {
    /// One task per connection on the `h2` crate ([`crate::h2_listener`]).
    H2,
    /// The tonic client of [`crate::grpc_client`].
    Tonic,
}

impl ListenerClient {
    fn name(self) -> &'static str {
        match self {
            ListenerClient::H2 => "h2",
            ListenerClient::Tonic => "tonic",
        }
    }
}

/// A listening connection of either client; dropping it closes the connection.
#[derive(Debug)]
pub(crate) enum Listener {
    Tonic(#[allow(dead_code)] GrpcConn),
    Lean(#[allow(dead_code)] h2_listener::LeanListener),
}

/// Opens `n` connections (handshake + one listen each, `key_of(i)` with `md5`), at most
/// [`CONNECT_CONCURRENCY`] at a time; stops launching new ones after `max_failures`.
async fn open_listeners(
    (target, sources): (SocketAddr, Sources),
    n: usize,
    (key_of, md5, stage): (impl Fn(usize) -> String, &str, Stage),
    pushes: Option<mpsc::UnboundedSender<PushArrival>>,
    counters: Arc<StreamCounters>,
    max_failures: usize,
) -> Result<Opened> {
    let md5 = md5.to_string();
    open_many((target, sources), n, max_failures, |i, route| {
        let pushes = pushes.clone();
        let counters = counters.clone();
        let md5 = md5.clone();
        let key = key_of(i);
        async move {
            if stage == Stage::Check {
                return GrpcConn::connect_unregistered(route).await;
            }
            let mut conn = GrpcConn::connect(route, i, pushes, counters).await?;
            if stage == Stage::Listening {
                conn.unary.listen(&key, GROUP, &md5).await?;
            }
            Ok::<_, anyhow::Error>(conn)
        }
    })
    .await
}

/// Opens `n` lean listeners of one key ([`h2_listener`]); stops at the first failure.
pub(crate) async fn open_lean_listeners(
    (target, sources): (SocketAddr, Sources),
    n: usize,
    (data_id, md5): (&str, &str),
    pushes: mpsc::UnboundedSender<PushArrival>,
    counters: &Arc<StreamCounters>,
) -> Result<Opened<Listener>> {
    open_many((target, sources), n, 1, |i, route| {
        let pushes = pushes.clone();
        let counters = counters.clone();
        async move {
            h2_listener::listen(route, i, (data_id, GROUP, md5), pushes, counters)
                .await
                .map(Listener::Lean)
        }
    })
    .await
}

/// Runs `connect(i, route)` for `n` connections, at most [`CONNECT_CONCURRENCY`] at a
/// time; stops launching new ones after `max_failures`.
async fn open_many<C, F, Fut>(
    (target, sources): (SocketAddr, Sources),
    n: usize,
    max_failures: usize,
    connect: F,
) -> Result<Opened<C>>
where
    F: Fn(usize, Route) -> Fut,
    Fut: std::future::Future<Output = Result<C>>,
{
    let started = Instant::now();
    let mut routes = Vec::with_capacity(n);
    for i in 0..n {
        routes.push((i, sources.route(target, i)?));
    }
    let mut results = futures::stream::iter(routes)
        .map(|(i, route)| connect(i, route))
        .buffer_unordered(CONNECT_CONCURRENCY);
    let mut opened = Opened {
        conns: Vec::with_capacity(n),
        failed: 0,
        first_error: None,
        took: Duration::ZERO,
    };
    let mut last_print = Instant::now();
    while let Some(r) = results.next().await {
        match r {
            Ok(c) => opened.conns.push(c),
            Err(e) => {
                opened.failed += 1;
                if opened.first_error.is_none() {
                    opened.first_error = Some(format!("{e:#}"));
                }
                if opened.failed >= max_failures {
                    break;
                }
            }
        }
        if last_print.elapsed() > Duration::from_secs(5) {
            eprintln!("  … {} connections open", opened.conns.len());
            last_print = Instant::now();
        }
    }
    opened.took = started.elapsed();
    Ok(opened)
}

/// `grpc-query`: `ConfigQueryRequest` QPS over `load.connections` registered connections,
/// each with `in_flight` calls outstanding, rotating over `keys` keys of `size` bytes.
pub async fn grpc_query(load: &Load, keys: usize, size: usize, in_flight: usize) -> Result<()> {
    let keys = keys.clamp(1, 100_000);
    let in_flight = in_flight.clamp(1, 64);
    let counters = Arc::new(StreamCounters::default());
    let mut admin = GrpcConn::connect(plain(load.addr), usize::MAX, None, counters.clone()).await?;
    let mut ids = Vec::with_capacity(keys);
    for k in 0..keys {
        let id = format!("bench-get-{k}");
        publish_grpc(&mut admin.unary, &id, &content_of(size, k), k as u64).await?;
        ids.push(id);
    }
    let ids = Arc::new(ids);
    let mut conns = Vec::new();
    for c in 0..load.connections.clamp(1, 10_000) {
        conns.push(GrpcConn::connect(plain(load.addr), c, None, counters.clone()).await?);
    }
    let duration = measured(load);
    let measure_from = Instant::now() + WARMUP;
    let deadline = measure_from + duration;
    let mut tasks = Vec::new();
    for (c, conn) in conns.iter().enumerate() {
        for f in 0..in_flight {
            let mut unary = conn.unary.clone();
            let ids = ids.clone();
            tasks.push(tokio::spawn(async move {
                let mut lat = Latencies::new();
                let mut errors = 0u64;
                let mut i = c * in_flight + f;
                while Instant::now() < deadline {
                    let id = &ids[i % ids.len()];
                    i += 1;
                    let t = Instant::now();
                    match unary
                        .call(types::CONFIG_QUERY_REQUEST, query_body(id, GROUP, i as u64))
                        .await
                    {
                        Ok((ty, head)) if ty == types::CONFIG_QUERY_RESPONSE && head.is_ok() => {
                            if t >= measure_from {
                                lat.record(t.elapsed());
                            }
                        }
                        Ok(_) => errors += 1,
                        Err(_) => {
                            errors += 1;
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                }
                (lat, errors)
            }));
        }
    }
    // Markers for a profiler (callgrind-query.sh): the measured calls are those that start
    // after the first and are answered before the second.
    let marker = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        eprintln!("  grpc-query: measuring");
    });
    let mut all = Latencies::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await?;
        all.merge(&lat);
        errors += e;
    }
    marker.await?;
    eprintln!("  grpc-query: answered {} calls", all.count());
    let secs = duration.as_secs_f64();
    report(
        "grpc-query",
        json!({
            "connections": load.connections,
            "in_flight_per_connection": in_flight,
            "keys": keys,
            "size": size,
            "duration_s": secs,
            "requests": all.count(),
            "qps": (all.count() as f64 / secs).round(),
            "latency": all.summary(),
            "errors": errors,
        }),
    );
    drop(conns);
    drop(admin);
    Ok(())
}

/// `publish --protocol grpc`: `ConfigPublishRequest` TPS over `load.connections`
/// connections, distinct keys or one hot key.
pub async fn publish(load: &Load, hot: bool, size: usize) -> Result<()> {
    let counters = Arc::new(StreamCounters::default());
    let mut conns = Vec::new();
    for c in 0..load.connections.clamp(1, 10_000) {
        conns.push(GrpcConn::connect(plain(load.addr), c, None, counters.clone()).await?);
    }
    let duration = measured(load);
    let measure_from = Instant::now() + WARMUP;
    let deadline = measure_from + duration;
    let run_id = std::process::id();
    let mut tasks = Vec::new();
    for (c, conn) in conns.iter().enumerate() {
        let mut unary = conn.unary.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::new();
            let mut errors = 0u64;
            let mut n = 0usize;
            while Instant::now() < deadline {
                let id = if hot {
                    "bench-hot".to_string()
                } else {
                    format!("bench-gpub-{run_id}-{c}-{n}")
                };
                let content = content_of(size, n * 1000 + c);
                n += 1;
                let t = Instant::now();
                match publish_grpc(&mut unary, &id, &content, n as u64).await {
                    Ok(()) => {
                        if t >= measure_from {
                            lat.record(t.elapsed());
                        }
                    }
                    Err(_) => {
                        errors += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
            (lat, errors)
        }));
    }
    let mut all = Latencies::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await?;
        all.merge(&lat);
        errors += e;
    }
    let secs = duration.as_secs_f64();
    report(
        "publish",
        json!({
            "protocol": "grpc",
            "keys": if hot { "hot" } else { "distinct" },
            "connections": load.connections,
            "duration_s": secs,
            "publishes": all.count(),
            "tps": (all.count() as f64 / secs).round(),
            "latency": all.summary(),
            "errors": errors,
        }),
    );
    Ok(())
}

/// `grpc-fanout`: `n` connections listen to one key; each round publishes it once (over
/// gRPC) and measures, per connection, the time from sending the publish request to the
/// arrival of its `ConfigChangeNotifyRequest` (acked at once by the stream reader).
pub async fn grpc_fanout(
    addr: SocketAddr,
    (n, rounds, pause_ms): (usize, usize, Option<u64>),
    (sources, client): (Sources, ListenerClient),
    server_pid: Option<u32>,
) -> Result<()> {
    let n = n.clamp(1, 200_000);
    let rounds = rounds.clamp(1, 100);
    let nofile = raise_nofile();
    let counters = Arc::new(StreamCounters::default());
    let mut admin = GrpcConn::connect(plain(addr), usize::MAX, None, counters.clone()).await?;
    let data_id = format!("bench-gfanout-{}", std::process::id());
    let mut content = format!("round-0-{}", std::process::id());
    publish_grpc(&mut admin.unary, &data_id, &content, 0).await?;
    let rss_before = server_pid.map(rss_kib).transpose()?;

    let (tx, mut rx) = mpsc::unbounded_channel::<PushArrival>();
    let opened = match client {
        ListenerClient::Tonic => {
            let id = data_id.clone();
            open_listeners(
                (addr, sources),
                n,
                (move |_| id.clone(), &md5_hex(&content), Stage::Listening),
                Some(tx),
                counters.clone(),
                1,
            )
            .await?
            .map(Listener::Tonic)
        }
        ListenerClient::H2 => {
            open_lean_listeners(
                (addr, sources),
                n,
                (&data_id, &md5_hex(&content)),
                tx,
                &counters,
            )
            .await?
        }
    };
    if let Some(e) = opened.first_error {
        bail!(
            "opened {} of {n} listeners (open-file limit {nofile}): {e}",
            opened.conns.len()
        );
    }
    eprintln!(
        "  {n} listeners registered in {:.1} s",
        opened.took.as_secs_f64()
    );
    let rss_listening = server_pid.map(rss_kib).transpose()?;

    let mut all = Latencies::new();
    let mut spread = Latencies::new();
    let mut within_5s = 0usize;
    let mut missing = 0usize;
    let mut per_round = Vec::new();
    let wait_limit = Duration::from_secs(10);
    for round in 1..=rounds {
        tokio::time::sleep(Duration::from_millis(pause_ms.unwrap_or(500))).await;
        while rx.try_recv().is_ok() {}
        if pause_ms.is_some() {
            eprintln!("  round {round}: publishing");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let mut seen = vec![false; n];
        content = format!("round-{round}-{}", std::process::id());
        let meter = CpuMeter::start(server_pid)?;
        let sent = Instant::now();
        publish_grpc(&mut admin.unary, &data_id, &content, round as u64).await?;
        let acked = sent.elapsed();
        let mut lat = Latencies::new();
        let mut arrivals = Vec::with_capacity(n);
        let mut got = 0usize;
        let limit = tokio::time::Instant::from_std(sent + wait_limit);
        while got < n {
            match tokio::time::timeout_at(limit, rx.recv()).await {
                Ok(Some((i, at))) => {
                    if i < n && !seen[i] {
                        seen[i] = true;
                        got += 1;
                        let d = at.saturating_duration_since(sent);
                        if d <= Duration::from_secs(5) {
                            within_5s += 1;
                        }
                        lat.record(d);
                        arrivals.push(at);
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        missing += n - got;
        // Let the last acks be read before the CPU is taken.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let cpu = meter.per_item(n)?;
        if pause_ms.is_some() {
            eprintln!("  round {round}: answered");
        }
        all.merge(&lat);
        // The fan-out alone: each push's arrival after the first one of the round.
        if let Some(first) = arrivals.iter().min().copied() {
            for at in &arrivals {
                spread.record(at.saturating_duration_since(first));
            }
        }
        per_round.push(json!({
            "round": round,
            "publish_ack_ms": acked.as_secs_f64() * 1000.0,
            "received": got,
            "latency": lat.summary(),
            "cpu_per_push": cpu,
        }));
    }
    report(
        "grpc-fanout",
        json!({
            "listeners": n,
            "client": client.name(),
            "rounds": rounds,
            "connect_s": opened.took.as_secs_f64(),
            "latency_from_publish_sent": all.summary(),
            "after_first_push": spread.summary(),
            "within_5s": within_5s,
            "missing": missing,
            "connections_closed": counters.closed.load(Ordering::Relaxed),
            "server_rss_mib_before": rss_before.map(|k| k as f64 / 1024.0),
            "server_rss_mib_listening": rss_listening.map(|k| k as f64 / 1024.0),
            "per_round": per_round,
        }),
    );
    drop(opened.conns);
    drop(admin);
    Ok(())
}

/// `connections`: opens `n` connections (handshake + one listened key each, distinct
/// keys), holds them for `hold`, and reports the server's RSS before and after.
pub async fn connections(
    addr: SocketAddr,
    n: usize,
    hold: Duration,
    sources: Sources,
    (server_pid, stage): (u32, Stage),
) -> Result<()> {
    let n = n.clamp(1, 1_000_000);
    let nofile = raise_nofile();
    let me = std::process::id();
    let counters = Arc::new(StreamCounters::default());
    let before = rss_kib(server_pid).context("server RSS (is --server-pid right?)")?;
    let client_before = rss_kib(me)?;
    let base = sources.offset * 1_000_000;
    let opened = open_listeners(
        (addr, sources),
        n,
        (move |i| format!("bench-conn-{}", base + i), "", stage),
        None,
        counters.clone(),
        20,
    )
    .await?;
    let reached = opened.conns.len();
    eprintln!(
        "  {reached} connections open in {:.1} s; holding {} s",
        opened.took.as_secs_f64(),
        hold.as_secs()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(server_pid)?;
    let mut peak = after;
    let hold_until = Instant::now() + hold;
    while Instant::now() < hold_until {
        tokio::time::sleep(Duration::from_secs(5).min(hold)).await;
        peak = peak.max(rss_kib(server_pid)?);
    }
    let held = rss_kib(server_pid)?;
    let client_after = rss_kib(me)?;
    let grown = held.saturating_sub(before);
    let first_source = source_for(0, sources.per_source, sources.offset)?;
    let last_source = source_for(n.saturating_sub(1), sources.per_source, sources.offset)?;
    report(
        "connections",
        json!({
            "stage": format!("{stage:?}").to_lowercase(),
            "requested": n,
            "reached": reached,
            "failed": opened.failed,
            "first_error": opened.first_error,
            "open_file_limit": nofile,
            "sources": format!("{first_source}..{last_source}"),
            "connect_s": opened.took.as_secs_f64(),
            "hold_s": hold.as_secs(),
            "closed_by_server": counters.closed.load(Ordering::Relaxed),
            "probes_answered": counters.probes.load(Ordering::Relaxed),
            "server_rss_mib_before": before as f64 / 1024.0,
            "server_rss_mib_after": after as f64 / 1024.0,
            "server_rss_mib_held": held as f64 / 1024.0,
            "server_rss_mib_peak": peak as f64 / 1024.0,
            "kib_per_connection": if reached > 0 { (grown as f64 / reached as f64 * 10.0).round() / 10.0 } else { 0.0 },
            "client_rss_mib": client_after as f64 / 1024.0,
            "client_kib_per_connection": if reached > 0 { (client_after.saturating_sub(client_before) as f64 / reached as f64).round() } else { 0.0 },
        }),
    );
    drop(opened.conns);
    Ok(())
}
