//! Encrypted configs (`cipher-aes-…`) over HTTP and gRPC against one service on a real
//! SQLite file, the table read back with rusqlite: the server encrypts a plaintext publish
//! as Nacos's AES plugin does (HTTP and gRPC, as Nacos 3.0), HTTP reads decrypt, gRPC
//! queries return ciphertext + data key (decrypted here with `nacelle-cipher`), rows and
//! vectors in Nacos's own format read, a client-encrypted publish is stored as given, and
//! with a master key the stored data key is wrapped — a wrong or missing master key makes
//! reads fail with a clear error, never a panic and never plaintext. The plaintext never
//! shows in the log.
//!
//! This binary installs one global log capture; every test uses data ids of its own.

mod common;

use std::sync::Arc;

use anyhow::Context;
use common::{Msg, RawClient, RawExt, TestServer};
use nacelle_cipher::{DataKey, MasterKey, MasterKeys};
use nacelle_core::md5_hex;
use nacelle_grpc::{GrpcOptions, GrpcServer};
use nacelle_http::HttpOptions;
use nacelle_service::{ConfigService, Limits};
use nacelle_testkit::logs::CapturedLog;
use serde_json::json;

/// Every plaintext of this binary contains this marker, so the log check finds any leak.
const MARK: &str = "PLAINTEXT-MARK";

fn log() -> &'static CapturedLog {
    // Everything the server's crates log, at every level (not the Rust SDK's own log,
    // which shows what the client sends).
    nacelle_testkit::logs::capture(
        "nacelle_service=trace,nacelle_grpc=trace,nacelle_http=trace,nacelle_store=trace,nacelle_core=trace",
    )
}

fn master(b: u8) -> Arc<MasterKeys> {
    Arc::new(MasterKeys::single(MasterKey::from_bytes(&[b; 32])))
}

/// Standard base64 (a master key file's line).
fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The id of the master key made of bytes `b`.
fn id(b: u8) -> String {
    MasterKey::from_bytes(&[b; 32]).id().to_string()
}

fn limits(master: Option<Arc<MasterKeys>>) -> Limits {
    Limits {
        cipher_master_key: master,
        ..Limits::default()
    }
}

/// The HTTP adapter over `service` on a free port: its base URL and its stop handle.
async fn http_over(
    services: nacelle_service::Services,
) -> anyhow::Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let opts = HttpOptions::default();
    let max = opts.max_request_bytes;
    let api = nacelle_http::api(services, opts);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(nacelle_http::serve(listener, api, max, async {
        // A dropped sender stops the adapter as a sent one does.
        let _stopped = rx.await;
    }));
    Ok((format!("http://{addr}"), tx))
}

/// A gRPC server over `service` on a free port, and a set-up raw client of it.
async fn grpc_over(
    service: ConfigService,
) -> anyhow::Result<(RawClient, tokio::sync::oneshot::Sender<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        GrpcServer::new(service, GrpcOptions::default()).serve(listener, async {
            // A dropped sender stops the server too.
            let _stopped = rx.await;
        }),
    );
    let mut c = RawClient::connect(port).await?;
    c.setup("127.0.0.1").await?;
    Ok((c, tx))
}

struct Node {
    server: TestServer,
    base: String,
    _stop_http: tokio::sync::oneshot::Sender<()>,
    grpc: RawClient,
    http: reqwest::Client,
}

impl Node {
    async fn start(master: Option<Arc<MasterKeys>>) -> anyhow::Result<Node> {
        log();
        let server = TestServer::start_with_limits(GrpcOptions::default(), limits(master)).await?;
        let (base, stop) = server.start_http(HttpOptions::default()).await?;
        let mut grpc = server.raw().await?;
        grpc.setup("127.0.0.1").await?;
        Ok(Node {
            server,
            base,
            _stop_http: stop,
            grpc,
            http: reqwest::Client::new(),
        })
    }

    fn db(&self) -> anyhow::Result<rusqlite::Connection> {
        Ok(rusqlite::Connection::open(
            self.server.db.path().context("sqlite path")?,
        )?)
    }
}

async fn publish(
    http: &reqwest::Client,
    base: &str,
    form: &[(&str, &str)],
) -> anyhow::Result<(u16, String)> {
    let r = http
        .post(format!("{base}/nacos/v1/cs/configs"))
        .form(form)
        .send()
        .await?;
    Ok((r.status().as_u16(), r.text().await?))
}

/// `GET /nacos/v1/cs/configs`: status, body, `Content-MD5`, `Encrypted-Data-Key`.
async fn get(
    http: &reqwest::Client,
    base: &str,
    data_id: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<(u16, String, String, String)> {
    let mut q = vec![("dataId", data_id), ("group", "G")];
    q.extend_from_slice(extra);
    let r = http
        .get(format!("{base}/nacos/v1/cs/configs"))
        .query(&q)
        .send()
        .await?;
    let h = |n: &str| {
        r.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (md5, key) = (h("Content-MD5"), h("Encrypted-Data-Key"));
    Ok((r.status().as_u16(), r.text().await?, md5, key))
}

/// `(content, encrypted_data_key)` of the `config_info` row of `data_id` in group `G`.
fn row(db: &rusqlite::Connection, data_id: &str) -> anyhow::Result<(String, String, String)> {
    Ok(db.query_row(
        "SELECT content, encrypted_data_key, md5 FROM config_info WHERE data_id = ?1 AND group_id = 'G'",
        [data_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?)
}

async fn query(c: &mut RawClient, data_id: &str) -> anyhow::Result<Msg> {
    c.call(
        "ConfigQueryRequest",
        json!({"dataId": data_id, "group": "G", "tenant": ""}),
    )
    .await
}

#[tokio::test]
async fn http_round_trip_stores_ciphertext_and_serves_plaintext() -> anyhow::Result<()> {
    let mut n = Node::start(None).await?;
    let plain = format!("db:\n  password: {MARK}-http\n");
    let (status, body) = publish(
        &n.http,
        &n.base,
        &[
            ("dataId", "cipher-aes-http.yml"),
            ("group", "G"),
            ("content", &plain),
            ("type", "yaml"),
        ],
    )
    .await?;
    assert_eq!((status, body.as_str()), (200, "true"));

    // The table holds the plugin's hex ciphertext, its md5, and the data key in clear.
    let (stored, key, md5) = row(&n.db()?, "cipher-aes-http.yml")?;
    assert!(
        !stored.contains(MARK),
        "stored content is ciphertext: {stored}"
    );
    assert!(stored
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert_eq!(md5, md5_hex(stored.as_bytes()));
    assert_eq!(DataKey::parse(&key)?.decrypt(&stored)?, plain);
    let his: String = n.db()?.query_row(
        "SELECT content FROM his_config_info WHERE data_id = 'cipher-aes-http.yml'",
        [],
        |r| r.get(0),
    )?;
    assert_eq!(his, stored, "history holds what the table holds");

    // v1 GET decrypts, still sends the key, and Content-MD5 is the stored md5.
    let (status, body, got_md5, got_key) =
        get(&n.http, &n.base, "cipher-aes-http.yml", &[]).await?;
    assert_eq!((status, body.as_str()), (200, plain.as_str()));
    assert_eq!(
        (got_md5.as_str(), got_key.as_str()),
        (md5.as_str(), key.as_str())
    );

    // show=all: plaintext, the stored md5, the key.
    let r = n
        .http
        .get(format!("{}/nacos/v1/cs/configs", n.base))
        .query(&[
            ("dataId", "cipher-aes-http.yml"),
            ("group", "G"),
            ("show", "all"),
        ])
        .send()
        .await?;
    let detail: serde_json::Value = r.json().await?;
    assert_eq!(detail["content"], plain.as_str());
    assert_eq!(detail["md5"], md5.as_str());
    assert_eq!(detail["encryptedDataKey"], key.as_str());

    // v2 GET decrypts too.
    let r = n
        .http
        .get(format!("{}/nacos/v2/cs/config", n.base))
        .query(&[("dataId", "cipher-aes-http.yml"), ("group", "G")])
        .send()
        .await?;
    let v2: serde_json::Value = r.json().await?;
    assert_eq!(v2["data"], plain.as_str());

    // History detail decrypts, as Nacos's HistoryService does.
    let nid: i64 = n.db()?.query_row(
        "SELECT nid FROM his_config_info WHERE data_id = 'cipher-aes-http.yml'",
        [],
        |r| r.get(0),
    )?;
    let r = n
        .http
        .get(format!("{}/nacos/v1/cs/history", n.base))
        .query(&[
            ("dataId", "cipher-aes-http.yml"),
            ("group", "G"),
            ("nid", &nid.to_string()),
        ])
        .send()
        .await?;
    let h: serde_json::Value = r.json().await?;
    assert_eq!(h["content"], plain.as_str());

    // The gRPC client of the same key gets the ciphertext and the key.
    let q = query(&mut n.grpc, "cipher-aes-http.yml").await?;
    assert_eq!(q.str("content"), Some(stored.as_str()));
    assert_eq!(q.str("encryptedDataKey"), Some(key.as_str()));
    assert_eq!(q.str("md5"), Some(md5.as_str()));

    // Long polling: an HTTP client that hashes the plaintext it was served (Python 1.x,
    // Java 1.x) is up to date, as is one holding the stored md5; another md5 is a change.
    for (held, changed) in [
        (md5_hex(plain.as_bytes()), false),
        (md5.clone(), false),
        ("0".repeat(32), true),
    ] {
        let r = n
            .http
            .post(format!("{}/nacos/v1/cs/configs/listener", n.base))
            .header("Long-Pulling-Timeout", "30000")
            .header("Long-Pulling-Timeout-No-Hangup", "true")
            .form(&[(
                "Listening-Configs",
                format!("cipher-aes-http.yml\u{2}G\u{2}{held}\u{1}"),
            )])
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), 200);
        let body = r.text().await?;
        assert_eq!(!body.trim().is_empty(), changed, "held {held}: {body:?}");
    }

    // A plain key is untouched.
    publish(
        &n.http,
        &n.base,
        &[("dataId", "plain.yml"), ("group", "G"), ("content", "a: 1")],
    )
    .await?;
    assert_eq!(row(&n.db()?, "plain.yml")?.0, "a: 1");
    assert!(!log().text().contains(MARK), "no plaintext in the log");
    Ok(())
}

#[tokio::test]
async fn grpc_publish_is_encrypted_on_the_server_and_queries_return_ciphertext_and_key(
) -> anyhow::Result<()> {
    let mut n = Node::start(None).await?;
    let plain = format!("{{\"token\": \"{MARK}-grpc\"}}");
    let r = n
        .grpc
        .call(
            "ConfigPublishRequest",
            json!({"dataId": "cipher-aes-grpc.json", "group": "G", "tenant": "",
                   "content": plain, "additionMap": {"type": "json"}}),
        )
        .await?;
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(200), Some(0)),
        "{:?}",
        r.body
    );
    let q = query(&mut n.grpc, "cipher-aes-grpc.json").await?;
    let content = q.str("content").context("content")?;
    let key = q.str("encryptedDataKey").context("key")?;
    assert!(!content.contains(MARK));
    assert_eq!(q.str("md5"), Some(md5_hex(content.as_bytes()).as_str()));
    // What a client with the plugin does: decrypt with the key it was given.
    assert_eq!(DataKey::parse(key)?.decrypt(content)?, plain);
    assert_eq!(row(&n.db()?, "cipher-aes-grpc.json")?.0, content);
    // And the HTTP reader of the same key gets the plaintext.
    let (_, body, _, _) = get(&n.http, &n.base, "cipher-aes-grpc.json", &[]).await?;
    assert_eq!(body, plain);
    assert!(!log().text().contains(MARK));
    Ok(())
}

/// The first vector of `nacelle-cipher/tests/fixtures/plugin_vectors.txt` (python
/// `cryptography`, checked with `openssl enc`).
const VECTOR_KEY: &str = "MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmY=";
const VECTOR_PLAIN: &str = "url: jdbc:mysql://db/app";
const VECTOR_CT: &str = "175fbf4b1e5cd38b27866ca77a59b44d027ca943b6e64240b4321d9550186915";

#[tokio::test]
async fn a_row_in_nacos_format_is_served_decrypted() -> anyhow::Result<()> {
    // With a master key configured: rows Nacos wrote (key in clear) still read.
    let mut n = Node::start(Some(master(1))).await?;
    let db = n.db()?;
    db.execute(
        "INSERT INTO config_info (data_id, group_id, tenant_id, content, md5, gmt_create, \
         gmt_modified, src_user, src_ip, type, encrypted_data_key) \
         VALUES ('cipher-aes-nacos.yml', 'G', '', ?1, ?2, 1704067200000, \
         1704067200000, 'nacos', '10.0.0.1', 'yaml', ?3)",
        rusqlite::params![VECTOR_CT, md5_hex(VECTOR_CT.as_bytes()), VECTOR_KEY],
    )?;
    let key = nacelle_core::ConfigKey::parse(None, "G", "cipher-aes-nacos.yml")?;
    n.server.service.replication().reload(&key).await?;
    let (status, body, md5, got_key) = get(&n.http, &n.base, "cipher-aes-nacos.yml", &[]).await?;
    assert_eq!((status, body.as_str()), (200, VECTOR_PLAIN));
    assert_eq!(md5, md5_hex(VECTOR_CT.as_bytes()));
    assert_eq!(got_key, VECTOR_KEY);
    let q = query(&mut n.grpc, "cipher-aes-nacos.yml").await?;
    assert_eq!(
        (q.str("content"), q.str("encryptedDataKey")),
        (Some(VECTOR_CT), Some(VECTOR_KEY))
    );
    Ok(())
}

#[tokio::test]
async fn a_client_encrypted_publish_is_stored_as_given() -> anyhow::Result<()> {
    let n = Node::start(None).await?;
    let (status, body) = publish(
        &n.http,
        &n.base,
        &[
            ("dataId", "cipher-aes-client.yml"),
            ("group", "G"),
            ("content", VECTOR_CT),
            ("type", "yaml"),
            ("encryptedDataKey", VECTOR_KEY),
        ],
    )
    .await?;
    assert_eq!((status, body.as_str()), (200, "true"));
    let (stored, key, _) = row(&n.db()?, "cipher-aes-client.yml")?;
    assert_eq!((stored.as_str(), key.as_str()), (VECTOR_CT, VECTOR_KEY));
    let (_, body, _, _) = get(&n.http, &n.base, "cipher-aes-client.yml", &[]).await?;
    assert_eq!(body, VECTOR_PLAIN);

    // Content that does not decrypt with the key it came with is refused, nothing stored.
    let (status, body) = publish(
        &n.http,
        &n.base,
        &[
            ("dataId", "cipher-aes-client-bad.yml"),
            ("group", "G"),
            ("content", "not hex"),
            ("encryptedDataKey", VECTOR_KEY),
        ],
    )
    .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("does not decrypt"), "{body}");
    let (status, ..) = get(&n.http, &n.base, "cipher-aes-client-bad.yml", &[]).await?;
    assert_eq!(status, 404);

    // An algorithm nobody implements is stored in clear, as Nacos does.
    publish(
        &n.http,
        &n.base,
        &[
            ("dataId", "cipher-sm4-x"),
            ("group", "G"),
            ("content", "k=v"),
        ],
    )
    .await?;
    let (stored, key, _) = row(&n.db()?, "cipher-sm4-x")?;
    assert_eq!((stored.as_str(), key.as_str()), ("k=v", ""));

    // A start without a master key over encrypted rows warns that their keys are in clear.
    let path = n.server.db.path().context("path")?;
    let service = nacelle_testkit::service::open_sqlite_with(&path, true, limits(None)).await?;
    assert_eq!(service.cipher_census().clear, 1);
    assert!(log()
        .text()
        .contains("keep their data key in clear next to the ciphertext"));
    service.begin_shutdown();
    Ok(())
}

#[tokio::test]
async fn with_a_master_key_the_data_key_is_wrapped_and_a_wrong_or_missing_key_fails_clearly(
) -> anyhow::Result<()> {
    let key_a = master(7);
    let mut n = Node::start(Some(key_a.clone())).await?;
    let plain = format!("secret={MARK}-wrapped");
    publish(
        &n.http,
        &n.base,
        &[
            ("dataId", "cipher-aes-wrapped"),
            ("group", "G"),
            ("content", &plain),
        ],
    )
    .await?;
    let (stored, stored_key, _) = row(&n.db()?, "cipher-aes-wrapped")?;
    let prefix = format!("nacelle:v1:{}:", id(7));
    assert!(stored_key.starts_with(&prefix), "wrapped: {stored_key}");
    // Reads unwrap: HTTP gets the plaintext and the data key in clear, gRPC the ciphertext.
    let (status, body, _, header_key) = get(&n.http, &n.base, "cipher-aes-wrapped", &[]).await?;
    assert_eq!((status, body.as_str()), (200, plain.as_str()));
    assert!(!header_key.starts_with("nacelle:"));
    assert_eq!(DataKey::parse(&header_key)?.decrypt(&stored)?, plain);
    let q = query(&mut n.grpc, "cipher-aes-wrapped").await?;
    assert_eq!(q.str("encryptedDataKey"), Some(header_key.as_str()));

    // A client-encrypted publish's key is wrapped too; reads give it back as sent.
    publish(
        &n.http,
        &n.base,
        &[
            ("dataId", "cipher-aes-wrapped-client"),
            ("group", "G"),
            ("content", VECTOR_CT),
            ("encryptedDataKey", VECTOR_KEY),
        ],
    )
    .await?;
    let (stored_ct, k, _) = row(&n.db()?, "cipher-aes-wrapped-client")?;
    assert_eq!(stored_ct, VECTOR_CT);
    assert!(k.starts_with(&prefix));
    let (_, body, _, header_key) = get(&n.http, &n.base, "cipher-aes-wrapped-client", &[]).await?;
    assert_eq!(
        (body.as_str(), header_key.as_str()),
        (VECTOR_PLAIN, VECTOR_KEY)
    );

    publish(
        &n.http,
        &n.base,
        &[
            ("dataId", "plain-beside-wrapped"),
            ("group", "G"),
            ("content", "a=1"),
        ],
    )
    .await?;

    // "Restart" with another master key, then with none: a new service over the same file.
    let path = n.server.db.path().context("path")?;
    for (other, expected) in [
        (
            Some(master(8)),
            format!(
                "wrapped with master key {}, but the configured master key is {}",
                id(7),
                id(8)
            ),
        ),
        (
            None,
            format!(
                "wrapped with master key {}, but no master key is configured",
                id(7)
            ),
        ),
    ] {
        let services = nacelle_testkit::service::open_services(&path, true, limits(other)).await?;
        let service = services.config.clone();
        let (base, _stop) = http_over(services.clone()).await?;
        let (status, body, _, key) = get(&n.http, &base, "cipher-aes-wrapped", &[]).await?;
        assert_eq!(status, 500, "{body}");
        assert!(
            body.contains(&expected) && body.contains("cipher-aes-wrapped"),
            "{body}"
        );
        assert!(
            !body.contains(MARK) && key.is_empty(),
            "no plaintext, no key: {body}"
        );
        let (mut c, _stop_grpc) = grpc_over(service.clone()).await?;
        let q = query(&mut c, "cipher-aes-wrapped").await?;
        assert_eq!(
            (q.int("resultCode"), q.int("errorCode")),
            (Some(500), Some(500)),
            "{:?}",
            q.body
        );
        assert!(
            q.str("message").unwrap_or("").contains(&expected),
            "{:?}",
            q.body
        );
        assert!(q.str("content").is_none());
        // Plain configs are unaffected.
        let (status, body, ..) = get(&n.http, &base, "plain-beside-wrapped", &[]).await?;
        assert_eq!((status, body.as_str()), (200, "a=1"));
        service.begin_shutdown();
    }

    // Rotation: the new key first, the old one after it — old rows read, new ones are
    // wrapped with the new key.
    let text = format!("{}\n{}\n", base64_of(&[8u8; 32]), base64_of(&[7u8; 32]));
    let rotated = Arc::new(MasterKeys::parse(&text)?);
    let services =
        nacelle_testkit::service::open_services(&path, true, limits(Some(rotated))).await?;
    let service = services.config.clone();
    let census = service.cipher_census();
    assert_eq!((census.wrapped, census.previous, census.foreign), (0, 2, 0));
    let (base, _stop) = http_over(services.clone()).await?;
    let (status, body, ..) = get(&n.http, &base, "cipher-aes-wrapped", &[]).await?;
    assert_eq!((status, body.as_str()), (200, plain.as_str()));
    // Republishing the plaintext (the documented rewrap) wraps with the new key.
    publish(
        &n.http,
        &base,
        &[
            ("dataId", "cipher-aes-wrapped"),
            ("group", "G"),
            ("content", &plain),
        ],
    )
    .await?;
    let (_, k, _) = row(&n.db()?, "cipher-aes-wrapped")?;
    assert!(k.starts_with(&format!("nacelle:v1:{}:", id(8))), "{k}");
    let census = service.cipher_census();
    assert_eq!((census.wrapped, census.previous), (1, 1));
    service.begin_shutdown();
    let text = log().text();
    assert!(
        text.contains("wrapped by a master key that is not configured"),
        "the start-up census names the rows that cannot be read"
    );
    assert!(!text.contains(MARK), "no plaintext in the log");
    Ok(())
}

#[tokio::test]
async fn the_rust_sdk_publishes_and_gets_an_encrypted_config() -> anyhow::Result<()> {
    let n = Node::start(None).await?;
    let sdk = n.server.sdk("").await?;
    let c = &sdk.client;
    let err = |e: nacos_sdk::api::error::Error| anyhow::anyhow!("{e}");
    // No MARK: the SDK logs what it publishes, and the log checks are about the server.
    let plain = "token: sdk-secret".to_string();
    // The SDK 0.8 has no AES plugin: it publishes plaintext, which the server encrypts
    // (Nacos 3.0's behaviour over gRPC) ...
    assert!(c
        .publish_config(
            "cipher-aes-sdk.yml".into(),
            "G".into(),
            plain.clone(),
            Some("yaml".into())
        )
        .await
        .map_err(err)?);
    let (stored, key, md5) = row(&n.db()?, "cipher-aes-sdk.yml")?;
    assert!(!stored.contains("sdk-secret"));
    // ... and gets the ciphertext, which the data key (in clear here) decrypts.
    let got = c
        .get_config("cipher-aes-sdk.yml".into(), "G".into())
        .await
        .map_err(err)?;
    assert_eq!(got.content(), &stored);
    assert_eq!(got.md5(), &md5);
    assert_eq!(DataKey::parse(&key)?.decrypt(got.content())?, plain);
    Ok(())
}

/// `GET base+path?query` → status and body.
async fn read(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    query: &[(&str, &str)],
) -> anyhow::Result<(u16, String)> {
    let r = http
        .get(format!("{base}{path}"))
        .query(query)
        .send()
        .await?;
    Ok((r.status().as_u16(), r.text().await?))
}

/// Every read of an encrypted key, of its gray and of their history answers an authorized
/// caller with the same plaintext on every HTTP surface (v1 `show=all`, `beta=true`,
/// search and history, the v2 gray list and gray history, the v3 admin beta and history,
/// the console's config, grays and history), and gRPC with the ciphertext of that same
/// plaintext — with a master key wrapping the stored data keys, the hardest case. With a
/// master key that does not open them, every one of those reads is an error naming the
/// key, never empty content and never ciphertext passed off as the config.
#[tokio::test]
async fn every_read_of_an_encrypted_key_its_grays_and_history_agrees() -> anyhow::Result<()> {
    let mut n = Node::start(Some(master(7))).await?;
    let id = "cipher-aes-agree";
    let v1 = format!("v={MARK}-1");
    let v2 = format!("v={MARK}-2");
    let beta1 = format!("v={MARK}-beta-1");
    let beta2 = format!("v={MARK}-beta-2");
    for content in [&v1, &v2] {
        let (s, body) = publish(
            &n.http,
            &n.base,
            &[("dataId", id), ("group", "G"), ("content", content)],
        )
        .await?;
        assert_eq!(s, 200, "{body}");
    }
    for content in [&beta1, &beta2] {
        let r = n
            .http
            .post(format!("{}/nacos/v1/cs/configs", n.base))
            .header("betaIps", "127.0.0.1")
            .form(&[
                ("dataId", id),
                ("group", "G"),
                ("content", content.as_str()),
            ])
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().await?);
    }
    let (stored_formal, _, _) = row(&n.db()?, id)?;
    let key = [("dataId", id), ("group", "G")];
    let json_of = |(s, body): (u16, String)| -> anyhow::Result<serde_json::Value> {
        anyhow::ensure!(s == 200, "status {s}: {body}");
        Ok(serde_json::from_str(&body)?)
    };

    // The formal config and the beta, on every surface.
    let show_all = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/v1/cs/configs",
            &[("dataId", id), ("group", "G"), ("show", "all")],
        )
        .await?,
    )?;
    assert_eq!(show_all["content"], v2.as_str());
    let beta = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/v1/cs/configs",
            &[("dataId", id), ("group", "G"), ("beta", "true")],
        )
        .await?,
    )?;
    assert_eq!(beta["data"]["content"], beta2.as_str(), "{beta}");
    let v2_grays = json_of(read(&n.http, &n.base, "/nacos/v2/cs/config/gray", &key).await?)?;
    assert_eq!(v2_grays["data"][0]["content"], beta2.as_str(), "{v2_grays}");
    let v3_beta = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/v3/admin/cs/config/beta",
            &[("dataId", id), ("groupName", "G")],
        )
        .await?,
    )?;
    assert_eq!(v3_beta["data"]["content"], beta2.as_str(), "{v3_beta}");
    let console = [("namespace", ""), ("dataId", id), ("group", "G")];
    let console_cfg =
        json_of(read(&n.http, &n.base, "/nacos/console/api/config", &console).await?)?;
    assert_eq!(console_cfg["content"], v2.as_str(), "{console_cfg}");
    let console_grays =
        json_of(read(&n.http, &n.base, "/nacos/console/api/grays", &console).await?)?;
    assert_eq!(
        console_grays["grays"][0]["content"],
        beta2.as_str(),
        "{console_grays}"
    );
    let search = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/v1/cs/configs",
            &[
                ("search", "accurate"),
                ("dataId", id),
                ("group", "G"),
                ("pageNo", "1"),
                ("pageSize", "10"),
            ],
        )
        .await?,
    )?;
    assert_eq!(search["pageItems"][0]["content"], v2.as_str(), "{search}");
    // gRPC: the beta's ciphertext (the caller is on the beta IP), which opens to the same.
    let q = query(&mut n.grpc, id).await?;
    let (ct, dk) = (
        q.str("content").context("content")?,
        q.str("encryptedDataKey").context("key")?,
    );
    assert_ne!(ct, beta2);
    assert_eq!(DataKey::parse(dk)?.decrypt(ct)?, beta2);

    // History: the formal update's entry holds v1, the gray update's holds beta1.
    let formal_history = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/v1/cs/history",
            &[("search", "accurate"), ("dataId", id), ("group", "G")],
        )
        .await?,
    )?;
    let nids: Vec<String> = formal_history["pageItems"]
        .as_array()
        .context("pageItems")?
        .iter()
        .filter_map(|e| {
            e["id"]
                .as_str()
                .map(str::to_string)
                .or_else(|| e["id"].as_i64().map(|i| i.to_string()))
        })
        .collect();
    assert_eq!(nids.len(), 2, "{formal_history}");
    let newest = &nids[0];
    let entry = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/v1/cs/history",
            &[("dataId", id), ("group", "G"), ("nid", newest)],
        )
        .await?,
    )?;
    assert_eq!(entry["content"], v1.as_str(), "{entry}");
    let v3_entry = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/v3/admin/cs/history",
            &[("dataId", id), ("groupName", "G"), ("nid", newest)],
        )
        .await?,
    )?;
    assert_eq!(v3_entry["data"]["content"], v1.as_str(), "{v3_entry}");
    let console_entry = json_of(
        read(
            &n.http,
            &n.base,
            "/nacos/console/api/history/entry",
            &[
                ("namespace", ""),
                ("dataId", id),
                ("group", "G"),
                ("nid", newest),
            ],
        )
        .await?,
    )?;
    assert_eq!(console_entry["content"], v1.as_str(), "{console_entry}");
    assert!(
        !entry["encryptedDataKey"]
            .as_str()
            .unwrap_or("")
            .starts_with("nacelle:"),
        "the data key is shown unwrapped: {entry}"
    );
    let gray_history =
        json_of(read(&n.http, &n.base, "/nacos/v2/cs/config/gray/history", &key).await?)?;
    let contents: Vec<&str> = gray_history["data"]["pageItems"]
        .as_array()
        .context("pageItems")?
        .iter()
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert_eq!(contents, [beta1.as_str(), beta1.as_str()], "{gray_history}");

    // A master key that does not open them: every read above is an error naming the key.
    let path = n.server.db.path().context("path")?;
    let services =
        nacelle_testkit::service::open_services(&path, true, limits(Some(master(8)))).await?;
    let service = services.config.clone();
    let (base, _stop) = http_over(services.clone()).await?;
    let reads: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "/nacos/v1/cs/configs",
            vec![("dataId", id), ("group", "G"), ("show", "all")],
        ),
        (
            "/nacos/v1/cs/configs",
            vec![("dataId", id), ("group", "G"), ("beta", "true")],
        ),
        (
            "/nacos/v1/cs/configs",
            vec![("search", "accurate"), ("dataId", id), ("group", "G")],
        ),
        (
            "/nacos/v1/cs/history",
            vec![("dataId", id), ("group", "G"), ("nid", newest)],
        ),
        ("/nacos/v2/cs/config/gray", key.to_vec()),
        ("/nacos/v2/cs/config/gray/history", key.to_vec()),
        (
            "/nacos/v3/admin/cs/config/beta",
            vec![("dataId", id), ("groupName", "G")],
        ),
        (
            "/nacos/v3/admin/cs/history",
            vec![("dataId", id), ("groupName", "G"), ("nid", newest)],
        ),
        ("/nacos/console/api/config", console.to_vec()),
        ("/nacos/console/api/grays", console.to_vec()),
        (
            "/nacos/console/api/history/entry",
            vec![
                ("namespace", ""),
                ("dataId", id),
                ("group", "G"),
                ("nid", newest),
            ],
        ),
    ];
    for (path, q) in reads {
        let (status, body) = read(&n.http, &base, path, &q).await?;
        assert_eq!(status, 500, "{path} {q:?}: {body}");
        assert!(
            body.contains(id) && body.contains("master key"),
            "{path}: {body}"
        );
        assert!(
            !body.contains(MARK) && !body.contains(&stored_formal),
            "{path}: {body}"
        );
    }
    service.begin_shutdown();
    Ok(())
}
