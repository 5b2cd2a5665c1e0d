//! The Nacos 2.x gRPC protocol driven by hand with a test-only tonic client: handshake,
//! error codes, message shapes, limits, push acks/retries, idle probes and shutdown.

mod common;

use std::time::{Duration, Instant};

use common::{RawClient, RawExt, TestServer, SOON};
use nacelle_grpc::GrpcOptions;
use serde_json::json;

/// Short grace periods, and loopback — where the test clients connect from — as a trusted
/// proxy, so that the `clientIp` each client reports (10.x addresses standing for separate
/// hosts) is believed.
fn fast_opts() -> GrpcOptions {
    GrpcOptions {
        shutdown_grace: Duration::from_secs(2),
        trusted_proxies: nacelle_core::TrustedProxies::parse_list("127.0.0.1")
            .expect("a valid address"),
        ..GrpcOptions::default()
    }
}

#[tokio::test]
async fn handshake_and_protocol_errors() -> anyhow::Result<()> {
    let server = TestServer::start(fast_opts()).await?;
    let mut c = server.raw().await?;

    // ServerCheckRequest is answered before registration.
    let r = c
        .call(
            "ServerCheckRequest",
            json!({"requestId": "1", "headers": {}}),
        )
        .await?;
    assert_eq!(r.type_name, "ServerCheckResponse");
    assert_eq!(r.int("resultCode"), Some(200));
    assert_eq!(r.int("errorCode"), Some(0));
    assert_eq!(r.body["success"], json!(true));
    assert_eq!(r.body["supportAbilityNegotiation"], json!(true));
    assert_eq!(r.str("requestId"), Some("1"));
    let conn_id = r.str("connectionId").unwrap_or_default().to_string();
    assert!(conn_id.contains("_127.0.0.1_"), "connection id {conn_id}");

    // 301 before ConnectionSetupRequest.
    let r = c
        .call(
            "ConfigQueryRequest",
            json!({"dataId": "d", "group": "G", "tenant": ""}),
        )
        .await?;
    assert_eq!(r.type_name, "ErrorResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(301))
    );
    assert_eq!(r.str("message"), Some("Connection is unregistered."));

    c.setup("").await?;
    // The same TCP connection keeps its id.
    let r = c.call("ServerCheckRequest", json!({})).await?;
    assert_eq!(r.str("connectionId"), Some(conn_id.as_str()));

    // 302 for an unknown type.
    let r = c.call("NoSuchRequest", json!({})).await?;
    assert_eq!(r.type_name, "ErrorResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(302))
    );

    // 502 for a garbage body.
    let r = c
        .call_raw("ConfigQueryRequest", b"\x00not json{".to_vec())
        .await?;
    assert_eq!(r.type_name, "ErrorResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(502))
    );

    // Health check.
    let r = c
        .call("HealthCheckRequest", json!({"requestId": "h1"}))
        .await?;
    assert_eq!(r.type_name, "HealthCheckResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(200), Some(0))
    );
    assert_eq!(r.str("requestId"), Some("h1"));
    assert_eq!(server.stats.snapshot().connections, 1);
    Ok(())
}

/// Nacos 2.3+ answers `supportAbilityNegotiation: true`; a client whose
/// `ConnectionSetupRequest` carries an `abilityTable` (Java 2.3+, Python) then waits for a
/// `SetupAckRequest` on the stream, and the Java 3.x client calls `fuzzyWatch` only when that
/// ack lists `fuzzyWatch: true` ("Request Nacos server version is too low, not support fuzzy
/// watch feature" otherwise). A client without an ability table gets no ack.
#[tokio::test]
async fn ability_negotiation_as_the_java_client_expects() -> anyhow::Result<()> {
    use nacelle_proto::connection::ConnectionSetupRequest;
    let server = TestServer::start(fast_opts()).await?;

    let mut java = server.raw().await?;
    let check = java.call("ServerCheckRequest", json!({})).await?;
    assert_eq!(check.body["supportAbilityNegotiation"], json!(true));
    let setup = ConnectionSetupRequest {
        ability_table: Some(json!({"fuzzyWatch": true, "lock": true})),
        ..ConnectionSetupRequest::new("Nacos-Java-Client:v3.2.1", "", Some("app"))
    };
    java.open_stream_with("127.0.0.1", &setup).await?;
    let ack = java.next(SOON).await?.expect("the stream stays open");
    assert_eq!(ack.type_name, "SetupAckRequest");
    assert_eq!(ack.body["abilityTable"], json!({"fuzzyWatch": true}));
    assert_eq!(ack.str("module"), Some("internal"));
    assert!(ack.str("requestId").is_some());
    // Registered: requests are served.
    let r = java.call("HealthCheckRequest", json!({})).await?;
    assert_eq!(r.int("resultCode"), Some(200));

    // Without an ability table (older clients, the Rust SDK): registered, no ack. An ack
    // would be on the stream before anything sent later: the first message is the push of
    // a change made after the setup.
    let mut old = server.raw().await?;
    old.setup("127.0.0.1").await?;
    let r = old.listen(&[("after-setup", "G", "", "")], true).await?;
    assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
    server.publish("", "G", "after-setup", "v").await?;
    let first = old.next(SOON).await?.expect("the stream stays open");
    assert_eq!(
        (first.type_name.as_str(), first.str("dataId")),
        ("ConfigChangeNotifyRequest", Some("after-setup")),
        "nothing is sent to a client that does not negotiate: {first:?}"
    );
    Ok(())
}

#[tokio::test]
async fn server_not_ready_answers_300() -> anyhow::Result<()> {
    let server = TestServer::start_unloaded(fast_opts()).await?;
    let mut c = server.raw().await?;
    for t in ["ServerCheckRequest", "ConfigQueryRequest"] {
        let r = c.call(t, json!({})).await?;
        assert_eq!(r.type_name, "ErrorResponse");
        assert_eq!(
            (r.int("resultCode"), r.int("errorCode")),
            (Some(500), Some(300))
        );
    }
    Ok(())
}

#[tokio::test]
async fn config_messages_have_the_nacos_shape() -> anyhow::Result<()> {
    let server = TestServer::start(fast_opts()).await?;
    let mut c = server.raw().await?;
    c.setup("10.9.8.7").await?;

    // Not found.
    let r = c
        .call(
            "ConfigQueryRequest",
            json!({"dataId": "shape", "group": "G", "tenant": "", "requestId": "q1"}),
        )
        .await?;
    assert_eq!(r.type_name, "ConfigQueryResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(300))
    );
    assert_eq!(r.str("message"), Some("config data not exist"));
    assert_eq!(r.body["lastModified"], json!(0));
    assert_eq!(r.body["beta"], json!(false));

    // Publish with every additionMap field.
    let r = c
        .call(
            "ConfigPublishRequest",
            json!({
                "dataId": "shape", "group": "G", "tenant": "", "content": "a: 1", "casMd5": null,
                "additionMap": {"type": "yaml", "appName": "app", "desc": "d", "use": "u",
                    "effect": "e", "schema": "s", "config_tags": "t1,t2", "src_user": "alice",
                    "encryptedDataKey": "", "betaIps": "", "tag": ""},
                "requestId": "p1"
            }),
        )
        .await?;
    assert_eq!(r.type_name, "ConfigPublishResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(200), Some(0))
    );
    assert_eq!(r.str("requestId"), Some("p1"));
    let key = nacelle_core::ConfigKey::parse(None, "G", "shape")?;
    let stored = server
        .service
        .get(&nacelle_core::Caller::internal(), &key, None)?
        .ok_or_else(|| anyhow::anyhow!("not stored"))?
        .config;
    assert_eq!(stored.app_name(), "app");
    assert_eq!(stored.config_tags(), "t1,t2");
    assert_eq!(stored.r#use(), "u");
    assert_eq!(stored.source().src_user, "alice");
    assert_eq!(
        stored.source().src_ip,
        "10.9.8.7",
        "src_ip is the connection's client IP"
    );
    assert_eq!(stored.config_type().as_str(), "yaml");

    // Query: exactly the fields clients need, no `tag`.
    let r = c
        .call(
            "ConfigQueryRequest",
            json!({"dataId": "shape", "group": "G", "tenant": "public"}),
        )
        .await?;
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(200), Some(0))
    );
    assert_eq!(r.str("content"), Some("a: 1"));
    assert_eq!(r.str("contentType"), Some("yaml"));
    assert_eq!(r.str("md5"), Some(nacelle_core::md5_hex(b"a: 1").as_str()));
    assert_eq!(r.str("encryptedDataKey"), Some(""));
    assert!(r.int("lastModified").unwrap_or(0) > 0);
    assert_eq!(r.body["beta"], json!(false));
    assert!(
        r.body.get("tag").is_none(),
        "tag must be left out: {}",
        r.body
    );

    // CAS failure.
    let r = c
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "shape", "group": "G", "tenant": "", "content": "a: 2", "casMd5": "0000"}),
        )
        .await?;
    assert_eq!(r.int("resultCode"), Some(500));
    assert_eq!(
        r.str("message"),
        Some("Cas publish fail,server md5 may have changed.")
    );
    // CAS success.
    let r = c
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "shape", "group": "G", "tenant": "", "content": "a: 2",
                   "casMd5": nacelle_core::md5_hex(b"a: 1")}),
        )
        .await?;
    assert_eq!(r.int("resultCode"), Some(200));

    // Invalid input → 400; beta publish → 501 (not supported yet).
    let r = c
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "bad/id", "group": "G", "content": "x"}),
        )
        .await?;
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(400))
    );
    let r = c
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "b", "group": "G", "content": "x", "additionMap": {"betaIps": "1.1.1.1"}}),
        )
        .await?;
    // A beta of a key without a formal config: not found (publish the formal one first).
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(300))
    );

    // Remove, also when absent.
    for _ in 0..2 {
        let r = c
            .call(
                "ConfigRemoveRequest",
                json!({"dataId": "shape", "group": "G", "tenant": ""}),
            )
            .await?;
        assert_eq!(r.type_name, "ConfigRemoveResponse");
        assert_eq!(r.int("resultCode"), Some(200));
    }
    assert!(server
        .service
        .get(&nacelle_core::Caller::internal(), &key, None)?
        .is_none());
    Ok(())
}

#[tokio::test]
async fn batch_listen_and_push_echo_the_tenant_as_sent() -> anyhow::Result<()> {
    let server = TestServer::start(fast_opts()).await?;
    server.publish("", "G", "echo", "v1").await?;
    let mut c = server.raw().await?;
    c.setup("").await?;

    let md5 = nacelle_core::md5_hex(b"v1");
    let r = c
        .listen(
            &[
                ("echo", "G", "public", "stale"),
                ("missing", "G", "", ""),
                ("same", "G", "", ""),
            ],
            true,
        )
        .await?;
    assert_eq!(r.type_name, "ConfigChangeBatchListenResponse");
    assert_eq!(r.int("resultCode"), Some(200));
    assert_eq!(
        r.body["changedConfigs"],
        json!([{"dataId": "echo", "group": "G", "tenant": "public"}]),
        "only the stale key; tenant echoed as sent"
    );
    // Up to date now.
    let r = c
        .listen(&[("echo", "G", "public", md5.as_str())], true)
        .await?;
    assert_eq!(r.body["changedConfigs"], json!([]));
    assert_eq!(server.stats.snapshot().listened_keys, 3);

    server.publish("", "G", "echo", "v2").await?;
    let push = c
        .next(SOON)
        .await?
        .ok_or_else(|| anyhow::anyhow!("stream ended"))?;
    assert_eq!(push.type_name, "ConfigChangeNotifyRequest");
    assert_eq!(push.str("dataId"), Some("echo"));
    assert_eq!(push.str("group"), Some("G"));
    assert_eq!(push.str("tenant"), Some("public"));
    assert_eq!(push.body["headers"], json!({}));
    let rid = push.str("requestId").unwrap_or_default().to_string();
    assert!(!rid.is_empty());
    c.respond("NotifySubscriberResponse", &rid).await?;
    let deadline = Instant::now() + SOON;
    while server.stats.snapshot().push_acks < 1 {
        assert!(Instant::now() < deadline, "ack not counted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A key that does not exist yet is pushed when created.
    server.publish("", "G", "missing", "now here").await?;
    let push = c
        .next(SOON)
        .await?
        .ok_or_else(|| anyhow::anyhow!("stream ended"))?;
    assert_eq!(push.str("dataId"), Some("missing"));
    assert_eq!(push.str("tenant"), Some(""));

    // listen:false stops pushes (a publish notifies synchronously, so the counter is exact).
    let r = c.listen(&[("echo", "G", "public", "")], false).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    let before = server.stats.snapshot().pushes_sent;
    server.publish("", "G", "echo", "v3").await?;
    assert_eq!(server.stats.snapshot().pushes_sent, before);
    assert_eq!(server.stats.snapshot().listened_keys, 2);

    // An invalid key fails the whole request with 400.
    let r = c
        .listen(&[("ok", "G", "", ""), ("bad key", "G", "", "")], true)
        .await?;
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(400))
    );
    Ok(())
}

#[tokio::test]
async fn oversized_message_is_rejected_and_ten_megabytes_pass() -> anyhow::Result<()> {
    let server = TestServer::start(fast_opts()).await?;
    let mut c = server.raw().await?;
    c.setup("").await?;

    // 9 MiB of content: over tonic's 4 MiB default, under our 10 MiB limit.
    let content = "x".repeat(9 * 1024 * 1024);
    let body = serde_json::to_vec(&json!({"dataId": "big", "group": "G", "content": content}))?;
    let r = c.call_raw("ConfigPublishRequest", body).await?;
    assert_eq!(r.int("resultCode"), Some(200), "{:?}", r.str("message"));

    let content = "x".repeat(11 * 1024 * 1024);
    let body = serde_json::to_vec(&json!({"dataId": "huge", "group": "G", "content": content}))?;
    match c.call_status("ConfigPublishRequest", body).await {
        Ok(p) => anyhow::bail!("an 11 MiB message was accepted: {:?}", common::decode(&p)?),
        Err(status) => {
            println!(
                "11 MiB message rejected: {:?} {}",
                status.code(),
                status.message()
            );
            assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        }
    }
    // The connection is still usable.
    let r = c.call("HealthCheckRequest", json!({})).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    Ok(())
}

#[tokio::test]
async fn connection_limits_are_answered_with_connect_reset() -> anyhow::Result<()> {
    // Total limit.
    let server = TestServer::start(GrpcOptions {
        max_connections: 1,
        ..fast_opts()
    })
    .await?;
    let mut a = server.raw().await?;
    a.setup("").await?;
    let mut b = server.raw().await?;
    b.open_stream("").await?;
    let reset = b
        .next(SOON)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no reset"))?;
    assert_eq!(reset.type_name, "ConnectResetRequest");
    assert!(b.next(SOON).await?.is_none(), "stream ends after the reset");
    let r = b.call("HealthCheckRequest", json!({})).await?;
    assert_eq!(r.int("errorCode"), Some(301));
    assert_eq!(server.stats.snapshot().rejected_connections, 1);
    assert_eq!(server.stats.snapshot().connections, 1);

    // Per client IP limit.
    let server = TestServer::start(GrpcOptions {
        max_connections_per_ip: 1,
        ..fast_opts()
    })
    .await?;
    let mut a = server.raw().await?;
    a.setup("10.0.0.1").await?;
    let mut b = server.raw().await?;
    b.open_stream("10.0.0.1").await?;
    let reset = b
        .next(SOON)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no reset"))?;
    assert_eq!(reset.type_name, "ConnectResetRequest");
    let mut c = server.raw().await?;
    c.setup("10.0.0.2").await?;
    assert_eq!(server.stats.snapshot().connections, 2);

    // A freed slot can be taken again.
    a.close_stream();
    let deadline = Instant::now() + SOON;
    while server.stats.snapshot().connections != 1 {
        assert!(Instant::now() < deadline, "closed stream not unregistered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut d = server.raw().await?;
    d.setup("10.0.0.1").await?;
    Ok(())
}

/// Waits until `check` holds for the server's stats (or `SOON` passes); returns the last.
async fn stats_until(
    server: &TestServer,
    check: impl Fn(&nacelle_grpc::GrpcStatsSnapshot) -> bool,
) -> nacelle_grpc::GrpcStatsSnapshot {
    let deadline = Instant::now() + SOON;
    let mut s = server.stats.snapshot();
    while !check(&s) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
        s = server.stats.snapshot();
    }
    s
}

/// A raw client set up from `ip` and listening to key `k` of group `G` (holding nothing).
async fn listener_of_k(server: &TestServer, ip: &str) -> anyhow::Result<RawClient> {
    let mut c = server.raw().await?;
    c.setup(ip).await?;
    c.listen(&[("k", "G", "", "")], true).await?;
    Ok(c)
}

/// A server whose pushes time out after 300 ms and are retried after 100 ms × tries, 3
/// tries at most, with key `k` of group `G` published.
async fn start_with_quick_retries() -> anyhow::Result<TestServer> {
    let opts = GrpcOptions {
        push_ack_timeout: Duration::from_millis(300),
        push_retry_base: Duration::from_millis(100),
        push_max_tries: 3,
        ..fast_opts()
    };
    let server = TestServer::start(opts).await?;
    server.publish("", "G", "k", "v0").await?;
    Ok(server)
}

#[tokio::test]
async fn the_push_sweeper_visits_only_connections_with_pushes_pending() -> anyhow::Result<()> {
    let server = start_with_quick_retries().await?;
    let mute = listener_of_k(&server, "10.0.0.11").await?;
    let mut good = Vec::new();
    for ip in ["10.0.0.12", "10.0.0.13"] {
        good.push(listener_of_k(&server, ip).await?);
    }
    // Registered and listening, nothing pushed: nothing for the sweeper. A witness
    // connection listening to another key is pushed a change it does not ack at once: the
    // sweeper's next pass lists it, and it alone.
    let mut witness = server.raw().await?;
    witness.setup("10.0.0.14").await?;
    let r = witness.listen(&[("w", "G", "", "")], true).await?;
    assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
    server.publish("", "G", "w", "w1").await?;
    let push = witness
        .next(SOON)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no push"))?;
    let s = stats_until(&server, |s| s.unacked_connections > 0).await;
    assert_eq!(s.unacked_connections, 1, "the witness only: {s:?}");
    witness
        .respond(
            "ConfigChangeNotifyResponse",
            push.str("requestId").unwrap_or_default(),
        )
        .await?;
    let s = stats_until(&server, |s| s.push_acks == 1 && s.unacked_connections == 0).await;
    assert_eq!((s.push_acks, s.unacked_connections), (1, 0), "{s:?}");

    server.publish("", "G", "k", "v1").await?;
    for c in &mut good {
        let push = c
            .next(SOON)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no push"))?;
        c.respond(
            "ConfigChangeNotifyResponse",
            push.str("requestId").unwrap_or_default(),
        )
        .await?;
    }
    // The acked connections leave the sweeper's list; the mute one stays while it is
    // retried. (Acks: the witness's and these two.)
    let s = stats_until(&server, |s| s.push_acks == 3 && s.unacked_connections == 1).await;
    assert_eq!((s.push_acks, s.unacked_connections), (3, 1), "{s:?}");
    // Given up on and unregistered, it leaves too.
    let s = stats_until(&server, |s| {
        s.dropped_unacked == 1 && s.unacked_connections == 0
    })
    .await;
    assert_eq!((s.dropped_unacked, s.unacked_connections), (1, 0), "{s:?}");
    assert!(s.push_retries >= 2, "{s:?}");
    // A later push lists a connection again.
    server.publish("", "G", "k", "v2").await?;
    let s = stats_until(&server, |s| s.unacked_connections == 2).await;
    assert_eq!(s.unacked_connections, 2, "{s:?}");
    drop(mute);
    Ok(())
}

#[tokio::test]
async fn unacked_pushes_are_retried_then_the_client_is_unregistered() -> anyhow::Result<()> {
    let server = start_with_quick_retries().await?;
    let mut mute = listener_of_k(&server, "10.0.0.1").await?;
    let mut good = listener_of_k(&server, "10.0.0.2").await?;

    let mut latencies = Vec::new();
    let t0 = Instant::now();
    server.publish("", "G", "k", "v1").await?;
    let push = good
        .next(SOON)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no push"))?;
    latencies.push(t0.elapsed());
    good.respond(
        "ConfigChangeNotifyResponse",
        push.str("requestId").unwrap_or_default(),
    )
    .await?;

    // The mute client gets the same push again and again, then is dropped. Meanwhile the
    // good client keeps getting its pushes at once.
    let mut seen = Vec::new();
    loop {
        match mute.next(SOON).await? {
            Some(m) if m.type_name == "ConfigChangeNotifyRequest" => {
                seen.push(m.str("requestId").unwrap_or_default().to_string());
                if seen.len() == 2 {
                    let t = Instant::now();
                    server.publish("", "G", "other", "x").await?; // nobody listens
                    server.publish("", "G", "k", "v2").await?;
                    let p = good
                        .next(SOON)
                        .await?
                        .ok_or_else(|| anyhow::anyhow!("no push"))?;
                    latencies.push(t.elapsed());
                    good.respond(
                        "ConfigChangeNotifyResponse",
                        p.str("requestId").unwrap_or_default(),
                    )
                    .await?;
                }
            }
            Some(other) => println!("mute client also got {}", other.type_name),
            None => break,
        }
    }
    println!("mute client got {} tries: {seen:?}", seen.len());
    assert!(seen.len() >= 3, "initial try plus retries: {seen:?}");
    let s = server.stats.snapshot();
    println!("stats: {s:?}");
    assert!(s.push_retries >= 2);
    assert_eq!(s.dropped_unacked, 1);
    let r = mute.call("HealthCheckRequest", json!({})).await?;
    assert_eq!(
        r.int("errorCode"),
        Some(301),
        "the mute client is unregistered"
    );
    let r = good.call("HealthCheckRequest", json!({})).await?;
    assert_eq!(
        r.int("resultCode"),
        Some(200),
        "the good client is still registered"
    );
    common::print_latencies(
        "push latency to the acking client while another never acks",
        latencies,
    );
    Ok(())
}

#[tokio::test]
async fn idle_connections_are_probed_and_dead_ones_dropped() -> anyhow::Result<()> {
    let opts = GrpcOptions {
        idle_probe_after: Duration::from_millis(300),
        probe_timeout: Duration::from_millis(300),
        probe_interval: Duration::from_millis(50),
        ..fast_opts()
    };
    let server = TestServer::start(opts).await?;
    let mut alive = server.raw().await?;
    alive.setup("10.0.0.1").await?;
    let mut dead = server.raw().await?;
    dead.setup("10.0.0.2").await?;

    // The live client answers two probes in a row.
    for _ in 0..2 {
        let probe = alive
            .next(SOON)
            .await?
            .ok_or_else(|| anyhow::anyhow!("stream ended"))?;
        assert_eq!(probe.type_name, "ClientDetectionRequest");
        alive
            .respond(
                "ClientDetectionResponse",
                probe.str("requestId").unwrap_or_default(),
            )
            .await?;
    }
    // The dead one is probed, stays silent and is dropped.
    let probe = dead
        .next(SOON)
        .await?
        .ok_or_else(|| anyhow::anyhow!("stream ended"))?;
    assert_eq!(probe.type_name, "ClientDetectionRequest");
    assert!(
        dead.next(SOON).await?.is_none(),
        "dead connection's stream ends"
    );
    assert_eq!(server.stats.snapshot().dropped_idle, 1);
    let r = dead.call("HealthCheckRequest", json!({})).await?;
    assert_eq!(r.int("errorCode"), Some(301));
    let r = alive.call("HealthCheckRequest", json!({})).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    Ok(())
}

#[tokio::test]
async fn a_stream_without_setup_is_ended() -> anyhow::Result<()> {
    let server = TestServer::start(GrpcOptions {
        idle_probe_after: Duration::from_millis(300),
        ..fast_opts()
    })
    .await?;
    let mut c = server.raw().await?;
    c.open_silent_stream().await?;
    assert!(c.next(SOON).await?.is_none(), "the silent stream is ended");
    assert_eq!(server.stats.snapshot().connections, 0);
    Ok(())
}

#[tokio::test]
async fn a_client_that_stops_reading_is_disconnected_without_blocking_publishes(
) -> anyhow::Result<()> {
    let opts = GrpcOptions {
        outbound_queue: 4,
        ..fast_opts()
    };
    let server = TestServer::start(opts).await?;
    // The smallest HTTP/2 windows, so that unread pushes back up quickly.
    let mut stuck = RawClient::connect_with(server.port, Some(65_535)).await?;
    stuck.setup("10.0.0.1").await?;
    // Each push carries a long dataId so that HTTP/2 flow control fills quickly.
    let data_id = format!("k{}", "x".repeat(250));
    stuck
        .listen(&[(data_id.as_str(), "G", "", "")], true)
        .await?;
    // The stuck client never reads its stream; publishes must all complete regardless.
    let t0 = Instant::now();
    let mut n = 0;
    while server.stats.snapshot().dropped_slow == 0 {
        anyhow::ensure!(
            n < 5_000,
            "never disconnected: {:?}",
            server.stats.snapshot()
        );
        server.publish("", "G", &data_id, &format!("v{n}")).await?;
        n += 1;
    }
    println!(
        "slow client disconnected after {n} publishes in {:?}",
        t0.elapsed()
    );
    let deadline = Instant::now() + SOON;
    while server.stats.snapshot().connections != 0 {
        assert!(Instant::now() < deadline, "slow client not unregistered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

#[tokio::test]
async fn graceful_shutdown_ends_every_stream_once_without_a_reset() -> anyhow::Result<()> {
    // As a Java Nacos server's shutdownNow(): the stream ends (UNAVAILABLE), and nothing
    // comes before its end — a ConnectResetRequest too would be a second reconnect signal
    // to the Java client (see the gRPC server's module docs).
    let mut server = TestServer::start(fast_opts()).await?;
    let mut clients = Vec::new();
    for i in 0..3 {
        let mut c: RawClient = server.raw().await?;
        c.setup(&format!("10.0.0.{i}")).await?;
        clients.push(c);
    }
    let port = server.port;
    let stopping = tokio::spawn(async move {
        let r = server.stop().await;
        (server, r)
    });
    for c in &mut clients {
        let status = c.ended(SOON).await?;
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        // The client keeps its TCP connection open, as the Java client does until it has
        // connected elsewhere: the GOAWAY closes it.
    }
    // The listener closed before the streams ended: a client reconnecting at once is
    // refused (and tries another server) instead of registering with a stopping one.
    let again = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
    assert!(again.is_err(), "a stopping server accepted a connection");
    let (server, r) = stopping.await?;
    r?;
    let s = server.stats.snapshot();
    assert_eq!((s.connections, s.tcp_connections), (0, 0), "{s:?}");
    Ok(())
}

#[tokio::test]
async fn acks_are_matched_however_their_json_is_written() -> anyhow::Result<()> {
    // The server reads an ack's requestId quickly when the JSON is compact and parses it
    // otherwise: spaced JSON (Python's json.dumps), an id after a nested object that
    // carries another id, and an escaped id must each ack exactly their own push.
    // The ack timeout is far longer than the test, so the count of acks alone says whether
    // each ack found its push: a misread id matches nothing and the count stays short
    // (no timing: the test waits for each count, however loaded the machine).
    let opts = GrpcOptions {
        push_ack_timeout: Duration::from_secs(60),
        ..fast_opts()
    };
    let server = TestServer::start(opts).await?;
    server.publish("", "G", "k", "v0").await?;
    let mut c = listener_of_k(&server, "10.0.0.7").await?;
    let bodies: [&dyn Fn(&str) -> String; 4] = [
        &|id| {
            format!(
                r#"{{"resultCode": 200, "errorCode": 0, "requestId": "{id}", "success": true}}"#
            )
        },
        &|id| {
            format!(r#"{{"extra":{{"requestId":"999999"}},"resultCode":200,"requestId":"{id}"}}"#)
        },
        &|id| {
            format!(
                r#"{{"resultCode":200,"requestId":"\u00{:02x}{}"}}"#,
                id.as_bytes()[0],
                &id[1..]
            )
        },
        &|id| format!(r#"{{"resultCode":200,"errorCode":0,"success":true,"requestId":"{id}"}}"#),
    ];
    for (i, body) in bodies.iter().enumerate() {
        server.publish("", "G", "k", &format!("v{}", i + 1)).await?;
        let push = c
            .next(SOON)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no push"))?;
        assert_eq!(push.type_name, "ConfigChangeNotifyRequest");
        let id = push.str("requestId").unwrap_or_default().to_string();
        c.respond_raw("ConfigChangeNotifyResponse", body(&id).into_bytes())
            .await?;
        // Wait for this ack before the next change: a newer push of the key supersedes an
        // unacked one, and the old one's ack would then rightly match nothing.
        let want = i as u64 + 1;
        let deadline = Instant::now() + SOON;
        let mut s = server.stats.snapshot();
        while s.push_acks < want && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            s = server.stats.snapshot();
        }
        assert_eq!(s.push_acks, want, "ack {want} matched its own push: {s:?}");
    }
    let s = server.stats.snapshot();
    assert_eq!(s.push_retries, 0, "{s:?}");
    Ok(())
}

#[tokio::test]
async fn a_change_of_every_listened_key_at_once_does_not_drop_a_healthy_client(
) -> anyhow::Result<()> {
    // Every listened key changes while the client is not reading (a pause, a GC): it then
    // reads and acks them all. The unanswered-request bound must allow at least as many
    // pushes as a connection may listen to keys.
    const KEYS: usize = 3000;
    let server = TestServer::start(GrpcOptions::default()).await?;
    let mut c = server.raw().await?;
    c.setup("10.0.0.9").await?;
    let names: Vec<String> = (0..KEYS).map(|i| format!("burst-{i}")).collect();
    let keys: Vec<(&str, &str, &str, &str)> =
        names.iter().map(|n| (n.as_str(), "G", "", "")).collect();
    let r = c.listen(&keys, true).await?;
    assert_eq!(r.int("resultCode"), Some(200));

    let publishes = names
        .iter()
        .map(|n| server.publish("", "G", n, "changed"))
        .collect::<Vec<_>>();
    futures::future::try_join_all(publishes).await?;
    let reading = async {
        let mut seen = std::collections::HashSet::new();
        while seen.len() < KEYS {
            let push = c
                .next(Duration::from_secs(20))
                .await?
                .ok_or_else(|| anyhow::anyhow!("stream ended after {} pushes", seen.len()))?;
            let rid = push.str("requestId").unwrap_or_default().to_string();
            c.respond("ConfigChangeNotifyResponse", &rid).await?;
            if let Some(d) = push.str("dataId") {
                seen.insert(d.to_string());
            }
        }
        anyhow::Ok(())
    };
    reading.await?;
    let s = server.stats.snapshot();
    assert_eq!(s.dropped_slow, 0, "{s:?}");
    assert_eq!(s.connections, 1, "{s:?}");
    Ok(())
}
