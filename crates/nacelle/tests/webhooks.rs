//! Webhooks against a real server and real receivers (an HTTP server in the test, on port
//! 0), with authentication on: a receiver gets signed events — the test checks the
//! HMAC-SHA256 of each body itself — for a publish, a gray publish, a removal and a change
//! request's creation, approval and publish; a hook whose patterns do not match gets
//! nothing; a receiver that is down (its port bound only later), or answering 503, gets the
//! events once it comes back, across a restart of the server, and the delivery log shows
//! the attempts; two nodes on one database (MariaDB, PostgreSQL) deliver each event once.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod common;

use common::webhook::{Receiver, SECRET};
use nacelle_testkit::api::Reply;
use nacelle_testkit::server::{secure, settings_for, TestServer};
use nacelle_testkit::{per_backend, Api, Backend, TestResult, SOON};
use reqwest::Method;
use serde_json::{json, Value};

const WEBHOOKS: &str = "/nacos/nacelle/v1/webhooks";
const DELIVERIES: &str = "/nacos/nacelle/v1/webhook/deliveries";

per_backend!(
    with run:
    signed_events_reach_a_real_receiver;
    flavor = "multi_thread", worker_threads = 2
);

async fn run<F, Fut>(backend: Backend, body: F) -> TestResult
where
    F: FnOnce(TestServer) -> Fut,
    Fut: std::future::Future<Output = TestResult>,
{
    let s = TestServer::start_with_on(backend, secure).await?;
    body(s).await
}

/// A request with `token`: query parameters for GET and DELETE, a form otherwise.
async fn call(
    api: &Api,
    token: &str,
    method: Method,
    path: &str,
    params: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> TestResult<Reply> {
    let mut req = if method == Method::GET || method == Method::DELETE {
        api.http.request(method, api.url(path)).query(params)
    } else {
        api.http.request(method, api.url(path)).form(params)
    };
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    Ok(Reply::read(req.bearer_auth(token).send().await?).await?)
}

/// The `data` of a successful answer.
fn data(r: &Reply) -> TestResult<Value> {
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json()?;
    assert_eq!(v["code"], 0, "{v}");
    Ok(v["data"].clone())
}

async fn publish(api: &Api, token: &str, data_id: &str, content: &str) -> TestResult {
    let params = [
        ("tenant", "prod"),
        ("group", "G"),
        ("dataId", data_id),
        ("content", content),
    ];
    let r = call(
        api,
        token,
        Method::POST,
        "/nacos/v1/cs/configs",
        &params,
        &[],
    )
    .await?;
    assert_eq!((r.status, r.body.as_str()), (200, "true"), "{}", r.body);
    Ok(())
}

/// Namespace `prod` (created by the administrator); the administrator's token.
async fn prod(s: &TestServer) -> TestResult<String> {
    let admin = s.admin_token().await?;
    let r = call(
        &s.api,
        &admin,
        Method::POST,
        "/nacos/v1/console/namespaces",
        &[("customNamespaceId", "prod"), ("namespaceName", "prod")],
        &[],
    )
    .await?;
    assert_eq!(r.status, 200, "{}", r.body);
    Ok(admin)
}

/// Creates a webhook of `prod` with `params` (plus namespace and secret); its id.
async fn add_hook(api: &Api, admin: &str, params: &[(&str, &str)]) -> TestResult<i64> {
    let mut all = vec![("namespaceId", "prod"), ("secret", SECRET)];
    all.extend_from_slice(params);
    let hook = data(&call(api, admin, Method::POST, WEBHOOKS, &all, &[]).await?)?;
    Ok(hook["id"].as_i64().ok_or("no id")?)
}

/// The deliveries of hook `id`, newest first.
async fn deliveries(api: &Api, admin: &str, id: i64) -> TestResult<Vec<Value>> {
    let id = id.to_string();
    let page = data(
        &call(
            api,
            admin,
            Method::GET,
            DELIVERIES,
            &[("id", id.as_str()), ("pageSize", "100")],
            &[],
        )
        .await?,
    )?;
    Ok(page["pageItems"].as_array().cloned().unwrap_or_default())
}

/// Waits until `ok` holds for the deliveries of hook `id` (a hang detector).
async fn until_deliveries(
    api: &Api,
    admin: &str,
    id: i64,
    what: &str,
    ok: impl Fn(&[Value]) -> bool,
) -> TestResult<Vec<Value>> {
    let deadline = Instant::now() + SOON;
    loop {
        let list = deliveries(api, admin, id).await?;
        if ok(&list) {
            return Ok(list);
        }
        if Instant::now() > deadline {
            return Err(format!("deliveries never {what}: {list:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn signed_events_reach_a_real_receiver(s: TestServer) -> TestResult {
    let admin = prod(&s).await?;
    let mut rx = Receiver::bind("127.0.0.1:0".parse()?).await?;
    let url = rx.url();

    // Managing webhooks is for administrators; bad input is a 400 naming it.
    let bob = s.user_granted(&admin, "bob", "prod:*:*", "rwa").await?;
    let r = call(&s.api, &bob, Method::GET, WEBHOOKS, &[], &[]).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    for (bad, names) in [
        ([("url", "ftp://x/hook"), ("events", "")], "url"),
        ([("url", url.as_str()), ("events", "deploy")], "deploy"),
    ] {
        let mut p = vec![("namespaceId", "prod"), ("secret", SECRET)];
        p.extend_from_slice(&bad);
        let r = call(&s.api, &admin, Method::POST, WEBHOOKS, &p, &[]).await?;
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.contains(names), "{}", r.body);
    }

    let hook = add_hook(
        &s.api,
        &admin,
        &[("group", "G"), ("dataId", "*.yaml"), ("url", url.as_str())],
    )
    .await?;
    // Another hook whose patterns match nothing below.
    let other = add_hook(&s.api, &admin, &[("group", "OTHER"), ("url", url.as_str())]).await?;
    // The secret is never answered: its fingerprint is.
    let r = call(&s.api, &admin, Method::GET, WEBHOOKS, &[], &[]).await?;
    assert!(!r.body.contains(SECRET), "{}", r.body);
    let listed = data(&r)?;
    assert_eq!(listed[0]["id"], hook, "{listed}");
    assert_eq!(listed[0]["namespaceId"], "prod", "{listed}");
    assert!(listed[0]["secretFingerprint"]
        .as_str()
        .is_some_and(|f| f.starts_with("sha256:")));

    // A publish, a gray publish, a removal.
    publish(&s.api, &admin, "app.yaml", "v: 1\n").await?;
    let first = rx.signed(1).await?;
    let e = &first[0];
    assert_eq!(e["kind"], "publish", "{e}");
    assert_eq!(
        (&e["namespaceId"], &e["group"], &e["dataId"]),
        (&json!("prod"), &json!("G"), &json!("app.yaml")),
        "{e}"
    );
    assert_eq!(e["md5"], nacelle_testkit::md5("v: 1\n"), "{e}");
    assert_eq!(
        (&e["user"], &e["protocol"]),
        (&json!("nacos"), &json!("http-v1"))
    );
    assert!(e["id"].as_str().is_some_and(|id| !id.is_empty()), "{e}");

    let params = [
        ("tenant", "prod"),
        ("group", "G"),
        ("dataId", "app.yaml"),
        ("content", "v: beta\n"),
    ];
    let r = call(
        &s.api,
        &admin,
        Method::POST,
        "/nacos/v1/cs/configs",
        &params,
        &[("betaIps", "127.0.0.2")],
    )
    .await?;
    assert_eq!(r.status, 200, "{}", r.body);
    let beta = rx.signed(1).await?;
    assert_eq!(beta[0]["kind"], "gray-publish", "{}", beta[0]);
    assert_eq!(beta[0]["md5"], nacelle_testkit::md5("v: beta\n"));

    publish(&s.api, &admin, "old.yaml", "o: 1\n").await?;
    let r = call(
        &s.api,
        &admin,
        Method::DELETE,
        "/nacos/v1/cs/configs",
        &[("tenant", "prod"), ("group", "G"), ("dataId", "old.yaml")],
        &[],
    )
    .await?;
    assert_eq!(r.status, 200, "{}", r.body);
    // Deliveries may arrive in any order (docs/webhooks.md): matched by kind.
    let two = by_kind(rx.signed(2).await?);
    assert_eq!(two.len(), 2, "{two:?}");
    assert_eq!(two["publish"]["dataId"], "old.yaml");
    assert_eq!(two["remove"]["dataId"], "old.yaml");
    assert_eq!(two["remove"]["md5"], Value::Null);

    // A refused write sends nothing: carol may only read (the log's count below).
    let carol = s.user_granted(&admin, "carol", "prod:*:*", "r").await?;
    let r = call(
        &s.api,
        &carol,
        Method::POST,
        "/nacos/v1/cs/configs",
        &[
            ("tenant", "prod"),
            ("group", "G"),
            ("dataId", "x.yaml"),
            ("content", "x"),
        ],
        &[],
    )
    .await?;
    assert_eq!(r.status, 403, "{}", r.body);

    // A change request: created by the administrator, approved by bob, published.
    let body = json!({"namespaceId": "prod", "title": "raise v", "items": [
        {"group": "G", "dataId": "app.yaml", "content": "v: 2\n"}]});
    let r = s
        .http
        .post(s.url("/nacos/nacelle/v1/changes"))
        .bearer_auth(&admin)
        .json(&body)
        .send()
        .await?;
    let cr = data(&Reply::read(r).await?)?;
    let id = cr["id"].as_i64().ok_or("no change id")?.to_string();
    let approved = call(
        &s.api,
        &bob,
        Method::POST,
        "/nacos/nacelle/v1/change/approve",
        &[("id", id.as_str()), ("text", "fine")],
        &[],
    )
    .await?;
    data(&approved)?;
    let published = call(
        &s.api,
        &admin,
        Method::POST,
        "/nacos/nacelle/v1/change/publish",
        &[("id", id.as_str())],
        &[],
    )
    .await?;
    data(&published)?;
    let changes = by_kind(rx.signed(3).await?);
    let mut kinds: Vec<&String> = changes.keys().collect();
    kinds.sort();
    assert_eq!(
        kinds,
        vec!["change-approved", "change-created", "change-published"]
    );
    let approval = &changes["change-approved"];
    assert_eq!(approval["user"], "bob", "{approval}");
    assert_eq!(approval["change"]["title"], "raise v", "{approval}");
    assert_eq!(approval["change"]["event"], "approved", "{approval}");
    assert_eq!(approval["changeId"].to_string(), id, "{approval}");
    let keys = &changes["change-published"]["change"]["keys"];
    assert_eq!(keys[0]["dataId"], "app.yaml", "{keys}");
    assert_eq!(keys[0]["md5"], nacelle_testkit::md5("v: 2\n"), "{keys}");

    // Every delivery of the hook is logged as delivered at its first attempt; the other
    // hook got none.
    let log = until_deliveries(&s.api, &admin, hook, "all delivered", |l| {
        l.len() == 7 && l.iter().all(|d| d["status"] == "delivered")
    })
    .await?;
    assert!(
        log.iter()
            .all(|d| d["attempts"] == 1 && d["lastCode"] == 200),
        "{log:?}"
    );
    assert!(
        log.iter().all(|d| d["body"]["dataId"] != "x.yaml"),
        "{log:?}"
    );
    assert!(deliveries(&s.api, &admin, other).await?.is_empty());

    // Removing the hook removes its log; nothing more is sent.
    let id = hook.to_string();
    let r = call(
        &s.api,
        &admin,
        Method::DELETE,
        WEBHOOKS,
        &[("id", id.as_str())],
        &[],
    )
    .await?;
    data(&r)?;
    let r = call(
        &s.api,
        &admin,
        Method::GET,
        DELIVERIES,
        &[("id", id.as_str())],
        &[],
    )
    .await?;
    assert_eq!(r.status, 404, "{}", r.body);
    Ok(())
}

/// Events by their kind.
fn by_kind(events: Vec<Value>) -> std::collections::HashMap<String, Value> {
    events
        .into_iter()
        .map(|e| (e["kind"].as_str().unwrap_or_default().to_string(), e))
        .collect()
}

/// A port nothing listens on (bound, then released), for a receiver that comes up later.
fn free_addr() -> TestResult<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

/// A receiver that is down when the events happen gets them once it is up — after the
/// server restarted in between: deliveries are durable. The log shows the attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_was_down_gets_the_events_after_a_restart() -> TestResult {
    let mut s = TestServer::start_with(secure).await?;
    let admin = prod(&s).await?;
    let addr = free_addr()?;
    let url = format!("http://{addr}/hook");
    let hook = add_hook(&s.api, &admin, &[("url", url.as_str())]).await?;
    for i in 0..3 {
        publish(&s.api, &admin, &format!("k{i}.yaml"), &format!("v: {i}\n")).await?;
    }
    // Every delivery was tried and refused: pending, with the error kept.
    let log = until_deliveries(&s.api, &admin, hook, "tried", |l| {
        l.len() == 3
            && l.iter()
                .all(|d| d["status"] == "pending" && d["attempts"].as_u64().unwrap_or(0) >= 1)
    })
    .await?;
    assert!(
        log.iter()
            .all(|d| d["lastError"].as_str().is_some_and(|e| !e.is_empty())),
        "{log:?}"
    );

    // The server restarts; the receiver comes up meanwhile.
    s.stop().await?;
    let mut rx = Receiver::bind(addr).await?;
    let server = nacelle::start(&settings_for(s.dir.path(), secure)).await?;
    let api = Api::new(server.http_addr)?;
    api.wait_ready().await?;
    let mut data_ids: Vec<String> = rx
        .signed(3)
        .await?
        .iter()
        .map(|e| e["dataId"].as_str().unwrap_or_default().to_string())
        .collect();
    data_ids.sort();
    assert_eq!(data_ids, vec!["k0.yaml", "k1.yaml", "k2.yaml"]);
    let r = api
        .http
        .post(api.url("/nacos/v1/auth/login"))
        .form(&[
            ("username", "nacos"),
            ("password", nacelle_testkit::server::ADMIN_PASSWORD),
        ])
        .send()
        .await?;
    let token = Reply::read(r).await?.json()?["accessToken"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let log = until_deliveries(&api, &token, hook, "delivered", |l| {
        l.iter().all(|d| d["status"] == "delivered")
    })
    .await?;
    assert!(
        log.iter()
            .all(|d| d["attempts"].as_u64().unwrap_or(0) >= 2 && d["lastCode"] == 200),
        "{log:?}"
    );
    server.shutdown().await?;
    Ok(())
}

/// A receiver answering 503 is retried until it answers 2xx; the log shows the 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_503_is_retried_until_it_recovers() -> TestResult {
    let s = TestServer::start_with(secure).await?;
    let admin = prod(&s).await?;
    let mut rx = Receiver::bind("127.0.0.1:0".parse()?).await?;
    rx.status.store(503, Ordering::SeqCst);
    let url = rx.url();
    let hook = add_hook(
        &s.api,
        &admin,
        &[("url", url.as_str()), ("events", "remove,publish")],
    )
    .await?;
    publish(&s.api, &admin, "a.yaml", "a: 1\n").await?;
    let log = until_deliveries(&s.api, &admin, hook, "refused with 503", |l| {
        l.first().is_some_and(|d| d["lastCode"] == 503)
    })
    .await?;
    assert_eq!(log[0]["status"], "pending", "{log:?}");
    assert_eq!(log[0]["lastError"], "HTTP 503", "{log:?}");
    rx.status.store(200, Ordering::SeqCst);
    let got = rx.signed(1).await?;
    assert_eq!(got[0]["dataId"], "a.yaml");
    let log = until_deliveries(&s.api, &admin, hook, "delivered", |l| {
        l.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await?;
    assert!(log[0]["attempts"].as_u64().unwrap_or(0) >= 2, "{log:?}");

    // Sent again on request: the same delivery (its id in the header), attempts reset.
    let delivery = log[0]["id"].as_i64().ok_or("no delivery id")?;
    let id = delivery.to_string();
    let r = call(
        &s.api,
        &admin,
        Method::POST,
        "/nacos/nacelle/v1/webhook/redeliver",
        &[("deliveryId", id.as_str())],
        &[],
    )
    .await?;
    data(&r)?;
    let again = rx.next().await?;
    assert_eq!(again.header("x-nacelle-delivery"), id);
    assert_eq!(again.json()?["dataId"], "a.yaml");
    until_deliveries(&s.api, &admin, hook, "redelivered", |l| {
        l[0]["status"] == "delivered" && l[0]["attempts"] == 1
    })
    .await?;
    // A change of the hook: a bad value is a 400 naming it; a good one is kept.
    let hook_id = hook.to_string();
    let bad = [("id", hook_id.as_str()), ("dataId", "a*b")];
    let r = call(&s.api, &admin, Method::PUT, WEBHOOKS, &bad, &[]).await?;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("dataId"), "{}", r.body);
    let off = [("id", hook_id.as_str()), ("enabled", "false")];
    let changed = data(&call(&s.api, &admin, Method::PUT, WEBHOOKS, &off, &[]).await?)?;
    assert_eq!(changed["enabled"], false, "{changed}");
    assert_eq!(changed["events"], json!(["remove", "publish"]), "{changed}");
    Ok(())
}

/// A webhook whose receiver accepts connections and never answers does not hold up
/// publishes: 200 of them all succeed while its deliveries hang. Not a test of timing: it
/// prints the time of the 200 publishes with no webhook and with that one
/// (docs/webhooks.md quotes the figures; `-- --nocapture` shows them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_with_a_hanging_receiver_measurement() -> TestResult {
    let s = TestServer::start_with(secure).await?;
    let admin = prod(&s).await?;
    let api = Api::with_token(s.addr, &admin)?;
    let run = |round: &'static str| {
        let api = api.clone();
        async move {
            let started = Instant::now();
            for i in 0..200 {
                api.publish(
                    "prod",
                    "G",
                    &format!("{round}-{i}.yaml"),
                    &format!("v: {i}"),
                )
                .await?;
            }
            anyhow::Ok(started.elapsed())
        }
    };
    let warm = run("warm").await?;
    let without = run("none").await?;
    // A receiver that accepts and never answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = hanging.local_addr()?;
    let _held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = hanging.accept().await {
            open.push(conn);
        }
    });
    let url = format!("http://{addr}/hook");
    add_hook(&s.api, &admin, &[("url", url.as_str())]).await?;
    let with = run("hook").await?;
    println!(
        "200 publishes: warm-up {warm:?}, no webhook {without:?}, webhook to a hanging receiver {with:?}"
    );
    Ok(())
}

/// Two nodes on one database (no authentication), one webhook: every event, whichever node
/// it happened on, is delivered exactly once — one attempt each, one POST each.
async fn two_nodes_deliver_each_event_once(backend: Backend) -> TestResult {
    let a = TestServer::start_on(backend).await?;
    let url = a.db.as_ref().map(|d| d.url.clone()).ok_or("no database")?;
    let b = TestServer::start_with_on(backend, |s| s.db = Some(url)).await?;
    let mut rx = Receiver::bind("127.0.0.1:0".parse()?).await?;
    let hook_url = rx.url();
    let r = a
        .http
        .post(a.url(WEBHOOKS))
        .form(&[("url", hook_url.as_str()), ("secret", SECRET)])
        .send()
        .await?;
    let hook = data(&Reply::read(r).await?)?["id"]
        .as_i64()
        .ok_or("no id")?;

    // Node b reads the webhooks every 2 s: publish probes on it until one arrives.
    let mut posts = Vec::new();
    let deadline = Instant::now() + SOON;
    'probe: loop {
        b.publish("", "G", "probe", &format!("p {posts:?}")).await?;
        let until = Instant::now() + Duration::from_millis(500);
        while let Ok(Some(got)) = tokio::time::timeout_at(until.into(), rx.got.recv()).await {
            let from_b = got.json()?["dataId"] == "probe";
            posts.push(got);
            if from_b {
                break 'probe;
            }
        }
        if Instant::now() > deadline {
            return Err("node b never fed the webhook".into());
        }
    }
    for i in 0..10 {
        a.publish("", "G", &format!("a-{i}"), "v").await?;
        b.publish("", "G", &format!("b-{i}"), "v").await?;
    }
    let log = until_deliveries(&a.api, "", hook, "all delivered", |l| {
        l.iter().filter(|d| d["body"]["dataId"] != "probe").count() == 20
            && l.iter().all(|d| d["status"] == "delivered")
    })
    .await?;
    // Everything recorded was received: the POSTs so far and those still in the channel.
    while let Ok(got) = rx.got.try_recv() {
        posts.push(got);
    }
    while posts.len() < log.len() {
        posts.push(rx.next().await?);
    }
    assert!(log.iter().all(|d| d["attempts"] == 1), "{log:?}");
    let ids: std::collections::HashSet<&str> = posts
        .iter()
        .map(|p| p.header("x-nacelle-delivery"))
        .collect();
    assert_eq!(ids.len(), posts.len(), "a delivery was POSTed twice");
    assert_eq!(
        posts.len(),
        log.len(),
        "POSTs {} for {} deliveries",
        posts.len(),
        log.len()
    );
    let mut keys: Vec<String> = posts
        .iter()
        .map(|p| Ok(p.json()?["dataId"].as_str().unwrap_or_default().to_string()))
        .collect::<TestResult<Vec<_>>>()?
        .into_iter()
        .filter(|k| k != "probe")
        .collect();
    keys.sort();
    let mut want: Vec<String> = (0..10)
        .flat_map(|i| [format!("a-{i}"), format!("b-{i}")])
        .collect();
    want.sort();
    assert_eq!(keys, want);
    drop(b);
    drop(a);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_two_nodes_deliver_each_event_once() -> TestResult {
    nacelle_testkit::run_on(Backend::MariaDb, two_nodes_deliver_each_event_once).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_nodes_deliver_each_event_once() -> TestResult {
    nacelle_testkit::run_on(Backend::Postgres, two_nodes_deliver_each_event_once).await
}
