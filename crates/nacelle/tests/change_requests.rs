//! Change requests and review policies against a real server over real sockets, with
//! authentication on, on every backend: a review policy refuses direct writes from every
//! protocol (the real Rust client `nacos-sdk` over gRPC, HTTP v1, v2, v3) with a message
//! naming the policy; an administrator's emergency write passes; a three-key request is
//! reviewed (not by its author, only by a user holding `a`) and published in one
//! transaction, which the client's listener receives; a request whose key moved since its
//! base writes nothing until rebased.

use std::sync::Arc;

use nacelle_testkit::api::Reply;
use nacelle_testkit::server::{secure, TestServer};
use nacelle_testkit::{per_backend, Backend, TestResult, SOON};
use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigServiceBuilder};
use nacos_sdk::api::props::ClientProps;
use reqwest::Method;
use serde_json::{json, Value};

const CHANGES: &str = "/nacos/nacelle/v1/changes";
const CHANGE: &str = "/nacos/nacelle/v1/change";
const POLICIES: &str = "/nacos/nacelle/v1/review-policies";

per_backend!(
    with run:
    a_reviewed_change_publishes_every_key_at_once,
    a_stale_change_writes_nothing_until_rebased;
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

/// A request with `token`: query parameters for GET and DELETE, a form otherwise, and
/// `headers`.
async fn call(
    s: &TestServer,
    token: &str,
    method: Method,
    path: &str,
    params: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> TestResult<Reply> {
    let mut req = if method == Method::GET || method == Method::DELETE {
        s.http.request(method, s.url(path)).query(params)
    } else {
        s.http.request(method, s.url(path)).form(params)
    };
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    Ok(Reply::read(req.bearer_auth(token).send().await?).await?)
}

/// A JSON body request with `token`.
async fn call_json(
    s: &TestServer,
    token: &str,
    method: Method,
    path: &str,
    query: &[(&str, &str)],
    body: &Value,
) -> TestResult<Reply> {
    let req = s
        .http
        .request(method, s.url(path))
        .query(query)
        .json(body)
        .bearer_auth(token);
    Ok(Reply::read(req.send().await?).await?)
}

/// The `data` of a successful answer.
fn data(r: &Reply) -> TestResult<Value> {
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json()?;
    assert_eq!(v["code"], 0, "{v}");
    Ok(v["data"].clone())
}

/// A refusal: its status, and its message (the `data` of the envelope, or the body).
fn refused(r: &Reply, status: u16) -> String {
    assert_eq!(r.status, status, "{}", r.body);
    r.json()
        .ok()
        .and_then(|v| v["data"].as_str().map(str::to_string))
        .unwrap_or_else(|| r.body.clone())
}

/// A v1 publish by `token`, with `headers`.
async fn v1_publish(
    s: &TestServer,
    token: &str,
    data_id: &str,
    content: &str,
    headers: &[(&str, &str)],
) -> TestResult<Reply> {
    let params = [
        ("tenant", "prod"),
        ("group", "G"),
        ("dataId", data_id),
        ("content", content),
    ];
    call(
        s,
        token,
        Method::POST,
        "/nacos/v1/cs/configs",
        &params,
        headers,
    )
    .await
}

struct Tx(tokio::sync::mpsc::UnboundedSender<String>);
impl ConfigChangeListener for Tx {
    fn notify(&self, r: ConfigResponse) {
        // The test may have finished; nothing to tell then.
        let _done = self.0.send(r.content().clone());
    }
}

/// Sets up namespace `prod` with `a.yaml` and `c.yaml`, the users alice (author: `rw`),
/// bob (reviewer: `rwa`), carol (`r` only), and a policy of one approval on every group:
/// the admin's token and the users'.
async fn prod(s: &TestServer) -> TestResult<(String, String, String, String)> {
    let admin = s.admin_token().await?;
    let r = call(
        s,
        &admin,
        Method::POST,
        "/nacos/v1/console/namespaces",
        &[("customNamespaceId", "prod"), ("namespaceName", "prod")],
        &[],
    )
    .await?;
    assert_eq!(r.status, 200, "{}", r.body);
    for (id, content) in [("a.yaml", "a: 1\n"), ("c.yaml", "c: 1\n")] {
        let r = v1_publish(s, &admin, id, content, &[]).await?;
        assert_eq!((r.status, r.body.as_str()), (200, "true"));
    }
    let alice = s.user_granted(&admin, "alice", "prod:*:*", "rw").await?;
    let bob = s.user_granted(&admin, "bob", "prod:*:*", "rwa").await?;
    let carol = s.user_granted(&admin, "carol", "prod:*:*", "r").await?;
    // Only an administrator sets a policy.
    let policy = [
        ("namespaceId", "prod"),
        ("groupPattern", "*"),
        ("requiredApprovals", "1"),
    ];
    let r = call(s, &alice, Method::POST, POLICIES, &policy, &[]).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    data(&call(s, &admin, Method::POST, POLICIES, &policy, &[]).await?)?;
    let listed = data(&call(s, &carol, Method::GET, POLICIES, &[], &[]).await?)?;
    assert_eq!(listed[0]["namespaceId"], "prod", "{listed}");
    assert_eq!(listed[0]["requiredApprovals"], 1, "{listed}");
    Ok((admin, alice, bob, carol))
}

async fn a_reviewed_change_publishes_every_key_at_once(s: TestServer) -> TestResult {
    let (admin, alice, bob, carol) = prod(&s).await?;
    let api = nacelle_testkit::Api::with_token(s.addr, &admin)?;
    let running = s.server.as_ref().ok_or("no server")?;

    // The real Rust client, logged in as alice, listening to a.yaml.
    let cache = tempfile::tempdir()?;
    let props = ClientProps::new()
        .server_addr(format!("127.0.0.1:{}", running.http_addr.port()))
        .remote_grpc_port(running.grpc_addr.port())
        .namespace("prod")
        .app_name("review-test")
        .cache_dir(cache.path())
        .env_first(false)
        .auth_username("alice")
        .auth_password("alice-pass-1");
    let client = ConfigServiceBuilder::new(props)
        .enable_auth_plugin_http()
        .build()
        .await
        .map_err(|e| format!("sdk build: {e}"))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    client
        .add_listener("a.yaml".into(), "G".into(), Arc::new(Tx(tx)))
        .await?;

    // Direct writes are refused on every protocol, naming the policy.
    let direct = client
        .publish_config("a.yaml".into(), "G".into(), "a: 9\n".into(), None)
        .await;
    let message = format!("{direct:?}");
    assert!(
        !matches!(direct, Ok(true)) && message.contains("review policy"),
        "nacos-sdk publish: {message}"
    );
    let v1 = v1_publish(&s, &alice, "a.yaml", "a: 9\n", &[]).await?;
    assert!(
        refused(&v1, 403).contains("review policy '*'"),
        "{}",
        v1.body
    );
    let v1_rm = call(
        &s,
        &alice,
        Method::DELETE,
        "/nacos/v1/cs/configs",
        &[("tenant", "prod"), ("group", "G"), ("dataId", "c.yaml")],
        &[],
    )
    .await?;
    assert!(
        refused(&v1_rm, 403).contains("change request"),
        "{}",
        v1_rm.body
    );
    let v2 = call(
        &s,
        &alice,
        Method::POST,
        "/nacos/v2/cs/config",
        &[
            ("namespaceId", "prod"),
            ("group", "G"),
            ("dataId", "a.yaml"),
            ("content", "a: 9\n"),
        ],
        &[],
    )
    .await?;
    assert!(refused(&v2, 403).contains("review policy"), "{}", v2.body);
    let v3 = call(
        &s,
        &alice,
        Method::POST,
        "/nacos/v3/admin/cs/config",
        &[
            ("namespaceId", "prod"),
            ("groupName", "G"),
            ("dataId", "a.yaml"),
            ("content", "a: 9\n"),
        ],
        &[],
    )
    .await?;
    assert!(refused(&v3, 403).contains("review policy"), "{}", v3.body);
    // An emergency reason is an administrator's only.
    let emergency = [("X-Nacelle-Emergency", "incident 42: roll back the limit")];
    let r = v1_publish(&s, &alice, "e.yaml", "e: 1\n", &emergency).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = v1_publish(&s, &admin, "e.yaml", "e: 1\n", &emergency).await?;
    assert_eq!((r.status, r.body.as_str()), (200, "true"));
    assert_eq!(
        api.get("prod", "G", "a.yaml").await?.as_deref(),
        Some("a: 1\n")
    );

    // Alice opens a request over three keys: change a, create b, remove c.
    let body = json!({
        "namespaceId": "prod",
        "title": "raise the limits",
        "description": "traffic doubled",
        "items": [
            {"group": "G", "dataId": "a.yaml", "content": "a: 2\n"},
            {"group": "G", "dataId": "b.yaml", "content": "b: 1\n", "type": "yaml"},
            {"group": "G", "dataId": "c.yaml", "remove": true},
        ],
    });
    // Carol may not write these keys: she cannot open it.
    let r = call_json(&s, &carol, Method::POST, CHANGES, &[], &body).await?;
    assert_eq!(r.status, 403, "{}", r.body);
    let cr = data(&call_json(&s, &alice, Method::POST, CHANGES, &[], &body).await?)?;
    let id = cr["id"].as_i64().ok_or("id")?.to_string();
    assert_eq!(cr["state"], "open", "{cr}");
    assert_eq!(cr["author"], "alice");
    assert_eq!(cr["requiredApprovals"], 1);
    assert_eq!(cr["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(cr["items"][1]["baseMd5"], "", "b did not exist");
    assert_eq!(cr["items"][2]["op"], "remove");
    let id = id.as_str();

    // The diff of every key against the server.
    let diff = data(
        &call(
            &s,
            &carol,
            Method::GET,
            &format!("{CHANGE}/diff"),
            &[("id", id)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(diff[0]["dataId"], "a.yaml");
    let d0 = diff[0]["diff"].as_str().ok_or("diff")?;
    assert!(d0.contains("-a: 1") && d0.contains("+a: 2"), "{d0}");
    assert_eq!(diff[0]["moved"], false);
    assert!(
        diff[2]["diff"].as_str().ok_or("diff")?.contains("-c: 1"),
        "{diff}"
    );

    // Not published before its approval; the author and a reader cannot approve.
    let r = call(
        &s,
        &alice,
        Method::POST,
        &format!("{CHANGE}/publish"),
        &[("id", id)],
        &[],
    )
    .await?;
    assert!(refused(&r, 409).contains("needs 1 approval"), "{}", r.body);
    let r = call(
        &s,
        &alice,
        Method::POST,
        &format!("{CHANGE}/approve"),
        &[("id", id)],
        &[],
    )
    .await?;
    assert!(refused(&r, 403).contains("author"), "{}", r.body);
    let r = call(
        &s,
        &carol,
        Method::POST,
        &format!("{CHANGE}/approve"),
        &[("id", id)],
        &[],
    )
    .await?;
    assert_eq!(r.status, 403, "{}", r.body);
    // An approval of a version the reviewer did not see is refused.
    let r = call(
        &s,
        &bob,
        Method::POST,
        &format!("{CHANGE}/approve"),
        &[("id", id), ("version", "99")],
        &[],
    )
    .await?;
    assert_eq!(r.status, 409, "{}", r.body);
    let comment = [("id", id), ("text", "checked the dashboards")];
    let cr = data(
        &call(
            &s,
            &carol,
            Method::POST,
            &format!("{CHANGE}/comment"),
            &comment,
            &[],
        )
        .await?,
    )?;
    let version = cr["version"].to_string();
    let cr = data(
        &call(
            &s,
            &bob,
            Method::POST,
            &format!("{CHANGE}/approve"),
            &[("id", id), ("version", &version)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(cr["state"], "approved", "{cr}");
    assert_eq!(cr["approvers"], json!(["bob"]));

    // Published: every key at once, by alice; her client's listener gets the new value.
    let cr = data(
        &call(
            &s,
            &alice,
            Method::POST,
            &format!("{CHANGE}/publish"),
            &[("id", id)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(cr["state"], "published", "{cr}");
    let kinds: Vec<&str> = cr["events"]
        .as_array()
        .ok_or("events")?
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["created", "commented", "approved", "published"]);
    assert_eq!(
        api.get("prod", "G", "a.yaml").await?.as_deref(),
        Some("a: 2\n")
    );
    assert_eq!(
        api.get("prod", "G", "b.yaml").await?.as_deref(),
        Some("b: 1\n")
    );
    assert_eq!(api.get("prod", "G", "c.yaml").await?, None);
    let got = tokio::time::timeout(SOON, rx.recv()).await?;
    assert_eq!(got.as_deref(), Some("a: 2\n"));
    // History records alice as the operator.
    let history = call(
        &s,
        &admin,
        Method::GET,
        "/nacos/v1/cs/history",
        &[
            ("search", "accurate"),
            ("tenant", "prod"),
            ("group", "G"),
            ("dataId", "a.yaml"),
        ],
        &[],
    )
    .await?;
    let history = history.json()?;
    assert_eq!(history["pageItems"][0]["srcUser"], "alice", "{history}");
    // The history row names the change request and carries its title as the message.
    let entry = &history["pageItems"][0];
    assert_eq!(entry["changeId"].to_string(), id, "{history}");
    assert!(
        entry["message"]
            .as_str()
            .is_some_and(|m| m.contains("raise the limits")),
        "{history}"
    );
    // Once only.
    let r = call(
        &s,
        &alice,
        Method::POST,
        &format!("{CHANGE}/publish"),
        &[("id", id)],
        &[],
    )
    .await?;
    assert_eq!(r.status, 409, "{}", r.body);
    // Listed, newest first, to whoever reads the namespace.
    let page = data(
        &call(
            &s,
            &carol,
            Method::GET,
            CHANGES,
            &[("namespaceId", "prod")],
            &[],
        )
        .await?,
    )?;
    assert_eq!(page["totalCount"], 1, "{page}");
    assert_eq!(page["pageItems"][0]["state"], "published");
    Ok(())
}

async fn a_stale_change_writes_nothing_until_rebased(s: TestServer) -> TestResult {
    let (admin, alice, bob, _carol) = prod(&s).await?;
    let api = nacelle_testkit::Api::with_token(s.addr, &admin)?;
    let body = json!({
        "namespaceId": "prod",
        "title": "two keys",
        "items": [
            {"group": "G", "dataId": "a.yaml", "content": "a: 2\n"},
            {"group": "G", "dataId": "c.yaml", "content": "c: 2\n"},
        ],
    });
    let cr = data(&call_json(&s, &alice, Method::POST, CHANGES, &[], &body).await?)?;
    let id = cr["id"].to_string();
    let id = id.as_str();
    data(
        &call(
            &s,
            &bob,
            Method::POST,
            &format!("{CHANGE}/approve"),
            &[("id", id)],
            &[],
        )
        .await?,
    )?;
    // a.yaml moves under the request (an administrator's emergency write).
    let r = v1_publish(
        &s,
        &admin,
        "a.yaml",
        "a: 7\n",
        &[("X-Nacelle-Emergency", "hotfix")],
    )
    .await?;
    assert_eq!((r.status, r.body.as_str()), (200, "true"));

    let r = call(
        &s,
        &alice,
        Method::POST,
        &format!("{CHANGE}/publish"),
        &[("id", id)],
        &[],
    )
    .await?;
    let message = refused(&r, 409);
    assert!(
        message.contains("stale") && message.contains("G/a.yaml"),
        "{message}"
    );
    assert_eq!(
        api.get("prod", "G", "a.yaml").await?.as_deref(),
        Some("a: 7\n")
    );
    assert_eq!(
        api.get("prod", "G", "c.yaml").await?.as_deref(),
        Some("c: 1\n"),
        "nothing written"
    );
    let cr = data(&call(&s, &alice, Method::GET, CHANGE, &[("id", id)], &[]).await?)?;
    assert_eq!(cr["stale"], true, "{cr}");
    assert_eq!(cr["state"], "approved");
    let diff = data(
        &call(
            &s,
            &alice,
            Method::GET,
            &format!("{CHANGE}/diff"),
            &[("id", id)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(diff[0]["moved"], true, "{diff}");
    assert_eq!(diff[1]["moved"], false, "{diff}");
    // Still stale: publishing again says so.
    let r = call(
        &s,
        &alice,
        Method::POST,
        &format!("{CHANGE}/publish"),
        &[("id", id)],
        &[],
    )
    .await?;
    assert!(refused(&r, 409).contains("rebase"), "{}", r.body);

    // Rebased: approvals no longer count; approved again, it publishes.
    let cr = data(
        &call(
            &s,
            &alice,
            Method::POST,
            &format!("{CHANGE}/rebase"),
            &[("id", id)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(
        (cr["state"].as_str(), cr["stale"].as_bool()),
        (Some("open"), Some(false))
    );
    assert_eq!(cr["approvers"], json!([]));
    data(
        &call(
            &s,
            &bob,
            Method::POST,
            &format!("{CHANGE}/approve"),
            &[("id", id)],
            &[],
        )
        .await?,
    )?;
    let cr = data(
        &call(
            &s,
            &alice,
            Method::POST,
            &format!("{CHANGE}/publish"),
            &[("id", id)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(cr["state"], "published");
    assert_eq!(
        api.get("prod", "G", "a.yaml").await?.as_deref(),
        Some("a: 2\n")
    );
    assert_eq!(
        api.get("prod", "G", "c.yaml").await?.as_deref(),
        Some("c: 2\n")
    );

    // Bad input: clear 400s and 404s.
    let bad = [
        (
            json!({"namespaceId": "prod", "title": "t", "items": []}),
            "at least one config",
        ),
        (
            json!({"namespaceId": "prod", "items": [{"dataId": "x.yaml", "content": "x"}]}),
            "title",
        ),
        (
            json!({"namespaceId": "prod", "title": "t", "items": [{"dataId": "x.yaml"}]}),
            "remove: true",
        ),
        (
            json!({"namespaceId": "prod", "title": "t", "items": [{"dataId": "bad id", "content": "x"}]}),
            "bad id",
        ),
        (
            json!({"namespaceId": "prod", "title": "t", "nope": 1, "items": []}),
            "unknown field",
        ),
    ];
    for (body, says) in bad {
        let r = call_json(&s, &alice, Method::POST, CHANGES, &[], &body).await?;
        assert!(refused(&r, 400).contains(says), "{body}: {}", r.body);
    }
    let r = call(&s, &alice, Method::GET, CHANGE, &[("id", "999999")], &[]).await?;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = call(&s, &alice, Method::GET, CHANGE, &[("id", "x")], &[]).await?;
    assert_eq!(r.status, 400, "{}", r.body);
    // A draft is opened by its author; a rejection needs a reason; closed is final.
    let draft = json!({"namespaceId": "prod", "title": "later", "draft": true,
        "items": [{"group": "G", "dataId": "d.yaml", "content": "d: 1\n"}]});
    let cr = data(&call_json(&s, &alice, Method::POST, CHANGES, &[], &draft).await?)?;
    assert_eq!(cr["state"], "draft");
    let did = cr["id"].to_string();
    let r = call(
        &s,
        &bob,
        Method::POST,
        &format!("{CHANGE}/open"),
        &[("id", &did)],
        &[],
    )
    .await?;
    assert_eq!(r.status, 403, "{}", r.body);
    let cr = data(
        &call(
            &s,
            &alice,
            Method::POST,
            &format!("{CHANGE}/open"),
            &[("id", &did)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(cr["state"], "open");
    let r = call(
        &s,
        &bob,
        Method::POST,
        &format!("{CHANGE}/reject"),
        &[("id", &did)],
        &[],
    )
    .await?;
    assert!(refused(&r, 400).contains("reason"), "{}", r.body);
    let cr = data(
        &call(
            &s,
            &bob,
            Method::POST,
            &format!("{CHANGE}/reject"),
            &[("id", &did), ("reason", "not now")],
            &[],
        )
        .await?,
    )?;
    assert_eq!(cr["state"], "rejected");
    let cr = data(
        &call(
            &s,
            &alice,
            Method::POST,
            &format!("{CHANGE}/close"),
            &[("id", &did)],
            &[],
        )
        .await?,
    )?;
    assert_eq!(cr["state"], "closed");
    let r = call(
        &s,
        &alice,
        Method::POST,
        &format!("{CHANGE}/open"),
        &[("id", &did)],
        &[],
    )
    .await?;
    assert_eq!(r.status, 409, "{}", r.body);
    Ok(())
}

/// An encrypted config (`cipher-aes-…`) changes through a request like any other: the
/// request holds its content sealed (never the plaintext at rest), reviewers see the
/// plaintext, and the publish stores it encrypted with a fresh data key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_config_changes_through_a_request_sealed_at_rest() -> TestResult {
    run(Backend::Sqlite, |s| async move {
        let (admin, alice, bob, _carol) = prod(&s).await?;
        // A request in the default namespace, which alice (prod only) does not see.
        let public = json!({"title": "elsewhere", "items": [{"dataId": "p.yaml", "content": "p: 1"}]});
        data(&call_json(&s, &admin, Method::POST, CHANGES, &[], &public).await?)?;
        let secret = "password=s3cret-plain-4711\n";
        let body = json!({"namespaceId": "prod", "title": "rotate the db password",
            "items": [{"group": "G", "dataId": "cipher-aes-db.properties", "content": secret}]});
        let cr = data(&call_json(&s, &alice, Method::POST, CHANGES, &[], &body).await?)?;
        let id = cr["id"].as_i64().ok_or("no id")?.to_string();
        assert_eq!(cr["items"][0]["content"], secret, "{cr}");
        // Listed across namespaces, alice's page counts only what she sees.
        let mine = data(&call(&s, &alice, Method::GET, CHANGES, &[], &[]).await?)?;
        assert_eq!(mine["totalCount"], 1, "{mine}");
        assert_eq!(mine["pageItems"][0]["id"], cr["id"], "{mine}");
        let every = data(&call(&s, &admin, Method::GET, CHANGES, &[], &[]).await?)?;
        assert_eq!(every["totalCount"], 2, "{every}");

        // At rest: sealed, never the plaintext.
        let db = rusqlite::Connection::open(s.dir.path().join("nacelle.db"))?;
        let stored: Vec<String> = db
            .prepare("SELECT content FROM nacelle_change_item WHERE data_id LIKE 'cipher-%'")?
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<_, _>>()?;
        assert_eq!(stored.len(), 1);
        assert!(stored[0].starts_with("nacelle-sealed-v1:"), "{}", stored[0]);
        assert!(!stored[0].contains("s3cret-plain"), "{}", stored[0]);

        // A reviewer reads the plaintext, in the request and in its diff.
        let seen = data(&call(&s, &bob, Method::GET, CHANGE, &[("id", &id)], &[]).await?)?;
        assert_eq!(seen["items"][0]["content"], secret, "{seen}");
        let diff = data(
            &call(&s, &bob, Method::GET, &format!("{CHANGE}/diff"), &[("id", &id)], &[]).await?,
        )?;
        assert!(diff.to_string().contains("s3cret-plain-4711"), "{diff}");

        for (who, action) in [(&bob, "approve"), (&alice, "publish")] {
            let path = format!("{CHANGE}/{action}");
            data(&call(&s, who, Method::POST, &path, &[("id", &id)], &[]).await?)?;
        }
        // Served in plaintext over HTTP, stored encrypted with a data key.
        let api = nacelle_testkit::Api::with_token(s.addr, &alice)?;
        assert_eq!(
            api.get("prod", "G", "cipher-aes-db.properties").await?.as_deref(),
            Some(secret)
        );
        let (content, data_key): (String, String) = db.query_row(
            "SELECT content, encrypted_data_key FROM config_info WHERE data_id = 'cipher-aes-db.properties'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        assert!(!content.contains("s3cret-plain") && !data_key.is_empty(), "{content}");
        Ok(())
    })
    .await
}
