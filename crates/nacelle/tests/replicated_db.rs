//! Clusters on a replicated database under faults (issue 38): three Nacelle nodes on a
//! MariaDB Galera cluster (each on a database node of its own) and on a PostgreSQL primary
//! with a synchronous streaming standby behind HAProxy; a publish storm from six writers
//! (HTTP and gRPC, two per node) with gRPC listeners (the real Rust client) and HTTP long
//! polls on every node, while a Galera node is SIGKILLed and later restarted (it rejoins by
//! IST), or the PostgreSQL primary is SIGKILLed and the standby promoted.
//!
//! Each test asserts, and prints:
//! - every node kept serving reads (a reader per node, never a failed GET);
//! - writes failed fast with a clear error during the fault (503 naming the database, or
//!   the gRPC error; never a hang) and succeed after it on every node, without a restart;
//! - no acknowledged write is lost: every acknowledged content is in the database's
//!   history, and no key's final content is older than its last acknowledged write;
//! - every node converges to the database's content: the time from the database being
//!   writable again until each node serves it all (the issue asks ≤ 2 s; printed, not
//!   asserted), and again after the storm's last write;
//! - every listener (gRPC and long poll, on every node) ends with the last value.
//!
//! A failing test prints the nodes' warnings (and HAProxy's log); `NACELLE_TEST_LOGS=1`
//! prints them always.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nacelle_testkit::grpc::Sdk;
use nacelle_testkit::per_backend::skipped;
use nacelle_testkit::server::BinaryServer;
use nacelle_testkit::{
    free_port, free_port_with, listening_configs, md5, Api, Backend, Galera, PgStandby, TestResult,
};
use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse};
use sqlx::Connection;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");
const SECRET: &str = "test-cluster-secret-0123456789";
const GROUP: &str = "STORM";
/// Keys each writer cycles through (its own: no two writers write one key).
const KEYS_PER_WRITER: usize = 3;
/// Longer than anything that is not a hang: a failing write answers within the pool's
/// acquire timeout or the operation deadline (3 s, 10 s by default).
const HANG: Duration = Duration::from_secs(30);

/// A Nacelle node: the real binary.
struct Node {
    server: BinaryServer,
    http: u16,
    grpc: u16,
    _dir: tempfile::TempDir,
}

impl Node {
    fn api(&self, http: &reqwest::Client) -> Api {
        Api::with_client(http.clone(), self.server.addr)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let lines = self.server.log_tail(5000);
            let notable: Vec<&String> = lines
                .iter()
                .filter(|l| !l.contains("\"level\":\"INFO\"") && !l.contains("\"level\":\"DEBUG\""))
                .collect();
            eprintln!(
                "node :{} (the test failed), its warnings and errors:",
                self.http
            );
            for l in notable.iter().skip(notable.len().saturating_sub(60)) {
                eprintln!("  {l}");
            }
        }
    }
}

/// Starts one node per database URL, all members of one cluster; the first alone until
/// ready (it creates the schema), then the others.
async fn start_nodes(urls: &[String]) -> TestResult<Vec<Node>> {
    let ports = urls
        .iter()
        .map(|_| Ok((free_port_with(&[1001])?, free_port()?)))
        .collect::<TestResult<Vec<(u16, u16)>>>()?;
    let members = ports
        .iter()
        .map(|(http, _)| format!("127.0.0.1:{http}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes = Vec::new();
    for (url, (http, grpc)) in urls.iter().zip(ports) {
        let dir = tempfile::tempdir()?;
        let (http_s, grpc_s) = (http.to_string(), grpc.to_string());
        let args = [
            "--port",
            &http_s,
            "--grpc-port",
            &grpc_s,
            "--db",
            url,
            "--members",
            &members,
            "--cluster-secret",
            SECRET,
        ];
        let server = BinaryServer::spawn(NACELLE, dir.path(), &args)?;
        server.api.wait_ready().await?;
        nodes.push(Node {
            server,
            http,
            grpc,
            _dir: dir,
        });
    }
    Ok(nodes)
}

/// How a writer publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Http,
    Grpc,
}

/// One publish of the storm and its answer.
#[derive(Debug, Clone)]
struct Attempt {
    writer: usize,
    node: usize,
    via: Via,
    key: String,
    seq: u64,
    content: String,
    /// Acknowledged: HTTP 200 `true`, gRPC success.
    acked: bool,
    /// The answer when not acknowledged.
    error: String,
    started: Instant,
    took: Duration,
}

/// What the storm's tasks do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Run,
    Pause,
    Stop,
}

/// The last value each listener was told of, per key, and when it arrived.
#[derive(Debug, Default)]
struct LastSeen(Mutex<HashMap<String, (String, Instant)>>);

impl LastSeen {
    fn set(&self, key: &str, content: &str) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.get(key).is_none_or(|(c, _)| c != content) {
            map.insert(key.to_string(), (content.to_string(), Instant::now()));
        }
    }

    fn get(&self, key: &str) -> Option<(String, Instant)> {
        let map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(key).cloned()
    }
}

/// A nacos-sdk listener recording the last content of every key it is told of.
struct Recorder(Arc<LastSeen>);

impl ConfigChangeListener for Recorder {
    fn notify(&self, resp: ConfigResponse) {
        self.0.set(resp.data_id(), resp.content());
    }
}

/// A listener on a node: what it is and what it saw.
struct Listener {
    node: usize,
    kind: &'static str,
    seen: Arc<LastSeen>,
}

/// The storm: writers, listeners and readers on every node.
struct Storm {
    phase: watch::Sender<Phase>,
    attempts: Arc<Mutex<Vec<Attempt>>>,
    /// Publishes under way.
    in_flight: Arc<AtomicUsize>,
    writers: Vec<JoinHandle<()>>,
    readers: Vec<JoinHandle<(usize, u64, Vec<String>)>>,
    polls: Vec<JoinHandle<()>>,
    listeners: Vec<Listener>,
    /// Keep the gRPC clients (and their listeners) alive.
    _sdks: Vec<Arc<Sdk>>,
    keys: Vec<String>,
}

/// What the storm recorded.
struct Recorded {
    attempts: Vec<Attempt>,
    /// Per node: reads answered 200, and the failed ones.
    reads: Vec<(usize, u64, Vec<String>)>,
    listeners: Vec<Listener>,
    keys: Vec<String>,
}

impl Storm {
    /// Seeds the key the readers read, registers the listeners on every node and starts
    /// two writers per node (HTTP and gRPC).
    async fn start(nodes: &[Node], http: &reqwest::Client) -> TestResult<Storm> {
        nodes[0]
            .api(http)
            .publish("", GROUP, "seed", "seeded")
            .await?;
        for node in nodes {
            until_served(node, http, "seed", "seeded").await?;
        }
        let writers_n = nodes.len() * 2;
        let keys: Vec<String> = (0..writers_n)
            .flat_map(|w| (0..KEYS_PER_WRITER).map(move |k| format!("w{w}-k{k}")))
            .collect();
        let (phase, _) = watch::channel(Phase::Run);
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let mut storm = Storm {
            phase,
            attempts,
            in_flight: Arc::new(AtomicUsize::new(0)),
            writers: Vec::new(),
            readers: Vec::new(),
            polls: Vec::new(),
            listeners: Vec::new(),
            _sdks: Vec::new(),
            keys: keys.clone(),
        };
        for (i, node) in nodes.iter().enumerate() {
            // The real Rust client: listens to every key, and publishes for one writer.
            let sdk = Arc::new(Sdk::connect(node.http, node.grpc, "", "nacelle-storm").await?);
            let seen = Arc::new(LastSeen::default());
            for key in &keys {
                sdk.client
                    .add_listener(
                        key.clone(),
                        GROUP.to_string(),
                        Arc::new(Recorder(seen.clone())),
                    )
                    .await
                    .map_err(|e| format!("nacos-sdk add_listener: {e}"))?;
            }
            storm.listeners.push(Listener {
                node: i,
                kind: "gRPC (nacos-sdk)",
                seen,
            });
            // An HTTP long poll of every key.
            let seen = Arc::new(LastSeen::default());
            storm.polls.push(tokio::spawn(long_polls(
                node.api(http),
                keys.clone(),
                seen.clone(),
            )));
            storm.listeners.push(Listener {
                node: i,
                kind: "HTTP long poll",
                seen,
            });
            storm.readers.push(tokio::spawn(reads(
                i,
                node.api(http),
                storm.phase.subscribe(),
            )));
            for via in [Via::Http, Via::Grpc] {
                let w = storm.writers.len();
                let own: Vec<String> =
                    keys[w * KEYS_PER_WRITER..(w + 1) * KEYS_PER_WRITER].to_vec();
                storm.writers.push(tokio::spawn(write(
                    WriterSpec {
                        writer: w,
                        node: i,
                        via,
                        keys: own,
                    },
                    node.api(http),
                    sdk.clone(),
                    (storm.attempts.clone(), storm.in_flight.clone()),
                    storm.phase.subscribe(),
                )));
            }
            storm._sdks.push(sdk);
        }
        for node in nodes {
            node.api(http)
                .wait_listener("", GROUP, &keys[0], Duration::from_secs(30))
                .await?;
        }
        Ok(storm)
    }

    /// Pauses the writers and waits until none is in the middle of a publish.
    async fn pause(&self) {
        self.phase.send_replace(Phase::Pause);
        // A writer checks the phase between publishes; one in flight ends within HANG.
        tokio::time::sleep(Duration::from_millis(100)).await;
        while self.in_flight.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn resume(&self) {
        self.phase.send_replace(Phase::Run);
    }

    /// Stops the writers and readers (the listeners keep listening) and returns what was
    /// recorded.
    async fn stop(self) -> TestResult<(Recorded, Vec<JoinHandle<()>>, Vec<Arc<Sdk>>)> {
        self.phase.send_replace(Phase::Stop);
        for w in self.writers {
            tokio::time::timeout(HANG, w).await??;
        }
        let mut reads = Vec::new();
        for r in self.readers {
            reads.push(tokio::time::timeout(HANG, r).await??);
        }
        let attempts = self
            .attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Ok((
            Recorded {
                attempts,
                reads,
                listeners: self.listeners,
                keys: self.keys,
            },
            self.polls,
            self._sdks,
        ))
    }
}

struct WriterSpec {
    writer: usize,
    node: usize,
    via: Via,
    keys: Vec<String>,
}

/// Publishes `<key>#<seq>` to its keys in turn until stopped, recording every answer;
/// after a failure it waits 100 ms (a client retrying, not a busy loop).
async fn write(
    spec: WriterSpec,
    api: Api,
    sdk: Arc<Sdk>,
    (attempts, in_flight): (Arc<Mutex<Vec<Attempt>>>, Arc<AtomicUsize>),
    mut phase: watch::Receiver<Phase>,
) {
    let mut seq = 0u64;
    loop {
        let now = *phase.borrow_and_update();
        match now {
            Phase::Stop => return,
            Phase::Pause => {
                if phase.changed().await.is_err() {
                    return;
                }
                continue;
            }
            Phase::Run => {}
        }
        let key = spec.keys[(seq as usize) % spec.keys.len()].clone();
        let content = format!("{key}#{seq}");
        in_flight.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        let answer: Result<(), String> = match spec.via {
            Via::Http => match api.try_publish("", GROUP, &key, &content).await {
                Ok(r) if r.status == 200 && r.body == "true" => Ok(()),
                Ok(r) => Err(format!("HTTP {} {}", r.status, r.body.trim())),
                Err(e) => Err(format!("HTTP client: {e:#}")),
            },
            Via::Grpc => {
                let publish = sdk.client.publish_config(
                    key.clone(),
                    GROUP.to_string(),
                    content.clone(),
                    None,
                );
                match tokio::time::timeout(HANG, publish).await {
                    Ok(Ok(true)) => Ok(()),
                    Ok(Ok(false)) => Err("gRPC: publish answered false".into()),
                    Ok(Err(e)) => Err(format!("gRPC: {e}")),
                    Err(_) => Err(format!("gRPC: no answer within {HANG:?}")),
                }
            }
        };
        let took = started.elapsed();
        in_flight.fetch_sub(1, Ordering::SeqCst);
        let failed = answer.is_err();
        attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Attempt {
                writer: spec.writer,
                node: spec.node,
                via: spec.via,
                key,
                seq,
                content,
                acked: !failed,
                error: answer.err().unwrap_or_default(),
                started,
                took,
            });
        seq += 1;
        if failed {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// An HTTP long-poll client of `keys` (as Nacos 1.x clients poll): on every change it
/// reads the changed values and records them; runs until the task is aborted.
async fn long_polls(api: Api, keys: Vec<String>, seen: Arc<LastSeen>) {
    let mut md5s: HashMap<String, String> =
        keys.iter().map(|k| (k.clone(), String::new())).collect();
    loop {
        let records: Vec<(&str, &str, &str, Option<&str>)> = keys
            .iter()
            .map(|k| (k.as_str(), GROUP, md5s[k].as_str(), None))
            .collect();
        let listening = listening_configs(&records);
        let changed = match api.long_poll(&listening, Some(3000), &[]).await {
            Ok(r) if r.status == 200 => !r.body.trim().is_empty(),
            _ => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if !changed {
            continue;
        }
        for key in &keys {
            if let Ok(Some(content)) = api.get("", GROUP, key).await {
                md5s.insert(key.clone(), md5(&content));
                seen.set(key, &content);
            }
        }
    }
}

/// Reads the seeded key every 50 ms until stopped: (node, reads answered 200, failures).
async fn reads(
    node: usize,
    api: Api,
    mut phase: watch::Receiver<Phase>,
) -> (usize, u64, Vec<String>) {
    let (mut ok, mut failed) = (0u64, Vec::new());
    loop {
        if *phase.borrow_and_update() == Phase::Stop {
            return (node, ok, failed);
        }
        match api.get("", GROUP, "seed").await {
            Ok(Some(c)) if c == "seeded" => ok += 1,
            other => failed.push(format!("{other:?}")),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `node` serves `content` for `key`.
async fn until_served(node: &Node, http: &reqwest::Client, key: &str, content: &str) -> TestResult {
    let deadline = Instant::now() + HANG;
    loop {
        if node.api(http).get("", GROUP, key).await?.as_deref() == Some(content) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("node :{} never served {key} = {content}", node.http).into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until `node` serves `expected` for every key; how long since `from`, and the
/// keys that differed at the first look (how stale it was).
async fn converge(
    node: &Node,
    http: &reqwest::Client,
    expected: &HashMap<String, String>,
    from: Instant,
) -> TestResult<(Duration, usize)> {
    let api = node.api(http);
    let mut first_stale = None;
    loop {
        let mut stale = 0;
        for (key, content) in expected {
            if api.get("", GROUP, key).await?.as_deref() != Some(content.as_str()) {
                stale += 1;
            }
        }
        first_stale.get_or_insert(stale);
        if stale == 0 {
            return Ok((from.elapsed(), first_stale.unwrap_or(0)));
        }
        if from.elapsed() > HANG {
            return Err(format!(
                "node :{} still serves {stale} of {} keys differently from the database \
                 {HANG:?} after it was writable",
                node.http,
                expected.len()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Per node: how long until it served the database's content, and how many keys it served
/// differently at the first look.
type Converged = [(Duration, usize)];

/// Every node's convergence to `expected` from `from`, measured side by side.
async fn converge_all(
    nodes: &[Node],
    http: &reqwest::Client,
    expected: &HashMap<String, String>,
    from: Instant,
) -> TestResult<Vec<(Duration, usize)>> {
    let all = nodes.iter().map(|n| converge(n, http, expected, from));
    futures::future::join_all(all).await.into_iter().collect()
}

/// The storm's keys as the database holds them: current contents, and every content
/// its history recorded per key (as Nacos: the content each change replaced).
#[derive(Debug, PartialEq)]
struct DbView {
    current: HashMap<String, String>,
    history: HashMap<String, HashSet<String>>,
}

const CURRENT_SQL: &str = "SELECT data_id, content FROM config_info WHERE group_id = 'STORM'";
const HISTORY_SQL: &str = "SELECT data_id, content FROM his_config_info WHERE group_id = 'STORM'";

fn view(current: Vec<(String, String)>, history: Vec<(String, String)>) -> DbView {
    let mut h: HashMap<String, HashSet<String>> = HashMap::new();
    for (k, c) in history {
        h.entry(k).or_default().insert(c);
    }
    DbView {
        current: current.into_iter().filter(|(k, _)| k != "seed").collect(),
        history: h,
    }
}

async fn mysql_view(url: &str) -> TestResult<DbView> {
    // Nacos's columns are `utf8_bin`: sqlx sees them as binary.
    let text = |rows: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<(String, String)> {
        rows.into_iter()
            .map(|(k, c)| {
                (
                    String::from_utf8_lossy(&k).into_owned(),
                    String::from_utf8_lossy(&c).into_owned(),
                )
            })
            .collect()
    };
    let mut conn = sqlx::MySqlConnection::connect(url).await?;
    let current = text(sqlx::query_as(CURRENT_SQL).fetch_all(&mut conn).await?);
    let history = text(sqlx::query_as(HISTORY_SQL).fetch_all(&mut conn).await?);
    conn.close().await?;
    Ok(view(current, history))
}

async fn postgres_view(url: &str) -> TestResult<DbView> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let current = sqlx::query_as(CURRENT_SQL).fetch_all(&mut conn).await?;
    let history = sqlx::query_as(HISTORY_SQL).fetch_all(&mut conn).await?;
    conn.close().await?;
    Ok(view(current, history))
}

/// The sequence number of a storm content `<key>#<seq>`.
fn seq_of(content: &str) -> Option<u64> {
    content.rsplit_once('#').and_then(|(_, s)| s.parse().ok())
}

/// When the fault began and when the database was writable again.
struct Fault {
    name: &'static str,
    began: Instant,
    writable: Instant,
    /// The nodes whose writes the fault cut (all of them when the whole database went).
    cut: Vec<usize>,
}

/// Checks and prints everything the issue asks of a storm through `fault`; `db` is the
/// database's view after the storm (every node converged to it).
async fn verdict(
    label: &str,
    nodes: &[Node],
    http: &reqwest::Client,
    recorded: &Recorded,
    fault: &Fault,
    db: &DbView,
    (catch_up, ended): (&Converged, &Converged),
) -> TestResult {
    let attempts = &recorded.attempts;
    println!("[{label}] {}", fault.name);

    // Reads were served throughout.
    for (node, ok, failed) in &recorded.reads {
        println!(
            "[{label}] node {}: {ok} reads answered, {} failed",
            node + 1,
            failed.len()
        );
        assert!(
            failed.is_empty(),
            "node {} failed reads: {failed:?}",
            node + 1
        );
        assert!(*ok > 0, "node {} answered no read", node + 1);
    }

    // Writes failed fast and clearly during the fault…
    let failed: Vec<&Attempt> = attempts.iter().filter(|a| !a.acked).collect();
    let failed_during: Vec<&Attempt> = failed
        .iter()
        .copied()
        .filter(|a| a.started >= fault.began && a.started < fault.writable)
        .collect();
    let slowest = failed.iter().map(|a| a.took).max().unwrap_or_default();
    let slowest_ok = attempts
        .iter()
        .filter(|a| a.acked)
        .max_by_key(|a| a.took)
        .map(|a| {
            let after = a.started.saturating_duration_since(fault.began);
            format!("{:?} (sent {after:?} after the fault began)", a.took)
        })
        .unwrap_or_default();
    let mut messages: Vec<String> = failed
        .iter()
        .map(|a| {
            let m: String = a.error.chars().take(110).collect();
            format!("{:?}: {m}", a.via)
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    messages.sort();
    println!(
        "[{label}] writes: {} attempted, {} acknowledged, {} failed ({} during the fault); \
         slowest failure answered in {slowest:?}, slowest acknowledged write {slowest_ok}",
        attempts.len(),
        attempts.len() - failed.len(),
        failed.len(),
        failed_during.len()
    );
    for m in messages.iter().take(8) {
        println!("[{label}]   failure: {m}");
    }
    for node in &fault.cut {
        assert!(
            failed_during.iter().any(|a| a.node == *node),
            "no write through node {} failed during the fault: was it a fault?",
            node + 1
        );
    }
    for a in &failed {
        assert!(a.took < HANG, "a write hung for {:?}: {a:?}", a.took);
        if a.via == Via::Http {
            assert!(
                a.error.starts_with("HTTP 503") && a.error.contains("database"),
                "not a clear database error: {}",
                a.error
            );
        }
    }
    // …and succeed after it on every node, without a restart.
    for w in 0..nodes.len() * 2 {
        let after = attempts
            .iter()
            .filter(|a| a.writer == w && a.acked && a.started >= fault.writable)
            .count();
        assert!(
            after > 0,
            "writer {w} had no acknowledged write after the fault"
        );
    }

    // No acknowledged write is lost.
    let acked: Vec<&Attempt> = attempts.iter().filter(|a| a.acked).collect();
    let mut checked = 0usize;
    let mut lost: Vec<String> = Vec::new();
    for a in &acked {
        // Nacos's history keeps the content a change replaced (and an insert's own): a
        // key's latest content is in `config_info` only.
        let in_history = db
            .history
            .get(&a.key)
            .is_some_and(|h| h.contains(&a.content));
        if in_history || db.current.get(&a.key) == Some(&a.content) {
            checked += 1;
        } else {
            lost.push(format!(
                "{} missing from history (writer {} via {:?} on node {}, sent {} ms after the \
                 fault began, answered in {:?})",
                a.content,
                a.writer,
                a.via,
                a.node + 1,
                a.started
                    .duration_since(fault.began.min(a.started))
                    .as_millis() as i64
                    - fault
                        .began
                        .duration_since(fault.began.min(a.started))
                        .as_millis() as i64,
                a.took
            ));
        }
    }
    for key in &recorded.keys {
        let last_acked = acked.iter().filter(|a| &a.key == key).map(|a| a.seq).max();
        let current = db.current.get(key);
        let attempted: HashSet<&str> = attempts
            .iter()
            .filter(|a| &a.key == key)
            .map(|a| a.content.as_str())
            .collect();
        match (last_acked, current) {
            (None, None) => {}
            (Some(_), None) => lost.push(format!("{key}: gone from the database")),
            (last, Some(c)) => {
                if !attempted.contains(c.as_str()) {
                    lost.push(format!("{key}: {c} was never written"));
                }
                if seq_of(c) < last {
                    lost.push(format!(
                        "{key}: {c} is older than the last acknowledged #{last:?}"
                    ));
                }
            }
        }
    }
    println!(
        "[{label}] acknowledged writes: {}, checked after recovery: {checked}, lost: {}",
        acked.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    assert_eq!(checked, acked.len());

    // Convergence once the database was writable again.
    for (i, (took, stale)) in catch_up.iter().enumerate() {
        println!(
            "[{label}] node {}: converged {took:?} after the database was writable again \
             ({stale} of {} keys stale at that moment)",
            i + 1,
            db.current.len()
        );
    }

    // Every node served the database's content soon after the storm's last write…
    for (i, (took, stale)) in ended.iter().enumerate() {
        println!(
            "[{label}] node {}: served the final content {took:?} after the storm's last \
             write ({stale} keys not yet at the first look)",
            i + 1
        );
    }
    // …and every listener ends with the last value of every key.
    let acked_at: HashMap<&str, Instant> = attempts
        .iter()
        .filter(|a| a.acked)
        .map(|a| (a.content.as_str(), a.started + a.took))
        .collect();
    for l in &recorded.listeners {
        let deadline = Instant::now() + HANG;
        loop {
            let behind: Vec<&String> = db
                .current
                .iter()
                .filter(|(k, c)| l.seen.get(k).is_none_or(|(s, _)| &s != *c))
                .map(|(k, _)| k)
                .collect();
            if behind.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} {} never got the last value of {behind:?}",
                l.node + 1,
                l.kind
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // How long after its write was acknowledged each final value reached the listener.
        let lags: Vec<Duration> = db
            .current
            .iter()
            .filter_map(|(k, c)| {
                let (_, arrived) = l.seen.get(k)?;
                Some(arrived.saturating_duration_since(*acked_at.get(c.as_str())?))
            })
            .collect();
        let worst = lags.iter().max().copied().unwrap_or_default();
        println!(
            "[{label}] node {} {}: ends with the last value of all {} keys; each arrived at most \
             {worst:?} after its write was acknowledged",
            l.node + 1,
            l.kind,
            db.current.len(),
        );
    }

    // Quiet propagation once it is all over: a publish on one node, polled on the others.
    let mut samples = Vec::new();
    for round in 0..20 {
        let (from, content) = (round % nodes.len(), format!("probe-{round}"));
        let sent = Instant::now();
        nodes[from]
            .api(http)
            .publish("", GROUP, "probe", &content)
            .await?;
        for (i, node) in nodes.iter().enumerate() {
            if i != from {
                until_served(node, http, "probe", &content).await?;
                samples.push(sent.elapsed());
            }
        }
    }
    nacelle_testkit::print_latencies(
        &format!("[{label}] afterwards, a publish on one node served by another"),
        samples,
    );
    Ok(())
}

/// When the storm's last write was answered.
fn storm_end(recorded: &Recorded) -> Instant {
    recorded
        .attempts
        .iter()
        .map(|a| a.started + a.took)
        .max()
        .unwrap_or_else(Instant::now)
}

/// Prints every node's warnings when `failed` or when `NACELLE_TEST_LOGS` is set (a failed
/// assertion prints them as the nodes drop).
fn print_logs(label: &str, nodes: &[Node], failed: bool) {
    if !failed && std::env::var_os("NACELLE_TEST_LOGS").is_none() {
        return;
    }
    for node in nodes {
        println!("[{label}] node :{}, its warnings:", node.http);
        for line in node.server.log_tail(5000) {
            if line.contains("\"level\":\"WARN\"") || line.contains("\"level\":\"ERROR\"") {
                println!("  {line}");
            }
        }
    }
}

fn http_client() -> TestResult<reqwest::Client> {
    Ok(reqwest::Client::builder().timeout(HANG).build()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn galera_node_killed_under_a_publish_storm_rejoins_and_nothing_acknowledged_is_lost(
) -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let label = "galera";
    let started = Instant::now();
    let mut galera = Galera::start(3).await?;
    println!("[{label}] 3 Galera nodes synced in {:?}", started.elapsed());
    galera.create_database(0, "nacelle").await?;
    let urls: Vec<String> = (0..3).map(|i| galera.url(i, "nacelle")).collect();
    let nodes = start_nodes(&urls).await?;
    let http = http_client()?;
    let storm = Storm::start(&nodes, &http).await?;
    tokio::time::sleep(Duration::from_secs(4)).await;

    // SIGKILL the database node under Nacelle node 2, mid-storm.
    galera.kill(1)?;
    let began = Instant::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let size = galera.status(0, "wsrep_cluster_size").await?;
    println!("[{label}] cluster size with node 2 killed: {size}");
    // What node 2 must catch up on: the writes made through the other nodes meanwhile.
    storm.pause().await;
    let before = mysql_view(&galera.url(0, "nacelle")).await?;

    let rejoin = galera.restart(1).await?;
    let writable = Instant::now();
    println!(
        "[{label}] node 2 restarted from {} and rejoined by {} in {:?}",
        rejoin.position, rejoin.transfer, rejoin.took
    );
    let catch_up = converge_all(&nodes, &http, &before.current, writable).await?;
    storm.resume();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (recorded, polls, _sdks) = storm.stop().await?;
    let db = mysql_view(&galera.url(0, "nacelle")).await?;
    let ended = converge_all(&nodes, &http, &db.current, storm_end(&recorded)).await?;
    // Every database node holds the same content, and Nacelle read causally on each (a
    // reload after a member's notification waits until the node applied that change).
    for i in 0..3 {
        let other = mysql_view(&galera.url(i, "nacelle")).await?;
        assert_eq!(other, db, "galera node {} differs", i + 1);
        let causal: u64 = galera.status(i, "wsrep_causal_reads").await?.parse()?;
        println!("[{label}] galera node {}: {causal} causal reads", i + 1);
        assert!(causal > 0, "no causal read on galera node {}", i + 1);
    }
    let fault = Fault {
        name: "galera node 2 SIGKILLed mid-storm, restarted 6 s later",
        began,
        writable,
        cut: vec![1],
    };
    let result = verdict(
        label,
        &nodes,
        &http,
        &recorded,
        &fault,
        &db,
        (&catch_up, &ended),
    )
    .await;
    for p in polls {
        p.abort();
    }
    print_logs(label, &nodes, result.is_err());
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_primary_killed_under_a_publish_storm_standby_promoted_and_nothing_acknowledged_is_lost(
) -> TestResult {
    if skipped(Backend::Postgres) {
        return Ok(());
    }
    let mut pg = PgStandby::start().await?;
    let result = postgres_failover(&mut pg).await;
    if result.is_err() || std::env::var_os("NACELLE_TEST_LOGS").is_some() {
        println!("[postgres] HAProxy's log:\n{}", pg.proxy_log());
    }
    result
}

async fn postgres_failover(pg: &mut PgStandby) -> TestResult {
    let label = "postgres";
    pg.create_database("nacelle").await?;
    let url = pg.url("nacelle");
    let nodes = start_nodes(&[url.clone(), url.clone(), url.clone()]).await?;
    let http = http_client()?;
    let storm = Storm::start(&nodes, &http).await?;
    tokio::time::sleep(Duration::from_secs(4)).await;

    // SIGKILL the primary mid-storm; promote the standby 4 s later (an operator's or a
    // failover manager's delay).
    pg.kill_primary()?;
    let began = Instant::now();
    tokio::time::sleep(Duration::from_secs(4)).await;
    storm.pause().await;
    let promoted = pg.promote().await?;
    let writable = Instant::now();
    println!("[{label}] standby promoted, HAProxy leading to it, in {promoted:?}");
    let before = postgres_view(&url).await?;
    let catch_up = converge_all(&nodes, &http, &before.current, writable).await?;
    storm.resume();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (recorded, polls, _sdks) = storm.stop().await?;
    let db = postgres_view(&url).await?;
    let ended = converge_all(&nodes, &http, &db.current, storm_end(&recorded)).await?;
    let fault = Fault {
        name: "PostgreSQL primary SIGKILLed mid-storm, standby promoted 4 s later",
        began,
        writable,
        cut: vec![0, 1, 2],
    };
    let result = verdict(
        label,
        &nodes,
        &http,
        &recorded,
        &fault,
        &db,
        (&catch_up, &ended),
    )
    .await;
    for p in polls {
        p.abort();
    }
    print_logs(label, &nodes, result.is_err());
    result
}

/// Asynchronous replication: commits made while the standby was cut off are acknowledged
/// and then lost by the failover (the database's guarantee, not Nacelle's). Every node had
/// read them; once the promoted standby is the database, every node must serve what it
/// holds, not the lost values (whose revisions the database no longer has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_async_failover_that_loses_commits_every_node_serves_the_new_primary() -> TestResult
{
    if skipped(Backend::Postgres) {
        return Ok(());
    }
    let label = "postgres-async";
    let mut pg = PgStandby::start_async().await?;
    pg.create_database("nacelle").await?;
    let url = pg.url("nacelle");
    let nodes = start_nodes(&[url.clone(), url.clone(), url.clone()]).await?;
    let http = http_client()?;
    let keys: Vec<String> = (0..6).map(|i| format!("async-k{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        nodes[i % 3]
            .api(&http)
            .publish("", GROUP, key, "replicated")
            .await?;
    }
    pg.wait_replayed().await?;

    // Cut off, the standby never gets the next commits; every node reads them.
    pg.cut_replication()?;
    for (i, key) in keys.iter().enumerate().take(4) {
        nodes[i % 3]
            .api(&http)
            .publish("", GROUP, key, "lost")
            .await?;
    }
    for node in &nodes {
        for key in &keys[..4] {
            until_served(node, &http, key, "lost").await?;
        }
    }
    // A follow interval and more: every follower has read the rows that will be lost.
    tokio::time::sleep(Duration::from_secs(1)).await;

    pg.kill_primary()?;
    // An operator's (or a failover manager's) delay: the nodes see the database gone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let promoted = pg.promote().await?;
    let writable = Instant::now();
    println!("[{label}] standby promoted, HAProxy leading to it, in {promoted:?}");
    let db = postgres_view(&url).await?;
    let lost = keys[..4]
        .iter()
        .filter(|k| db.current.get(*k).map(String::as_str) == Some("replicated"))
        .count();
    println!(
        "[{label}] acknowledged writes the database lost in the failover (asynchronous \
         replication): {lost} of 4"
    );
    assert_eq!(lost, 4, "the standby was cut off before those commits");

    // Every node serves what the new primary holds, without a restart…
    let converged = converge_all(&nodes, &http, &db.current, writable).await?;
    for (i, (took, stale)) in converged.iter().enumerate() {
        println!(
            "[{label}] node {}: serves the new primary's content {took:?} after it was \
             writable ({stale} keys still on lost values at that moment)",
            i + 1
        );
    }
    // …and writes go on, and reach every node.
    let deadline = Instant::now() + HANG;
    loop {
        let r = nodes[1]
            .api(&http)
            .try_publish("", GROUP, &keys[5], "after")
            .await?;
        if r.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no write succeeded after the failover: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for node in &nodes {
        until_served(node, &http, &keys[5], "after").await?;
        let resynced = node
            .server
            .log_tail(5000)
            .iter()
            .any(|l| l.contains("no longer holds changes this node read"));
        assert!(
            resynced,
            "node :{} did not notice the lost commits",
            node.http
        );
    }
    print_logs(label, &nodes, false);
    Ok(())
}
