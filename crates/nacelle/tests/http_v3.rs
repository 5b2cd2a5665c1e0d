//! Nacos 3's v3 config HTTP API against a real server over real sockets: the client API
//! (`/nacos/v3/client/cs/config`) and the admin config API (`/nacos/v3/admin/cs/config…`),
//! each answer compared field by field with what Nacos 3.0.3 sends
//! (`/work/shared/docs/nacos3-api.md`; `ConfigOpenApiController`, `ConfigControllerV3`,
//! `NacosApiExceptionHandler`, `ParamCheckerFilter`, `PageForm`). The CRUD round trips run
//! on every backend (`per_backend!`); the rest on SQLite.

mod common;

use std::time::Duration;

use nacelle_testkit::server::{secure, TestServer};
use nacelle_testkit::{md5, per_backend, Backend, TestResult};
use reqwest::Method;
use serde_json::{json, Value};

use common::archive::{multipart, unzip, zip_of};

const CLIENT: &str = "/nacos/v3/client/cs/config";
const ADMIN: &str = "/nacos/v3/admin/cs/config";

/// What the server answered: status, `Content-Type`, body.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

impl Answer {
    fn json(&self) -> TestResult<Value> {
        serde_json::from_str(&self.body)
            .map_err(|e| format!("{} not JSON ({e}): {}", self.status, self.body).into())
    }

    /// A `Result` with code 0: its `data`.
    fn ok(&self) -> TestResult<Value> {
        let v = self.json()?;
        assert_eq!(self.status, 200, "{}", self.body);
        assert_eq!(keys(&v), ["code", "data", "message"], "{v}");
        assert_eq!(v["code"], 0, "{v}");
        assert_eq!(v["message"], "success", "{v}");
        Ok(v["data"].clone())
    }

    /// A `NacosApiException` answer: the status and `{code, message, data: detail}`.
    fn api_error(&self, status: u16, code: i64, message: &str, detail: &str) -> TestResult {
        let v = self.json()?;
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(
            v,
            json!({"code": code, "message": message, "data": detail}),
            "{}",
            self.body
        );
        Ok(())
    }

    /// A plain-text 400 with exactly `body`.
    fn plain_400(&self, body: &str) {
        assert_eq!(self.status, 400, "{}", self.body);
        assert!(
            self.content_type.starts_with("text/plain"),
            "{}",
            self.content_type
        );
        assert_eq!(self.body, body);
    }
}

/// The sorted keys of a JSON object.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

/// Sends `params` (a form body for POST/PUT, the query otherwise) with `headers`.
async fn call(
    s: &TestServer,
    method: Method,
    path: &str,
    params: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> TestResult<Answer> {
    let mut req = s.http.request(method.clone(), s.url(path));
    req = if method == Method::POST || method == Method::PUT {
        req.form(params)
    } else {
        req.query(params)
    };
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await?;
    let status = r.status().as_u16();
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Ok(Answer {
        status,
        content_type,
        body: r.text().await?,
    })
}

async fn get(s: &TestServer, path: &str, params: &[(&str, &str)]) -> TestResult<Answer> {
    call(s, Method::GET, path, params, &[]).await
}

/// Publishes over the v3 admin API; `extra` form fields and `headers` added.
async fn publish(
    s: &TestServer,
    key: (&str, &str, &str),
    content: &str,
    extra: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> TestResult<Answer> {
    let (ns, group, data_id) = key;
    let mut form = vec![
        ("namespaceId", ns),
        ("groupName", group),
        ("dataId", data_id),
        ("content", content),
    ];
    form.extend_from_slice(extra);
    call(s, Method::POST, ADMIN, &form, headers).await
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The `data` keys of the client API, as `ConfigQueryResponse`'s getters give them.
const QUERY_RESPONSE_KEYS: [&str; 12] = [
    "beta",
    "content",
    "contentType",
    "encryptedDataKey",
    "errorCode",
    "lastModified",
    "md5",
    "message",
    "requestId",
    "resultCode",
    "success",
    "tag",
];

/// `ConfigDetailInfo`'s keys.
const DETAIL_KEYS: [&str; 15] = [
    "appName",
    "configTags",
    "content",
    "createIp",
    "createTime",
    "createUser",
    "dataId",
    "desc",
    "encryptedDataKey",
    "groupName",
    "id",
    "md5",
    "modifyTime",
    "namespaceId",
    "type",
];

/// `ConfigBasicInfo`'s keys.
const BASIC_KEYS: [&str; 9] = [
    "appName",
    "createTime",
    "dataId",
    "groupName",
    "id",
    "md5",
    "modifyTime",
    "namespaceId",
    "type",
];

per_backend!(client_api_found_beta_and_not_found);
async fn client_api_found_beta_and_not_found(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let before = now_ms();
    let key = ("", "G", "app.yaml");
    let content = "a: 1\n";
    assert_eq!(
        publish(&s, key, content, &[("type", "yaml")], &[])
            .await?
            .ok()?,
        true
    );
    let q = [("dataId", "app.yaml"), ("groupName", "G")];
    let data = get(&s, CLIENT, &q).await?.ok()?;
    assert_eq!(keys(&data), QUERY_RESPONSE_KEYS, "{data}");
    assert_eq!(data["content"], content);
    assert_eq!(data["contentType"], "yaml");
    assert_eq!(data["md5"], md5(content));
    assert_eq!(data["encryptedDataKey"], "");
    assert_eq!(data["beta"], false);
    assert_eq!(data["tag"], Value::Null);
    assert_eq!(data["resultCode"], 200);
    assert_eq!(data["errorCode"], 0);
    assert_eq!(data["message"], Value::Null);
    assert_eq!(data["requestId"], Value::Null);
    assert_eq!(data["success"], true);
    let modified = data["lastModified"].as_i64().unwrap_or_default();
    assert!(
        modified >= backend.stored_ms(before) - 1000,
        "{modified} {before}"
    );
    // `public` and a blank namespace are the default namespace.
    let data = get(
        &s,
        CLIENT,
        &[
            ("dataId", "app.yaml"),
            ("groupName", "G"),
            ("namespaceId", "public"),
        ],
    )
    .await?
    .ok()?;
    assert_eq!(data["content"], content);

    // A beta for this caller's IP: its content, `beta: true`.
    publish(
        &s,
        key,
        "a: beta\n",
        &[("type", "yaml")],
        &[("betaIps", "127.0.0.1")],
    )
    .await?
    .ok()?;
    let data = get(&s, CLIENT, &q).await?.ok()?;
    assert_eq!(data["content"], "a: beta\n");
    assert_eq!(data["md5"], md5("a: beta\n"));
    assert_eq!(data["beta"], true);
    // A beta for another IP: the formal content.
    publish(&s, key, "a: other\n", &[], &[("betaIps", "10.9.9.9")])
        .await?
        .ok()?;
    let data = get(&s, CLIENT, &q).await?.ok()?;
    assert_eq!(data["content"], content);
    assert_eq!(data["beta"], false);

    // Absent: HTTP 200, code 20004, `data: null` written.
    let a = get(&s, CLIENT, &[("dataId", "absent"), ("groupName", "G")]).await?;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.body,
        r#"{"code":20004,"message":"resource not found","data":null}"#
    );
    Ok(())
}

per_backend!(admin_config_get_publish_delete);
async fn admin_config_get_publish_delete(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    let before = now_ms();
    let q = [
        ("dataId", "app.json"),
        ("groupName", "G"),
        ("namespaceId", ""),
    ];
    publish(
        &s,
        ("", "G", "app.json"),
        "{\"a\":1}",
        &[
            ("type", "json"),
            ("appName", "shop"),
            ("desc", "the app"),
            ("configTags", "t1,t2"),
            ("srcUser", "alice"),
        ],
        &[],
    )
    .await?
    .ok()?;
    let d = get(&s, ADMIN, &q).await?.ok()?;
    assert_eq!(keys(&d), DETAIL_KEYS, "{d}");
    // A string, as Nacos's ToStringSerializer writes it.
    assert!(
        d["id"]
            .as_str()
            .and_then(|id| id.parse::<i64>().ok())
            .is_some_and(|id| id > 0),
        "{d}"
    );
    assert_eq!(d["namespaceId"], "public");
    assert_eq!(d["groupName"], "G");
    assert_eq!(d["dataId"], "app.json");
    assert_eq!(d["md5"], md5("{\"a\":1}"));
    assert_eq!(d["type"], "json");
    assert_eq!(d["appName"], "shop");
    assert_eq!(d["content"], "{\"a\":1}");
    assert_eq!(d["desc"], "the app");
    assert_eq!(d["encryptedDataKey"], "");
    assert_eq!(d["createIp"], "127.0.0.1");
    assert_eq!(d["configTags"], "t1,t2");
    assert!(d["createUser"].is_string(), "{d}");
    assert!(d["createTime"].as_i64().unwrap_or(0) >= backend.stored_ms(before) - 1000);
    assert!(d["modifyTime"].as_i64().unwrap_or(0) >= d["createTime"].as_i64().unwrap_or(0));
    // The same as v1's `show=all`.
    let v1: Value = s
        .http
        .get(s.url("/nacos/v1/cs/configs"))
        .query(&[("dataId", "app.json"), ("group", "G"), ("show", "all")])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(v1["id"], d["id"]);
    assert_eq!(v1["content"], d["content"]);
    assert_eq!(v1["createUser"], d["createUser"]);

    // An upsert: the second POST updates.
    publish(
        &s,
        ("", "G", "app.json"),
        "{\"a\":2}",
        &[("type", "json")],
        &[],
    )
    .await?
    .ok()?;
    let d2 = get(&s, ADMIN, &q).await?.ok()?;
    assert_eq!(d2["content"], "{\"a\":2}");
    assert_eq!(d2["id"], d["id"]);
    // casMd5: a stale md5 is refused (NacosApiException 500 RESOURCE_CONFLICT), the right
    // one writes.
    let a = publish(
        &s,
        ("", "G", "app.json"),
        "{\"a\":3}",
        &[("type", "json")],
        &[("casMd5", &md5("{\"a\":1}"))],
    )
    .await?;
    a.api_error(
        500,
        20005,
        "resource conflict",
        "Cas publish fail, server md5 may have changed.",
    )?;
    publish(
        &s,
        ("", "G", "app.json"),
        "{\"a\":3}",
        &[("type", "json")],
        &[("casMd5", &md5("{\"a\":2}"))],
    )
    .await?
    .ok()?;
    assert_eq!(get(&s, ADMIN, &q).await?.ok()?["content"], "{\"a\":3}");
    // An invalid type becomes text, as Nacos does.
    publish(&s, ("", "G", "t.cfg"), "x", &[("type", "nonsense")], &[])
        .await?
        .ok()?;
    let t = get(&s, ADMIN, &[("dataId", "t.cfg"), ("groupName", "G")])
        .await?
        .ok()?;
    assert_eq!(t["type"], "text");

    // DELETE: `data: true`, then 404/20004 with Nacos's detail; again: still true.
    assert_eq!(call(&s, Method::DELETE, ADMIN, &q, &[]).await?.ok()?, true);
    get(&s, ADMIN, &q).await?.api_error(
        404,
        20004,
        "resource not found",
        "Config not exist, please publish Config first.",
    )?;
    assert_eq!(call(&s, Method::DELETE, ADMIN, &q, &[]).await?.ok()?, true);
    Ok(())
}

#[tokio::test]
async fn admin_bad_inputs_answer_as_nacos() -> TestResult {
    let s = TestServer::start().await?;
    publish(&s, ("", "G", "a.txt"), "x", &[], &[]).await?.ok()?;
    let missing = |name: &str| format!("Required parameter '{name}' type String is not present");
    // groupName is checked first; the legacy `group` is not read.
    for (method, params, name) in [
        (
            Method::GET,
            vec![("dataId", "a.txt"), ("group", "G")],
            "groupName",
        ),
        (Method::GET, vec![("dataId", "a.txt")], "groupName"),
        (Method::GET, vec![("groupName", "G")], "dataId"),
        (
            Method::GET,
            vec![("groupName", " "), ("dataId", " ")],
            "groupName",
        ),
        (Method::DELETE, vec![("dataId", "a.txt")], "groupName"),
        (Method::DELETE, vec![("groupName", "G")], "dataId"),
        (
            Method::POST,
            vec![("dataId", "a.txt"), ("content", "x")],
            "groupName",
        ),
        (
            Method::POST,
            vec![("groupName", "G"), ("content", "x")],
            "dataId",
        ),
        (
            Method::POST,
            vec![("groupName", "G"), ("dataId", "a.txt")],
            "content",
        ),
        (
            Method::POST,
            vec![("groupName", "G"), ("dataId", "a.txt"), ("content", "  ")],
            "content",
        ),
    ] {
        let a = call(&s, method.clone(), ADMIN, &params, &[]).await?;
        a.api_error(400, 10000, "parameter missing", &missing(name))
            .map_err(|e| format!("{method} {params:?}: {e}"))?;
    }
    for sub in ["/beta", "/listener"] {
        get(&s, &format!("{ADMIN}{sub}"), &[("dataId", "a.txt")])
            .await?
            .api_error(400, 10000, "parameter missing", &missing("groupName"))?;
    }
    // Page checks (`PageForm.validate()`).
    for (params, detail) in [
        (
            vec![("pageNo", "0")],
            "Required parameter 'pageNo' should be positive integer, current is 0",
        ),
        (
            vec![("pageSize", "0")],
            "Required parameter 'pageSize' should be positive integer, current is 0",
        ),
        (
            vec![("pageNo", "-3")],
            "Required parameter 'pageNo' should be positive integer, current is -3",
        ),
        (vec![("pageNo", "abc")], "For input string: \"abc\""),
    ] {
        get(&s, &format!("{ADMIN}/list"), &params)
            .await?
            .api_error(400, 20002, "parameter validate error", detail)?;
    }
    // The param check filter: plain text, before the controller.
    for (params, body) in [
        (
            vec![("dataId", "a b"), ("groupName", "G")],
            "Param 'dataId' is illegal, illegal characters should not appear in the param.\n",
        ),
        (
            vec![("dataId", "a.txt"), ("groupName", "G/H")],
            "Param 'group' is illegal, illegal characters should not appear in the param.\n",
        ),
        (
            vec![("dataId", "a.txt"), ("groupName", "G"), ("namespaceId", "ns!")],
            "Param 'namespaceId/tenant' is illegal, illegal characters should not appear in the param.\n",
        ),
    ] {
        get(&s, ADMIN, &params).await?.plain_400(body);
    }
    let long = "d".repeat(257);
    get(&s, ADMIN, &[("dataId", long.as_str()), ("groupName", "G")])
        .await?
        .plain_400("Param 'dataId' is illegal, the param length should not exceed 256.\n");
    // `/list`: a `*` passes only with `search=blur` sent.
    let list = format!("{ADMIN}/list");
    let star = "Param 'dataId' is illegal, illegal characters should not appear in the param.\n";
    get(&s, &list, &[("dataId", "a*")]).await?.plain_400(star);
    get(&s, &list, &[("dataId", "a*"), ("search", "accurate")])
        .await?
        .plain_400(star);
    let page = get(&s, &list, &[("dataId", "a*"), ("search", "blur")])
        .await?
        .ok()?;
    assert_eq!(page["totalCount"], 1);
    // Batch delete without ids: Spring's missing parameter.
    call(&s, Method::DELETE, &format!("{ADMIN}/batch"), &[], &[])
        .await?
        .api_error(
            400,
            10000,
            "parameter missing",
            "Required request parameter 'ids' for method parameter type List is not present",
        )?;
    // An unknown path under /nacos/v3: Spring's 404 JSON.
    let a = get(&s, "/nacos/v3/admin/cs/nothing", &[]).await?;
    assert_eq!(a.status, 404);
    let v = a.json()?;
    assert_eq!(v["status"], 404);
    assert_eq!(v["error"], "Not Found");
    assert_eq!(v["path"], "/nacos/v3/admin/cs/nothing");
    assert_eq!(v["message"], "No static resource v3/admin/cs/nothing.");
    assert!(v["timestamp"].is_string(), "{v}");
    // No PUT on /config.
    let a = call(
        &s,
        Method::PUT,
        ADMIN,
        &[("dataId", "a.txt"), ("groupName", "G")],
        &[],
    )
    .await?;
    assert_eq!(a.status, 405);
    let v = a.json()?;
    assert_eq!(v["status"], 405);
    assert_eq!(v["error"], "Method Not Allowed");
    assert_eq!(v["message"], "Request method 'PUT' is not supported");
    assert_eq!(v["path"], ADMIN);
    Ok(())
}

#[tokio::test]
async fn client_bad_inputs_are_plain_text() -> TestResult {
    let s = TestServer::start().await?;
    for (params, body) in [
        (
            vec![("dataId", "a.txt"), ("group", "G")],
            "caused: Required parameter 'groupName' type String is not present;",
        ),
        (
            vec![("groupName", "G")],
            "caused: Required parameter 'dataId' type String is not present;",
        ),
        (
            vec![("dataId", "a b"), ("groupName", "G")],
            "Param 'dataId' is illegal, illegal characters should not appear in the param.\n",
        ),
    ] {
        get(&s, CLIENT, &params).await?.plain_400(body);
    }
    Ok(())
}

#[tokio::test]
async fn list_blur_accurate_and_paging() -> TestResult {
    let s = TestServer::start().await?;
    for (g, d) in [("G", "app1.yaml"), ("G", "app2.yaml"), ("H", "db.yaml")] {
        publish(&s, ("", g, d), "k: v\n", &[("appName", "shop")], &[])
            .await?
            .ok()?;
    }
    let list = format!("{ADMIN}/list");
    let all = get(&s, &list, &[]).await?.ok()?;
    assert_eq!(
        keys(&all),
        ["pageItems", "pageNumber", "pagesAvailable", "totalCount"]
    );
    assert_eq!(all["totalCount"], 3);
    assert_eq!(all["pageNumber"], 1);
    assert_eq!(all["pagesAvailable"], 1);
    let item = &all["pageItems"][0];
    assert_eq!(keys(item), BASIC_KEYS, "{item}");
    assert_eq!(item["namespaceId"], "public");
    assert_eq!(item["groupName"], "G");
    assert_eq!(item["dataId"], "app1.yaml");
    assert_eq!(item["md5"], md5("k: v\n"));
    assert_eq!(item["type"], "text");
    assert_eq!(item["appName"], "shop");
    // Blur: `*` is a wildcard.
    let blur = get(&s, &list, &[("dataId", "app*"), ("search", "blur")])
        .await?
        .ok()?;
    assert_eq!(blur["totalCount"], 2);
    // Accurate: exact names.
    let exact = get(
        &s,
        &list,
        &[
            ("dataId", "app2.yaml"),
            ("groupName", "G"),
            ("search", "accurate"),
        ],
    )
    .await?
    .ok()?;
    assert_eq!(exact["totalCount"], 1);
    assert_eq!(exact["pageItems"][0]["dataId"], "app2.yaml");
    let group = get(&s, &list, &[("groupName", "H"), ("search", "accurate")])
        .await?
        .ok()?;
    assert_eq!(group["totalCount"], 1);
    // Paging.
    let p2 = get(&s, &list, &[("pageNo", "2"), ("pageSize", "1")])
        .await?
        .ok()?;
    assert_eq!(p2["totalCount"], 3);
    assert_eq!(p2["pageNumber"], 2);
    assert_eq!(p2["pagesAvailable"], 3);
    assert_eq!(p2["pageItems"].as_array().map(Vec::len), Some(1));
    assert_eq!(p2["pageItems"][0]["dataId"], "app2.yaml");
    // `type` (comma-separated) and `configDetail` (the content, a pattern).
    publish(
        &s,
        ("", "H", "conf.json"),
        "{\"k\":1}",
        &[("type", "json")],
        &[],
    )
    .await?
    .ok()?;
    let json_only = get(&s, &list, &[("type", "json")]).await?.ok()?;
    assert_eq!(json_only["totalCount"], 1);
    assert_eq!(json_only["pageItems"][0]["dataId"], "conf.json");
    let two_types = get(&s, &list, &[("type", "json,text")]).await?.ok()?;
    assert_eq!(two_types["totalCount"], 4);
    let by_content = get(&s, &list, &[("configDetail", "*k\":*")]).await?.ok()?;
    assert_eq!(by_content["totalCount"], 1, "{by_content}");
    let exact_content = get(&s, &list, &[("configDetail", "k: v\n")]).await?.ok()?;
    assert_eq!(exact_content["totalCount"], 3, "{exact_content}");
    // Another namespace: empty.
    let other = get(&s, &list, &[("namespaceId", "nope")]).await?.ok()?;
    assert_eq!(other["totalCount"], 0);
    Ok(())
}

#[tokio::test]
async fn batch_delete_metadata_and_beta() -> TestResult {
    let s = TestServer::start().await?;
    for d in ["b1", "b2", "b3"] {
        publish(&s, ("", "G", d), "x", &[], &[]).await?.ok()?;
    }
    let id_of = |v: &Value| v["id"].as_str().unwrap_or_default().to_string();
    let b1 = get(&s, ADMIN, &[("dataId", "b1"), ("groupName", "G")])
        .await?
        .ok()?;
    let b2 = get(&s, ADMIN, &[("dataId", "b2"), ("groupName", "G")])
        .await?
        .ok()?;
    let ids = format!("{},{},999999", id_of(&b1), id_of(&b2));
    assert_eq!(
        call(
            &s,
            Method::DELETE,
            &format!("{ADMIN}/batch"),
            &[("ids", &ids)],
            &[]
        )
        .await?
        .ok()?,
        true
    );
    for d in ["b1", "b2"] {
        assert_eq!(
            get(&s, ADMIN, &[("dataId", d), ("groupName", "G")])
                .await?
                .status,
            404
        );
    }
    call(
        &s,
        Method::DELETE,
        &format!("{ADMIN}/batch"),
        &[("ids", "1,x")],
        &[],
    )
    .await?
    .api_error(
        400,
        20002,
        "parameter validate error",
        "For input string: \"x\"",
    )?;

    // PUT /metadata: description and tags change in place — content, md5, modification
    // time and history do not (Nacos 3.1 writes no history row for it).
    let q = [("dataId", "b3"), ("groupName", "G")];
    let hq = [("dataId", "b3"), ("groupName", "G")];
    let versions_before = get(&s, "/nacos/v3/admin/cs/history/list", &hq)
        .await?
        .ok()?["totalCount"]
        .clone();
    let before = get(&s, ADMIN, &q).await?.ok()?;
    let put = call(
        &s,
        Method::PUT,
        &format!("{ADMIN}/metadata"),
        &[
            ("dataId", "b3"),
            ("groupName", "G"),
            ("desc", "described"),
            ("configTags", "x,y"),
        ],
        &[],
    )
    .await?;
    assert_eq!(put.ok()?, true);
    let after = get(&s, ADMIN, &q).await?.ok()?;
    assert_eq!(after["desc"], "described");
    assert_eq!(after["configTags"], "x,y");
    assert_eq!(after["content"], before["content"]);
    assert_eq!(after["md5"], before["md5"]);
    assert_eq!(after["modifyTime"], before["modifyTime"]);
    let versions_after = get(&s, "/nacos/v3/admin/cs/history/list", &hq)
        .await?
        .ok()?["totalCount"]
        .clone();
    assert_eq!(versions_after, versions_before, "no new version");
    call(
        &s,
        Method::PUT,
        &format!("{ADMIN}/metadata"),
        &[("dataId", "absent"), ("groupName", "G"), ("desc", "d")],
        &[],
    )
    .await?
    .api_error(
        404,
        30000,
        "server error",
        "config is not found for dataId=absent, group=G",
    )?;
    // An absent parameter leaves its field as it is.
    call(
        &s,
        Method::PUT,
        &format!("{ADMIN}/metadata"),
        &[("dataId", "b3"), ("groupName", "G"), ("desc", "again")],
        &[],
    )
    .await?
    .ok()?;
    let again = get(&s, ADMIN, &q).await?.ok()?;
    assert_eq!(again["desc"], "again");
    assert_eq!(again["configTags"], "x,y");

    // Beta.
    let beta = format!("{ADMIN}/beta");
    get(&s, &beta, &q).await?.api_error(
        404,
        20004,
        "resource not found",
        "Config is not in beta.",
    )?;
    publish(
        &s,
        ("", "G", "b3"),
        "beta content",
        &[],
        &[("betaIps", "10.0.0.1,10.0.0.2")],
    )
    .await?
    .ok()?;
    let g = get(&s, &beta, &q).await?.ok()?;
    let mut gray_keys: Vec<String> = DETAIL_KEYS.iter().map(|k| k.to_string()).collect();
    gray_keys.extend(["grayName".to_string(), "grayRule".to_string()]);
    gray_keys.sort();
    assert_eq!(keys(&g), gray_keys, "{g}");
    assert_eq!(g["content"], "beta content");
    assert_eq!(g["md5"], md5("beta content"));
    assert_eq!(g["grayName"], "beta");
    assert_eq!(g["namespaceId"], "public");
    let rule: Value = serde_json::from_str(g["grayRule"].as_str().unwrap_or_default())?;
    assert_eq!(
        rule,
        json!({"type": "beta", "version": "1.0.0", "expr": "10.0.0.1,10.0.0.2", "priority": 2147483647})
    );
    // The formal config is untouched.
    assert_eq!(get(&s, ADMIN, &q).await?.ok()?["content"], "x");
    assert_eq!(call(&s, Method::DELETE, &beta, &q, &[]).await?.ok()?, true);
    assert_eq!(get(&s, &beta, &q).await?.status, 404);
    assert_eq!(call(&s, Method::DELETE, &beta, &q, &[]).await?.ok()?, true);
    Ok(())
}

#[tokio::test]
async fn listener_shows_a_v1_long_poll() -> TestResult {
    let s = TestServer::start().await?;
    publish(&s, ("", "G", "watched"), "v", &[], &[])
        .await?
        .ok()?;
    let q = [("dataId", "watched"), ("groupName", "G")];
    let none = get(&s, &format!("{ADMIN}/listener"), &q).await?.ok()?;
    assert_eq!(none, json!({"queryType": "config", "listenersStatus": {}}));
    let held = md5("v");
    let listening = nacelle_testkit::api::listening_configs(&[("watched", "G", &held, None)]);
    let api = s.api.clone();
    let poll = tokio::spawn(async move { api.long_poll(&listening, Some(30_000), &[]).await });
    s.wait_listener("", "G", "watched", Duration::from_secs(10))
        .await?;
    let some = get(&s, &format!("{ADMIN}/listener"), &q).await?.ok()?;
    assert_eq!(
        some,
        json!({"queryType": "config", "listenersStatus": {"127.0.0.1": held}})
    );
    poll.abort();
    Ok(())
}

async fn import(s: &TestServer, query: &[(&str, &str)], file: Option<&[u8]>) -> TestResult<Answer> {
    let (ct, body) = multipart(file, &[]);
    let r = s
        .http
        .post(s.url(&format!("{ADMIN}/import")))
        .query(query)
        .header("Content-Type", ct)
        .body(body)
        .send()
        .await?;
    Ok(Answer {
        status: r.status().as_u16(),
        content_type: String::new(),
        body: r.text().await?,
    })
}

/// `POST /v3/admin/cs/config/import` under ABORT answers what Nacos 3 answers for the same
/// zip. Nacos 3.0.3's `ConfigControllerV3.importAndPublishConfig` lists the configs in
/// the order of `.metadata.yml` and `EmbeddedConfigInfoPersistServiceImpl`
/// (`ExternalConfigInfoPersistServiceImpl` alike) `.batchInsertOrUpdate` inserts them one
/// by one until the first that exists: those before it are written and counted in
/// `succCount`, it alone is `failData`, every one after it (existing or not) is
/// `skipData`, counted in `skipCount`.
#[tokio::test]
async fn import_abort_answers_as_nacos_3() -> TestResult {
    let s = TestServer::start().await?;
    for id in ["b.yaml", "d.yaml"] {
        publish(&s, ("", "G", id), "old: 1\n", &[("type", "yaml")], &[])
            .await?
            .ok()?;
    }
    // Entries in another order than the metadata's: the metadata's counts.
    let archive = zip_of(&[
        ("G/d.yaml", b"new: d\n"),
        ("G/c.yaml", b"new: c\n"),
        ("G/b.yaml", b"new: b\n"),
        ("G/a.yaml", b"new: a\n"),
        (
            ".metadata.yml",
            b"metadata:\n- {dataId: a.yaml, group: G, type: yaml}\n\
              - {dataId: b.yaml, group: G, type: yaml}\n\
              - {dataId: c.yaml, group: G, type: yaml}\n\
              - {dataId: d.yaml, group: G, type: yaml}\n",
        ),
    ])?;
    let item = |d: &str| json!({"dataId": d, "group": "G"});
    let a = import(&s, &[("policy", "ABORT")], Some(&archive)).await?;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json()?,
        json!({"code": 0, "message": "success", "data": {
            "succCount": 1,
            "skipCount": 2,
            "failData": [item("b.yaml")],
            "skipData": [item("c.yaml"), item("d.yaml")],
        }})
    );
    let content = |d: &'static str| {
        let s = &s;
        async move {
            let v = get(s, ADMIN, &[("dataId", d), ("groupName", "G")]).await?;
            TestResult::Ok(v.json()?["data"]["content"].as_str().map(str::to_string))
        }
    };
    assert_eq!(content("a.yaml").await?.as_deref(), Some("new: a\n"));
    assert_eq!(content("b.yaml").await?.as_deref(), Some("old: 1\n"));
    assert_eq!(content("c.yaml").await?, None);
    assert_eq!(content("d.yaml").await?.as_deref(), Some("old: 1\n"));
    // The same zip again (its first config exists now, as after any import of an
    // export): nothing written, the first in failData, all others in skipData.
    let a = import(&s, &[], Some(&archive)).await?;
    assert_eq!(
        a.json()?["data"],
        json!({
            "succCount": 0,
            "skipCount": 3,
            "failData": [item("a.yaml")],
            "skipData": [item("b.yaml"), item("c.yaml"), item("d.yaml")],
        })
    );
    assert_eq!(content("c.yaml").await?, None);
    Ok(())
}

#[tokio::test]
async fn export_import_and_clone() -> TestResult {
    let s = TestServer::start().await?;
    publish(
        &s,
        ("", "G", "e1.yaml"),
        "a: 1\n",
        &[("type", "yaml"), ("appName", "shop"), ("desc", "d1")],
        &[],
    )
    .await?
    .ok()?;
    publish(&s, ("", "G", "e2.txt"), "two", &[], &[])
        .await?
        .ok()?;
    let e1 = get(&s, ADMIN, &[("dataId", "e1.yaml"), ("groupName", "G")])
        .await?
        .ok()?;
    let e2 = get(&s, ADMIN, &[("dataId", "e2.txt"), ("groupName", "G")])
        .await?
        .ok()?;
    let id_of = |v: &Value| v["id"].as_str().unwrap_or_default().to_string();
    let ids = format!("{},{}", id_of(&e1), id_of(&e2));

    // Export by ids.
    let r = s
        .http
        .get(s.url(&format!("{ADMIN}/export")))
        .query(&[("ids", ids.as_str())])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    let cd = r.headers()["content-disposition"].to_str()?.to_string();
    assert!(
        cd.starts_with("attachment;filename=nacos_config_export_") && cd.ends_with(".zip"),
        "{cd}"
    );
    assert_eq!(
        cd.len(),
        "attachment;filename=nacos_config_export_".len() + 14 + 4
    );
    let entries = unzip(&r.bytes().await?)?;
    let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"G/e1.yaml") && names.contains(&"G/e2.txt"),
        "{names:?}"
    );
    let meta = entries
        .iter()
        .find(|(n, _)| n == ".metadata.yml")
        .map(|(_, t)| t.clone())
        .ok_or("no .metadata.yml")?;
    let meta: serde_yaml_ng::Value = serde_yaml_ng::from_str(&meta)?;
    let first = &meta["metadata"][0];
    assert_eq!(first["dataId"].as_str(), Some("e1.yaml"));
    assert_eq!(first["group"].as_str(), Some("G"));
    assert_eq!(first["type"].as_str(), Some("yaml"));
    assert_eq!(first["appName"].as_str(), Some("shop"));
    assert_eq!(first["desc"].as_str(), Some("d1"));

    // Import into a namespace that does not exist: HTTP 200, 22001.
    let archive = zip_of(&[
        ("G/e1.yaml", b"a: imported\n"),
        ("G/new.txt", b"new"),
        (
            ".metadata.yml",
            b"metadata:\n- dataId: e1.yaml\n  group: G\n  type: yaml\n- dataId: new.txt\n  group: G\n  type: text\n",
        ),
    ])?;
    let a = import(&s, &[("namespaceId", "nope")], Some(&archive)).await?;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json()?,
        json!({"code": 22001, "message": "namespace not exist", "data": {"succCount": 0}})
    );
    // No file: 100005.
    let a = import(&s, &[], None).await?;
    assert_eq!(a.status, 200);
    assert_eq!(a.json()?["code"], 100005);
    assert_eq!(a.json()?["message"], "Imported file data is empty");
    // Metadata without items: 100002.
    let bad = zip_of(&[("G/x.txt", b"x"), (".metadata.yml", b"metadata: []\n")])?;
    let a = import(&s, &[], Some(&bad)).await?;
    assert_eq!(
        a.json()?,
        json!({"code": 100002, "message": "Imported metadata is invalid", "data": {"succCount": 0}})
    );
    // ABORT (the default) on a conflict: code 0, the conflict in failData.
    let a = import(&s, &[], Some(&archive)).await?;
    let data = a.ok()?;
    assert_eq!(data["succCount"], 0, "{data}");
    assert_eq!(
        data["failData"],
        json!([{"dataId": "e1.yaml", "group": "G"}])
    );
    // SKIP: the new one written, the existing one skipped.
    let data = import(&s, &[("policy", "SKIP")], Some(&archive))
        .await?
        .ok()?;
    assert_eq!(data["succCount"], 1, "{data}");
    assert_eq!(data["skipCount"], 1, "{data}");
    assert_eq!(
        data["skipData"],
        json!([{"dataId": "e1.yaml", "group": "G"}])
    );
    assert_eq!(
        get(&s, ADMIN, &[("dataId", "e1.yaml"), ("groupName", "G")])
            .await?
            .ok()?["content"],
        "a: 1\n"
    );
    // OVERWRITE: both written.
    let data = import(&s, &[("policy", "OVERWRITE")], Some(&archive))
        .await?
        .ok()?;
    assert_eq!(data["succCount"], 2, "{data}");
    assert_eq!(data["skipCount"], 0, "{data}");
    assert_eq!(
        get(&s, ADMIN, &[("dataId", "e1.yaml"), ("groupName", "G")])
            .await?
            .ok()?["content"],
        "a: imported\n"
    );

    // Clone into another namespace (created over v1), with a new dataId for one.
    let r = s
        .http
        .post(s.url("/nacos/v1/console/namespaces"))
        .form(&[("customNamespaceId", "dev"), ("namespaceName", "dev")])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    // The id as every v3 model writes it (a string), and as a number: Jackson takes both.
    let e2_id: i64 = id_of(&e2).parse()?;
    let body = json!([
        {"configId": e1["id"], "targetGroupName": "G2", "targetDataId": "copy.yaml"},
        {"configId": e2_id, "targetGroupName": "", "targetDataId": ""}
    ]);
    let clone = |ns: &'static str| {
        s.http
            .post(s.url(&format!("{ADMIN}/clone")))
            .query(&[("namespaceId", ns)])
            .json(&body)
            .send()
    };
    let r = clone("dev").await?;
    let v: Value = serde_json::from_str(&r.text().await?)?;
    assert_eq!(v["code"], 0, "{v}");
    assert_eq!(v["data"]["succCount"], 2, "{v}");
    let copy = get(
        &s,
        ADMIN,
        &[
            ("dataId", "copy.yaml"),
            ("groupName", "G2"),
            ("namespaceId", "dev"),
        ],
    )
    .await?
    .ok()?;
    assert_eq!(copy["content"], "a: imported\n");
    assert_eq!(copy["namespaceId"], "dev");
    let r = clone("nope").await?;
    assert_eq!(r.status(), 200);
    let v: Value = serde_json::from_str(&r.text().await?)?;
    assert_eq!(
        v,
        json!({"code": 22001, "message": "namespace not exist", "data": {"succCount": 0}})
    );
    // An empty list: 100006.
    let r = s
        .http
        .post(s.url(&format!("{ADMIN}/clone")))
        .query(&[("namespaceId", "dev")])
        .json(&json!([]))
        .send()
        .await?;
    let v: Value = serde_json::from_str(&r.text().await?)?;
    assert_eq!(
        v,
        json!({"code": 100006, "message": "No configuration selected", "data": {"succCount": 0}})
    );
    Ok(())
}

#[tokio::test]
async fn encrypted_configs_admin_shows_what_v1_shows_client_gets_ciphertext() -> TestResult {
    let s = TestServer::start().await?;
    let plain = "password: s3cret\n";
    publish(
        &s,
        ("", "G", "cipher-aes-db.yml"),
        plain,
        &[("type", "yaml")],
        &[],
    )
    .await?
    .ok()?;
    let admin = get(
        &s,
        ADMIN,
        &[("dataId", "cipher-aes-db.yml"), ("groupName", "G")],
    )
    .await?
    .ok()?;
    let v1: Value = s
        .http
        .get(s.url("/nacos/v1/cs/configs"))
        .query(&[
            ("dataId", "cipher-aes-db.yml"),
            ("group", "G"),
            ("show", "all"),
        ])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(admin["content"], plain);
    assert_eq!(admin["content"], v1["content"]);
    assert_eq!(admin["md5"], v1["md5"]);
    assert_eq!(admin["encryptedDataKey"], v1["encryptedDataKey"]);
    assert!(
        admin["encryptedDataKey"]
            .as_str()
            .is_some_and(|k| !k.is_empty()),
        "{admin}"
    );
    // The client API serves it as stored (the client decrypts), with its data key.
    let client = get(
        &s,
        CLIENT,
        &[("dataId", "cipher-aes-db.yml"), ("groupName", "G")],
    )
    .await?
    .ok()?;
    assert_ne!(client["content"], plain);
    assert_eq!(client["encryptedDataKey"], admin["encryptedDataKey"]);
    assert_eq!(client["md5"], admin["md5"]);
    Ok(())
}

#[tokio::test]
async fn validation_is_the_services() -> TestResult {
    let s = TestServer::start().await?;
    // Nacelle's name rules apply after Nacos's filter (a blank-free but over-long group).
    let long_group = "g".repeat(129);
    get(
        &s,
        ADMIN,
        &[("dataId", "a"), ("groupName", long_group.as_str())],
    )
    .await?
    .plain_400("Param 'group' is illegal, the param length should not exceed 128.\n");
    // A bad betaIps entry is the service's 400/20002, as over v2.
    let a = publish(
        &s,
        ("", "G", "b.txt"),
        "x",
        &[],
        &[("betaIps", "not-an-ip")],
    )
    .await?;
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.json()?["code"], 20002);
    let v2 = s
        .http
        .post(s.url("/nacos/v2/cs/config"))
        .header("betaIps", "not-an-ip")
        .form(&[("dataId", "b.txt"), ("group", "G"), ("content", "x")])
        .send()
        .await?;
    assert_eq!(v2.status(), 400);
    let v2: Value = v2.json().await?;
    assert_eq!(v2["data"], a.json()?["data"]);
    Ok(())
}

#[tokio::test]
async fn auth_admin_needs_a_token_and_permissions() -> TestResult {
    let s = TestServer::start_with(secure).await?;
    let admin = s.admin_token().await?;
    let q = [("dataId", "a.txt"), ("groupName", "G")];
    // No token, a bad token: 403 in Spring's error JSON (not a `Result`).
    for token in [None, Some("not-a-token")] {
        let mut req = s.http.get(s.url(ADMIN)).query(&q);
        if let Some(t) = token {
            req = req.header("accessToken", t);
        }
        let r = req.send().await?;
        assert_eq!(r.status(), 403);
        let v: Value = r.json().await?;
        assert_eq!(v["status"], 403, "{v}");
        assert_eq!(v["error"], "Forbidden", "{v}");
        assert_eq!(v["path"], ADMIN, "{v}");
        assert!(
            v["timestamp"].is_string() && v["message"].is_string(),
            "{v}"
        );
    }
    // Nacos's auth filter runs before its param check filter: no token is a 403 even for
    // a request the param check would refuse.
    let r = s
        .http
        .get(s.url(ADMIN))
        .query(&[("dataId", "a b"), ("groupName", "G")])
        .send()
        .await?;
    assert_eq!(r.status(), 403);
    // The client API follows the auth switch: refused anonymously, too.
    let r = s.http.get(s.url(CLIENT)).query(&q).send().await?;
    assert_eq!(r.status(), 403);
    // With the token (header `accessToken`, as the maintainer SDK sends it).
    let r = s
        .http
        .post(s.url(ADMIN))
        .header("accessToken", &admin)
        .form(&[("dataId", "a.txt"), ("groupName", "G"), ("content", "x")])
        .send()
        .await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let r = s
        .http
        .get(s.url(CLIENT))
        .query(&q)
        .query(&[("accessToken", admin.as_str())])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    // A read-only user reads but cannot write.
    for (path, params) in [
        (
            "/nacos/v1/auth/users",
            vec![("username", "reader"), ("password", "reader-pass-1")],
        ),
        (
            "/nacos/v1/auth/roles",
            vec![("role", "ro"), ("username", "reader")],
        ),
        (
            "/nacos/v1/auth/permissions",
            vec![("role", "ro"), ("resource", ":*:*"), ("action", "r")],
        ),
    ] {
        let r = s
            .http
            .post(s.url(path))
            .header("accessToken", &admin)
            .form(&params)
            .send()
            .await?;
        assert_eq!(r.status(), 200, "{path}: {}", r.text().await?);
    }
    let r = s
        .http
        .post(s.url("/nacos/v1/auth/login"))
        .form(&[("username", "reader"), ("password", "reader-pass-1")])
        .send()
        .await?;
    let reader: Value = r.json().await?;
    let reader = reader["accessToken"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let r = s
        .http
        .get(s.url(ADMIN))
        .header("accessToken", &reader)
        .query(&q)
        .send()
        .await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let r = s
        .http
        .post(s.url(ADMIN))
        .header("Authorization", format!("Bearer {reader}"))
        .form(&[("dataId", "a.txt"), ("groupName", "G"), ("content", "y")])
        .send()
        .await?;
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await?;
    assert_eq!(v["status"], 403, "{v}");
    Ok(())
}

#[tokio::test]
async fn anonymous_reads_open_the_client_api_not_the_admin_api() -> TestResult {
    let s = TestServer::start_with(|st| {
        secure(st);
        st.auth.anonymous_read = true;
    })
    .await?;
    let admin = s.admin_token().await?;
    let r = s
        .http
        .post(s.url(ADMIN))
        .header("accessToken", &admin)
        .form(&[("dataId", "a.txt"), ("groupName", "G"), ("content", "x")])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    let q = [("dataId", "a.txt"), ("groupName", "G")];
    let client = get(&s, CLIENT, &q).await?.ok()?;
    assert_eq!(client["content"], "x");
    // The same read over the admin API needs a token (Nacos's AuthAdminFilter).
    let a = get(&s, ADMIN, &q).await?;
    assert_eq!(a.status, 403, "{}", a.body);
    assert_eq!(a.json()?["error"], "Forbidden");
    let a = get(&s, &format!("{ADMIN}/list"), &[]).await?;
    assert_eq!(a.status, 403, "{}", a.body);
    Ok(())
}
