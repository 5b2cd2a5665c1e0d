//! The console's JSON API (`/nacos/console/api/…`) and pages (`/nacos/`) over real
//! sockets: namespaces, config search/read/publish with compare-and-set, delete of a
//! selection, validation with line and column, server-side diffs, history and rollback,
//! gray release with the listeners each gray reaches, listener views, the cluster view —
//! and their error paths (missing and invalid parameters, unknown things, conflicts), each
//! answered as JSON `{error, status}`. Authentication paths (401/403) come with the auth
//! layer (see docs/console.md).

use std::time::Duration;

use anyhow::Context;
use nacelle_testkit::api::{listening_configs, Reply};
use nacelle_testkit::server::TestServer;
use serde_json::Value;

const API: &str = "/nacos/console/api";

async fn get(ts: &TestServer, path: &str, q: &[(&str, &str)]) -> anyhow::Result<Reply> {
    let r = ts
        .http
        .get(ts.url(&format!("{API}{path}")))
        .query(q)
        .send()
        .await?;
    Reply::read(r).await
}

async fn send(
    ts: &TestServer,
    method: reqwest::Method,
    path: &str,
    form: &[(&str, &str)],
) -> anyhow::Result<Reply> {
    let url = ts.url(&format!("{API}{path}"));
    let req = if method == reqwest::Method::DELETE {
        ts.http.delete(url).query(form)
    } else {
        ts.http.request(method, url).form(form)
    };
    Reply::read(req.send().await?).await
}

async fn post(ts: &TestServer, path: &str, form: &[(&str, &str)]) -> anyhow::Result<Reply> {
    send(ts, reqwest::Method::POST, path, form).await
}

/// The JSON of a reply with status `status`.
fn expect(r: &Reply, status: u16) -> anyhow::Result<Value> {
    assert_eq!(r.status, status, "{}", r.body);
    r.json()
}

/// An error reply: `status`, JSON `{error, status}`, the message containing `part`.
fn expect_error(r: &Reply, status: u16, part: &str) -> anyhow::Result<Value> {
    let v = expect(r, status)?;
    assert_eq!(v["status"], status, "{v}");
    let msg = v["error"].as_str().context("error message")?;
    assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    Ok(v)
}

const KEY: [(&str, &str); 3] = [
    ("namespace", ""),
    ("group", "DEFAULT_GROUP"),
    ("dataId", "app.yaml"),
];

fn with<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut v = KEY.to_vec();
    v.extend_from_slice(extra);
    v
}

#[tokio::test]
async fn pages_are_served_and_apis_not_shadowed() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    for path in ["/", "/nacos"] {
        let r = no_redirect.get(ts.url(path)).send().await?;
        assert_eq!(r.status(), 307, "{path}");
        assert_eq!(r.headers()["location"], "/nacos/", "{path}");
    }
    let r = ts.http.get(ts.url("/nacos/")).send().await?;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()?
        .starts_with("text/html"));
    let csp = r.headers()["content-security-policy"].to_str()?.to_string();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    // The editor's <style> is admitted by a nonce the page holds, fresh for each load.
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .context("a style nonce in the policy")?
        .to_string();
    assert_eq!(nonce.len(), 32, "{csp}");
    assert!(csp.contains("script-src 'self';"), "no script nonce: {csp}");
    let page = r.text().await?;
    assert!(page.contains("/nacos/assets/app.js"));
    assert!(
        page.contains(&format!("name=\"csp-nonce\" content=\"{nonce}\"")),
        "{page}"
    );
    let again = ts.http.get(ts.url("/nacos/index.html")).send().await?;
    let csp2 = again.headers()["content-security-policy"]
        .to_str()?
        .to_string();
    assert!(!csp2.contains(&nonce), "the nonce is reused: {csp2}");
    for asset in ["app.js", "editor.bundle.js"] {
        let r = ts
            .http
            .get(ts.url(&format!("/nacos/assets/{asset}")))
            .send()
            .await?;
        assert_eq!(r.status(), 200);
        assert!(r.headers()["content-type"]
            .to_str()?
            .starts_with("text/javascript"));
        // Every asset with the same caching: revalidated on each load.
        assert_eq!(r.headers()["cache-control"], "no-cache", "{asset}");
    }
    // Unknown assets and console paths are 404; the Nacos APIs still answer.
    let r = ts.http.get(ts.url("/nacos/assets/nope.js")).send().await?;
    assert_eq!(r.status(), 404);
    let r = get(&ts, "/nope", &[]).await?;
    assert_eq!(r.status, 404);
    ts.publish("", "DEFAULT_GROUP", "app.yaml", "a: 1\n")
        .await?;
    let r = ts.get("", "DEFAULT_GROUP", "app.yaml").await?;
    assert_eq!(r.as_deref(), Some("a: 1\n"));
    let r = ts.http.get(ts.url("/metrics")).send().await?;
    let text = r.text().await?;
    assert!(
        text.contains("route=\"/nacos/ (console pages)\""),
        "console pages not labelled"
    );
    Ok(())
}

#[tokio::test]
async fn namespaces_create_edit_delete() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    let list = expect(&get(&ts, "/namespaces", &[]).await?, 200)?;
    assert_eq!(list[0]["id"], "");
    assert_eq!(list[0]["builtin"], true);

    let r = post(
        &ts,
        "/namespaces",
        &[("id", "dev"), ("name", "Dev"), ("desc", "d")],
    )
    .await?;
    assert_eq!(expect(&r, 200)?["id"], "dev");
    let r = post(&ts, "/namespaces", &[("id", "dev"), ("name", "Dev")]).await?;
    expect_error(&r, 409, "dev")?;
    let r = post(&ts, "/namespaces", &[("id", "bad id!"), ("name", "x")]).await?;
    expect_error(&r, 400, "illegal namespace id")?;
    let r = post(&ts, "/namespaces", &[("id", "x")]).await?;
    expect_error(&r, 400, "'name'")?;
    // A blank id gets one.
    let r = post(&ts, "/namespaces", &[("name", "Random")]).await?;
    let random = expect(&r, 200)?["id"].as_str().context("id")?.to_string();
    assert_eq!(random.len(), 36, "{random}");

    let r = send(
        &ts,
        reqwest::Method::PUT,
        "/namespaces",
        &[("id", "dev"), ("name", "Development")],
    )
    .await?;
    expect(&r, 200)?;
    let r = send(
        &ts,
        reqwest::Method::PUT,
        "/namespaces",
        &[("id", "ghost"), ("name", "G")],
    )
    .await?;
    expect_error(&r, 404, "ghost")?;

    ts.publish("dev", "DEFAULT_GROUP", "a.yaml", "a: 1\n")
        .await?;
    let list = expect(&get(&ts, "/namespaces", &[]).await?, 200)?;
    let dev = list
        .as_array()
        .context("list")?
        .iter()
        .find(|n| n["id"] == "dev")
        .context("dev listed")?
        .clone();
    assert_eq!(dev["name"], "Development");
    assert_eq!(dev["configCount"], 1);

    // Not empty: refused without confirmation, deleted with it.
    let r = send(
        &ts,
        reqwest::Method::DELETE,
        "/namespaces",
        &[("id", "dev")],
    )
    .await?;
    expect_error(&r, 409, "holds 1 configs")?;
    let r = send(
        &ts,
        reqwest::Method::DELETE,
        "/namespaces",
        &[("id", "dev"), ("confirm", "true")],
    )
    .await?;
    expect(&r, 200)?;
    let r = send(
        &ts,
        reqwest::Method::DELETE,
        "/namespaces",
        &[("id", "dev")],
    )
    .await?;
    expect_error(&r, 404, "dev")?;
    let r = send(&ts, reqwest::Method::DELETE, "/namespaces", &[("id", "")]).await?;
    expect_error(&r, 400, "default namespace")?;
    Ok(())
}

#[tokio::test]
async fn configs_search_read_publish_cas_delete() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    for (id, app) in [
        ("shop-a.yaml", "shop"),
        ("shop-b.yaml", "shop"),
        ("pay.yaml", "pay"),
    ] {
        let form = [
            ("dataId", id),
            ("group", "G"),
            ("content", "k: v\n"),
            ("type", "yaml"),
            ("appName", app),
        ];
        let r = ts
            .http
            .post(ts.url("/nacos/v1/cs/configs"))
            .form(&form)
            .send()
            .await?;
        assert_eq!(r.status(), 200);
    }
    let page = expect(&get(&ts, "/configs", &[("dataId", "shop-*")]).await?, 200)?;
    assert_eq!(page["total"], 2);
    assert_eq!(page["items"][0]["type"], "yaml");
    assert!(page["items"][0]["modified"].as_i64().unwrap_or(0) > 0);
    let page = expect(&get(&ts, "/configs", &[("appName", "pay")]).await?, 200)?;
    assert_eq!(page["total"], 1);
    let page = expect(
        &get(&ts, "/configs", &[("pageSize", "1"), ("pageNo", "2")]).await?,
        200,
    )?;
    assert_eq!(
        (page["total"].as_u64(), page["pages"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
    let r = get(&ts, "/configs", &[("pageSize", "0")]).await?;
    expect_error(&r, 400, "pageSize")?;
    let r = get(&ts, "/configs", &[("namespace", "bad ns!")]).await?;
    assert_eq!(r.status, 400, "{}", r.body);

    // Read and publish with compare-and-set.
    let r = get(&ts, "/config", &KEY).await?;
    expect_error(&r, 404, "does not exist")?;
    let r = get(&ts, "/config", &[("dataId", "x")]).await?;
    expect_error(&r, 400, "'group'")?;
    let r = post(
        &ts,
        "/config",
        &with(&[("content", "a: 1\n"), ("type", "yaml"), ("casMd5", "")]),
    )
    .await?;
    let md5_1 = expect(&r, 200)?["md5"].as_str().context("md5")?.to_string();
    let r = post(
        &ts,
        "/config",
        &with(&[("content", "a: 9\n"), ("casMd5", "")]),
    )
    .await?;
    // casMd5 "" means "must not exist yet": a second creation is a conflict.
    assert_eq!(expect(&r, 409)?["conflict"], true);
    let cfg = expect(&get(&ts, "/config", &KEY).await?, 200)?;
    assert_eq!(
        (cfg["content"].as_str(), cfg["type"].as_str()),
        (Some("a: 1\n"), Some("yaml"))
    );
    assert_eq!(cfg["md5"], md5_1.as_str());
    let r = post(
        &ts,
        "/config",
        &with(&[("content", "a: 2\n"), ("type", "yaml"), ("casMd5", &md5_1)]),
    )
    .await?;
    expect(&r, 200)?;
    // A second editor still holding the first version is refused: conflict, nothing written.
    let r = post(
        &ts,
        "/config",
        &with(&[("content", "a: 3\n"), ("type", "yaml"), ("casMd5", &md5_1)]),
    )
    .await?;
    let v = expect(&r, 409)?;
    assert_eq!(v["conflict"], true, "{v}");
    assert_eq!(
        ts.get("", "DEFAULT_GROUP", "app.yaml").await?.as_deref(),
        Some("a: 2\n")
    );
    let r = post(&ts, "/config", &with(&[])).await?;
    expect_error(&r, 400, "'content'")?;
    let r = post(
        &ts,
        "/config",
        &[("dataId", "bad id!"), ("group", "G"), ("content", "x")],
    )
    .await?;
    expect_error(&r, 400, "dataId")?;

    // Delete a selection.
    let ids: Vec<String> = expect(&get(&ts, "/configs", &[("group", "G")]).await?, 200)?["items"]
        .as_array()
        .context("items")?
        .iter()
        .take(2)
        .map(|c| c["id"].to_string())
        .collect();
    let joined = ids.join(",");
    let r = send(
        &ts,
        reqwest::Method::DELETE,
        "/configs",
        &[("ids", &joined)],
    )
    .await?;
    assert_eq!(expect(&r, 200)?["removed"], 2);
    let page = expect(&get(&ts, "/configs", &[("group", "G")]).await?, 200)?;
    assert_eq!(page["total"], 1);
    let r = send(&ts, reqwest::Method::DELETE, "/configs", &[("ids", "1,x")]).await?;
    expect_error(&r, 400, "invalid id")?;
    let r = send(&ts, reqwest::Method::DELETE, "/configs", &[("ids", " ")]).await?;
    expect_error(&r, 400, "no config selected")?;
    Ok(())
}

#[tokio::test]
async fn validate_by_type_with_line_and_column() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    let v = expect(
        &post(
            &ts,
            "/validate",
            &[("type", "yaml"), ("content", "a: 1\nb: [2\n")],
        )
        .await?,
        200,
    )?;
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["type"], "yaml");
    assert!(v["line"].as_u64().is_some(), "{v}");
    assert!(!v["message"].as_str().unwrap_or("").is_empty());
    let v = expect(
        &post(
            &ts,
            "/validate",
            &[("type", "json"), ("content", "{\n  \"a\": 1,\n}")],
        )
        .await?,
        200,
    )?;
    assert_eq!(
        (v["ok"].as_bool(), v["line"].as_u64()),
        (Some(false), Some(3)),
        "{v}"
    );
    let v = expect(
        &post(
            &ts,
            "/validate",
            &[("type", "json"), ("content", "{\"a\": 1}")],
        )
        .await?,
        200,
    )?;
    assert_eq!(v["ok"], true);
    for (ty, bad) in [
        ("xml", "<a><b></a>"),
        ("toml", "a = = 1"),
        ("properties", "a=\\u12"),
    ] {
        let v = expect(
            &post(&ts, "/validate", &[("type", ty), ("content", bad)]).await?,
            200,
        )?;
        assert_eq!(v["ok"], false, "{ty}: {v}");
    }
    // Unknown types are text, which is always valid.
    let v = expect(
        &post(&ts, "/validate", &[("type", "cobol"), ("content", "{[")]).await?,
        200,
    )?;
    assert_eq!(
        (v["ok"].as_bool(), v["type"].as_str()),
        (Some(true), Some("text"))
    );
    let r = post(&ts, "/validate", &[("type", "yaml")]).await?;
    expect_error(&r, 400, "'content'")?;
    Ok(())
}

/// The console's search ignores case (the service's `SearchMode::BlurIgnoreCase`), in
/// dataId, group and appName; Nacos's own v1 blur search stays case-sensitive.
#[tokio::test]
async fn console_search_ignores_case() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    for (group, data_id, app) in [
        ("Shop_Group", "Order-Service.YAML", "Checkout"),
        ("shop_group", "stock.yaml", "warehouse"),
        ("OTHER", "unrelated.yaml", ""),
    ] {
        let r = post(
            &ts,
            "/config",
            &[
                ("namespace", ""),
                ("group", group),
                ("dataId", data_id),
                ("content", "a: 1"),
                ("type", "yaml"),
                ("appName", app),
            ],
        )
        .await?;
        expect(&r, 200)?;
    }
    let ids = |v: &Value| -> Vec<String> {
        let mut ids: Vec<String> = v["items"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|i| i["dataId"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    };
    let v = expect(
        &get(&ts, "/configs", &[("dataId", "*order-service*")]).await?,
        200,
    )?;
    assert_eq!(ids(&v), ["Order-Service.YAML"], "{v}");
    let v = expect(
        &get(&ts, "/configs", &[("group", "*SHOP_GROUP*")]).await?,
        200,
    )?;
    assert_eq!(ids(&v), ["Order-Service.YAML", "stock.yaml"], "{v}");
    let v = expect(
        &get(&ts, "/configs", &[("appName", "*CHECKOUT*")]).await?,
        200,
    )?;
    assert_eq!(ids(&v), ["Order-Service.YAML"], "{v}");
    let v = expect(&get(&ts, "/configs", &[("dataId", "*.yaml")]).await?, 200)?;
    assert_eq!(v["total"], 3, "{v}");
    // Nacos's v1 blur search: case-sensitive, as on Nacos.
    let r = ts
        .http
        .get(ts.url("/nacos/v1/cs/configs"))
        .query(&[
            ("search", "blur"),
            ("dataId", "*order-service*"),
            ("group", ""),
            ("pageNo", "1"),
            ("pageSize", "10"),
        ])
        .send()
        .await?;
    let v: Value = r.json().await?;
    assert_eq!(v["totalCount"], 0, "{v}");
    Ok(())
}

/// `/validate` says what a publish of invalid content into the namespace does (the
/// server's `content_validation` for it), so the page blocks, asks, or says nothing; and a
/// config stored invalid under `warn` is read back and fixed through the console.
#[tokio::test]
async fn validate_reports_the_namespace_validation_mode() -> anyhow::Result<()> {
    let ts = TestServer::start_with(|s| {
        s.content_validation = nacelle_core::ValidationPolicy::parse(
            nacelle_core::ValidationMode::Warn,
            "prod=reject,dev=off",
        )
        .expect("policy");
    })
    .await?;
    for (ns, mode) in [("", "warn"), ("prod", "reject"), ("dev", "off")] {
        let v = expect(
            &post(
                &ts,
                "/validate",
                &[("namespace", ns), ("type", "yaml"), ("content", "a: [1\n")],
            )
            .await?,
            200,
        )?;
        assert_eq!(
            (v["ok"].as_bool(), v["mode"].as_str()),
            (Some(false), Some(mode)),
            "{ns}: {v}"
        );
    }
    let bad = post(
        &ts,
        "/validate",
        &[("namespace", "a b"), ("type", "yaml"), ("content", "a: 1")],
    )
    .await?;
    expect_error(&bad, 400, "a b")?;
    // Warn: invalid content is stored; the console reads it back and publishes the fix.
    let stored = post(
        &ts,
        "/config",
        &with(&[("content", "a: [1\n"), ("type", "yaml")]),
    )
    .await?;
    let md5 = expect(&stored, 200)?["md5"]
        .as_str()
        .context("md5")?
        .to_string();
    let read = expect(&get(&ts, "/config", &KEY).await?, 200)?;
    assert_eq!(read["content"], "a: [1\n");
    let fixed = post(
        &ts,
        "/config",
        &with(&[("content", "a: [1]\n"), ("type", "yaml"), ("casMd5", &md5)]),
    )
    .await?;
    expect(&fixed, 200)?;
    // Reject: the same content is refused with the parser's reason.
    let refused = post(
        &ts,
        "/config",
        &[
            ("namespace", "prod"),
            ("group", "G"),
            ("dataId", "a.yaml"),
            ("content", "a: [1\n"),
            ("type", "yaml"),
        ],
    )
    .await?;
    assert_eq!(refused.status, 400, "{}", refused.body);
    Ok(())
}

#[tokio::test]
async fn diff_history_and_rollback() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    let d = expect(
        &post(
            &ts,
            "/diff",
            &[("old", "a: 1\nb: 2\n"), ("new", "a: 1\nb: 3\n")],
        )
        .await?,
        200,
    )?;
    let text = d["diff"].as_str().context("diff")?;
    assert!(text.contains("-b: 2\n+b: 3\n"), "{text}");
    assert_eq!(d["changed"], true);
    let d = expect(
        &post(&ts, "/diff", &[("old", "x"), ("new", "x")]).await?,
        200,
    )?;
    assert_eq!(
        (d["diff"].as_str(), d["changed"].as_bool()),
        (Some(""), Some(false))
    );

    for v in ["v: 1\n", "v: 2\n", "v: 3\n"] {
        let r = post(&ts, "/config", &with(&[("content", v), ("type", "yaml")])).await?;
        expect(&r, 200)?;
    }
    let page = expect(&get(&ts, "/history", &KEY).await?, 200)?;
    assert_eq!(page["total"], 3, "{page}");
    let items = page["items"].as_array().context("items")?;
    assert!(
        items[0]["srcIp"]
            .as_str()
            .is_some_and(|ip| ip == "127.0.0.1"),
        "{page}"
    );
    assert!(items[0].get("content").is_none(), "pages carry no content");
    let nids: Vec<String> = items.iter().map(|h| h["nid"].to_string()).collect();
    // Newest first; each row holds the version its operation replaced (Nacos's layout):
    // the oldest row is the insert of v: 1.
    let oldest = nids.last().context("oldest")?.clone();
    let e = expect(
        &get(&ts, "/history/entry", &with(&[("nid", &oldest)])).await?,
        200,
    )?;
    assert_eq!(
        (e["content"].as_str(), e["op"].as_str()),
        (Some("v: 1\n"), Some("I"))
    );
    let d = expect(
        &post(&ts, "/diff", &with(&[("from", &oldest), ("to", "current")])).await?,
        200,
    )?;
    assert!(
        d["diff"].as_str().unwrap_or("").contains("-v: 1\n+v: 3\n"),
        "{d}"
    );
    let d = expect(
        &post(&ts, "/diff", &with(&[("from", &nids[1]), ("to", &nids[0])])).await?,
        200,
    )?;
    assert_eq!(d["changed"], true, "{d}");

    // Errors: another key's version, a bad version, a missing one.
    let r = get(
        &ts,
        "/history/entry",
        &[
            ("namespace", ""),
            ("group", "DEFAULT_GROUP"),
            ("dataId", "other.yaml"),
            ("nid", &oldest),
        ],
    )
    .await?;
    expect_error(&r, 404, "does not exist")?;
    let r = post(&ts, "/diff", &with(&[("from", "abc"), ("to", "current")])).await?;
    expect_error(&r, 400, "invalid version")?;
    let r = post(
        &ts,
        "/diff",
        &with(&[("from", "999999"), ("to", "current")]),
    )
    .await?;
    expect_error(&r, 404, "999999")?;
    let r = post(&ts, "/diff", &with(&[("from", "current")])).await?;
    expect_error(&r, 400, "'to'")?;

    // Rollback compares-and-sets on the version the page showed, then publishes the
    // version's content, keeping the type.
    let stale = [
        ("nid", oldest.as_str()),
        ("casMd5", "0123456789abcdef0123456789abcdef"),
    ];
    let r = post(&ts, "/history/rollback", &with(&stale)).await?;
    assert_eq!(expect(&r, 409)?["conflict"], true);
    let r = post(&ts, "/history/rollback", &with(&[("nid", &oldest)])).await?;
    expect(&r, 200)?;
    let cfg = expect(&get(&ts, "/config", &KEY).await?, 200)?;
    assert_eq!(
        (cfg["content"].as_str(), cfg["type"].as_str()),
        (Some("v: 1\n"), Some("yaml"))
    );
    let r = post(&ts, "/history/rollback", &with(&[("nid", "0")])).await?;
    expect_error(&r, 404, "history entry 0")?;
    Ok(())
}

#[tokio::test]
async fn gray_release_with_the_listeners_it_reaches() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    let r = post(
        &ts,
        "/grays",
        &with(&[("by", "ips"), ("ips", "127.0.0.1"), ("content", "x")]),
    )
    .await?;
    expect_error(&r, 404, "publish it before a gray")?;
    let r = post(
        &ts,
        "/config",
        &with(&[("content", "v: formal\n"), ("type", "yaml")]),
    )
    .await?;
    let formal_md5 = expect(&r, 200)?["md5"].as_str().context("md5")?.to_string();

    // A long poll from 127.0.0.1 holding the formal version, with an app name.
    let lc = listening_configs(&[("app.yaml", "DEFAULT_GROUP", &formal_md5, None)]);
    let poll = {
        let http = ts.http.clone();
        let url = ts.url("/nacos/v1/cs/configs/listener");
        tokio::spawn(async move {
            http.post(url)
                .header("Long-Pulling-Timeout", "30000")
                .header("Client-AppName", "shop")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await
        })
    };
    ts.wait_listener("", "DEFAULT_GROUP", "app.yaml", Duration::from_secs(10))
        .await?;
    let ls = expect(&get(&ts, "/listeners", &KEY).await?, 200)?;
    let l = &ls[0];
    assert_eq!(
        (l["ip"].as_str(), l["app"].as_str(), l["transport"].as_str()),
        (Some("127.0.0.1"), Some("shop"), Some("http-v1")),
        "{ls}"
    );
    assert_eq!(
        (l["inSync"].as_bool(), l["gray"].as_str()),
        (Some(true), None),
        "{ls}"
    );
    let by_ip = expect(
        &get(&ts, "/listeners/ip", &[("ip", "127.0.0.1")]).await?,
        200,
    )?;
    assert_eq!(by_ip[0]["dataId"], "app.yaml", "{by_ip}");
    let r = get(&ts, "/listeners/ip", &[("ip", "not-an-ip")]).await?;
    expect_error(&r, 400, "invalid ip")?;

    // Bad gray requests.
    let r = post(&ts, "/grays", &with(&[("by", "moon"), ("content", "x")])).await?;
    expect_error(&r, 400, "invalid by")?;
    let r = post(
        &ts,
        "/grays",
        &with(&[("by", "ips"), ("ips", "999.1.1.1"), ("content", "x")]),
    )
    .await?;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post(
        &ts,
        "/grays",
        &with(&[
            ("by", "labels"),
            ("name", "beta"),
            ("expr", "a=b"),
            ("content", "x"),
        ]),
    )
    .await?;
    expect_error(&r, 400, "reserved")?;
    let r = post(
        &ts,
        "/grays",
        &with(&[("by", "app"), ("app", "shop"), ("content", "x")]),
    )
    .await?;
    expect_error(&r, 400, "'name'")?;

    // A gray by app name reaches the poll (its app is shop); the poll is told at once.
    let r = post(
        &ts,
        "/grays",
        &with(&[
            ("by", "app"),
            ("app", "shop"),
            ("name", "shop-canary"),
            ("content", "v: canary\n"),
        ]),
    )
    .await?;
    expect(&r, 200)?;
    let woke = poll.await??;
    assert_eq!(woke.status(), 200);
    // A beta for another IP reaches nobody.
    let r = post(
        &ts,
        "/grays",
        &with(&[("by", "ips"), ("ips", "10.9.9.9"), ("content", "v: beta\n")]),
    )
    .await?;
    expect(&r, 200)?;
    let list = expect(&get(&ts, "/grays", &KEY).await?, 200)?;
    let grays = list["grays"].as_array().context("grays")?;
    assert_eq!(grays.len(), 2, "{list}");
    assert_eq!(
        (grays[0]["name"].as_str(), grays[0]["kind"].as_str()),
        (Some("beta"), Some("beta"))
    );
    assert_eq!(grays[0]["expr"], "10.9.9.9");
    assert_eq!(grays[1]["expr"], "AppName=shop");
    assert_eq!(grays[1]["content"], "v: canary\n");

    // A listener of the app holding the canary version now: matched by the canary.
    let canary_md5 = grays[1]["md5"].as_str().context("md5")?.to_string();
    let lc = listening_configs(&[("app.yaml", "DEFAULT_GROUP", &canary_md5, None)]);
    let poll = {
        let http = ts.http.clone();
        let url = ts.url("/nacos/v1/cs/configs/listener");
        tokio::spawn(async move {
            http.post(url)
                .header("Long-Pulling-Timeout", "30000")
                .header("Client-AppName", "shop")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await
        })
    };
    ts.wait_listener("", "DEFAULT_GROUP", "app.yaml", Duration::from_secs(10))
        .await?;
    let list = expect(&get(&ts, "/grays", &KEY).await?, 200)?;
    let reached = &list["grays"][1]["listeners"];
    assert_eq!(reached[0]["app"], "shop", "{list}");
    assert_eq!(reached[0]["inSync"], true, "{list}");
    assert_eq!(
        list["grays"][0]["listeners"].as_array().map(Vec::len),
        Some(0)
    );
    assert_eq!(list["formalListeners"], 0);

    // Abandon the beta; promote the canary.
    let r = post(&ts, "/grays/abandon", &with(&[("name", "beta")])).await?;
    expect(&r, 200)?;
    let r = post(&ts, "/grays/abandon", &with(&[("name", "beta")])).await?;
    expect_error(&r, 404, "no gray `beta`")?;
    let r = post(&ts, "/grays/promote", &with(&[("name", "shop-canary")])).await?;
    expect(&r, 200)?;
    let r = post(&ts, "/grays/promote", &with(&[("name", "shop-canary")])).await?;
    assert_eq!(r.status, 404, "{}", r.body);
    let cfg = expect(&get(&ts, "/config", &KEY).await?, 200)?;
    assert_eq!(cfg["content"], "v: canary\n");
    let list = expect(&get(&ts, "/grays", &KEY).await?, 200)?;
    assert_eq!(list["grays"].as_array().map(Vec::len), Some(0));
    // The poll held the canary, which is now the formal version: it was not woken.
    assert!(!poll.is_finished());
    poll.abort();

    // The gray operations in the history, newest first, with name, rule and operator; paged.
    let log = expect(&get(&ts, "/history/gray", &KEY).await?, 200)?;
    let items = log["items"].as_array().context("items")?;
    assert!(items.len() >= 4, "{log}");
    assert_eq!(log["total"].as_u64(), Some(items.len() as u64), "{log}");
    let names: Vec<&str> = items
        .iter()
        .filter_map(|i| i["grayName"].as_str())
        .collect();
    assert!(
        names.contains(&"beta") && names.contains(&"shop-canary"),
        "{log}"
    );
    let canary = items
        .iter()
        .find(|i| i["grayName"] == "shop-canary")
        .context("a canary row")?;
    assert_eq!(canary["ruleExpr"], "AppName=shop", "{log}");
    assert!(
        canary["op"].is_string() && canary["modified"].is_i64(),
        "{log}"
    );
    assert!(canary["content"].is_string(), "{log}");
    let first = expect(
        &get(&ts, "/history/gray", &with(&[("pageSize", "1")])).await?,
        200,
    )?;
    assert_eq!(first["items"].as_array().map(Vec::len), Some(1), "{first}");
    assert_eq!(first["pages"], log["total"], "{first}");
    let r = get(&ts, "/history/gray", &with(&[("pageNo", "x")])).await?;
    expect_error(&r, 400, "pageNo")?;
    Ok(())
}

#[tokio::test]
async fn cluster_view_of_a_single_node() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    let c = expect(&get(&ts, "/cluster", &[]).await?, 200)?;
    assert_eq!(c["clustered"], false);
    assert_eq!(c["members"][0]["self"], true);
    assert_eq!(c["members"][0]["state"], "UP");
    Ok(())
}
