//! The live view of who runs what (`GET /nacos/nacelle/v1/clients`, docs/live-view.md)
//! on one node: a gRPC client (the real Rust SDK) and an HTTP long-polling client from
//! another loopback address listen to one key; the counts per md5 follow a publish, a
//! gray for the long-polling client's address, and disconnects of both protocols. The
//! cluster-wide view is tested in cluster.rs.

use std::time::{Duration, Instant};

use nacelle_testkit::grpc::{recorder, Sdk};
use nacelle_testkit::server::TestServer;
use nacelle_testkit::{listening_configs, md5, Api, TestResult, SOON};
use serde_json::Value;

const CLIENTS: &str = "/nacos/nacelle/v1/clients";

async fn view(api: &Api, data_id: &str, scope: Option<&str>) -> TestResult<Value> {
    let mut q = vec![("groupName", "LIVE"), ("dataId", data_id)];
    if let Some(s) = scope {
        q.push(("scope", s));
    }
    let resp = api.http.get(api.url(CLIENTS)).query(&q).send().await?;
    let status = resp.status().as_u16();
    let body: Value = resp.json().await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["code"], 0, "{body}");
    Ok(body["data"].clone())
}

/// Polls the view until `done` holds (at most `SOON`); returns it.
async fn view_until(
    api: &Api,
    data_id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> TestResult<Value> {
    let deadline = Instant::now() + SOON;
    loop {
        let v = view(api, data_id, None).await?;
        if done(&v) {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!("the live view never showed {what}: {v}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// (formal, gray `name`, unknown, total) of a view's cluster counts.
fn counts(v: &Value, gray: &str) -> (u64, u64, u64, u64) {
    let t = &v["total"];
    let n = |x: &Value| x.as_u64().unwrap_or(0);
    (
        n(&t["formal"]),
        n(&t["grays"][gray]),
        n(&t["unknown"]),
        n(&t["total"]),
    )
}

/// The client rows of a view with this protocol.
fn rows<'a>(v: &'a Value, protocol: &str) -> Vec<&'a Value> {
    v["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["clients"].as_array().into_iter().flatten())
        .filter(|c| c["protocol"] == protocol)
        .collect()
}

/// A long poll from 127.0.0.2 holding `held` for `live.yaml`, running until it is answered.
fn poll_from_canary(
    http: &reqwest::Client,
    url: String,
    held: &str,
) -> tokio::task::JoinHandle<reqwest::Result<String>> {
    let listening = listening_configs(&[("live.yaml", "LIVE", held, None)]);
    let req = http
        .post(url)
        .header("Long-Pulling-Timeout", "30000")
        .form(&[("Listening-Configs", listening)]);
    tokio::spawn(async move { req.send().await?.text().await })
}

#[tokio::test]
async fn the_live_view_counts_who_holds_what_across_publish_gray_and_disconnect() -> TestResult {
    let ts = TestServer::start().await?;
    let running = ts.server.as_ref().ok_or("no server")?;
    let (http_port, grpc_port) = (running.http_addr.port(), running.grpc_addr.port());
    ts.publish("", "LIVE", "live.yaml", "v: 1").await?;
    let v1 = md5("v: 1");

    // Nobody listens yet: an empty view, complete, with the formal md5.
    let empty = view(&ts, "live.yaml", None).await?;
    assert_eq!(empty["formalMd5"], v1.as_str(), "{empty}");
    assert_eq!(counts(&empty, "beta"), (0, 0, 0, 0), "{empty}");
    assert_eq!(empty["complete"], true);
    assert_eq!(empty["nodes"][0]["self"], true);

    // The real Rust client over gRPC, and a long poll from 127.0.0.2.
    let sdk = Sdk::connect(http_port, grpc_port, "", "live-grpc-app").await?;
    let (listener, mut told) = recorder();
    sdk.client
        .add_listener("live.yaml".into(), "LIVE".into(), listener.clone())
        .await?;
    let canary = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>()?)
        .build()?;
    let poll_url = ts.url("/nacos/v1/cs/configs/listener");
    let poll = poll_from_canary(&canary, poll_url.clone(), &v1);
    let both = view_until(&ts, "live.yaml", "both clients on v1", |v| {
        counts(v, "beta") == (2, 0, 0, 2)
    })
    .await?;
    let grpc = rows(&both, "grpc");
    assert_eq!(grpc.len(), 1, "{both}");
    assert_eq!(grpc[0]["ip"], "127.0.0.1");
    assert_eq!(grpc[0]["app"], "live-grpc-app");
    assert_eq!(grpc[0]["holds"], "formal");
    assert_eq!(grpc[0]["heldMd5"], v1.as_str());
    assert_eq!(grpc[0]["inSync"], true);
    assert!(grpc[0]["since"].as_i64().unwrap_or(0) > 0, "{both}");
    let polls = rows(&both, "http-v1");
    assert_eq!(polls.len(), 1, "{both}");
    assert_eq!(polls[0]["ip"], "127.0.0.2");
    // The node-local scope answers the same for a user (no cluster secret).
    let local = view(&ts, "live.yaml", Some("local")).await?;
    assert_eq!(local["counts"]["formal"], 2, "{local}");

    // A publish: the gRPC client is told and reads v2; the poll is answered and the
    // client polls again with what it read.
    ts.publish("", "LIVE", "live.yaml", "v: 2").await?;
    let v2 = md5("v: 2");
    told.wait_for("v: 2", SOON).await?;
    let answered = poll.await??;
    assert!(answered.contains("live.yaml"), "{answered}");
    let poll = poll_from_canary(&canary, poll_url.clone(), &v2);
    let on_v2 = view_until(&ts, "live.yaml", "both clients on v2", |v| {
        v["formalMd5"] == v2.as_str()
            && counts(v, "beta") == (2, 0, 0, 2)
            && rows(v, "grpc").first().map(|c| c["heldMd5"].clone()) == Some(v2.clone().into())
    })
    .await?;
    assert!(
        rows(&on_v2, "http-v1")[0]["heldMd5"] == v2.as_str(),
        "{on_v2}"
    );

    // A gray for 127.0.0.2: the long-polling client is told, polls again holding the
    // gray; the gRPC client keeps the formal config.
    let beta = ts
        .http
        .post(ts.url("/nacos/v1/cs/configs"))
        .header("betaIps", "127.0.0.2")
        .form(&[
            ("dataId", "live.yaml"),
            ("group", "LIVE"),
            ("content", "v: beta"),
        ])
        .send()
        .await?;
    assert_eq!(beta.text().await?, "true");
    let gray_md5 = md5("v: beta");
    let answered = poll.await??;
    assert!(answered.contains("live.yaml"), "{answered}");
    let poll = poll_from_canary(&canary, poll_url.clone(), &gray_md5);
    let grayed = view_until(&ts, "live.yaml", "the canary on the gray", |v| {
        counts(v, "beta") == (1, 1, 0, 2)
    })
    .await?;
    assert_eq!(grayed["grays"][0]["name"], "beta", "{grayed}");
    assert_eq!(grayed["grays"][0]["md5"], gray_md5.as_str(), "{grayed}");
    let canary_row = rows(&grayed, "http-v1")[0].clone();
    assert_eq!(canary_row["holds"], "gray:beta", "{grayed}");
    assert_eq!(canary_row["servedGray"], "beta", "{grayed}");
    assert_eq!(canary_row["inSync"], true, "{grayed}");
    assert_eq!(rows(&grayed, "grpc")[0]["holds"], "formal", "{grayed}");

    // A second gRPC client (Nacelle's own SDK) comes and goes: nacos-sdk 0.8 cannot be
    // closed, ours closes its connection when dropped.
    let second = nacelle_client::Client::builder()
        .server(nacelle_client::ServerAddr::new("127.0.0.1", http_port)?.with_grpc_port(grpc_port))
        .build()
        .await?;
    let watch = second.watch(("LIVE", "live.yaml")).await?;
    view_until(&ts, "live.yaml", "two gRPC clients", |v| {
        counts(v, "beta") == (2, 1, 0, 3) && rows(v, "grpc").len() == 2
    })
    .await?;
    drop(watch);
    drop(second);
    let gone = view_until(&ts, "live.yaml", "the second gRPC client gone", |v| {
        counts(v, "beta") == (1, 1, 0, 2)
    })
    .await?;
    assert_eq!(rows(&gone, "grpc").len(), 1, "{gone}");

    // The long-polling client hangs up: its held poll is gone from the view.
    poll.abort();
    let hung_up = view_until(&ts, "live.yaml", "the canary gone", |v| {
        counts(v, "beta") == (1, 0, 0, 1)
    })
    .await?;
    assert!(rows(&hung_up, "http-v1").is_empty(), "{hung_up}");
    let poll = poll_from_canary(&canary, poll_url.clone(), &gray_md5);
    view_until(&ts, "live.yaml", "the canary back", |v| {
        counts(v, "beta") == (1, 1, 0, 2)
    })
    .await?;

    // The gray stopped: the canary's poll is answered (it would poll again for the
    // formal config); the gRPC client is the one left listening.
    let stop = ts
        .http
        .delete(ts.url("/nacos/v1/cs/configs"))
        .query(&[("dataId", "live.yaml"), ("group", "LIVE"), ("beta", "true")])
        .send()
        .await?;
    assert_eq!(stop.status().as_u16(), 200, "{}", stop.text().await?);
    let answered = poll.await??;
    assert!(answered.contains("live.yaml"), "{answered}");
    let after = view_until(&ts, "live.yaml", "only the gRPC client", |v| {
        counts(v, "beta") == (1, 0, 0, 1)
    })
    .await?;
    assert_eq!(after["grays"].as_array().map(Vec::len), Some(0), "{after}");
    Ok(())
}

#[tokio::test]
async fn bad_questions_get_a_400_and_a_reader_without_permission_a_403() -> TestResult {
    let ts = TestServer::start_with(nacelle_testkit::server::secure).await?;
    let admin = ts.admin_token().await?;
    let api = Api::with_token(ts.addr, &admin)?;
    let ask = |q: Vec<(&'static str, &'static str)>| {
        let api = api.clone();
        async move {
            let resp = api.http.get(api.url(CLIENTS)).query(&q).send().await?;
            let status = resp.status().as_u16();
            let body: Value = resp.json().await?;
            TestResult::Ok((status, body))
        }
    };
    let (status, body) = ask(vec![("groupName", "G")]).await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("dataId"), "{body}");
    let (status, body) = ask(vec![("groupName", "G"), ("dataId", "a"), ("scope", "all")]).await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("scope"), "{body}");
    let (status, body) = ask(vec![("groupName", "G"), ("dataId", "a")]).await?;
    assert_eq!(status, 200, "{body}");

    // A user who may read only `dev` is refused the default namespace's key.
    let reader = ts.user_granted(&admin, "reader", "dev:*:*", "r").await?;
    let as_reader = Api::with_token(ts.addr, &reader)?;
    let resp = as_reader
        .http
        .get(as_reader.url(CLIENTS))
        .query(&[("groupName", "G"), ("dataId", "a")])
        .send()
        .await?;
    assert_eq!(resp.status().as_u16(), 403);
    // A wrong cluster secret is refused, not treated as a member.
    let resp = ts
        .http
        .get(ts.url(CLIENTS))
        .query(&[("groupName", "G"), ("dataId", "a"), ("scope", "local")])
        .header("Nacelle-Cluster-Secret", "guess")
        .send()
        .await?;
    assert_eq!(resp.status().as_u16(), 403);
    Ok(())
}
