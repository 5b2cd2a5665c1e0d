//! Metrics and request tracing over real sockets: a server scraped at `/metrics` and
//! `/nacos/actuator/prometheus`, the text parsed with a Prometheus text-format parser
//! (`prometheus-parse`); counters move by the requests made over HTTP v1, v2 and gRPC (the
//! real Rust client), a fan-out to gRPC listeners fills the push-latency histogram, a long
//! poll released by a publish records its release, many keys add no series, and with a
//! slow-request threshold of 0 every request is logged with its route and cause — never
//! with its content.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

mod common;

use common::metrics::{scrape, Scraped};
use nacelle_testkit::grpc::{recorder, Sdk};
use nacelle_testkit::server::TestServer;
use nacelle_testkit::{listening_configs, md5, Api, TestResult};

const CONFIGS: &str = "/nacos/v1/cs/configs";
const LONG_POLL: &str = "/nacos/v1/cs/configs/listener";

async fn sdk_of(ts: &TestServer, app: &str) -> TestResult<Sdk> {
    let grpc = ts.server.as_ref().ok_or("stopped")?.grpc_addr;
    Ok(Sdk::connect(ts.addr.port(), grpc.port(), "", app).await?)
}

/// Scrapes `path` until `done` holds (the push acks arrive after the client was told).
async fn scrape_until(
    api: &Api,
    path: &str,
    done: impl Fn(&Scraped) -> bool,
) -> TestResult<Scraped> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = scrape(api, path).await?;
        if done(&s) {
            return Ok(s);
        }
        if Instant::now() > deadline {
            return Err("the metrics never showed what was awaited".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn counters_move_by_the_requests_made() -> TestResult {
    let ts = TestServer::start().await?;
    ts.publish("", "G", "seed", "seed-v1").await?;
    let sdk = sdk_of(&ts, "metrics-counters").await?;
    let before = scrape(&ts, "/metrics").await?;
    let before_nacos = scrape(&ts, "/nacos/actuator/prometheus").await?;

    // HTTP v1: one publish, three reads, one read of a missing key, one unknown path.
    ts.publish("", "G", "app", "v1").await?;
    for _ in 0..3 {
        assert_eq!(ts.get("", "G", "app").await?.as_deref(), Some("v1"));
    }
    assert_eq!(ts.get("", "G", "missing").await?, None);
    let unknown = ts.http.get(ts.url("/nacos/v9/nothing")).send().await?;
    assert_eq!(unknown.status(), 404);
    // HTTP v2: one read.
    let v2 = ts
        .http
        .get(ts.url("/nacos/v2/cs/config"))
        .query(&[("dataId", "app"), ("group", "G")])
        .send()
        .await?;
    assert_eq!(v2.status(), 200);
    // HTTP v1 long polls (the connection answers them past the router): one answered at
    // once (no hold asked), one refused (no `Listening-Configs`).
    let poll = |form: &'static [(&'static str, &'static str)]| {
        ts.http.post(ts.url(LONG_POLL)).form(form).send()
    };
    let answered = poll(&[("Listening-Configs", "app\u{2}G\u{2}\u{1}")]).await?;
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.text().await?, "app%02G%01\n");
    assert_eq!(poll(&[("tenant", "")]).await?.status(), 400);
    // gRPC: two queries and one publish through the real Rust client.
    for _ in 0..2 {
        let got = sdk.client.get_config("app".into(), "G".into()).await?;
        assert_eq!(got.content(), "v1");
    }
    assert!(
        sdk.client
            .publish_config("by-grpc".into(), "G".into(), "g1".into(), None)
            .await?
    );

    let after = scrape(&ts, "/metrics").await?;
    let after_nacos = scrape(&ts, "/nacos/actuator/prometheus").await?;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    let http = "nacelle_http_requests_total";
    let get = [("route", CONFIGS), ("method", "GET")];
    assert_eq!(delta(http, &[get[0], get[1], ("status", "200")]), 3.0);
    assert_eq!(delta(http, &[get[0], get[1], ("status", "404")]), 1.0);
    assert_eq!(
        delta(
            http,
            &[("route", CONFIGS), ("method", "POST"), ("status", "200")]
        ),
        1.0
    );
    assert_eq!(
        delta(http, &[("route", "/nacos/v2/cs/config"), ("method", "GET")]),
        1.0
    );
    assert_eq!(
        delta(http, &[("route", "unmatched"), ("status", "404")]),
        1.0
    );
    for status in ["200", "400"] {
        let labels = [("route", LONG_POLL), ("method", "POST"), ("status", status)];
        assert_eq!(delta(http, &labels), 1.0, "long polls answered {status}");
    }
    // Each scrape counts itself on its own route (seen by the next one).
    assert_eq!(delta(http, &[("route", "/metrics")]), 1.0);
    let hist = "nacelle_http_request_duration_seconds";
    assert_eq!(
        after.observations(hist, &get) - before.observations(hist, &get),
        4.0
    );

    let grpc = "nacelle_grpc_requests_total";
    assert_eq!(
        delta(grpc, &[("request", "ConfigQueryRequest"), ("result", "ok")]),
        2.0
    );
    assert_eq!(
        delta(grpc, &[("request", "ConfigPublishRequest"), ("code", "0")]),
        1.0
    );
    let grpc_hist = "nacelle_grpc_request_duration_seconds";
    let query = [("request", "ConfigQueryRequest")];
    assert_eq!(
        after.observations(grpc_hist, &query) - before.observations(grpc_hist, &query),
        2.0
    );

    // Two publishes committed (HTTP and gRPC), each one store call.
    let writes = [("op", "publish"), ("result", "ok")];
    assert_eq!(delta("nacelle_config_writes_total", &writes), 2.0);
    let publish = [("op", "publish")];
    for name in [
        "nacelle_store_operation_duration_seconds",
        "nacelle_config_commit_duration_seconds",
    ] {
        assert_eq!(
            after.observations(name, &publish) - before.observations(name, &publish),
            2.0,
            "{name}"
        );
    }
    assert_eq!(after.value("nacelle_store_errors_total", &[]), 0.0);

    // Gauges: three configs, one registered gRPC connection, ready, the build.
    assert_eq!(after.value("nacelle_configs", &[]), 3.0);
    assert_eq!(after.value("nacelle_grpc_connections", &[]), 1.0);
    assert_eq!(after.value("nacelle_ready", &[]), 1.0);
    assert_eq!(
        after.value(
            "nacelle_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    // The same registry behind Nacos's path.
    assert_eq!(
        after_nacos.value("nacelle_config_writes_total", &writes)
            - before_nacos.value("nacelle_config_writes_total", &writes),
        2.0
    );
    assert_eq!(after_nacos.value("nacelle_configs", &[]), 3.0);
    // Read-only: the scrape paths answer GET only.
    for path in ["/metrics", "/nacos/actuator/prometheus"] {
        let post = ts.http.post(ts.url(path)).send().await?;
        assert_eq!(post.status(), 405, "{path}");
    }
    Ok(())
}

/// The `nacelle_*` names in `text`, histogram suffixes removed.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("nacelle_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        names.insert(base.to_string());
        rest = &tail[end..];
    }
    names
}

#[tokio::test]
async fn every_metric_is_documented_and_the_dashboard_uses_real_names() -> TestResult {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/");
    let operations = std::fs::read_to_string(format!("{root}operations.md"))?;
    let monitoring = operations
        .split("## Monitoring")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .ok_or("docs/operations.md has no Monitoring section")?;
    let documented = metric_names(monitoring);
    let ts = TestServer::start().await?;
    let served = ts.http.get(ts.url("/metrics")).send().await?.text().await?;
    let undocumented: Vec<_> = metric_names(&served)
        .difference(&documented)
        .cloned()
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/operations.md: {undocumented:?}"
    );
    let dashboard = std::fs::read_to_string(format!("{root}grafana-dashboard.json"))?;
    serde_json::from_str::<serde_json::Value>(&dashboard)?;
    let unknown: Vec<_> = metric_names(&dashboard)
        .difference(&documented)
        .cloned()
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard uses unknown metrics: {unknown:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_fan_out_and_a_released_long_poll_record_their_latencies() -> TestResult {
    let ts = TestServer::start().await?;
    ts.publish("", "G", "shared", "v1").await?;
    // Three real Rust clients listening over gRPC.
    let mut clients = Vec::new();
    for i in 0..3 {
        let sdk = sdk_of(&ts, &format!("metrics-fanout-{i}")).await?;
        let (rec, notes) = recorder();
        sdk.client
            .add_listener("shared".into(), "G".into(), rec)
            .await?;
        clients.push((sdk, notes));
    }
    let stats = ts.server.as_ref().ok_or("stopped")?.grpc_stats.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while stats.snapshot().listened_keys < 3 {
        assert!(Instant::now() < deadline, "listens never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // And one HTTP long poll of the same key.
    let poll = {
        let api = Api::with_client(ts.http.clone(), ts.addr);
        let lc = listening_configs(&[("shared", "G", &md5("v1"), None)]);
        tokio::spawn(async move { api.long_poll(&lc, Some(30_000), &[]).await })
    };
    ts.wait_listener("", "G", "shared", Duration::from_secs(10))
        .await?;
    let before = scrape(&ts, "/metrics").await?;
    let push = "nacelle_push_latency_seconds";
    let release = "nacelle_long_poll_release_seconds";

    ts.publish("", "G", "shared", "v2").await?;
    for (_, notes) in &mut clients {
        notes.wait_for("v2", Duration::from_secs(20)).await?;
    }
    let answered = tokio::time::timeout(Duration::from_secs(20), poll).await???;
    assert_eq!(answered.body, "shared%02G%01\n");

    let base = before.observations(push, &[]);
    let after = scrape_until(&ts, "/metrics", |s| s.observations(push, &[]) >= base + 3.0).await?;
    assert_eq!(
        after.observations(push, &[]) - base,
        3.0,
        "one ack per listener"
    );
    assert_eq!(
        after.observations(release, &[]) - before.observations(release, &[]),
        1.0
    );
    let sum = |s: &Scraped, name: &str| s.value(&format!("{name}_sum"), &[]);
    println!(
        "mean push latency (commit → ack) over 3 listeners: {:.3} ms; long-poll release: {:.3} ms",
        (sum(&after, push) - sum(&before, push)) / 3.0 * 1000.0,
        (sum(&after, release) - sum(&before, release)) * 1000.0
    );
    assert_eq!(after.value("nacelle_grpc_listened_keys", &[]), 3.0);
    assert_eq!(after.value("nacelle_listened_keys", &[]), 1.0);
    // Every push acked: the push sweeper's next pass lists no connection.
    let unacked = "nacelle_grpc_unacked_connections";
    let swept = scrape_until(&ts, "/metrics", |s| s.value(unacked, &[]) == 0.0).await?;
    assert_eq!(
        swept.matching(unacked, &[]).count(),
        1,
        "the gauge is exported"
    );
    assert_eq!(swept.value(unacked, &[]), 0.0);
    Ok(())
}

#[tokio::test]
async fn publishing_to_many_keys_adds_no_series() -> TestResult {
    let ts = TestServer::start().await?;
    // Every kind of request once, so that each label set exists before the baseline.
    ts.publish("", "G", "warm", "w").await?;
    assert!(ts.get("", "G", "warm").await?.is_some());
    assert!(ts.get("", "G", "absent").await?.is_none());
    // The audit trail is written behind the publish, in batches: its store
    // operation's series exists once the warm-up's entry is on disk. The rollout
    // driver's (docs/rollouts.md) once it first looked for rollouts (every second).
    let store_op = "nacelle_store_operation_duration_seconds";
    scrape_until(&ts, "/metrics", |s| {
        s.observations(store_op, &[("op", "audit")]) >= 1.0
            && s.observations(store_op, &[("op", "rollouts")]) >= 1.0
    })
    .await?;
    let baseline = scrape(&ts, "/metrics").await?.series();

    for i in 0..100 {
        let (group, id) = (format!("G{}", i % 7), format!("key-{i}"));
        ts.publish("", &group, &id, &format!("content {i}")).await?;
        assert!(ts.get("", &group, &id).await?.is_some());
        assert!(ts.get("", &group, &format!("absent-{i}")).await?.is_none());
    }
    let after = scrape(&ts, "/metrics").await?;
    let added: Vec<_> = after.series().difference(&baseline).cloned().collect();
    assert!(added.is_empty(), "100 keys added series: {added:?}");
    assert_eq!(after.value("nacelle_configs", &[]), 101.0);
    Ok(())
}

#[tokio::test]
async fn slow_requests_are_logged_with_route_and_cause_never_content() -> TestResult {
    let log = nacelle_testkit::logs::capture("warn");
    let ts = TestServer::start_with(|s| s.slow_request = Duration::ZERO).await?;
    let secret = "content-that-must-never-be-logged-4711";
    ts.publish("", "G", "slow", secret).await?;
    assert_eq!(ts.get("", "G", "slow").await?.as_deref(), Some(secret));
    let sdk = sdk_of(&ts, "metrics-slow").await?;
    let got = sdk.client.get_config("slow".into(), "G".into()).await?;
    assert_eq!(got.content(), secret);

    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = log.text();
        if text.contains("slow gRPC request") && text.contains("slow request") {
            break text;
        }
        assert!(Instant::now() < deadline, "no slow-request log: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let http_line = text
        .lines()
        .find(|l| l.contains("slow request") && l.contains("method=\"POST\""))
        .ok_or("no slow publish logged")?;
    assert!(
        http_line.contains(&format!("route=\"{CONFIGS}\"")),
        "{http_line}"
    );
    assert!(http_line.contains("status=200"), "{http_line}");
    assert!(
        http_line.contains("cause=\"store\"") || http_line.contains("cause=\"queueing\""),
        "{http_line}"
    );
    assert!(http_line.contains("store_ms="), "{http_line}");
    println!("{http_line}");
    let grpc_line = text
        .lines()
        .find(|l| l.contains("slow gRPC request") && l.contains("ConfigQueryRequest"))
        .ok_or("no slow gRPC query logged")?;
    assert!(grpc_line.contains("code=0"), "{grpc_line}");
    assert!(!text.contains(secret), "the content was logged");
    let metrics = scrape(&ts, "/metrics").await?;
    assert!(metrics.value("nacelle_slow_requests_total", &[]) >= 3.0);
    Ok(())
}
