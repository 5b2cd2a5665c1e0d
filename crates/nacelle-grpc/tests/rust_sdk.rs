//! The real Rust client, crates.io `nacos-sdk` 0.8 (gRPC), against the gRPC adapter: the
//! round trips a user of that SDK performs. Latencies are printed, never asserted.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{print_latencies, recorder, TestServer, SOON};
use nacelle_grpc::GrpcOptions;

fn opts() -> GrpcOptions {
    GrpcOptions {
        shutdown_grace: Duration::from_secs(2),
        ..GrpcOptions::default()
    }
}

fn err(e: nacos_sdk::api::error::Error) -> anyhow::Error {
    anyhow::anyhow!("nacos-sdk: {e}")
}

#[tokio::test]
async fn publish_get_remove() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let sdk = server.sdk("").await?;
    let c = &sdk.client;
    let (d, g) = (
        "sdk-roundtrip.yaml".to_string(),
        "DEFAULT_GROUP".to_string(),
    );

    assert!(
        c.get_config(d.clone(), g.clone()).await.is_err(),
        "absent at first"
    );
    assert!(c
        .publish_config(d.clone(), g.clone(), "a: 1".into(), Some("yaml".into()))
        .await
        .map_err(err)?);
    let got = c.get_config(d.clone(), g.clone()).await.map_err(err)?;
    assert_eq!(got.content(), "a: 1");
    assert_eq!(got.content_type(), "yaml");
    assert_eq!(got.md5(), &nacelle_core::md5_hex(b"a: 1"));
    assert_eq!(got.namespace(), "");

    // Compare-and-set: a stale md5 fails, the current one succeeds.
    assert!(c
        .publish_config_cas(d.clone(), g.clone(), "a: 2".into(), None, "stale".into())
        .await
        .is_err());
    assert!(c
        .publish_config_cas(d.clone(), g.clone(), "a: 2".into(), None, got.md5().clone())
        .await
        .map_err(err)?);
    assert_eq!(
        c.get_config(d.clone(), g.clone())
            .await
            .map_err(err)?
            .content(),
        "a: 2"
    );

    assert!(c.remove_config(d.clone(), g.clone()).await.map_err(err)?);
    match c.get_config(d.clone(), g.clone()).await {
        Err(nacos_sdk::api::error::Error::ConfigNotFound(_)) => {}
        other => anyhow::bail!("expected ConfigNotFound after remove, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn listener_is_notified_on_change() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let publisher = server.sdk("").await?;
    let listener = server.sdk("").await?;
    let (d, g) = ("sdk-listen".to_string(), "DEFAULT_GROUP".to_string());
    publisher
        .client
        .publish_config(d.clone(), g.clone(), "v0".into(), None)
        .await
        .map_err(err)?;
    let (rec, mut notes) = recorder();
    listener
        .client
        .add_listener(d.clone(), g.clone(), rec)
        .await
        .map_err(err)?;
    server.wait_listens(1).await?;

    let mut latencies = Vec::new();
    for i in 1..=10 {
        let content = format!("v{i}");
        let t0 = Instant::now();
        publisher
            .client
            .publish_config(d.clone(), g.clone(), content.clone(), None)
            .await
            .map_err(err)?;
        let at = notes.wait_for(&content, SOON).await?;
        latencies.push(at - t0);
    }
    print_latencies(
        "nacos-sdk listener latency (publish over gRPC → callback)",
        latencies,
    );
    Ok(())
}

#[tokio::test]
async fn listener_on_a_key_that_does_not_exist_yet() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let sdk = server.sdk("").await?;
    let (d, g) = ("sdk-not-yet".to_string(), "DEFAULT_GROUP".to_string());
    let (rec, mut notes) = recorder();
    sdk.client
        .add_listener(d.clone(), g.clone(), rec)
        .await
        .map_err(err)?;
    server.wait_listens(1).await?;

    // The creation is pushed and acknowledged. (nacos-sdk 0.8 fills its cache from that
    // first fetch without calling listeners, because its initial query found nothing; the
    // next change is delivered to the listener.)
    let deadline = Instant::now() + SOON;
    let acks = server.stats.snapshot().push_acks;
    server.publish("", &g, &d, "created").await?;
    while server.stats.snapshot().push_acks <= acks {
        anyhow::ensure!(Instant::now() < deadline, "creation push not acknowledged");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t0 = Instant::now();
    server.publish("", &g, &d, "changed").await?;
    let at = notes.wait_for("changed", SOON).await?;
    println!("listener on a created key notified after {:?}", at - t0);
    Ok(())
}

#[tokio::test]
async fn non_default_namespace_is_isolated_and_echoed() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let dev = server.sdk("dev-ns").await?;
    let public = server.sdk("").await?;
    let (d, g) = ("sdk-ns".to_string(), "APP_GROUP".to_string());
    dev.client
        .publish_config(d.clone(), g.clone(), "dev".into(), None)
        .await
        .map_err(err)?;
    public
        .client
        .publish_config(d.clone(), g.clone(), "public".into(), None)
        .await
        .map_err(err)?;
    assert_eq!(
        dev.client
            .get_config(d.clone(), g.clone())
            .await
            .map_err(err)?
            .content(),
        "dev"
    );
    assert_eq!(
        public
            .client
            .get_config(d.clone(), g.clone())
            .await
            .map_err(err)?
            .content(),
        "public"
    );
    let key = nacelle_core::ConfigKey::parse(Some("dev-ns"), &g, &d)?;
    assert_eq!(
        &server
            .service
            .get(&nacelle_core::Caller::internal(), &key, None)?
            .ok_or_else(|| anyhow::anyhow!("missing"))?
            .config
            .content()[..],
        b"dev"
    );

    // The push names the namespace so the SDK finds its listener.
    let (rec, mut notes) = recorder();
    dev.client
        .add_listener(d.clone(), g.clone(), rec)
        .await
        .map_err(err)?;
    server.wait_listens(1).await?;
    public
        .client
        .publish_config(d.clone(), g.clone(), "public 2".into(), None)
        .await
        .map_err(err)?;
    let t0 = Instant::now();
    dev.client
        .publish_config(d.clone(), g.clone(), "dev 2".into(), None)
        .await
        .map_err(err)?;
    let at = notes.wait_for("dev 2", SOON).await?;
    println!("listener in namespace dev-ns notified after {:?}", at - t0);
    Ok(())
}

#[tokio::test]
async fn two_hundred_keys_on_one_client() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let sdk = server.sdk("").await?;
    let g = "MANY".to_string();
    let keys: Vec<String> = (0..200).map(|i| format!("many-{i:03}")).collect();
    for k in &keys {
        server.publish("", &g, k, "v0").await?;
    }
    let (rec, mut notes) = recorder();
    let t0 = Instant::now();
    for k in &keys {
        sdk.client
            .add_listener(k.clone(), g.clone(), rec.clone())
            .await
            .map_err(err)?;
    }
    println!("200 add_listener calls took {:?}", t0.elapsed());
    server.wait_listens(200).await?;

    let t0 = Instant::now();
    for k in &keys {
        server.publish("", &g, k, &format!("{k} v1")).await?;
    }
    let published = t0.elapsed();
    let mut pending: std::collections::HashSet<String> =
        keys.iter().map(|k| format!("{k} v1")).collect();
    let mut last = t0;
    while !pending.is_empty() {
        // Each notification carries its key's content, so any order works.
        let (at, content) = notes.next(SOON).await?;
        if pending.remove(&content) {
            last = at;
        }
    }
    println!(
        "200 keys published in {published:?}; all 200 listeners notified {:?} after the first publish",
        last - t0
    );
    Ok(())
}

#[tokio::test]
async fn twenty_clients_listening_to_one_key_are_all_notified() -> anyhow::Result<()> {
    let server = TestServer::start(opts()).await?;
    let (d, g) = ("sdk-fanout".to_string(), "DEFAULT_GROUP".to_string());
    server.publish("", &g, &d, "v0").await?;
    let mut clients = Vec::new();
    let mut all_notes = Vec::new();
    for _ in 0..20 {
        let sdk = server.sdk("").await?;
        let (rec, notes) = recorder();
        sdk.client
            .add_listener(d.clone(), g.clone(), rec)
            .await
            .map_err(err)?;
        clients.push(sdk);
        all_notes.push(notes);
    }
    server.wait_listens(20).await?;
    let t0 = Instant::now();
    server.publish("", &g, &d, "v1").await?;
    let mut latencies = Vec::new();
    for notes in &mut all_notes {
        latencies.push(notes.wait_for("v1", SOON).await? - t0);
    }
    print_latencies(
        "20 nacos-sdk clients on one key, publish → callback",
        latencies,
    );
    let s = server.stats.snapshot();
    assert_eq!(s.connections, 20);
    Ok(())
}

#[tokio::test]
async fn a_client_keeps_receiving_changes_after_a_server_restart() -> anyhow::Result<()> {
    let mut server = TestServer::start(opts()).await?;
    let sdk = server.sdk("").await?;
    let (d, g) = ("sdk-restart".to_string(), "DEFAULT_GROUP".to_string());
    server.publish("", &g, &d, "before").await?;
    let (rec, mut notes) = recorder();
    sdk.client
        .add_listener(d.clone(), g.clone(), rec)
        .await
        .map_err(err)?;
    let created = Instant::now();
    server.wait_listens(1).await?;
    server.publish("", &g, &d, "before 2").await?;
    notes.wait_for("before 2", SOON).await?;

    let t = Instant::now();
    server.restart().await?;
    println!(
        "server restarted on the same data dir and port in {:?}",
        t.elapsed()
    );
    assert_eq!(
        &server
            .service
            .get(
                &nacelle_core::Caller::internal(),
                &nacelle_core::ConfigKey::parse(None, &g, &d)?,
                None
            )?
            .ok_or_else(|| anyhow::anyhow!("lost"))?
            .config
            .content()[..],
        b"before 2",
        "the data survived"
    );

    // nacos-sdk 0.8 reconnects by itself but only re-sends its listen set every 60 s
    // (it ignores ConnectResetRequest); the change made meanwhile comes back through the
    // md5 comparison of that re-listen.
    let t0 = Instant::now();
    server.publish("", &g, &d, "after").await?;
    notes.wait_for("after", Duration::from_secs(150)).await?;
    println!(
        "change made after the restart delivered after {:?} ({:?} after the client was created)",
        t0.elapsed(),
        created.elapsed()
    );
    // From then on pushes flow again.
    let t0 = Instant::now();
    server.publish("", &g, &d, "after 2").await?;
    let at = notes.wait_for("after 2", SOON).await?;
    println!("push after the restart delivered in {:?}", at - t0);
    let _keep = Arc::new(sdk);
    Ok(())
}
