//! Nodes sharing one database (MariaDB and PostgreSQL on this machine, each test on a
//! database of its own): change propagation between members (gRPC on the cluster port,
//! HTTP as the fallback), convergence without notifications, restarts, database outages,
//! and the cluster secret on both paths.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nacelle_proto::grpc::request_client::RequestClient;
use nacelle_proto::Payload;
use nacelle_testkit::grpc::{recorder, Sdk};
use nacelle_testkit::per_backend::skipped;
use nacelle_testkit::server::BinaryServer;
use nacelle_testkit::{
    free_port, free_port_with, listening_configs, md5, run_on, Api, Backend, Proxy, TestDb,
    TestResult, SOON,
};
use serde_json::{json, Value};

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");

const SECRET: &str = "test-cluster-secret-0123456789";

/// The ports of a node: HTTP (given to the other members), client gRPC, and the cluster
/// gRPC port the other members derive as HTTP + 1001.
#[derive(Debug, Clone, Copy)]
struct Ports {
    http: u16,
    grpc: u16,
}

impl Ports {
    /// Free ports, with HTTP + 1001 free too (the node binds it unless told otherwise).
    fn pick() -> TestResult<Self> {
        let http = free_port_with(&[1001])?;
        let grpc = free_port()?;
        Ok(Ports { http, grpc })
    }

    fn cluster(&self) -> u16 {
        self.http + 1001
    }
}

struct Node {
    server: BinaryServer,
    port: u16,
    ports: Ports,
    _dir: tempfile::TempDir,
}

impl Node {
    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }
}

fn spawn_node(
    dir: tempfile::TempDir,
    ports: Ports,
    db_url: &str,
    members: &str,
    extra: &[&str],
) -> TestResult<Node> {
    let port_s = ports.http.to_string();
    let grpc_s = ports.grpc.to_string();
    let mut args = vec![
        "--port",
        port_s.as_str(),
        "--grpc-port",
        grpc_s.as_str(),
        "--db",
        db_url,
        "--members",
        members,
        "--cluster-secret",
        SECRET,
        "--follow-interval-ms",
        "300",
        "--member-check-interval-ms",
        "300",
    ];
    args.extend_from_slice(extra);
    let server = BinaryServer::spawn(NACELLE, dir.path(), &args)?;
    Ok(Node {
        server,
        port: ports.http,
        ports,
        _dir: dir,
    })
}

async fn start_cluster(
    db_url: &str,
    n: usize,
    extra: impl Fn(usize) -> Vec<&'static str>,
) -> TestResult<(Vec<Node>, String)> {
    // Ports are checked free, then bound by the nodes: something else may still take one
    // in between (another program on the machine). Such a start is retried on fresh ports.
    let mut attempt = 0;
    let (nodes, members) = loop {
        attempt += 1;
        // Every port handed out once per process: the nodes' ports are all distinct.
        let ports = (0..n)
            .map(|_| Ports::pick())
            .collect::<TestResult<Vec<_>>>()?;
        let members = ports
            .iter()
            .map(|p| format!("127.0.0.1:{}", p.http))
            .collect::<Vec<_>>()
            .join(",");
        let spawned: TestResult<Vec<Node>> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| spawn_node(tempfile::tempdir()?, *port, db_url, &members, &extra(i)))
            .collect();
        match spawned {
            Ok(nodes) => break (nodes, members),
            Err(e) if attempt < 3 && e.to_string().contains("Address already in use") => {
                eprintln!("cluster start on taken ports, retrying on others: {e}");
            }
            Err(e) => return Err(e),
        }
    };
    for node in &nodes {
        node.server.api.wait_ready().await?;
    }
    Ok((nodes, members))
}

/// The API of `node` over the test's `http` client.
fn api(http: &reqwest::Client, node: &Node) -> Api {
    Api::with_client(http.clone(), node.server.addr)
}

async fn publish(
    http: &reqwest::Client,
    node: &Node,
    data_id: &str,
    content: &str,
) -> TestResult<u16> {
    let reply = api(http, node)
        .try_publish("", "CLUSTER", data_id, content)
        .await?;
    Ok(reply.status)
}

/// The sum of the series `name` in `node`'s `/metrics` whose labels include `labels` (for
/// a histogram, its observations), and whether any matched.
async fn metric(
    http: &reqwest::Client,
    node: &Node,
    name: &str,
    labels: &[(&str, &str)],
) -> TestResult<(f64, bool)> {
    let text = http.get(node.url("/metrics")).send().await?.text().await?;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))?;
    let mut found = false;
    let mut sum = 0.0;
    for s in &scrape.samples {
        if s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)) {
            found = true;
            sum += match &s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => *v,
                // A histogram counts its observations: its `+Inf` bucket.
                prometheus_parse::Value::Histogram(buckets) => buckets
                    .iter()
                    .filter(|b| b.less_than.is_infinite())
                    .map(|b| b.count)
                    .sum(),
                _ => 0.0,
            };
        }
    }
    Ok((sum, found))
}

async fn get(http: &reqwest::Client, node: &Node, data_id: &str) -> TestResult<Option<String>> {
    Ok(api(http, node).get("", "CLUSTER", data_id).await?)
}

/// Polls `node` until `data_id` has `expected`; returns how long it took.
async fn until_served(
    http: &reqwest::Client,
    node: &Node,
    data_id: &str,
    expected: Option<&str>,
    limit: Duration,
) -> TestResult<Duration> {
    let started = Instant::now();
    loop {
        if get(http, node, data_id).await?.as_deref() == expected {
            return Ok(started.elapsed());
        }
        if started.elapsed() > limit {
            return Err(format!(
                "{data_id} not {expected:?} on node :{} within {limit:?}",
                node.port
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `node` lists at least one listener (of any protocol) of `data_id`.
async fn wait_listener(http: &reqwest::Client, node: &Node, data_id: &str) -> TestResult {
    let within = Duration::from_secs(30);
    Ok(api(http, node)
        .wait_listener("", "CLUSTER", data_id, within)
        .await?)
}

/// Notifications `from` sent to member `to`, from `from`'s `/v1/core/cluster/nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    grpc: u64,
    http: u64,
    failed: u64,
}

async fn notify_counts(http: &reqwest::Client, from: &Node, to: &Node) -> TestResult<Counts> {
    let v: Value = http
        .get(from.url("/nacos/v1/core/cluster/nodes"))
        .send()
        .await?
        .json()
        .await?;
    let address = format!("127.0.0.1:{}", to.port);
    let member = v["data"]
        .as_array()
        .and_then(|d| d.iter().find(|n| n["address"] == address.as_str()))
        .ok_or_else(|| format!("{address} not a member of :{}: {v}", from.port))?;
    let n = |f: &str| member["extendInfo"][f].as_u64().unwrap_or(0);
    Ok(Counts {
        grpc: n("notifiedViaGrpc"),
        http: n("notifiedViaHttp"),
        failed: n("notifyFailures"),
    })
}

/// Waits until the counts of `from` → `to` satisfy `done` (the notifier counts a
/// notification once the member answered, which may be after the member serves the value).
async fn wait_counts(
    http: &reqwest::Client,
    from: &Node,
    to: &Node,
    done: impl Fn(Counts) -> bool,
) -> TestResult<Counts> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let c = notify_counts(http, from, to).await?;
        if done(c) {
            return Ok(c);
        }
        if Instant::now() > deadline {
            return Err(format!(":{} → :{}: counts stay {c:?}", from.port, to.port).into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn publish_on_one_node_reaches_listeners_on_another(kind: Backend) -> TestResult {
    let db = TestDb::create(kind).await?;
    let http = reqwest::Client::new();
    let (nodes, _) = start_cluster(&db.url, 3, |_| vec![]).await?;
    assert_eq!(publish(&http, &nodes[0], "shared.yaml", "v1").await?, 200);
    until_served(
        &http,
        &nodes[2],
        "shared.yaml",
        Some("v1"),
        Duration::from_secs(10),
    )
    .await?;

    // A gRPC listener on node 3: the real Rust client.
    let sdk = Sdk::connect(
        nodes[2].ports.http,
        nodes[2].ports.grpc,
        "",
        "nacelle-cluster-test",
    )
    .await?;
    let (rec, mut notes) = recorder();
    sdk.client
        .add_listener("shared.yaml".to_string(), "CLUSTER".to_string(), rec)
        .await
        .map_err(|e| format!("nacos-sdk add_listener: {e}"))?;
    wait_listener(&http, &nodes[2], "shared.yaml").await?;

    // And an HTTP long poll on node 3.
    let lc = listening_configs(&[("shared.yaml", "CLUSTER", &md5("v1"), None)]);
    let poll = {
        let http = http.clone();
        let url = nodes[2].url("/nacos/v1/cs/configs/listener");
        tokio::spawn(async move {
            let resp = http
                .post(url)
                .header("Long-Pulling-Timeout", "30000")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?;
            Ok::<_, reqwest::Error>((resp.text().await?, Instant::now()))
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = Instant::now();
    assert_eq!(publish(&http, &nodes[0], "shared.yaml", "v2").await?, 200);
    let (body, woke) = tokio::time::timeout(Duration::from_secs(20), poll).await???;
    assert_eq!(body, "shared.yaml%02CLUSTER%01\n");
    let pushed = notes.wait_for("v2", Duration::from_secs(20)).await?;
    println!(
        "[{kind:?}] publish on node 1 → node 3: HTTP long poll released after {:?}, \
         nacos-sdk gRPC listener called after {:?}",
        woke.saturating_duration_since(sent),
        pushed.saturating_duration_since(sent)
    );
    assert_eq!(
        get(&http, &nodes[2], "shared.yaml").await?.as_deref(),
        Some("v2")
    );
    // Node 1 told the others over the cluster gRPC port, never over HTTP.
    for member in &nodes[1..] {
        let c = wait_counts(&http, &nodes[0], member, |c| c.grpc >= 1).await?;
        assert_eq!((c.http, c.failed), (0, 0), "{c:?}");
    }

    // Delete on node 2 reaches node 1 and node 3.
    let resp = http
        .delete(nodes[1].url("/nacos/v1/cs/configs?dataId=shared.yaml&group=CLUSTER"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    until_served(
        &http,
        &nodes[0],
        "shared.yaml",
        None,
        Duration::from_secs(10),
    )
    .await?;
    until_served(
        &http,
        &nodes[2],
        "shared.yaml",
        None,
        Duration::from_secs(10),
    )
    .await?;

    // Every node lists the three members, all UP once health checks ran.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let v: serde_json::Value = http
            .get(nodes[2].url("/nacos/v1/core/cluster/nodes"))
            .send()
            .await?
            .json()
            .await?;
        let data = v["data"].as_array().ok_or("no data")?;
        assert_eq!(data.len(), 3);
        if data.iter().all(|n| n["state"] == "UP") {
            assert!(data
                .iter()
                .any(|n| n["address"] == format!("127.0.0.1:{}", nodes[0].port)));
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("members not all UP: {v}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

#[tokio::test]
async fn mariadb_publish_on_one_node_reaches_a_long_poll_and_a_grpc_listener_on_another(
) -> TestResult {
    run_on(
        Backend::MariaDb,
        publish_on_one_node_reaches_listeners_on_another,
    )
    .await
}

#[tokio::test]
async fn postgres_publish_on_one_node_reaches_a_long_poll_and_a_grpc_listener_on_another(
) -> TestResult {
    run_on(
        Backend::Postgres,
        publish_on_one_node_reaches_listeners_on_another,
    )
    .await
}

#[tokio::test]
async fn http_carries_notifications_when_a_members_cluster_port_is_unreachable() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let http = reqwest::Client::new();
    // Node 3 binds its cluster port elsewhere: the others look for it at HTTP + 1001.
    let (nodes, _) = start_cluster(&db.url, 3, |i| {
        if i == 2 {
            vec!["--cluster-grpc-port", "0"]
        } else {
            vec![]
        }
    })
    .await?;
    let sent = Instant::now();
    assert_eq!(publish(&http, &nodes[0], "fallback", "v1").await?, 200);
    let c3 = wait_counts(&http, &nodes[0], &nodes[2], |c| c.http >= 1).await?;
    let c2 = wait_counts(&http, &nodes[0], &nodes[1], |c| c.grpc >= 1).await?;
    println!(
        "notification to node 3 delivered over HTTP within {:?}",
        sent.elapsed()
    );
    assert_eq!((c3.grpc, c3.failed), (0, 0), "node 3: {c3:?}");
    assert_eq!((c2.http, c2.failed), (0, 0), "node 2: {c2:?}");
    // The same counts in node 1's metrics, by member and path.
    let notified = "nacelle_cluster_notifications_total";
    let (m3, m2) = (
        nodes[2].server.addr.to_string(),
        nodes[1].server.addr.to_string(),
    );
    let (via_http, _) = metric(
        &http,
        &nodes[0],
        notified,
        &[("member", &m3), ("path", "http")],
    )
    .await?;
    let (via_grpc, _) = metric(
        &http,
        &nodes[0],
        notified,
        &[("member", &m2), ("path", "grpc")],
    )
    .await?;
    assert_eq!((via_http, via_grpc), (c3.http as f64, c2.grpc as f64));
    let failures = "nacelle_cluster_notify_failures_total";
    let (failed, listed) = metric(&http, &nodes[0], failures, &[("member", &m3)]).await?;
    assert!(listed && failed == 0.0, "{failures} of node 3: {failed}");
    // Every node on the shared database follows its change log (its first read comes one
    // follow interval after the load).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !metric(&http, &nodes[2], "nacelle_follower_applied_nid", &[])
        .await?
        .1
    {
        assert!(
            Instant::now() < deadline,
            "node 3 shows no follower position"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until_served(
        &http,
        &nodes[2],
        "fallback",
        Some("v1"),
        Duration::from_secs(10),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn dropped_notifications_over_grpc_and_http_still_converge_within_2s() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let http = reqwest::Client::new();
    // Nodes 2 and 3 drop every notification they receive: only the change log can update
    // them. Node 2 is notified over gRPC; node 3, whose cluster port is not where the
    // others look, over HTTP.
    let (nodes, _) = start_cluster(&db.url, 3, |i| match i {
        1 => vec!["--fault-drop-cluster-notifications"],
        2 => vec![
            "--fault-drop-cluster-notifications",
            "--cluster-grpc-port",
            "0",
        ],
        _ => vec![],
    })
    .await?;
    for round in 0..3 {
        let content = format!("value {round}");
        assert_eq!(publish(&http, &nodes[0], "lossy", &content).await?, 200);
        let published = Instant::now();
        for (i, node) in nodes.iter().enumerate().skip(1) {
            let limit = Duration::from_secs(2).saturating_sub(published.elapsed());
            until_served(&http, node, "lossy", Some(&content), limit).await?;
            println!(
                "round {round}: node {} (notifications dropped) served the new value {:?} after the publish",
                i + 1,
                published.elapsed()
            );
        }
    }
    let resp = http
        .delete(nodes[0].url("/nacos/v1/cs/configs?dataId=lossy&group=CLUSTER"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    let deleted = Instant::now();
    for (i, node) in nodes.iter().enumerate().skip(1) {
        let limit = Duration::from_secs(2).saturating_sub(deleted.elapsed());
        until_served(&http, node, "lossy", None, limit).await?;
        println!(
            "delete converged on node {} {:?} after the delete",
            i + 1,
            deleted.elapsed()
        );
    }
    // The notifications did arrive, each over its path, and were accepted (then dropped).
    let c2 = wait_counts(&http, &nodes[0], &nodes[1], |c| c.grpc >= 1).await?;
    assert_eq!((c2.http, c2.failed), (0, 0), "node 2: {c2:?}");
    let c3 = wait_counts(&http, &nodes[0], &nodes[2], |c| c.http >= 1).await?;
    assert_eq!((c3.grpc, c3.failed), (0, 0), "node 3: {c3:?}");
    Ok(())
}

#[tokio::test]
async fn a_restarted_node_converges() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let http = reqwest::Client::new();
    let (mut nodes, members) = start_cluster(&db.url, 2, |_| vec![]).await?;
    assert_eq!(publish(&http, &nodes[0], "a", "1").await?, 200);
    assert_eq!(publish(&http, &nodes[0], "b", "1").await?, 200);
    until_served(&http, &nodes[1], "b", Some("1"), Duration::from_secs(10)).await?;

    let killed = nodes.remove(1);
    let ports = killed.ports;
    let Node {
        mut server,
        _dir: dir,
        ..
    } = killed;
    server.kill9()?;
    drop(server);
    // Changes while it is down.
    assert_eq!(publish(&http, &nodes[0], "a", "2").await?, 200);
    assert_eq!(publish(&http, &nodes[0], "c", "new").await?, 200);
    let resp = http
        .delete(nodes[0].url("/nacos/v1/cs/configs?dataId=b&group=CLUSTER"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");

    let restarted = spawn_node(dir, ports, &db.url, &members, &[])?;
    restarted.server.api.wait_ready().await?;
    assert_eq!(get(&http, &restarted, "a").await?.as_deref(), Some("2"));
    assert_eq!(get(&http, &restarted, "b").await?, None);
    assert_eq!(get(&http, &restarted, "c").await?.as_deref(), Some("new"));
    // And it keeps following changes made elsewhere.
    assert_eq!(publish(&http, &nodes[0], "a", "3").await?, 200);
    until_served(&http, &restarted, "a", Some("3"), Duration::from_secs(10)).await?;
    Ok(())
}

async fn database_outage(kind: Backend) -> TestResult {
    let db = TestDb::create(kind).await?;
    let proxy = Proxy::start(db.server_addr()?).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let dir = tempfile::tempdir()?;
    let server = BinaryServer::spawn(NACELLE, dir.path(), &["--db", &db.url_via(proxy.addr)?])?;
    server.api.wait_ready().await?;
    let node = Node {
        port: server.addr.port(),
        ports: Ports {
            http: server.addr.port(),
            grpc: 0,
        },
        server,
        _dir: dir,
    };
    assert_eq!(publish(&http, &node, "before", "kept").await?, 200);

    proxy.cut();
    // Reads are served from memory.
    assert_eq!(get(&http, &node, "before").await?.as_deref(), Some("kept"));
    // Writes fail fast with a clear error.
    let started = Instant::now();
    let resp = http
        .post(node.url("/nacos/v1/cs/configs"))
        .form(&[("dataId", "during"), ("group", "CLUSTER"), ("content", "x")])
        .send()
        .await?;
    let status = resp.status().as_u16();
    let body = resp.text().await?;
    println!(
        "[{kind:?}] write during the outage answered {status} after {:?}: {body}",
        started.elapsed()
    );
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("database"), "{body}");
    assert_eq!(get(&http, &node, "before").await?.as_deref(), Some("kept"));
    // The failed write shows in the metrics as a store error of its operation.
    let errors = metric(
        &http,
        &node,
        "nacelle_store_errors_total",
        &[("op", "publish")],
    );
    assert!(errors.await?.0 >= 1.0, "no store error counted");
    let writes = [("op", "publish"), ("result", "error")];
    let failed = metric(&http, &node, "nacelle_config_writes_total", &writes);
    assert!(failed.await?.0 >= 1.0, "no failed write counted");
    // Whether a namespace exists is not known while the database is away: an error, never
    // a "no" that a console would act on.
    let resp = http
        .get(node.url("/nacos/v1/console/namespaces"))
        .query(&[
            ("checkNamespaceIdExist", "true"),
            ("customNamespaceId", "dev"),
        ])
        .send()
        .await?;
    let status = resp.status().as_u16();
    let body = resp.text().await?;
    assert_eq!(status, 503, "namespace check during the outage: {body}");

    proxy.restore();
    // Full recovery without a restart.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if publish(&http, &node, "after", "recovered").await? == 200 {
            break;
        }
        if Instant::now() > deadline {
            return Err("writes did not recover within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        get(&http, &node, "after").await?.as_deref(),
        Some("recovered")
    );
    assert_eq!(get(&http, &node, "before").await?.as_deref(), Some("kept"));
    assert_eq!(
        get(&http, &node, "during").await?,
        None,
        "a failed write must not appear"
    );
    Ok(())
}

// Multi-threaded: the proxy must keep running while the test blocks on the child's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_outage_reads_served_writes_fail_then_recover() -> TestResult {
    run_on(Backend::MariaDb, database_outage).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_outage_reads_served_writes_fail_then_recover() -> TestResult {
    run_on(Backend::Postgres, database_outage).await
}

#[tokio::test]
async fn only_callers_with_the_cluster_secret_count_as_members() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let http = reqwest::Client::new();
    let (nodes, _) = start_cluster(&db.url, 1, |_| vec![]).await?;
    let url = nodes[0].url("/nacos/v1/cs/communication/dataChange?dataId=x&group=CLUSTER");
    for (header, status) in [
        (None, 403),
        (Some("wrong-secret-wrong-secret"), 403),
        (Some(SECRET), 200),
    ] {
        let mut req = http.get(&url).header("User-Agent", "Nacos-Server:2.4.3");
        if let Some(h) = header {
            req = req.header("Nacelle-Cluster-Secret", h);
        }
        assert_eq!(req.send().await?.status().as_u16(), status, "{header:?}");
    }

    // The same over gRPC on the cluster port: only the secret in `metadata.headers` counts.
    let cluster = nodes[0].ports.cluster();
    let sync =
        json!({"dataId": "x", "group": "CLUSTER", "tenant": "", "lastModified": 0, "beta": false});
    let not_member = |(type_name, v): (String, Value)| {
        assert_eq!(type_name, "ConfigChangeClusterSyncResponse", "{v}");
        assert_eq!(
            (v["resultCode"].as_i64(), v["errorCode"].as_i64()),
            (Some(500), Some(403)),
            "{v}"
        );
        assert!(
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("not a cluster member")),
            "{v}"
        );
    };
    not_member(raw_call(cluster, Call::sync(&sync)).await?);
    not_member(
        raw_call(
            cluster,
            Call::sync(&sync).header("Nacelle-Cluster-Secret", "wrong-secret-wrong-secret"),
        )
        .await?,
    );
    // Whatever else a client may send: Nacos's server user agent and source label, a client
    // IP, the secret as an HTTP/2 header or inside the JSON body.
    let mut in_body = sync.clone();
    in_body["headers"] = json!({"Nacelle-Cluster-Secret": SECRET});
    not_member(
        raw_call(
            cluster,
            Call::sync(&in_body)
                .header("User-Agent", "Nacos-Server:v2.4.3")
                .header("source", "cluster")
                .client_ip("127.0.0.1")
                .h2_secret(),
        )
        .await?,
    );
    let (type_name, v) = raw_call(cluster, Call::new("HealthCheckRequest", &json!({}))).await?;
    assert_eq!(
        (type_name.as_str(), v["errorCode"].as_i64()),
        ("ErrorResponse", Some(403)),
        "{v}"
    );
    // With the secret: accepted, and other types are unknown here.
    let (type_name, v) = raw_call(
        cluster,
        Call::sync(&sync).header("Nacelle-Cluster-Secret", SECRET),
    )
    .await?;
    assert_eq!(type_name, "ConfigChangeClusterSyncResponse", "{v}");
    assert_eq!(
        (v["resultCode"].as_i64(), v["errorCode"].as_i64()),
        (Some(200), Some(0)),
        "{v}"
    );
    let (_, v) = raw_call(
        cluster,
        Call::new(
            "ConfigQueryRequest",
            &json!({"dataId": "x", "group": "CLUSTER"}),
        )
        .header("Nacelle-Cluster-Secret", SECRET),
    )
    .await?;
    assert_eq!(v["errorCode"].as_i64(), Some(302), "{v}");
    // The client-facing gRPC port never serves member calls, secret or not.
    let (type_name, v) = raw_call(
        nodes[0].ports.grpc,
        Call::sync(&sync).header("Nacelle-Cluster-Secret", SECRET),
    )
    .await?;
    assert_eq!(
        (type_name.as_str(), v["errorCode"].as_i64()),
        ("ErrorResponse", Some(302)),
        "{v}"
    );
    Ok(())
}

/// One unary call as a hand-made client would send it.
struct Call {
    type_name: &'static str,
    body: Vec<u8>,
    headers: HashMap<String, String>,
    client_ip: String,
    h2_secret: bool,
}

impl Call {
    fn new(type_name: &'static str, body: &Value) -> Self {
        Call {
            type_name,
            body: serde_json::to_vec(body).unwrap_or_default(),
            headers: HashMap::new(),
            client_ip: String::new(),
            h2_secret: false,
        }
    }

    fn sync(body: &Value) -> Self {
        Self::new("ConfigChangeClusterSyncRequest", body)
    }

    fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.insert(name.to_string(), value.to_string());
        self
    }

    fn client_ip(mut self, ip: &str) -> Self {
        self.client_ip = ip.to_string();
        self
    }

    /// Also sends the secret as an HTTP/2 header (not where members put it).
    fn h2_secret(mut self) -> Self {
        self.h2_secret = true;
        self
    }
}

/// Sends `call` to `/Request/request` on 127.0.0.1:`port`; returns the answer's type and
/// JSON body.
async fn raw_call(port: u16, call: Call) -> TestResult<(String, Value)> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
        .connect()
        .await?;
    let mut payload = Payload::new(call.type_name, call.body).with_client_ip(call.client_ip);
    for (name, value) in call.headers {
        payload = payload.with_header(name, value);
    }
    let mut req = tonic::Request::new(payload);
    if call.h2_secret {
        req.metadata_mut()
            .insert("nacelle-cluster-secret", SECRET.parse()?);
    }
    let reply = RequestClient::new(channel).request(req).await?.into_inner();
    Ok((reply.type_name().to_string(), reply.parse_body()?))
}

#[tokio::test]
async fn members_without_a_secret_refuse_to_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nacelle"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--port",
            "0",
            "--grpc-port",
            "0",
            "--members",
            "127.0.0.1:1,127.0.0.1:2",
            // The token secret is checked first (tests/auth_server.rs).
            "--auth",
            "off",
        ])
        .env_remove("NACELLE_CLUSTER_SECRET")
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no cluster secret"), "{stderr}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_with_the_database_down_stays_not_ready_until_it_returns() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let proxy = Proxy::start(db.server_addr()?).await?;
    proxy.cut();
    let http = reqwest::Client::new();
    let dir = tempfile::tempdir()?;
    let server = BinaryServer::spawn(NACELLE, dir.path(), &["--db", &db.url_via(proxy.addr)?])?;
    let status = |path: &'static str| {
        let http = http.clone();
        let url = server.url(path);
        async move { Ok::<_, reqwest::Error>(http.get(url).send().await?.status().as_u16()) }
    };
    assert_eq!(status("/nacos/v1/console/health/liveness").await?, 200);
    assert_eq!(status("/nacos/v1/console/health/readiness").await?, 503);
    assert_eq!(status("/nacos/v1/cs/configs?dataId=a&group=G").await?, 503);
    proxy.restore();
    server.api.wait_ready().await?;
    assert_eq!(status("/nacos/v1/cs/configs?dataId=a&group=G").await?, 404);
    Ok(())
}

/// A gray published on one node of a 3-node cluster is served with the right targeting by
/// the others within 2 s — the one that drops every notification included (it follows the
/// gray change log) — and so are its promotion and its stop.
#[tokio::test]
async fn grays_converge_on_every_node_within_2s() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let (nodes, _) = start_cluster(&db.url, 3, |i| match i {
        2 => vec!["--fault-drop-cluster-notifications"],
        _ => vec![],
    })
    .await?;
    let from = |ip: &str| -> TestResult<reqwest::Client> {
        Ok(reqwest::Client::builder()
            .local_address(ip.parse::<std::net::IpAddr>()?)
            .build()?)
    };
    let (canary, other) = (from("127.0.0.2")?, from("127.0.0.3")?);
    let http = reqwest::Client::new();
    assert_eq!(publish(&http, &nodes[0], "gray", "g: formal").await?, 200);
    let beta = http
        .post(nodes[0].url("/nacos/v1/cs/configs"))
        .header("betaIps", "127.0.0.2")
        .form(&[
            ("dataId", "gray"),
            ("group", "CLUSTER"),
            ("content", "g: beta"),
        ])
        .send()
        .await?;
    assert_eq!(beta.text().await?, "true");
    let published = Instant::now();
    for (i, node) in nodes.iter().enumerate().skip(1) {
        let limit = Duration::from_secs(2).saturating_sub(published.elapsed());
        until_served(&canary, node, "gray", Some("g: beta"), limit).await?;
        assert_eq!(
            get(&other, node, "gray").await?.as_deref(),
            Some("g: formal")
        );
        println!(
            "beta served by node {} after {:?}",
            i + 1,
            published.elapsed()
        );
    }
    // Promoted on node 2: everyone gets the beta's content, also on the lossy node 3.
    let resp = http
        .post(nodes[1].url("/nacos/v2/cs/config/gray/promote"))
        .form(&[
            ("dataId", "gray"),
            ("group", "CLUSTER"),
            ("grayName", "beta"),
        ])
        .send()
        .await?;
    assert_eq!(resp.status().as_u16(), 200, "{}", resp.text().await?);
    let promoted = Instant::now();
    for node in &nodes {
        let limit = Duration::from_secs(2).saturating_sub(promoted.elapsed());
        until_served(&other, node, "gray", Some("g: beta"), limit).await?;
    }
    println!("promotion served everywhere after {:?}", promoted.elapsed());
    // A new beta, stopped on node 3: the canary gets the formal content back everywhere.
    let beta = http
        .post(nodes[0].url("/nacos/v1/cs/configs"))
        .header("betaIps", "127.0.0.2")
        .form(&[
            ("dataId", "gray"),
            ("group", "CLUSTER"),
            ("content", "g: next"),
        ])
        .send()
        .await?;
    assert_eq!(beta.text().await?, "true");
    for node in &nodes {
        until_served(
            &canary,
            node,
            "gray",
            Some("g: next"),
            Duration::from_secs(2),
        )
        .await?;
    }
    let stop = http
        .delete(nodes[2].url("/nacos/v1/cs/configs?dataId=gray&group=CLUSTER&beta=true"))
        .send()
        .await?;
    assert_eq!(stop.status().as_u16(), 200);
    let stopped = Instant::now();
    for node in &nodes {
        let limit = Duration::from_secs(2).saturating_sub(stopped.elapsed());
        until_served(&canary, node, "gray", Some("g: beta"), limit).await?;
    }
    println!("stop served everywhere after {:?}", stopped.elapsed());
    Ok(())
}

/// Authentication in a cluster: a token issued by one node is accepted by the others at once
/// (one secret, one user table), a user created on one node logs in on another at once, and
/// a user deleted on one node is refused by the others within 2 s.
#[tokio::test]
async fn a_token_from_one_node_is_accepted_by_the_others() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    const TOKEN_SECRET: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let db = TestDb::create(Backend::MariaDb).await?;
    let (nodes, _) = start_cluster(&db.url, 3, |_| {
        vec![
            "--auth",
            "on",
            "--auth-token-secret",
            TOKEN_SECRET,
            "--admin-password",
            "cluster-admin-password",
        ]
    })
    .await?;
    let http = reqwest::Client::builder().timeout(SOON).build()?;
    let login = |node: &Node, user: &str, password: &str| {
        let req = http
            .post(node.url("/nacos/v1/auth/login"))
            .form(&[("username", user), ("password", password)]);
        async move {
            let r = req.send().await?;
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            TestResult::Ok((
                status,
                body["accessToken"].as_str().unwrap_or("").to_string(),
            ))
        }
    };
    // The three nodes raced for the first administrator: exactly one exists.
    let deadline = Instant::now() + SOON;
    let admin = loop {
        let (status, token) = login(&nodes[0], "nacos", "cluster-admin-password").await?;
        if status == 200 {
            break token;
        }
        if Instant::now() > deadline {
            return Err("no administrator".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Every node accepts the token at once: a node that does not know the administrator
    // yet (made by another node since its last re-read) re-reads the users for it.
    for node in &nodes {
        let r = http
            .post(node.url("/nacos/v1/cs/configs"))
            .form(&[
                ("dataId", "auth"),
                ("group", "CLUSTER"),
                ("content", "a: 1"),
                ("accessToken", admin.as_str()),
            ])
            .send()
            .await?;
        let status = r.status();
        let body = r.text().await?;
        assert_eq!(status, 200, "node {}: {body}", node.port);
    }
    // A user created on node 1 logs in on node 3 at once, and its token works on node 2
    // (neither has re-read the users since).
    let r = http
        .post(nodes[0].url("/nacos/v1/auth/users"))
        .bearer_auth(&admin)
        .form(&[("username", "ops"), ("password", "ops-password")])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    let (status, ops) = login(&nodes[2], "ops", "ops-password").await?;
    assert_eq!(status, 200);
    let r = http
        .get(nodes[1].url("/nacos/v1/console/namespaces"))
        .bearer_auth(&ops)
        .send()
        .await?;
    assert_eq!(r.status(), 200, "node 2: {}", r.text().await?);
    // Deleted on node 2: its token stops working on node 3 within 2 s.
    let r = http
        .delete(nodes[1].url("/nacos/v1/auth/users"))
        .bearer_auth(&admin)
        .query(&[("username", "ops")])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    let deleted = Instant::now();
    loop {
        let r = http
            .get(nodes[2].url("/nacos/v1/console/namespaces"))
            .bearer_auth(&ops)
            .send()
            .await?;
        if r.status() == 403 {
            break;
        }
        if deleted.elapsed() > Duration::from_secs(2) {
            return Err("node 3 still accepts a deleted user's token after 2 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "a deleted user's token is refused by node 3 after {:?}",
        deleted.elapsed()
    );
    // Each request naming a user the node does not know makes it re-read the users, but
    // such re-reads start at least 250 ms apart: a second of requests with the deleted
    // user's token reads the users a handful of times, not once per request.
    let reads = || {
        metric(
            &http,
            &nodes[2],
            "nacelle_store_operation_duration_seconds",
            &[("op", "identities")],
        )
    };
    let (before, _) = reads().await?;
    let burst = Instant::now();
    let mut requests = 0;
    while burst.elapsed() < Duration::from_secs(1) {
        let mut batch = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let req = http
                .get(nodes[2].url("/nacos/v1/console/namespaces"))
                .bearer_auth(&ops);
            batch.spawn(async move { req.send().await.map(|r| r.status().as_u16()) });
        }
        while let Some(status) = batch.join_next().await {
            assert_eq!(status??, 403);
            requests += 1;
        }
    }
    let (after, found) = reads().await?;
    let secs = burst.elapsed().as_secs_f64();
    // Re-reads for unknown users, plus the periodic ones (every 2 s).
    let bound = (secs / 0.25).ceil() + 1.0 + (secs / 2.0).ceil() + 1.0;
    assert!(found, "node 3 counts its reads of the users");
    assert!(
        after - before >= 1.0 && after - before <= bound,
        "{} reads of the users for {requests} requests in {secs:.2} s (at most {bound})",
        after - before
    );
    assert!(f64::from(requests) > bound, "{requests} requests");
    Ok(())
}

/// A metadata change in place (v3 `PUT /metadata`: no new version, no history row, so no
/// change-log entry to follow) reaches the other member through the member notification,
/// and its listeners are not woken (the content did not change).
#[tokio::test]
async fn a_metadata_change_in_place_reaches_the_other_member() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let http = reqwest::Client::new();
    let (nodes, _members) = start_cluster(&db.url, 2, |_| vec![]).await?;
    assert_eq!(publish(&http, &nodes[0], "meta", "m: 1").await?, 200);
    until_served(
        &http,
        &nodes[1],
        "meta",
        Some("m: 1"),
        Duration::from_secs(10),
    )
    .await?;
    let detail = |node: &Node| {
        http.get(node.url("/nacos/v3/admin/cs/config"))
            .query(&[("dataId", "meta"), ("groupName", "CLUSTER")])
            .send()
    };
    let r = http
        .put(nodes[0].url("/nacos/v3/admin/cs/config/metadata"))
        .form(&[
            ("dataId", "meta"),
            ("groupName", "CLUSTER"),
            ("desc", "described on node 0"),
            ("configTags", "a,b"),
        ])
        .send()
        .await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v: Value = detail(&nodes[1]).await?.json().await?;
        if v["data"]["desc"] == "described on node 0" {
            assert_eq!(v["data"]["configTags"], "a,b", "{v}");
            assert_eq!(v["data"]["content"], "m: 1", "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "node 1 still shows {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// An approved change request scheduled for a time is published by the cluster exactly
/// once: every node tries when it comes due, one wins (the request's version), every node
/// then serves the new content, and the key has one new history row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_change_request_is_published_once_by_the_cluster() -> TestResult {
    if skipped(Backend::Postgres) {
        return Ok(());
    }
    const TOKEN_SECRET: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const ADMIN: &str = "cluster-admin-password";
    let db = TestDb::create(Backend::Postgres).await?;
    let (nodes, _) = start_cluster(&db.url, 3, |_| {
        vec![
            "--auth",
            "on",
            "--auth-token-secret",
            TOKEN_SECRET,
            "--admin-password",
            ADMIN,
        ]
    })
    .await?;
    let http = reqwest::Client::builder().timeout(SOON).build()?;
    let login = |node: &Node, user: &str, password: &str| {
        let req = http
            .post(node.url("/nacos/v1/auth/login"))
            .form(&[("username", user), ("password", password)]);
        async move {
            let r = req.send().await?;
            let body: Value = r.json().await.unwrap_or(Value::Null);
            TestResult::Ok(body["accessToken"].as_str().unwrap_or("").to_string())
        }
    };
    let deadline = Instant::now() + SOON;
    let admin = loop {
        let token = login(&nodes[0], "nacos", ADMIN).await?;
        if !token.is_empty() {
            break token;
        }
        assert!(Instant::now() < deadline, "no administrator");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let post = |node: &Node, token: &str, path: &str, form: Vec<(&str, String)>| {
        http.post(node.url(path))
            .bearer_auth(token)
            .form(&form)
            .send()
    };
    for (user, role, action) in [("alice", "authors", "rw"), ("bob", "reviewers", "rwa")] {
        for (path, form) in [
            (
                "/nacos/v1/auth/users",
                vec![
                    ("username", user.to_string()),
                    ("password", format!("{user}-pw-1")),
                ],
            ),
            (
                "/nacos/v1/auth/roles",
                vec![("role", role.to_string()), ("username", user.to_string())],
            ),
            (
                "/nacos/v1/auth/permissions",
                vec![
                    ("role", role.to_string()),
                    ("resource", ":*:*".into()),
                    ("action", action.into()),
                ],
            ),
        ] {
            let r = post(&nodes[0], &admin, path, form).await?;
            assert_eq!(r.status(), 200, "{path}: {}", r.text().await?);
        }
    }
    let form = vec![
        ("dataId", "sched".to_string()),
        ("group", "CLUSTER".into()),
        ("content", "s: 1".into()),
    ];
    let r = post(&nodes[0], &admin, "/nacos/v1/cs/configs", form).await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);

    // Alice opens it on node 1, bob approves on node 2, alice schedules it on node 0.
    let alice = login(&nodes[1], "alice", "alice-pw-1").await?;
    let bob = login(&nodes[2], "bob", "bob-pw-1").await?;
    let body = json!({"title": "scheduled", "items": [
        {"group": "CLUSTER", "dataId": "sched", "content": "s: 2"}]});
    let r = http
        .post(nodes[1].url("/nacos/nacelle/v1/changes"))
        .bearer_auth(&alice)
        .json(&body)
        .send()
        .await?;
    let cr: Value = r.json().await?;
    let id = cr["data"]["id"]
        .as_i64()
        .ok_or(format!("no id: {cr}"))?
        .to_string();
    let r = post(
        &nodes[2],
        &bob,
        "/nacos/nacelle/v1/change/approve",
        vec![("id", id.clone())],
    )
    .await?;
    let cr: Value = r.json().await?;
    assert_eq!(cr["data"]["state"], "approved", "{cr}");
    let at = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis()
        + 1500)
        .to_string();
    let form = vec![("id", id.clone()), ("publishAt", at)];
    let r = post(&nodes[0], &alice, "/nacos/nacelle/v1/change/schedule", form).await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);

    // Every node serves it once it is due.
    let reader = |node: &Node| Api::with_token(node.server.addr, &admin);
    let deadline = Instant::now() + Duration::from_secs(15);
    for node in &nodes {
        loop {
            if reader(node)?.get("", "CLUSTER", "sched").await?.as_deref() == Some("s: 2") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} never served the change",
                node.port
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let r = http
        .get(nodes[2].url("/nacos/nacelle/v1/change"))
        .bearer_auth(&admin)
        .query(&[("id", id.as_str())])
        .send()
        .await?;
    let cr: Value = r.json().await?;
    assert_eq!(cr["data"]["state"], "published", "{cr}");
    let published = cr["data"]["events"]
        .as_array()
        .ok_or("events")?
        .iter()
        .filter(|e| e["kind"] == "published")
        .count();
    assert_eq!(published, 1, "{cr}");
    let r = http
        .get(nodes[1].url("/nacos/v1/cs/history"))
        .bearer_auth(&admin)
        .query(&[
            ("search", "accurate"),
            ("dataId", "sched"),
            ("group", "CLUSTER"),
        ])
        .send()
        .await?;
    let history: Value = r.json().await?;
    assert_eq!(
        history["totalCount"], 2,
        "one publish, one scheduled publish: {history}"
    );
    Ok(())
}

/// The live view of `data_id` as `node` answers it (`GET /nacos/nacelle/v1/clients`).
async fn live_view(http: &reqwest::Client, node: &Node, data_id: &str) -> TestResult<Value> {
    let resp = http
        .get(node.url("/nacos/nacelle/v1/clients"))
        .query(&[("groupName", "CLUSTER"), ("dataId", data_id)])
        .send()
        .await?;
    let body: Value = resp.json().await?;
    assert_eq!(body["code"], 0, "{body}");
    Ok(body["data"].clone())
}

/// (formal, gray `beta`, unknown, total) of a view's counts (`total` or one node's).
fn hold_counts(c: &Value) -> (u64, u64, u64, u64) {
    let n = |x: &Value| x.as_u64().unwrap_or(0);
    (
        n(&c["formal"]),
        n(&c["grays"]["beta"]),
        n(&c["unknown"]),
        n(&c["total"]),
    )
}

/// Polls every node's live view until `done` holds for each (within `SOON`).
async fn live_view_everywhere(
    http: &reqwest::Client,
    nodes: &[&Node],
    data_id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> TestResult<Vec<Value>> {
    let deadline = Instant::now() + SOON;
    let mut views = Vec::new();
    for node in nodes {
        loop {
            let v = live_view(http, node, data_id).await?;
            if done(&v) {
                views.push(v);
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("node :{} never showed {what}: {v}", node.port).into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(views)
}

/// Who runs what, cluster-wide: a gRPC client (the real Rust SDK) on node 1 and a long
/// poll from 127.0.0.2 on node 2; every node's view counts both, per node and in total,
/// after a publish and a gray for the long-polling client; a node that is down is shown
/// with its error and the view is marked incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_view_is_the_same_on_every_node() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let http = reqwest::Client::new();
    let (mut nodes, _) = start_cluster(&db.url, 3, |_| vec![]).await?;
    assert_eq!(publish(&http, &nodes[0], "live.yaml", "v: 1").await?, 200);
    for node in &nodes {
        until_served(&http, node, "live.yaml", Some("v: 1"), SOON).await?;
    }
    let sdk = Sdk::connect(
        nodes[0].ports.http,
        nodes[0].ports.grpc,
        "",
        "live-cluster-app",
    )
    .await?;
    let (rec, mut told) = recorder();
    sdk.client
        .add_listener("live.yaml".into(), "CLUSTER".into(), rec)
        .await
        .map_err(|e| format!("nacos-sdk add_listener: {e}"))?;
    let canary = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>()?)
        .build()?;
    let poll = |held: String| {
        let req = canary
            .post(nodes[1].url("/nacos/v1/cs/configs/listener"))
            .header("Long-Pulling-Timeout", "30000")
            .form(&[(
                "Listening-Configs",
                listening_configs(&[("live.yaml", "CLUSTER", &held, None)]),
            )]);
        tokio::spawn(async move { req.send().await?.text().await })
    };
    let held = poll(md5("v: 1"));
    let all: Vec<&Node> = nodes.iter().collect();
    let views = live_view_everywhere(&http, &all, "live.yaml", "both on v1", |v| {
        hold_counts(&v["total"]) == (2, 0, 0, 2) && v["complete"] == true
    })
    .await?;
    for (i, v) in views.iter().enumerate() {
        let parts = v["nodes"].as_array().ok_or("no nodes")?;
        assert_eq!(parts.len(), 3, "{v}");
        assert_eq!(parts[0]["self"], true, "node {} answers first: {v}", i + 1);
        let part = |port: u16| {
            parts
                .iter()
                .find(|p| p["node"] == format!("127.0.0.1:{port}").as_str())
                .cloned()
                .unwrap_or_default()
        };
        let (one, two, three) = (
            part(nodes[0].port),
            part(nodes[1].port),
            part(nodes[2].port),
        );
        assert_eq!(hold_counts(&one["counts"]), (1, 0, 0, 1), "{v}");
        assert_eq!(one["clients"][0]["protocol"], "grpc", "{v}");
        assert_eq!(one["clients"][0]["app"], "live-cluster-app", "{v}");
        assert_eq!(hold_counts(&two["counts"]), (1, 0, 0, 1), "{v}");
        assert_eq!(two["clients"][0]["ip"], "127.0.0.2", "{v}");
        assert_eq!(hold_counts(&three["counts"]), (0, 0, 0, 0), "{v}");
    }

    // A publish on node 3 and a gray for 127.0.0.2 on node 1: both clients are told on
    // their own nodes, and every node counts one on the formal v2, one on the gray.
    assert_eq!(publish(&http, &nodes[2], "live.yaml", "v: 2").await?, 200);
    told.wait_for("v: 2", SOON).await?;
    let answered = held.await??;
    assert!(answered.contains("live.yaml"), "{answered}");
    let held = poll(md5("v: 2"));
    live_view_everywhere(&http, &all, "live.yaml", "both on v2", |v| {
        v["formalMd5"] == md5("v: 2").as_str() && hold_counts(&v["total"]) == (2, 0, 0, 2)
    })
    .await?;
    let beta = http
        .post(nodes[0].url("/nacos/v1/cs/configs"))
        .header("betaIps", "127.0.0.2")
        .form(&[
            ("dataId", "live.yaml"),
            ("group", "CLUSTER"),
            ("content", "v: beta"),
        ])
        .send()
        .await?;
    assert_eq!(beta.text().await?, "true");
    let answered = held.await??;
    assert!(answered.contains("live.yaml"), "{answered}");
    let _held = poll(md5("v: beta"));
    live_view_everywhere(&http, &all, "live.yaml", "one formal, one gray", |v| {
        hold_counts(&v["total"]) == (1, 1, 0, 2)
    })
    .await?;

    // Node 3 dies: the others still answer, naming it as not asked.
    nodes[2].server.kill9()?;
    let down_port = nodes[2].port;
    let alive: Vec<&Node> = nodes.iter().take(2).collect();
    let views = live_view_everywhere(&http, &alive, "live.yaml", "node 3 missing", |v| {
        v["complete"] == false
    })
    .await?;
    for v in &views {
        let dead = v["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["node"] == format!("127.0.0.1:{down_port}").as_str())
            .cloned()
            .unwrap_or_default();
        assert!(dead["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        assert_eq!(hold_counts(&v["total"]), (1, 1, 0, 2), "{v}");
    }
    drop(nodes.pop());
    Ok(())
}
