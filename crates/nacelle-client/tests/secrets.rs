//! Credentials never in a URL or a message (issue 34, item 8). The SDK logs in with the
//! password in a form body and sends its token in headers; every message of its failing
//! paths — unreachable server, wrong password, invalid and expired tokens, server errors,
//! over gRPC and over HTTP — is collected (the error's `Display`, `Debug` and causes, the
//! metric events, and everything logged at TRACE by the SDK and its HTTP stack) and
//! searched for the secret.
//!
//! Every test of this file writes to one TRACE log ([`log`]); each searches it for its own
//! secrets, which no other test uses.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use common::addr_of;
use nacelle::RunningServer;
use nacelle_client::{Client, ClientError, MetricEvent, ServerAddr, TokenPlacement, Transport};
use nacelle_testkit::server::{settings_for, ADMIN_PASSWORD, TOKEN_SECRET};
use nacelle_testkit::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Everything logged by every test of this binary, at TRACE (the `log` records of
/// reqwest and hyper included).
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    static INSTALLED: OnceLock<()> = OnceLock::new();
    let log = LOG.get_or_init(|| Mutex::new(Vec::new()));
    INSTALLED.get_or_init(|| {
        use tracing_subscriber::util::SubscriberInitExt;
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(|| LogWriter)
            .finish();
        // Also forwards the `log` crate's records (reqwest's) to tracing.
        if let Err(e) = subscriber.try_init() {
            eprintln!("no TRACE capture: {e}");
        }
    });
    log
}

struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match log().lock() {
            Ok(mut l) => l.extend_from_slice(buf),
            Err(p) => p.into_inner().extend_from_slice(buf),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    let l = match log().lock() {
        Ok(l) => l.clone(),
        Err(p) => p.into_inner().clone(),
    };
    String::from_utf8_lossy(&l).into_owned()
}

/// Every message an error gives: `Display`, `Debug` and the chain of causes.
fn messages(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut all = vec![e.to_string(), format!("{e:?}")];
    let mut source = e.source();
    while let Some(cause) = source {
        all.push(cause.to_string());
        all.push(format!("{cause:?}"));
        source = cause.source();
    }
    all
}

/// Fails when any of `texts` holds any of `secrets`.
fn assert_clean(what: &str, texts: &[String], secrets: &[&str]) -> Result<()> {
    for text in texts {
        for secret in secrets {
            ensure!(
                !text.contains(secret),
                "{what}: a secret leaked into a message: {text}"
            );
        }
    }
    Ok(())
}

/// The metric events a client reported, as `Debug` text.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

impl Events {
    fn sink(&self) -> impl Fn(&MetricEvent<'_>) + Send + Sync + 'static {
        let events = self.0.clone();
        move |e: &MetricEvent<'_>| {
            if let Ok(mut v) = events.lock() {
                v.push(format!("{e:?}"));
            }
        }
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// Both transports.
const TRANSPORTS: [Transport; 2] = [Transport::Grpc, Transport::HttpLongPolling];

/// A client of `server` with these settings, quick to give up.
fn builder(
    server: ServerAddr,
    transport: Transport,
    events: &Events,
) -> nacelle_client::ClientBuilder {
    Client::builder()
        .server(server)
        .transport(transport)
        .wait_for_server(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .request_timeout(Duration::from_secs(5))
        .backoff(Duration::from_millis(50), Duration::from_millis(100))
        .metrics(events.sink())
}

/// Runs the calls a user makes — get, publish, listen, and the admin calls — and returns
/// every error's messages; none may succeed.
async fn failing_calls(client: &Client) -> Result<Vec<String>> {
    let mut all = Vec::new();
    let mut push = |what: &str, r: std::result::Result<(), ClientError>| -> Result<()> {
        match r {
            Ok(()) => bail!("{what} succeeded"),
            Err(e) => {
                all.extend(messages(&e));
                Ok(())
            }
        }
    };
    push("get", client.get("app.yaml").await.map(drop))?;
    push(
        "publish",
        client.publish("app.yaml", "a: 1").await.map(drop),
    )?;
    let admin = client.admin();
    push("search", admin.search("", "*", "", 1, 10).await.map(drop))?;
    push("namespaces", admin.namespaces().await.map(drop))?;
    push(
        "history",
        admin
            .history(&client.key("app.yaml"), 1, 10)
            .await
            .map(drop),
    )?;
    Ok(all)
}

/// A server with authentication on (administrator `nacos` / [`ADMIN_PASSWORD`]) and
/// tokens of `ttl_s` seconds, once the administrator can log in.
async fn auth_server(dir: &std::path::Path, ttl_s: u64) -> Result<RunningServer> {
    let settings = settings_for(dir, |s| {
        s.auth = nacelle::settings::AuthSettings {
            token_secret: Some(TOKEN_SECRET.into()),
            admin_password: Some(ADMIN_PASSWORD.into()),
            token_ttl_s: ttl_s,
            ..nacelle::settings::AuthSettings::default()
        };
    });
    let server = nacelle::start(&settings).await?;
    Api::new(server.http_addr)?.wait_ready().await?;
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + nacelle_testkit::SOON;
    loop {
        match nacelle_client::auth::login(&http, &addr_of(&server), "nacos", ADMIN_PASSWORD).await {
            Ok(_) => return Ok(server),
            Err(e) if std::time::Instant::now() > deadline => bail!("no administrator: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Nacelle takes the login's credentials in a form body on every login route (v1, v1
/// `users/login`, v3), as Nacos does — and still in the query string, as the Rust and
/// Python SDKs of Nacos send them.
#[tokio::test]
async fn every_login_route_takes_a_form_body() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = auth_server(dir.path(), 60).await?;
    let http = reqwest::Client::new();
    let base = format!("http://{}/nacos", server.http_addr);
    let form = [("username", "nacos"), ("password", ADMIN_PASSWORD)];
    for path in [
        "/v1/auth/login",
        "/v1/auth/users/login",
        "/v3/auth/user/login",
    ] {
        let r = http
            .post(format!("{base}{path}"))
            .form(&form)
            .send()
            .await?;
        ensure!(r.status() == 200, "{path} (form): {}", r.status());
        let body: serde_json::Value = r.json().await?;
        ensure!(
            body["accessToken"].as_str().is_some_and(|t| !t.is_empty()),
            "{path}: {body}"
        );
        let r = http
            .post(format!("{base}{path}"))
            .query(&form)
            .send()
            .await?;
        ensure!(r.status() == 200, "{path} (query): {}", r.status());
        let wrong = [("username", "nacos"), ("password", "not-the-password")];
        let r = http
            .post(format!("{base}{path}"))
            .form(&wrong)
            .send()
            .await?;
        ensure!(r.status() == 403, "{path} (wrong password): {}", r.status());
    }
    Ok(())
}

/// One request as a [`recorder`] saw it.
#[derive(Debug, Clone)]
struct Seen {
    /// `METHOD /path?query HTTP/1.1`.
    line: String,
    /// The header lines, lower-cased names.
    headers: Vec<String>,
    body: String,
}

/// A plain HTTP/1.1 server on 127.0.0.1 that records every request and answers as a
/// Nacos server with authentication on: the login with `token`, the first config read
/// carrying the token (in headers or as the `accessToken` parameter) with `v1`, anything else with 403 `token expired!` (so the client
/// logs in again). Returns its address and the record.
async fn recorder(token: &'static str) -> Result<(ServerAddr, Arc<Mutex<Vec<Seen>>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let read_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let record = record.clone();
            let read_once = read_once.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    let mut lines = head.split("\r\n");
                    let line = lines.next().unwrap_or_default().to_string();
                    let headers: Vec<String> = lines
                        .map(|l| match l.split_once(':') {
                            Some((k, v)) => format!("{}:{}", k.to_ascii_lowercase(), v),
                            None => l.to_string(),
                        })
                        .collect();
                    let length: usize = headers
                        .iter()
                        .find_map(|h| h.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < end + 4 + length {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body =
                        String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).into_owned();
                    buf.drain(..end + 4 + length);
                    let bearer = format!("authorization: Bearer {token}");
                    let (status, answer) = if line.contains("/v1/auth/login") {
                        (
                            "200 OK",
                            format!(
                                "{{\"accessToken\":\"{token}\",\"tokenTtl\":18000,\"globalAdmin\":true,\"username\":\"nacos\"}}"
                            ),
                        )
                    } else if line.starts_with("GET /nacos/v1/cs/configs?dataId")
                        && (headers.iter().any(|h| h == &bearer)
                            || line.contains(&format!("accessToken={token}")))
                        && !read_once.swap(true, std::sync::atomic::Ordering::SeqCst)
                    {
                        ("200 OK", "v1".to_string())
                    } else {
                        ("403 Forbidden", "token expired!".to_string())
                    };
                    if let Ok(mut r) = record.lock() {
                        r.push(Seen {
                            line,
                            headers,
                            body,
                        });
                    }
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if sock.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((ServerAddr::new("127.0.0.1", port)?, seen))
}

/// No URL the SDK builds holds the password or the token: the login sends them in a
/// form body, calls send the token as `Authorization: Bearer` and `accessToken` headers;
/// a refused token makes the client log in again, and nothing of it reaches a message.
#[tokio::test]
async fn no_secret_in_any_url_the_sdk_builds() -> Result<()> {
    const PASSWORD: &str = "url-Passw0rd-7f3a";
    const TOKEN: &str = "url-token-6c1d9e";
    let _log = log();
    let (server, seen) = recorder(TOKEN).await?;
    let events = Events::default();
    let client = builder(server.clone(), Transport::HttpLongPolling, &events)
        .credentials("nacos", PASSWORD)
        .build()
        .await?;
    let got = client.get("app.yaml").await?;
    ensure!(got.map(|c| c.content).as_deref() == Some("v1"));
    // Refused with 403 `token expired!`: errors, then a fresh login.
    let mut texts = failing_calls(&client).await?;
    // The login itself, alone.
    let answer =
        nacelle_client::auth::login(&reqwest::Client::new(), &server, "nacos", PASSWORD).await?;
    texts.push(format!("{answer:?}"));
    texts.push(format!("{client:?}"));
    drop(client);

    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let logins: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.line.contains("/v1/auth/login"))
        .collect();
    ensure!(
        logins.len() >= 3,
        "a login, one after the refusal, and auth::login: {seen:#?}"
    );
    for login in &logins {
        ensure!(
            login.line.starts_with("POST /nacos/v1/auth/login HTTP/1.1"),
            "{}",
            login.line
        );
        ensure!(
            login.body == format!("username=nacos&password={PASSWORD}"),
            "the credentials travel in the form body: {login:?}"
        );
        ensure!(
            login
                .headers
                .iter()
                .any(|h| h == "content-type: application/x-www-form-urlencoded"),
            "{login:?}"
        );
    }
    let calls: Vec<&Seen> = seen
        .iter()
        .filter(|s| !s.line.contains("/v1/auth/login"))
        .collect();
    ensure!(calls.len() >= 5, "{seen:#?}");
    for call in &seen {
        ensure!(
            !call.line.contains(PASSWORD) && !call.line.contains(TOKEN),
            "a secret in a URL: {}",
            call.line
        );
    }
    for call in &calls {
        ensure!(
            call.headers
                .contains(&format!("authorization: Bearer {TOKEN}"))
                && call.headers.contains(&format!("accesstoken: {TOKEN}")),
            "the token travels in headers: {call:?}"
        );
        ensure!(!call.body.contains(PASSWORD), "{call:?}");
    }
    texts.extend(events.all());
    texts.push(logged());
    assert_clean("recorded server", &texts, &[PASSWORD, TOKEN])
}

/// Asked to send the token as Nacos's `accessToken` parameter (for r-nacos), the client
/// does — and still no message of its own holds the token: errors show no URL.
#[tokio::test]
async fn a_token_asked_in_the_query_stays_out_of_messages() -> Result<()> {
    const PASSWORD: &str = "query-Passw0rd-2d8c";
    const TOKEN: &str = "query-token-a90f3b";
    let _log = log();
    let (server, seen) = recorder(TOKEN).await?;
    let events = Events::default();
    let client = builder(server, Transport::HttpLongPolling, &events)
        .credentials("nacos", PASSWORD)
        .http_token(TokenPlacement::QueryParameter)
        .build()
        .await?;
    let got = client.get("app.yaml").await?;
    ensure!(got.map(|c| c.content).as_deref() == Some("v1"));
    let mut texts = failing_calls(&client).await?;
    texts.push(format!("{client:?}"));
    drop(client);
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    for call in seen.iter().filter(|s| !s.line.contains("/v1/auth/login")) {
        ensure!(
            call.line.contains(&format!("accessToken={TOKEN}")),
            "{call:?}"
        );
        ensure!(!call.headers.iter().any(|h| h.contains(TOKEN)), "{call:?}");
    }
    ensure!(seen.iter().all(|s| !s.line.contains(PASSWORD)), "{seen:#?}");
    texts.extend(events.all());
    texts.push(logged());
    assert_clean("token in the query", &texts, &[PASSWORD, TOKEN])
}

/// No server reachable: the messages name the server and the cause, never the password
/// or a token given to the builder.
#[tokio::test]
async fn unreachable_server_messages_hold_no_secret() -> Result<()> {
    const PASSWORD: &str = "unreachable-Passw0rd-91b2";
    const TOKEN: &str = "unreachable-token-44e0";
    let _log = log();
    // Port 1: nothing listens there.
    let nowhere = ServerAddr::new("127.0.0.1", 1)?.with_grpc_port(2);
    let mut texts = Vec::new();
    for transport in TRANSPORTS {
        let events = Events::default();
        let with_password =
            builder(nowhere.clone(), transport, &events).credentials("nacos", PASSWORD);
        texts.push(format!("{with_password:?}"));
        let client = with_password.build().await?;
        let errors = failing_calls(&client).await?;
        ensure!(
            errors.iter().any(|m| m.contains("no server reachable")),
            "{transport:?}: {errors:#?}"
        );
        texts.extend(errors);
        texts.push(format!("{client:?}"));
        drop(client);

        let with_token = builder(nowhere.clone(), transport, &events).access_token(TOKEN);
        texts.push(format!("{with_token:?}"));
        let client = with_token.build().await?;
        texts.extend(failing_calls(&client).await?);
        drop(client);
        texts.extend(events.all());
    }
    let e = nacelle_client::auth::login(&reqwest::Client::new(), &nowhere, "nacos", PASSWORD)
        .await
        .err()
        .context("a login at a closed port")?;
    ensure!(e.is_unavailable(), "{e}");
    ensure!(
        e.to_string().contains("127.0.0.1:1"),
        "the message names the server: {e}"
    );
    texts.extend(messages(&e));
    let log = logged();
    // The capture works: the SDK's own DEBUG line of a failed connection is in it.
    ensure!(
        log.contains("connection attempt failed"),
        "nothing captured: {log}"
    );
    texts.push(log);
    assert_clean("unreachable server", &texts, &[PASSWORD, TOKEN])
}

/// A wrong password: `login failed` (then the login throttle's 429), never the password.
#[tokio::test]
async fn wrong_password_messages_hold_no_secret() -> Result<()> {
    const WRONG: &str = "wrong-Passw0rd-c0ffee";
    let _log = log();
    let dir = tempfile::tempdir()?;
    let server = auth_server(dir.path(), 60).await?;
    let mut texts = Vec::new();
    for transport in TRANSPORTS {
        let events = Events::default();
        let client = builder(addr_of(&server), transport, &events)
            .credentials("nacos", WRONG)
            .build()
            .await?;
        let errors = failing_calls(&client).await?;
        ensure!(
            errors.iter().any(|m| m.contains("login failed")),
            "{transport:?}: {errors:#?}"
        );
        texts.extend(errors);
        drop(client);
        texts.extend(events.all());
    }
    let e = nacelle_client::auth::login(&reqwest::Client::new(), &addr_of(&server), "nacos", WRONG)
        .await
        .err()
        .context("a login with a wrong password")?;
    ensure!(matches!(e, ClientError::Auth(_)), "{e:?}");
    texts.extend(messages(&e));
    texts.push(logged());
    assert_clean("wrong password", &texts, &[WRONG])
}

/// A token the server does not know, and one that expired: `forbidden`, never the token.
#[tokio::test]
async fn invalid_and_expired_token_messages_hold_no_secret() -> Result<()> {
    const INVALID: &str = "invalid-token-5ab9d1";
    let _log = log();
    let dir = tempfile::tempdir()?;
    let server = auth_server(dir.path(), 1).await?;
    let expired = nacelle_client::auth::login(
        &reqwest::Client::new(),
        &addr_of(&server),
        "nacos",
        ADMIN_PASSWORD,
    )
    .await?
    .access_token;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let mut texts = Vec::new();
    for token in [INVALID, expired.as_str()] {
        for transport in TRANSPORTS {
            let events = Events::default();
            let b = builder(addr_of(&server), transport, &events).access_token(token);
            texts.push(format!("{b:?}"));
            let client = b.build().await?;
            let errors = failing_calls(&client).await?;
            ensure!(
                errors.iter().any(|m| m.contains("forbidden")),
                "{transport:?}: {errors:#?}"
            );
            texts.extend(errors);
            drop(client);
            texts.extend(events.all());
        }
    }
    texts.push(logged());
    assert_clean(
        "refused tokens",
        &texts,
        &[INVALID, expired.as_str(), ADMIN_PASSWORD],
    )
}

/// Errors the server answers to a logged-in client (a bad name, a missing key, a
/// missing namespace): their messages hold neither the password nor the token.
#[tokio::test]
async fn server_error_messages_hold_no_secret() -> Result<()> {
    let _log = log();
    let dir = tempfile::tempdir()?;
    let server = auth_server(dir.path(), 60).await?;
    let token = nacelle_client::auth::login(
        &reqwest::Client::new(),
        &addr_of(&server),
        "nacos",
        ADMIN_PASSWORD,
    )
    .await?
    .access_token;
    let mut texts = Vec::new();
    for transport in TRANSPORTS {
        let events = Events::default();
        let client = builder(addr_of(&server), transport, &events)
            .credentials("nacos", ADMIN_PASSWORD)
            .build()
            .await?;
        client.publish("ok.yaml", "a: 1").await?;
        let failures: Vec<std::result::Result<(), ClientError>> = vec![
            client.publish("bad name!", "x").await.map(drop),
            client.publish("", "x").await.map(drop),
            client
                .admin()
                .history_entry(&client.key("missing.yaml"), "424242")
                .await
                .map(drop),
            client
                .admin()
                .delete_namespace("no-such-namespace")
                .await
                .map(drop),
        ];
        for r in failures {
            match r {
                Ok(()) => {}
                Err(e) => texts.extend(messages(&e)),
            }
        }
        ensure!(!texts.is_empty(), "{transport:?}: no call failed");
        texts.push(format!("{client:?}"));
        drop(client);
        texts.extend(events.all());
    }
    texts.push(logged());
    assert_clean("server errors", &texts, &[ADMIN_PASSWORD, token.as_str()])
}
