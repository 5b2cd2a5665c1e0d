//! JSON Schemas of config keys (docs/schema-validation.md) against a real server over real
//! sockets: schemas set, read, listed and removed through `/nacos/nacelle/v1/schemas`
//! (on SQLite, MariaDB and PostgreSQL); a publish that breaks a schema refused with the
//! failing path and rule on HTTP v1, v2, v3, gRPC (the real Rust SDK), the console API,
//! an import, a change request being opened, a beta (gray) publish and an encrypted
//! config, storing nothing; a valid
//! publish passing on each; YAML, properties, TOML and JSON content checked alike;
//! `/schemas/check`; the permissions (reading needs read, setting `ROLE_ADMIN`); and two
//! nodes on one MariaDB or PostgreSQL database, where a schema set on one applies on the
//! other once it re-read them (every 2 s).

mod common;

use std::time::{Duration, Instant};

use nacelle_testkit::per_backend::skipped;
use nacelle_testkit::server::{secure, BinaryServer, TestServer};
use nacelle_testkit::{per_backend, Backend, TestDb, TestResult};
use nacos_sdk::api::config::ConfigServiceBuilder;
use nacos_sdk::api::props::ClientProps;
use serde_json::{json, Value};

use common::archive::{multipart, zip_of};

const SCHEMAS: &str = "/nacos/nacelle/v1/schemas";
const GROUP: &str = "PAYMENTS";

/// Keys whose dataId contains `limits`: a `limits` object whose `max` is an integer of at
/// most 1000.
const LIMITS: &str = r#"{"type":"object","required":["limits"],
  "properties":{"limits":{"type":"object","properties":{"max":{"type":"integer","maximum":1000}}}}}"#;
/// `.properties` keys: the flat key `limits.max`, a string of one to three digits.
const FLAT: &str =
    r#"{"type":"object","properties":{"limits.max":{"type":"string","pattern":"^[0-9]{1,3}$"}}}"#;

const TOO_MUCH: &str = "limits:\n  max: 5000\n";
const FINE: &str = "limits:\n  max: 10\n";
/// What every refusal of `TOO_MUCH` names: the schema, the path, the value and the rule.
const REFUSAL: &str = "schema public>>PAYMENTS>>*limits* refused /limits/max: 5000 is greater than the maximum of 1000 (rule maximum at #/properties/limits/properties/max/maximum)";

/// `method` on `path` with a JSON body (a token in the query when given): (status, JSON).
async fn call(
    ts: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> TestResult<(u16, Value)> {
    let mut req = ts.http.request(method, ts.url(path)).json(&body);
    if let Some(t) = token {
        req = req.query(&[("accessToken", t)]);
    }
    let r = req.send().await?;
    let status = r.status().as_u16();
    let text = r.text().await?;
    let v = serde_json::from_str(&text).map_err(|e| format!("{status} {text}: {e}"))?;
    Ok((status, v))
}

async fn set_schema(ts: &TestServer, data_id: &str, schema: &str) -> TestResult<(u16, Value)> {
    let schema: Value = serde_json::from_str(schema)?;
    call(
        ts,
        reqwest::Method::PUT,
        SCHEMAS,
        None,
        json!({"namespaceId": "public", "group": GROUP, "dataId": data_id,
               "schema": schema, "description": "payment limits"}),
    )
    .await
}

/// A form POST: (status, body text).
async fn post_form(
    ts: &TestServer,
    path: &str,
    form: &[(&str, &str)],
) -> TestResult<(u16, String)> {
    let r = ts.http.post(ts.url(path)).form(form).send().await?;
    Ok((r.status().as_u16(), r.text().await?))
}

// The schema API on every backend.
per_backend!(schemas_are_set_read_listed_and_removed);

async fn schemas_are_set_read_listed_and_removed(backend: Backend) -> TestResult {
    let ts = TestServer::start_on(backend).await?;
    let (status, v) = set_schema(&ts, "*limits*", LIMITS).await?;
    assert_eq!((status, &v["code"]), (200, &json!(0)), "{v}");
    assert_eq!(v["data"]["dataId"], "*limits*");
    assert_eq!(v["data"]["schema"]["required"], json!(["limits"]));
    // Form fields work too, the schema as text.
    let (status, body) = post_form(
        &ts,
        SCHEMAS,
        &[
            ("group", GROUP),
            ("dataId", "*.properties"),
            ("schema", FLAT),
        ],
    )
    .await?;
    assert_eq!(status, 200, "{body}");

    let (status, v) = call(&ts, reqwest::Method::GET, SCHEMAS, None, json!({})).await?;
    assert_eq!(status, 200, "{v}");
    let names: Vec<&str> = v["data"]
        .as_array()
        .ok_or("list")?
        .iter()
        .filter_map(|s| s["dataId"].as_str())
        .collect();
    assert_eq!(names, ["*.properties", "*limits*"]);
    let one = ts
        .http
        .get(ts.url(SCHEMAS))
        .query(&[("group", GROUP), ("dataId", "*limits*")])
        .send()
        .await?
        .json::<Value>()
        .await?;
    assert_eq!(one["data"]["description"], "payment limits", "{one}");
    assert_eq!(one["data"]["namespaceId"], "public", "{one}");
    let other_ns = ts
        .http
        .get(ts.url(SCHEMAS))
        .query(&[("namespaceId", "dev")])
        .send()
        .await?
        .json::<Value>()
        .await?;
    assert_eq!(other_ns["data"], json!([]), "{other_ns}");

    // Refused: a schema that does not compile, a pattern of another shape, a missing field.
    let (status, v) = set_schema(&ts, "*limits*", r#"{"type": 12}"#).await?;
    assert_eq!((status, &v["code"]), (400, &json!(20002)), "{v}");
    assert!(
        v["data"]
            .as_str()
            .unwrap_or_default()
            .contains("does not compile"),
        "{v}"
    );
    let (status, v) = set_schema(&ts, "a*b", LIMITS).await?;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["data"].as_str().unwrap_or_default().contains("`a*b`"),
        "{v}"
    );
    let (status, body) = post_form(&ts, SCHEMAS, &[("group", GROUP), ("dataId", "x")]).await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("'schema'"), "{body}");

    // The schema holds on this backend: refused, then removed, then passing.
    let (status, body) = post_form(
        &ts,
        "/nacos/v1/cs/configs",
        &[
            ("dataId", "limits.yaml"),
            ("group", GROUP),
            ("type", "yaml"),
            ("content", TOO_MUCH),
        ],
    )
    .await?;
    assert_eq!(
        (status, body.as_str()),
        (400, format!("caused: {REFUSAL};").as_str())
    );
    let del = ts
        .http
        .delete(ts.url(SCHEMAS))
        .query(&[("group", GROUP), ("dataId", "*limits*")])
        .send()
        .await?;
    assert_eq!(del.status().as_u16(), 200);
    let again = ts
        .http
        .delete(ts.url(SCHEMAS))
        .query(&[("group", GROUP), ("dataId", "*limits*")])
        .send()
        .await?;
    assert_eq!(again.status().as_u16(), 404);
    ts.publish("", GROUP, "limits.yaml", TOO_MUCH).await?;
    Ok(())
}

#[tokio::test]
async fn a_refusal_names_the_path_on_every_protocol_and_valid_content_passes() -> TestResult {
    let ts = TestServer::start().await?;
    assert_eq!(set_schema(&ts, "*limits*", LIMITS).await?.0, 200);
    assert_eq!(set_schema(&ts, "*.properties", FLAT).await?.0, 200);

    // HTTP v1, v2, v3: 400 with the refusal; nothing stored; the valid content passes.
    for (path, group_param, ns_param) in [
        ("/nacos/v1/cs/configs", "group", "tenant"),
        ("/nacos/v2/cs/config", "group", "namespaceId"),
        ("/nacos/v3/admin/cs/config", "groupName", "namespaceId"),
    ] {
        let data_id = format!("limits-{}.yaml", path.len());
        let form = |content: &'static str| {
            [
                ("dataId", data_id.clone()),
                (group_param, GROUP.to_string()),
                (ns_param, String::new()),
                ("type", "yaml".to_string()),
                ("content", content.to_string()),
            ]
        };
        let r = ts
            .http
            .post(ts.url(path))
            .form(&form(TOO_MUCH))
            .send()
            .await?;
        let status = r.status().as_u16();
        let body = r.text().await?;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains(REFUSAL), "{path}: {body}");
        assert_eq!(ts.get("", GROUP, &data_id).await?, None, "{path}");
        let r = ts.http.post(ts.url(path)).form(&form(FINE)).send().await?;
        assert_eq!(r.status().as_u16(), 200, "{path}: {}", r.text().await?);
        assert_eq!(ts.get("", GROUP, &data_id).await?.as_deref(), Some(FINE));
        println!("{path}: {body}");
    }

    // gRPC through the real Rust SDK.
    let running = ts.server.as_ref().ok_or("no server")?;
    let cache = tempfile::tempdir()?;
    let sdk = ConfigServiceBuilder::new(
        ClientProps::new()
            .server_addr(format!("127.0.0.1:{}", running.http_addr.port()))
            .remote_grpc_port(running.grpc_addr.port())
            .namespace("")
            .app_name("schema-test")
            .cache_dir(cache.path())
            .env_first(false),
    )
    .build()
    .await
    .map_err(|e| format!("sdk build: {e}"))?;
    let refused = sdk
        .publish_config(
            "limits-grpc.yaml".into(),
            GROUP.into(),
            TOO_MUCH.into(),
            Some("yaml".into()),
        )
        .await;
    let err = match refused {
        Err(e) => e.to_string(),
        Ok(ok) => return Err(format!("gRPC publish not refused: {ok}").into()),
    };
    assert!(err.contains(REFUSAL), "{err}");
    println!("gRPC: {err}");
    assert_eq!(ts.get("", GROUP, "limits-grpc.yaml").await?, None);
    assert!(
        sdk.publish_config(
            "limits-grpc.yaml".into(),
            GROUP.into(),
            FINE.into(),
            Some("yaml".into())
        )
        .await?
    );

    // The console API.
    let console = "/nacos/console/api/config";
    let form = |content: &'static str| {
        [
            ("namespace", ""),
            ("group", GROUP),
            ("dataId", "limits-console.yaml"),
            ("type", "yaml"),
            ("content", content),
        ]
    };
    let (status, body) = post_form(&ts, console, &form(TOO_MUCH)).await?;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body)?;
    assert_eq!(v["error"], REFUSAL, "{v}");
    assert_eq!(ts.get("", GROUP, "limits-console.yaml").await?, None);
    assert_eq!(post_form(&ts, console, &form(FINE)).await?.0, 200);

    // An import: the whole archive refused, nothing written; a valid one passes.
    let import = |zip: Vec<u8>| {
        let (ct, body) = multipart(Some(&zip), &[("namespace", ""), ("policy", "OVERWRITE")]);
        ts.http
            .post(ts.url("/nacos/v1/cs/configs?import=true"))
            .header("Content-Type", ct)
            .body(body)
    };
    let bad = zip_of(&[
        ("PAYMENTS/other.txt", b"x"),
        ("PAYMENTS/limits-import.yaml", TOO_MUCH.as_bytes()),
    ])?;
    let r = import(bad).send().await?;
    let status = r.status().as_u16();
    let v: Value = r.json().await?;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"].as_str().unwrap_or_default().contains(REFUSAL),
        "{v}"
    );
    assert_eq!(ts.get("", GROUP, "other.txt").await?, None);
    let good = zip_of(&[("PAYMENTS/limits-import.yaml", FINE.as_bytes())])?;
    let r = import(good).send().await?;
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await?);
    assert_eq!(
        ts.get("", GROUP, "limits-import.yaml").await?.as_deref(),
        Some(FINE)
    );

    // A change request is checked when it is opened.
    let (status, v) = call(
        &ts,
        reqwest::Method::POST,
        "/nacos/nacelle/v1/changes",
        None,
        json!({"namespaceId": "public", "title": "raise the limit", "items": [
            {"group": GROUP, "dataId": "limits-cr.yaml", "content": TOO_MUCH, "type": "yaml"}]}),
    )
    .await?;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains(REFUSAL), "{v}");

    // A beta (gray) publish of a key with a formal config is checked as well.
    let r = ts
        .http
        .post(ts.url("/nacos/v1/cs/configs"))
        .header("betaIps", "127.0.0.1")
        .form(&[
            ("dataId", "limits-31.yaml"),
            ("group", GROUP),
            ("type", "yaml"),
            ("content", TOO_MUCH),
        ])
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().await?.contains(REFUSAL));

    // An encrypted config: the plaintext is checked before it is sealed.
    let (status, body) = post_form(
        &ts,
        "/nacos/v1/cs/configs",
        &[
            ("dataId", "cipher-aes-limits.yaml"),
            ("group", GROUP),
            ("type", "yaml"),
            ("content", TOO_MUCH),
        ],
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("/limits/max"), "{body}");
    let (status, body) = post_form(
        &ts,
        "/nacos/v1/cs/configs",
        &[
            ("dataId", "cipher-aes-limits.yaml"),
            ("group", GROUP),
            ("type", "yaml"),
            ("content", FINE),
        ],
    )
    .await?;
    assert_eq!((status, body.as_str()), (200, "true"));
    Ok(())
}

#[tokio::test]
async fn yaml_properties_toml_and_json_are_checked_alike() -> TestResult {
    let ts = TestServer::start().await?;
    assert_eq!(set_schema(&ts, "*limits*", LIMITS).await?.0, 200);
    assert_eq!(set_schema(&ts, "*.properties", FLAT).await?.0, 200);
    let publish = |data_id: &'static str, ty: &'static str, content: &'static str| {
        let ts = &ts;
        async move {
            let form = [
                ("dataId", data_id),
                ("group", GROUP),
                ("type", ty),
                ("content", content),
            ];
            post_form(ts, "/nacos/v1/cs/configs", &form).await
        }
    };
    for (data_id, ty, bad, good, path) in [
        (
            "limits.json",
            "json",
            r#"{"limits":{"max":5000}}"#,
            r#"{"limits":{"max":7}}"#,
            "/limits/max",
        ),
        (
            "limits.toml",
            "toml",
            "[limits]\nmax = 5000\n",
            "[limits]\nmax = 7\n",
            "/limits/max",
        ),
        (
            "limits.yml",
            "yaml",
            "limits: {max: 5000}\n",
            "limits: {max: 7}\n",
            "/limits/max",
        ),
        // Properties are a flat object of strings: `limits.max` is one key.
        (
            "flat.properties",
            "properties",
            "limits.max=5000\n",
            "limits.max=7\n",
            "/limits.max",
        ),
    ] {
        let (status, body) = publish(data_id, ty, bad).await?;
        assert_eq!(status, 400, "{data_id}: {body}");
        assert!(
            body.contains(&format!("refused {path}: ")),
            "{data_id}: {body}"
        );
        println!("{ty}: {body}");
        let (status, body) = publish(data_id, ty, good).await?;
        assert_eq!((status, body.as_str()), (200, "true"), "{data_id}");
    }
    // A missing required member is named at the root; a YAML stream is checked per
    // document; content of a type no schema checks is refused while a schema applies.
    let (status, body) = publish("limits-2.yaml", "yaml", "other: 1\n").await?;
    assert_eq!(status, 400);
    assert!(
        body.contains("refused / (the document): \"limits\" is a required property (rule required"),
        "{body}"
    );
    let (status, body) = publish(
        "limits-3.yaml",
        "yaml",
        "limits: {max: 1}\n---\nlimits: {max: 5000}\n",
    )
    .await?;
    assert_eq!(status, 400);
    assert!(body.contains("refused document 2 /limits/max"), "{body}");
    let (status, body) = publish("limits-4.txt", "text", "max = 5000").await?;
    assert_eq!(status, 400);
    assert!(
        body.contains("content type `text` is not one a schema checks"),
        "{body}"
    );
    // Keys no schema covers are not checked.
    let (status, _) = publish("other.txt", "text", "max = 5000").await?;
    assert_eq!(status, 200);

    // `/schemas/check`: every problem, nothing published.
    let (status, v) = call(
        &ts,
        reqwest::Method::POST,
        &format!("{SCHEMAS}/check"),
        None,
        json!({"group": GROUP, "dataId": "limits-5.yaml", "type": "yaml",
               "content": "limits: {max: 5000}\n"}),
    )
    .await?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["valid"], false, "{v}");
    assert_eq!(v["data"]["schemas"], json!(["public>>PAYMENTS>>*limits*"]));
    assert_eq!(v["data"]["problems"][0]["path"], "/limits/max", "{v}");
    assert_eq!(v["data"]["problems"][0]["rule"], "maximum", "{v}");
    assert_eq!(ts.get("", GROUP, "limits-5.yaml").await?, None);
    let (_, v) = call(
        &ts,
        reqwest::Method::POST,
        &format!("{SCHEMAS}/check"),
        None,
        json!({"group": GROUP, "dataId": "limits-5.yaml", "type": "yaml",
               "content": "limits: {max: 5}\n"}),
    )
    .await?;
    assert_eq!(
        (&v["data"]["valid"], &v["data"]["problems"]),
        (&json!(true), &json!([])),
        "{v}"
    );
    Ok(())
}

#[tokio::test]
async fn reading_needs_read_and_setting_needs_an_administrator() -> TestResult {
    let ts = TestServer::start_with(secure).await?;
    let admin = ts.admin_token().await?;
    // Anonymous: refused.
    let (status, _) = call(&ts, reqwest::Method::GET, SCHEMAS, None, json!({})).await?;
    assert_eq!(status, 403);
    let (status, v) = call(
        &ts,
        reqwest::Method::PUT,
        SCHEMAS,
        Some(&admin),
        json!({"group": GROUP, "dataId": "*limits*", "schema": LIMITS}),
    )
    .await?;
    assert_eq!(status, 200, "{v}");
    // A user with read on the namespace may read, not set or remove.
    let user = ts.user_granted(&admin, "reader", ":*:*", "r").await?;
    let (status, v) = call(&ts, reqwest::Method::GET, SCHEMAS, Some(&user), json!({})).await?;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"].as_array().map(Vec::len), Some(1), "{v}");
    let (status, _) = call(
        &ts,
        reqwest::Method::PUT,
        SCHEMAS,
        Some(&user),
        json!({"group": GROUP, "dataId": "*x*", "schema": LIMITS}),
    )
    .await?;
    assert_eq!(status, 403);
    let (status, _) = call(
        &ts,
        reqwest::Method::DELETE,
        SCHEMAS,
        Some(&user),
        json!({"group": GROUP, "dataId": "*limits*"}),
    )
    .await?;
    assert_eq!(status, 403);
    // A user with read elsewhere sees none.
    let other = ts.user_granted(&admin, "other", "dev:*:*", "r").await?;
    let (status, v) = call(&ts, reqwest::Method::GET, SCHEMAS, Some(&other), json!({})).await?;
    assert_eq!((status, &v["data"]), (200, &json!([])), "{v}");
    Ok(())
}

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");

/// Two nodes of one database: a schema set on the first refuses on the second once it
/// re-read the schemas; removed on the first, the second lets the content through again.
async fn a_schema_set_on_one_node_applies_on_another(backend: Backend) -> TestResult {
    if skipped(backend) {
        return Ok(());
    }
    let db = TestDb::create(backend).await?;
    let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = BinaryServer::spawn(NACELLE, dir_a.path(), &["--db", &db.url])?;
    let b = BinaryServer::spawn(NACELLE, dir_b.path(), &["--db", &db.url])?;
    a.api.wait_ready().await?;
    b.api.wait_ready().await?;
    let http = reqwest::Client::new();
    let r = http
        .put(a.url(SCHEMAS))
        .json(&json!({"group": GROUP, "dataId": "*limits*", "schema": LIMITS}))
        .send()
        .await?;
    assert_eq!(r.status(), 200, "{}", r.text().await?);
    let publish_on_b = || {
        http.post(b.url("/nacos/v1/cs/configs"))
            .form(&[
                ("dataId", "limits.yaml"),
                ("group", GROUP),
                ("type", "yaml"),
                ("content", TOO_MUCH),
            ])
            .send()
    };
    // The follow delay is 2 s; the bound only keeps a broken follower from hanging the test.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = publish_on_b().await?;
        let status = r.status().as_u16();
        let body = r.text().await?;
        if status == 400 {
            assert!(body.contains(REFUSAL), "{body}");
            break;
        }
        // Published before node B knew the schema: fine, and written as any publish.
        assert_eq!(status, 200, "{body}");
        assert!(Instant::now() < deadline, "node B never applied the schema");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let listed: Value = http.get(b.url(SCHEMAS)).send().await?.json().await?;
    assert_eq!(listed["data"][0]["dataId"], "*limits*", "{listed}");
    let r = http
        .delete(a.url(SCHEMAS))
        .query(&[("group", GROUP), ("dataId", "*limits*")])
        .send()
        .await?;
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = publish_on_b().await?;
        if r.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "node B kept the removed schema");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

#[tokio::test]
async fn mariadb_a_schema_set_on_one_node_applies_on_another() -> TestResult {
    a_schema_set_on_one_node_applies_on_another(Backend::MariaDb).await
}

#[tokio::test]
async fn postgres_a_schema_set_on_one_node_applies_on_another() -> TestResult {
    a_schema_set_on_one_node_applies_on_another(Backend::Postgres).await
}
