//! `cluster-fanout` (issue 38): several Nacelle nodes on one database, gRPC listeners and
//! held long polls spread over all of them, one publish on the first node per round: the
//! time from sending the publish to each client's push or poll answer, per node and over
//! all; each node's RSS idle and with its clients; then the change-log follower's cost —
//! every node's CPU while the first node takes `--follow-rate` publishes a second of a
//! key nobody listens to.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Barrier};

use crate::client::{form, md5_hex, Conn};
use crate::grpc_client::{raise_nofile, PushArrival, StreamCounters};
use crate::grpc_scenarios::{open_lean_listeners, Listener, Sources};
use crate::scenarios::{cpu_seconds, publish_one, rss_kib, spawn_poll, GROUP};
use crate::stats::{report, Latencies};

/// One node under test.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    pub pid: Option<u32>,
}

/// How many clients and rounds.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub grpc_per_node: usize,
    pub polls_per_node: usize,
    pub rounds: usize,
    pub follow_rate: u32,
    pub follow_secs: u64,
}

/// Waits until `node` serves `content` for `data_id` (at most 10 s).
async fn until_served(node: &Node, data_id: &str, content: &str) -> Result<Duration> {
    let started = Instant::now();
    let mut conn = Conn::connect(node.http).await?;
    let path = format!("/nacos/v1/cs/configs?dataId={data_id}&group={GROUP}");
    loop {
        let (status, body) = conn.get(&path).await?;
        if status == 200 && &body[..] == content.as_bytes() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(10) {
            bail!("{} never served {data_id} = {content}", node.http);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn rss_mib(node: &Node) -> Result<Option<f64>> {
    Ok(node
        .pid
        .map(rss_kib)
        .transpose()?
        .map(|k| (k as f64 / 1024.0 * 10.0).round() / 10.0))
}

pub async fn run(nodes: &[Node], plan: Plan) -> Result<()> {
    if nodes.is_empty() {
        bail!("give at least one node");
    }
    let nofile = raise_nofile();
    let data_id = format!("bench-cfanout-{}", std::process::id());
    let mut admin = Conn::connect(nodes[0].http).await?;
    let mut content = format!("round-0-{}", std::process::id());
    publish_one(&mut admin, &data_id, &content).await?;
    for node in nodes {
        until_served(node, &data_id, &content).await?;
    }
    let rss_idle: Vec<Option<f64>> = nodes.iter().map(rss_mib).collect::<Result<_>>()?;

    // gRPC listeners: each node's from its own block of source addresses.
    let counters = Arc::new(StreamCounters::default());
    let mut pushes = Vec::with_capacity(nodes.len());
    let mut listeners: Vec<Vec<Listener>> = Vec::with_capacity(nodes.len());
    let per_source = 5000;
    let blocks = plan.grpc_per_node.div_ceil(per_source).max(1);
    for (i, node) in nodes.iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel::<PushArrival>();
        let sources = Sources {
            per_source,
            offset: i * blocks,
        };
        let opened = open_lean_listeners(
            (node.grpc, sources),
            plan.grpc_per_node,
            (&data_id, &md5_hex(&content)),
            tx,
            &counters,
        )
        .await?;
        if let Some(e) = opened.first_error {
            bail!(
                "node {}: opened {} of {} gRPC listeners (open-file limit {nofile}): {e}",
                node.grpc,
                opened.conns.len(),
                plan.grpc_per_node
            );
        }
        eprintln!(
            "  node {}: {} gRPC listeners in {:.1} s",
            node.grpc,
            plan.grpc_per_node,
            opened.took.as_secs_f64()
        );
        listeners.push(opened.conns);
        pushes.push(rx);
    }
    let mut polls: Vec<Vec<Conn>> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let mut conns = Vec::with_capacity(plan.polls_per_node);
        for _ in 0..plan.polls_per_node {
            conns.push(Conn::connect(node.http).await?);
        }
        polls.push(conns);
    }

    let mut grpc_all = Latencies::new();
    let mut poll_all = Latencies::new();
    let mut per_node_grpc: Vec<Latencies> = nodes.iter().map(|_| Latencies::new()).collect();
    let mut per_node_poll: Vec<Latencies> = nodes.iter().map(|_| Latencies::new()).collect();
    let mut rss_loaded = Vec::new();
    let mut missing = 0usize;
    let wait_limit = Duration::from_secs(10);
    for round in 1..=plan.rounds.max(1) {
        // Every node's polls hold the current md5.
        let lc = format!("{data_id}\u{2}{GROUP}\u{2}{}\u{1}", md5_hex(&content));
        let body = form(&[("Listening-Configs", &lc)]);
        let total_polls = plan.polls_per_node * nodes.len();
        let barrier = Arc::new(Barrier::new(total_polls + 1));
        let mut tasks = Vec::with_capacity(nodes.len());
        for conns in &mut polls {
            let mut node_tasks = Vec::with_capacity(conns.len());
            for conn in conns.drain(..) {
                node_tasks.push(spawn_poll(conn, body.clone(), barrier.clone()));
            }
            tasks.push(node_tasks);
        }
        barrier.wait().await;
        tokio::time::sleep(Duration::from_millis(500 + total_polls as u64 / 10)).await;
        for rx in &mut pushes {
            while rx.try_recv().is_ok() {}
        }
        content = format!("round-{round}-{}", std::process::id());
        let sent = Instant::now();
        publish_one(&mut admin, &data_id, &content).await?;
        let acked = sent.elapsed();
        // gRPC pushes, per node.
        let limit = tokio::time::Instant::from_std(sent + wait_limit);
        for (i, rx) in pushes.iter_mut().enumerate() {
            let mut seen = vec![false; plan.grpc_per_node];
            let mut got = 0usize;
            while got < plan.grpc_per_node {
                match tokio::time::timeout_at(limit, rx.recv()).await {
                    Ok(Some((idx, at))) if idx < seen.len() && !seen[idx] => {
                        seen[idx] = true;
                        got += 1;
                        let d = at.saturating_duration_since(sent);
                        per_node_grpc[i].record(d);
                        grpc_all.record(d);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            missing += plan.grpc_per_node - got;
        }
        // Poll answers, per node.
        for (i, node_tasks) in tasks.into_iter().enumerate() {
            for t in node_tasks {
                let (conn, r) = t.await?;
                let (status, body, woke) = r?;
                if status != 200 || body.is_empty() {
                    bail!("round {round}: a poll on node {i} answered {status} without the key");
                }
                let d = woke.saturating_duration_since(sent);
                per_node_poll[i].record(d);
                poll_all.record(d);
                polls[i].push(conn);
            }
        }
        if round == 1 {
            rss_loaded = nodes.iter().map(rss_mib).collect::<Result<_>>()?;
        }
        eprintln!(
            "  round {round}: publish acked in {:.1} ms",
            acked.as_secs_f64() * 1000.0
        );
    }
    let mut every = Latencies::new();
    every.merge(&grpc_all);
    every.merge(&poll_all);

    // The follower's cost: publishes of another key at `follow_rate`/s on node 1 only.
    let follow_id = format!("bench-follow-{}", std::process::id());
    let before: Vec<Option<f64>> = nodes
        .iter()
        .map(|n| n.pid.map(cpu_seconds).transpose())
        .collect::<Result<_>>()?;
    let period = Duration::from_secs(1) / plan.follow_rate.max(1);
    let started = Instant::now();
    let mut published = 0u64;
    let mut next = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_secs(plan.follow_secs.max(1)) {
        publish_one(&mut admin, &follow_id, &format!("v{published}")).await?;
        published += 1;
        next += period;
        tokio::time::sleep_until(next).await;
    }
    let secs = started.elapsed().as_secs_f64();
    for node in nodes.iter().skip(1) {
        until_served(node, &follow_id, &format!("v{}", published - 1)).await?;
    }
    let follow: Vec<Value> = nodes
        .iter()
        .zip(&before)
        .map(|(n, b)| {
            let cpu = match (n.pid, b) {
                (Some(pid), Some(b)) => Some(cpu_seconds(pid)? - b),
                _ => None,
            };
            Ok(json!({
                "node": n.http.to_string(),
                "cpu_percent": cpu.map(|c| (c / secs * 1000.0).round() / 10.0),
                "cpu_ms_per_publish": cpu.map(|c| (c * 1000.0 / published as f64 * 100.0).round() / 100.0),
            }))
        })
        .collect::<Result<_>>()?;

    let per_node: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "node": n.http.to_string(),
                "grpc": per_node_grpc[i].summary(),
                "polls": per_node_poll[i].summary(),
                "rss_mib_idle": rss_idle[i],
                "rss_mib_loaded": rss_loaded.get(i).copied().flatten(),
            })
        })
        .collect();
    report(
        "cluster-fanout",
        json!({
            "nodes": nodes.len(),
            "grpc_per_node": plan.grpc_per_node,
            "polls_per_node": plan.polls_per_node,
            "rounds": plan.rounds,
            "latency_from_publish_sent": every.summary(),
            "grpc": grpc_all.summary(),
            "polls": poll_all.summary(),
            "missing_pushes": missing,
            "per_node": per_node,
            "follow": {"publishes": published, "seconds": secs, "per_node": follow},
        }),
    );
    drop(listeners);
    Ok(())
}
