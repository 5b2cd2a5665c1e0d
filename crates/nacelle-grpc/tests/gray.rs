//! Gray release over gRPC: raw clients on distinct source addresses (127.0.0.2, 127.0.0.3)
//! and label-carrying clients — the real Rust `nacos-sdk` (unprefixed labels, its app
//! name) and raw clients sending Java's `app_` labels — listening to one key. A gray
//! reaches exactly the connections it targets (pushed, served with `beta`), the others are
//! never pushed to; a connection holding its variant's md5 is up to date (no change loop);
//! stop and promote push to the right connections; two rules on one key resolve by
//! priority.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use common::{recorder, RawClient, TestServer};
use nacelle_core::{Caller, ConfigKey};
use nacelle_grpc::GrpcOptions;
use nacelle_testkit::md5;
use serde_json::json;

const G: &str = "DEFAULT_GROUP";
const SOON: Duration = Duration::from_secs(5);

/// A registered raw client from `source` (reporting it as its IP) with `labels`, listening
/// to `key` holding `md5`.
async fn listener(
    s: &TestServer,
    source: &str,
    labels: &[(&str, &str)],
    key: &str,
    held: &str,
) -> anyhow::Result<RawClient> {
    let ip: IpAddr = source.parse()?;
    let mut c = RawClient::connect_from(s.port, ip).await?;
    c.setup_labelled(source, labels).await?;
    let r = c.listen(&[(key, G, "", held)], true).await?;
    assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
    assert_eq!(r.body["changedConfigs"], json!([]), "up to date: {r:?}");
    Ok(c)
}

/// Waits for a change push of `key` and acks it.
async fn pushed(c: &mut RawClient, key: &str) -> anyhow::Result<()> {
    let Some(m) = c.next(SOON).await? else {
        bail!("stream ended");
    };
    if m.type_name != "ConfigChangeNotifyRequest" || m.str("dataId") != Some(key) {
        bail!("expected a change push of {key}, got {m:?}");
    }
    let id = m.str("requestId").context("push without requestId")?;
    c.respond("ConfigChangeNotifyResponse", id).await
}

/// Asserts that `c` has been pushed nothing. Rather than waiting a while for a push that
/// should not come, `c` listens to a key of its own that is then changed: that change must
/// be the next thing `c` is pushed. A publish has handed its pushes to the connections
/// when it returns (few listeners: no background walk), and a connection's stream carries
/// them in that order, so a push of an earlier change would come first.
async fn quiet(s: &TestServer, c: &mut RawClient, who: &str) -> anyhow::Result<()> {
    static MARKERS: AtomicUsize = AtomicUsize::new(0);
    let marker = format!("quiet-{}.txt", MARKERS.fetch_add(1, Ordering::Relaxed));
    let r = c.listen(&[(&marker, G, "", "")], true).await?;
    assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
    s.publish("", G, &marker, "marker").await?;
    let Some(m) = c.next(SOON).await? else {
        bail!("{who}: the stream ended");
    };
    if m.type_name != "ConfigChangeNotifyRequest" || m.str("dataId") != Some(marker.as_str()) {
        bail!("{who} was pushed to: {m:?}");
    }
    let id = m.str("requestId").context("push without requestId")?;
    c.respond("ConfigChangeNotifyResponse", id).await
}

/// `ConfigQueryRequest` of `key`: (content, beta).
async fn query(c: &mut RawClient, key: &str) -> anyhow::Result<(String, bool)> {
    let r = c
        .call(
            "ConfigQueryRequest",
            json!({"dataId": key, "group": G, "tenant": "", "headers": {}}),
        )
        .await?;
    assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
    Ok((
        r.str("content").unwrap_or_default().to_string(),
        r.body["beta"].as_bool().unwrap_or(false),
    ))
}

/// Publishes `content` to `key` over gRPC with `addition` (betaIps, grayName…).
async fn publish(
    admin: &mut RawClient,
    key: &str,
    content: &str,
    addition: serde_json::Value,
) -> anyhow::Result<()> {
    let r = admin
        .call(
            "ConfigPublishRequest",
            json!({"dataId": key, "group": G, "tenant": "", "content": content,
                   "additionMap": addition, "headers": {}}),
        )
        .await?;
    if r.int("resultCode") != Some(200) {
        bail!("publish failed: {r:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beta_is_pushed_only_to_its_address_and_stop_and_promote_push_the_right_ones(
) -> anyhow::Result<()> {
    let s = TestServer::start(GrpcOptions::default()).await?;
    let key = "canary.json";
    s.publish("", G, key, "{\"v\":1}").await?;
    let formal = md5("{\"v\":1}");
    let mut a = listener(&s, "127.0.0.2", &[], key, &formal).await?;
    let mut b = listener(&s, "127.0.0.3", &[], key, &formal).await?;
    let mut admin = RawClient::connect(s.port).await?;
    admin.setup("127.0.0.1").await?;

    publish(
        &mut admin,
        key,
        "{\"v\":\"beta\"}",
        json!({"betaIps": "127.0.0.2"}),
    )
    .await?;
    pushed(&mut a, key).await?;
    quiet(&s, &mut b, "the client outside the beta").await?;
    assert_eq!(query(&mut a, key).await?, ("{\"v\":\"beta\"}".into(), true));
    assert_eq!(query(&mut b, key).await?, ("{\"v\":1}".into(), false));

    // Holding the beta's md5 is up to date: no "changed" answer, no push loop.
    let r = a
        .listen(&[(key, G, "", &md5("{\"v\":\"beta\"}"))], true)
        .await?;
    assert_eq!(r.body["changedConfigs"], json!([]));
    quiet(&s, &mut a, "the beta client holding the beta").await?;

    // Stop: the beta client is pushed and gets the formal content back; the other is not.
    let service = &s.service;
    service
        .stop_beta(&Caller::internal(), &ConfigKey::from_trusted("", G, key))
        .await?;
    pushed(&mut a, key).await?;
    quiet(&s, &mut b, "the client outside the stopped beta").await?;
    assert_eq!(query(&mut a, key).await?, ("{\"v\":1}".into(), false));

    // Promote: the beta's client already has the content; every other one is pushed once.
    publish(
        &mut admin,
        key,
        "{\"v\":2}",
        json!({"betaIps": "127.0.0.2"}),
    )
    .await?;
    pushed(&mut a, key).await?;
    let r = a.listen(&[(key, G, "", &md5("{\"v\":2}"))], true).await?;
    assert_eq!(r.body["changedConfigs"], json!([]));
    service
        .promote_gray(
            &Caller::internal(),
            &ConfigKey::from_trusted("", G, key),
            "beta",
            &nacelle_service::WriteNote::default(),
        )
        .await?;
    pushed(&mut b, key).await?;
    quiet(&s, &mut a, "the beta client after its beta was promoted").await?;
    quiet(&s, &mut b, "the other client after one push").await?;
    assert_eq!(query(&mut b, key).await?, ("{\"v\":2}".into(), false));
    assert_eq!(query(&mut a, key).await?, ("{\"v\":2}".into(), false));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beta_matches_the_reported_ip_and_the_socket_only_when_none_is_reported(
) -> anyhow::Result<()> {
    // As Nacos: the connection's `clientIp` from its setup request, believed from anyone
    // (no trusted proxy here), whatever the socket says; the socket address only for a
    // client that reports nothing (Nacelle's SDK) or no IP.
    let s = TestServer::start(GrpcOptions::default()).await?;
    let key = "reported.yaml";
    s.publish("", G, key, "r: formal").await?;
    let formal = md5("r: formal");
    async fn listening(mut c: RawClient, key: &str, held: &str) -> anyhow::Result<RawClient> {
        let r = c.listen(&[(key, G, "", held)], true).await?;
        assert_eq!(r.body["changedConfigs"], json!([]), "{r:?}");
        Ok(c)
    }
    // From 127.0.0.2, reporting 192.0.2.7 (a NATed or proxied host).
    let mut natted = RawClient::connect_from(s.port, "127.0.0.2".parse()?).await?;
    natted.setup("192.0.2.7").await?;
    let mut natted = listening(natted, key, &formal).await?;
    // From 127.0.0.3, reporting nothing; from 127.0.0.4, reporting a host name.
    let mut silent = RawClient::connect_from(s.port, "127.0.0.3".parse()?).await?;
    silent.setup("").await?;
    let mut silent = listening(silent, key, &formal).await?;
    let mut named = RawClient::connect_from(s.port, "127.0.0.4".parse()?).await?;
    named.setup("resolve_failed").await?;
    let mut named = listening(named, key, &formal).await?;
    let mut admin = RawClient::connect(s.port).await?;
    admin.setup("127.0.0.1").await?;

    // The socket address of the NATed client does not count.
    publish(
        &mut admin,
        key,
        "r: socket",
        json!({"betaIps": "127.0.0.2"}),
    )
    .await?;
    quiet(&s, &mut natted, "the client reporting 192.0.2.7").await?;
    assert_eq!(query(&mut natted, key).await?, ("r: formal".into(), false));

    // Its reported address does, and the one reporting nothing keeps the formal config.
    publish(
        &mut admin,
        key,
        "r: beta",
        json!({"betaIps": "192.0.2.7,10.9.9.9"}),
    )
    .await?;
    pushed(&mut natted, key).await?;
    quiet(&s, &mut silent, "the client reporting nothing").await?;
    assert_eq!(query(&mut natted, key).await?, ("r: beta".into(), true));
    assert_eq!(query(&mut silent, key).await?, ("r: formal".into(), false));

    // Reporting nothing, or no IP, is matched by the socket address.
    publish(
        &mut admin,
        key,
        "r: lo",
        json!({"betaIps": "127.0.0.3,127.0.0.4"}),
    )
    .await?;
    pushed(&mut natted, key).await?; // back to the formal config
    pushed(&mut silent, key).await?;
    pushed(&mut named, key).await?;
    assert_eq!(query(&mut silent, key).await?, ("r: lo".into(), true));
    assert_eq!(query(&mut named, key).await?, ("r: lo".into(), true));
    assert_eq!(query(&mut natted, key).await?, ("r: formal".into(), false));

    // The live view shows the reported address beside the trusted one.
    let view = s
        .service
        .listeners(&Caller::internal())?
        .clients_of_key(&ConfigKey::from_trusted("", G, key))?;
    let row = |ip: &str| {
        view.clients
            .iter()
            .find(|c| c.ip == ip)
            .map(|c| (c.reported_ip.clone(), c.served_gray.clone()))
    };
    assert_eq!(
        row("127.0.0.2"),
        Some(("192.0.2.7".into(), None)),
        "{view:?}"
    );
    assert_eq!(
        row("127.0.0.3"),
        Some((String::new(), Some("beta".into()))),
        "{view:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_app_rules_reach_the_sdk_and_app_prefixed_clients_by_priority(
) -> anyhow::Result<()> {
    let s = TestServer::start(GrpcOptions::default()).await?;
    let key = "labels.yaml";
    s.publish("", G, key, "l: formal").await?;
    let formal = md5("l: formal");
    // A Java-style client (`app_env=pre`), a Python-style dotted gray label, and a client
    // without labels.
    let mut java = listener(&s, "127.0.0.2", &[("app_env", "pre")], key, &formal).await?;
    let mut python = listener(
        &s,
        "127.0.0.3",
        &[("app_nacos_config_gray_label", "blue")],
        key,
        &formal,
    )
    .await?;
    let mut plain = listener(&s, "127.0.0.4", &[], key, &formal).await?;
    // The real Rust client: unprefixed labels, app name "shop".
    let cache = tempfile::tempdir()?;
    let props = nacos_sdk::api::props::ClientProps::new()
        .server_addr(format!("127.0.0.1:{}", s.port))
        .remote_grpc_port(s.port)
        .namespace("")
        .app_name("shop")
        .labels(HashMap::from([("env".to_string(), "pre".to_string())]))
        .cache_dir(cache.path())
        .env_first(false);
    let sdk = nacos_sdk::api::config::ConfigServiceBuilder::new(props)
        .build()
        .await
        .map_err(|e| anyhow::anyhow!("sdk build: {e}"))?;
    let (rec, mut notes) = recorder();
    sdk.add_listener(key.into(), G.into(), rec)
        .await
        .map_err(|e| anyhow::anyhow!("add_listener: {e}"))?;
    s.wait_listens(4).await?;

    let mut admin = RawClient::connect(s.port).await?;
    admin.setup("127.0.0.1").await?;
    // env=pre at priority 5, the app "shop" at priority 9: the SDK (both) gets the app's.
    publish(
        &mut admin,
        key,
        "l: pre",
        json!({"grayName": "pre", "grayRule": "env=pre", "grayPriority": "5"}),
    )
    .await?;
    pushed(&mut java, key).await?;
    quiet(&s, &mut plain, "the client without labels").await?;
    quiet(&s, &mut python, "the blue client").await?;
    assert_eq!(query(&mut java, key).await?.0, "l: pre");
    notes.wait_for("l: pre", SOON).await?;

    publish(
        &mut admin,
        key,
        "l: shop",
        json!({"grayName": "shop", "grayRule": "AppName=shop", "grayPriority": "9"}),
    )
    .await?;
    notes.wait_for("l: shop", SOON).await?;
    quiet(
        &s,
        &mut java,
        "the env=pre client (its variant did not change)",
    )
    .await?;
    let shop = sdk
        .get_config(key.into(), G.into())
        .await
        .map_err(|e| anyhow::anyhow!("get_config: {e}"))?;
    assert_eq!(shop.content(), "l: shop");

    publish(
        &mut admin,
        key,
        "l: blue",
        json!({"grayName": "blue", "grayRule": "nacos.config.gray.label=blue"}),
    )
    .await?;
    pushed(&mut python, key).await?;
    assert_eq!(query(&mut python, key).await?.0, "l: blue");
    quiet(&s, &mut plain, "the client without labels").await?;
    assert_eq!(query(&mut plain, key).await?.0, "l: formal");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_and_compare_and_set_over_grpc() -> anyhow::Result<()> {
    let s = TestServer::start(GrpcOptions::default()).await?;
    let key = "tagged.properties";
    s.publish("", G, key, "t=formal").await?;
    let mut c = RawClient::connect(s.port).await?;
    c.setup("127.0.0.1").await?;
    publish(&mut c, key, "t=blue", json!({"tag": "blue"})).await?;
    let q = |tag: &str| json!({"dataId": key, "group": G, "tenant": "", "tag": tag, "headers": {}});
    let r = c.call("ConfigQueryRequest", q("blue")).await?;
    assert_eq!(r.str("content"), Some("t=blue"), "{r:?}");
    assert_eq!(r.str("md5"), Some(md5("t=blue").as_str()));
    // A tag with no variant is not found, as over HTTP; no tag is the formal config.
    let r = c.call("ConfigQueryRequest", q("red")).await?;
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(300))
    );
    assert_eq!(query(&mut c, key).await?, ("t=formal".into(), false));

    // Compare-and-set on the tag variant: a stale md5 fails with Nacos's message, the
    // variant's own md5 succeeds.
    let cas = |content: &str, md5: &str| {
        json!({"dataId": key, "group": G, "tenant": "", "content": content, "casMd5": md5,
               "additionMap": {"tag": "blue"}, "headers": {}})
    };
    let r = c
        .call("ConfigPublishRequest", cas("t=blue2", &md5("t=formal")))
        .await?;
    assert_eq!(r.int("resultCode"), Some(500), "{r:?}");
    assert_eq!(
        r.str("message"),
        Some("Cas publish fail,server md5 may have changed.")
    );
    let r = c
        .call("ConfigPublishRequest", cas("t=blue2", &md5("t=blue")))
        .await?;
    assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
    let r = c.call("ConfigQueryRequest", q("blue")).await?;
    assert_eq!(r.str("content"), Some("t=blue2"));

    // Removing the tag over gRPC removes the variant only.
    let r = c
        .call(
            "ConfigRemoveRequest",
            json!({"dataId": key, "group": G, "tenant": "", "tag": "blue", "headers": {}}),
        )
        .await?;
    assert_eq!(r.int("resultCode"), Some(200));
    let r = c.call("ConfigQueryRequest", q("blue")).await?;
    assert_eq!(r.int("errorCode"), Some(300));
    assert_eq!(query(&mut c, key).await?.0, "t=formal");
    Ok(())
}
