//! Content validation by type on every publish path: a table of valid and invalid
//! documents per type, published over HTTP v1, v2, v3 and gRPC into namespaces of each
//! mode (`reject`, `warn`, `off`, set per namespace over a default), against one service
//! on a real SQLite store over real sockets. `reject` answers 400 / gRPC error 400 naming
//! the problem and its line and stores nothing; `warn` stores and logs the key and the
//! problem (never the content); `off` stores without parsing (and logs nothing).
//!
//! This binary installs a global log subscriber that writes into a buffer; every test
//! publishes under data ids of its own, so they can share it.

mod common;

use common::{Msg, RawClient, RawExt, TestServer, SOON};
use nacelle_core::{Caller, ConfigKey, ValidationMode, ValidationPolicy};
use nacelle_grpc::GrpcOptions;
use nacelle_http::HttpOptions;
use nacelle_service::Limits;
use nacelle_testkit::logs::CapturedLog;
use serde_json::{json, Value};

/// The service's log, captured once for the whole binary.
fn log() -> &'static CapturedLog {
    nacelle_testkit::logs::capture("nacelle_service=warn")
}

/// One service, its HTTP adapter and a set-up raw gRPC client.
struct Server {
    server: TestServer,
    base: String,
    _stop_http: tokio::sync::oneshot::Sender<()>,
    http: reqwest::Client,
    grpc: RawClient,
}

impl Server {
    async fn start(policy: ValidationPolicy) -> anyhow::Result<Self> {
        log();
        let limits = Limits {
            content_validation: policy,
            ..Limits::default()
        };
        let server = TestServer::start_with_limits(GrpcOptions::default(), limits).await?;
        let (base, stop) = server.start_http(HttpOptions::default()).await?;
        let mut grpc = server.raw().await?;
        grpc.setup("127.0.0.1").await?;
        Ok(Server {
            server,
            base,
            _stop_http: stop,
            http: reqwest::Client::builder().timeout(SOON).build()?,
            grpc,
        })
    }

    /// Publishes over `protocol`; the answer as (accepted, error message).
    async fn publish(
        &mut self,
        protocol: Protocol,
        ns: &str,
        data_id: &str,
        ty: &str,
        content: &str,
    ) -> anyhow::Result<Answer> {
        match protocol {
            Protocol::V1 | Protocol::V2 | Protocol::V3 => {
                let (path, ns_param, group_param) = match protocol {
                    Protocol::V1 => ("/nacos/v1/cs/configs", "tenant", "group"),
                    Protocol::V2 => ("/nacos/v2/cs/config", "namespaceId", "group"),
                    _ => ("/nacos/v3/admin/cs/config", "namespaceId", "groupName"),
                };
                let r = self
                    .http
                    .post(format!("{}{path}", self.base))
                    .form(&[
                        ("dataId", data_id),
                        (group_param, "G"),
                        (ns_param, ns),
                        ("type", ty),
                        ("content", content),
                    ])
                    .send()
                    .await?;
                let status = r.status().as_u16();
                let body = r.text().await?;
                Ok(Answer {
                    status,
                    message: match protocol {
                        // `caused: <message>;`
                        Protocol::V1 => body
                            .strip_prefix("caused: ")
                            .and_then(|b| b.strip_suffix(';'))
                            .unwrap_or(&body)
                            .to_string(),
                        _ => {
                            let v: Value = serde_json::from_str(&body)?;
                            if status == 200 {
                                assert_eq!(v["code"], json!(0), "{body}");
                            } else {
                                assert_eq!(v["code"], json!(20002), "{body}");
                            }
                            v["data"].as_str().unwrap_or_default().to_string()
                        }
                    },
                })
            }
            Protocol::Grpc => {
                let r: Msg = self
                    .grpc
                    .call(
                        "ConfigPublishRequest",
                        json!({"dataId": data_id, "group": "G", "tenant": ns,
                               "content": content, "additionMap": {"type": ty}}),
                    )
                    .await?;
                let codes = (r.int("resultCode"), r.int("errorCode"));
                let status = match codes {
                    (Some(200), Some(0)) => 200,
                    (Some(500), Some(400)) => 400,
                    other => anyhow::bail!("unexpected gRPC answer {other:?}: {:?}", r.body),
                };
                Ok(Answer {
                    status,
                    message: r.str("message").unwrap_or_default().to_string(),
                })
            }
        }
    }

    fn stored(&self, ns: &str, data_id: &str) -> anyhow::Result<Option<String>> {
        let key = ConfigKey::parse(Some(ns), "G", data_id)?;
        Ok(self
            .server
            .service
            .get(&Caller::internal(), &key, None)?
            .map(|s| s.config.content_text().into_owned()))
    }
}

#[derive(Debug, Clone, Copy)]
enum Protocol {
    V1,
    V2,
    /// Nacos 3's admin API (`/nacos/v3/admin/cs/config`).
    V3,
    Grpc,
}

const PROTOCOLS: [Protocol; 4] = [Protocol::V1, Protocol::V2, Protocol::V3, Protocol::Grpc];

#[derive(Debug)]
struct Answer {
    status: u16,
    message: String,
}

/// A document of a type, and for an invalid one the line and a word of the problem.
struct Doc {
    ty: &'static str,
    content: &'static str,
    invalid: Option<(usize, &'static str)>,
}

/// Valid and invalid documents of every type; each invalid one carries the word
/// `SECRETVALUE`, which no message or log line may quote.
const DOCS: &[Doc] = &[
    Doc {
        ty: "json",
        content: "{\"a\": [1, 2], \"p\": \"SECRETVALUE\"}",
        invalid: None,
    },
    Doc {
        ty: "json",
        content: "{\"p\": \"SECRETVALUE\",\n  \"b\": }",
        invalid: Some((2, "expected value")),
    },
    Doc {
        ty: "yaml",
        content: "a: 1\nb:\n  - x\n---\nc: SECRETVALUE\n",
        invalid: None,
    },
    Doc {
        ty: "yaml",
        content: "a: SECRETVALUE\nb: c: d\n",
        invalid: Some((2, "mapping values are not allowed")),
    },
    Doc {
        ty: "yaml",
        content: "a: SECRETVALUE\nb: 1\na: 2\n",
        invalid: Some((1, "duplicate key `a`")),
    },
    Doc {
        ty: "xml",
        content: "<?xml version=\"1.0\"?>\n<a><b x=\"SECRETVALUE\"/></a>",
        invalid: None,
    },
    Doc {
        ty: "xml",
        content: "<a>SECRETVALUE\n  <b></c>\n</a>",
        invalid: Some((2, "</c>")),
    },
    Doc {
        ty: "toml",
        content: "a = 1\n[t]\nb = \"SECRETVALUE\"\n",
        invalid: None,
    },
    Doc {
        ty: "toml",
        content: "a = \"SECRETVALUE\"\na = 2\n",
        invalid: Some((2, "duplicate")),
    },
    Doc {
        ty: "properties",
        content: "a=SECRETVALUE\nb=\\u0041\nflag\n",
        invalid: None,
    },
    Doc {
        ty: "properties",
        content: "a=SECRETVALUE\nb=\\u00zz\n",
        invalid: Some((2, "malformed \\uxxxx")),
    },
    // Never checked, whatever they hold.
    Doc {
        ty: "text",
        content: "{SECRETVALUE",
        invalid: None,
    },
    Doc {
        ty: "html",
        content: "<p><b>SECRETVALUE</p>",
        invalid: None,
    },
];

fn policy(default: ValidationMode, overrides: &str) -> anyhow::Result<ValidationPolicy> {
    Ok(ValidationPolicy::parse(default, overrides)?)
}

/// Publishes every document of the table over every protocol into `ns` and checks the
/// answer, the store and the log as `mode` says.
async fn check_table(
    s: &mut Server,
    ns: &str,
    mode: ValidationMode,
    tag: &str,
) -> anyhow::Result<()> {
    for (i, doc) in DOCS.iter().enumerate() {
        for protocol in PROTOCOLS {
            let data_id = format!("{tag}-{ns}-{}-{i}-{protocol:?}", doc.ty);
            let what = format!("{mode:?} {ns:?} {} #{i} over {protocol:?}", doc.ty);
            let answer = s
                .publish(protocol, ns, &data_id, doc.ty, doc.content)
                .await?;
            let rejected = mode == ValidationMode::Reject && doc.invalid.is_some();
            if rejected {
                let Some((line, word)) = doc.invalid else {
                    unreachable!()
                };
                assert_eq!(answer.status, 400, "{what}: {answer:?}");
                let m = &answer.message;
                assert!(
                    m.starts_with(&format!("content is not valid {}", doc.ty)),
                    "{what}: {m}"
                );
                assert!(m.contains(&format!("at line {line}")), "{what}: {m}");
                assert!(m.contains(word), "{what}: {m}");
                assert!(!m.contains("SECRETVALUE"), "{what}: {m}");
                assert_eq!(s.stored(ns, &data_id)?, None, "{what}: nothing stored");
            } else {
                assert_eq!(answer.status, 200, "{what}: {answer:?}");
                assert_eq!(
                    s.stored(ns, &data_id)?.as_deref(),
                    Some(doc.content),
                    "{what}: stored as sent"
                );
            }
            // The warning of `warn` mode names the key and the problem; nothing else logs.
            let warned: Vec<String> = log()
                .text()
                .lines()
                .filter(|l| l.contains(&format!("data_id=\"{data_id}\"")))
                .map(str::to_string)
                .collect();
            if mode == ValidationMode::Warn && doc.invalid.is_some() {
                assert_eq!(warned.len(), 1, "{what}: {warned:?}");
                let line = &warned[0];
                assert!(line.contains("WARN"), "{line}");
                assert!(line.contains("group=\"G\""), "{line}");
                assert!(line.contains(&format!("namespace=\"{ns}\"")), "{line}");
                assert!(
                    line.contains(&format!("content is not valid {}", doc.ty)),
                    "{line}"
                );
                assert!(!line.contains("SECRETVALUE"), "{line}");
            } else {
                assert!(warned.is_empty(), "{what}: {warned:?}");
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn each_mode_on_every_protocol_by_namespace_override() -> anyhow::Result<()> {
    // The default namespace warns (the default mode); `strict` rejects, `loose` is off.
    let mut s = Server::start(policy(ValidationMode::Warn, "strict=reject,loose=off")?).await?;
    check_table(&mut s, "", ValidationMode::Warn, "ov").await?;
    check_table(&mut s, "strict", ValidationMode::Reject, "ov").await?;
    check_table(&mut s, "loose", ValidationMode::Off, "ov").await?;
    // A namespace without an override has the default.
    check_table(&mut s, "other", ValidationMode::Warn, "ov").await?;
    Ok(())
}

#[tokio::test]
async fn the_global_mode_applies_where_no_namespace_overrides_it() -> anyhow::Result<()> {
    // `public` names the default namespace in an override.
    let mut s = Server::start(policy(ValidationMode::Reject, "public=off")?).await?;
    check_table(&mut s, "any", ValidationMode::Reject, "gl").await?;
    check_table(&mut s, "", ValidationMode::Off, "gl").await?;
    let mut s = Server::start(ValidationPolicy::uniform(ValidationMode::Off)).await?;
    check_table(&mut s, "any", ValidationMode::Off, "gl2").await?;
    Ok(())
}

#[tokio::test]
async fn a_rejected_update_keeps_the_stored_version() -> anyhow::Result<()> {
    let mut s = Server::start(ValidationPolicy::uniform(ValidationMode::Reject)).await?;
    for protocol in PROTOCOLS {
        let id = format!("upd-{protocol:?}");
        let ok = s.publish(protocol, "", &id, "json", "{\"v\": 1}").await?;
        assert_eq!(ok.status, 200, "{ok:?}");
        let bad = s.publish(protocol, "", &id, "json", "{\"v\": ").await?;
        assert_eq!(bad.status, 400, "{bad:?}");
        assert_eq!(s.stored("", &id)?.as_deref(), Some("{\"v\": 1}"));
        // Declared as text, the same bytes are not checked.
        let text = s.publish(protocol, "", &id, "text", "{\"v\": ").await?;
        assert_eq!(text.status, 200, "{text:?}");
        assert_eq!(s.stored("", &id)?.as_deref(), Some("{\"v\": "));
    }
    Ok(())
}

#[tokio::test]
async fn a_large_document_is_checked_too() -> anyhow::Result<()> {
    // Over the service's inline threshold (16 KiB): parsed on the blocking pool.
    let mut s = Server::start(ValidationPolicy::uniform(ValidationMode::Reject)).await?;
    let mut valid = String::new();
    for i in 0..5_000 {
        valid.push_str(&format!("key{i}:\n  v: value {i}\n"));
    }
    let lines = valid.lines().count();
    let invalid = format!("{valid}broken: a: b\n");
    for protocol in PROTOCOLS {
        let id = format!("large-{protocol:?}");
        let ok = s.publish(protocol, "", &id, "yaml", &valid).await?;
        assert_eq!(ok.status, 200, "{protocol:?}: {}", ok.message);
        let bad = s.publish(protocol, "", &id, "yaml", &invalid).await?;
        assert_eq!(bad.status, 400, "{protocol:?}");
        assert!(
            bad.message.contains(&format!("at line {}", lines + 1)),
            "{protocol:?}: {}",
            bad.message
        );
        assert_eq!(s.stored("", &id)?.as_deref(), Some(valid.as_str()));
    }
    Ok(())
}
