//! Export, import and clone over real HTTP against a real server (`/nacos/v1/cs/configs`
//! `?export=true`, `?exportV2=true`, `?import=true`, `?clone=true`): round trips of 500
//! configs, each policy with Nacos's counts, archives built here in Nacos's exact layout,
//! the layout of our exports, every bad archive refused with the namespace unchanged, and
//! clones between namespaces. The tests that write through the store run on SQLite,
//! MariaDB and PostgreSQL (`per_backend!`).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use futures::stream::{self, StreamExt, TryStreamExt};
use nacelle_testkit::server::TestServer;
use nacelle_testkit::{per_backend, Backend, TestResult};
use serde_json::{json, Value};

use common::archive::{import, multipart, unzip, zip_of, Entry};

const CONFIGS: &str = "/nacos/v1/cs/configs";

/// The types of the round trip, with the dataId extension Nacos maps to each.
const TYPES: [(&str, &str); 5] = [
    ("yaml", "yaml"),
    ("json", "json"),
    ("properties", "properties"),
    ("text", "txt"),
    ("xml", "xml"),
];

/// `GET ?export=true` (v1) or `?exportV2=true` with `params`: the archive's bytes.
async fn export(s: &TestServer, v2: bool, params: &[(&str, &str)]) -> TestResult<Vec<u8>> {
    let flag = if v2 { "exportV2" } else { "export" };
    let r = s
        .http
        .get(s.url(CONFIGS))
        .query(&[(flag, "true")])
        .query(params)
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 200);
    Ok(r.bytes().await?.to_vec())
}

async fn create_namespace(s: &TestServer, id: &str) -> TestResult {
    let r = s
        .http
        .post(s.url("/nacos/v1/console/namespaces"))
        .form(&[("customNamespaceId", id), ("namespaceName", id)])
        .send()
        .await?;
    assert_eq!(r.text().await?, "true");
    Ok(())
}

/// Publishes with type, desc and appName over v1.
async fn publish_full(
    s: &TestServer,
    tenant: &str,
    group: &str,
    data_id: &str,
    content: &str,
    (config_type, desc, app): (&str, &str, &str),
) -> TestResult {
    let r = s
        .http
        .post(s.url(CONFIGS))
        .form(&[
            ("tenant", tenant),
            ("group", group),
            ("dataId", data_id),
            ("content", content),
            ("type", config_type),
            ("desc", desc),
            ("appName", app),
        ])
        .send()
        .await?;
    let status = r.status().as_u16();
    assert_eq!((status, r.text().await?), (200, "true".to_string()));
    Ok(())
}

/// What a config is, as `show=all` reports it: (content, type, desc, appName).
async fn detail(s: &TestServer, tenant: &str, group: &str, data_id: &str) -> TestResult<Value> {
    let r = s
        .http
        .get(s.url(CONFIGS))
        .query(&[
            ("tenant", tenant),
            ("group", group),
            ("dataId", data_id),
            ("show", "all"),
        ])
        .send()
        .await?;
    if r.status().as_u16() == 404 {
        return Ok(Value::Null);
    }
    let v: Value = r.json().await?;
    Ok(json!([v["content"], v["type"], v["desc"], v["appName"]]))
}

/// Every config of `tenant` as (group, dataId) → (content, type, desc, appName), read from
/// a v2 export.
async fn contents(s: &TestServer, tenant: &str) -> TestResult<BTreeMap<(String, String), Value>> {
    let files = unzip(&export(s, true, &[("tenant", tenant)]).await?)?;
    let mut out = BTreeMap::new();
    let (meta, entries): (Vec<_>, Vec<_>) =
        files.into_iter().partition(|(n, _)| n == ".metadata.yml");
    let meta: serde_yaml_ng::Value = serde_yaml_ng::from_str(&meta[0].1)?;
    let mut by_key = BTreeMap::new();
    for item in meta["metadata"].as_sequence().cloned().unwrap_or_default() {
        let s = |k: &str| item[k].as_str().unwrap_or_default().to_string();
        by_key.insert(
            (s("group"), s("dataId")),
            (s("type"), s("desc"), s("appName")),
        );
    }
    for (name, text) in entries {
        let (group, data_id) = name.split_once('/').ok_or("entry without a group")?;
        let key = (group.to_string(), data_id.to_string());
        let (t, d, a) = by_key.get(&key).cloned().unwrap_or_default();
        out.insert(key, json!([text, t, d, a]));
    }
    Ok(out)
}

fn content_of(i: usize, config_type: &str) -> String {
    match config_type {
        "yaml" => format!("server:\n  port: {i}\n  name: \"svc-{i}\"\n"),
        "json" => format!("{{\"id\": {i}, \"name\": \"svc-{i}\"}}"),
        "properties" => format!("id={i}\nname=svc-{i}\n"),
        "xml" => format!("<cfg><id>{i}</id></cfg>"),
        _ => format!("plain text {i} — ünïcode"),
    }
}

per_backend!(round_trip_of_500_configs_in_both_layouts);
async fn round_trip_of_500_configs_in_both_layouts(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    for ns in ["src", "dst1", "dst2"] {
        create_namespace(&s, ns).await?;
    }
    let started = std::time::Instant::now();
    stream::iter(0..500usize)
        .map(|i| {
            let s = &s;
            async move {
                let (t, ext) = TYPES[i % TYPES.len()];
                let group = format!("GROUP_{}", i % 7);
                let data_id = format!("svc-{i}.{ext}");
                let app = if i % 3 == 0 {
                    format!("app-{}", i % 4)
                } else {
                    String::new()
                };
                let desc = format!("config number {i}");
                publish_full(
                    s,
                    "src",
                    &group,
                    &data_id,
                    &content_of(i, t),
                    (t, &desc, &app),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    println!("{backend:?}: 500 publishes in {:?}", started.elapsed());
    let source = contents(&s, "src").await?;
    assert_eq!(source.len(), 500);

    // v2: every content, type, desc and appName comes back.
    let started = std::time::Instant::now();
    let v2 = export(&s, true, &[("tenant", "src")]).await?;
    let (status, body) = import(&s, "dst1", Some("ABORT"), Some(&v2)).await?;
    println!("{backend:?}: v2 import of 500 in {:?}", started.elapsed());
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["code"], 200);
    assert_eq!(body["data"], json!({"succCount": 500, "skipCount": 0}));
    assert_eq!(contents(&s, "dst1").await?, source);

    // v1: contents and app names; the type from the extension; no desc (as Nacos).
    let v1 = export(&s, false, &[("tenant", "src")]).await?;
    let (status, body) = import(&s, "dst2", None, Some(&v1)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], json!({"succCount": 500, "skipCount": 0}));
    let copied = contents(&s, "dst2").await?;
    assert_eq!(copied.len(), 500);
    for (key, v) in &source {
        let c = &copied[key];
        assert_eq!((&c[0], &c[1], &c[3]), (&v[0], &v[1], &v[3]), "{key:?}");
        assert_eq!(c[2], "", "{key:?}: v1 carries no desc");
    }
    // The imported configs are served (the cache was updated), with history.
    assert_eq!(
        detail(&s, "dst1", "GROUP_3", "svc-3.text").await?,
        Value::Null,
        "no such key"
    );
    let d = detail(&s, "dst1", "GROUP_3", "svc-3.txt").await?;
    assert_eq!(
        d,
        json!([content_of(3, "text"), "text", "config number 3", "app-3"])
    );
    Ok(())
}

/// The archive of the policy tests: `a` (exists), `c`, `d` (new).
fn policy_archive(tag: &str) -> TestResult<Vec<u8>> {
    let a = format!("a={tag}");
    let c = format!("c={tag}");
    let d = format!("d={tag}");
    zip_of(&[
        ("G/a.properties", a.as_bytes()),
        ("G/c.properties", c.as_bytes()),
        ("G/d.properties", d.as_bytes()),
    ])
}

per_backend!(each_policy_with_nacos_counts);
async fn each_policy_with_nacos_counts(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    create_namespace(&s, "p").await?;
    s.publish("p", "G", "a.properties", "a=old").await?;
    s.publish("p", "G", "b.properties", "b=old").await?;

    // ABORT (also the default): the existing key fails, nothing at all is written.
    for policy in [Some("ABORT"), None] {
        let (status, body) = import(&s, "p", policy, Some(&policy_archive("abort")?)).await?;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["message"], "导入成功");
        assert_eq!(
            body["data"],
            json!({
                "succCount": 0,
                "skipCount": 2,
                "failData": [{"dataId": "a.properties", "group": "G"}],
                "skipData": [
                    {"dataId": "c.properties", "group": "G"},
                    {"dataId": "d.properties", "group": "G"}
                ]
            })
        );
        assert_eq!(s.get("p", "G", "c.properties").await?, None);
        assert_eq!(
            s.get("p", "G", "a.properties").await?.as_deref(),
            Some("a=old")
        );
    }

    // SKIP: the existing key is reported and left alone.
    let (status, body) = import(&s, "p", Some("SKIP"), Some(&policy_archive("skip")?)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"],
        json!({
            "succCount": 2,
            "skipCount": 1,
            "skipData": [{"dataId": "a.properties", "group": "G"}]
        })
    );
    assert_eq!(
        s.get("p", "G", "a.properties").await?.as_deref(),
        Some("a=old")
    );
    assert_eq!(
        s.get("p", "G", "c.properties").await?.as_deref(),
        Some("c=skip")
    );

    // OVERWRITE: every record is written.
    let (status, body) = import(&s, "p", Some("OVERWRITE"), Some(&policy_archive("over")?)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], json!({"succCount": 3, "skipCount": 0}));
    for id in ["a", "c", "d"] {
        assert_eq!(
            s.get("p", "G", &format!("{id}.properties")).await?,
            Some(format!("{id}=over"))
        );
    }
    assert_eq!(
        s.get("p", "G", "b.properties").await?.as_deref(),
        Some("b=old")
    );
    // The overwrite is in history with the replaced version, like a publish.
    let h: Value = s
        .http
        .get(s.url("/nacos/v1/cs/history"))
        .query(&[
            ("search", "accurate"),
            ("dataId", "a.properties"),
            ("group", "G"),
            ("tenant", "p"),
        ])
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(h["totalCount"], 2, "{h}");

    // A bad policy name is a 400.
    let (ct, body) = multipart(
        Some(&policy_archive("x")?),
        &[("namespace", "p"), ("policy", "MERGE")],
    );
    let r = s
        .http
        .post(s.url(&format!("{CONFIGS}?import=true")))
        .header("Content-Type", ct)
        .body(body)
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 400);
    Ok(())
}

/// `.metadata.yml` as Nacos 2.4.3 writes it (SnakeYAML `dumpAsMap`: block style, keys in
/// alphabetical order, null values left out).
const NACOS_METADATA_V2: &str = "metadata:
- appName: shop
  dataId: app.yaml
  desc: the shop
  group: DEFAULT_GROUP
  type: yaml
- appName: ''
  dataId: db.properties
  group: G2
  type: properties
- appName: ''
  dataId: missing.json
  group: G2
  type: json
";

#[tokio::test]
async fn nacos_made_archives_import() -> TestResult {
    let s = TestServer::start().await?;
    create_namespace(&s, "v1").await?;
    create_namespace(&s, "v2").await?;
    create_namespace(&s, "bare").await?;

    // v1, as `exportConfig` writes it (plus the directory entries a zip tool adds and an
    // entry in a sub-group directory, which Nacos does not recognize).
    let v1 = zip_of(&[
        ("DEFAULT_GROUP/", b""),
        ("DEFAULT_GROUP/app.yaml", b"shop:\n  name: x\n"),
        ("G2/", b""),
        ("G2/db.properties", b"url=jdbc:x\n"),
        ("G2/sub/", b""),
        ("G2/sub/deep.yaml", b"a: 1\n"),
        (".meta.yml", b"DEFAULT_GROUP.app~yaml.app=shop\r\n"),
    ])?;
    let (status, body) = import(&s, "v1", None, Some(&v1)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"],
        json!({
            "succCount": 2,
            "skipCount": 0,
            "unrecognizedCount": 1,
            "unrecognizedData": [{"itemName": "G2/sub/deep.yaml"}]
        })
    );
    assert_eq!(
        detail(&s, "v1", "DEFAULT_GROUP", "app.yaml").await?,
        json!(["shop:\n  name: x\n", "yaml", "", "shop"])
    );
    assert_eq!(
        detail(&s, "v1", "G2", "db.properties").await?,
        json!(["url=jdbc:x\n", "properties", "", ""])
    );

    // v2, as `exportConfigV2` writes it; one entry the metadata does not list, one listed
    // config without an entry: both reported with Nacos's words.
    let v2 = zip_of(&[
        ("DEFAULT_GROUP/app.yaml", b"shop:\n  name: y\n"),
        ("G2/db.properties", b"url=jdbc:y\n"),
        ("G2/extra.txt", b"not listed"),
        (".metadata.yml", NACOS_METADATA_V2.as_bytes()),
    ])?;
    let (status, body) = import(&s, "v2", None, Some(&v2)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"],
        json!({
            "succCount": 2,
            "skipCount": 0,
            "unrecognizedCount": 2,
            "unrecognizedData": [
                {"itemName": "未在元数据中找到: G2/extra.txt"},
                {"itemName": "未在文件中找到: G2/missing.json"}
            ]
        })
    );
    assert_eq!(
        detail(&s, "v2", "DEFAULT_GROUP", "app.yaml").await?,
        json!(["shop:\n  name: y\n", "yaml", "the shop", "shop"])
    );

    // No metadata at all (Nacos 3.x bug #14785): types from the extension, text otherwise.
    let bare = zip_of(&[
        ("G/a.json", b"{\"a\": 1}"),
        ("G/b.yml", b"b: 2\n"),
        ("G/c", b"plain"),
    ])?;
    let (status, body) = import(&s, "bare", None, Some(&bare)).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["succCount"], 3);
    assert_eq!(detail(&s, "bare", "G", "a.json").await?[1], "json");
    assert_eq!(detail(&s, "bare", "G", "b.yml").await?[1], "yaml");
    assert_eq!(detail(&s, "bare", "G", "c").await?[1], "text");
    Ok(())
}

#[tokio::test]
async fn exports_have_nacos_layout() -> TestResult {
    let s = TestServer::start().await?;
    publish_full(
        &s,
        "",
        "G",
        "a.b.yaml",
        "k: v\n",
        ("yaml", "the shop", "shop"),
    )
    .await?;
    publish_full(&s, "", "G", "plain", "text", ("text", "", "")).await?;
    publish_full(&s, "", "H", "other.json", "{}", ("json", "", "")).await?;

    let r = s
        .http
        .get(s.url(CONFIGS))
        .query(&[("export", "true"), ("group", "G")])
        .send()
        .await?;
    let disposition = r
        .headers()
        .get("Content-Disposition")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let stamp = disposition
        .strip_prefix("attachment;filename=nacos_config_export_")
        .and_then(|rest| rest.strip_suffix(".zip"))
        .ok_or_else(|| format!("Content-Disposition: {disposition}"))?;
    assert!(
        stamp.len() == 14 && stamp.chars().all(|c| c.is_ascii_digit()),
        "{stamp}"
    );
    let v1 = unzip(&r.bytes().await?)?;
    assert_eq!(
        v1,
        [
            ("G/a.b.yaml".to_string(), "k: v\n".to_string()),
            ("G/plain".to_string(), "text".to_string()),
            (
                ".meta.yml".to_string(),
                "G.a.b~yaml.app=shop\r\n".to_string()
            ),
        ]
    );

    let v2 = unzip(&export(&s, true, &[("group", "G")]).await?)?;
    let names: Vec<&str> = v2.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["G/a.b.yaml", "G/plain", ".metadata.yml"]);
    assert_eq!(
        v2[2].1,
        "metadata:\n- appName: shop\n  dataId: a.b.yaml\n  desc: the shop\n  group: G\n  type: yaml\n\
         - appName: ''\n  dataId: plain\n  group: G\n  type: text\n"
    );

    // By appName, by dataId pattern, by ids.
    let by_app = unzip(&export(&s, true, &[("appName", "shop")]).await?)?;
    assert_eq!(by_app.len(), 2, "{by_app:?}");
    let by_pattern = unzip(&export(&s, false, &[("dataId", "*.json")]).await?)?;
    assert_eq!(by_pattern, [("H/other.json".to_string(), "{}".to_string())]);
    let id: Value = s
        .http
        .get(s.url(CONFIGS))
        .query(&[("dataId", "plain"), ("group", "G"), ("show", "all")])
        .send()
        .await?
        .json()
        .await?;
    let id = id["id"].as_str().ok_or("no id")?.to_string();
    let by_ids = unzip(&export(&s, false, &[("ids", &format!("{id},"))]).await?)?;
    assert_eq!(by_ids, [("G/plain".to_string(), "text".to_string())]);

    // An empty selection: an archive without configs (v2 with an empty list), as Nacos.
    let none = unzip(&export(&s, false, &[("tenant", "nowhere")]).await?)?;
    assert!(none.is_empty(), "{none:?}");
    let none = unzip(&export(&s, true, &[("tenant", "nowhere")]).await?)?;
    assert_eq!(
        none,
        [(".metadata.yml".to_string(), "metadata: []\n".to_string())]
    );
    Ok(())
}

/// A zip whose entry inflates beyond what its headers declare.
fn lying_zip() -> TestResult<Vec<u8>> {
    let data: String = (0..20_000).map(|i| format!("{i:x}")).collect();
    let mut z = zip_of(&[("G/liar.txt", data.as_bytes())])?;
    let declared = 100u32.to_le_bytes();
    // Local header (PK\3\4): uncompressed size at offset 22; central (PK\1\2): 24.
    for (sig, at) in [(b"PK\x03\x04", 22), (b"PK\x01\x02", 24)] {
        let pos = z
            .windows(4)
            .position(|w| w == sig)
            .ok_or("zip header not found")?;
        z[pos + at..pos + at + 4].copy_from_slice(&declared);
    }
    Ok(z)
}

/// A zip whose deflated data was damaged after it was written (its CRC no longer holds).
fn corrupt_zip() -> TestResult<Vec<u8>> {
    let data: String = (0..5_000).map(|i| format!("line {i}\n")).collect();
    let mut z = zip_of(&[("G/damaged.txt", data.as_bytes())])?;
    // The local header is 30 bytes plus the name; damage the middle of the data.
    let at = 30 + "G/damaged.txt".len() + 200;
    z[at] ^= 0xff;
    z[at + 1] ^= 0xff;
    Ok(z)
}

per_backend!(bad_archives_are_refused_and_change_nothing);
async fn bad_archives_are_refused_and_change_nothing(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    create_namespace(&s, "ns").await?;
    s.publish("ns", "G", "kept.txt", "kept").await?;
    let before = contents(&s, "ns").await?;

    let good: &[u8] = b"fine";
    let valid = zip_of(&[("G/good.txt", good)])?;
    let truncated = valid[..valid.len() / 2].to_vec();
    let zeros = vec![0u8; 10 * 1024 * 1024];
    let many_names: Vec<String> = (0..20_001).map(|i| format!("G/e{i}")).collect();
    let many: Vec<Entry<'_>> = many_names.iter().map(|n| (n.as_str(), good)).collect();
    let chunk = vec![b'a'; 64 * 1024];
    let big_names: Vec<String> = (0..2100).map(|i| format!("G/big{i}")).collect();
    let big: Vec<Entry<'_>> = big_names.iter().map(|n| (n.as_str(), &chunk[..])).collect();

    let cases: Vec<(&str, Vec<u8>, i64)> = vec![
        ("not a zip", b"this is not a zip archive".to_vec(), 100004),
        ("truncated", truncated, 100004),
        ("corrupt data", corrupt_zip()?, 100004),
        ("too many entries", zip_of(&many)?, 100004),
        ("over the total size", zip_of(&big)?, 100004),
        (
            "zip bomb (ratio)",
            zip_of(&[("G/good.txt", good), ("G/bomb", &zeros)])?,
            100004,
        ),
        ("inflates beyond its declared size", lying_zip()?, 100004),
        (
            "path traversal",
            zip_of(&[("G/good.txt", good), ("../evil.txt", good)])?,
            100004,
        ),
        (
            "nested traversal",
            zip_of(&[("G/../../evil.txt", good)])?,
            100004,
        ),
        (
            "absolute path",
            zip_of(&[("G/good.txt", good), ("/etc/evil", good)])?,
            100004,
        ),
        (
            "invalid UTF-8",
            zip_of(&[("G/good.txt", good), ("G/bin", &[0xff, 0xfe, 0x00])])?,
            100004,
        ),
        (
            "invalid dataId",
            zip_of(&[("G/good.txt", good), ("G/bad$id", good)])?,
            400,
        ),
        (
            "invalid group",
            zip_of(&[("G/good.txt", good), ("bad group/x.txt", good)])?,
            400,
        ),
        (
            "unparseable metadata",
            zip_of(&[
                ("G/good.txt", good),
                (".metadata.yml", b"metadata: [unclosed"),
            ])?,
            100002,
        ),
        (
            "metadata that is not YAML",
            zip_of(&[
                ("G/good.txt", good),
                (".metadata.yml", b"metadata:\n- dataId: [a\n  group: {"),
            ])?,
            100002,
        ),
        (
            "illegal v1 metadata",
            zip_of(&[("G/good.txt", good), (".meta.yml", b"no equals sign here")])?,
            100002,
        ),
        ("no config", zip_of(&[(".meta.yml", b"")])?, 100005),
    ];
    for (what, zip, code) in &cases {
        for policy in ["ABORT", "OVERWRITE"] {
            let (status, body) = import(&s, "ns", Some(policy), Some(zip)).await?;
            assert_eq!(status, 400, "{what}: {body}");
            assert_eq!(body["code"], *code, "{what}: {body}");
            assert!(
                body["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{what}"
            );
            println!("{what}: {}", body["message"]);
        }
    }
    // No file; a namespace that does not exist.
    let (status, body) = import(&s, "ns", None, None).await?;
    assert_eq!((status, &body["code"]), (400, &json!(100005)), "{body}");
    let (status, body) = import(&s, "nowhere", None, Some(&valid)).await?;
    assert_eq!((status, &body["code"]), (400, &json!(100001)), "{body}");
    assert_eq!(body["message"], "目标 namespace 不存在");

    assert_eq!(contents(&s, "ns").await?, before, "nothing half-imported");
    assert_eq!(s.get("ns", "G", "good.txt").await?, None);
    Ok(())
}

per_backend!(clone_between_namespaces);
async fn clone_between_namespaces(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    create_namespace(&s, "from").await?;
    create_namespace(&s, "to").await?;
    publish_full(
        &s,
        "from",
        "G",
        "a.yaml",
        "a: 1\n",
        ("yaml", "desc a", "app"),
    )
    .await?;
    publish_full(&s, "from", "G", "b.json", "{\"b\":2}", ("json", "", "")).await?;
    let id_of = |v: Value| v["id"].as_str().map(str::to_string).ok_or("no id");
    let mut ids = Vec::new();
    for d in ["a.yaml", "b.json"] {
        let v: Value = s
            .http
            .get(s.url(CONFIGS))
            .query(&[
                ("tenant", "from"),
                ("group", "G"),
                ("dataId", d),
                ("show", "all"),
            ])
            .send()
            .await?
            .json()
            .await?;
        ids.push(id_of(v)?.parse::<i64>()?);
    }
    let clone = |policy: &'static str, body: Value| {
        let s = &s;
        async move {
            let r = s
                .http
                .post(s.url(CONFIGS))
                .query(&[("clone", "true"), ("tenant", "to"), ("policy", policy)])
                .json(&body)
                .send()
                .await?;
            let status = r.status().as_u16();
            TestResult::Ok((status, r.json::<Value>().await?))
        }
    };
    let beans = json!([
        {"cfgId": ids[0], "dataId": "a-copy.yaml", "group": "G2"},
        {"cfgId": ids[1], "dataId": "", "group": ""}
    ]);
    let (status, body) = clone("ABORT", beans.clone()).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"], "Clone Completed Successfully");
    assert_eq!(body["data"], json!({"succCount": 2, "skipCount": 0}));
    assert_eq!(
        detail(&s, "to", "G2", "a-copy.yaml").await?,
        json!(["a: 1\n", "yaml", "desc a", "app"])
    );
    assert_eq!(
        detail(&s, "to", "G", "b.json").await?,
        json!(["{\"b\":2}", "json", "", ""])
    );
    // Again: ABORT stops at the first (it exists), the other is skipped, as Nacos; SKIP
    // skips both.
    let (_, body) = clone("ABORT", beans.clone()).await?;
    assert_eq!(
        body["data"],
        json!({
            "succCount": 0,
            "skipCount": 1,
            "failData": [{"dataId": "a-copy.yaml", "group": "G2"}],
            "skipData": [{"dataId": "b.json", "group": "G"}]
        })
    );
    let (_, body) = clone("SKIP", beans.clone()).await?;
    assert_eq!(body["data"]["skipCount"], 2);
    // An id as `show=all` and searches give it, a string, is taken as Nacos's `Long cfgId`
    // takes one; a string that is no number is refused.
    let by_text = json!([{"cfgId": ids[0].to_string(), "dataId": "a-text.yaml", "group": "G3"}]);
    let (status, body) = clone("ABORT", by_text).await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], json!({"succCount": 1, "skipCount": 0}));
    assert_eq!(
        detail(&s, "to", "G3", "a-text.yaml").await?,
        json!(["a: 1\n", "yaml", "desc a", "app"])
    );
    let r = s
        .http
        .post(s.url(CONFIGS))
        .query(&[("clone", "true"), ("tenant", "to")])
        .json(&json!([{"cfgId": "five", "dataId": "x"}]))
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 400);
    let text = r.text().await?;
    assert!(text.contains("not a number"), "{text}");
    // Nothing selected; a target that does not exist.
    let (status, body) = clone("ABORT", json!([])).await?;
    assert_eq!((status, &body["code"]), (400, &json!(100006)), "{body}");
    let r = s
        .http
        .post(s.url(CONFIGS))
        .query(&[("clone", "true"), ("tenant", "nowhere")])
        .json(&beans)
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.json::<Value>().await?["code"], 100001);
    let unchanged: BTreeSet<_> = contents(&s, "to").await?.into_keys().collect();
    assert_eq!(unchanged.len(), 3);
    Ok(())
}

#[tokio::test]
async fn listeners_hear_imported_keys() -> TestResult {
    let s = TestServer::start().await?;
    create_namespace(&s, "l").await?;
    s.publish("l", "G", "a.txt", "old").await?;
    let old_md5 = nacelle_testkit::md5("old");
    // One held poll per key: the changed one and one that does not exist yet.
    let poll = |data_id: &'static str, md5: String| {
        let api = s.api.clone();
        tokio::spawn(async move {
            let listening = nacelle_testkit::listening_configs(&[(data_id, "G", &md5, Some("l"))]);
            api.long_poll(&listening, Some(30_000), &[]).await
        })
    };
    let polls = [poll("a.txt", old_md5), poll("b.txt", String::new())];
    for id in ["a.txt", "b.txt"] {
        s.wait_listener("l", "G", id, std::time::Duration::from_secs(10))
            .await?;
    }
    let zip = zip_of(&[("G/a.txt", b"new"), ("G/b.txt", b"b")])?;
    let (status, body) = import(&s, "l", Some("OVERWRITE"), Some(&zip)).await?;
    assert_eq!(
        (status, &body["data"]["succCount"]),
        (200, &json!(2)),
        "{body}"
    );
    for (poll, id) in polls.into_iter().zip(["a.txt", "b.txt"]) {
        let reply = poll.await??;
        assert_eq!(reply.status, 200);
        assert!(reply.body.contains(id), "{id}: {}", reply.body);
    }
    Ok(())
}

#[tokio::test]
async fn imports_follow_the_publish_rules() -> TestResult {
    let s = TestServer::start_with(|s| {
        s.content_validation =
            nacelle_core::ValidationPolicy::uniform(nacelle_core::ValidationMode::Reject);
        s.max_content_bytes = 1024;
    })
    .await?;
    let good: &[u8] = b"a: 1\n";
    let big = vec![b'x'; 2048];
    for (what, zip) in [
        (
            "yaml that does not parse",
            zip_of(&[("G/ok.yaml", good), ("G/bad.yaml", b"a: 1\nb: c: d\n")])?,
        ),
        (
            "content over max_content_bytes",
            zip_of(&[("G/ok.yaml", good), ("G/big.txt", &big)])?,
        ),
        (
            "blank content",
            zip_of(&[("G/ok.yaml", good), ("G/empty.txt", b"")])?,
        ),
    ] {
        let (status, body) = import(&s, "", Some("OVERWRITE"), Some(&zip)).await?;
        assert_eq!(
            (status, &body["code"]),
            (400, &json!(400)),
            "{what}: {body}"
        );
        println!("{what}: {}", body["message"]);
        assert_eq!(s.get("", "G", "ok.yaml").await?, None, "{what}");
    }
    // A valid import is recorded in history with the caller's address and src_user.
    let (ct, body) = multipart(
        Some(&zip_of(&[("G/ok.yaml", good)])?),
        &[("namespace", ""), ("src_user", "importer")],
    );
    let r = s
        .http
        .post(s.url(&format!("{CONFIGS}?import=true")))
        .header("Content-Type", ct)
        .body(body)
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 200);
    let h: Value = s
        .http
        .get(s.url("/nacos/v1/cs/history"))
        .query(&[
            ("search", "accurate"),
            ("dataId", "ok.yaml"),
            ("group", "G"),
        ])
        .send()
        .await?
        .json()
        .await?;
    let item = &h["pageItems"][0];
    assert_eq!(
        (&item["srcIp"], &item["srcUser"]),
        (&json!("127.0.0.1"), &json!("importer")),
        "{h}"
    );
    Ok(())
}
