//! Gray release over real HTTP, from clients on distinct loopback addresses (127.0.0.2,
//! 127.0.0.3 as source addresses): a beta for one address reaches only that client (it is
//! woken, served the beta with `isBeta`; the other is never woken and keeps the formal
//! config), a beta client's long poll stays quiet while nothing it sees changes, stop gives
//! the formal content back to the beta client only, promote reaches every other client
//! once; label rules by app name, tags, CAS on a gray, and the bad inputs. Each test runs
//! on SQLite, MariaDB and PostgreSQL (`per_backend!`), so the gray storage of every backend
//! is exercised.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use nacelle_testkit::server::TestServer;
use nacelle_testkit::{listening_configs, md5, per_backend, Api, Backend, TestResult};
use serde_json::Value;

const G: &str = "DEFAULT_GROUP";
const CONFIGS: &str = "/nacos/v1/cs/configs";

/// A header or a form field.
type Pair<'a> = (&'a str, &'a str);

/// A client of `s` whose connections come from `source`.
fn client_from(s: &TestServer, source: &str) -> TestResult<Api> {
    let ip: IpAddr = source.parse()?;
    let http = reqwest::Client::builder()
        .local_address(ip)
        .timeout(Duration::from_secs(30))
        .build()?;
    Ok(Api::with_client(http, s.api.addr))
}

/// A server whose shortest hold is 1 s, so "held for the full timeout" is quick to show.
async fn server(backend: Backend) -> TestResult<TestServer> {
    Ok(TestServer::start_with_on(backend, |s| {
        s.long_poll_min_hold = Duration::from_millis(1000)
    })
    .await?)
}

/// Waits until `n` distinct client addresses listen to `data_id`.
async fn wait_listeners(s: &TestServer, data_id: &str, n: usize) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = s.api.listeners("", G, data_id).await?;
        let count = v["lisentersGroupkeyStatus"]
            .as_object()
            .map_or(0, |m| m.len());
        if count >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{n} listeners of {data_id} never showed: {v}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A held long poll of `data_id` by `client` holding `held_md5`, 1.5 s timeout: the body
/// names the key when woken, is empty when it timed out.
async fn poll(client: &Api, data_id: &str, held_md5: &str) -> TestResult<(String, Duration)> {
    let started = Instant::now();
    let lc = listening_configs(&[(data_id, G, held_md5, None)]);
    let reply = client.long_poll(&lc, Some(1500), &[]).await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    Ok((reply.body, started.elapsed()))
}

/// Publishes through `client` with extra headers and form fields; the raw reply.
async fn publish(
    client: &Api,
    data_id: &str,
    content: &str,
    headers: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> TestResult<(u16, String)> {
    let mut form = vec![("dataId", data_id), ("group", G), ("content", content)];
    form.extend_from_slice(extra);
    let mut req = client.http.post(client.url(CONFIGS)).form(&form);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.text().await?))
}

/// GET through `client` with extra headers and query parameters: status, isBeta header, body.
async fn get(
    client: &Api,
    data_id: &str,
    headers: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> TestResult<(u16, bool, String)> {
    let mut query = vec![("dataId", data_id), ("group", G)];
    query.extend_from_slice(extra);
    let mut req = client.http.get(client.url(CONFIGS)).query(&query);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let beta = resp.headers().get("isBeta").is_some_and(|v| v == "true");
    Ok((status, beta, resp.text().await?))
}

/// `POST …/gray/promote` of `key`'s beta through `api`: status and body.
async fn promote_beta(api: &Api, key: &str) -> TestResult<(u16, Value)> {
    let resp = api
        .http
        .post(api.url("/nacos/v2/cs/config/gray/promote"))
        .form(&[("dataId", key), ("group", G), ("grayName", "beta")])
        .send()
        .await?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await?))
}

/// `DELETE …?beta=true` of `key` through `api`: status and body.
async fn stop_beta(api: &Api, key: &str) -> TestResult<(u16, Value)> {
    let resp = api
        .http
        .delete(api.url(CONFIGS))
        .query(&[("dataId", key), ("group", G), ("beta", "true")])
        .send()
        .await?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await?))
}

fn woken(body: &str, data_id: &str) -> bool {
    body == format!("{data_id}%02{G}%01\n")
}

per_backend!(a_beta_reaches_only_its_address_and_stop_and_promote_reach_the_right_clients);
async fn a_beta_reaches_only_its_address_and_stop_and_promote_reach_the_right_clients(
    backend: Backend,
) -> TestResult {
    let s = server(backend).await?;
    let a = client_from(&s, "127.0.0.2")?;
    let b = client_from(&s, "127.0.0.3")?;
    let key = "canary.yaml";
    s.publish("", G, key, "v: 1").await?;
    let formal = md5("v: 1");
    let (beta_md5, v2_md5) = (md5("v: beta"), md5("v: 2"));

    // Both hold a poll; a beta for 127.0.0.2 wakes A only.
    let (pa, pb) = (poll(&a, key, &formal), poll(&b, key, &formal));
    let publish_beta = async {
        wait_listeners(&s, key, 2).await?;
        let r = publish(&s.api, key, "v: beta", &[("betaIps", "127.0.0.2")], &[]).await?;
        TestResult::Ok(r)
    };
    let ((body_a, took_a), (body_b, took_b), r) = tokio::try_join!(pa, pb, publish_beta)?;
    assert_eq!(r, (200, "true".to_string()));
    assert!(woken(&body_a, key), "the beta client is woken: {body_a:?}");
    assert_eq!(
        body_b, "",
        "the other client is not woken (held {took_b:?})"
    );
    println!("beta client woken after {took_a:?}; other held {took_b:?}");

    // A is served the beta, B the formal config.
    assert_eq!(get(&a, key, &[], &[]).await?, (200, true, "v: beta".into()));
    assert_eq!(get(&b, key, &[], &[]).await?, (200, false, "v: 1".into()));
    let beta = s
        .api
        .get_with("", G, key, &[("beta", "true")])
        .await?
        .json()?;
    assert_eq!(beta["message"], "query beta ok");
    assert_eq!(beta["data"]["betaIps"], "127.0.0.2");
    assert_eq!(beta["data"]["content"], "v: beta");

    // Nothing either sees changes: both polls are held for the full timeout (no wake-up
    // loop for the beta client holding the beta's md5).
    let ((qa, ta), (qb, tb)) = tokio::try_join!(poll(&a, key, &beta_md5), poll(&b, key, &formal))?;
    assert_eq!((qa.as_str(), qb.as_str()), ("", ""));
    assert!(ta >= Duration::from_millis(900) && tb >= Duration::from_millis(900));

    // Stop: A is woken and gets the formal content back; B is not woken.
    let (pa, pb) = (poll(&a, key, &beta_md5), poll(&b, key, &formal));
    let stop = async {
        wait_listeners(&s, key, 2).await?;
        TestResult::Ok(stop_beta(&s.api, key).await?.1)
    };
    let ((body_a, _), (body_b, _), v) = tokio::try_join!(pa, pb, stop)?;
    assert_eq!(v["message"], "stop beta ok");
    assert!(woken(&body_a, key), "{body_a:?}");
    assert_eq!(body_b, "");
    assert_eq!(get(&a, key, &[], &[]).await?, (200, false, "v: 1".into()));
    let none = s
        .api
        .get_with("", G, key, &[("beta", "true")])
        .await?
        .json()?;
    assert_eq!(none["data"], Value::Null);

    // Promote: the beta client already holds the content and is not woken; B is, once.
    publish(&s.api, key, "v: 2", &[("betaIps", "127.0.0.2")], &[]).await?;
    let (pa, pb) = (poll(&a, key, &v2_md5), poll(&b, key, &formal));
    let promote = async {
        wait_listeners(&s, key, 2).await?;
        TestResult::Ok(promote_beta(&s.api, key).await?.1)
    };
    let ((body_a, _), (body_b, _), v) = tokio::try_join!(pa, pb, promote)?;
    assert_eq!(v["data"], true, "{v}");
    assert_eq!(
        body_a, "",
        "the beta client already has the promoted content"
    );
    assert!(woken(&body_b, key), "{body_b:?}");
    assert_eq!(get(&a, key, &[], &[]).await?, (200, false, "v: 2".into()));
    assert_eq!(get(&b, key, &[], &[]).await?, (200, false, "v: 2".into()));
    // The promotion is one formal history entry; no gray is left.
    let grays = list_grays(&s, key).await?;
    assert_eq!(grays["data"], serde_json::json!([]));
    let history = s
        .api
        .http
        .get(s.api.url("/nacos/v1/cs/history"))
        .query(&[("search", "accurate"), ("dataId", key), ("group", G)])
        .send()
        .await?
        .json::<Value>()
        .await?;
    assert_eq!(history["totalCount"], 2, "publish + promote: {history}");

    // Every gray operation is in the gray history with its rule: publish, stop, publish,
    // promotion (newest first).
    let history = s
        .api
        .http
        .get(s.api.url("/nacos/v2/cs/config/gray/history"))
        .query(&[("dataId", key), ("group", G)])
        .send()
        .await?
        .json::<Value>()
        .await?;
    let ops: Vec<(String, String, String)> = history["data"]["pageItems"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| {
                    let text = |f: &str| i[f].as_str().unwrap_or_default().to_string();
                    (text("opType"), text("type"), text("expr"))
                })
                .collect()
        })
        .unwrap_or_default();
    let op = |o: &str| (o.to_string(), "beta".to_string(), "127.0.0.2".to_string());
    assert_eq!(ops, [op("D"), op("I"), op("D"), op("I")], "{history}");
    assert_eq!(history["data"]["totalCount"], 4);

    // Promoting a gray that no longer exists is a clear 404.
    assert_eq!(promote_beta(&s.api, key).await?.0, 404);
    Ok(())
}

async fn list_grays(s: &TestServer, key: &str) -> TestResult<Value> {
    Ok(s.api
        .http
        .get(s.api.url("/nacos/v2/cs/config/gray"))
        .query(&[("dataId", key), ("group", G)])
        .send()
        .await?
        .json()
        .await?)
}

per_backend!(label_rules_by_app_name_and_priority_tags_and_cas);
async fn label_rules_by_app_name_and_priority_tags_and_cas(backend: Backend) -> TestResult {
    let s = server(backend).await?;
    let key = "app.properties";
    s.publish("", G, key, "x=1").await?;
    let shop = [("Client-AppName", "shop")];

    // An app-name rule (priority 1) and a beta for 127.0.0.2 (above every label rule).
    let rule = [
        ("grayName", "shop-canary"),
        ("grayRule", "AppName=shop"),
        ("grayPriority", "1"),
    ];
    assert_eq!(publish(&s.api, key, "x=shop", &[], &rule).await?.0, 200);
    assert_eq!(
        get(&s.api, key, &shop, &[]).await?,
        (200, false, "x=shop".into())
    );
    assert_eq!(
        get(&s.api, key, &[], &[]).await?,
        (200, false, "x=1".into())
    );
    publish(&s.api, key, "x=beta", &[("betaIps", "127.0.0.2")], &[]).await?;
    let a = client_from(&s, "127.0.0.2")?;
    assert_eq!(
        get(&a, key, &shop, &[]).await?,
        (200, true, "x=beta".into())
    );
    let grays = list_grays(&s, key).await?;
    let names: Vec<&str> = grays["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|g| g["grayName"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        names,
        ["beta", "shop-canary"],
        "highest priority first: {grays}"
    );
    assert_eq!(grays["data"][1]["type"], "tagv2");
    assert_eq!(grays["data"][1]["expr"], "AppName=shop");

    // Tags: served by `tag` or the `Vipserver-Tag` header; an unknown tag is not found.
    assert_eq!(
        publish(&s.api, key, "x=blue", &[], &[("tag", "blue")])
            .await?
            .0,
        200
    );
    assert_eq!(
        get(&s.api, key, &[], &[("tag", "blue")]).await?,
        (200, false, "x=blue".into())
    );
    assert_eq!(
        get(&s.api, key, &[("Vipserver-Tag", "blue")], &[]).await?.2,
        "x=blue"
    );
    assert_eq!(get(&s.api, key, &[], &[("tag", "red")]).await?.0, 404);
    let v2 = s
        .api
        .http
        .get(s.api.url("/nacos/v2/cs/config"))
        .query(&[("dataId", key), ("group", G), ("tag", "blue")])
        .send()
        .await?
        .json::<Value>()
        .await?;
    assert_eq!(v2["data"], "x=blue");

    // CAS on a gray: against that gray's md5.
    let cas_bad = [("betaIps", "127.0.0.2"), ("casMd5", "0000")];
    let (status, body) = publish(&s.api, key, "x=beta2", &cas_bad, &[]).await?;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("Cas publish fail"), "{body}");
    let beta_md5 = md5("x=beta");
    let cas_ok = [("betaIps", "127.0.0.2"), ("casMd5", beta_md5.as_str())];
    assert_eq!(publish(&s.api, key, "x=beta2", &cas_ok, &[]).await?.0, 200);
    assert_eq!(get(&a, key, &[], &[]).await?.2, "x=beta2");

    // Removing the tag over v1 (`tag` on DELETE) stops that variant only.
    let resp = s
        .api
        .http
        .delete(s.api.url(CONFIGS))
        .query(&[("dataId", key), ("group", G), ("tag", "blue")])
        .send()
        .await?;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(get(&s.api, key, &[], &[("tag", "blue")]).await?.0, 404);
    assert_eq!(get(&s.api, key, &shop, &[]).await?.2, "x=shop");

    // Stopping a label rule by name.
    let resp = s
        .api
        .http
        .delete(s.api.url("/nacos/v2/cs/config"))
        .query(&[("dataId", key), ("group", G), ("grayName", "shop-canary")])
        .send()
        .await?;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(get(&s.api, key, &shop, &[]).await?.2, "x=1");
    Ok(())
}

per_backend!(bad_gray_input_is_refused_and_nothing_is_written);
async fn bad_gray_input_is_refused_and_nothing_is_written(backend: Backend) -> TestResult {
    let s = server(backend).await?;
    let key = "bad.yaml";
    s.publish("", G, key, "a: 1").await?;
    let cases: [(&[Pair], &[Pair]); 7] = [
        (&[("betaIps", "127.0.0.2,not-an-ip")], &[]),
        (&[], &[("grayName", "x"), ("grayRule", "a==b")]),
        (&[], &[("grayName", "x"), ("grayRule", "a=1&&a=2")]),
        (&[], &[("grayName", "beta"), ("grayRule", "a=1")]),
        (&[], &[("grayName", "x")]),
        (
            &[],
            &[
                ("grayName", "x"),
                ("grayRule", "a=1"),
                ("grayPriority", "high"),
            ],
        ),
        (&[], &[("tag", "a-tag-longer-than-sixteen")]),
    ];
    for (headers, extra) in cases {
        let (status, body) = publish(&s.api, key, "a: gray", headers, extra).await?;
        assert_eq!(status, 400, "{headers:?} {extra:?}: {body}");
    }
    // A gray on a key with no formal config: refused (publish the formal config first).
    let (status, body) = publish(
        &s.api,
        "absent.yaml",
        "a: 1",
        &[("betaIps", "127.0.0.2")],
        &[],
    )
    .await?;
    assert_eq!(status, 404, "{body}");
    assert_eq!(list_grays(&s, key).await?["data"], serde_json::json!([]));
    assert_eq!(
        list_grays(&s, "absent.yaml").await?["data"],
        serde_json::json!([])
    );
    Ok(())
}

per_backend!(grays_survive_a_restart);
async fn grays_survive_a_restart(backend: Backend) -> TestResult {
    // Loaded at start like formal configs: a restarted node on the same database serves
    // the beta to its address.
    let mut s = server(backend).await?;
    let key = "restart.yaml";
    s.publish("", G, key, "r: 1").await?;
    publish(&s.api, key, "r: beta", &[("betaIps", "127.0.0.0/8")], &[]).await?;
    let dir = s.dir.path().to_path_buf();
    let db = s.db.as_ref().map(|d| d.url.clone());
    s.stop().await?;
    let s2 = TestServer::start_with_on(backend, |set| {
        set.data_dir = dir.clone();
        if let Some(url) = db.clone() {
            set.db = Some(url);
        }
    })
    .await?;
    assert_eq!(
        get(&s2.api, key, &[], &[]).await?,
        (200, true, "r: beta".into())
    );
    Ok(())
}

/// Two nodes on one database with no cluster notifications between them (no members
/// configured): the second learns of gray publishes, stops and promotions only from the
/// gray change log it follows, within the 2 s bound.
async fn a_node_that_misses_notifications_converges_on_grays(backend: Backend) -> TestResult {
    let writer = server(backend).await?;
    let url = writer
        .db
        .as_ref()
        .map(|d| d.url.clone())
        .ok_or("a shared database is needed")?;
    let follower = TestServer::start_with_on(backend, |set| set.db = Some(url.clone())).await?;
    let canary = client_from(&follower, "127.0.0.2")?;
    let key = "shared.yaml";
    writer.publish("", G, key, "s: 1").await?;
    publish(
        &writer.api,
        key,
        "s: beta",
        &[("betaIps", "127.0.0.2")],
        &[],
    )
    .await?;

    let converge = |expect: (u16, bool, &'static str)| {
        let canary = &canary;
        async move {
            let started = Instant::now();
            loop {
                let got = get(canary, key, &[], &[]).await?;
                if (got.0, got.1, got.2.as_str()) == expect {
                    return TestResult::Ok(started.elapsed());
                }
                if started.elapsed() > Duration::from_secs(2) {
                    return Err(format!("not converged in 2 s: {got:?}, want {expect:?}").into());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    println!(
        "beta seen on the follower after {:?}",
        converge((200, true, "s: beta")).await?
    );
    // Other addresses keep the formal config there.
    assert_eq!(
        get(&follower.api, key, &[], &[]).await?,
        (200, false, "s: 1".into())
    );

    assert_eq!(stop_beta(&writer.api, key).await?.0, 200);
    println!(
        "stop seen after {:?}",
        converge((200, false, "s: 1")).await?
    );

    publish(&writer.api, key, "s: 2", &[("betaIps", "127.0.0.2")], &[]).await?;
    converge((200, true, "s: 2")).await?;
    assert_eq!(promote_beta(&writer.api, key).await?.0, 200);
    println!(
        "promotion seen after {:?}",
        converge((200, false, "s: 2")).await?
    );
    assert_eq!(get(&follower.api, key, &[], &[]).await?.2, "s: 2");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_misses_notifications_converges_on_grays_mariadb() -> TestResult {
    nacelle_testkit::per_backend::run_on(
        Backend::MariaDb,
        a_node_that_misses_notifications_converges_on_grays,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_misses_notifications_converges_on_grays_postgres() -> TestResult {
    nacelle_testkit::per_backend::run_on(
        Backend::Postgres,
        a_node_that_misses_notifications_converges_on_grays,
    )
    .await
}

/// `?show=all` is the formal record whoever asks, as Nacos's `detailConfigInfo` reads
/// `config_info` only: a caller on a beta IP (the console's browser may be one) or naming a
/// tag must not be shown the variant as if it were the formal config — the console saves
/// what it shows. Found by the Go SDK suite (compat/go): a beta published through
/// `additionMap.betaIps` for 127.0.0.1 made `show=all` from 127.0.0.1 answer the beta.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_all_is_the_formal_record_for_a_beta_ip_and_a_tag() -> TestResult {
    let s = server(Backend::Sqlite).await?;
    let beta_client = client_from(&s, "127.0.0.2")?;
    let key = "show-all.yaml";
    s.publish("", G, key, "v: formal").await?;
    let r = publish(&s.api, key, "v: beta", &[("betaIps", "127.0.0.2")], &[]).await?;
    assert_eq!(r, (200, "true".to_string()));
    let r = publish(&s.api, key, "v: tagged", &[], &[("tag", "t1")]).await?;
    assert_eq!(r, (200, "true".to_string()));
    // The plain GET serves the caller's variant ...
    assert_eq!(
        get(&beta_client, key, &[], &[]).await?,
        (200, true, "v: beta".into())
    );
    // ... show=all the formal record, to the beta IP and with a tag alike.
    for extra in [vec![("show", "all")], vec![("show", "all"), ("tag", "t1")]] {
        let (status, beta, body) = get(&beta_client, key, &[], &extra).await?;
        assert_eq!((status, beta), (200, false), "{body}");
        let v: Value = serde_json::from_str(&body)?;
        assert_eq!(v["content"], "v: formal", "{extra:?}: {body}");
        assert_eq!(v["md5"], md5("v: formal"), "{body}");
    }
    Ok(())
}
