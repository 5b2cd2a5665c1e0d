//! The HTTP scenarios (GET throughput, publish throughput, long-poll fan-out) and startup.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Barrier;

use crate::client::{form, md5_hex, Conn};
use crate::stats::{report, Latencies};
use crate::{check_loopback, measured, Load};

pub(crate) const GROUP: &str = "BENCH";
pub(crate) const WARMUP: Duration = Duration::from_secs(1);

pub(crate) fn content_of(size: usize, seed: usize) -> String {
    let mut s = format!("seed={seed}\n");
    while s.len() < size {
        s.push_str("key.with.some.length=value-with-some-length\n");
    }
    s.truncate(size.max(8));
    s
}

pub(crate) async fn publish_one(conn: &mut Conn, data_id: &str, content: &str) -> Result<()> {
    publish_with(conn, data_id, content, &[]).await
}

/// Publishes with extra request headers (e.g. `betaIps`).
async fn publish_with(
    conn: &mut Conn,
    data_id: &str,
    content: &str,
    headers: &[(&str, &str)],
) -> Result<()> {
    let mut fields = vec![("dataId", data_id), ("group", GROUP), ("content", content)];
    if let Some(t) = crate::creds::token() {
        fields.push(("accessToken", t));
    }
    let body = form(&fields);
    let (status, resp) = conn
        .post_form("/nacos/v1/cs/configs", body, headers)
        .await?;
    if status != 200 || &resp[..] != b"true" {
        bail!(
            "publish {data_id}: {status} {}",
            String::from_utf8_lossy(&resp)
        );
    }
    Ok(())
}

/// A variant a scenario's keys also get, for clients the bench has none of, so that every
/// read and every wake-up runs the variant selection and misses: its pure cost.
#[derive(Debug, Clone, Copy)]
pub enum Variant<'a> {
    /// A beta for these IPs (`betaIps`).
    Beta(&'a str),
    /// A share of all clients by the `percent` rule (docs/gray-release.md), published by a
    /// staged rollout held at its first step (manual advance, a week's bake); the bench's
    /// clients must fall outside it (checked).
    Percent(f64),
}

impl Variant<'_> {
    fn describe(&self) -> Value {
        match self {
            Variant::Beta(ips) => json!({ "beta_ips": ips }),
            Variant::Percent(p) => json!({ "gray_percent": p }),
        }
    }
}

/// Gives `data_id` (whose formal content is `formal`) the variant `v` with `content`.
async fn add_variant(
    conn: &mut Conn,
    data_id: &str,
    formal: &str,
    content: &str,
    v: Variant<'_>,
) -> Result<()> {
    match v {
        Variant::Beta(ips) => publish_with(conn, data_id, content, &[("betaIps", ips)]).await,
        Variant::Percent(p) => {
            let token = crate::creds::token()
                .map(|t| format!("accessToken={t}&"))
                .unwrap_or_default();
            let q = format!("?{token}dataId={data_id}&group={GROUP}");
            // A second run on the same server finds the gray of the first in place.
            if !has_percent_gray(conn, &q).await? {
                let body = json!({
                    "group": GROUP, "dataId": data_id, "content": content,
                    "steps": [p, 100.0], "bakeMs": 7 * 24 * 3600 * 1000_i64, "manual": true,
                });
                let path = format!("/nacos/nacelle/v1/rollouts?{token}");
                let (status, resp) = conn.post_json(&path, body.to_string()).await?;
                let answer: Value = serde_json::from_slice(&resp).unwrap_or(Value::Null);
                if answer["data"]["id"].as_i64().is_none() {
                    bail!(
                        "starting a rollout of {data_id}: {status} {}",
                        String::from_utf8_lossy(&resp)
                    );
                }
                // The driver publishes the step's gray on its next tick.
                let deadline = Instant::now() + Duration::from_secs(15);
                while !has_percent_gray(conn, &q).await? {
                    if Instant::now() > deadline {
                        bail!("the rollout of {data_id} published no percent gray within 15 s");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            let (_, served) = conn.get(&format!("/nacos/v1/cs/configs{q}")).await?;
            if served != formal.as_bytes() {
                bail!("the bench's address falls in the {p} % cohort of {data_id}: choose another share");
            }
            Ok(())
        }
    }
}

/// Whether the key of query `q` (`?dataId=…&group=…`) has a percent gray (v2 gray listing).
async fn has_percent_gray(conn: &mut Conn, q: &str) -> Result<bool> {
    let (_, resp) = conn.get(&format!("/nacos/v2/cs/config/gray{q}")).await?;
    let grays: Value = serde_json::from_slice(&resp).unwrap_or(Value::Null);
    Ok(grays["data"]
        .as_array()
        .is_some_and(|a| a.iter().any(|g| g["type"] == "percent")))
}

/// Runs `load.connections` loops of GETs rotating over `paths`; returns the figures.
pub async fn get_load(load: &Load, paths: Vec<String>) -> Result<Value> {
    let paths = Arc::new(paths);
    let duration = measured(load);
    let start = Instant::now();
    let measure_from = start + WARMUP;
    let deadline = measure_from + duration;
    let mut tasks = Vec::new();
    for c in 0..load.connections.max(1) {
        let paths = paths.clone();
        let addr = load.addr;
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::new();
            let mut errors = 0u64;
            let mut conn = Conn::connect(addr).await?;
            let mut i = c;
            while Instant::now() < deadline {
                let path = &paths[i % paths.len()];
                i += 1;
                let t = Instant::now();
                match conn.get(path).await {
                    Ok((status, _)) if status == 200 => {
                        if t >= measure_from {
                            lat.record(t.elapsed());
                        }
                    }
                    Ok(_) => errors += 1,
                    Err(_) => {
                        errors += 1;
                        conn = Conn::connect(addr).await?;
                    }
                }
            }
            Ok::<_, anyhow::Error>((lat, errors))
        }));
    }
    let mut all = Latencies::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await??;
        all.merge(&lat);
        errors += e;
    }
    let secs = duration.as_secs_f64();
    Ok(json!({
        "connections": load.connections,
        "duration_s": secs,
        "requests": all.count(),
        "qps": (all.count() as f64 / secs).round(),
        "latency": all.summary(),
        "errors": errors,
    }))
}

/// `http-get`: seeds `keys` configs of `size` bytes, then GETs them; with `cipher`, as
/// encrypted configs (`cipher-aes-…`), which the server decrypts for each GET; with
/// `variant`, each key also gets that variant (a beta, a percent gray), for no bench client.
pub async fn http_get(
    load: &Load,
    keys: usize,
    size: usize,
    variant: Option<Variant<'_>>,
    cipher: bool,
) -> Result<()> {
    let keys = keys.clamp(1, 100_000);
    let mut conn = Conn::connect(load.addr).await?;
    let mut paths = Vec::with_capacity(keys);
    for k in 0..keys {
        let id = if cipher {
            format!("cipher-aes-bench-get-{k}")
        } else {
            format!("bench-get-{k}")
        };
        let formal = content_of(size, k);
        publish_one(&mut conn, &id, &formal).await?;
        if let Some(v) = variant {
            add_variant(&mut conn, &id, &formal, &content_of(size, k + 1), v).await?;
        }
        let token = crate::creds::token()
            .map(|t| format!("&accessToken={t}"))
            .unwrap_or_default();
        paths.push(format!(
            "/nacos/v1/cs/configs?dataId={id}&group={GROUP}{token}"
        ));
    }
    let mut result = get_load(load, paths).await?;
    if let Some(o) = result.as_object_mut() {
        o.insert("keys".into(), json!(keys));
        o.insert("size".into(), json!(size));
        o.insert(
            "variant".into(),
            variant.map_or(Value::Null, |v| v.describe()),
        );
        o.insert("cipher".into(), json!(cipher));
        o.insert("auth".into(), json!(crate::creds::token().is_some()));
    }
    report("http-get", result);
    Ok(())
}

/// `publish`: TPS over HTTP, distinct keys or one hot key.
pub async fn publish(load: &Load, hot: bool, size: usize) -> Result<()> {
    let duration = measured(load);
    let start = Instant::now();
    let measure_from = start + WARMUP;
    let deadline = measure_from + duration;
    let run_id = std::process::id();
    let mut tasks = Vec::new();
    for c in 0..load.connections.max(1) {
        let addr = load.addr;
        tasks.push(tokio::spawn(async move {
            let mut lat = Latencies::new();
            let mut errors = 0u64;
            let mut conn = Conn::connect(addr).await?;
            let mut n = 0usize;
            while Instant::now() < deadline {
                let id = if hot {
                    "bench-hot".to_string()
                } else {
                    format!("bench-pub-{run_id}-{c}-{n}")
                };
                let content = content_of(size, n * 1000 + c);
                n += 1;
                let t = Instant::now();
                match publish_one(&mut conn, &id, &content).await {
                    Ok(()) => {
                        if t >= measure_from {
                            lat.record(t.elapsed());
                        }
                    }
                    Err(_) => {
                        errors += 1;
                        conn = Conn::connect(addr).await?;
                    }
                }
            }
            Ok::<_, anyhow::Error>((lat, errors))
        }));
    }
    let mut all = Latencies::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await??;
        all.merge(&lat);
        errors += e;
    }
    let secs = duration.as_secs_f64();
    report(
        "publish",
        json!({
            "protocol": "http",
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

/// A held long poll's answer: the connection back, and the status, body and arrival.
pub(crate) type PollAnswer = (Conn, Result<(hyper::StatusCode, bytes::Bytes, Instant)>);

/// Sends one long poll (`body`, 30 s) on `conn` once `barrier` opens; its task answers
/// with the connection and when the answer arrived.
pub(crate) fn spawn_poll(
    mut conn: Conn,
    body: String,
    barrier: Arc<Barrier>,
) -> tokio::task::JoinHandle<PollAnswer> {
    tokio::spawn(async move {
        barrier.wait().await;
        let r = conn
            .post_form(
                "/nacos/v1/cs/configs/listener",
                body,
                &[("Long-Pulling-Timeout", "30000")],
            )
            .await;
        let woke = Instant::now();
        (conn, r.map(|(s, b)| (s, b, woke)))
    })
}

/// `longpoll-fanout`: `n` held polls on one key, one publish per round; latency from the
/// moment the publish request is sent to each poll's answer (an upper bound of the latency
/// from the acknowledgement, since Nacelle wakes listeners before it answers the publish).
pub async fn longpoll_fanout(
    addr: SocketAddr,
    (n, rounds, pause_ms): (usize, usize, Option<u64>),
    server_pid: Option<u32>,
    variant: Option<Variant<'_>>,
) -> Result<()> {
    let n = n.clamp(1, 20_000);
    let data_id = format!("bench-fanout-{}", std::process::id());
    let mut admin = Conn::connect(addr).await?;
    let mut content = format!("round-0-{}", std::process::id());
    publish_one(&mut admin, &data_id, &content).await?;
    if let Some(v) = variant {
        add_variant(&mut admin, &data_id, &content, "beta", v).await?;
    }
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(Conn::connect(addr).await?);
    }
    let mut all = Latencies::new();
    let mut within_5s = 0usize;
    let mut per_round = Vec::new();
    for round in 1..=rounds.max(1) {
        let md5 = md5_hex(&content);
        let lc = format!("{data_id}\u{2}{GROUP}\u{2}{md5}\u{1}");
        let body = form(&[("Listening-Configs", &lc)]);
        let barrier = Arc::new(Barrier::new(n + 1));
        let mut tasks = Vec::with_capacity(n);
        for conn in conns.drain(..) {
            tasks.push(spawn_poll(conn, body.clone(), barrier.clone()));
        }
        barrier.wait().await;
        // Let every poll reach the server and be held.
        let hold = pause_ms.unwrap_or(500 + (n as u64) / 10);
        tokio::time::sleep(Duration::from_millis(hold)).await;
        content = format!("round-{round}-{}", std::process::id());
        eprintln!("  round {round}: publishing");
        if pause_ms.is_some() {
            // Under a profiler: the marker's reader acts on it before the publish.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let meter = CpuMeter::start(server_pid)?;
        let sent = Instant::now();
        publish_one(&mut admin, &data_id, &content).await?;
        let acked = sent.elapsed();
        let mut lat = Latencies::new();
        for t in tasks {
            let (conn, r) = t.await?;
            let (status, body, woke) = r?;
            if status != 200 || body.is_empty() {
                bail!("round {round}: a poll answered {status} without the changed key");
            }
            if woke < sent {
                // Not a release: the server answered without holding the poll.
                bail!("round {round}: a poll was answered before the publish was sent");
            }
            let d = woke.saturating_duration_since(sent);
            if d <= Duration::from_secs(5) {
                within_5s += 1;
            }
            lat.record(d);
            conns.push(conn);
        }
        // CPU of the release (publish, wake-ups, answers); not of the re-polls, sent later.
        let cpu = meter.per_item(n)?;
        eprintln!("  round {round}: answered");
        if let Some(ms) = pause_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        all.merge(&lat);
        per_round.push(json!({
            "round": round,
            "publish_ack_ms": acked.as_secs_f64() * 1000.0,
            "latency": lat.summary(),
            "cpu_per_poll": cpu,
        }));
    }
    report(
        "longpoll-fanout",
        json!({
            "polls": n,
            "rounds": rounds,
            "latency_from_publish_sent": all.summary(),
            "within_5s": within_5s,
            "per_round": per_round,
            "variant": variant.map_or(Value::Null, |v| v.describe()),
        }),
    );
    Ok(())
}

/// CPU time a process's live threads have used so far, in seconds, from
/// /proc/PID/task/*/schedstat (nanosecond resolution, where /proc/PID/stat counts 10 ms
/// ticks).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let mut ns: u64 = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        // A thread may exit between the listing and the read.
        let Ok(line) = std::fs::read_to_string(&path) else {
            continue;
        };
        ns += line
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .with_context(|| format!("unexpected {}", path.display()))?;
    }
    Ok(ns as f64 / 1e9)
}

/// CPU used by the server (when its PID is known) and by this bench between two points.
pub struct CpuMeter {
    server_pid: Option<u32>,
    server: Option<f64>,
    me: f64,
}

impl CpuMeter {
    pub fn start(server_pid: Option<u32>) -> Result<Self> {
        Ok(CpuMeter {
            server_pid,
            server: server_pid.map(cpu_seconds).transpose()?,
            me: cpu_seconds(std::process::id())?,
        })
    }

    /// `{server_cpu_us_per_item, bench_cpu_us_per_item}` since `start`, over `items`.
    pub fn per_item(&self, items: usize) -> Result<serde_json::Value> {
        let items = items.max(1) as f64;
        let server = match (self.server_pid, self.server) {
            (Some(pid), Some(before)) => Some((cpu_seconds(pid)? - before) * 1e6 / items),
            _ => None,
        };
        let me = (cpu_seconds(std::process::id())? - self.me) * 1e6 / items;
        Ok(json!({
            "server_cpu_us_per_item": server.map(|v| v.round()),
            "bench_cpu_us_per_item": me.round(),
        }))
    }
}

/// VmRSS of a process in KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS not found")
}

/// Seeds `configs` rows straight into a fresh SQLite database (schema from the store's own
/// migrations), with one insert history row each, as Nacos would have them.
async fn seed(db: &Path, configs: usize, size: usize) -> Result<()> {
    nacelle_store::SqliteStore::open_path(db).await?;
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(db);
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await?;
    let now = 1_700_000_000_000i64;
    for chunk_start in (0..configs).step_by(10_000) {
        let mut tx = pool.begin().await?;
        for i in chunk_start..(chunk_start + 10_000).min(configs) {
            let content = content_of(size, i);
            let md5 = md5_hex(&content);
            let id = format!("seed-{i}.properties");
            sqlx::query(
                "INSERT INTO config_info (data_id, group_id, tenant_id, content, md5, gmt_create, \
                 gmt_modified, src_user, src_ip, app_name, type, encrypted_data_key) \
                 VALUES (?, ?, '', ?, ?, ?, ?, 'bench', '127.0.0.1', '', 'properties', '')",
            )
            .bind(&id)
            .bind(GROUP)
            .bind(&content)
            .bind(&md5)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, \
                 md5, gmt_create, gmt_modified, src_user, src_ip, op_type, encrypted_data_key) \
                 VALUES (0, ?, ?, '', '', ?, ?, ?, ?, 'bench', '127.0.0.1', 'I', '')",
            )
            .bind(&id)
            .bind(GROUP)
            .bind(&content)
            .bind(&md5)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
    }
    pool.close().await;
    Ok(())
}

/// Starts the binary on `dir` and measures time to readiness and RSS then.
async fn time_to_ready(bin: &Path, dir: &Path) -> Result<(Duration, u64)> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(bin)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--grpc-port",
            "0",
            "--log-format",
            "json",
            "--log",
            "warn,nacelle=info",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = child.id().context("no pid")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let addr: SocketAddr = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await??
            .context("server exited before listening")?;
        if let Some(i) = line.find("http listening on ") {
            let rest = &line[i + "http listening on ".len()..];
            let a: String = rest
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '"')
                .collect();
            break a.parse()?;
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    check_loopback(&addr)?;
    let mut conn = Conn::connect(addr).await?;
    loop {
        let (status, _) = conn.get("/nacos/v1/console/health/readiness").await?;
        if status == 200 {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("not ready after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ready = started.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss = rss_kib(pid)?;
    child.kill().await?;
    Ok((ready, rss))
}

/// `startup`: readiness time and RSS, empty and with `configs` configs of `size` bytes.
pub async fn startup(bin: &Path, configs: usize, size: usize, dir: &Path) -> Result<()> {
    let configs = configs.min(1_000_000);
    let run = dir.join(format!("run-{}", std::process::id()));
    let empty = run.join("empty");
    let full = run.join("full");
    std::fs::create_dir_all(&empty)?;
    std::fs::create_dir_all(&full)?;
    let (empty_ready, empty_rss) = time_to_ready(bin, &empty).await?;
    let seeding = Instant::now();
    seed(&full.join("nacelle.db"), configs, size).await?;
    let seeded_in = seeding.elapsed();
    let (ready, rss) = time_to_ready(bin, &full).await?;
    std::fs::remove_dir_all(&run)?;
    report(
        "startup",
        json!({
            "configs": configs,
            "size": size,
            "seeded_in_s": seeded_in.as_secs_f64(),
            "empty_ready_ms": empty_ready.as_secs_f64() * 1000.0,
            "empty_rss_mib": empty_rss as f64 / 1024.0,
            "ready_ms": ready.as_secs_f64() * 1000.0,
            "rss_mib": rss as f64 / 1024.0,
        }),
    );
    Ok(())
}
