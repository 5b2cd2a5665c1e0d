//! Nacos 3's admin API for history (`/nacos/v3/admin/cs/history`), listeners by IP
//! (`/nacos/v3/admin/cs/listener`) and namespaces (`/nacos/v3/admin/core/namespace`)
//! against a real server over real sockets: every endpoint's `Result` envelope and model
//! compared field by field with what Nacos 3.0.3 writes (`/work/shared/docs/nacos3-api.md`
//! §c–§e, §g), every refusal with its status and code, and the same endpoints with
//! authentication on. Tests that read the store run on every backend (`per_backend!`).

use std::time::{Duration, Instant};

use nacelle_testkit::api::{listening_configs, Reply};
use nacelle_testkit::grpc::{recorder, Sdk};
use nacelle_testkit::server::{secure, TestServer};
use nacelle_testkit::{md5, per_backend, Backend, TestResult};
use serde_json::{json, Value};

const HISTORY: &str = "/nacos/v3/admin/cs/history";
const NAMESPACE: &str = "/nacos/v3/admin/core/namespace";
const LISTENER: &str = "/nacos/v3/admin/cs/listener";

/// A GET with query parameters.
async fn get(s: &TestServer, path: &str, query: &[(&str, &str)]) -> TestResult<Reply> {
    let r = s.http.get(s.url(path)).query(query).send().await?;
    Ok(Reply::read(r).await?)
}

/// A request with a form body (POST, PUT) or query parameters (DELETE).
async fn send(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    params: &[(&str, &str)],
) -> TestResult<Reply> {
    let req = if method == reqwest::Method::DELETE {
        s.http.request(method, s.url(path)).query(params)
    } else {
        s.http.request(method, s.url(path)).form(params)
    };
    Ok(Reply::read(req.send().await?).await?)
}

/// The `data` of a successful `Result`: HTTP 200, `code` 0, `message` "success", and
/// nothing else in the envelope.
fn data(r: &Reply) -> TestResult<Value> {
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json()?;
    assert_eq!(sorted_keys(&v), ["code", "data", "message"], "{v}");
    assert_eq!(v["code"], 0, "{v}");
    assert_eq!(v["message"], "success", "{v}");
    Ok(v["data"].clone())
}

/// A refusal in Nacos's `Result` form: the status, the code and the code's message.
fn refused(r: &Reply, status: u16, code: i64, message: &str) -> TestResult<Value> {
    assert_eq!(r.status, status, "{}", r.body);
    let v = r.json()?;
    assert_eq!(sorted_keys(&v), ["code", "data", "message"], "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["message"], message, "{v}");
    Ok(v["data"].clone())
}

fn sorted_keys(v: &Value) -> Vec<String> {
    let mut keys: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// `ConfigHistoryBasicInfo`'s properties.
const HISTORY_BASIC: &[&str] = &[
    "id",
    "namespaceId",
    "groupName",
    "dataId",
    "md5",
    "type",
    "appName",
    "createTime",
    "modifyTime",
    "srcIp",
    "srcUser",
    "opType",
    "publishType",
];

/// What `ConfigHistoryDetailInfo` adds.
const HISTORY_DETAIL: &[&str] = &["content", "encryptedDataKey", "grayName", "extInfo"];

/// `ConfigBasicInfo`'s properties.
const CONFIG_BASIC: &[&str] = &[
    "id",
    "namespaceId",
    "groupName",
    "dataId",
    "md5",
    "type",
    "appName",
    "createTime",
    "modifyTime",
];

/// `Namespace`'s properties.
const NAMESPACE_FIELDS: &[&str] = &[
    "namespace",
    "namespaceShowName",
    "namespaceDesc",
    "quota",
    "configCount",
    "type",
];

const KEY: [(&str, &str); 2] = [("dataId", "h.yaml"), ("groupName", "G")];

per_backend!(history_lists_newest_first_and_shows_entries);
async fn history_lists_newest_first_and_shows_entries(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    for content in ["a: 1\n", "a: 2\n", "a: 3\n"] {
        s.publish("", "G", "h.yaml", content).await?;
    }
    s.publish("", "G", "other.yaml", "o: 1\n").await?;

    // The list: newest first; an update's row holds the replaced content.
    let page = data(&get(&s, &format!("{HISTORY}/list"), &KEY).await?)?;
    assert_eq!(
        sorted_keys(&page),
        sorted(&["totalCount", "pageNumber", "pagesAvailable", "pageItems"])
    );
    assert_eq!(page["totalCount"], 3, "{page}");
    assert_eq!(page["pageNumber"], 1);
    assert_eq!(page["pagesAvailable"], 1);
    let items = page["pageItems"].as_array().ok_or("pageItems")?.clone();
    assert_eq!(items.len(), 3);
    let ops: Vec<&str> = items
        .iter()
        .map(|i| i["opType"].as_str().unwrap_or("?").trim())
        .collect();
    assert_eq!(ops, ["U", "U", "I"]);
    let mut nids = Vec::new();
    for item in &items {
        assert_eq!(sorted_keys(item), sorted(HISTORY_BASIC), "{item}");
        // `ConfigBasicInfo.id` is written by `ToStringSerializer`: the nid as a string.
        let nid: i64 = item["id"].as_str().ok_or("id is a string")?.parse()?;
        nids.push(nid);
        assert_eq!(item["namespaceId"], "public");
        assert_eq!(item["groupName"], "G");
        assert_eq!(item["dataId"], "h.yaml");
        // Nacos's list query reads neither md5 nor a type.
        assert_eq!(item["md5"], Value::Null);
        assert_eq!(item["type"], Value::Null);
        assert_eq!(item["srcIp"], "127.0.0.1");
        assert_eq!(item["publishType"], "formal");
        assert!(item["createTime"].as_i64().is_some_and(|t| t > 0), "{item}");
        assert!(item["modifyTime"].as_i64().is_some_and(|t| t > 0), "{item}");
    }
    assert!(
        nids.windows(2).all(|w| w[0] > w[1]),
        "newest first: {nids:?}"
    );

    // One entry: the newest U row holds the content before the last update.
    let newest = nids[0].to_string();
    let entry = data(&get(&s, HISTORY, &[KEY[0], KEY[1], ("nid", &newest)]).await?)?;
    let mut detail_fields: Vec<&str> = HISTORY_BASIC.to_vec();
    detail_fields.extend(HISTORY_DETAIL);
    assert_eq!(sorted_keys(&entry), sorted(&detail_fields), "{entry}");
    assert_eq!(entry["id"], newest.as_str());
    assert_eq!(entry["content"], "a: 2\n");
    assert_eq!(entry["md5"], md5("a: 2\n").as_str());
    assert_eq!(entry["opType"].as_str().map(str::trim), Some("U"));
    assert_eq!(entry["type"], Value::Null);
    assert_eq!(entry["grayName"], Value::Null);
    assert_eq!(entry["encryptedDataKey"], "");
    assert_eq!(entry["publishType"], "formal");
    let oldest = nids[2].to_string();
    let first = data(&get(&s, HISTORY, &[KEY[0], KEY[1], ("nid", &oldest)]).await?)?;
    assert_eq!(first["content"], "a: 1\n");
    assert_eq!(first["opType"].as_str().map(str::trim), Some("I"));

    // A nid of another key: AccessException, 403/10001.
    let other = data(
        &get(
            &s,
            &format!("{HISTORY}/list"),
            &[("dataId", "other.yaml"), ("groupName", "G")],
        )
        .await?,
    )?;
    let other_nid = other["pageItems"][0]["id"]
        .as_str()
        .ok_or("other nid")?
        .to_string();
    let r = get(&s, HISTORY, &[KEY[0], KEY[1], ("nid", &other_nid)]).await?;
    let detail = refused(&r, 403, 10001, "access denied")?;
    assert_eq!(detail, "Please check dataId, group or namespaceId.");
    // The same nid under another namespace: refused too.
    let r = get(
        &s,
        HISTORY,
        &[
            ("dataId", "other.yaml"),
            ("groupName", "G"),
            ("namespaceId", "dev"),
            ("nid", &other_nid),
        ],
    )
    .await?;
    refused(&r, 403, 10001, "access denied")?;
    // An unknown nid: Nacos's `BeanUtils.copyProperties(null, …)`, 400/20002.
    let r = get(&s, HISTORY, &[KEY[0], KEY[1], ("nid", "987654321")]).await?;
    refused(&r, 400, 20002, "parameter validate error")?;
    // No nid, or not a number.
    let r = get(&s, HISTORY, &KEY).await?;
    let detail = refused(&r, 400, 10000, "parameter missing")?;
    assert_eq!(
        detail,
        "Required request parameter 'nid' for method parameter type Long is not present"
    );
    let r = get(&s, HISTORY, &[KEY[0], KEY[1], ("nid", "x")]).await?;
    refused(&r, 400, 20002, "parameter validate error")?;

    // The previous version of the config row: the history row with the highest nid.
    let record = s.record("", "G", "h.yaml").await?;
    let config_id = record["id"]
        .as_str()
        .map(str::to_string)
        .or_else(|| record["id"].as_i64().map(|i| i.to_string()))
        .ok_or("config id")?;
    let prev = data(
        &get(
            &s,
            &format!("{HISTORY}/previous"),
            &[KEY[0], KEY[1], ("id", &config_id)],
        )
        .await?,
    )?;
    assert_eq!(sorted_keys(&prev), sorted(&detail_fields), "{prev}");
    assert_eq!(prev["id"], newest.as_str());
    assert_eq!(prev["content"], "a: 2\n");
    // Of another key: 403/10001; of no row: 400/20002; no id: 400/10000.
    let r = get(
        &s,
        &format!("{HISTORY}/previous"),
        &[
            ("dataId", "other.yaml"),
            ("groupName", "G"),
            ("id", &config_id),
        ],
    )
    .await?;
    refused(&r, 403, 10001, "access denied")?;
    let r = get(
        &s,
        &format!("{HISTORY}/previous"),
        &[KEY[0], KEY[1], ("id", "987654321")],
    )
    .await?;
    refused(&r, 400, 20002, "parameter validate error")?;
    let r = get(&s, &format!("{HISTORY}/previous"), &KEY).await?;
    refused(&r, 400, 10000, "parameter missing")?;
    Ok(())
}

per_backend!(history_pages_and_bad_input);
async fn history_pages_and_bad_input(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    for content in ["1", "2", "3"] {
        s.publish("", "G", "h.yaml", content).await?;
    }
    let list = format!("{HISTORY}/list");
    let page = data(
        &get(
            &s,
            &list,
            &[KEY[0], KEY[1], ("pageNo", "2"), ("pageSize", "2")],
        )
        .await?,
    )?;
    assert_eq!(page["totalCount"], 3);
    assert_eq!(page["pageNumber"], 2);
    assert_eq!(page["pagesAvailable"], 2);
    assert_eq!(page["pageItems"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        page["pageItems"][0]["opType"].as_str().map(str::trim),
        Some("I")
    );
    // Over 500 is clamped to 500, not refused.
    let page = data(&get(&s, &list, &[KEY[0], KEY[1], ("pageSize", "1000")]).await?)?;
    assert_eq!(page["pageItems"].as_array().map(Vec::len), Some(3));
    // Below 1 or not a number: 400/20002 (`PageForm.validate()`).
    for (name, value) in [
        ("pageSize", "0"),
        ("pageNo", "0"),
        ("pageSize", "-1"),
        ("pageSize", "x"),
    ] {
        let r = get(&s, &list, &[KEY[0], KEY[1], (name, value)]).await?;
        refused(&r, 400, 20002, "parameter validate error")?;
    }
    // `groupName` first, then `dataId` (the legacy `group` is not read).
    let r = get(&s, &list, &[("dataId", "h.yaml"), ("group", "G")]).await?;
    let detail = refused(&r, 400, 10000, "parameter missing")?;
    assert!(
        detail.as_str().is_some_and(|d| d.contains("'groupName'")),
        "{detail}"
    );
    let r = get(&s, &list, &[("groupName", "G")]).await?;
    let detail = refused(&r, 400, 10000, "parameter missing")?;
    assert!(
        detail.as_str().is_some_and(|d| d.contains("'dataId'")),
        "{detail}"
    );
    // Nacos's param check filter: plain text.
    let r = get(&s, &list, &[("dataId", "h yaml"), ("groupName", "G")]).await?;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.starts_with("Param 'dataId' is illegal"),
        "{}",
        r.body
    );
    // A key without history: an empty page.
    let page = data(&get(&s, &list, &[("dataId", "none.yaml"), ("groupName", "G")]).await?)?;
    assert_eq!(page["totalCount"], 0);
    assert_eq!(page["pageItems"], json!([]));
    Ok(())
}

per_backend!(configs_of_a_namespace);
async fn configs_of_a_namespace(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("", "G", "a.yaml", "a: 1\n").await?;
    s.publish("", "G", "b.yaml", "b: 1\n").await?;
    s.publish("dev", "G", "c.yaml", "c: 1\n").await?;
    let configs = format!("{HISTORY}/configs");
    let public = data(&get(&s, &configs, &[("namespaceId", "public")]).await?)?;
    let items = public.as_array().ok_or("a list")?;
    let names: Vec<&str> = items.iter().filter_map(|i| i["dataId"].as_str()).collect();
    assert_eq!(names, ["a.yaml", "b.yaml"]);
    for item in items {
        assert_eq!(sorted_keys(item), sorted(CONFIG_BASIC), "{item}");
        assert!(
            item["id"]
                .as_str()
                .is_some_and(|id| id.parse::<i64>().is_ok()),
            "{item}"
        );
        assert_eq!(item["namespaceId"], "public");
        assert_eq!(item["groupName"], "G");
        assert_eq!(item["type"], "text");
    }
    assert_eq!(items[0]["md5"], md5("a: 1\n").as_str());
    // Blank is the default namespace too.
    let blank = data(&get(&s, &configs, &[("namespaceId", "")]).await?)?;
    assert_eq!(blank, public);
    let dev = data(&get(&s, &configs, &[("namespaceId", "dev")]).await?)?;
    assert_eq!(dev.as_array().map(Vec::len), Some(1), "{dev}");
    assert_eq!(dev[0]["namespaceId"], "dev");
    assert_eq!(dev[0]["dataId"], "c.yaml");
    let r = get(&s, &configs, &[]).await?;
    refused(&r, 400, 10000, "parameter missing")?;
    Ok(())
}

per_backend!(namespaces_round_trip_with_nacos_codes);
async fn namespaces_round_trip_with_nacos_codes(backend: Backend) -> TestResult {
    use reqwest::Method as M;
    let s = TestServer::start_on(backend).await?;
    s.publish("", "G", "p.yaml", "p: 1\n").await?;

    // The default namespace, first and alone.
    let list = data(&get(&s, &format!("{NAMESPACE}/list"), &[]).await?)?;
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    let public = &list[0];
    assert_eq!(sorted_keys(public), sorted(NAMESPACE_FIELDS), "{public}");
    assert_eq!(public["namespace"], "public");
    assert_eq!(public["namespaceShowName"], "public");
    assert_eq!(public["namespaceDesc"], "Default Namespace");
    assert_eq!(public["quota"], 200);
    assert_eq!(public["configCount"], 1);
    assert_eq!(public["type"], 0);
    let one = data(&get(&s, NAMESPACE, &[("namespaceId", "public")]).await?)?;
    assert_eq!(&one, public);

    // Create: `data: true`; then one namespace, field by field.
    let created = send(
        &s,
        M::POST,
        NAMESPACE,
        &[
            ("namespaceId", "dev1"),
            ("namespaceName", "Dev"),
            ("namespaceDesc", "the dev one"),
        ],
    )
    .await?;
    assert_eq!(data(&created)?, true);
    s.publish("dev1", "G", "d.yaml", "d: 1\n").await?;
    let dev = data(&get(&s, NAMESPACE, &[("namespaceId", "dev1")]).await?)?;
    assert_eq!(
        dev,
        json!({
            "namespace": "dev1",
            "namespaceShowName": "Dev",
            "namespaceDesc": "the dev one",
            "quota": 200,
            "configCount": 1,
            "type": 1,
        })
    );
    // A blank id gets a UUID.
    let created = send(
        &s,
        M::POST,
        NAMESPACE,
        &[("namespaceId", ""), ("namespaceName", "Gen")],
    )
    .await?;
    assert_eq!(data(&created)?, true);
    let list = data(&get(&s, &format!("{NAMESPACE}/list"), &[]).await?)?;
    let ids: Vec<&str> = list
        .as_array()
        .ok_or("a list")?
        .iter()
        .filter_map(|n| n["namespace"].as_str())
        .collect();
    assert_eq!(ids.len(), 3, "{list}");
    assert_eq!(ids[0], "public", "the default namespace first: {ids:?}");
    assert!(ids.contains(&"dev1"));
    let generated = list
        .as_array()
        .ok_or("a list")?
        .iter()
        .find(|n| n["namespaceShowName"] == "Gen")
        .ok_or("the generated namespace")?;
    let generated_id = generated["namespace"].as_str().ok_or("id")?;
    assert_eq!(generated_id.len(), 36, "a UUID: {generated_id}");
    assert_eq!(generated["type"], 1);

    // Refusals of a create.
    for (params, status, code, message) in [
        (
            &[("namespaceId", "dev1"), ("namespaceName", "again")][..],
            400,
            22002,
            "namespace already exist",
        ),
        (
            &[("namespaceId", "public"), ("namespaceName", "p")][..],
            400,
            22002,
            "namespace already exist",
        ),
        (
            &[("namespaceId", "bad id"), ("namespaceName", "b")][..],
            400,
            22000,
            "illegal namespace",
        ),
        (
            &[("namespaceId", "bad!"), ("namespaceName", "b")][..],
            400,
            22000,
            "illegal namespace",
        ),
        (
            &[("namespaceId", "okid"), ("namespaceName", "a@b")][..],
            400,
            22000,
            "illegal namespace",
        ),
        (
            &[("namespaceId", "okid")][..],
            400,
            10000,
            "parameter missing",
        ),
        (
            &[("namespaceName", "n")][..],
            400,
            10000,
            "parameter missing",
        ),
    ] {
        let r = send(&s, M::POST, NAMESPACE, params).await?;
        refused(&r, status, code, message)?;
    }
    let long = "x".repeat(129);
    let r = send(
        &s,
        M::POST,
        NAMESPACE,
        &[("namespaceId", &long), ("namespaceName", "l")],
    )
    .await?;
    refused(&r, 400, 22000, "illegal namespace")?;
    // Nothing was created by them.
    let check = format!("{NAMESPACE}/check");
    assert_eq!(
        data(&get(&s, &check, &[("namespaceId", "okid")]).await?)?,
        0
    );
    assert_eq!(
        data(&get(&s, &check, &[("namespaceId", "dev1")]).await?)?,
        1
    );

    // Unknown: 404/22001.
    let r = get(&s, NAMESPACE, &[("namespaceId", "nope")]).await?;
    let detail = refused(&r, 404, 22001, "namespace not exist")?;
    assert!(
        detail.as_str().is_some_and(|d| d.contains("nope")),
        "{detail}"
    );
    let r = get(&s, NAMESPACE, &[]).await?;
    refused(&r, 400, 10000, "parameter missing")?;

    // Update.
    let r = send(
        &s,
        M::PUT,
        NAMESPACE,
        &[
            ("namespaceId", "dev1"),
            ("namespaceName", "Dev 2"),
            ("namespaceDesc", "d2"),
        ],
    )
    .await?;
    assert_eq!(data(&r)?, true);
    let dev = data(&get(&s, NAMESPACE, &[("namespaceId", "dev1")]).await?)?;
    assert_eq!(dev["namespaceShowName"], "Dev 2");
    assert_eq!(dev["namespaceDesc"], "d2");
    let r = send(
        &s,
        M::PUT,
        NAMESPACE,
        &[("namespaceId", "dev1"), ("namespaceName", "a#b")],
    )
    .await?;
    refused(&r, 400, 22000, "illegal namespace")?;
    let r = send(&s, M::PUT, NAMESPACE, &[("namespaceId", "dev1")]).await?;
    refused(&r, 400, 10000, "parameter missing")?;
    let r = send(
        &s,
        M::PUT,
        NAMESPACE,
        &[("namespaceId", "nope"), ("namespaceName", "n")],
    )
    .await?;
    refused(&r, 404, 22001, "namespace not exist")?;

    // Delete: `data: true`, then gone.
    let r = send(&s, M::DELETE, NAMESPACE, &[("namespaceId", "dev1")]).await?;
    assert_eq!(data(&r)?, true);
    let r = get(&s, NAMESPACE, &[("namespaceId", "dev1")]).await?;
    refused(&r, 404, 22001, "namespace not exist")?;
    assert_eq!(
        data(&get(&s, &check, &[("namespaceId", "dev1")]).await?)?,
        0
    );
    let r = send(&s, M::DELETE, NAMESPACE, &[]).await?;
    refused(&r, 400, 10000, "parameter missing")?;
    // An absent namespace: `true`, as Nacos; the default one stays.
    let r = send(&s, M::DELETE, NAMESPACE, &[("namespaceId", "never-was")]).await?;
    assert_eq!(data(&r)?, true);
    let r = send(&s, M::DELETE, NAMESPACE, &[("namespaceId", "public")]).await?;
    refused(&r, 400, 22002, "namespace already exist")?;
    assert_eq!(
        data(&get(&s, &check, &[("namespaceId", "public")]).await?)?,
        1
    );
    Ok(())
}

/// Polls the listener query until `done` holds (at most 10 s).
async fn listeners_until(
    s: &TestServer,
    query: &[(&str, &str)],
    done: impl Fn(&Value) -> bool,
) -> TestResult<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = data(&get(s, LISTENER, query).await?)?;
        if done(&v) {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!("listeners {query:?}: {v}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_by_ip_see_long_polls_and_grpc() -> TestResult {
    let s = TestServer::start().await?;
    s.publish("", "G", "lp.yaml", "v: 1\n").await?;
    s.publish("dev", "G", "x.yaml", "w: 1\n").await?;

    // Two held v1 long polls, one per namespace.
    let polls: Vec<_> = [
        listening_configs(&[("lp.yaml", "G", &md5("v: 1\n"), None)]),
        listening_configs(&[("x.yaml", "G", &md5("w: 1\n"), Some("dev"))]),
    ]
    .into_iter()
    .map(|lc| {
        let api = s.api.clone();
        tokio::spawn(async move { api.long_poll(&lc, Some(30_000), &[]).await })
    })
    .collect();
    s.wait_listener("", "G", "lp.yaml", Duration::from_secs(10))
        .await?;
    s.wait_listener("dev", "G", "x.yaml", Duration::from_secs(10))
        .await?;

    // By default: the default namespace's keys only.
    let v = listeners_until(&s, &[("ip", "127.0.0.1")], |v| {
        v["listenersStatus"]["lp.yaml+G"].is_string()
    })
    .await?;
    assert_eq!(
        v,
        json!({"queryType": "ip", "listenersStatus": {"lp.yaml+G": md5("v: 1\n")}})
    );
    // `all`: every namespace; `namespaceId`: the default's and that one's.
    let both = json!({
        "queryType": "ip",
        "listenersStatus": {"lp.yaml+G": md5("v: 1\n"), "x.yaml+G+dev": md5("w: 1\n")},
    });
    assert_eq!(
        data(&get(&s, LISTENER, &[("ip", "127.0.0.1"), ("all", "true")]).await?)?,
        both
    );
    assert_eq!(
        data(&get(&s, LISTENER, &[("ip", "127.0.0.1"), ("namespaceId", "dev")]).await?)?,
        both
    );
    assert_eq!(
        data(
            &get(
                &s,
                LISTENER,
                &[("ip", "127.0.0.1"), ("aggregation", "false")]
            )
            .await?
        )?,
        v
    );
    // Another IP listens to nothing.
    let none = data(&get(&s, LISTENER, &[("ip", "10.9.9.9"), ("all", "true")]).await?)?;
    assert_eq!(none, json!({"queryType": "ip", "listenersStatus": {}}));
    // No ip: 400/10000.
    let r = get(&s, LISTENER, &[("all", "true")]).await?;
    let detail = refused(&r, 400, 10000, "parameter missing")?;
    assert_eq!(
        detail,
        "Required request parameter 'ip' for method parameter type String is not present"
    );

    // A gRPC listener (the Rust nacos-sdk) from the same IP shows up beside the polls.
    let grpc = s.server.as_ref().ok_or("stopped")?.grpc_addr;
    let sdk = Sdk::connect(s.addr.port(), grpc.port(), "", "v3-listener-test").await?;
    let (rec, _notes) = recorder();
    sdk.client
        .add_listener("grpc.yaml".to_string(), "G".to_string(), rec)
        .await
        .map_err(|e| format!("nacos-sdk add_listener: {e}"))?;
    let v = listeners_until(&s, &[("ip", "127.0.0.1")], |v| {
        v["listenersStatus"]["grpc.yaml+G"].is_string()
    })
    .await?;
    assert_eq!(
        v["listenersStatus"]["lp.yaml+G"],
        md5("v: 1\n").as_str(),
        "{v}"
    );

    // A change releases the polls.
    s.publish("", "G", "lp.yaml", "v: 2\n").await?;
    s.publish("dev", "G", "x.yaml", "w: 2\n").await?;
    for poll in polls {
        let r = tokio::time::timeout(Duration::from_secs(20), poll).await???;
        assert_eq!(r.status, 200);
        assert!(!r.body.is_empty(), "released by the change");
    }
    Ok(())
}

#[tokio::test]
async fn with_auth_on_the_admin_api_needs_a_token_and_rights() -> TestResult {
    use reqwest::Method as M;
    let s = TestServer::start_with(secure).await?;
    let admin = s.admin_token().await?;
    let paths: [(&str, &[(&str, &str)]); 5] = [
        (NAMESPACE, &[("namespaceId", "public")]),
        ("/nacos/v3/admin/core/namespace/list", &[]),
        ("/nacos/v3/admin/cs/history/list", &KEY),
        (
            "/nacos/v3/admin/cs/history/configs",
            &[("namespaceId", "public")],
        ),
        (LISTENER, &[("ip", "127.0.0.1")]),
    ];
    // No token, a bad token: Spring's 403 JSON, not a `Result`.
    for (path, query) in paths {
        for token in [None, Some("not-a-token")] {
            let mut req = s.http.get(s.url(path)).query(query);
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            let r = Reply::read(req.send().await?).await?;
            assert_eq!(r.status, 403, "{path} {token:?}: {}", r.body);
            let v = r.json()?;
            assert_eq!(v["status"], 403, "{v}");
            assert_eq!(v["error"], "Forbidden", "{v}");
            assert_eq!(v["path"], path, "{v}");
            assert!(v.get("code").is_none(), "{v}");
        }
        // The administrator's token in the `accessToken` header (the maintainer SDK's way).
        let r = s
            .http
            .get(s.url(path))
            .query(query)
            .header("accessToken", &admin)
            .send()
            .await?;
        let r = Reply::read(r).await?;
        data(&r)?;
    }

    // Credentials are checked before parameters, as Nacos's filters run (auth, then the
    // param check, then the controller).
    for (path, query) in [
        (
            "/nacos/v3/admin/cs/history/list",
            &[("dataId", "bad id"), ("groupName", "G")][..],
        ),
        (NAMESPACE, &[][..]),
        (LISTENER, &[][..]),
    ] {
        let r = Reply::read(s.http.get(s.url(path)).query(query).send().await?).await?;
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert_eq!(r.json()?["error"], "Forbidden", "{}", r.body);
    }

    // A user who may read the default namespace only.
    let reader = s.user_granted(&admin, "reader", ":*:*", "r").await?;
    let admin_api = nacelle_testkit::Api::with_token(s.addr, &admin)?;
    admin_api.publish("", "G", "h.yaml", "a: 1\n").await?;
    admin_api.publish("secret", "G", "h.yaml", "s: 1\n").await?;
    // Reads what it may read; history names the writer.
    let page = data(&as_user(&s, &reader, M::GET, "/nacos/v3/admin/cs/history/list", &KEY).await?)?;
    assert_eq!(page["totalCount"], 1);
    assert_eq!(page["pageItems"][0]["srcUser"], "nacos", "{page}");
    // Refused elsewhere: another namespace; the namespace API, which Nacos secures by a
    // fixed resource (`/v3/admin/core/namespace`, `/v3/admin/corenamespaces`) that no
    // `<ns>:<group>:<type>` permission matches; a config's listeners, which need WRITE;
    // and every write. Each is Spring's 403, and it comes before any check of the
    // parameters (Nacos's auth filter runs before its param check): a publish without
    // content, or with an illegal dataId, is refused, not reported as bad input.
    let secret = [
        ("dataId", "h.yaml"),
        ("groupName", "G"),
        ("namespaceId", "secret"),
    ];
    for (method, path, params) in [
        (M::GET, "/nacos/v3/admin/cs/history/list", &secret[..]),
        (M::GET, "/nacos/v3/admin/core/namespace/list", &[][..]),
        (M::GET, NAMESPACE, &[("namespaceId", "public")][..]),
        (
            M::GET,
            "/nacos/v3/admin/core/namespace/check",
            &[("namespaceId", "secret")][..],
        ),
        (M::GET, "/nacos/v3/admin/cs/config/listener", &KEY[..]),
        (M::POST, "/nacos/v3/admin/cs/config", &KEY[..]),
        (
            M::POST,
            "/nacos/v3/admin/cs/config",
            &[("dataId", "bad id!"), ("groupName", "G"), ("content", "x")][..],
        ),
        (
            M::GET,
            "/nacos/v3/admin/cs/config",
            &[("dataId", "h.yaml"), ("namespaceId", "secret")][..],
        ),
        (
            M::POST,
            NAMESPACE,
            &[("namespaceId", "mine"), ("namespaceName", "m")][..],
        ),
        (
            M::PUT,
            NAMESPACE,
            &[("namespaceId", "secret"), ("namespaceName", "m")][..],
        ),
        (M::DELETE, NAMESPACE, &[("namespaceId", "secret")][..]),
    ] {
        let r = as_user(&s, &reader, method.clone(), path, params).await?;
        assert_eq!(r.status, 403, "{method} {path} {params:?}: {}", r.body);
        assert_eq!(r.json()?["error"], "Forbidden", "{}", r.body);
    }
    // Where the reader may read, bad input is still bad input (400, not 403).
    let r = as_user(
        &s,
        &reader,
        M::GET,
        "/nacos/v3/admin/cs/config",
        &[("groupName", "G")],
    )
    .await?;
    assert_eq!(r.status, 400, "{}", r.body);

    // A permission on the resource `*` (what Nacos's regular expression needs to match the
    // namespace API's fixed resource) lets a non-administrator read every namespace, and
    // with `rw` listen-check a config; namespace writes stay an administrator's.
    let star = s.user_granted(&admin, "star", "*", "rw").await?;
    let r = s
        .http
        .post(s.url(NAMESPACE))
        .bearer_auth(&admin)
        .form(&[("namespaceId", "secret"), ("namespaceName", "Secret")])
        .send()
        .await?;
    data(&Reply::read(r).await?)?;
    let list = data(
        &as_user(
            &s,
            &star,
            M::GET,
            "/nacos/v3/admin/core/namespace/list",
            &[],
        )
        .await?,
    )?;
    let ids: Vec<&str> = list
        .as_array()
        .ok_or("list")?
        .iter()
        .filter_map(|n| n["namespace"].as_str())
        .collect();
    assert_eq!(ids, ["public", "secret"], "{list}");
    let one = data(&as_user(&s, &star, M::GET, NAMESPACE, &[("namespaceId", "secret")]).await?)?;
    assert_eq!(one["namespaceShowName"], "Secret", "{one}");
    data(
        &as_user(
            &s,
            &star,
            M::GET,
            "/nacos/v3/admin/cs/config/listener",
            &KEY,
        )
        .await?,
    )?;
    let r = as_user(
        &s,
        &star,
        M::POST,
        NAMESPACE,
        &[("namespaceId", "stars"), ("namespaceName", "s")],
    )
    .await?;
    assert_eq!(r.status, 403, "{}", r.body);
    Ok(())
}

#[tokio::test]
async fn history_of_an_encrypted_config_is_shown_decrypted_as_over_v1() -> TestResult {
    let s = TestServer::start().await?;
    let key = [("dataId", "cipher-aes-h.yml"), ("groupName", "G")];
    for content in ["p: 1\n", "p: 2\n"] {
        s.publish("", "G", "cipher-aes-h.yml", content).await?;
    }
    let page = data(&get(&s, &format!("{HISTORY}/list"), &key).await?)?;
    let nid = page["pageItems"][0]["id"]
        .as_str()
        .ok_or("nid")?
        .to_string();
    let entry = data(&get(&s, HISTORY, &[key[0], key[1], ("nid", &nid)]).await?)?;
    assert_eq!(entry["content"], "p: 1\n", "{entry}");
    assert!(
        entry["encryptedDataKey"]
            .as_str()
            .is_some_and(|k| !k.is_empty()),
        "{entry}"
    );
    let v1: Value = s
        .http
        .get(s.url("/nacos/v1/cs/history"))
        .query(&[
            ("dataId", "cipher-aes-h.yml"),
            ("group", "G"),
            ("nid", nid.as_str()),
        ])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(entry["content"], v1["content"]);
    assert_eq!(entry["encryptedDataKey"], v1["encryptedDataKey"]);
    assert_eq!(entry["md5"], v1["md5"]);
    Ok(())
}

/// A request with `token`: query parameters for GET and DELETE, a form otherwise.
async fn as_user(
    s: &TestServer,
    token: &str,
    method: reqwest::Method,
    path: &str,
    params: &[(&str, &str)],
) -> TestResult<Reply> {
    let req = if method == reqwest::Method::GET || method == reqwest::Method::DELETE {
        s.http.request(method, s.url(path)).query(params)
    } else {
        s.http.request(method, s.url(path)).form(params)
    };
    Ok(Reply::read(req.bearer_auth(token).send().await?).await?)
}
