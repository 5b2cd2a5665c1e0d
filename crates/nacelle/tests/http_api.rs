//! Round trips of every HTTP endpoint against a real server over real sockets, each test
//! run on SQLite, MariaDB and PostgreSQL (`per_backend!`).

use nacelle_testkit::server::TestServer;
use nacelle_testkit::{md5, per_backend, Backend, TestDb, TestResult};
use serde_json::Value;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

async fn json(resp: reqwest::Response) -> TestResult<Value> {
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        return Err(format!("status {status}: {text}").into());
    }
    Ok(serde_json::from_str(&text)?)
}

per_backend!(publish_and_get_round_trip_various_contents);
async fn publish_and_get_round_trip_various_contents(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let big: String = "0123456789abcdef".repeat(64 * 1024); // 1 MiB
    let cases = [
        ("unicode.txt", "héllo wörld — 配置中心 🚀".to_string()),
        ("multi.properties", "a=1\nb=2\n\nc = three\n".to_string()),
        ("crlf.txt", "line1\r\nline2\r\n".to_string()),
        ("symbols.txt", "a+b=c&d=%20;'\"<>#?".to_string()),
        ("big.txt", big),
    ];
    for (data_id, content) in &cases {
        s.publish("", "DEFAULT_GROUP", data_id, content).await?;
        let resp = s
            .http
            .get(s.url("/nacos/v1/cs/configs"))
            .query(&[("dataId", *data_id), ("group", "DEFAULT_GROUP")])
            .send()
            .await?;
        assert_eq!(resp.status(), 200, "{data_id}");
        let h = resp.headers().clone();
        assert_eq!(h["content-md5"], md5(content).as_str(), "{data_id}");
        assert_eq!(h["config-type"], "text");
        assert!(h.contains_key("last-modified"));
        assert_eq!(h["cache-control"], "no-cache,no-store");
        assert_eq!(resp.text().await?, *content, "{data_id}");
    }
    Ok(())
}

per_backend!(content_type_follows_config_type_and_show_all_returns_the_record);
async fn content_type_follows_config_type_and_show_all_returns_the_record(
    backend: Backend,
) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let before_ms = now_ms();
    let resp = s
        .http
        .post(s.url("/nacos/v1/cs/configs"))
        .form(&[
            ("dataId", "app.json"),
            ("group", "G1"),
            ("content", "{\"a\":1}"),
            ("type", "json"),
            ("appName", "shop"),
            ("desc", "the app"),
            ("use", "u"),
            ("effect", "e"),
            ("schema", "s"),
            ("config_tags", "t1,t2"),
            ("src_user", "alice"),
        ])
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    let resp = s
        .http
        .get(s.url("/nacos/v1/cs/configs?dataId=app.json&group=G1"))
        .send()
        .await?;
    assert_eq!(
        resp.headers()["content-type"],
        "application/json;charset=UTF-8"
    );
    assert_eq!(resp.headers()["config-type"], "json");

    let all = json(
        s.http
            .get(s.url("/nacos/v1/cs/configs?dataId=app.json&group=G1&show=all"))
            .send()
            .await?,
    )
    .await?;
    assert!(all["id"].is_string());
    assert_eq!(all["dataId"], "app.json");
    assert_eq!(all["group"], "G1");
    assert_eq!(all["content"], "{\"a\":1}");
    assert_eq!(all["md5"], md5("{\"a\":1}"));
    assert_eq!(all["tenant"], "");
    assert_eq!(all["appName"], "shop");
    assert_eq!(all["type"], "json");
    assert_eq!(all["desc"], "the app");
    assert_eq!(all["use"], "u");
    assert_eq!(all["effect"], "e");
    assert_eq!(all["schema"], "s");
    assert_eq!(all["configTags"], "t1,t2");
    assert_eq!(all["createUser"], "alice");
    assert_eq!(all["createIp"], "127.0.0.1");
    // Times of the publish, as the backend keeps them (MySQL: whole seconds).
    let window = backend.stored_ms(before_ms)..=now_ms();
    for field in ["createTime", "modifyTime"] {
        let t = all[field].as_i64().ok_or("no time")?;
        assert!(window.contains(&t), "{field} {t} outside {window:?}");
    }

    for (t, ct) in [
        ("xml", "application/xml;charset=UTF-8"),
        ("html", "text/html;charset=UTF-8"),
        ("yaml", "text/plain;charset=UTF-8"),
        ("bogus", "text/plain;charset=UTF-8"),
    ] {
        let id = format!("typed.{t}");
        let resp = s
            .http
            .post(s.url("/nacos/v1/cs/configs"))
            .form(&[
                ("dataId", id.as_str()),
                ("group", "G"),
                ("content", "x"),
                ("type", t),
            ])
            .send()
            .await?;
        assert_eq!(resp.status(), 200);
        let resp = s
            .http
            .get(s.url("/nacos/v1/cs/configs"))
            .query(&[("dataId", id.as_str()), ("group", "G")])
            .send()
            .await?;
        assert_eq!(resp.headers()["content-type"], ct, "{t}");
        let expected_type = if t == "bogus" { "text" } else { t };
        assert_eq!(resp.headers()["config-type"], expected_type);
    }
    Ok(())
}

per_backend!(schema_fits_nacos_mysql_text_column);
/// Nacos's `c_schema` is a MySQL `text` (65 535 bytes): a schema up to that size round-trips
/// on every backend, a longer one is a 400 on every backend (not a database error on one).
async fn schema_fits_nacos_mysql_text_column(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let fits = "配".repeat(21_845); // 65 535 bytes
    let too_long = "😀".repeat(16_384); // 65 536 bytes, fewer characters than Nacos's 32 768
    for (data_id, schema) in [("fits", &fits), ("too-long", &too_long)] {
        let resp = s
            .http
            .post(s.url("/nacos/v1/cs/configs"))
            .form(&[
                ("dataId", data_id),
                ("group", "G"),
                ("content", "x"),
                ("schema", schema.as_str()),
            ])
            .send()
            .await?;
        let status = resp.status();
        let body = resp.text().await?;
        if data_id == "fits" {
            assert_eq!((status.as_u16(), body.as_str()), (200, "true"));
        } else {
            assert_eq!(status, 400);
            assert_eq!(body, "caused: invalid schema : too long, over 65535 bytes;");
        }
    }
    let all = json(
        s.http
            .get(s.url("/nacos/v1/cs/configs?dataId=fits&group=G&show=all"))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(all["schema"].as_str(), Some(fits.as_str()));
    assert_eq!(s.get("", "G", "too-long").await?, None);
    Ok(())
}

per_backend!(publish_in_the_query_string_with_an_empty_body);
async fn publish_in_the_query_string_with_an_empty_body(backend: Backend) -> TestResult {
    // nacos-sdk-python 1.0.0 sends every parameter in the URL.
    let s = TestServer::start_on(backend).await?;
    let content = "k: v\nlist:\n  - a\n".repeat(200);
    let resp = s
        .http
        .post(s.url("/nacos/v1/cs/configs"))
        .query(&[
            ("dataId", "q.yaml"),
            ("group", "DEFAULT_GROUP"),
            ("content", content.as_str()),
        ])
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await?, "true");
    assert_eq!(
        s.get("", "DEFAULT_GROUP", "q.yaml").await?.as_deref(),
        Some(content.as_str())
    );
    Ok(())
}

per_backend!(missing_config_is_404_with_nacos_body);
async fn missing_config_is_404_with_nacos_body(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let resp = s
        .http
        .get(s.url("/nacos/v1/cs/configs?dataId=nope&group=G"))
        .send()
        .await?;
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.text().await?, "config data not exist\n");
    Ok(())
}

per_backend!(namespaces_keep_the_same_data_id_apart);
async fn namespaces_keep_the_same_data_id_apart(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("", "G", "same", "default").await?;
    s.publish("dev", "G", "same", "dev").await?;
    s.publish("prod", "G", "same", "prod").await?;
    assert_eq!(s.get("", "G", "same").await?.as_deref(), Some("default"));
    assert_eq!(
        s.get("public", "G", "same").await?.as_deref(),
        Some("default")
    );
    assert_eq!(s.get("dev", "G", "same").await?.as_deref(), Some("dev"));
    assert_eq!(s.get("prod", "G", "same").await?.as_deref(), Some("prod"));
    // Publishing with tenant "public" writes the default namespace.
    s.publish("public", "G", "same", "default2").await?;
    assert_eq!(s.get("", "G", "same").await?.as_deref(), Some("default2"));
    assert_eq!(s.get("dev", "G", "same").await?.as_deref(), Some("dev"));
    // Removing one leaves the others.
    let resp = s
        .http
        .delete(s.url("/nacos/v1/cs/configs?dataId=same&group=G&tenant=dev"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    assert_eq!(s.get("dev", "G", "same").await?, None);
    assert_eq!(s.get("prod", "G", "same").await?.as_deref(), Some("prod"));
    Ok(())
}

per_backend!(delete_is_true_even_when_absent_and_by_ids);
async fn delete_is_true_even_when_absent_and_by_ids(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let resp = s
        .http
        .delete(s.url("/nacos/v1/cs/configs?dataId=ghost&group=G"))
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await?, "true");

    s.publish("", "G", "x1", "1").await?;
    s.publish("", "G", "x2", "2").await?;
    s.publish("", "G", "x3", "3").await?;
    let id_of = |v: &Value| v["id"].as_str().map(str::to_string);
    let mut ids = Vec::new();
    for d in ["x1", "x2"] {
        let all = json(
            s.http
                .get(s.url(&format!("/nacos/v1/cs/configs?dataId={d}&group=G&show=all")))
                .send()
                .await?,
        )
        .await?;
        ids.push(id_of(&all).ok_or("no id")?);
    }
    let resp = json(
        s.http
            .delete(s.url(&format!(
                "/nacos/v1/cs/configs?delType=ids&ids={}",
                ids.join(",")
            )))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(resp, serde_json::json!({"code": 200, "data": true}));
    assert_eq!(s.get("", "G", "x1").await?, None);
    assert_eq!(s.get("", "G", "x2").await?, None);
    assert_eq!(s.get("", "G", "x3").await?.as_deref(), Some("3"));
    Ok(())
}

per_backend!(compare_and_set_publish);
async fn compare_and_set_publish(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("", "G", "cas", "v1").await?;
    let post = |cas: String, content: &'static str| {
        s.http
            .post(s.url("/nacos/v1/cs/configs"))
            .header("casMd5", cas)
            .form(&[("dataId", "cas"), ("group", "G"), ("content", content)])
            .send()
    };
    let resp = post("0000".into(), "v2").await?;
    assert_eq!(resp.status(), 500);
    assert_eq!(
        resp.text().await?,
        "caused: Cas publish fail, server md5 may have changed.;"
    );
    assert_eq!(s.get("", "G", "cas").await?.as_deref(), Some("v1"));
    let resp = post(md5("v1"), "v2").await?;
    assert_eq!(resp.text().await?, "true");
    assert_eq!(s.get("", "G", "cas").await?.as_deref(), Some("v2"));
    Ok(())
}

per_backend!(search_accurate_and_blur_with_pagination);
async fn search_accurate_and_blur_with_pagination(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    for i in 0..25 {
        s.publish(
            "",
            "SEARCH",
            &format!("svc-{i:02}.yaml"),
            &format!("n: {i}"),
        )
        .await?;
    }
    s.publish("", "OTHER", "svc-00.yaml", "other").await?;
    s.publish("ns1", "SEARCH", "svc-99.yaml", "elsewhere")
        .await?;

    let page = |q: &'static str| {
        let url = s.url(&format!("/nacos/v1/cs/configs?{q}"));
        let http = s.http.clone();
        async move { json(http.get(url).send().await?).await }
    };
    let p1 = page("search=blur&dataId=svc-*&group=SEARCH&pageNo=1&pageSize=10").await?;
    assert_eq!(p1["totalCount"], 25);
    assert_eq!(p1["pageNumber"], 1);
    assert_eq!(p1["pagesAvailable"], 3);
    assert_eq!(p1["pageItems"].as_array().map(Vec::len), Some(10));
    let p3 = page("search=blur&dataId=svc-*&group=SEARCH&pageNo=3&pageSize=10").await?;
    assert_eq!(p3["pageItems"].as_array().map(Vec::len), Some(5));
    let item = &p3["pageItems"][4];
    assert_eq!(item["dataId"], "svc-24.yaml");
    assert_eq!(item["group"], "SEARCH");
    assert_eq!(item["content"], "n: 24");
    assert_eq!(item["md5"], md5("n: 24"));
    assert_eq!(item["tenant"], "");
    assert!(item["id"].is_string());

    let all_groups = page("search=blur&dataId=svc-00*&group=&pageNo=1&pageSize=10").await?;
    assert_eq!(all_groups["totalCount"], 2);
    let accurate = page("search=accurate&dataId=svc-00.yaml&group=&pageNo=1&pageSize=10").await?;
    assert_eq!(accurate["totalCount"], 2);
    let accurate = page("search=accurate&dataId=svc-0&group=SEARCH&pageNo=1&pageSize=10").await?;
    assert_eq!(accurate["totalCount"], 0);
    let other_ns = page("search=blur&dataId=*&group=&tenant=ns1&pageNo=1&pageSize=10").await?;
    assert_eq!(other_ns["totalCount"], 1);
    assert_eq!(other_ns["pageItems"][0]["tenant"], "ns1");
    let beyond = page("search=blur&dataId=svc-*&group=SEARCH&pageNo=9&pageSize=10").await?;
    assert_eq!(beyond["pageItems"].as_array().map(Vec::len), Some(0));
    Ok(())
}

per_backend!(history_after_insert_update_delete_and_previous);
async fn history_after_insert_update_delete_and_previous(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("dev", "G", "h", "v1").await?;
    s.publish("dev", "G", "h", "v2").await?;
    let all = json(
        s.http
            .get(s.url("/nacos/v1/cs/configs?dataId=h&group=G&tenant=dev&show=all"))
            .send()
            .await?,
    )
    .await?;
    let config_id = all["id"].as_str().ok_or("no id")?.to_string();

    // previous: the version before the current one.
    let prev = json(
        s.http
            .get(s.url(&format!(
                "/nacos/v1/cs/history/previous?id={config_id}&dataId=h&group=G&tenant=dev"
            )))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(prev["content"], "v1");
    assert_eq!(prev["opType"], "U");

    s.publish("dev", "G", "h", "v3").await?;
    let resp = s
        .http
        .delete(s.url("/nacos/v1/cs/configs?dataId=h&group=G&tenant=dev"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");

    let page = json(
        s.http
            .get(s.url(
                "/nacos/v1/cs/history?search=accurate&dataId=h&group=G&tenant=dev&pageNo=1&pageSize=10",
            ))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(page["totalCount"], 4);
    let items = page["pageItems"].as_array().ok_or("no items")?;
    let ops: Vec<&str> = items.iter().filter_map(|i| i["opType"].as_str()).collect();
    assert_eq!(ops, ["D", "U", "U", "I"]);
    for i in items {
        assert_eq!(i["dataId"], "h");
        assert_eq!(i["tenant"], "dev");
        assert_eq!(i["srcIp"], "127.0.0.1");
        assert_eq!(i["lastId"], -1);
        assert!(i["createdTime"]
            .as_str()
            .is_some_and(|t| t.ends_with("+0000")));
    }

    // Detail by nid, with content: the delete keeps the removed version.
    let nid = items[0]["id"].as_str().ok_or("no nid")?;
    let detail = json(
        s.http
            .get(s.url(&format!(
                "/nacos/v1/cs/history?nid={nid}&dataId=h&group=G&tenant=dev"
            )))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(detail["opType"], "D");
    assert_eq!(detail["content"], "v3");
    assert_eq!(detail["md5"], md5("v3"));
    // A nid must belong to the key asked for.
    let resp = s
        .http
        .get(s.url(&format!(
            "/nacos/v1/cs/history?nid={nid}&dataId=other&group=G&tenant=dev"
        )))
        .send()
        .await?;
    assert_eq!(resp.status(), 404);

    // Pagination of history.
    let p2 = json(
        s.http
            .get(s.url("/nacos/v1/cs/history?search=accurate&dataId=h&group=G&tenant=dev&pageNo=2&pageSize=3"))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(p2["pagesAvailable"], 2);
    assert_eq!(p2["pageItems"][0]["opType"], "I");
    Ok(())
}

per_backend!(configs_of_a_namespace);
async fn configs_of_a_namespace(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("team", "G", "a", "1").await?;
    s.publish("team", "G2", "b", "2").await?;
    s.publish("", "G", "c", "3").await?;
    let list = json(
        s.http
            .get(s.url("/nacos/v1/cs/history/configs?tenant=team"))
            .send()
            .await?,
    )
    .await?;
    let ids: Vec<&str> = list
        .as_array()
        .ok_or("not an array")?
        .iter()
        .filter_map(|c| c["dataId"].as_str())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    Ok(())
}

per_backend!(namespace_crud_with_config_counts);
async fn namespace_crud_with_config_counts(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let ns_url = s.url("/nacos/v1/console/namespaces");
    let list = json(s.http.get(&ns_url).send().await?).await?;
    assert_eq!(list["code"], 200);
    assert_eq!(list["data"][0]["namespace"], "");
    assert_eq!(list["data"][0]["namespaceShowName"], "public");
    assert_eq!(list["data"][0]["type"], 0);

    let resp = s
        .http
        .post(&ns_url)
        .form(&[
            ("customNamespaceId", "dev"),
            ("namespaceName", "Development"),
            ("namespaceDesc", "d"),
        ])
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    // Duplicate id.
    let resp = s
        .http
        .post(&ns_url)
        .form(&[("customNamespaceId", "dev"), ("namespaceName", "Again")])
        .send()
        .await?;
    assert_eq!(resp.status(), 409);
    // Blank id gets a UUID.
    let resp = s
        .http
        .post(&ns_url)
        .form(&[("customNamespaceId", ""), ("namespaceName", "Generated")])
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");

    s.publish("dev", "G", "a", "1").await?;
    s.publish("dev", "G", "b", "2").await?;
    s.publish("", "G", "c", "3").await?;

    let list = json(s.http.get(&ns_url).send().await?).await?;
    let data = list["data"].as_array().ok_or("no data")?;
    assert_eq!(data.len(), 3);
    assert_eq!(data[0]["configCount"], 1);
    assert_eq!(data[1]["namespace"], "dev");
    assert_eq!(data[1]["namespaceShowName"], "Development");
    assert_eq!(data[1]["configCount"], 2);
    assert_eq!(data[1]["type"], 2);
    assert_eq!(data[1]["quota"], 200);
    let generated = data[2]["namespace"].as_str().ok_or("no id")?;
    assert_eq!(generated.len(), 36);

    let resp = s
        .http
        .put(&ns_url)
        .form(&[
            ("namespace", "dev"),
            ("namespaceShowName", "Dev"),
            ("namespaceDesc", "new"),
        ])
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    let one = json(
        s.http
            .get(format!("{ns_url}?show=all&namespaceId=dev"))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(one["namespaceShowName"], "Dev");
    assert_eq!(one["namespaceDesc"], "new");
    let exists = json(
        s.http
            .get(format!(
                "{ns_url}?checkNamespaceIdExist=true&customNamespaceId=dev"
            ))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(exists, Value::Bool(true));

    let resp = s
        .http
        .delete(format!("{ns_url}?namespaceId=dev"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    let list = json(s.http.get(&ns_url).send().await?).await?;
    assert_eq!(list["data"].as_array().map(Vec::len), Some(2));
    // Updating a namespace that no longer exists.
    let resp = s
        .http
        .put(&ns_url)
        .form(&[("namespace", "dev"), ("namespaceShowName", "Dev")])
        .send()
        .await?;
    assert_eq!(resp.status(), 404);
    Ok(())
}

per_backend!(v2_config_api_envelope);
async fn v2_config_api_envelope(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let url = s.url("/nacos/v2/cs/config");
    let resp = s
        .http
        .post(&url)
        .form(&[
            ("dataId", "v2.yaml"),
            ("group", "G"),
            ("namespaceId", "dev"),
            ("content", "a: 1"),
            ("type", "yaml"),
        ])
        .send()
        .await?;
    assert_eq!(
        json(resp).await?,
        serde_json::json!({"code": 0, "message": "success", "data": true})
    );
    let got = json(
        s.http
            .get(format!("{url}?dataId=v2.yaml&group=G&namespaceId=dev"))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(
        got,
        serde_json::json!({"code": 0, "message": "success", "data": "a: 1"})
    );
    // v1 sees the same config.
    assert_eq!(s.get("dev", "G", "v2.yaml").await?.as_deref(), Some("a: 1"));

    let resp = s
        .http
        .delete(format!("{url}?dataId=v2.yaml&group=G&namespaceId=dev"))
        .send()
        .await?;
    assert_eq!(json(resp).await?["data"], true);
    let resp = s
        .http
        .get(format!("{url}?dataId=v2.yaml&group=G&namespaceId=dev"))
        .send()
        .await?;
    assert_eq!(resp.status(), 404);
    let body: Value = serde_json::from_str(&resp.text().await?)?;
    assert_eq!(
        body,
        serde_json::json!({"code": 20004, "message": "resource not found", "data": "config data not exist"})
    );
    Ok(())
}

per_backend!(health_endpoints);
async fn health_endpoints(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    for path in [
        "/nacos/v1/console/health/liveness",
        "/nacos/v1/console/health/readiness",
    ] {
        let resp = s.http.get(s.url(path)).send().await?;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.text().await?, "OK");
    }
    let state = json(
        s.http
            .get(s.url("/nacos/v1/console/server/state"))
            .send()
            .await?,
    )
    .await?;
    assert_eq!(state["function_mode"], "config");
    Ok(())
}

per_backend!(readiness_is_503_until_the_cache_is_loaded);
async fn readiness_is_503_until_the_cache_is_loaded(backend: Backend) -> TestResult {
    let db = TestDb::create(backend).await?;
    let store = nacelle_store::open(&db.url).await?;
    let services = nacelle_service::Services::new(store, nacelle_service::Limits::default())?;
    let service = services.config.clone();
    let api = nacelle_http::api(services.clone(), nacelle_http::HttpOptions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let task = tokio::spawn(nacelle_http::serve(listener, api, 1 << 20, async move {
        stopped.cancelled().await
    }));
    let http = reqwest::Client::new();
    let base = format!("http://{addr}/nacos/v1");
    let r = http
        .get(format!("{base}/console/health/readiness"))
        .send()
        .await?;
    assert_eq!(r.status(), 503);
    let r = http
        .get(format!("{base}/console/health/liveness"))
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{base}/cs/configs?dataId=a&group=G"))
        .send()
        .await?;
    assert_eq!(r.status(), 503);
    service.load().await?;
    let r = http
        .get(format!("{base}/console/health/readiness"))
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{base}/cs/configs?dataId=a&group=G"))
        .send()
        .await?;
    assert_eq!(r.status(), 404);
    stop.cancel();
    task.await??;
    Ok(())
}

/// Connections waiting for a request head are closed after the idle timeout (here 300 ms):
/// one that never sends, one idle after a keep-alive answer. A long poll held far longer
/// than that is not cut: its request was read.
#[tokio::test]
async fn idle_connections_are_closed_but_held_long_polls_are_not() -> TestResult {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let db = TestDb::create(Backend::Sqlite).await?;
    let store = nacelle_store::open(&db.url).await?;
    let services = nacelle_service::Services::new(store, nacelle_service::Limits::default())?;
    services.load().await?;
    let api = nacelle_http::api(services.clone(), nacelle_http::HttpOptions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let opts = nacelle_http::ServeOptions {
        max_request_bytes: 1 << 20,
        idle_timeout: std::time::Duration::from_millis(300),
        ..nacelle_http::ServeOptions::default()
    };
    let task = tokio::spawn(nacelle_http::serve_with(listener, api, opts, async move {
        stopped.cancelled().await
    }));
    let wait = std::time::Duration::from_secs(5);

    // Reads until the server closes the connection; what it sent.
    async fn until_closed(c: &mut tokio::net::TcpStream) -> TestResult<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            match c.read(&mut buf).await {
                Ok(0) | Err(_) => return Ok(String::from_utf8_lossy(&got).into_owned()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    let mut silent = tokio::net::TcpStream::connect(addr).await?;
    let sent = tokio::time::timeout(wait, until_closed(&mut silent)).await??;
    assert!(sent.is_empty(), "{sent}");

    let mut idle = tokio::net::TcpStream::connect(addr).await?;
    idle.write_all(b"GET /nacos/v1/console/health/liveness HTTP/1.1\r\nHost: t\r\n\r\n")
        .await?;
    let sent = tokio::time::timeout(wait, until_closed(&mut idle)).await??;
    assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");

    // Held for the server's minimum (about 10 s, as Nacos), 30 idle timeouts.
    let held = std::time::Instant::now();
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/nacos/v1/cs/configs/listener"))
        .header("Long-Pulling-Timeout", "1500")
        .form(&[("Listening-Configs", "idle-test\u{2}G\u{2}\u{1}")])
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await?, "", "nothing changed during the hold");
    println!("long poll answered after {:?}", held.elapsed());

    stop.cancel();
    task.await??;
    Ok(())
}
