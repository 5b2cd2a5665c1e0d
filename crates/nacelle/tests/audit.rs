//! The operator and message of every write, and the audit trail (docs/audit.md), on a
//! server with authentication on: a logged-in user's writes over HTTP v1, v2, v3, gRPC
//! (the Rust SDK) and the console record that user (not a claimed `src_user`) and the
//! message in history; publishes, logins (good and bad) and user creation are audited;
//! only an administrator reads the trail; `nacelle audit verify` (the real binary) passes
//! on the untouched chain, and names the entry after a row is edited or deleted directly
//! in the SQLite file — as does the server's own verification.

use std::process::Command;

mod common;

use common::audit::audit_until;
use nacelle_client::{Client, PublishOptions, ServerAddr};
use nacelle_testkit::server::{secure, TestServer};
use nacelle_testkit::TestResult;
use serde_json::{json, Value};

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");
const ALICE_PASSWORD: &str = "alice-password-1";

/// A request with `token` as Nacos clients send it (`accessToken`), form-encoded.
async fn send(
    ts: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    params: &[(&str, &str)],
) -> TestResult<(u16, Value)> {
    let mut req = ts
        .http
        .request(method.clone(), ts.url(path))
        .query(&[("accessToken", token)]);
    req = if method == reqwest::Method::GET || method == reqwest::Method::DELETE {
        req.query(params)
    } else {
        req.form(params)
    };
    let r = req.send().await?;
    let status = r.status().as_u16();
    let text = r.text().await?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

async fn login(ts: &TestServer, user: &str, password: &str) -> TestResult<(u16, String)> {
    let r = ts
        .http
        .post(ts.url("/nacos/v1/auth/login"))
        .form(&[("username", user), ("password", password)])
        .send()
        .await?;
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    Ok((
        status,
        body["accessToken"].as_str().unwrap_or("").to_string(),
    ))
}

/// The newest history entry of `dataId` in group `G` over HTTP v1.
async fn newest_history(ts: &TestServer, token: &str, data_id: &str) -> TestResult<Value> {
    let (status, page) = send(
        ts,
        reqwest::Method::GET,
        "/nacos/v1/cs/history",
        token,
        &[
            ("search", "accurate"),
            ("dataId", data_id),
            ("group", "G"),
            ("tenant", ""),
        ],
    )
    .await?;
    assert_eq!(status, 200, "{page}");
    Ok(page["pageItems"][0].clone())
}

/// `nacelle audit verify` (the real binary) as the administrator: its exit status and
/// its stdout and stderr.
fn cli_verify(ts: &TestServer) -> TestResult<(bool, String)> {
    cli_verify_with(ts, &[])
}

/// `nacelle audit verify EXTRA…`: whether it exited 0, and its stdout and stderr.
fn cli_verify_with(ts: &TestServer, extra: &[&str]) -> TestResult<(bool, String)> {
    let server = ts.server.as_ref().ok_or("stopped")?;
    let addr = format!(
        "127.0.0.1:{}/{}",
        server.http_addr.port(),
        server.grpc_addr.port()
    );
    let config = tempfile::tempdir()?;
    let mut c = Command::new(NACELLE);
    for (k, _) in std::env::vars() {
        if k.starts_with("NACELLE_") {
            c.env_remove(k);
        }
    }
    let out = c
        .args(["audit", "verify", "--username", "nacos"])
        .args(extra)
        .env("NACELLE_PASSWORD", nacelle_testkit::server::ADMIN_PASSWORD)
        .env("NACELLE_SERVER", &addr)
        .env("XDG_CONFIG_HOME", config.path())
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

/// The server's own verification.
async fn server_verify(ts: &TestServer, admin: &str) -> TestResult<Value> {
    let (status, body) = send(
        ts,
        reqwest::Method::GET,
        "/nacos/nacelle/v1/audit/verify",
        admin,
        &[],
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    Ok(body["data"].clone())
}

fn sqlite(ts: &TestServer) -> TestResult<rusqlite::Connection> {
    let c = rusqlite::Connection::open(ts.dir.path().join("nacelle.db"))?;
    c.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_message_and_a_verifiable_audit_trail() -> TestResult {
    let ts = TestServer::start_with(secure).await?;
    let admin = ts.admin_token().await?;
    let server = ts.server.as_ref().ok_or("stopped")?;
    let (http_port, grpc_port) = (server.http_addr.port(), server.grpc_addr.port());

    // Alice: a user who may read and write every config (not an administrator).
    for (path, params) in [
        (
            "/nacos/v1/auth/users",
            &[("username", "alice"), ("password", ALICE_PASSWORD)][..],
        ),
        (
            "/nacos/v1/auth/roles",
            &[("role", "writers"), ("username", "alice")][..],
        ),
        (
            "/nacos/v1/auth/permissions",
            &[("role", "writers"), ("resource", "*:*:*"), ("action", "rw")][..],
        ),
    ] {
        let (status, body) = send(&ts, reqwest::Method::POST, path, &admin, params).await?;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, _) = login(&ts, "alice", "wrong-password").await?;
    assert_eq!(status, 403);
    let (status, alice) = login(&ts, "alice", ALICE_PASSWORD).await?;
    assert_eq!(status, 200);

    // Her writes on every protocol; a claimed src_user is ignored for a logged-in user.
    let (status, body) = send(
        &ts,
        reqwest::Method::POST,
        "/nacos/v1/cs/configs",
        &alice,
        &[
            ("dataId", "v1.yaml"),
            ("group", "G"),
            ("content", "a: 1"),
            ("src_user", "mallory"),
            ("message", "v1: first"),
        ],
    )
    .await?;
    assert_eq!((status, body.clone()), (200, Value::Bool(true)), "{body}");
    let (status, body) = send(
        &ts,
        reqwest::Method::POST,
        "/nacos/v2/cs/config",
        &alice,
        &[
            ("dataId", "v2.yaml"),
            ("group", "G"),
            ("content", "a: 2"),
            ("srcUser", "mallory"),
            ("message", "v2: second"),
        ],
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(
        &ts,
        reqwest::Method::POST,
        "/nacos/v3/admin/cs/config",
        &alice,
        &[
            ("dataId", "v3.yaml"),
            ("groupName", "G"),
            ("content", "a: 3"),
            ("message", "v3: third"),
        ],
    )
    .await?;
    assert_eq!(status, 200, "{body}");
    let r = ts
        .http
        .post(ts.url("/nacos/console/api/config"))
        .bearer_auth(&alice)
        .form(&[
            ("dataId", "console.yaml"),
            ("group", "G"),
            ("content", "a: 4"),
            ("type", "yaml"),
            ("message", "console: fourth"),
        ])
        .send()
        .await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let sdk = Client::builder()
        .server(ServerAddr::new("127.0.0.1", http_port)?.with_grpc_port(grpc_port))
        .credentials("alice", ALICE_PASSWORD)
        .build()
        .await?;
    let opts = PublishOptions {
        message: Some("grpc: fifth".into()),
        ..Default::default()
    };
    sdk.publish_with(("G", "grpc.yaml"), "a: 5", &opts).await?;

    for (data_id, message) in [
        ("v1.yaml", "v1: first"),
        ("v2.yaml", "v2: second"),
        ("v3.yaml", "v3: third"),
        ("console.yaml", "console: fourth"),
        ("grpc.yaml", "grpc: fifth"),
    ] {
        let h = newest_history(&ts, &admin, data_id).await?;
        assert_eq!(h["srcUser"], "alice", "{data_id}: {h}");
        assert_eq!(h["message"], message, "{data_id}: {h}");
    }
    // A removal with a message (HTTP, as `nacelle rm --message` sends it).
    let (status, _) = send(
        &ts,
        reqwest::Method::DELETE,
        "/nacos/v1/cs/configs",
        &alice,
        &[
            ("dataId", "v1.yaml"),
            ("group", "G"),
            ("message", "retired"),
        ],
    )
    .await?;
    assert_eq!(status, 200);
    let h = newest_history(&ts, &admin, "v1.yaml").await?;
    assert_eq!(
        (h["opType"].as_str(), h["srcUser"].as_str()),
        (Some("D"), Some("alice"))
    );
    assert_eq!(h["message"], "retired");
    // The v3 history answer carries it too.
    let (_, v3) = send(
        &ts,
        reqwest::Method::GET,
        "/nacos/v3/admin/cs/history/list",
        &admin,
        &[("dataId", "v3.yaml"), ("groupName", "G")],
    )
    .await?;
    assert_eq!(v3["data"]["pageItems"][0]["message"], "v3: third", "{v3}");
    // A message longer than the limit is a 400 naming it.
    let long = "x".repeat(1025);
    let (status, body) = send(
        &ts,
        reqwest::Method::POST,
        "/nacos/v2/cs/config",
        &alice,
        &[
            ("dataId", "long.yaml"),
            ("group", "G"),
            ("content", "a"),
            ("message", &long),
        ],
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("message"), "{body}");

    // The audit trail: publishes with user, target and message; logins; user creation.
    let publishes = audit_until(
        &ts,
        &admin,
        &[("action", "publish"), ("user", "alice")],
        |i| i.len() >= 5,
    )
    .await?;
    let v1 = publishes
        .iter()
        .find(|e| e["target"] == "public/G/v1.yaml")
        .ok_or("no audit entry of the v1 publish")?;
    assert_eq!(v1["protocol"], "http-v1");
    assert_eq!(v1["outcome"], "ok");
    assert!(
        v1["detail"]
            .as_str()
            .unwrap_or("")
            .contains("message=v1: first"),
        "{v1}"
    );
    let grpc = publishes
        .iter()
        .find(|e| e["target"] == "public/G/grpc.yaml")
        .ok_or("no audit entry of the gRPC publish")?;
    assert_eq!(grpc["protocol"], "grpc");
    let failed = audit_until(&ts, &admin, &[("action", "login-failed")], |i| {
        !i.is_empty()
    })
    .await?;
    assert_eq!(failed[0]["user"], "alice");
    assert!(
        failed[0]["outcome"]
            .as_str()
            .unwrap_or("")
            .starts_with("refused"),
        "{failed:?}"
    );
    audit_until(
        &ts,
        &admin,
        &[("action", "login"), ("user", "alice")],
        |i| !i.is_empty(),
    )
    .await?;
    let created = audit_until(&ts, &admin, &[("action", "user-create")], |i| {
        i.iter().any(|e| e["target"] == "alice")
    })
    .await?;
    assert!(created.iter().any(|e| e["user"] == "nacos"), "{created:?}");
    audit_until(
        &ts,
        &admin,
        &[("key", "public/G/v1.yaml"), ("action", "remove")],
        |i| i.len() == 1,
    )
    .await?;
    // Bad filters are a 400 naming them; a user without ROLE_ADMIN may not read.
    let (status, body) = send(
        &ts,
        reqwest::Method::GET,
        "/nacos/nacelle/v1/audit",
        &admin,
        &[("action", "nope")],
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["data"]
            .as_str()
            .unwrap_or("")
            .contains("unknown action"),
        "{body}"
    );
    let (status, _) = send(
        &ts,
        reqwest::Method::GET,
        "/nacos/nacelle/v1/audit",
        &admin,
        &[("since", "soon")],
    )
    .await?;
    assert_eq!(status, 400);
    let (status, _) = send(
        &ts,
        reqwest::Method::GET,
        "/nacos/nacelle/v1/audit",
        "",
        &[],
    )
    .await?;
    assert_eq!(status, 403);
    let (status, _) = send(
        &ts,
        reqwest::Method::GET,
        "/nacos/nacelle/v1/audit",
        &alice,
        &[],
    )
    .await?;
    assert_eq!(status, 403, "only an administrator reads the trail");

    // An untouched chain verifies, on the server and in the CLI.
    let v = server_verify(&ts, &admin).await?;
    assert_eq!(v["ok"], true, "{v}");
    let (ok, text) = cli_verify(&ts)?;
    assert!(ok, "{text}");
    assert!(text.contains("audit chain verified"), "{text}");

    // A row edited in the database: both name it.
    let db = sqlite(&ts)?;
    let original: String =
        db.query_row("SELECT detail FROM nacelle_audit WHERE seq = 3", [], |r| {
            r.get(0)
        })?;
    db.execute(
        "UPDATE nacelle_audit SET detail = 'tampered' WHERE seq = 3",
        [],
    )?;
    let (ok, text) = cli_verify(&ts)?;
    assert!(!ok, "{text}");
    assert!(text.contains("entry 3 was altered"), "{text}");
    let v = server_verify(&ts, &admin).await?;
    assert_eq!(
        (v["ok"].as_bool(), v["broken"]["seq"].as_i64()),
        (Some(false), Some(3)),
        "{v}"
    );

    // Put back, it verifies again; a row deleted: the gap is named.
    db.execute(
        "UPDATE nacelle_audit SET detail = ?1 WHERE seq = 3",
        [&original],
    )?;
    let (ok, text) = cli_verify(&ts)?;
    assert!(ok, "{text}");
    db.execute("DELETE FROM nacelle_audit WHERE seq = 5", [])?;
    // Named in words (the missing seq, the entry found after it), never as Rust's debug
    // text of the problem.
    let words = "entry 5 is missing (the next entry, 6, follows entry 4)";
    let (ok, text) = cli_verify(&ts)?;
    assert!(!ok, "{text}");
    assert!(text.contains(words), "{text}");
    assert!(!text.contains('{'), "{text}");
    let (ok, text) = cli_verify_with(&ts, &["-o", "json"])?;
    assert!(!ok, "{text}");
    let json_line = text.lines().find(|l| l.starts_with('{')).ok_or("no JSON")?;
    let j: Value = serde_json::from_str(json_line)?;
    assert_eq!(
        (&j["ok"], &j["seq"], &j["problem"], &j["message"]),
        (&json!(false), &json!(5), &json!("Missing"), &json!(words)),
        "{j}"
    );
    let v = server_verify(&ts, &admin).await?;
    assert_eq!(
        v["broken"],
        json!({"seq": 5, "problem": "Missing", "message": words}),
        "the missing entry: {v}"
    );
    Ok(())
}
