//! One rule, every protocol: requests whose answers used to depend on the protocol (a
//! tagged read, a blank tag on delete, `betaIps` parsing, the listen-key limit, readiness
//! while loading and during shutdown, namespace ids, beta by IP, encryption, content size)
//! get the same answer over HTTP v1, HTTP v2, HTTP v3 (Nacos 3) and gRPC, because the service decides and the adapters only translate. And the
//! caller's IP cannot be forged: forwarded headers and a reported gRPC `clientIp` count only
//! from a trusted proxy.

mod common;

use std::time::Duration;

use common::{Msg, RawClient, RawExt, TestServer, SOON};
use nacelle_core::{Caller, ConfigKey, PageRequest, TrustedProxies};
use nacelle_grpc::GrpcOptions;
use nacelle_http::HttpOptions;
use nacelle_service::Limits;
use serde_json::{json, Value};

/// A gRPC server and an HTTP adapter over one service, a set-up raw gRPC client, and an
/// HTTP client.
struct Both {
    server: TestServer,
    base: String,
    _stop_http: tokio::sync::oneshot::Sender<()>,
    http: reqwest::Client,
    grpc: RawClient,
}

async fn both_with(
    limits: Limits,
    http_opts: HttpOptions,
    grpc: GrpcOptions,
) -> anyhow::Result<Both> {
    let server = TestServer::start_with_limits(grpc, limits).await?;
    let (base, stop) = server.start_http(http_opts).await?;
    let mut raw = server.raw().await?;
    raw.setup("127.0.0.1").await?;
    Ok(Both {
        server,
        base,
        _stop_http: stop,
        http: reqwest::Client::builder().timeout(SOON).build()?,
        grpc: raw,
    })
}

async fn both() -> anyhow::Result<Both> {
    both_with(
        Limits::default(),
        HttpOptions::default(),
        GrpcOptions::default(),
    )
    .await
}

impl Both {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn get(&self, path: &str, query: &[(&str, &str)]) -> anyhow::Result<(u16, String)> {
        let r = self.http.get(self.url(path)).query(query).send().await?;
        Ok((r.status().as_u16(), r.text().await?))
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> anyhow::Result<(u16, String)> {
        let mut req = self.http.request(method.clone(), self.url(path));
        req = if method == reqwest::Method::POST || method == reqwest::Method::PUT {
            req.form(form)
        } else {
            req.query(form)
        };
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await?;
        Ok((r.status().as_u16(), r.text().await?))
    }

    async fn query(&mut self, data_id: &str, tag: Option<&str>) -> anyhow::Result<Msg> {
        let mut body = json!({"dataId": data_id, "group": "G", "tenant": ""});
        if let Some(t) = tag {
            body["tag"] = json!(t);
        }
        self.grpc.call("ConfigQueryRequest", body).await
    }

    fn content(&self, data_id: &str) -> anyhow::Result<Option<String>> {
        let key = ConfigKey::parse(None, "G", data_id)?;
        Ok(self
            .server
            .service
            .get(&Caller::internal(), &key, None)?
            .map(|s| s.config.content_text().into_owned()))
    }
}

fn codes(m: &Msg) -> (Option<i64>, Option<i64>) {
    (m.int("resultCode"), m.int("errorCode"))
}

const V1: &str = "/nacos/v1/cs/configs";
const V2: &str = "/nacos/v2/cs/config";

#[tokio::test]
async fn a_tagged_read_is_not_found_on_every_protocol() -> anyhow::Result<()> {
    let mut b = both().await?;
    b.server.publish("", "G", "tagged", "formal").await?;

    // A tag no variant has: not found, everywhere.
    let (status, body) = b
        .get(V1, &[("dataId", "tagged"), ("group", "G"), ("tag", "t1")])
        .await?;
    assert_eq!((status, body.as_str()), (404, "config data not exist\n"));
    let (status, body) = b
        .get(V2, &[("dataId", "tagged"), ("group", "G"), ("tag", "t1")])
        .await?;
    assert_eq!(status, 404, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body)?["code"], json!(20004));
    let r = b.query("tagged", Some("t1")).await?;
    assert_eq!(codes(&r), (Some(500), Some(300)), "{:?}", r.body);

    // A blank tag means no tag: the formal config, everywhere.
    for blank in ["", "  "] {
        let (status, body) = b
            .get(V1, &[("dataId", "tagged"), ("group", "G"), ("tag", blank)])
            .await?;
        assert_eq!((status, body.as_str()), (200, "formal"), "v1 tag {blank:?}");
        let (status, body) = b
            .get(V2, &[("dataId", "tagged"), ("group", "G"), ("tag", blank)])
            .await?;
        assert_eq!(status, 200, "v2 tag {blank:?}: {body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body)?["data"],
            json!("formal")
        );
        let r = b.query("tagged", Some(blank)).await?;
        assert_eq!(r.str("content"), Some("formal"), "grpc tag {blank:?}");
    }

    // An invalid tag is bad input, everywhere.
    let (status, _) = b
        .get(V1, &[("dataId", "tagged"), ("group", "G"), ("tag", "a b")])
        .await?;
    assert_eq!(status, 400);
    let (status, _) = b
        .get(V2, &[("dataId", "tagged"), ("group", "G"), ("tag", "a b")])
        .await?;
    assert_eq!(status, 400);
    let r = b.query("tagged", Some("a b")).await?;
    assert_eq!(codes(&r), (Some(500), Some(400)), "{:?}", r.body);
    Ok(())
}

#[tokio::test]
async fn a_blank_tag_on_delete_removes_the_formal_config_on_every_protocol() -> anyhow::Result<()> {
    let mut b = both().await?;
    for (i, blank) in ["", " "].iter().enumerate() {
        let d1 = format!("del-v1-{i}");
        let d2 = format!("del-v2-{i}");
        let dg = format!("del-grpc-{i}");
        for d in [&d1, &d2, &dg] {
            b.server.publish("", "G", d, "x").await?;
        }
        let (s, _) = b
            .send(
                reqwest::Method::DELETE,
                V1,
                &[("dataId", &d1), ("group", "G"), ("tag", blank)],
                &[],
            )
            .await?;
        assert_eq!(s, 200);
        let (s, _) = b
            .send(
                reqwest::Method::DELETE,
                V2,
                &[("dataId", &d2), ("group", "G"), ("tag", blank)],
                &[],
            )
            .await?;
        assert_eq!(s, 200);
        let r = b
            .grpc
            .call(
                "ConfigRemoveRequest",
                json!({"dataId": dg, "group": "G", "tenant": "", "tag": blank}),
            )
            .await?;
        assert_eq!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
        for d in [&d1, &d2, &dg] {
            assert_eq!(
                b.content(d)?,
                None,
                "{d} with tag {blank:?} was not removed"
            );
        }
    }
    // A real tag removes only that tag variant (none here), never the formal config, alike.
    b.server.publish("", "G", "kept", "x").await?;
    for path in [V1, V2] {
        let (s, body) = b
            .send(
                reqwest::Method::DELETE,
                path,
                &[("dataId", "kept"), ("group", "G"), ("tag", "t")],
                &[],
            )
            .await?;
        assert_eq!(s, 200, "{path}: {body}");
    }
    let r = b
        .grpc
        .call(
            "ConfigRemoveRequest",
            json!({"dataId": "kept", "group": "G", "tag": "t"}),
        )
        .await?;
    assert_eq!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
    assert_eq!(b.content("kept")?.as_deref(), Some("x"));
    Ok(())
}

#[tokio::test]
async fn beta_ips_are_parsed_alike() -> anyhow::Result<()> {
    let mut b = both().await?;
    // A list with no address in it is no beta: a formal publish, over both protocols.
    let (s, body) = b
        .send(
            reqwest::Method::POST,
            V1,
            &[("dataId", "b-http"), ("group", "G"), ("content", "c")],
            &[("betaIps", " , ")],
        )
        .await?;
    assert_eq!(s, 200, "{body}");
    let r = b
        .grpc
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "b-grpc", "group": "G", "content": "c",
                   "additionMap": {"betaIps": " , "}}),
        )
        .await?;
    assert_eq!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
    assert_eq!(b.content("b-http")?.as_deref(), Some("c"));
    assert_eq!(b.content("b-grpc")?.as_deref(), Some("c"));

    // A real list is a beta publish. Of a key without a formal config: refused alike
    // (not found), nothing written.
    let beta = "1.1.1.1, ,2.2.2.2";
    let (s, _) = b
        .send(
            reqwest::Method::POST,
            V1,
            &[("dataId", "b2"), ("group", "G"), ("content", "c")],
            &[("betaIps", beta)],
        )
        .await?;
    assert_eq!(s, 404);
    let r = b
        .grpc
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "b2", "group": "G", "content": "c",
                   "additionMap": {"betaIps": beta}}),
        )
        .await?;
    assert_eq!(codes(&r), (Some(500), Some(300)), "{:?}", r.body);
    assert_eq!(b.content("b2")?, None);
    // An entry that is neither an address nor a CIDR: 400 alike.
    for (data_id, ips) in [("b-http", "1.1.1.1,nope"), ("b-grpc", "1.1.1.1,nope")] {
        let (s, _) = b
            .send(
                reqwest::Method::POST,
                V1,
                &[("dataId", data_id), ("group", "G"), ("content", "c2")],
                &[("betaIps", ips)],
            )
            .await?;
        assert_eq!(s, 400);
        let r = b
            .grpc
            .call(
                "ConfigPublishRequest",
                json!({"dataId": data_id, "group": "G", "content": "c2",
                       "additionMap": {"betaIps": ips}}),
            )
            .await?;
        assert_eq!(codes(&r), (Some(500), Some(400)), "{:?}", r.body);
    }
    // Of a present key: a beta alike; the formal config is unchanged, the beta listed.
    for data_id in ["b-http", "b-grpc"] {
        b.server.publish("", "G", data_id, "formal").await?;
    }
    let (s, body) = b
        .send(
            reqwest::Method::POST,
            V1,
            &[("dataId", "b-http"), ("group", "G"), ("content", "beta")],
            &[("betaIps", beta)],
        )
        .await?;
    assert_eq!(s, 200, "{body}");
    let r = b
        .grpc
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "b-grpc", "group": "G", "content": "beta",
                   "additionMap": {"betaIps": beta}}),
        )
        .await?;
    assert_eq!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
    for data_id in ["b-http", "b-grpc"] {
        assert_eq!(b.content(data_id)?.as_deref(), Some("formal"));
        let key = ConfigKey::parse(None, "G", data_id)?;
        let listed = b.server.service.beta_of(&Caller::internal(), &key)?;
        assert_eq!(
            listed.map(|l| l.ips),
            Some(vec!["1.1.1.1".to_string(), "2.2.2.2".to_string()]),
            "{data_id}"
        );
    }
    Ok(())
}

fn records(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("{k}\u{2}G\u{2}\u{1}"))
        .collect()
}

#[tokio::test]
async fn the_listen_key_limit_means_the_same_on_both_protocols() -> anyhow::Result<()> {
    let limits = Limits {
        max_listen_keys: 3,
        ..Limits::default()
    };
    let mut b = both_with(limits, HttpOptions::default(), GrpcOptions::default()).await?;
    let poll = |b: &Both, raw: String| {
        let req = b
            .http
            .post(b.url("/nacos/v1/cs/configs/listener"))
            .form(&[("Listening-Configs", raw)]);
        async move {
            let r = req.send().await?;
            anyhow::Ok((r.status().as_u16(), r.text().await?))
        }
    };
    const OVER: &str = "too many listening configs, over 3";

    // HTTP: a poll is one listener; its distinct keys count (a repeated key once).
    let (s, body) = poll(&b, records(&["a", "b", "c", "d"])).await?;
    assert_eq!(s, 400);
    assert!(body.contains(OVER), "{body}");
    let (s, body) = poll(&b, records(&["a", "b", "c", "a"])).await?;
    assert_eq!(s, 200, "{body}");

    // gRPC: a connection is one listener, over all its listen requests.
    let ctx = |d: &str| (d.to_string(), "G", "", "");
    let four: Vec<_> = ["a", "b", "c", "d"].iter().map(|d| ctx(d)).collect();
    let four: Vec<(&str, &str, &str, &str)> = four
        .iter()
        .map(|(d, g, t, m)| (d.as_str(), *g, *t, *m))
        .collect();
    let r = b.grpc.listen(&four, true).await?;
    assert_eq!(codes(&r), (Some(500), Some(400)), "{:?}", r.body);
    assert!(
        r.str("message").is_some_and(|m| m.contains(OVER)),
        "{:?}",
        r.body
    );
    assert_eq!(b.server.stats.snapshot().listened_keys, 0, "all or nothing");

    let r = b.grpc.listen(&four[..2], true).await?;
    assert_eq!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
    let r = b.grpc.listen(&four[2..], true).await?;
    assert_eq!(codes(&r), (Some(500), Some(400)), "{:?}", r.body);
    assert!(
        r.str("message").is_some_and(|m| m.contains(OVER)),
        "{:?}",
        r.body
    );
    // Listening again to keys already held is not over the limit.
    let r = b.grpc.listen(&[four[0], four[1], four[2]], true).await?;
    assert_eq!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
    assert_eq!(b.server.stats.snapshot().listened_keys, 3);
    Ok(())
}

/// An HTTP request case: name, method, path, parameters.
type Case<'a> = (&'a str, reqwest::Method, &'a str, Vec<(&'a str, &'a str)>);

/// Every kind of operation over HTTP v1, v2 and gRPC answers "not ready" (503 / 300).
async fn assert_not_ready_everywhere(b: &mut Both, when: &str) -> anyhow::Result<()> {
    use reqwest::Method;
    let key = [("dataId", "r"), ("group", "G")];
    let cases: Vec<Case> = vec![
        ("v1 get", Method::GET, V1, key.to_vec()),
        (
            "v1 beta query",
            Method::GET,
            V1,
            [&key[..], &[("beta", "true")]].concat(),
        ),
        (
            "v1 search",
            Method::GET,
            V1,
            vec![("search", "blur"), ("dataId", "*")],
        ),
        (
            "v1 publish",
            Method::POST,
            V1,
            [&key[..], &[("content", "c")]].concat(),
        ),
        ("v1 delete", Method::DELETE, V1, key.to_vec()),
        (
            "v1 delete ids",
            Method::DELETE,
            V1,
            vec![("delType", "ids"), ("ids", "1")],
        ),
        (
            "v1 stop beta",
            Method::DELETE,
            V1,
            [&key[..], &[("beta", "true")]].concat(),
        ),
        ("v2 get", Method::GET, V2, key.to_vec()),
        (
            "v2 publish",
            Method::POST,
            V2,
            [&key[..], &[("content", "c")]].concat(),
        ),
        ("v2 delete", Method::DELETE, V2, key.to_vec()),
        (
            "long poll",
            Method::POST,
            "/nacos/v1/cs/configs/listener",
            vec![("Listening-Configs", "r\u{2}G\u{2}\u{1}")],
        ),
        (
            "listeners of a key",
            Method::GET,
            "/nacos/v1/cs/configs/listener",
            key.to_vec(),
        ),
        (
            "keys of an ip",
            Method::GET,
            "/nacos/v1/cs/listener",
            vec![("ip", "127.0.0.1")],
        ),
        ("history", Method::GET, "/nacos/v1/cs/history", key.to_vec()),
        (
            "history entry",
            Method::GET,
            "/nacos/v1/cs/history",
            [&key[..], &[("nid", "1")]].concat(),
        ),
        (
            "history previous",
            Method::GET,
            "/nacos/v1/cs/history/previous",
            [&key[..], &[("id", "1")]].concat(),
        ),
        (
            "namespace configs",
            Method::GET,
            "/nacos/v1/cs/history/configs",
            vec![("tenant", "")],
        ),
        (
            "namespaces",
            Method::GET,
            "/nacos/v1/console/namespaces",
            vec![],
        ),
        (
            "namespace",
            Method::GET,
            "/nacos/v1/console/namespaces",
            vec![("show", "all"), ("namespaceId", "dev")],
        ),
        (
            "namespace exists",
            Method::GET,
            "/nacos/v1/console/namespaces",
            vec![
                ("checkNamespaceIdExist", "true"),
                ("customNamespaceId", "dev"),
            ],
        ),
        (
            "create namespace",
            Method::POST,
            "/nacos/v1/console/namespaces",
            vec![("customNamespaceId", "n1"), ("namespaceName", "n")],
        ),
        (
            "update namespace",
            Method::PUT,
            "/nacos/v1/console/namespaces",
            vec![("namespace", "n1"), ("namespaceShowName", "m")],
        ),
        (
            "delete namespace",
            Method::DELETE,
            "/nacos/v1/console/namespaces",
            vec![("namespaceId", "n1")],
        ),
        // Auth administration passes the same guard.
        (
            "users",
            Method::GET,
            "/nacos/v1/auth/users",
            vec![("pageNo", "1"), ("pageSize", "10")],
        ),
        (
            "create user",
            Method::POST,
            "/nacos/v1/auth/users",
            vec![("username", "u1"), ("password", "p1")],
        ),
        (
            "change password",
            Method::PUT,
            "/nacos/v1/auth/users",
            vec![("username", "u1"), ("newPassword", "p2")],
        ),
        (
            "delete user",
            Method::DELETE,
            "/nacos/v1/auth/users",
            vec![("username", "u1")],
        ),
        (
            "roles",
            Method::GET,
            "/nacos/v1/auth/roles",
            vec![("pageNo", "1"), ("pageSize", "10")],
        ),
        (
            "add role",
            Method::POST,
            "/nacos/v1/auth/roles",
            vec![("role", "r1"), ("username", "u1")],
        ),
        (
            "permissions",
            Method::GET,
            "/nacos/v1/auth/permissions",
            vec![("pageNo", "1"), ("pageSize", "10")],
        ),
        (
            "add permission",
            Method::POST,
            "/nacos/v1/auth/permissions",
            vec![("role", "r1"), ("resource", ":*:*"), ("action", "r")],
        ),
        (
            "login",
            Method::POST,
            "/nacos/v1/auth/login",
            vec![("username", "nacos"), ("password", "p1")],
        ),
        (
            "create admin",
            Method::POST,
            "/nacos/v1/auth/users/admin",
            vec![("password", "p1")],
        ),
    ];
    let mut wrong = Vec::new();
    for (name, method, path, form) in cases {
        let (status, body) = b.send(method, path, &form, &[]).await?;
        if status != 503 {
            wrong.push(format!("{when}: {name}: {status} {body}"));
        }
    }
    for (name, type_name, body) in [
        (
            "grpc query",
            "ConfigQueryRequest",
            json!({"dataId": "r", "group": "G"}),
        ),
        (
            "grpc publish",
            "ConfigPublishRequest",
            json!({"dataId": "r", "group": "G", "content": "c"}),
        ),
        (
            "grpc remove",
            "ConfigRemoveRequest",
            json!({"dataId": "r", "group": "G"}),
        ),
        (
            "grpc listen",
            "ConfigBatchListenRequest",
            json!({"listen": true, "configListenContexts": [{"dataId": "r", "group": "G", "md5": ""}]}),
        ),
    ] {
        let r = b.grpc.call(type_name, body).await?;
        if r.int("errorCode") != Some(300) {
            wrong.push(format!("{when}: {name}: {:?}", r.body));
        }
    }
    assert!(
        wrong.is_empty(),
        "answered although not ready:\n{}",
        wrong.join("\n")
    );
    Ok(())
}

#[tokio::test]
async fn every_operation_kind_waits_for_the_cache_and_stops_at_shutdown() -> anyhow::Result<()> {
    // While loading (the service was never loaded). The gRPC client cannot register yet,
    // so it is set up on a loaded twin and pointed at nothing here: only HTTP is checked
    // while loading, and both protocols during shutdown.
    let loading = TestServer::start_unloaded(GrpcOptions::default()).await?;
    let (base, _stop) = loading.start_http(HttpOptions::default()).await?;
    let http = reqwest::Client::builder().timeout(SOON).build()?;
    for (path, query) in [
        (
            "/nacos/v1/cs/history",
            vec![("dataId", "r"), ("group", "G")],
        ),
        ("/nacos/v1/console/namespaces", vec![]),
        (
            "/nacos/v1/cs/configs",
            vec![("dataId", "r"), ("group", "G")],
        ),
    ] {
        let r = http
            .get(format!("{base}{path}"))
            .query(&query)
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), 503, "{path} while loading");
    }

    let mut b = both().await?;
    b.server.publish("", "G", "r", "v").await?;
    // Ready: the same requests are served.
    let (s, _) = b.get("/nacos/v1/console/namespaces", &[]).await?;
    assert_eq!(s, 200);
    b.server.service.begin_shutdown();
    assert_not_ready_everywhere(&mut b, "during shutdown").await?;

    // The service refuses its operations directly, too (what the console will call).
    let svc = &b.server.service;
    let caller = Caller::internal();
    let key = ConfigKey::parse(None, "G", "r")?;
    let page = PageRequest {
        page_no: 1,
        page_size: 10,
    };
    assert!(svc.history(&caller, &key, page).await.is_err());
    assert!(svc.namespaces(&caller).is_err());
    assert!(svc.access().admin(&caller).is_err());
    assert!(svc.watch(&caller).is_err());
    Ok(())
}

#[tokio::test]
async fn forwarded_headers_count_only_from_a_trusted_proxy() -> anyhow::Result<()> {
    let spoof = [
        ("X-Real-IP", "7.7.7.7"),
        ("X-Forwarded-For", "6.6.6.6, 5.5.5.5"),
    ];
    let publish_and_ip = |b: &Both, d: &'static str| {
        let b_url = b.url(V1);
        let http = b.http.clone();
        async move {
            let mut req =
                http.post(&b_url)
                    .form(&[("dataId", d), ("group", "G"), ("content", "c")]);
            for (k, v) in spoof {
                req = req.header(k, v);
            }
            anyhow::ensure!(req.send().await?.status().is_success());
            let r = http
                .get(&b_url)
                .query(&[("dataId", d), ("group", "G"), ("show", "all")])
                .send()
                .await?;
            let v: Value = r.json().await?;
            anyhow::Ok(v["createIp"].as_str().unwrap_or_default().to_string())
        }
    };

    // Not trusted (the default): the socket address, whatever the headers say.
    let b = both().await?;
    assert_eq!(publish_and_ip(&b, "untrusted").await?, "127.0.0.1");
    // A held poll from the same client is listed under its socket address only.
    let poll = {
        let mut req = b
            .http
            .post(b.url("/nacos/v1/cs/configs/listener"))
            .header("Long-Pulling-Timeout", "30000")
            .form(&[("Listening-Configs", records(&["held"]))]);
        for (k, v) in spoof {
            req = req.header(k, v);
        }
        tokio::spawn(req.send())
    };
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let (_, body) = b
            .get("/nacos/v1/cs/listener", &[("ip", "127.0.0.1")])
            .await?;
        if body.contains("held+G") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the poll never showed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, body) = b.get("/nacos/v1/cs/listener", &[("ip", "7.7.7.7")]).await?;
    assert!(!body.contains("held"), "a forged IP was believed: {body}");
    poll.abort();

    // Trusted: the proxy's header names the client.
    let trusted = HttpOptions {
        trusted_proxies: TrustedProxies::parse_list("127.0.0.0/8")?,
        ..HttpOptions::default()
    };
    let b = both_with(Limits::default(), trusted, GrpcOptions::default()).await?;
    assert_eq!(publish_and_ip(&b, "trusted").await?, "7.7.7.7");
    Ok(())
}

#[tokio::test]
async fn a_reported_grpc_client_ip_counts_only_when_it_is_true_or_trusted() -> anyhow::Result<()> {
    async fn src_ip_of(server: &TestServer, reported: &str, d: &str) -> anyhow::Result<String> {
        let mut c = server.raw().await?;
        c.setup(reported).await?;
        let r = c
            .call(
                "ConfigPublishRequest",
                json!({"dataId": d, "group": "G", "content": "c"}),
            )
            .await?;
        anyhow::ensure!(codes(&r) == (Some(200), Some(0)), "{:?}", r.body);
        let key = ConfigKey::parse(None, "G", d)?;
        let stored = server
            .service
            .get(&Caller::internal(), &key, None)?
            .ok_or_else(|| anyhow::anyhow!("not stored"))?;
        Ok(stored.config.source().src_ip.clone())
    }
    let plain = TestServer::start(GrpcOptions::default()).await?;
    assert_eq!(src_ip_of(&plain, "10.1.1.1", "forged").await?, "127.0.0.1");
    assert_eq!(src_ip_of(&plain, "127.0.0.1", "true").await?, "127.0.0.1");
    assert_eq!(src_ip_of(&plain, "", "none").await?, "127.0.0.1");

    let behind_proxy = TestServer::start(GrpcOptions {
        trusted_proxies: TrustedProxies::parse_list("127.0.0.1")?,
        ..GrpcOptions::default()
    })
    .await?;
    assert_eq!(
        src_ip_of(&behind_proxy, "10.1.1.1", "relayed").await?,
        "10.1.1.1"
    );
    Ok(())
}

#[tokio::test]
async fn namespace_ids_follow_the_tenant_rules() -> anyhow::Result<()> {
    use reqwest::Method;
    let mut b = both().await?;
    const NS: &str = "/nacos/v1/console/namespaces";
    // An id a client may publish into can be created, and its configs are counted.
    let (s, body) = b
        .send(
            Method::POST,
            NS,
            &[("customNamespaceId", "team.a:1"), ("namespaceName", "A")],
            &[],
        )
        .await?;
    assert_eq!(s, 200, "{body}");
    let r = b
        .grpc
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "d", "group": "G", "tenant": "team.a:1", "content": "c"}),
        )
        .await?;
    assert_eq!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
    let (s, body) = b
        .get(NS, &[("show", "all"), ("namespaceId", "team.a:1")])
        .await?;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body)?["configCount"],
        json!(1)
    );

    // Words that mean the default namespace cannot name a custom one.
    for reserved in ["null", "public"] {
        let (s, body) = b
            .send(
                Method::POST,
                NS,
                &[("customNamespaceId", reserved), ("namespaceName", "x")],
                &[],
            )
            .await?;
        assert_eq!(s, 400, "{reserved}: {body}");
    }
    // What no tenant may be, no namespace id may be — on every protocol.
    let (s, _) = b
        .send(
            Method::POST,
            NS,
            &[("customNamespaceId", "a b"), ("namespaceName", "x")],
            &[],
        )
        .await?;
    assert_eq!(s, 400);
    let (s, _) = b
        .send(
            Method::POST,
            V1,
            &[
                ("dataId", "d"),
                ("group", "G"),
                ("tenant", "a b"),
                ("content", "c"),
            ],
            &[],
        )
        .await?;
    assert_eq!(s, 400);
    let (s, _) = b
        .send(
            Method::POST,
            V2,
            &[
                ("dataId", "d"),
                ("group", "G"),
                ("namespaceId", "a b"),
                ("content", "c"),
            ],
            &[],
        )
        .await?;
    assert_eq!(s, 400);
    let r = b
        .grpc
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "d", "group": "G", "tenant": "a b", "content": "c"}),
        )
        .await?;
    assert_eq!(codes(&r), (Some(500), Some(400)), "{:?}", r.body);
    Ok(())
}

const V3_ADMIN: &str = "/nacos/v3/admin/cs/config";
const V3_CLIENT: &str = "/nacos/v3/client/cs/config";

/// The `data` of a v3 answer with code 0.
fn v3_data(status: u16, body: &str) -> anyhow::Result<Value> {
    anyhow::ensure!(status == 200, "{status}: {body}");
    let v: Value = serde_json::from_str(body)?;
    anyhow::ensure!(v["code"] == 0, "{body}");
    Ok(v["data"].clone())
}

#[tokio::test]
async fn v3_parses_beta_ips_as_the_other_protocols() -> anyhow::Result<()> {
    use reqwest::Method;
    let b = both().await?;
    let form =
        |d: &'static str, c: &'static str| [("dataId", d), ("groupName", "G"), ("content", c)];
    // No address in the list: a formal publish.
    let (s, body) = b
        .send(
            Method::POST,
            V3_ADMIN,
            &form("b-v3", "c"),
            &[("betaIps", " , ")],
        )
        .await?;
    v3_data(s, &body)?;
    assert_eq!(b.content("b-v3")?.as_deref(), Some("c"));
    // A beta of a key without a formal config: not found, as over v1 (404) and gRPC.
    let (s, body) = b
        .send(
            Method::POST,
            V3_ADMIN,
            &form("b3", "c"),
            &[("betaIps", "1.1.1.1")],
        )
        .await?;
    assert_eq!(s, 404, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body)?["code"], 20004);
    assert_eq!(b.content("b3")?, None);
    // An entry that is no address: 400 with the same reason as v2.
    let (s3, body3) = b
        .send(
            Method::POST,
            V3_ADMIN,
            &form("b-v3", "c2"),
            &[("betaIps", "1.1.1.1,nope")],
        )
        .await?;
    let (s2, body2) = b
        .send(
            Method::POST,
            V2,
            &[("dataId", "b-v3"), ("group", "G"), ("content", "c2")],
            &[("betaIps", "1.1.1.1,nope")],
        )
        .await?;
    assert_eq!((s3, s2), (400, 400), "{body3} {body2}");
    let (v3, v2): (Value, Value) = (serde_json::from_str(&body3)?, serde_json::from_str(&body2)?);
    assert_eq!(v3, v2);
    assert_eq!(b.content("b-v3")?.as_deref(), Some("c"));
    Ok(())
}

#[tokio::test]
async fn a_beta_for_the_callers_ip_is_served_on_every_protocol() -> anyhow::Result<()> {
    use reqwest::Method;
    let mut b = both().await?;
    b.server.publish("", "G", "beta-all", "formal").await?;
    // Released to this host's IP over v3.
    let (s, body) = b
        .send(
            Method::POST,
            V3_ADMIN,
            &[
                ("dataId", "beta-all"),
                ("groupName", "G"),
                ("content", "beta"),
            ],
            &[("betaIps", "127.0.0.1")],
        )
        .await?;
    v3_data(s, &body)?;
    let (s, v1) = b.get(V1, &[("dataId", "beta-all"), ("group", "G")]).await?;
    assert_eq!((s, v1.as_str()), (200, "beta"));
    let (s, v2) = b.get(V2, &[("dataId", "beta-all"), ("group", "G")]).await?;
    assert_eq!(
        serde_json::from_str::<Value>(&v2)?["data"],
        "beta",
        "{s} {v2}"
    );
    let r = b.query("beta-all", None).await?;
    assert_eq!(r.str("content"), Some("beta"), "{:?}", r.body);
    let (s, v3) = b
        .get(V3_CLIENT, &[("dataId", "beta-all"), ("groupName", "G")])
        .await?;
    let v3 = v3_data(s, &v3)?;
    assert_eq!(v3["content"], "beta");
    assert_eq!(v3["beta"], true);
    assert_eq!(v3["md5"].as_str(), r.str("md5"));
    assert_eq!(Some(v3["beta"].clone()), r.body.get("beta").cloned());
    // Stopped over v3: the formal content everywhere.
    let (s, body) = b
        .send(
            Method::DELETE,
            &format!("{V3_ADMIN}/beta"),
            &[("dataId", "beta-all"), ("groupName", "G")],
            &[],
        )
        .await?;
    v3_data(s, &body)?;
    let (_, v1) = b.get(V1, &[("dataId", "beta-all"), ("group", "G")]).await?;
    assert_eq!(v1, "formal");
    let r = b.query("beta-all", None).await?;
    assert_eq!(r.str("content"), Some("formal"));
    let (s, v3) = b
        .get(V3_CLIENT, &[("dataId", "beta-all"), ("groupName", "G")])
        .await?;
    assert_eq!(v3_data(s, &v3)?["beta"], false);
    Ok(())
}

#[tokio::test]
async fn v3_serves_encrypted_configs_as_grpc_and_v1_do() -> anyhow::Result<()> {
    use reqwest::Method;
    let mut b = both().await?;
    let plain = "password: s3cret\n";
    let (s, body) = b
        .send(
            Method::POST,
            V3_ADMIN,
            &[
                ("dataId", "cipher-aes-db"),
                ("groupName", "G"),
                ("content", plain),
            ],
            &[],
        )
        .await?;
    v3_data(s, &body)?;
    // The client API is gRPC's query: ciphertext and data key.
    let r = b.query("cipher-aes-db", None).await?;
    let (s, client) = b
        .get(
            V3_CLIENT,
            &[("dataId", "cipher-aes-db"), ("groupName", "G")],
        )
        .await?;
    let client = v3_data(s, &client)?;
    assert_eq!(client["content"].as_str(), r.str("content"));
    assert_eq!(
        client["encryptedDataKey"].as_str(),
        r.str("encryptedDataKey")
    );
    assert_ne!(client["content"], plain);
    // The admin API is v1's `show=all`: plaintext, the same data key.
    let (_, v1) = b
        .get(
            V1,
            &[("dataId", "cipher-aes-db"), ("group", "G"), ("show", "all")],
        )
        .await?;
    let v1: Value = serde_json::from_str(&v1)?;
    let (s, admin) = b
        .get(V3_ADMIN, &[("dataId", "cipher-aes-db"), ("groupName", "G")])
        .await?;
    let admin = v3_data(s, &admin)?;
    assert_eq!(admin["content"], plain);
    assert_eq!(admin["content"], v1["content"]);
    assert_eq!(admin["encryptedDataKey"], v1["encryptedDataKey"]);
    assert_eq!(
        admin["encryptedDataKey"].as_str(),
        r.str("encryptedDataKey")
    );
    Ok(())
}

#[tokio::test]
async fn v3_refuses_over_long_content_as_the_other_protocols() -> anyhow::Result<()> {
    use reqwest::Method;
    let limits = Limits {
        max_content_bytes: 16,
        ..Limits::default()
    };
    let mut b = both_with(limits, HttpOptions::default(), GrpcOptions::default()).await?;
    let big = "x".repeat(17);
    let (s1, _) = b
        .send(
            Method::POST,
            V1,
            &[("dataId", "big"), ("group", "G"), ("content", &big)],
            &[],
        )
        .await?;
    let (s3, body3) = b
        .send(
            Method::POST,
            V3_ADMIN,
            &[("dataId", "big"), ("groupName", "G"), ("content", &big)],
            &[],
        )
        .await?;
    assert_eq!((s1, s3), (413, 413), "{body3}");
    assert_eq!(serde_json::from_str::<Value>(&body3)?["code"], 20002);
    let r = b
        .grpc
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "big", "group": "G", "content": big}),
        )
        .await?;
    assert_ne!(codes(&r), (Some(200), Some(0)), "{:?}", r.body);
    assert_eq!(b.content("big")?, None);
    Ok(())
}
