//! Staged rollouts (docs/rollouts.md) over the real server: cohorts of 200 clients on
//! distinct loopback addresses near each step's share and nested, a healthy rollout that
//! promotes with every step in history, a failing health URL and a real Prometheus alarm
//! rolling back (every long-poll and gRPC cohort client gets the formal content back),
//! manual advance, pause/resume/abort, bad input, review policies, the CLI, a server
//! killed and restarted mid-rollout resuming its step, and a 2-node cluster on MariaDB
//! where the other node takes over a killed driver's rollout at the same step and
//! finishes it.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::audit::audit_until;
use common::grpc::Registered;
use nacelle_testkit::grpc::{recorder, Sdk};
use nacelle_testkit::per_backend::skipped;
use nacelle_testkit::server::{BinaryServer, TestServer};
use nacelle_testkit::{free_port, free_port_with, listening_configs, md5, Api, Backend, TestDb};
use nacelle_testkit::{TestResult, SOON};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");
const G: &str = "DEFAULT_GROUP";
const ROLLOUTS: &str = "/nacos/nacelle/v1/rollouts";

// ---- the rollout API ----------------------------------------------------------------

/// `POST /rollouts` with `body`: status and answer.
async fn start(api: &Api, body: &Value) -> TestResult<(u16, Value)> {
    let resp = api.http.post(api.url(ROLLOUTS)).json(body).send().await?;
    Ok((resp.status().as_u16(), resp.json().await?))
}

/// Starts a rollout; its id.
async fn start_ok(api: &Api, body: &Value) -> TestResult<i64> {
    let (status, v) = start(api, body).await?;
    assert_eq!(status, 200, "{v}");
    Ok(v["data"]["id"].as_i64().ok_or("no id")?)
}

/// `GET /rollout?id`'s data.
async fn rollout(api: &Api, id: i64) -> TestResult<Value> {
    let v: Value = api
        .http
        .get(api.url("/nacos/nacelle/v1/rollout"))
        .query(&[("id", id.to_string())])
        .send()
        .await?
        .json()
        .await?;
    Ok(v["data"].clone())
}

/// `POST /rollout/{verb}?id`: status and answer.
async fn act(api: &Api, verb: &str, id: i64) -> TestResult<(u16, Value)> {
    let resp = api
        .http
        .post(api.url(&format!("/nacos/nacelle/v1/rollout/{verb}")))
        .query(&[("id", id.to_string())])
        .send()
        .await?;
    Ok((resp.status().as_u16(), resp.json().await?))
}

/// Waits until `check` holds of the rollout (within [`SOON`]); the rollout then.
async fn until(
    api: &Api,
    id: i64,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> TestResult<Value> {
    let deadline = Instant::now() + SOON;
    loop {
        let r = rollout(api, id).await?;
        if check(&r) {
            return Ok(r);
        }
        if Instant::now() > deadline {
            return Err(format!("rollout {id} never {what}: {r}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn state_is(state: &'static str) -> impl Fn(&Value) -> bool {
    move |r| r["state"] == state
}

fn at_step(step: u64) -> impl Fn(&Value) -> bool {
    move |r| r["step"] == step && r["state"] == "running"
}

/// A client of `api`'s server whose connections come from `source`.
fn client_from(api: &Api, source: IpAddr) -> TestResult<Api> {
    let http = reqwest::Client::builder()
        .local_address(source)
        .timeout(Duration::from_secs(40))
        .build()?;
    Ok(Api::with_client(http, api.addr))
}

/// `127.0.1.<n>`-style addresses: `n` distinct loopback sources.
fn sources(n: usize) -> Vec<IpAddr> {
    (0..n)
        .map(|i| IpAddr::from([127, 0, 1 + (i / 250) as u8, 2 + (i % 250) as u8]))
        .collect()
}

/// The gray the key holds under `name`, from the v2 gray listing.
async fn gray_rule(api: &Api, data_id: &str, name: &str) -> TestResult<Option<String>> {
    let v: Value = api
        .http
        .get(api.url("/nacos/v2/cs/config/gray"))
        .query(&[("dataId", data_id), ("group", G)])
        .send()
        .await?
        .json()
        .await?;
    Ok(v["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["grayName"] == name)
        .map(|g| {
            format!(
                "{}:{}",
                g["type"].as_str().unwrap_or(""),
                g["expr"].as_str().unwrap_or("")
            )
        }))
}

/// The gray history rows of `data_id`, oldest first: (opType, expr).
async fn gray_history(api: &Api, data_id: &str) -> TestResult<Vec<(String, String)>> {
    Ok(gray_history_notes(api, data_id)
        .await?
        .into_iter()
        .map(|(op, expr, _)| (op, expr))
        .collect())
}

/// The gray history rows of `data_id`, oldest first: (opType, expr, message).
async fn gray_history_notes(api: &Api, data_id: &str) -> TestResult<Vec<(String, String, String)>> {
    let v: Value = api
        .http
        .get(api.url("/nacos/v2/cs/config/gray/history"))
        .query(&[("dataId", data_id), ("group", G)])
        .send()
        .await?
        .json()
        .await?;
    let mut rows: Vec<(String, String, String)> = v["data"]["pageItems"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            (
                h["opType"].as_str().unwrap_or("").trim().to_string(),
                h["expr"].as_str().unwrap_or("").to_string(),
                h["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    rows.reverse();
    Ok(rows)
}

// ---- tiny HTTP endpoints the tests control ---------------------------------------------

/// An HTTP server on 127.0.0.1 answering every request with what `answer` says (status,
/// body), until the test ends.
async fn tiny_http(
    answer: impl Fn() -> (u16, String) + Send + Sync + 'static,
) -> TestResult<SocketAddr> {
    tiny_http_raw(move || {
        let (status, body) = answer();
        format!(
            "HTTP/1.1 {status} X\r\nContent-Type: text/plain; version=0.0.4\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    })
    .await
}

/// An HTTP server on 127.0.0.1 answering every request with the raw bytes `answer` gives
/// (status line, headers and body), until the test ends.
async fn tiny_http_raw(
    answer: impl Fn() -> String + Send + Sync + 'static,
) -> TestResult<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                // Err: the client went away; nothing to tell it.
                let _gone = sock.write_all(answer().as_bytes()).await;
            });
        }
    });
    Ok(addr)
}

/// Waits until `asked` has counted three more than now (within [`SOON`]).
async fn three_more(asked: &AtomicU64, what: &str) -> TestResult {
    let mark = asked.load(Ordering::SeqCst);
    let deadline = Instant::now() + SOON;
    while asked.load(Ordering::SeqCst) < mark + 3 {
        if Instant::now() > deadline {
            let n = asked.load(Ordering::SeqCst) - mark;
            return Err(format!("{what} was asked {n} times, not 3").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Waits until `api`'s server holds `rule` (`type:expr`) as rollout `id`'s gray of
/// `data_id`.
async fn until_gray(api: &Api, data_id: &str, id: i64, rule: &str) -> TestResult {
    let deadline = Instant::now() + SOON;
    while gray_rule(api, data_id, &format!("rollout-{id}"))
        .await?
        .as_deref()
        != Some(rule)
    {
        if Instant::now() > deadline {
            return Err(format!("{data_id} never held {rule}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The rollout driver's ticks, as a test can see them: a rollout of a key of its own
/// (`ticks.yaml`, one step, a bake of 10 minutes) whose health guard, an endpoint of the
/// test, the driver asks once per tick. A node's driver handles its rollouts tick after
/// tick — a tick lists them only once every rollout of the one before was handled — so
/// when the endpoint has been asked three more times than at some moment, the tick of the
/// second of those asks listed the rollouts after that moment and has handled them all.
/// (The first may come from a tick that was under way at that moment.)
struct Ticks {
    id: i64,
    asked: Arc<AtomicU64>,
}

/// The ticking rollout's health endpoint, made before the server, which must allow it
/// as a guard address ([`server_allowing`]).
struct TickHealth {
    addr: SocketAddr,
    asked: Arc<AtomicU64>,
}

impl TickHealth {
    async fn new() -> TestResult<TickHealth> {
        let asked = Arc::new(AtomicU64::new(0));
        let count = asked.clone();
        let addr = tiny_http(move || {
            count.fetch_add(1, Ordering::SeqCst);
            (200, "ok".into())
        })
        .await?;
        Ok(TickHealth { addr, asked })
    }
}

/// A server whose rollout guards may name the endpoints at `addrs` (every path on them).
async fn server_allowing(addrs: &[SocketAddr]) -> TestResult<TestServer> {
    let allowed: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    Ok(TestServer::start_with(move |st| st.rollout_guard_urls = allowed).await?)
}

impl Ticks {
    /// Starts the ticking rollout on `api`'s server, which allows `tick`'s address.
    async fn start(api: &Api, tick: TickHealth) -> TestResult<Ticks> {
        let TickHealth {
            addr: health,
            asked,
        } = tick;
        api.publish("", G, "ticks.yaml", "ticks: 0").await?;
        let id = start_ok(
            api,
            &json!({"dataId": "ticks.yaml", "content": "ticks: 1", "steps": [100],
                    "bakeMs": 600000, "guards": {"http": format!("http://{health}/ticks")}}),
        )
        .await?;
        Ok(Ticks { id, asked })
    }

    /// Waits until a whole tick of the driver has listed and handled the rollouts after
    /// this call.
    async fn a_whole_one(&self) -> TestResult {
        three_more(&self.asked, "the ticking rollout's guard").await
    }

    /// Aborts the ticking rollout.
    async fn stop(self, api: &Api) -> TestResult {
        let (status, v) = act(api, "abort", self.id).await?;
        assert_eq!(status, 200, "{v}");
        Ok(())
    }
}

/// A real Prometheus (Debian's `prometheus`) scraping `target` every second, with its own
/// config and data directory on a free port; killed when dropped.
struct Prometheus {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    async fn start(target: SocketAddr) -> TestResult<Prometheus> {
        let exe = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("prometheus is not installed (Debian: apt-get install prometheus)")?;
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: rollout-test\n    scrape_interval: 1s\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )?;
        let port = free_port()?;
        let child = Command::new(exe)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let p = Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + SOON;
        loop {
            let ready = http.get(format!("{}/-/ready", p.url)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return Ok(p);
            }
            if Instant::now() > deadline {
                return Err("prometheus did not become ready".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// How many instant queries (`/api/v1/query`) it has answered, by its own metrics.
    async fn queries_answered(&self) -> TestResult<u64> {
        let text = reqwest::Client::new()
            .get(format!("{}/metrics", self.url))
            .send()
            .await?
            .text()
            .await?;
        let mut n = 0.0;
        for line in text.lines() {
            if line.starts_with("prometheus_http_requests_total{")
                && line.contains("handler=\"/api/v1/query\"")
            {
                let value = line.rsplit(' ').next().unwrap_or("");
                n += value.parse::<f64>().map_err(|e| format!("{line}: {e}"))?;
            }
        }
        Ok(n as u64)
    }

    /// The number of series `query` returns now.
    async fn series(&self, query: &str) -> TestResult<usize> {
        let v: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", query)])
            .send()
            .await?
            .json()
            .await?;
        Ok(v["data"]["result"].as_array().map_or(0, Vec::len))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // Errors: it exited already.
        let _killed = self.child.kill();
        let _reaped = self.child.wait();
    }
}

// ---- clients that record what they are told -------------------------------------------

/// Content changes seen by client `i`: (client, when, content).
type Seen = mpsc::UnboundedSender<(usize, Instant, String)>;

/// A long-polling (HTTP v1) client of `data_id`: reports its first content, then each
/// content it fetches after a poll names the key.
fn long_poll_client(api: Api, data_id: &'static str, i: usize, seen: Seen) {
    tokio::spawn(async move {
        let mut held = String::new();
        loop {
            let Ok(Some(content)) = api.get("", G, data_id).await else {
                return;
            };
            if md5(&content) != held {
                held = md5(&content);
                if seen.send((i, Instant::now(), content)).is_err() {
                    return;
                }
            }
            let lc = listening_configs(&[(data_id, G, &held, None)]);
            if api.long_poll(&lc, Some(30_000), &[]).await.is_err() {
                return;
            }
        }
    });
}

/// Waits until every client in `who` has reported `content` (its latest report); the
/// time the last one did.
async fn all_see(
    rx: &mut mpsc::UnboundedReceiver<(usize, Instant, String)>,
    latest: &mut Vec<Option<(Instant, String)>>,
    who: &[usize],
    content: &str,
) -> TestResult<Instant> {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        if who
            .iter()
            .all(|i| latest[*i].as_ref().is_some_and(|(_, c)| c == content))
        {
            return Ok(who
                .iter()
                .filter_map(|i| latest[*i].as_ref().map(|(t, _)| *t))
                .max()
                .ok_or("nobody")?);
        }
        let (i, at, c) = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .map_err(|_| format!("not every client saw {content:?}: {latest:?}"))?
            .ok_or("clients gone")?;
        latest[i] = Some((at, c));
    }
}

// ---- tests ---------------------------------------------------------------------------

/// 200 clients on distinct loopback addresses: at 10 %, 50 % and 100 % the share served
/// the new content is within 5 points of the target, and every client of a smaller
/// cohort is in the larger ones. A manual rollout: each step waits for `advance`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cohorts_of_200_clients_are_near_their_share_and_nested() -> TestResult {
    let tick = TickHealth::new().await?;
    let s = server_allowing(&[tick.addr]).await?;
    s.publish("", G, "fleet.yaml", "v: 1").await?;
    let id = start_ok(
        &s,
        &json!({"dataId": "fleet.yaml", "content": "v: 2", "steps": [10, 50, 100],
                "bakeMs": 0, "manual": true}),
    )
    .await?;
    let ticks = Ticks::start(&s, tick).await?;
    let clients = sources(200)
        .into_iter()
        .map(|ip| client_from(&s, ip))
        .collect::<TestResult<Vec<_>>>()?;
    let mut previous: Vec<bool> = vec![false; clients.len()];
    for (step, share) in [(1u64, 10.0), (2, 50.0), (3, 100.0)] {
        until(&s, id, &format!("at step {step}"), at_step(step)).await?;
        let rule = format!("percent:{share}~rollout-{id}");
        let deadline = Instant::now() + SOON;
        while gray_rule(&s, "fleet.yaml", &format!("rollout-{id}"))
            .await?
            .as_deref()
            != Some(rule.as_str())
        {
            assert!(
                Instant::now() < deadline,
                "step {step}'s gray never published"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut inside = Vec::with_capacity(clients.len());
        for c in &clients {
            inside.push(c.get("", G, "fleet.yaml").await?.as_deref() == Some("v: 2"));
        }
        let n = inside.iter().filter(|x| **x).count();
        let got = n as f64 * 100.0 / clients.len() as f64;
        // Each client is an independent draw: within 4 standard deviations of the share.
        let p = share / 100.0;
        let bound = 400.0 * (p * (1.0 - p) / clients.len() as f64).sqrt();
        println!("step {step}: {n}/200 clients ({got}%) for a target of {share}% (± {bound:.1})");
        assert!((got - share).abs() <= bound, "{got}% for {share}%");
        for (i, was) in previous.iter().enumerate() {
            assert!(
                !was || inside[i],
                "client {i} left the cohort at step {step}"
            );
        }
        previous = inside;
        // Nothing advances by itself (bake 0, manual), not in a whole tick of the driver.
        ticks.a_whole_one().await?;
        let r = rollout(&s, id).await?;
        assert!(at_step(step)(&r), "{r}");
        let (status, v) = act(&s, "advance", id).await?;
        assert_eq!(status, 200, "{v}");
    }
    let r = until(&s, id, "promoted", state_is("promoted")).await?;
    assert!(
        r["reason"].as_str().unwrap_or("").contains("promoted"),
        "{r}"
    );
    assert_eq!(s.get("", G, "fleet.yaml").await?.as_deref(), Some("v: 2"));
    Ok(())
}

/// A healthy automatic rollout walks its steps (canary first) and promotes; the gray
/// history holds each step's rule and message, and the audit trail every transition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_rollout_promotes_and_history_shows_each_step() -> TestResult {
    let health = tiny_http(|| (200, "ok".into())).await?;
    let s = server_allowing(&[health]).await?;
    s.publish("", G, "app.yaml", "feature: off").await?;
    let id = start_ok(
        &s,
        &json!({"dataId": "app.yaml", "content": "feature: on", "type": "yaml",
                "steps": [25, 50, 100], "bakeMs": 300,
                "canary": {"labels": "env=canary", "ips": ["10.0.0.7"]},
                "guards": {"http": format!("http://{health}/health"), "deliveryMs": 5000}}),
    )
    .await?;
    let r = rollout(&s, id).await?;
    assert_eq!(r["steps"], 4, "{r}");
    assert_eq!(r["stages"][0]["kind"], "canary");
    assert_eq!(r["stages"][0]["rule"], "env=canary||ClientIp=10.0.0.7");
    assert_eq!(r["md5"], md5("feature: on"));
    let r = until(&s, id, "promoted", state_is("promoted")).await?;
    assert_eq!(r["step"], 4, "{r}");
    assert_eq!(
        s.get("", G, "app.yaml").await?.as_deref(),
        Some("feature: on")
    );
    assert_eq!(
        gray_rule(&s, "app.yaml", &format!("rollout-{id}")).await?,
        None
    );
    let steps: Vec<String> = gray_history_notes(&s, "app.yaml")
        .await?
        .into_iter()
        .map(|(op, expr, message)| format!("{op} {expr} | {message}"))
        .collect();
    let seed = format!("rollout-{id}");
    assert_eq!(
        steps,
        vec![
            format!("I env=canary||ClientIp=10.0.0.7 | rollout {id} step 1/4 (canary)"),
            format!("U 25~{seed} | rollout {id} step 2/4 (25%)"),
            format!("U 50~{seed} | rollout {id} step 3/4 (50%)"),
            format!("U 100~{seed} | rollout {id} step 4/4 (100%)"),
            format!("D 100~{seed} | rollout {id} promoted"),
        ],
        "one gray row per step with its message, then the promotion's removal"
    );
    let audit: Value = s
        .http
        .get(s.url("/nacos/nacelle/v1/audit"))
        .query(&[("pageSize", "100")])
        .send()
        .await?
        .json()
        .await?;
    let actions: Vec<String> = audit["data"]["pageItems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["action"].as_str().map(str::to_string))
        .filter(|a| a.starts_with("rollout-"))
        .collect();
    for wanted in ["rollout-start", "rollout-step", "rollout-promote"] {
        assert!(
            actions.iter().any(|a| a == wanted),
            "{wanted} in {actions:?}"
        );
    }
    Ok(())
}

/// A health URL that starts failing during a bake rolls the rollout back: the gray is
/// stopped (its clients get the formal config), the reason names the URL, and the
/// rollbacks counter counts it under `http`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_health_url_rolls_back() -> TestResult {
    let status = Arc::new(AtomicU16::new(200));
    let asked = Arc::new(AtomicU64::new(0));
    let (flag, count) = (status.clone(), asked.clone());
    let health = tiny_http(move || {
        count.fetch_add(1, Ordering::SeqCst);
        (flag.load(Ordering::SeqCst), "health".into())
    })
    .await?;
    let s = server_allowing(&[health]).await?;
    s.publish("", G, "svc.yaml", "v: old").await?;
    let id = start_ok(
        &s,
        &json!({"dataId": "svc.yaml", "content": "v: new", "steps": [100], "bakeMs": 600000,
                "guards": {"http": format!("http://{health}/healthz")}}),
    )
    .await?;
    until(&s, id, "published", at_step(1)).await?;
    let deadline = Instant::now() + SOON;
    while s.get("", G, "svc.yaml").await?.as_deref() != Some("v: new") {
        assert!(
            Instant::now() < deadline,
            "the 100% step never served the new content"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Healthy for a while: nothing happens. The guard is asked three more times — once
    // a tick, ticks one after the other — so at least two ticks evaluated it, healthy, and
    // handled the rollout to the end.
    three_more(&asked, "the health guard").await?;
    assert_eq!(rollout(&s, id).await?["state"], "running");
    status.store(503, Ordering::SeqCst);
    let r = until(&s, id, "rolled back", state_is("rolled-back")).await?;
    let reason = r["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("answered 503") && reason.contains(&health.to_string()),
        "{r}"
    );
    assert_eq!(s.get("", G, "svc.yaml").await?.as_deref(), Some("v: old"));
    let metrics = s.http.get(s.url("/metrics")).send().await?.text().await?;
    assert!(
        metrics.contains("nacelle_rollout_rollbacks_total{reason=\"http\"} 1"),
        "{metrics}"
    );
    // A finished rollout cannot be resumed or aborted; the key takes a new one.
    assert_eq!(act(&s, "resume", id).await?.0, 409);
    assert_eq!(act(&s, "abort", id).await?.0, 409);
    start_ok(
        &s,
        &json!({"dataId": "svc.yaml", "content": "v: new", "steps": [100], "bakeMs": 600000}),
    )
    .await?;
    Ok(())
}

/// An HTTP endpoint on 127.0.0.1 answering every request with a redirect to `location`.
async fn tiny_redirect(location: String) -> TestResult<SocketAddr> {
    tiny_http_raw(move || {
        format!(
            "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n"
        )
    })
    .await
}

/// An endpoint that counts the requests it gets (answering 200).
async fn counted() -> TestResult<(SocketAddr, Arc<AtomicU64>)> {
    let asked = Arc::new(AtomicU64::new(0));
    let count = asked.clone();
    let addr = tiny_http(move || {
        count.fetch_add(1, Ordering::SeqCst);
        (200, "ok".into())
    })
    .await?;
    Ok((addr, asked))
}

/// The server fetches guard URLs on behalf of whoever starts a rollout, so a rollout may
/// name only what an administrator allowed: a health URL or Prometheus elsewhere is
/// refused before anything is fetched (the address is never asked), even where the
/// allowed prefix is a look-alike; no redirect is followed, even to an allowed address;
/// and a refusal or failure never carries the remote side's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_reach_only_what_an_administrator_allowed() -> TestResult {
    let (elsewhere, elsewhere_asked) = counted().await?;
    let (allowed, allowed_asked) = counted().await?;
    let redirect = tiny_redirect(format!("http://{allowed}/health")).await?;
    let leaky_prometheus = tiny_http(|| {
        (
            400,
            r#"{"status":"error","errorType":"bad_data","error":"db_password=hunter2"}"#.into(),
        )
    })
    .await?;
    let leaky_health = tiny_http(|| (503, "db_password=hunter2".into())).await?;
    let allow = [allowed, redirect, leaky_prometheus, leaky_health];
    let list: Vec<String> = allow
        .iter()
        .map(|a| format!("http://{a}/health"))
        .chain([format!("http://{leaky_prometheus}")])
        .collect();
    let s = TestServer::start_with(move |st| st.rollout_guard_urls = list).await?;
    s.publish("", G, "guarded.yaml", "v: 1").await?;
    let body = |guards: Value| {
        json!({"dataId": "guarded.yaml", "content": "v: 2", "steps": [100], "bakeMs": 600000,
               "guards": guards})
    };
    for guards in [
        json!({"http": format!("http://{elsewhere}/health")}),
        json!({"http": format!("http://{allowed}/admin")}),
        json!({"http": format!("http://{allowed}@{elsewhere}/health")}),
        json!({"prometheus": {"query": "up", "url": format!("http://{elsewhere}")}}),
    ] {
        let (status, v) = start(&s, &body(guards.clone())).await?;
        assert_eq!(status, 400, "{guards}: {v}");
        assert!(
            v.to_string().contains("not among the guard addresses")
                || v.to_string().contains("credentials"),
            "{guards}: {v}"
        );
    }
    assert_eq!(elsewhere_asked.load(Ordering::SeqCst), 0);
    assert_eq!(allowed_asked.load(Ordering::SeqCst), 0);
    // A redirect is the answer (not 2xx: failing), not followed.
    let (status, v) = start(
        &s,
        &body(json!({"http": format!("http://{redirect}/health")})),
    )
    .await?;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("answered 302"), "{v}");
    assert_eq!(
        allowed_asked.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
    // The remote side's text is never repeated.
    let prom =
        json!({"prometheus": {"query": "sum((", "url": format!("http://{leaky_prometheus}")}});
    let (status, v) = start(&s, &body(prom)).await?;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("bad_data"), "{v}");
    assert!(!v.to_string().contains("hunter2"), "{v}");
    let (status, v) = start(
        &s,
        &body(json!({"http": format!("http://{leaky_health}/health")})),
    )
    .await?;
    assert_eq!(status, 400, "{v}");
    assert!(
        v.to_string().contains("answered 503") && !v.to_string().contains("hunter2"),
        "{v}"
    );
    // None of it published anything; the allowed health URL starts one.
    assert_eq!(s.get("", G, "guarded.yaml").await?.as_deref(), Some("v: 1"));
    assert_eq!(gray_history(&s, "guarded.yaml").await?, vec![]);
    let id = start_ok(
        &s,
        &body(json!({"http": format!("http://{allowed}/health")})),
    )
    .await?;
    until(&s, id, "published", at_step(1)).await?;
    assert!(allowed_asked.load(Ordering::SeqCst) >= 1);
    Ok(())
}

/// A rollout whose guard cannot be evaluated (an unreachable health URL, an unreachable
/// Prometheus, a query Prometheus refuses) is refused at its start: nothing is published
/// and no listener is told — a long-poll client of the key at a 100 % step sees the next
/// formal change and never the rollout's content — and the refusal is on record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_whose_guards_cannot_be_evaluated_is_refused_before_its_first_step() -> TestResult
{
    // Ports nothing listens on (bound, then closed).
    let closed = |_: u8| -> TestResult<SocketAddr> {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        Ok(l.local_addr()?)
    };
    let (dead_health, dead_prom) = (closed(0)?, closed(1)?);
    let bad_query = tiny_http(|| {
        (
            400,
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#.into(),
        )
    })
    .await?;
    let list = vec![
        format!("http://{dead_health}"),
        format!("http://{dead_prom}"),
        format!("http://{bad_query}"),
    ];
    let s = TestServer::start_with(move |st| st.rollout_guard_urls = list).await?;
    s.publish("", G, "careful.yaml", "v: old").await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    for (i, ip) in sources(3).into_iter().enumerate() {
        long_poll_client(client_from(&s, ip)?, "careful.yaml", i, tx.clone());
    }
    let mut latest = vec![None; 3];
    all_see(&mut rx, &mut latest, &[0, 1, 2], "v: old").await?;
    let mut seen = vec![];
    for guards in [
        json!({"http": format!("http://{dead_health}/health")}),
        json!({"prometheus": {"query": "up == 0", "url": format!("http://{dead_prom}")}}),
        json!({"prometheus": {"query": "sum((", "url": format!("http://{bad_query}")}}),
    ] {
        let body = json!({"dataId": "careful.yaml", "content": "v: new", "steps": [100],
                          "bakeMs": 0, "guards": guards});
        let (status, v) = start(&s, &body).await?;
        assert_eq!(status, 400, "{guards}: {v}");
        assert!(
            v.to_string().contains("before the first step"),
            "{guards}: {v}"
        );
        seen.push(v);
    }
    // The next change of the formal config reaches every client; none ever saw the
    // rollout's content (a client reports each content it is served, in order).
    s.publish("", G, "careful.yaml", "v: later").await?;
    let mut reports = vec![];
    let deadline = tokio::time::Instant::now() + SOON;
    while reports
        .iter()
        .filter(|(_, c): &&(usize, String)| c == "v: later")
        .count()
        < 3
    {
        let (i, _, content) = tokio::time::timeout_at(deadline, rx.recv())
            .await?
            .ok_or("the long-poll clients ended")?;
        reports.push((i, content));
    }
    assert!(
        reports.iter().all(|(_, c)| c != "v: new"),
        "a listener was told the refused rollout's content: {reports:?}"
    );
    assert_eq!(gray_history(&s, "careful.yaml").await?, vec![]);
    // Each refused start is on record (the trail is stored a moment after).
    let refused = |entries: &[Value]| {
        entries
            .iter()
            .filter(|e| e.to_string().contains("before the first step"))
            .count()
    };
    let entries = audit_until(&s, "", &[("action", "rollout-start")], |e| refused(e) >= 3).await?;
    assert_eq!(refused(&entries), 3, "{entries:?}");
    Ok(())
}

/// The delivery guard: a gRPC client of the cohort that keeps listening with the formal
/// md5 (as an SDK whose fetch of the new version failed re-sends its listen set) is out of
/// date; past the bound the rollout rolls back, naming the client, and the formal content
/// is served again. Until then the rollout runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cohort_client_that_never_takes_the_step_rolls_back_by_the_delivery_guard() -> TestResult
{
    let s = TestServer::start().await?;
    s.publish("", G, "late.yaml", "v: old").await?;
    let old_md5 = md5("v: old");
    let grpc_addr = s.server.as_ref().ok_or("server")?.grpc_addr;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc_addr}"))?
        .connect()
        .await?;
    let mut lagging = Registered::connect(channel).await?;
    assert!(lagging.listen("late.yaml", G, &old_md5).await?.is_ok());
    let id = start_ok(
        &s,
        &json!({"dataId": "late.yaml", "content": "v: new", "steps": [100], "bakeMs": 600000,
                "guards": {"deliveryMs": 2000}}),
    )
    .await?;
    let deadline = Instant::now() + SOON;
    while s.get("", G, "late.yaml").await?.as_deref() != Some("v: new") {
        assert!(
            Instant::now() < deadline,
            "the step never served the new content"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Told of the change, the client never fetches it and listens again with the old md5.
    let told = Instant::now();
    let r = loop {
        assert!(lagging.listen("late.yaml", G, &old_md5).await?.is_ok());
        let r = rollout(&s, id).await?;
        if r["state"] != "running" || Instant::now() > told + SOON {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(r["state"], "rolled-back", "{r}");
    let reason = r["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("did not take the new version within 2000 ms"),
        "{r}"
    );
    println!(
        "a lagging cohort client rolled the rollout back {:?} after it was told",
        told.elapsed()
    );
    assert_eq!(s.get("", G, "late.yaml").await?.as_deref(), Some("v: old"));
    let metrics = s.http.get(s.url("/metrics")).send().await?.text().await?;
    assert!(
        metrics.contains("nacelle_rollout_rollbacks_total{reason=\"delivery\"} 1"),
        "{metrics}"
    );
    Ok(())
}

/// Pause holds a rollout at its step (no advance even once released), resume goes on,
/// abort stops the gray and leaves the formal config; a second active rollout of a key is
/// refused; bad plans are 400s naming the problem; the per-rollout gauges exist only
/// while a rollout is active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_abort_and_bad_input() -> TestResult {
    let tick = TickHealth::new().await?;
    let s = server_allowing(&[tick.addr]).await?;
    s.publish("", G, "ops.yaml", "v: 1").await?;
    let ticks = Ticks::start(&s, tick).await?;
    for (body, words) in [
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [], "bakeMs": 0}),
            "at least one",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [50, 10], "bakeMs": 0}),
            "grow",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [150], "bakeMs": 0}),
            "0.01 to 100",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [10], "bakeMs": -1}),
            "bake",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 1", "steps": [10], "bakeMs": 0}),
            "nothing to roll out",
        ),
        (
            json!({"dataId": "none.yaml", "content": "v: 2", "steps": [10], "bakeMs": 0}),
            "publish the formal config",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [10], "bakeMs": 0,
                "canary": {"ips": ["10.0.0.0/8"]}}),
            "not an IP",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [10], "bakeMs": 0,
                "guards": {"prometheus": {"query": "up == 0"}}}),
            "--prometheus-url",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [10], "bakeMs": 0,
                "guards": {"http": "ftp://x"}}),
            "http://",
        ),
        (
            json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [10], "bakeMs": 0,
                "surprise": 1}),
            "unknown field",
        ),
    ] {
        let (status, v) = start(&s, &body).await?;
        assert!(status == 400 || status == 404, "{body}: {status} {v}");
        assert!(
            v.to_string().contains(words),
            "{body}: {v} should say {words:?}"
        );
    }
    let id = start_ok(
        &s,
        &json!({"dataId": "ops.yaml", "content": "v: 2", "steps": [20, 100], "bakeMs": 400}),
    )
    .await?;
    let (status, v) = start(
        &s,
        &json!({"dataId": "ops.yaml", "content": "v: 3", "steps": [10], "bakeMs": 0}),
    )
    .await?;
    assert_eq!(status, 409, "a second active rollout of the key: {v}");
    until(&s, id, "at step 1", at_step(1)).await?;
    let (status, v) = act(&s, "pause", id).await?;
    assert_eq!(
        (status, v["data"]["state"].as_str()),
        (200, Some("paused")),
        "{v}"
    );
    assert_eq!(act(&s, "pause", id).await?.0, 409);
    // Released while paused: it stays until resumed, through a whole tick of the driver.
    assert_eq!(act(&s, "advance", id).await?.0, 200);
    ticks.a_whole_one().await?;
    let r = rollout(&s, id).await?;
    assert_eq!(
        (r["state"].as_str(), r["step"].as_u64()),
        (Some("paused"), Some(1)),
        "{r}"
    );
    let metrics = s.http.get(s.url("/metrics")).send().await?.text().await?;
    assert!(
        metrics.contains(&format!("nacelle_rollout_step{{rollout=\"{id}\"}} 1")),
        "{metrics}"
    );
    ticks.stop(&s).await?;
    assert_eq!(act(&s, "resume", id).await?.0, 200);
    until(&s, id, "at step 2", at_step(2)).await?;
    let (status, v) = act(&s, "abort", id).await?;
    assert_eq!(
        (status, v["data"]["state"].as_str()),
        (200, Some("aborted")),
        "{v}"
    );
    assert_eq!(
        gray_rule(&s, "ops.yaml", &format!("rollout-{id}")).await?,
        None
    );
    assert_eq!(s.get("", G, "ops.yaml").await?.as_deref(), Some("v: 1"));
    let listed: Value = s.http.get(s.url(ROLLOUTS)).send().await?.json().await?;
    assert_eq!(listed["data"][0]["id"], id, "{listed}");
    assert!(
        listed["data"][0].get("content").is_none(),
        "listings carry no content"
    );
    let active: Value = s
        .http
        .get(s.url(ROLLOUTS))
        .query(&[("active", "true")])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(active["data"], json!([]), "{active}");
    for (path, verb) in [
        ("/nacos/nacelle/v1/rollout?id=x", "GET"),
        ("/nacos/nacelle/v1/rollout", "GET"),
    ] {
        let resp = s.http.get(s.url(path)).send().await?;
        assert_eq!(resp.status().as_u16(), 400, "{verb} {path}");
    }
    assert_eq!(act(&s, "abort", id + 100).await?.0, 404);
    // The driver's next tick drops the ended rollouts' series.
    let deadline = Instant::now() + SOON;
    loop {
        let metrics = s.http.get(s.url("/metrics")).send().await?.text().await?;
        if !metrics.contains("nacelle_rollout_step{") {
            break;
        }
        assert!(Instant::now() < deadline, "{metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A real Prometheus scrapes a metric the test controls; the rollout's guard queries it.
/// Flipping the metric during the bake rolls the rollout back and every cohort client —
/// long-polling over HTTP v1 from distinct addresses and the Rust SDK over gRPC — gets
/// the formal content again. Prints the time from the flip to the last client told.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prometheus_alarm_rolls_back_every_cohort_client() -> TestResult {
    let alarm = Arc::new(AtomicU64::new(0));
    let value = alarm.clone();
    let target = tiny_http(move || {
        (
            200,
            format!(
                "# TYPE rollout_test_errors gauge\nrollout_test_errors {}\n",
                value.load(Ordering::SeqCst)
            ),
        )
    })
    .await?;
    let prom = Prometheus::start(target).await?;
    let deadline = Instant::now() + SOON;
    while prom.series("rollout_test_errors").await? == 0 {
        assert!(
            Instant::now() < deadline,
            "prometheus never scraped the test target"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let url = prom.url.clone();
    let s = TestServer::start_with(move |st| st.prometheus_url = Some(url)).await?;
    s.publish("", G, "alarm.yaml", "mode: formal").await?;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let long_polls = 12;
    for (i, ip) in sources(long_polls).into_iter().enumerate() {
        long_poll_client(client_from(&s, ip)?, "alarm.yaml", i, tx.clone());
    }
    let server = s.server.as_ref().ok_or("server")?;
    let mut sdks = Vec::new();
    for i in 0..3 {
        let sdk = Sdk::connect(
            server.http_addr.port(),
            server.grpc_addr.port(),
            "",
            &format!("grpc-app-{i}"),
        )
        .await?;
        let (listener, mut notes) = recorder();
        let first = sdk
            .client
            .get_config("alarm.yaml".into(), G.into())
            .await
            .map_err(|e| format!("sdk get: {e}"))?;
        sdk.client
            .add_listener("alarm.yaml".into(), G.into(), listener)
            .await
            .map_err(|e| format!("sdk listen: {e}"))?;
        let idx = long_polls + i;
        let seen = tx.clone();
        assert!(seen
            .send((idx, Instant::now(), first.content().clone()))
            .is_ok());
        tokio::spawn(async move {
            while let Ok((at, content)) = notes.next(Duration::from_secs(3600)).await {
                if seen.send((idx, at, content)).is_err() {
                    return;
                }
            }
        });
        sdks.push(sdk);
    }
    let everyone: Vec<usize> = (0..long_polls + 3).collect();
    let mut latest = vec![None; everyone.len()];
    all_see(&mut rx, &mut latest, &everyone, "mode: formal").await?;

    let id = start_ok(
        &s,
        &json!({"dataId": "alarm.yaml", "content": "mode: new", "steps": [100],
                "bakeMs": 600000,
                "guards": {"prometheus": {"query": "rollout_test_errors > 0"}}}),
    )
    .await?;
    all_see(&mut rx, &mut latest, &everyone, "mode: new").await?;
    // The rollout's cohort, from the live view: every listener (long polls between two
    // polls aside) is in the 100 % cohort and holds the step's version.
    let n = everyone.len() as u64;
    let r = until(
        &s,
        id,
        "counted its whole cohort holding the new version",
        |r| {
            let c = &r["cohort"];
            c["listeners"] == n && c["cohort"] == n && c["holding"] == n && c["complete"] == true
        },
    )
    .await?;
    assert_eq!(r["cohort"]["nodes"][0]["holding"], n, "{r}");
    // Quiet while the alarm is off. Prometheus answers the guard's query three more
    // times — once a tick, ticks one after the other — so at least two ticks evaluated
    // it, the alarm off, and handled the rollout to the end.
    let mark = prom.queries_answered().await?;
    let deadline = Instant::now() + SOON;
    while prom.queries_answered().await? < mark + 3 {
        assert!(
            Instant::now() < deadline,
            "prometheus did not answer the guard's query three times"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rollout(&s, id).await?["state"], "running");

    alarm.store(3, Ordering::SeqCst);
    let flipped = Instant::now();
    let last = all_see(&mut rx, &mut latest, &everyone, "mode: formal").await?;
    println!(
        "alarm raised → last of {} cohort clients ({long_polls} long-poll, 3 gRPC) told the \
         formal content: {:?}",
        everyone.len(),
        last.saturating_duration_since(flipped)
    );
    let r = until(&s, id, "rolled back", state_is("rolled-back")).await?;
    assert!(
        r["reason"]
            .as_str()
            .unwrap_or("")
            .contains("rollout_test_errors > 0"),
        "{r}"
    );
    assert_eq!(
        s.get("", G, "alarm.yaml").await?.as_deref(),
        Some("mode: formal")
    );
    drop(sdks);
    Ok(())
}

/// Two nodes on MariaDB: the node holding a rollout's lease is killed mid-rollout; the
/// other takes the lease over and resumes at the same step (it publishes nothing twice),
/// then a restarted node and an `advance` finish it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_node_takes_over_a_killed_driver_and_resumes_the_step() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let secret = "rollout-cluster-secret-0123456789";
    let ports: Vec<(u16, u16)> = (0..2)
        .map(|_| Ok((free_port_with(&[1001])?, free_port()?)))
        .collect::<TestResult<_>>()?;
    let members = ports
        .iter()
        .map(|(http, _)| format!("127.0.0.1:{http}"))
        .collect::<Vec<_>>()
        .join(",");
    let dirs = [tempfile::tempdir()?, tempfile::tempdir()?];
    let spawn = |i: usize| -> TestResult<BinaryServer> {
        let (http, grpc) = (ports[i].0.to_string(), ports[i].1.to_string());
        Ok(BinaryServer::spawn(
            NACELLE,
            dirs[i].path(),
            &[
                "--port",
                &http,
                "--grpc-port",
                &grpc,
                "--db",
                &db.url,
                "--members",
                &members,
                "--cluster-secret",
                secret,
                "--follow-interval-ms",
                "300",
                "--member-check-interval-ms",
                "300",
            ],
        )?)
    };
    let mut nodes = vec![spawn(0)?, spawn(1)?];
    for n in &nodes {
        n.api.wait_ready().await?;
    }
    nodes[0].api.publish("", G, "lease.yaml", "v: 1").await?;
    let id = start_ok(
        &nodes[0].api,
        &json!({"dataId": "lease.yaml", "content": "v: 2", "steps": [30, 60, 100],
                "bakeMs": 0, "manual": true}),
    )
    .await?;
    let api0 = nodes[0].api.clone();
    until(&api0, id, "at step 1", at_step(1)).await?;
    assert_eq!(act(&api0, "advance", id).await?.0, 200);
    let r = until(&api0, id, "at step 2 with a lease", |r| {
        r["step"] == 2 && r["leaseHolder"].as_str().is_some_and(|h| !h.is_empty())
    })
    .await?;
    let holder = r["leaseHolder"].as_str().unwrap_or("").to_string();
    let driver = nodes
        .iter()
        .position(|n| holder.starts_with(&n.addr.to_string()))
        .ok_or(format!("no node holds {holder}"))?;
    let other = 1 - driver;
    let rule = format!("percent:60~rollout-{id}");
    let deadline = Instant::now() + SOON;
    while gray_rule(&nodes[other].api, "lease.yaml", &format!("rollout-{id}"))
        .await?
        .as_deref()
        != Some(rule.as_str())
    {
        assert!(Instant::now() < deadline, "step 2 never published");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rows_before = gray_history(&nodes[other].api, "lease.yaml").await?.len();

    nodes[driver].kill9()?;
    let killed = Instant::now();
    let api = nodes[other].api.clone();
    let r = until(&api, id, "taken over", |r| {
        r["leaseHolder"].as_str().is_some_and(|h| h != holder)
    })
    .await?;
    println!(
        "lease taken over {:?} after the driver was killed",
        killed.elapsed()
    );
    assert!(r["leaseHolder"]
        .as_str()
        .unwrap_or("")
        .starts_with(&nodes[other].addr.to_string()));
    assert_eq!(
        (r["state"].as_str(), r["step"].as_u64()),
        (Some("running"), Some(2)),
        "{r}"
    );
    // The killed node comes back on its data directory and sees the same step.
    nodes[driver] = spawn(driver)?;
    nodes[driver].api.wait_ready().await?;
    let r = rollout(&nodes[driver].api, id).await?;
    assert_eq!(
        (r["state"].as_str(), r["step"].as_u64()),
        (Some("running"), Some(2)),
        "{r}"
    );
    assert_eq!(act(&nodes[driver].api, "advance", id).await?.0, 200);
    until(&api, id, "at step 3", at_step(3)).await?;
    // The new driver resumed step 2 without publishing it again: the key's gray history
    // goes on with step 3.
    until_gray(&api, "lease.yaml", id, &format!("percent:100~rollout-{id}")).await?;
    let rows = gray_history(&api, "lease.yaml").await?;
    assert_eq!(
        rows.get(rows_before..),
        Some(&[("U".to_string(), format!("100~rollout-{id}"))][..]),
        "the new driver resumed the step without publishing it again: {rows:?}"
    );
    assert_eq!(act(&api, "advance", id).await?.0, 200);
    until(&api, id, "promoted", state_is("promoted")).await?;
    for n in &nodes {
        let deadline = Instant::now() + SOON;
        while n.api.get("", G, "lease.yaml").await?.as_deref() != Some("v: 2") {
            assert!(
                Instant::now() < deadline,
                "node {} never served the promotion",
                n.addr
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// `nacelle rollout …` against the real binary: start (manual), status, ls, advance,
/// pause, resume, abort, and a bad duration as a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_drives_a_rollout() -> TestResult {
    let data = tempfile::tempdir()?;
    let work = tempfile::tempdir()?;
    let grpc = free_port()?.to_string();
    let server = BinaryServer::spawn(NACELLE, data.path(), &["--grpc-port", grpc.as_str()])?;
    server.api.wait_ready().await?;
    let addr = format!("127.0.0.1:{}/{grpc}", server.addr.port());
    let run = |args: &[&str]| -> TestResult<(bool, String, String)> {
        let mut c = Command::new(NACELLE);
        for (k, _) in std::env::vars() {
            if k.starts_with("NACELLE_") {
                c.env_remove(k);
            }
        }
        let out = c
            .args(args)
            .env("XDG_CONFIG_HOME", work.path())
            .env("NACELLE_SERVER", &addr)
            .current_dir(work.path())
            .stdin(Stdio::null())
            .output()?;
        Ok((
            out.status.success(),
            String::from_utf8(out.stdout)?,
            String::from_utf8(out.stderr)?,
        ))
    };
    let json_of = |args: &[&str]| -> TestResult<Value> {
        let (ok, out, err) = run(args)?;
        assert!(ok, "nacelle {args:?}: {err}");
        Ok(serde_json::from_str(&out)?)
    };
    server.api.publish("", G, "cli.yaml", "v: 1").await?;
    let file = work.path().join("new.yaml");
    std::fs::write(&file, "v: 2\n")?;
    let file = file.to_string_lossy().to_string();
    let started = json_of(&[
        "rollout",
        "start",
        "cli.yaml",
        &file,
        "--steps",
        "50,100",
        "--bake",
        "10m",
        "--manual",
        "--canary-ips",
        "10.0.0.7",
        "--guard-delivery",
        "30s",
        "-o",
        "json",
    ])?;
    let id = started["id"].as_i64().ok_or("no id")?.to_string();
    assert_eq!(started["state"], "running", "{started}");
    assert_eq!(started["steps"], 3, "{started}");
    assert_eq!(started["guards"]["deliveryMs"], 30000, "{started}");
    let (ok, text, _) = run(&["rollout", "status", &id])?;
    assert!(
        ok && text.contains(&format!("rollout {id} is: running at step 1/3 (canary)")),
        "{text}"
    );
    let advanced = json_of(&["rollout", "advance", &id, "-o", "json"])?;
    assert_eq!(advanced["state"], "running", "{advanced}");
    until(&server.api, id.parse()?, "at step 2", at_step(2)).await?;
    let listed = json_of(&["rollout", "ls", "--active", "-o", "json"])?;
    assert_eq!(listed[0]["id"].to_string(), id, "{listed}");
    assert_eq!(listed[0]["percent"], 50.0, "{listed}");
    let paused = json_of(&["rollout", "pause", &id, "-m", "looking", "-o", "json"])?;
    assert_eq!(paused["state"], "paused", "{paused}");
    assert!(
        paused["reason"].as_str().unwrap_or("").ends_with("looking"),
        "{paused}"
    );
    assert_eq!(
        json_of(&["rollout", "resume", &id, "-o", "json"])?["state"],
        "running"
    );
    let aborted = json_of(&["rollout", "abort", &id, "-m", "enough", "-o", "json"])?;
    assert_eq!(aborted["state"], "aborted", "{aborted}");
    assert_eq!(
        server.api.get("", G, "cli.yaml").await?.as_deref(),
        Some("v: 1")
    );
    let (ok, _, err) = run(&["rollout", "abort", &id])?;
    assert!(!ok && err.contains("aborted"), "{err}");
    let (ok, _, err) = run(&[
        "rollout", "start", "cli.yaml", &file, "--steps", "10", "--bake", "10x",
    ])?;
    assert!(!ok && err.contains("not a duration"), "{err}");
    Ok(())
}

/// Under a review policy a rollout cannot be started directly (it is a write of the key);
/// one started before the policy goes on: its steps are the server's own writes, whose
/// start passed the gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_policies_gate_the_start_not_the_steps() -> TestResult {
    let s = TestServer::start().await?;
    s.publish("", "REVIEWED", "gated.yaml", "v: 1").await?;
    s.publish("", "REVIEWED", "early.yaml", "v: 1").await?;
    let id = start_ok(
        &s,
        &json!({"group": "REVIEWED", "dataId": "early.yaml", "content": "v: 2",
                "steps": [10, 100], "bakeMs": 0, "manual": true}),
    )
    .await?;
    until(&s, id, "at step 1", at_step(1)).await?;
    let policy = s
        .http
        .post(s.url("/nacos/nacelle/v1/review-policies"))
        .form(&[("groupPattern", "REVIEWED"), ("requiredApprovals", "1")])
        .send()
        .await?;
    assert_eq!(policy.status().as_u16(), 200, "{}", policy.text().await?);
    let (status, v) = start(
        &s,
        &json!({"group": "REVIEWED", "dataId": "gated.yaml", "content": "v: 2",
                "steps": [100], "bakeMs": 0}),
    )
    .await?;
    assert_eq!(status, 403, "{v}");
    assert!(v.to_string().contains("review policy"), "{v}");
    assert_eq!(act(&s, "advance", id).await?.0, 200);
    until(&s, id, "at step 2", at_step(2)).await?;
    assert_eq!(act(&s, "advance", id).await?.0, 200);
    until(&s, id, "promoted", state_is("promoted")).await?;
    assert_eq!(
        s.get("", "REVIEWED", "early.yaml").await?.as_deref(),
        Some("v: 2")
    );
    Ok(())
}

/// A single server (SQLite) killed mid-rollout and started again on its data directory:
/// the new process takes the lease once the old one expires and resumes at the step in
/// the database — the step's gray is not published again — and the rollout finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_resumes_the_step() -> TestResult {
    let data = tempfile::tempdir()?;
    let port = free_port()?.to_string();
    let args = ["--port", port.as_str()];
    let mut server = BinaryServer::spawn(NACELLE, data.path(), &args)?;
    server.api.wait_ready().await?;
    server.api.publish("", G, "restart.yaml", "v: 1").await?;
    let id = start_ok(
        &server.api,
        &json!({"dataId": "restart.yaml", "content": "v: 2", "steps": [20, 60, 100],
                "bakeMs": 0, "manual": true}),
    )
    .await?;
    until(&server.api, id, "at step 1", at_step(1)).await?;
    assert_eq!(act(&server.api, "advance", id).await?.0, 200);
    let before = until(&server.api, id, "at step 2, published", |r| {
        r["step"] == 2
            && r["reason"]
                .as_str()
                .is_some_and(|s| s.starts_with("step 2/3"))
    })
    .await?;
    let rule = format!("percent:60~rollout-{id}");
    let deadline = Instant::now() + SOON;
    while gray_rule(&server.api, "restart.yaml", &format!("rollout-{id}"))
        .await?
        .as_deref()
        != Some(rule.as_str())
    {
        assert!(Instant::now() < deadline, "step 2 never published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rows = gray_history(&server.api, "restart.yaml").await?.len();

    server.kill9()?;
    server = BinaryServer::spawn(NACELLE, data.path(), &args)?;
    server.api.wait_ready().await?;
    let old_holder = before["leaseHolder"].as_str().unwrap_or("").to_string();
    let r = until(&server.api, id, "driven by the new process", |r| {
        r["leaseHolder"]
            .as_str()
            .is_some_and(|h| !h.is_empty() && h != old_holder)
    })
    .await?;
    assert_eq!(
        (r["state"].as_str(), r["step"].as_u64()),
        (Some("running"), Some(2)),
        "{r}"
    );
    assert_eq!(act(&server.api, "advance", id).await?.0, 200);
    until(&server.api, id, "at step 3", at_step(3)).await?;
    // The restarted server resumed step 2 without publishing it again: the key's gray
    // history goes on with step 3.
    until_gray(
        &server.api,
        "restart.yaml",
        id,
        &format!("percent:100~rollout-{id}"),
    )
    .await?;
    let history = gray_history(&server.api, "restart.yaml").await?;
    assert_eq!(
        history.get(rows..),
        Some(&[("U".to_string(), format!("100~rollout-{id}"))][..]),
        "the restarted server resumed the step without publishing it again: {history:?}"
    );
    assert_eq!(act(&server.api, "advance", id).await?.0, 200);
    until(&server.api, id, "promoted", state_is("promoted")).await?;
    assert_eq!(
        server.api.get("", G, "restart.yaml").await?.as_deref(),
        Some("v: 2")
    );
    Ok(())
}
