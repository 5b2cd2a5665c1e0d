//! The console API with authentication on: 403 (Nacos's auth failure) without or with bad
//! credentials, the signed-in user recorded in history, and a user with only `r` on a
//! namespace reading there but refused every write — the console grants nothing the
//! service does not. A real server started with authentication on (the testkit's
//! `secure`), everything over HTTP.

use anyhow::Context;
use nacelle_testkit::api::Reply;
use nacelle_testkit::server::{secure, TestServer, ADMIN_PASSWORD};
use serde_json::Value;

const API: &str = "/nacos/console/api";
async fn login(ts: &TestServer, user: &str, password: &str) -> anyhow::Result<String> {
    let r = ts
        .http
        .post(ts.url("/nacos/v1/auth/login"))
        .form(&[("username", user), ("password", password)])
        .send()
        .await?;
    let r = Reply::read(r).await?;
    assert_eq!(r.status, 200, "login {user}: {}", r.body);
    Ok(r.json()?["accessToken"]
        .as_str()
        .context("accessToken")?
        .to_string())
}

/// A console request with an optional bearer token.
async fn call(
    ts: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    params: &[(&str, &str)],
) -> anyhow::Result<Reply> {
    let url = if path.starts_with("/nacos/v1/") {
        ts.url(path)
    } else {
        ts.url(&format!("{API}{path}"))
    };
    let mut req = match method {
        reqwest::Method::GET | reqwest::Method::DELETE => {
            ts.http.request(method, url).query(params)
        }
        _ => ts.http.request(method, url).form(params),
    };
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    Reply::read(req.send().await?).await
}

fn refused(r: &Reply, message: &str) -> anyhow::Result<()> {
    assert_eq!(r.status, 403, "{}", r.body);
    let v: Value = r.json()?;
    let text = v["error"].as_str().or(v["message"].as_str()).unwrap_or("");
    assert!(text.contains(message), "{v} lacks {message:?}");
    Ok(())
}

const KEY: [(&str, &str); 3] = [("namespace", "ro"), ("group", "G"), ("dataId", "ro.yaml")];

#[tokio::test]
async fn without_credentials_every_console_call_is_refused() -> anyhow::Result<()> {
    use reqwest::Method as M;
    let ts = TestServer::start_with(secure).await?;
    ts.admin_token().await?;
    // The pages themselves are public (they hold no data).
    let r = ts.http.get(ts.url("/nacos/")).send().await?;
    assert_eq!(r.status(), 200);
    // One config, so that a delete by id has something to refuse.
    let admin = login(&ts, "nacos", ADMIN_PASSWORD).await?;
    let r = call(
        &ts,
        M::POST,
        "/namespaces",
        Some(&admin),
        &[("id", "ro"), ("name", "ro")],
    )
    .await?;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut publish = KEY.to_vec();
    publish.push(("content", "a: 1\n"));
    let r = call(&ts, M::POST, "/config", Some(&admin), &publish).await?;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(&ts, M::GET, "/config", Some(&admin), &KEY).await?;
    let id = r.json()?["id"].to_string();
    for (m, path, params) in [
        (M::GET, "/namespaces", &[][..]),
        (M::POST, "/namespaces", &[("id", "x"), ("name", "x")][..]),
        (M::GET, "/configs", &[][..]),
        (M::GET, "/config", &KEY[..]),
        (
            M::POST,
            "/config",
            &[
                ("namespace", "ro"),
                ("group", "G"),
                ("dataId", "a"),
                ("content", "x"),
            ][..],
        ),
        (M::DELETE, "/configs", &[("ids", id.as_str())][..]),
        (
            M::POST,
            "/validate",
            &[("type", "yaml"), ("content", "a: 1")][..],
        ),
        (M::POST, "/diff", &[("old", "a"), ("new", "b")][..]),
        (M::GET, "/history", &KEY[..]),
        (M::GET, "/grays", &KEY[..]),
        (M::GET, "/listeners", &KEY[..]),
        (M::GET, "/listeners/ip", &[("ip", "127.0.0.1")][..]),
        (M::GET, "/cluster", &[][..]),
    ] {
        let r = call(&ts, m.clone(), path, None, params).await?;
        refused(&r, "user not found!").with_context(|| format!("{m} {path}"))?;
        let r = call(&ts, m.clone(), path, Some("not.a.token"), params).await?;
        refused(&r, "token invalid!").with_context(|| format!("{m} {path} bad token"))?;
    }
    Ok(())
}

#[tokio::test]
async fn a_reader_reads_but_cannot_write_and_history_names_the_user() -> anyhow::Result<()> {
    use reqwest::Method as M;
    let ts = TestServer::start_with(secure).await?;
    ts.admin_token().await?;
    let admin = login(&ts, "nacos", ADMIN_PASSWORD).await?;
    let ok = |r: Reply| -> anyhow::Result<Value> {
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    ok(call(
        &ts,
        M::POST,
        "/namespaces",
        Some(&admin),
        &[("id", "ro"), ("name", "Read only")],
    )
    .await?)?;
    ok(call(
        &ts,
        M::POST,
        "/namespaces",
        Some(&admin),
        &[("id", "other"), ("name", "Other")],
    )
    .await?)?;
    let mut publish = KEY.to_vec();
    publish.extend([("content", "a: 1\n"), ("type", "yaml")]);
    ok(call(&ts, M::POST, "/config", Some(&admin), &publish).await?)?;
    ok(call(
        &ts,
        M::POST,
        "/config",
        Some(&admin),
        &[
            ("namespace", "other"),
            ("group", "G"),
            ("dataId", "secret.yaml"),
            ("content", "s: 1\n"),
        ],
    )
    .await?)?;
    // Through Nacos's admin API, as the users page does.
    for (path, params) in [
        (
            "/nacos/v1/auth/users",
            &[("username", "reader"), ("password", "reader-pass-1")][..],
        ),
        (
            "/nacos/v1/auth/roles",
            &[("role", "ro-reader"), ("username", "reader")][..],
        ),
        (
            "/nacos/v1/auth/permissions",
            &[
                ("role", "ro-reader"),
                ("resource", "ro:*:*"),
                ("action", "r"),
            ][..],
        ),
    ] {
        let r = call(&ts, M::POST, path, Some(&admin), params).await?;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    // History records the signed-in user.
    let h = ok(call(&ts, M::GET, "/history", Some(&admin), &KEY).await?)?;
    assert_eq!(h["items"][0]["srcUser"], "nacos", "{h}");

    let reader = login(&ts, "reader", "reader-pass-1").await?;
    let t = Some(reader.as_str());
    // Reads in its namespace.
    let cfg = ok(call(&ts, M::GET, "/config", t, &KEY).await?)?;
    assert_eq!(cfg["content"], "a: 1\n");
    ok(call(&ts, M::GET, "/history", t, &KEY).await?)?;
    ok(call(
        &ts,
        M::POST,
        "/validate",
        t,
        &[("type", "yaml"), ("content", "a: 1")],
    )
    .await?)?;
    let list = ok(call(&ts, M::GET, "/configs", t, &[("namespace", "ro")]).await?)?;
    assert_eq!(list["total"], 1);
    // Sees neither the other namespace's configs nor (in the list) the namespace.
    let list = ok(call(&ts, M::GET, "/configs", t, &[("namespace", "other")]).await?)?;
    assert_eq!(list["total"], 0, "{list}");
    let r = call(
        &ts,
        M::GET,
        "/config",
        t,
        &[
            ("namespace", "other"),
            ("group", "G"),
            ("dataId", "secret.yaml"),
        ],
    )
    .await?;
    refused(&r, "authorization failed!")?;
    let ns = ok(call(&ts, M::GET, "/namespaces", t, &[]).await?)?;
    let ids: Vec<&str> = ns
        .as_array()
        .context("list")?
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert!(ids.contains(&"ro") && !ids.contains(&"other"), "{ns}");

    // Every write is refused, with nothing written.
    let mut edit = KEY.to_vec();
    edit.extend([
        ("content", "a: 2\n"),
        ("casMd5", cfg["md5"].as_str().unwrap_or("")),
    ]);
    refused(
        &call(&ts, M::POST, "/config", t, &edit).await?,
        "authorization failed!",
    )?;
    refused(
        &call(
            &ts,
            M::PUT,
            "/namespaces",
            t,
            &[("id", "ro"), ("name", "renamed")],
        )
        .await?,
        "authorization failed!",
    )?;
    refused(
        &call(
            &ts,
            M::DELETE,
            "/namespaces",
            t,
            &[("id", "ro"), ("confirm", "true")],
        )
        .await?,
        "authorization failed!",
    )?;
    let id = cfg["id"].to_string();
    let r = call(&ts, M::DELETE, "/configs", t, &[("ids", &id)]).await?;
    refused(&r, "authorization failed!")?;
    let mut rollback = KEY.to_vec();
    let nid = h["items"][0]["nid"].to_string();
    rollback.push(("nid", &nid));
    refused(
        &call(&ts, M::POST, "/history/rollback", t, &rollback).await?,
        "authorization failed!",
    )?;
    let mut gray = KEY.to_vec();
    gray.extend([("by", "ips"), ("ips", "10.0.0.1"), ("content", "a: 3\n")]);
    refused(
        &call(&ts, M::POST, "/grays", t, &gray).await?,
        "authorization failed!",
    )?;
    // The users page's API is the administrator's.
    let r = call(
        &ts,
        M::GET,
        "/nacos/v1/auth/users",
        t,
        &[("pageNo", "1"), ("pageSize", "10")],
    )
    .await?;
    assert_eq!(r.status, 403, "{}", r.body);
    let after = ok(call(&ts, M::GET, "/config", Some(&admin), &KEY).await?)?;
    assert_eq!(after["content"], "a: 1\n");
    Ok(())
}

/// The member list (`GET /nacos/v1/core/cluster/nodes`, the console's `/cluster`) is an
/// administrator's, as in Nacos 2.5.1 (`NacosClusterController`: `@Secured(resource =
/// "/v1/core/cluster", action = READ)`): refused anonymously (also with anonymous reads
/// on), and to a user holding `rw` on every namespace; granted to an administrator, to a
/// user whose permission names `/v1/core/cluster`, and to a member presenting the cluster
/// secret (a wrong secret is refused).
#[tokio::test]
async fn the_member_list_is_for_administrators_and_members() -> anyhow::Result<()> {
    use reqwest::Method as M;
    const SECRET: &str = "console-auth-cluster-secret-42";
    let ts = TestServer::start_with(|s| {
        secure(s);
        s.auth.anonymous_read = true;
        s.cluster_secret = Some(SECRET.into());
    })
    .await?;
    ts.admin_token().await?;
    let admin = login(&ts, "nacos", ADMIN_PASSWORD).await?;
    for (path, params) in [
        (
            "/nacos/v1/auth/users",
            &[("username", "writer"), ("password", "writer-pass-1")][..],
        ),
        (
            "/nacos/v1/auth/users",
            &[("username", "ops"), ("password", "ops-pass-123")][..],
        ),
        (
            "/nacos/v1/auth/roles",
            &[("role", "everything"), ("username", "writer")][..],
        ),
        (
            "/nacos/v1/auth/permissions",
            &[
                ("role", "everything"),
                ("resource", "*:*:*"),
                ("action", "rw"),
            ][..],
        ),
        (
            "/nacos/v1/auth/permissions",
            &[
                ("role", "everything"),
                ("resource", ":*:*"),
                ("action", "rw"),
            ][..],
        ),
        (
            "/nacos/v1/auth/roles",
            &[("role", "cluster-viewer"), ("username", "ops")][..],
        ),
        (
            "/nacos/v1/auth/permissions",
            &[
                ("role", "cluster-viewer"),
                ("resource", "/v1/core/cluster"),
                ("action", "r"),
            ][..],
        ),
    ] {
        let r = call(&ts, M::POST, path, Some(&admin), params).await?;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    let writer = login(&ts, "writer", "writer-pass-1").await?;
    let ops = login(&ts, "ops", "ops-pass-123").await?;
    for path in ["/nacos/v1/core/cluster/nodes", "/cluster"] {
        // v1 answers Nacos's `{"error":"Forbidden","message":…}`, the console `{error}`.
        let r = call(&ts, M::GET, path, None, &[]).await?;
        assert_eq!(r.status, 403, "{path} anonymous: {}", r.body);
        assert!(r.body.contains("user not found!"), "{path}: {}", r.body);
        let r = call(&ts, M::GET, path, Some(&writer), &[]).await?;
        assert_eq!(r.status, 403, "{path} writer: {}", r.body);
        assert!(
            r.body.contains("authorization failed!"),
            "{path}: {}",
            r.body
        );
        for who in [&admin, &ops] {
            let r = call(&ts, M::GET, path, Some(who), &[]).await?;
            assert_eq!(r.status, 200, "{path}: {}", r.body);
        }
    }
    // The node alone lists itself.
    let r = call(
        &ts,
        M::GET,
        "/nacos/v1/core/cluster/nodes",
        Some(&admin),
        &[],
    )
    .await?;
    let v: Value = r.json()?;
    assert_eq!(v["data"][0]["state"], "UP", "{v}");
    // A member: the cluster secret, no user.
    let nodes = ts.url("/nacos/v1/core/cluster/nodes");
    for (secret, status) in [(SECRET, 200), ("wrong-secret-wrong-secret", 403)] {
        let r = ts
            .http
            .get(&nodes)
            .header("Nacelle-Cluster-Secret", secret)
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), status, "secret {secret}");
    }
    Ok(())
}
