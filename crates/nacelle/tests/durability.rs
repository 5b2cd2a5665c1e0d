//! Durability and lifecycle of the real binary, on each backend: every acknowledged write
//! survives kill -9, history included (on MariaDB and PostgreSQL the restarted server
//! opens the same database); SIGTERM shuts down gracefully with exit code 0.

use std::process::Command;
use std::time::Duration;

use nacelle_testkit::server::BinaryServer;
use nacelle_testkit::{md5, per_backend, Backend, TestDb, TestResult};
use serde_json::Value;

/// Publishes `id` in the group `DURABLE`; fails unless acknowledged.
async fn publish(s: &BinaryServer, tenant: &str, id: &str, content: &str) -> TestResult {
    Ok(s.api.publish(tenant, "DURABLE", id, content).await?)
}

/// `--db URL` for a server backend's database; nothing for SQLite (a file in the data dir).
fn db_args(db: &Option<TestDb>) -> Vec<String> {
    match db {
        Some(db) => vec!["--db".to_string(), db.url.clone()],
        None => Vec::new(),
    }
}

/// Runs the binary on `dir` with `args`.
fn spawn(dir: &std::path::Path, args: &[String]) -> TestResult<BinaryServer> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok(BinaryServer::spawn(
        env!("CARGO_BIN_EXE_nacelle"),
        dir,
        &args,
    )?)
}

/// The full record of a config (`show=all`).
async fn record(s: &BinaryServer, id: &str, tenant: &str) -> TestResult<Value> {
    Ok(s.api.record(tenant, "DURABLE", id).await?)
}

per_backend!(acknowledged_writes_survive_kill_9);
async fn acknowledged_writes_survive_kill_9(backend: Backend) -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = TestDb::for_server(backend).await?;
    let args = db_args(&db);
    let http = reqwest::Client::new();
    let mut server = spawn(dir.path(), &args)?;
    server.api.wait_ready().await?;

    // 200 configs written concurrently, half updated, a few deleted; every write acknowledged.
    let mut tasks = Vec::new();
    for i in 0..200 {
        let api = server.api.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("cfg-{i}");
            let content = format!("value {i}\nline two 中文");
            let tenant = if i % 2 == 0 { "" } else { "prod" };
            let reply = api.try_publish(tenant, "DURABLE", &id, &content).await?;
            Ok::<_, anyhow::Error>(reply.body)
        }));
    }
    for t in tasks {
        assert_eq!(t.await??, "true");
    }
    for i in (0..200).step_by(2) {
        publish(&server, "", &format!("cfg-{i}"), &format!("updated {i}")).await?;
    }
    for i in [1, 3, 5] {
        let reply = server
            .api
            .delete("prod", "DURABLE", &format!("cfg-{i}"))
            .await?;
        assert_eq!(reply.body, "true");
    }
    // The very last acknowledged write, immediately followed by kill -9.
    publish(
        &server,
        "",
        "last-word",
        "acknowledged just before the crash",
    )
    .await?;
    // What the server holds in memory, to compare with what it reads back after the crash.
    let before = (
        record(&server, "cfg-0", "").await?,
        record(&server, "cfg-7", "prod").await?,
    );
    server.kill9()?;

    let server = spawn(dir.path(), &args)?;
    server.api.wait_ready().await?;
    // Every field, times included, is what the server answered before the crash.
    let after = (
        record(&server, "cfg-0", "").await?,
        record(&server, "cfg-7", "prod").await?,
    );
    assert_eq!(before, after);
    let get = |id: String, tenant: &'static str| {
        let api = server.api.clone();
        async move {
            let reply = api.get_with(tenant, "DURABLE", &id, &[]).await?;
            Ok::<_, anyhow::Error>((reply.status, reply.body))
        }
    };
    for i in 0..200 {
        let tenant = if i % 2 == 0 { "" } else { "prod" };
        let (status, body) = get(format!("cfg-{i}"), tenant).await?;
        if [1, 3, 5].contains(&i) {
            assert_eq!(status, 404, "cfg-{i} was deleted");
        } else if i % 2 == 0 {
            assert_eq!((status, body), (200, format!("updated {i}")));
        } else {
            assert_eq!((status, body), (200, format!("value {i}\nline two 中文")));
        }
    }
    let (status, body) = get("last-word".into(), "").await?;
    assert_eq!(
        (status, body.as_str()),
        (200, "acknowledged just before the crash")
    );

    // History survived too: cfg-0 has I then U; cfg-1 has I then D.
    let hist = |id: &str, tenant: &str| {
        server.url(&format!(
            "/nacos/v1/cs/history?search=accurate&dataId={id}&group=DURABLE&tenant={tenant}&pageNo=1&pageSize=10"
        ))
    };
    let page: Value = http.get(hist("cfg-0", "")).send().await?.json().await?;
    let ops: Vec<&str> = page["pageItems"]
        .as_array()
        .ok_or("no items")?
        .iter()
        .filter_map(|i| i["opType"].as_str())
        .collect();
    assert_eq!(ops, ["U", "I"]);
    let page: Value = http.get(hist("cfg-1", "prod")).send().await?.json().await?;
    let ops: Vec<&str> = page["pageItems"]
        .as_array()
        .ok_or("no items")?
        .iter()
        .filter_map(|i| i["opType"].as_str())
        .collect();
    assert_eq!(ops, ["D", "I"]);
    let nid = page["pageItems"][0]["id"].as_str().ok_or("no nid")?;
    let detail: Value = http
        .get(server.url(&format!(
            "/nacos/v1/cs/history?nid={nid}&dataId=cfg-1&group=DURABLE&tenant=prod"
        )))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(detail["content"], "value 1\nline two 中文");
    assert_eq!(detail["md5"], md5("value 1\nline two 中文"));
    Ok(())
}

per_backend!(sigterm_answers_held_polls_and_exits_zero);
async fn sigterm_answers_held_polls_and_exits_zero(backend: Backend) -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = TestDb::for_server(backend).await?;
    let http = reqwest::Client::new();
    let mut server = spawn(dir.path(), &db_args(&db))?;
    server.api.wait_ready().await?;
    publish(&server, "", "k", "v").await?;
    let lc = format!("k\u{2}DURABLE\u{2}{}\u{1}", md5("v"));
    let poll = {
        let http = http.clone();
        let url = server.url("/nacos/v1/cs/configs/listener");
        tokio::spawn(async move {
            let resp = http
                .post(url)
                .header("Long-Pulling-Timeout", "60000")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?;
            Ok::<_, reqwest::Error>((resp.status().as_u16(), resp.text().await?))
        })
    };
    // Wait until the server holds the poll (it lists the listener of the key), so SIGTERM
    // meets a held poll, not a request still on its way.
    server
        .api
        .wait_listener("", "DURABLE", "k", Duration::from_secs(20))
        .await?;
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()?;
    assert!(status.success());
    let (code, body) = tokio::time::timeout(Duration::from_secs(10), poll).await???;
    assert_eq!((code, body.as_str()), (200, ""));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(s) = server.child.try_wait()? {
            break s;
        }
        if std::time::Instant::now() > deadline {
            return Err("server did not exit within 10 s of SIGTERM".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(exit.code(), Some(0), "graceful shutdown exits 0");
    Ok(())
}
