//! Nodes sharing one database (MariaDB and PostgreSQL on this machine, each test on a
//! database of its own): change propagation between members, convergence without
//! notifications, restarts, database outages, and the cluster secret.

mod common;

use std::time::{Duration, Instant};

use common::{
    free_port, listening_configs, md5, wait_ready, BinaryServer, CuttableProxy, DbKind,
    TestDatabase, TestResult,
};

const SECRET: &str = "test-cluster-secret-0123456789";

struct Node {
    server: BinaryServer,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Node {
    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }
}

fn spawn_node(
    dir: tempfile::TempDir,
    port: u16,
    db_url: &str,
    members: &str,
    extra: &[&str],
) -> TestResult<Node> {
    let port_s = port.to_string();
    let mut args = vec![
        "--port",
        port_s.as_str(),
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
    let server = BinaryServer::spawn(dir.path(), &args)?;
    Ok(Node {
        server,
        port,
        _dir: dir,
    })
}

async fn start_cluster(
    http: &reqwest::Client,
    db_url: &str,
    n: usize,
    extra: impl Fn(usize) -> Vec<&'static str>,
) -> TestResult<(Vec<Node>, String)> {
    let ports: Vec<u16> = (0..n).map(|_| free_port()).collect::<Result<_, _>>()?;
    let members = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        nodes.push(spawn_node(
            tempfile::tempdir()?,
            *port,
            db_url,
            &members,
            &extra(i),
        )?);
    }
    for node in &nodes {
        wait_ready(http, node.server.addr).await?;
    }
    Ok((nodes, members))
}

async fn publish(
    http: &reqwest::Client,
    node: &Node,
    data_id: &str,
    content: &str,
) -> TestResult<u16> {
    let resp = http
        .post(node.url("/nacos/v1/cs/configs"))
        .form(&[
            ("dataId", data_id),
            ("group", "CLUSTER"),
            ("content", content),
        ])
        .send()
        .await?;
    Ok(resp.status().as_u16())
}

async fn get(http: &reqwest::Client, node: &Node, data_id: &str) -> TestResult<Option<String>> {
    let resp = http
        .get(node.url("/nacos/v1/cs/configs"))
        .query(&[("dataId", data_id), ("group", "CLUSTER")])
        .send()
        .await?;
    match resp.status().as_u16() {
        200 => Ok(Some(resp.text().await?)),
        404 => Ok(None),
        s => Err(format!("GET {data_id}: {s} {}", resp.text().await?).into()),
    }
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

async fn publish_on_one_node_reaches_a_long_poll_on_another(kind: DbKind) -> TestResult {
    let db = TestDatabase::create(kind)?;
    let http = reqwest::Client::new();
    let (nodes, _) = start_cluster(&http, &db.url(), 3, |_| vec![]).await?;
    assert_eq!(publish(&http, &nodes[0], "shared.yaml", "v1").await?, 200);
    until_served(
        &http,
        &nodes[2],
        "shared.yaml",
        Some("v1"),
        Duration::from_secs(10),
    )
    .await?;

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
    println!(
        "[{kind:?}] publish on node 1 → long poll on node 3 released after {:?}",
        woke.saturating_duration_since(sent)
    );
    assert_eq!(
        get(&http, &nodes[2], "shared.yaml").await?.as_deref(),
        Some("v2")
    );

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
async fn mariadb_publish_on_one_node_reaches_a_long_poll_on_another() -> TestResult {
    publish_on_one_node_reaches_a_long_poll_on_another(DbKind::MariaDb).await
}

#[tokio::test]
async fn postgres_publish_on_one_node_reaches_a_long_poll_on_another() -> TestResult {
    publish_on_one_node_reaches_a_long_poll_on_another(DbKind::Postgres).await
}

#[tokio::test]
async fn a_dropped_notification_still_converges_within_2s() -> TestResult {
    let db = TestDatabase::create(DbKind::MariaDb)?;
    let http = reqwest::Client::new();
    // Node 3 drops every notification it receives: only the change log can update it.
    let (nodes, _) = start_cluster(&http, &db.url(), 3, |i| {
        if i == 2 {
            vec!["--fault-drop-cluster-notifications"]
        } else {
            vec![]
        }
    })
    .await?;
    for round in 0..3 {
        let content = format!("value {round}");
        assert_eq!(publish(&http, &nodes[0], "lossy", &content).await?, 200);
        let took = until_served(
            &http,
            &nodes[2],
            "lossy",
            Some(&content),
            Duration::from_secs(2),
        )
        .await?;
        println!(
            "round {round}: node with dropped notifications served the new value after {took:?}"
        );
    }
    let resp = http
        .delete(nodes[0].url("/nacos/v1/cs/configs?dataId=lossy&group=CLUSTER"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    let took = until_served(&http, &nodes[2], "lossy", None, Duration::from_secs(2)).await?;
    println!("delete converged after {took:?}");
    Ok(())
}

#[tokio::test]
async fn a_restarted_node_converges() -> TestResult {
    let db = TestDatabase::create(DbKind::MariaDb)?;
    let http = reqwest::Client::new();
    let (mut nodes, members) = start_cluster(&http, &db.url(), 2, |_| vec![]).await?;
    assert_eq!(publish(&http, &nodes[0], "a", "1").await?, 200);
    assert_eq!(publish(&http, &nodes[0], "b", "1").await?, 200);
    until_served(&http, &nodes[1], "b", Some("1"), Duration::from_secs(10)).await?;

    let killed = nodes.remove(1);
    let port = killed.port;
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

    let restarted = spawn_node(dir, port, &db.url(), &members, &[])?;
    wait_ready(&http, restarted.server.addr).await?;
    assert_eq!(get(&http, &restarted, "a").await?.as_deref(), Some("2"));
    assert_eq!(get(&http, &restarted, "b").await?, None);
    assert_eq!(get(&http, &restarted, "c").await?.as_deref(), Some("new"));
    // And it keeps following changes made elsewhere.
    assert_eq!(publish(&http, &nodes[0], "a", "3").await?, 200);
    until_served(&http, &restarted, "a", Some("3"), Duration::from_secs(10)).await?;
    Ok(())
}

async fn database_outage(kind: DbKind) -> TestResult {
    let db = TestDatabase::create(kind)?;
    let target = match kind {
        DbKind::MariaDb => "127.0.0.1:3306",
        DbKind::Postgres => "127.0.0.1:5432",
    };
    let proxy = CuttableProxy::start(target.parse()?).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let dir = tempfile::tempdir()?;
    let server = BinaryServer::spawn(dir.path(), &["--db", &db.url_via(proxy.port)])?;
    wait_ready(&http, server.addr).await?;
    let node = Node {
        port: server.addr.port(),
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
    database_outage(DbKind::MariaDb).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_outage_reads_served_writes_fail_then_recover() -> TestResult {
    database_outage(DbKind::Postgres).await
}

#[tokio::test]
async fn only_callers_with_the_cluster_secret_count_as_members() -> TestResult {
    let db = TestDatabase::create(DbKind::MariaDb)?;
    let http = reqwest::Client::new();
    let (nodes, _) = start_cluster(&http, &db.url(), 1, |_| vec![]).await?;
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
    Ok(())
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
    let db = TestDatabase::create(DbKind::MariaDb)?;
    let proxy = CuttableProxy::start("127.0.0.1:3306".parse()?).await?;
    proxy.cut();
    let http = reqwest::Client::new();
    let dir = tempfile::tempdir()?;
    let server = BinaryServer::spawn(dir.path(), &["--db", &db.url_via(proxy.port)])?;
    let status = |path: &'static str| {
        let http = http.clone();
        let url = server.url(path);
        async move { Ok::<_, reqwest::Error>(http.get(url).send().await?.status().as_u16()) }
    };
    assert_eq!(status("/nacos/v1/console/health/liveness").await?, 200);
    assert_eq!(status("/nacos/v1/console/health/readiness").await?, 503);
    assert_eq!(status("/nacos/v1/cs/configs?dataId=a&group=G").await?, 503);
    proxy.restore();
    wait_ready(&http, server.addr).await?;
    assert_eq!(status("/nacos/v1/cs/configs?dataId=a&group=G").await?, 404);
    Ok(())
}
