//! The client against real Nacelle servers (in-process on port 0, over real sockets):
//! every operation, listeners (a key created after the listener included), typed hot
//! reload of 20 keys, broken versions kept out, layered bindings, a server restart with a
//! change made while it was down, failover between two servers sharing a database, the
//! snapshot directory with no server, the HTTP admin calls and the metrics hook.

mod common;

use common::{addr_of, start_on};

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nacelle::{RunningServer, Settings};
use nacelle_client::{
    Change, Client, ClientError, Format, ImportPolicy, MetricEvent, PublishOptions, ServerAddr,
    Transport, Watch,
};
use nacelle_testkit::server::{settings_for, TestServer};
use nacelle_testkit::{free_port, md5, Api, Backend, TestDb, SOON};
use serde::Deserialize;

fn running(ts: &TestServer) -> Result<&RunningServer> {
    ts.server.as_ref().context("server stopped")
}

async fn client_of(ts: &TestServer) -> Result<Client> {
    Ok(Client::builder()
        .server(addr_of(running(ts)?))
        .build()
        .await?)
}

/// The next change of a watch (a hang detector, not a timing assertion).
async fn next(w: &mut Watch) -> Result<Change> {
    tokio::time::timeout(SOON, w.next_change())
        .await
        .context("no change within SOON")?
        .context("watch ended")
}

/// Polls `cond` until it holds.
async fn until(what: &str, mut cond: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + SOON;
    while !cond() {
        if Instant::now() > deadline {
            bail!("still not {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

#[tokio::test]
async fn get_publish_remove_with_type_cas_tag_and_beta() -> Result<()> {
    let ts = TestServer::start().await?;
    let client = client_of(&ts).await?;
    assert_eq!(client.get("app.yaml").await?, None);

    client
        .publish_with("app.yaml", "a: 1\n", &PublishOptions::typed("yaml"))
        .await?;
    let got = client.get("app.yaml").await?.context("published")?;
    assert_eq!(
        (got.content.as_str(), got.content_type.as_str()),
        ("a: 1\n", "yaml")
    );
    assert_eq!(got.md5, md5("a: 1\n"));
    assert!(got.last_modified > 0 && !got.beta);
    // Seen over HTTP too.
    assert_eq!(
        ts.get("", "DEFAULT_GROUP", "app.yaml").await?.as_deref(),
        Some("a: 1\n")
    );

    // Compare-and-set: the right md5 wins, a stale one fails.
    let cas = |md5: &str| PublishOptions {
        cas_md5: Some(md5.to_string()),
        ..PublishOptions::typed("yaml")
    };
    client
        .publish_with("app.yaml", "a: 2\n", &cas(&got.md5))
        .await?;
    match client
        .publish_with("app.yaml", "a: 3\n", &cas(&got.md5))
        .await
    {
        Err(ClientError::CasConflict) => {}
        other => bail!("expected a CAS conflict, got {other:?}"),
    }
    assert_eq!(
        client.get("app.yaml").await?.context("kept")?.content,
        "a: 2\n"
    );

    // A tagged variant, read by its tag only.
    let tagged = PublishOptions {
        tag: Some("canary".into()),
        ..Default::default()
    };
    client.publish_with("app.yaml", "a: tag\n", &tagged).await?;
    let t = client
        .get_tagged("app.yaml", "canary")
        .await?
        .context("tag variant")?;
    assert_eq!(t.content, "a: tag\n");
    assert_eq!(
        client.get("app.yaml").await?.context("formal")?.content,
        "a: 2\n"
    );
    client.remove_tagged("app.yaml", Some("canary")).await?;
    assert_eq!(client.get_tagged("app.yaml", "canary").await?, None);

    // A beta to this machine's address: served to us, flagged.
    let beta = PublishOptions {
        beta_ips: vec!["127.0.0.1".into()],
        ..Default::default()
    };
    client.publish_with("app.yaml", "a: beta\n", &beta).await?;
    let b = client.get("app.yaml").await?.context("beta")?;
    assert_eq!((b.content.as_str(), b.beta), ("a: beta\n", true));
    client.admin().stop_beta("app.yaml").await?;
    let f = client.get("app.yaml").await?.context("formal")?;
    assert_eq!((f.content.as_str(), f.beta), ("a: 2\n", false));

    // Groups and namespaces.
    client.publish(("G1", "x.txt"), "in G1").await?;
    assert_eq!(ts.get("", "G1", "x.txt").await?.as_deref(), Some("in G1"));
    assert_eq!(
        client.get(("G1", "x.txt")).await?.context("G1")?.content,
        "in G1"
    );
    assert_eq!(client.get("x.txt").await?, None);

    client.remove("app.yaml").await?;
    client.remove(("G1", "x.txt")).await?;
    assert_eq!(client.get(("G1", "x.txt")).await?, None);
    assert_eq!(ts.get("", "DEFAULT_GROUP", "app.yaml").await?, None);
    // Removing what does not exist succeeds, as in Nacos.
    client.remove("never").await?;

    // Bad input is the server's clear error, not a panic.
    match client.publish("bad id!", "x").await {
        Err(ClientError::Invalid(m)) => assert!(m.contains("dataId"), "{m}"),
        other => bail!("expected invalid, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn encrypted_configs_are_encrypted_here_and_decrypted_here() -> Result<()> {
    let ts = TestServer::start().await?;
    let client = client_of(&ts).await?;
    client
        .publish("cipher-aes-db.yml", "password: s3cret\n")
        .await?;
    let got = client
        .get("cipher-aes-db.yml")
        .await?
        .context("published")?;
    assert_eq!(got.content, "password: s3cret\n");
    // The server holds ciphertext (its md5 is not the plaintext's) and serves plaintext
    // over HTTP, as Nacos does.
    assert_ne!(got.md5, md5("password: s3cret\n"));
    assert_eq!(
        ts.get("", "DEFAULT_GROUP", "cipher-aes-db.yml")
            .await?
            .as_deref(),
        Some("password: s3cret\n")
    );
    let mut w = client.watch("cipher-aes-db.yml").await?;
    assert_eq!(
        w.initial().map(|c| c.content.as_str()),
        Some("password: s3cret\n")
    );
    client
        .publish("cipher-aes-db.yml", "password: n3w\n")
        .await?;
    let c = next(&mut w).await?;
    assert_eq!(c.config.context("content")?.content, "password: n3w\n");
    Ok(())
}

#[tokio::test]
async fn a_listener_gets_the_first_value_of_a_key_created_after_it() -> Result<()> {
    let ts = TestServer::start().await?;
    let client = client_of(&ts).await?;
    let mut w = client.watch("later.properties").await?;
    assert_eq!(w.initial(), None);

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _cb = client
        .listen(("G", "later2"), move |c: Change| {
            // The test may have ended; then nobody reads.
            let _gone = tx.send(c);
        })
        .await?;

    ts.publish("", "DEFAULT_GROUP", "later.properties", "k=1")
        .await?;
    let c = next(&mut w).await?;
    assert_eq!(c.config.as_ref().map(|c| c.content.as_str()), Some("k=1"));

    ts.publish("", "G", "later2", "v").await?;
    let c = tokio::time::timeout(SOON, rx.recv())
        .await?
        .context("callback")?;
    assert_eq!(c.config.map(|c| c.content), Some("v".to_string()));

    // Further changes, and the removal.
    ts.publish("", "DEFAULT_GROUP", "later.properties", "k=2")
        .await?;
    assert_eq!(
        next(&mut w).await?.config.map(|c| c.content),
        Some("k=2".into())
    );
    ts.delete("", "DEFAULT_GROUP", "later.properties").await?;
    assert_eq!(next(&mut w).await?.config, None);
    Ok(())
}

#[derive(Debug, Deserialize, PartialEq)]
struct Knob {
    n: u32,
    name: String,
}

#[tokio::test]
async fn twenty_bound_keys_reload_and_broken_versions_keep_the_last_good_value() -> Result<()> {
    let ts = TestServer::start().await?;
    let client = client_of(&ts).await?;
    type Doc = fn(u32, u32) -> String;
    let formats: [(&str, Format, Doc); 4] = [
        ("yaml", Format::Yaml, |i, n| format!("n: {n}\nname: k{i}\n")),
        ("json", Format::Json, |i, n| {
            format!(r#"{{"n": {n}, "name": "k{i}"}}"#)
        }),
        ("toml", Format::Toml, |i, n| {
            format!("n = {n}\nname = \"k{i}\"\n")
        }),
        ("properties", Format::Properties, |i, n| {
            format!("n={n}\nname=k{i}\n")
        }),
    ];
    let mut bindings = Vec::new();
    for i in 0..20u32 {
        let (ext, format, doc) = formats[i as usize % formats.len()];
        let id = format!("knob{i}.{ext}");
        client
            .publish_with(id.as_str(), &doc(i, 0), &PublishOptions::typed(ext))
            .await?;
        let b = client.bind::<Knob>(id.as_str(), format).await?;
        assert_eq!(
            *b.get(),
            Knob {
                n: 0,
                name: format!("k{i}")
            }
        );
        bindings.push((id, ext, doc, b));
    }
    let started = Instant::now();
    for (i, (id, ext, doc, _)) in bindings.iter().enumerate() {
        client
            .publish_with(id.as_str(), &doc(i as u32, 1), &PublishOptions::typed(*ext))
            .await?;
    }
    for (_, _, _, b) in &bindings {
        until("reloaded", || b.get().n == 1).await?;
        assert_eq!(b.version(), 2);
    }
    println!("20 keys published and reloaded in {:?}", started.elapsed());

    // A broken YAML version: the last good value stays, the error is reported.
    let (id, _, _, b) = &bindings[0];
    let mut errors = b.errors();
    ts.publish("", "DEFAULT_GROUP", id, "n: [unclosed\n")
        .await?;
    let e = tokio::time::timeout(SOON, errors.recv()).await??;
    assert!(e.reason.contains("YAML"), "{e}");
    assert_eq!(e.md5, md5("n: [unclosed\n"));
    assert_eq!(b.get().n, 1);
    assert_eq!(b.last_error(), Some(e));
    // A version of the wrong shape is rejected too.
    ts.publish("", "DEFAULT_GROUP", id, "n: -5\nname: x\n")
        .await?;
    let e = tokio::time::timeout(SOON, errors.recv()).await??;
    assert!(e.reason.contains("bound type"), "{e}");
    // A good one replaces it and clears the error.
    ts.publish("", "DEFAULT_GROUP", id, "n: 7\nname: k0\n")
        .await?;
    until("reloaded after the errors", || b.get().n == 7).await?;
    assert_eq!(b.last_error(), None);
    Ok(())
}

#[tokio::test]
async fn validators_and_layers() -> Result<()> {
    #[derive(Debug, Deserialize)]
    struct Web {
        port: u16,
        host: String,
        #[serde(default)]
        debug: bool,
    }
    let ts = TestServer::start().await?;
    let client = client_of(&ts).await?;
    ts.publish(
        "",
        "DEFAULT_GROUP",
        "shared.yaml",
        "host: 0.0.0.0\nport: 80\ndebug: true\n",
    )
    .await?;
    ts.publish("", "DEFAULT_GROUP", "app.properties", "port=8080\n")
        .await?;
    let web = client
        .binder::<Web>()
        .layer("shared.yaml", Format::Yaml)
        .layer("app.properties", Format::Properties)
        .layer("profile.json", Format::Json) // absent: contributes nothing
        .validate(|w: &Web| {
            if w.port < 1024 && !w.debug {
                Err(format!("port {} is privileged", w.port))
            } else {
                Ok(())
            }
        })
        .bind()
        .await?;
    assert_eq!((web.get().host.as_str(), web.get().port), ("0.0.0.0", 8080));

    // The profile appears later and wins.
    ts.publish(
        "",
        "DEFAULT_GROUP",
        "profile.json",
        r#"{"debug": false, "port": 9090}"#,
    )
    .await?;
    until("profile layered", || web.get().port == 9090).await?;
    assert!(!web.get().debug);

    // The validator rejects a privileged port without debug; the value stays.
    let mut errors = web.errors();
    ts.publish(
        "",
        "DEFAULT_GROUP",
        "profile.json",
        r#"{"debug": false, "port": 443}"#,
    )
    .await?;
    let e = tokio::time::timeout(SOON, errors.recv()).await??;
    assert!(e.reason.contains("privileged"), "{e}");
    assert_eq!(web.get().port, 9090);

    // The profile removed: the lower layers again.
    ts.delete("", "DEFAULT_GROUP", "profile.json").await?;
    until("profile gone", || web.get().port == 8080).await?;

    // A first value that is rejected fails the bind.
    match client.bind::<Web>("shared.yaml", Format::Json).await {
        Err(ClientError::Invalid(m)) => assert!(m.contains("JSON"), "{m}"),
        other => bail!("expected a rejected first value, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_change_made_while_the_server_was_down_arrives_after_its_restart() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (http, grpc) = (free_port()?, free_port()?);
    let server = start_on(dir.path(), http, grpc).await?;
    let api = Api::new(server.http_addr)?;
    api.publish("", "DEFAULT_GROUP", "restart.yaml", "v: 1\n")
        .await?;
    let client = Client::builder().server(addr_of(&server)).build().await?;
    let mut w = client.watch("restart.yaml").await?;
    assert_eq!(w.initial().map(|c| c.content.as_str()), Some("v: 1\n"));
    let b = client
        .bind::<serde_json::Value>("restart.yaml", Format::Yaml)
        .await?;

    // Down: the change is made on the same data directory by another server (other ports)
    // that is gone again before the first comes back.
    server.shutdown().await?;
    let other = start_on(dir.path(), 0, 0).await?;
    Api::new(other.http_addr)?
        .publish("", "DEFAULT_GROUP", "restart.yaml", "v: 2\n")
        .await?;
    other.shutdown().await?;
    assert_eq!(b.get()["v"], 1);

    let restarted = Instant::now();
    let _server = start_on(dir.path(), http, grpc).await?;
    let c = next(&mut w).await?;
    let delay = restarted.elapsed();
    assert_eq!(c.config.map(|c| c.content), Some("v: 2\n".into()));
    until("the binding reloaded", || b.get()["v"] == 2).await?;
    println!("change made while down reached the application {delay:?} after the restart");
    Ok(())
}

#[tokio::test]
async fn failover_between_two_servers_sharing_a_database() -> Result<()> {
    let Some(db) = TestDb::for_server(Backend::MariaDb).await? else {
        bail!("MariaDB gives a database");
    };
    let start = |dir: &Path| {
        let settings = settings_for(dir, |s: &mut Settings| {
            s.db = Some(db.url.clone());
            s.follow_interval = Duration::from_millis(200);
        });
        async move {
            let server = nacelle::start(&settings).await?;
            Api::new(server.http_addr)?.wait_ready().await?;
            anyhow::Ok(server)
        }
    };
    let (da, dbdir) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = start(da.path()).await?;
    let b = start(dbdir.path()).await?;
    let api_b = Api::new(b.http_addr)?;
    api_b.publish("", "DEFAULT_GROUP", "fo.txt", "one").await?;

    let client = Client::builder()
        .server(addr_of(&a))
        .server(addr_of(&b))
        .build()
        .await?;
    assert_eq!(client.wait_connected().await?, addr_of(&a));
    // A learns of B's write from the shared database's change log.
    let deadline = Instant::now() + SOON;
    while client.get("fo.txt").await?.is_none() {
        if Instant::now() > deadline {
            bail!("A never saw B's write");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut w = client.watch("fo.txt").await?;
    assert_eq!(w.initial().map(|c| c.content.as_str()), Some("one"));

    // A stops (its clients are told to reconnect elsewhere); a change on B reaches us.
    a.shutdown().await?;
    api_b.publish("", "DEFAULT_GROUP", "fo.txt", "two").await?;
    assert_eq!(
        next(&mut w).await?.config.map(|c| c.content),
        Some("two".into())
    );
    assert_eq!(client.connected_to(), Some(addr_of(&b)));
    // And pushes keep coming from B.
    api_b
        .publish("", "DEFAULT_GROUP", "fo.txt", "three")
        .await?;
    assert_eq!(
        next(&mut w).await?.config.map(|c| c.content),
        Some("three".into())
    );
    assert_eq!(
        client.get("fo.txt").await?.map(|c| c.content),
        Some("three".into())
    );
    b.shutdown().await?;
    Ok(())
}

#[tokio::test]
async fn the_snapshot_serves_when_no_server_answers_and_the_server_then_catches_up() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let snap = tempfile::tempdir()?;
    let (http, grpc) = (free_port()?, free_port()?);
    let server = start_on(dir.path(), http, grpc).await?;
    let api = Api::new(server.http_addr)?;
    api.publish("", "DEFAULT_GROUP", "snap.json", r#"{"n": 1, "name": "a"}"#)
        .await?;
    {
        let client = Client::builder()
            .server(addr_of(&server))
            .snapshot_dir(snap.path())
            .build()
            .await?;
        let b = client.bind::<Knob>("snap.json", Format::Json).await?;
        assert_eq!(b.get().n, 1);
        assert!(!b.is_stale());
    }
    api.publish("", "DEFAULT_GROUP", "snap.json", r#"{"n": 2, "name": "a"}"#)
        .await?;
    server.shutdown().await?;

    // No server: the application starts from the snapshot, flagged stale.
    let client = Client::builder()
        .server(ServerAddr::new("127.0.0.1", http)?.with_grpc_port(grpc))
        .snapshot_dir(snap.path())
        .wait_for_server(Duration::from_millis(300))
        .build()
        .await?;
    let b = client.bind::<Knob>("snap.json", Format::Json).await?;
    assert_eq!(b.get().n, 1);
    assert!(b.is_stale());
    // Without a snapshot of the key, no server is an error.
    match client.get("snap.json").await {
        Err(e) if e.is_unavailable() => {}
        other => bail!("expected unavailable, got {other:?}"),
    }

    // The server comes back: the newer value replaces the snapshot's.
    let _server = start_on(dir.path(), http, grpc).await?;
    until("caught up", || b.get().n == 2).await?;
    until("fresh", || !b.is_stale()).await?;
    Ok(())
}

#[tokio::test]
async fn admin_calls_over_http() -> Result<()> {
    let ts = TestServer::start().await?;
    let client = client_of(&ts).await?;
    let admin = client.admin();
    for i in 0..3 {
        client
            .publish(format!("svc{i}.yaml").as_str(), &format!("v: {i}\n"))
            .await?;
    }
    let page = admin.search("", "svc*", "", 1, 10).await?;
    assert_eq!(page.total_count, 3);
    assert_eq!(page.page_items[0].data_id, "svc0.yaml");

    client.publish("svc0.yaml", "v: 10\n").await?;
    let hist = admin.history("svc0.yaml", 1, 10).await?;
    assert_eq!(hist.page_items.len(), 2);
    let oldest = hist.page_items.last().context("an entry")?;
    let entry = admin.history_entry("svc0.yaml", &oldest.id).await?;
    assert_eq!(entry.content, "v: 0\n");
    match admin.history_entry("svc0.yaml", "999999").await {
        Err(ClientError::NotFound(_)) => {}
        other => bail!("expected not found, got {other:?}"),
    }

    admin
        .create_namespace("dev", "Development", "dev env")
        .await?;
    let ns = admin.namespaces().await?;
    assert!(ns
        .iter()
        .any(|n| n.namespace == "dev" && n.namespace_show_name == "Development"));

    let zip = admin.export("", None).await?;
    assert!(zip.starts_with(b"PK"));
    let report = admin.import("dev", &zip, ImportPolicy::Overwrite).await?;
    assert_eq!(report.succ_count, 3);
    assert_eq!(
        ts.get("dev", "DEFAULT_GROUP", "svc0.yaml")
            .await?
            .as_deref(),
        Some("v: 10\n")
    );
    let report = admin.import("dev", &zip, ImportPolicy::Skip).await?;
    assert_eq!((report.succ_count, report.skip_count), (0, 3));

    admin.delete_namespace("dev").await?;
    assert!(!admin
        .namespaces()
        .await?
        .iter()
        .any(|n| n.namespace == "dev"));
    Ok(())
}

#[tokio::test]
async fn the_metrics_hook_sees_requests_connections_and_changes() -> Result<()> {
    let ts = TestServer::start().await?;
    let (requests, connects, changes) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (r, c, ch) = (requests.clone(), connects.clone(), changes.clone());
    let client = Client::builder()
        .server(addr_of(running(&ts)?))
        .metrics(move |e: &MetricEvent<'_>| match e {
            MetricEvent::Request { .. } => {
                r.fetch_add(1, Ordering::Relaxed);
            }
            MetricEvent::Connected { .. } => {
                c.fetch_add(1, Ordering::Relaxed);
            }
            MetricEvent::Change { .. } => {
                ch.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        })
        .build()
        .await?;
    let mut w = client.watch("m.txt").await?;
    client.publish("m.txt", "x").await?;
    next(&mut w).await?;
    assert_eq!(connects.load(Ordering::Relaxed), 1);
    assert!(requests.load(Ordering::Relaxed) >= 3);
    assert!(changes.load(Ordering::Relaxed) >= 1);
    Ok(())
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() -> Result<()> {
    let port = free_port()?;
    let client = Client::builder()
        .server_addrs([format!("127.0.0.1:{port}/{port}")])
        .wait_for_server(Duration::from_millis(300))
        .build()
        .await?;
    match client.get("x").await {
        Err(ClientError::Unavailable(m)) => assert!(m.contains(&port.to_string()), "{m}"),
        other => bail!("expected unavailable, got {other:?}"),
    }
    match client.watch("x").await {
        Err(e) if e.is_unavailable() => {}
        other => bail!("expected unavailable, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn the_http_long_polling_transport() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (http, grpc) = (free_port()?, free_port()?);
    let server = start_on(dir.path(), http, grpc).await?;
    let client = Client::builder()
        // The gRPC port is never used by this transport.
        .server(ServerAddr::new("127.0.0.1", http)?.with_grpc_port(1))
        .transport(Transport::HttpLongPolling)
        .build()
        .await?;
    assert_eq!(client.get("h.yaml").await?, None);
    client
        .publish_with("h.yaml", "v: 1\n", &PublishOptions::typed("yaml"))
        .await?;
    let got = client.get("h.yaml").await?.context("published")?;
    assert_eq!(
        (got.content.as_str(), got.content_type.as_str()),
        ("v: 1\n", "yaml")
    );
    assert_eq!(got.md5, md5("v: 1\n"));
    let stale = PublishOptions {
        cas_md5: Some(md5("other")),
        ..Default::default()
    };
    match client.publish_with("h.yaml", "v: x\n", &stale).await {
        Err(ClientError::CasConflict) => {}
        other => bail!("expected a CAS conflict, got {other:?}"),
    }

    // A key created after the listener, changes, a removal, a binding.
    let mut w = client.watch("later.txt").await?;
    assert_eq!(w.initial(), None);
    let b = client
        .bind::<serde_json::Value>("h.yaml", Format::Yaml)
        .await?;
    client.publish("later.txt", "first").await?;
    assert_eq!(
        next(&mut w).await?.config.map(|c| c.content),
        Some("first".into())
    );
    client.publish("h.yaml", "v: 2\n").await?;
    until("bound over HTTP", || b.get()["v"] == 2).await?;
    client.remove("later.txt").await?;
    assert_eq!(next(&mut w).await?.config, None);

    // A change made while the server was down arrives after its restart.
    server.shutdown().await?;
    let other = start_on(dir.path(), 0, 0).await?;
    Api::new(other.http_addr)?
        .publish("", "DEFAULT_GROUP", "later.txt", "while down")
        .await?;
    other.shutdown().await?;
    let restarted = Instant::now();
    let _server = start_on(dir.path(), http, grpc).await?;
    assert_eq!(
        next(&mut w).await?.config.map(|c| c.content),
        Some("while down".into())
    );
    println!(
        "HTTP transport: change made while down arrived {:?} after the restart",
        restarted.elapsed()
    );
    Ok(())
}

#[tokio::test]
async fn app_name_and_labels_choose_gray_variants() -> Result<()> {
    let ts = TestServer::start().await?;
    let at = addr_of(running(&ts)?);
    ts.publish("", "DEFAULT_GROUP", "gray.yaml", "feature: off\n")
        .await?;
    let gray = |name: &'static str, rule: &'static str, content: &'static str| {
        let http = ts.http.clone();
        let url = ts.url("/nacos/v2/cs/config");
        async move {
            let r = http
                .post(url)
                .form(&[
                    ("dataId", "gray.yaml"),
                    ("group", "DEFAULT_GROUP"),
                    ("content", content),
                    ("grayName", name),
                    ("grayRule", rule),
                    ("grayPriority", "10"),
                ])
                .send()
                .await?;
            if !r.status().is_success() {
                bail!("gray publish: {} {}", r.status(), r.text().await?);
            }
            anyhow::Ok(())
        }
    };
    let shop = Client::builder()
        .server(at.clone())
        .app_name("shop")
        .build()
        .await?;
    let eu = Client::builder()
        .server(at.clone())
        .labels([("zone", "eu-1")])
        .build()
        .await?;
    let plain = Client::builder().server(at).build().await?;
    let mut shop_watch = shop.watch("gray.yaml").await?;
    assert_eq!(
        shop_watch.initial().map(|c| c.content.as_str()),
        Some("feature: off\n")
    );

    gray("shop-canary", "AppName=shop", "feature: shop\n").await?;
    gray("eu-canary", "zone=eu-1", "feature: eu\n").await?;
    assert_eq!(
        next(&mut shop_watch).await?.config.map(|c| c.content),
        Some("feature: shop\n".into())
    );
    assert_eq!(
        eu.get("gray.yaml").await?.map(|c| c.content),
        Some("feature: eu\n".into())
    );
    assert_eq!(
        plain.get("gray.yaml").await?.map(|c| c.content),
        Some("feature: off\n".into())
    );
    Ok(())
}

/// The client IPs the server lists as listeners of a key.
async fn listeners_of(api: &Api, data_id: &str) -> Result<usize> {
    let v = api.listeners("", "DEFAULT_GROUP", data_id).await?;
    Ok(v["lisentersGroupkeyStatus"]
        .as_object()
        .map_or(0, serde_json::Map::len))
}

/// Drops every kind of handle of one key, one at a time: the key stays listened until the
/// last goes, then the server no longer lists the client for it; the other key stays
/// listened; listening again later works.
async fn unlisten_on_last_drop(client: &Client, api: &Api, tag: &str) -> Result<()> {
    let (a, b) = (format!("drop-{tag}-a.yaml"), format!("drop-{tag}-b.yaml"));
    client.publish(a.as_str(), "v: 1\n").await?;
    client.publish(b.as_str(), "v: 1\n").await?;
    let first = client.watch(a.as_str()).await?;
    let second = client.watch(a.as_str()).await?;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let callback = client
        .listen(a.as_str(), move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
        })
        .await?;
    let binding = client
        .bind::<serde_json::Value>(a.as_str(), Format::Yaml)
        .await?;
    let mut other = client.watch(b.as_str()).await?;
    api.wait_listener("", "DEFAULT_GROUP", &a, SOON).await?;
    api.wait_listener("", "DEFAULT_GROUP", &b, SOON).await?;

    drop(first);
    drop(second);
    drop(callback);
    // The binding still holds the key: listened, and its changes arrive.
    client.publish(a.as_str(), "v: 2\n").await?;
    until("bound to v 2", || binding.get()["v"] == 2).await?;
    assert!(client.is_fresh(a.as_str()));
    assert_eq!(listeners_of(api, &a).await?, 1);

    drop(binding);
    let deadline = Instant::now() + SOON;
    while listeners_of(api, &a).await? != 0 {
        if Instant::now() > deadline {
            bail!("{tag}: the server still lists a listener of {a}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Forgotten by the client too (no md5 held, so nothing is fresh).
    assert!(!client.is_fresh(a.as_str()));
    // The other key is still listened, and its changes still arrive.
    assert_eq!(listeners_of(api, &b).await?, 1);
    client.publish(b.as_str(), "v: 2\n").await?;
    assert_eq!(
        next(&mut other).await?.config.map(|c| c.content),
        Some("v: 2\n".into())
    );

    // Listening again later works: the current value, then its changes.
    let mut again = client.watch(a.as_str()).await?;
    assert_eq!(again.initial().map(|c| c.content.as_str()), Some("v: 2\n"));
    api.wait_listener("", "DEFAULT_GROUP", &a, SOON).await?;
    client.publish(a.as_str(), "v: 3\n").await?;
    assert_eq!(
        next(&mut again).await?.config.map(|c| c.content),
        Some("v: 3\n".into())
    );
    Ok(())
}

#[tokio::test]
async fn dropping_the_last_watch_of_a_key_stops_listening_to_it() -> Result<()> {
    let ts = TestServer::start().await?;
    let grpc = client_of(&ts).await?;
    unlisten_on_last_drop(&grpc, &ts.api, "grpc").await?;

    let http = Client::builder()
        .server(ServerAddr::new("127.0.0.1", running(&ts)?.http_addr.port())?.with_grpc_port(1))
        .transport(Transport::HttpLongPolling)
        .build()
        .await?;
    unlisten_on_last_drop(&http, &ts.api, "http").await
}
