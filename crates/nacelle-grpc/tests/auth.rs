//! The auth matrix: every kind of bad credential, over HTTP v1, HTTP v2 and gRPC, for
//! reads, writes, listening, history, namespaces and admin calls — each refused with
//! Nacos's code and message and without a byte of config data — and the allowed calls
//! passing. One service decides; the adapters only carry the credentials to it.
//! Also: login throttling per (user, address) and per address.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::{Msg, RawClient, RawExt, TestServer, SOON};
use nacelle_core::Caller;
use nacelle_grpc::GrpcOptions;
use nacelle_http::HttpOptions;
use nacelle_service::auth::{jwt, AuthConfig};
use serde_json::{json, Value};

type TestResult = anyhow::Result<()>;

/// base64 of 32 bytes: the token secret of the test server.
const SECRET: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const SECRET_BYTES: &[u8] = b"0123456789abcdef0123456789abcdef";
const ADMIN_PASSWORD: &str = "admin-password-1";
/// Content no refused answer may carry.
const SECRET_CONTENT: &str = "db.password=hunter2";

struct Env {
    server: TestServer,
    base: String,
    _stop_http: tokio::sync::oneshot::Sender<()>,
    http: reqwest::Client,
}

/// A server with auth on; users `nacos` (admin), `dev` (rw in namespace `dev`), `reader`
/// (r in `dev`), `gone` (deleted after its login) and `moved` (password changed after its
/// login). Returns the tokens taken before the deletion and the change.
async fn env() -> anyhow::Result<(Env, Tokens)> {
    let server = TestServer::start(GrpcOptions::default()).await?;
    let svc = &server.service;
    svc.access().configure_auth(AuthConfig::on(SECRET, 18_000)?);
    svc.access()
        .ensure_initial_admin(Some(ADMIN_PASSWORD))
        .await?;
    let (base, stop) = server.start_http(HttpOptions::default()).await?;
    let env = Env {
        server,
        base,
        _stop_http: stop,
        http: reqwest::Client::builder().timeout(SOON).build()?,
    };
    let admin = env.login("nacos", ADMIN_PASSWORD).await?;
    for (user, role, resource, action) in [
        ("dev", "devs", "dev:*:*", "rw"),
        ("reader", "readers", "dev:*:*", "r"),
        ("gone", "gones", "*:*:*", "rw"),
        ("moved", "moveds", "*:*:*", "rw"),
        // The default namespace as Nacos 3 grants it, and as 2.x does.
        ("pub3", "pub3s", "public:*:*", "rw"),
        ("pub2", "pub2s", ":*:*", "rw"),
    ] {
        env.admin_call(
            &admin,
            reqwest::Method::POST,
            "/nacos/v1/auth/users",
            &[
                ("username", user),
                ("password", &format!("{user}-password")),
            ],
        )
        .await?;
        env.admin_call(
            &admin,
            reqwest::Method::POST,
            "/nacos/v1/auth/roles",
            &[("role", role), ("username", user)],
        )
        .await?;
        env.admin_call(
            &admin,
            reqwest::Method::POST,
            "/nacos/v1/auth/permissions",
            &[("role", role), ("resource", resource), ("action", action)],
        )
        .await?;
    }
    env.admin_call(
        &admin,
        reqwest::Method::POST,
        "/nacos/v1/console/namespaces",
        &[("customNamespaceId", "dev"), ("namespaceName", "dev")],
    )
    .await?;
    for ns in ["", "dev"] {
        env.server
            .publish(ns, "G", "app.properties", SECRET_CONTENT)
            .await?;
    }
    let tokens = Tokens {
        dev: env.login("dev", "dev-password").await?,
        reader: env.login("reader", "reader-password").await?,
        gone: env.login("gone", "gone-password").await?,
        moved: env.login("moved", "moved-password").await?,
        pub3: env.login("pub3", "pub3-password").await?,
        pub2: env.login("pub2", "pub2-password").await?,
        admin,
    };
    env.admin_call(
        &tokens.admin,
        reqwest::Method::DELETE,
        "/nacos/v1/auth/users",
        &[("username", "gone")],
    )
    .await?;
    env.admin_call(
        &tokens.admin,
        reqwest::Method::PUT,
        "/nacos/v1/auth/users",
        &[("username", "moved"), ("newPassword", "moved-password-2")],
    )
    .await?;
    Ok((env, tokens))
}

struct Tokens {
    admin: String,
    dev: String,
    reader: String,
    gone: String,
    moved: String,
    /// Granted `public:*:*` (Nacos 3's spelling of the default namespace).
    pub3: String,
    /// Granted `:*:*` (Nacos 2's).
    pub2: String,
}

impl Env {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn login(&self, user: &str, password: &str) -> anyhow::Result<String> {
        let r = self
            .http
            .post(self.url("/nacos/v1/auth/login"))
            .query(&[("username", user), ("password", password)])
            .send()
            .await?;
        anyhow::ensure!(r.status() == 200, "login of {user}: {}", r.status());
        let header = r
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body: Value = r.json().await?;
        let token = body["accessToken"].as_str().unwrap_or_default().to_string();
        assert_eq!(header, Some(format!("Bearer {token}")));
        assert_eq!(body["username"], user);
        assert!(body["tokenTtl"].as_i64().unwrap_or(0) >= 17_999);
        Ok(token)
    }

    async fn admin_call(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        params: &[(&str, &str)],
    ) -> anyhow::Result<Value> {
        let r = self
            .http
            .request(method, self.url(path))
            .bearer_auth(token)
            .query(params)
            .send()
            .await?;
        let status = r.status();
        let text = r.text().await?;
        anyhow::ensure!(status == 200, "{path} {params:?}: {status} {text}");
        Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

/// How a request carries its credentials.
#[derive(Debug, Clone)]
enum Cred {
    None,
    Token(String),
    /// `username` + `password` parameters (the Node client's way).
    Password(&'static str, &'static str),
    /// No credentials, but `User-Agent: Nacos-Server` (CVE-2021-29441's bypass).
    NacosServerAgent,
    /// No credentials, but forwarded headers naming the loopback address.
    Forwarded,
}

/// One protocol operation.
#[derive(Debug, Clone, Copy)]
enum Op {
    Read,
    Write,
    Listen,
}

/// Calls `op` on `ns` over HTTP (`v2` or v1) with `cred`: (status, body).
async fn http_op(
    env: &Env,
    v2: bool,
    op: Op,
    ns: &str,
    cred: &Cred,
) -> anyhow::Result<(u16, String)> {
    http_op_with(&env.http, env, v2, op, ns, cred).await
}

/// [`http_op`] with a client of its own (from another source address).
async fn http_op_with(
    http: &reqwest::Client,
    env: &Env,
    v2: bool,
    op: Op,
    ns: &str,
    cred: &Cred,
) -> anyhow::Result<(u16, String)> {
    let (path, tenant) = if v2 {
        ("/nacos/v2/cs/config", "namespaceId")
    } else {
        ("/nacos/v1/cs/configs", "tenant")
    };
    let mut params: Vec<(String, String)> = vec![
        ("dataId".into(), "app.properties".into()),
        ("group".into(), "G".into()),
        (tenant.into(), ns.into()),
    ];
    let mut req = match op {
        Op::Read => http.get(env.url(path)),
        Op::Write => {
            params.push(("content".into(), "changed=1".into()));
            http.post(env.url(path))
        }
        Op::Listen => {
            params = vec![(
                "Listening-Configs".into(),
                format!("app.properties\u{2}G\u{2}0123456789abcdef0123456789abcdef\u{2}{ns}\u{1}"),
            )];
            http.post(env.url("/nacos/v1/cs/configs/listener"))
                .header("Long-Pulling-Timeout", "3000")
        }
    };
    match cred {
        Cred::None => {}
        Cred::Token(t) => params.push(("accessToken".into(), t.clone())),
        Cred::Password(u, p) => {
            params.push(("username".into(), u.to_string()));
            params.push(("password".into(), p.to_string()));
        }
        Cred::NacosServerAgent => req = req.header("User-Agent", "Nacos-Server"),
        Cred::Forwarded => {
            req = req
                .header("X-Forwarded-For", "127.0.0.1")
                .header("X-Real-IP", "127.0.0.1")
        }
    }
    req = match op {
        Op::Read => req.query(&params),
        _ => req.form(&params),
    };
    let r = req.send().await?;
    Ok((r.status().as_u16(), r.text().await?))
}

/// Calls `op` on `ns` over gRPC with `cred` in `metadata.headers`.
async fn grpc_op(raw: &mut RawClient, op: Op, ns: &str, cred: &Cred) -> anyhow::Result<Msg> {
    let mut headers: Vec<(&str, String)> = Vec::new();
    match cred {
        Cred::Token(t) => headers.push(("accessToken", t.clone())),
        Cred::Password(u, p) => {
            headers.push(("username", u.to_string()));
            headers.push(("password", p.to_string()));
        }
        Cred::NacosServerAgent => headers.push(("User-Agent", "Nacos-Server".into())),
        Cred::None | Cred::Forwarded => {}
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let key = json!({"dataId": "app.properties", "group": "G", "tenant": ns});
    let (kind, body) = match op {
        Op::Read => ("ConfigQueryRequest", key),
        Op::Write => {
            let mut b = key;
            b["content"] = json!("changed=1");
            ("ConfigPublishRequest", b)
        }
        Op::Listen => {
            let mut ctx = key;
            ctx["md5"] = json!("0123456789abcdef0123456789abcdef");
            (
                "ConfigBatchListenRequest",
                json!({"listen": true, "configListenContexts": [ctx]}),
            )
        }
    };
    raw.call_with_headers(kind, &headers, body).await
}

/// A token for `sub` with `exp`, signed with `key`.
fn token(key: &[u8], sub: &str, exp: i64) -> String {
    jwt::sign(
        key,
        &jwt::Claims {
            sub: sub.into(),
            exp,
        },
    )
}

fn now_s() -> i64 {
    nacelle_core::now_millis() / 1000
}

/// The bad credentials and the message each must get.
fn refused(t: &Tokens) -> Vec<(&'static str, Cred, &'static str)> {
    let good = token(SECRET_BYTES, "nacos", now_s() + 600);
    let parts: Vec<&str> = good.split('.').collect();
    let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let admin_payload =
        URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"nacos","exp":{}}}"#, now_s() + 9999));
    let dev_token_parts: Vec<&str> = t.dev.split('.').collect();
    vec![
        ("no credentials", Cred::None, "user not found!"),
        (
            "wrong password",
            Cred::Password("dev", "not-the-password"),
            "user not found!",
        ),
        (
            "unknown user",
            Cred::Password("mallory", "x"),
            "user not found!",
        ),
        (
            "expired token",
            Cred::Token(token(SECRET_BYTES, "nacos", now_s() - 10)),
            "token expired!",
        ),
        (
            "another secret",
            Cred::Token(token(
                b"another secret, thirty-two bytes",
                "nacos",
                now_s() + 600,
            )),
            "Invalid signature",
        ),
        (
            "alg none",
            Cred::Token(format!("{none_header}.{}.", parts[1])),
            "unsupported signature algorithm",
        ),
        (
            "tampered payload",
            Cred::Token(format!(
                "{}.{admin_payload}.{}",
                dev_token_parts[0], dev_token_parts[2]
            )),
            "Invalid signature",
        ),
        (
            "not a token",
            Cred::Token("garbage".into()),
            "token invalid!",
        ),
        (
            "deleted user's token",
            Cred::Token(t.gone.clone()),
            "user not found!",
        ),
        (
            "token from before a password change",
            Cred::Token(t.moved.clone()),
            "token invalid!",
        ),
        (
            "User-Agent: Nacos-Server",
            Cred::NacosServerAgent,
            "user not found!",
        ),
        (
            "forged forwarded headers",
            Cred::Forwarded,
            "user not found!",
        ),
    ]
}

/// A refused HTTP answer: 403, Spring's body with Nacos's message, no config data.
fn assert_refused_http(what: &str, (status, body): &(u16, String), message: &str) {
    assert_eq!(*status, 403, "{what}: {body}");
    assert!(!body.contains("hunter2"), "{what} leaked: {body}");
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    assert_eq!(v["message"], message, "{what}: {body}");
    assert_eq!(v["status"], 403, "{what}: {body}");
    assert_eq!(v["error"], "Forbidden", "{what}: {body}");
    assert!(v["path"].as_str().is_some_and(|p| p.starts_with("/nacos/")));
}

/// A refused gRPC answer: resultCode 500, errorCode 403, Nacos's message.
fn assert_refused_grpc(what: &str, m: &Msg, message: &str) {
    assert_eq!(m.int("resultCode"), Some(500), "{what}: {m:?}");
    assert_eq!(m.int("errorCode"), Some(403), "{what}: {m:?}");
    assert_eq!(m.str("message"), Some(message), "{what}: {m:?}");
    assert!(
        !format!("{m:?}").contains("hunter2"),
        "{what} leaked: {m:?}"
    );
}

#[tokio::test]
async fn every_bad_credential_is_refused_on_every_protocol() -> TestResult {
    let (env, tokens) = env().await?;
    let mut raw = env.server.raw().await?;
    raw.setup("127.0.0.1").await?;
    // Each wrong password comes from an address of its own, so that the login throttle
    // (tested below) does not answer instead.
    let mut sources = (1..=250u8).map(|n| format!("127.0.1.{n}"));
    for (what, cred, message) in refused(&tokens) {
        let throttled = matches!(cred, Cred::Password(..));
        for op in [Op::Read, Op::Write, Op::Listen] {
            for v2 in [false, true] {
                if v2 && matches!(op, Op::Listen) {
                    continue; // long polling is v1 only
                }
                let got = if throttled {
                    let source = sources.next().unwrap_or_default();
                    http_op_with(&client_from(&source)?, &env, v2, op, "", &cred).await?
                } else {
                    http_op(&env, v2, op, "", &cred).await?
                };
                assert_refused_http(&format!("{what}, {op:?}, v2={v2}"), &got, message);
            }
            let got = if throttled {
                let source: IpAddr = sources.next().unwrap_or_default().parse()?;
                let mut own = RawClient::connect_from(env.server.port, source).await?;
                own.setup(&source.to_string()).await?;
                grpc_op(&mut own, op, "", &cred).await?
            } else {
                grpc_op(&mut raw, op, "", &cred).await?
            };
            assert_refused_grpc(&format!("{what}, {op:?}, gRPC"), &got, message);
        }
        // History, namespaces and admin calls too.
        let mut params = vec![
            ("search", "accurate".to_string()),
            ("dataId", "app.properties".into()),
            ("group", "G".into()),
            ("pageNo", "1".into()),
            ("pageSize", "10".into()),
        ];
        match &cred {
            Cred::Token(t) => params.push(("accessToken", t.clone())),
            Cred::Password(u, p) => {
                params.push(("username", u.to_string()));
                params.push(("password", p.to_string()));
            }
            _ => {}
        }
        for path in [
            "/nacos/v1/cs/history",
            "/nacos/v1/console/namespaces",
            "/nacos/v1/auth/users",
            "/nacos/v1/auth/roles",
            "/nacos/v1/auth/permissions",
        ] {
            let client = match &cred {
                Cred::Password(..) => client_from(&sources.next().unwrap_or_default())?,
                _ => env.http.clone(),
            };
            let mut req = client.get(env.url(path)).query(&params);
            if matches!(cred, Cred::NacosServerAgent) {
                req = req.header("User-Agent", "Nacos-Server");
            }
            let r = req.send().await?;
            let got = (r.status().as_u16(), r.text().await?);
            assert_refused_http(&format!("{what}, {path}"), &got, message);
        }
    }
    // Nothing was written by any refused call.
    let key = nacelle_core::ConfigKey::parse(None, "G", "app.properties")?;
    let served = env.server.service.get(&Caller::internal(), &key, None)?;
    assert_eq!(
        served.map(|s| s.config.content_text().into_owned()),
        Some(SECRET_CONTENT.to_string())
    );
    Ok(())
}

#[tokio::test]
async fn permissions_decide_per_namespace_and_action_on_every_protocol() -> TestResult {
    let (env, t) = env().await?;
    let mut raw = env.server.raw().await?;
    raw.setup("127.0.0.1").await?;
    let dev = Cred::Token(t.dev.clone());
    let reader = Cred::Token(t.reader.clone());
    let admin = Cred::Token(t.admin.clone());
    let node_style = Cred::Password("dev", "dev-password");
    let pub3 = Cred::Token(t.pub3.clone());
    let pub2 = Cred::Token(t.pub2.clone());
    // (credential, namespace, op, allowed)
    let cases = [
        // `public:*:*` and `:*:*` both mean the default namespace, however the request
        // names it, and nothing else.
        (&pub3, "", Op::Read, true),
        (&pub3, "", Op::Write, true),
        (&pub3, "", Op::Listen, true),
        (&pub3, "public", Op::Write, true),
        (&pub3, "dev", Op::Read, false),
        (&pub2, "", Op::Read, true),
        (&pub2, "", Op::Write, true),
        (&pub2, "public", Op::Listen, true),
        (&pub2, "public", Op::Write, true),
        (&pub2, "dev", Op::Write, false),
        (&dev, "dev", Op::Read, true),
        (&dev, "dev", Op::Write, true),
        (&dev, "dev", Op::Listen, true),
        (&dev, "", Op::Read, false),
        (&dev, "", Op::Write, false),
        (&dev, "", Op::Listen, false),
        (&reader, "dev", Op::Read, true),
        (&reader, "dev", Op::Listen, true),
        (&reader, "dev", Op::Write, false),
        (&reader, "", Op::Read, false),
        (&node_style, "dev", Op::Read, true),
        (&node_style, "dev", Op::Write, true),
        (&node_style, "", Op::Read, false),
        (&admin, "", Op::Read, true),
        (&admin, "", Op::Write, true),
        (&admin, "dev", Op::Listen, true),
    ];
    for (cred, ns, op, allowed) in cases {
        for v2 in [false, true] {
            if v2 && matches!(op, Op::Listen) {
                continue;
            }
            let what = format!("{cred:?} {op:?} ns={ns:?} v2={v2}");
            let got = http_op(&env, v2, op, ns, cred).await?;
            if allowed {
                assert_eq!(got.0, 200, "{what}: {}", got.1);
            } else {
                assert_refused_http(&what, &got, "authorization failed!");
            }
        }
        let what = format!("{cred:?} {op:?} ns={ns:?} gRPC");
        let got = grpc_op(&mut raw, op, ns, cred).await?;
        if allowed {
            assert_eq!(got.int("resultCode"), Some(200), "{what}: {got:?}");
        } else {
            assert_refused_grpc(&what, &got, "authorization failed!");
        }
    }

    // Namespaces: a user sees only those it has a permission in.
    let list = |token: &str| {
        env.http
            .get(env.url("/nacos/v1/console/namespaces"))
            .query(&[("accessToken", token)])
            .send()
    };
    let ids = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|n| n["namespace"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let dev_sees: Value = list(&t.dev).await?.json().await?;
    assert_eq!(ids(&dev_sees), vec!["dev".to_string()]);
    let admin_sees: Value = list(&t.admin).await?.json().await?;
    assert_eq!(ids(&admin_sees), vec![String::new(), "dev".to_string()]);
    // Only an admin manages namespaces and users.
    let r = env
        .http
        .delete(env.url("/nacos/v1/console/namespaces"))
        .query(&[("namespaceId", "dev"), ("accessToken", t.dev.as_str())])
        .send()
        .await?;
    let got = (r.status().as_u16(), r.text().await?);
    assert_refused_http("dev deletes a namespace", &got, "authorization failed!");
    for path in ["/nacos/v1/auth/users", "/nacos/v3/auth/user/list"] {
        let r = env
            .http
            .get(env.url(path))
            .query(&[("pageNo", "1"), ("pageSize", "10")])
            .bearer_auth(&t.dev)
            .send()
            .await?;
        let got = (r.status().as_u16(), r.text().await?);
        assert_refused_http(
            &format!("dev lists users at {path}"),
            &got,
            "authorization failed!",
        );
    }
    // History of a config the user may read; not of one it may not.
    let history = |token: &str, ns: &str| {
        env.http
            .get(env.url("/nacos/v1/cs/history"))
            .query(&[
                ("search", "accurate"),
                ("dataId", "app.properties"),
                ("group", "G"),
                ("tenant", ns),
                ("accessToken", token),
            ])
            .send()
    };
    assert_eq!(history(&t.reader, "dev").await?.status(), 200);
    let r = history(&t.reader, "").await?;
    let got = (r.status().as_u16(), r.text().await?);
    assert_refused_http("reader's history of public", &got, "authorization failed!");
    Ok(())
}

#[tokio::test]
async fn users_roles_and_permissions_are_managed_in_nacos_formats() -> TestResult {
    let (env, t) = env().await?;
    // v1 listing: Nacos's page, without password hashes.
    let page = env
        .admin_call(
            &t.admin,
            reqwest::Method::GET,
            "/nacos/v1/auth/users",
            &[("pageNo", "1"), ("pageSize", "2"), ("search", "accurate")],
        )
        .await?;
    // nacos, dev, reader, moved, pub3, pub2 ("gone" was deleted).
    assert_eq!(page["totalCount"], 6, "{page}");
    assert_eq!(page["pagesAvailable"], 3);
    assert_eq!(page["pageItems"].as_array().map(Vec::len), Some(2));
    assert!(
        !page.to_string().contains("$2"),
        "a hash was listed: {page}"
    );
    let blur = env
        .admin_call(
            &t.admin,
            reqwest::Method::GET,
            "/nacos/v1/auth/users",
            &[
                ("pageNo", "1"),
                ("pageSize", "10"),
                ("search", "blur"),
                ("username", "ead"),
            ],
        )
        .await?;
    assert_eq!(blur["pageItems"], json!([{"username": "reader"}]));
    // v3: the envelope.
    let v3 = env
        .admin_call(
            &t.admin,
            reqwest::Method::GET,
            "/nacos/v3/auth/role/list",
            &[("pageNo", "1"), ("pageSize", "10"), ("role", "devs")],
        )
        .await?;
    assert_eq!(v3["code"], 0);
    assert_eq!(
        v3["data"]["pageItems"],
        json!([{"role": "devs", "username": "dev"}])
    );
    let perms = env
        .admin_call(
            &t.admin,
            reqwest::Method::GET,
            "/nacos/v1/auth/permissions",
            &[("pageNo", "1"), ("pageSize", "10"), ("role", "readers")],
        )
        .await?;
    assert_eq!(
        perms["pageItems"],
        json!([{"role": "readers", "resource": "dev:*:*", "action": "r"}])
    );
    // A grant is listed as it was made: `public` stays `public`.
    let perms = env
        .admin_call(
            &t.admin,
            reqwest::Method::GET,
            "/nacos/v1/auth/permissions",
            &[("pageNo", "1"), ("pageSize", "10"), ("role", "pub3s")],
        )
        .await?;
    assert_eq!(
        perms["pageItems"],
        json!([{"role": "pub3s", "resource": "public:*:*", "action": "rw"}])
    );
    // `ROLE_ADMIN` is not granted through the roles API, as Nacos refuses it
    // (`NacosRoleServiceDirectImpl.addRole`); the first administrator is made otherwise.
    let r = env
        .http
        .post(env.url("/nacos/v1/auth/roles"))
        .bearer_auth(&t.admin)
        .query(&[("role", "ROLE_ADMIN"), ("username", "dev")])
        .send()
        .await?;
    let status = r.status().as_u16();
    let body = r.text().await?;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("role 'ROLE_ADMIN' is not permitted to create!"),
        "{body}"
    );
    // A user changes its own password, not another's.
    let own = env
        .http
        .put(env.url("/nacos/v1/auth/users"))
        .bearer_auth(&t.dev)
        .query(&[("username", "dev"), ("newPassword", "dev-password-2")])
        .send()
        .await?;
    assert_eq!(own.status(), 200);
    let other = env
        .http
        .put(env.url("/nacos/v1/auth/users"))
        .bearer_auth(env.login("dev", "dev-password-2").await?)
        .query(&[("username", "reader"), ("newPassword", "x")])
        .send()
        .await?;
    assert_eq!(other.status(), 403);
    // The last admin cannot be deleted; a second admin makes it possible.
    let last = env
        .http
        .delete(env.url("/nacos/v1/auth/users"))
        .bearer_auth(&t.admin)
        .query(&[("username", "nacos")])
        .send()
        .await?;
    assert_eq!(last.status(), 400, "{}", last.text().await?);
    // `users/admin` refuses once an admin exists (Nacos's 409 in a 200 body).
    let again = env
        .http
        .post(env.url("/nacos/v1/auth/users/admin"))
        .send()
        .await?;
    let body: Value = again.json().await?;
    assert_eq!(body["code"], 409);
    // A duplicate user is a conflict; a bad action a 400.
    let dup = env
        .http
        .post(env.url("/nacos/v1/auth/users"))
        .bearer_auth(&t.admin)
        .query(&[("username", "dev"), ("password", "x")])
        .send()
        .await?;
    assert_eq!(dup.status(), 409);
    let bad = env
        .http
        .post(env.url("/nacos/v1/auth/permissions"))
        .bearer_auth(&t.admin)
        .query(&[("role", "devs"), ("resource", "x:*:*"), ("action", "rwx")])
        .send()
        .await?;
    assert_eq!(bad.status(), 400);
    // Revoking a permission takes effect at once.
    env.admin_call(
        &t.admin,
        reqwest::Method::DELETE,
        "/nacos/v1/auth/permissions",
        &[
            ("role", "readers"),
            ("resource", "dev:*:*"),
            ("action", "r"),
        ],
    )
    .await?;
    let got = http_op(&env, false, Op::Read, "dev", &Cred::Token(t.reader.clone())).await?;
    assert_refused_http("revoked reader", &got, "authorization failed!");
    Ok(())
}

/// An HTTP client whose connections come from `source` (a loopback address).
fn client_from(source: &str) -> anyhow::Result<reqwest::Client> {
    let ip: IpAddr = source.parse()?;
    Ok(reqwest::Client::builder()
        .local_address(ip)
        .timeout(SOON)
        .build()?)
}

#[tokio::test]
async fn failed_logins_back_off_per_address_without_locking_the_user_out() -> TestResult {
    let (env, _tokens) = env().await?;
    let login = |client: reqwest::Client, password: &'static str| {
        let url = env.url("/nacos/v1/auth/login");
        async move {
            let r = client
                .post(url)
                .form(&[("username", "dev"), ("password", password)])
                .send()
                .await?;
            let retry = r.headers().get("retry-after").is_some();
            Ok::<_, anyhow::Error>((r.status().as_u16(), retry, r.text().await?))
        }
    };
    let a = client_from("127.0.0.1")?;
    let b = client_from("127.0.0.2")?;
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(login(a.clone(), "wrong").await?.0);
    }
    println!("20 wrong passwords from 127.0.0.1: {statuses:?}");
    // The free attempts are refused as Nacos refuses them; then the address waits.
    assert!(statuses[..5].iter().all(|s| *s == 403), "{statuses:?}");
    assert!(statuses[5..].iter().all(|s| *s == 429), "{statuses:?}");
    let (status, retry_after, body) = login(a.clone(), "dev-password").await?;
    assert_eq!((status, retry_after), (429, true), "{body}");
    assert!(body.contains("retry in"), "{body}");
    // Another address: the right password works, a wrong one is a plain refusal.
    assert_eq!(login(b.clone(), "dev-password").await?.0, 200);
    let (status, _, body) = login(b.clone(), "wrong").await?;
    assert_eq!((status, body.as_str()), (403, "user not found!"));
    // The Node style (credentials on every request) goes through the same throttle.
    let r = a
        .get(env.url("/nacos/v1/cs/configs"))
        .query(&[
            ("dataId", "app.properties"),
            ("group", "G"),
            ("tenant", "dev"),
            ("username", "dev"),
            ("password", "dev-password"),
        ])
        .send()
        .await?;
    assert_eq!(r.status(), 429);
    // The wait ends: after it, the right password works from the first address again.
    let wait = env
        .server
        .service
        .access()
        .login_wait("dev", "127.0.0.1".parse().ok())
        .unwrap_or_default();
    assert!(wait <= Duration::from_secs(60), "{wait:?}");
    Ok(())
}

/// History records the logged-in user as the operator of every write, on every protocol —
/// v1, v2, v3, gRPC and the console — whatever `src_user` the request claims.
#[tokio::test]
async fn history_records_the_logged_in_user_whatever_the_request_claims() -> TestResult {
    let (env, t) = env().await?;
    let mut raw = env.server.raw().await?;
    raw.setup("127.0.0.1").await?;
    let key = [("dataId", "who.properties"), ("group", "G")];
    let post = |path: &'static str, ns_name: &'static str, content: &'static str| {
        env.http
            .post(env.url(path))
            .query(&[("accessToken", t.dev.as_str())])
            .form(&[
                key[0],
                key[1],
                (ns_name, "dev"),
                ("content", content),
                ("src_user", "mallory"),
                ("srcUser", "mallory"),
            ])
            .send()
    };
    let r = post("/nacos/v1/cs/configs", "tenant", "over=v1").await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let r = post("/nacos/v2/cs/config", "namespaceId", "over=v2").await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let got = raw
        .call_with_headers(
            "ConfigPublishRequest",
            &[("accessToken", t.dev.as_str())],
            json!({"dataId": "who.properties", "group": "G", "tenant": "dev",
                   "content": "over=grpc", "additionMap": {"src_user": "mallory"}}),
        )
        .await?;
    assert_eq!(got.int("resultCode"), Some(200), "{got:?}");
    let r = env
        .http
        .post(env.url("/nacos/console/api/config"))
        .bearer_auth(&t.dev)
        .form(&[
            key[0],
            key[1],
            ("namespace", "dev"),
            ("content", "over=console"),
            ("src_user", "mallory"),
        ])
        .send()
        .await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let r = env
        .http
        .post(env.url("/nacos/v3/admin/cs/config"))
        .header("accessToken", t.dev.as_str())
        .form(&[
            ("dataId", "who.properties"),
            ("groupName", "G"),
            ("namespaceId", "dev"),
            ("content", "over=v3"),
            ("srcUser", "mallory"),
        ])
        .send()
        .await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    // A removal is a write too.
    let r = env
        .http
        .delete(env.url("/nacos/v1/cs/configs"))
        .query(&[
            key[0],
            key[1],
            ("tenant", "dev"),
            ("src_user", "mallory"),
            ("accessToken", t.dev.as_str()),
        ])
        .send()
        .await?;
    assert_eq!(r.text().await?, "true");

    let history: Value = env
        .http
        .get(env.url("/nacos/v1/cs/history"))
        .query(&[
            ("search", "accurate"),
            key[0],
            key[1],
            ("tenant", "dev"),
            ("pageNo", "1"),
            ("pageSize", "10"),
            ("accessToken", t.admin.as_str()),
        ])
        .send()
        .await?
        .json()
        .await?;
    let rows = history["pageItems"].as_array().cloned().unwrap_or_default();
    // v1 insert, v2/gRPC/console/v3 updates, the delete.
    assert_eq!(rows.len(), 6, "{history}");
    for row in &rows {
        assert_eq!(row["srcUser"], "dev", "{row}");
    }
    Ok(())
}
