//! Every kind of config write, one table row each, performed through its real HTTP
//! endpoint against a real server (authentication on, SQLite) with a webhook to a real
//! local receiver matching every key: each must move `nacelle_config_writes_total` (its
//! `op` label, `result="ok"`), write an audit entry (its action, outcome `ok`) and emit its
//! webhook event (its kind, on the row's key, signed).
//!
//! The rows' preparations (the formal config a gray needs, the versions a rollback goes
//! back to, the approved change request …) all run before the webhook exists, and the
//! audit trail is awaited past them; so every event the receiver gets is a row's own
//! write, and the audit counts taken before each write are stable. Every row is checked
//! and every failure reported, each naming its row.

use nacelle_testkit::api::Reply;
use nacelle_testkit::daemon::wait_for;
use nacelle_testkit::server::{secure, TestServer};
use nacelle_testkit::{md5, Api, TestResult, SOON};
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

mod common;

use common::archive::{import, multipart, zip_of};
use common::audit::{audit_entries, audit_until};
use common::metrics::scrape;
use common::webhook::{Receiver, SECRET};

const WRITES: &str = "nacelle_config_writes_total";
const CONFIGS: &str = "/nacos/v1/cs/configs";
/// The group of the rows' keys, but the change request's.
const G: &str = "G";
/// The group under a review policy: its keys change by change request only.
const REVIEWED: &str = "REVIEWED";

/// How a row writes: what a user would do, through the endpoint they would use.
#[derive(Debug, Clone, Copy)]
enum Write {
    /// `POST /nacos/v1/cs/configs`.
    Formal,
    /// The same with a `betaIps` header: a beta.
    Beta,
    /// `DELETE /nacos/v1/cs/configs?beta=true` of a beta.
    StopBeta,
    /// `POST /nacos/v2/cs/config/gray/promote` of a beta.
    PromoteBeta,
    /// `POST /nacos/v1/cs/configs` with a `tag`.
    Tag,
    /// `POST /nacos/v1/cs/configs?import=true` with a zip of one config.
    Import,
    /// `POST /nacos/v1/cs/configs?clone=true` of another key's config.
    Clone,
    /// The console's rollback to the key's first version
    /// (`POST /nacos/console/api/history/rollback`).
    Rollback,
    /// `POST /nacos/nacelle/v1/change/publish` of a change request approved under a review
    /// policy.
    ChangePublish,
    /// `POST /nacos/nacelle/v1/rollouts`: the server publishes the first step (a gray).
    RolloutStep,
    /// `PUT /nacos/v3/admin/cs/config/metadata`.
    Metadata,
    /// `DELETE /nacos/v1/cs/configs`.
    Remove,
}

/// One write kind and what it must leave behind.
struct Row {
    name: &'static str,
    write: Write,
    /// (group, dataId) in the public namespace; each row its own.
    key: (&'static str, &'static str),
    /// The `op` label of `nacelle_config_writes_total` it counts under.
    op: &'static str,
    /// The `action` of its audit entry (`nacelle_core::audit::AuditAction`).
    audit: &'static str,
    /// The `kind` of its webhook event.
    event: &'static str,
}

#[rustfmt::skip]
const ROWS: &[Row] = &[
    Row { name: "formal publish",         write: Write::Formal,        key: (G, "formal.yaml"),         op: "publish",        audit: "publish",        event: "publish" },
    Row { name: "gray (beta) publish",    write: Write::Beta,          key: (G, "beta.yaml"),           op: "gray_publish",   audit: "gray-publish",   event: "gray-publish" },
    Row { name: "gray stop",              write: Write::StopBeta,      key: (G, "stop.yaml"),           op: "gray_stop",      audit: "gray-stop",      event: "gray-stop" },
    Row { name: "gray promote",           write: Write::PromoteBeta,   key: (G, "promote.yaml"),        op: "promote",        audit: "promote",        event: "promote" },
    Row { name: "tag publish",            write: Write::Tag,           key: (G, "tag.yaml"),            op: "gray_publish",   audit: "gray-publish",   event: "gray-publish" },
    Row { name: "import",                 write: Write::Import,        key: (G, "imported.yaml"),       op: "import",         audit: "import",         event: "import" },
    Row { name: "clone",                  write: Write::Clone,         key: (G, "cloned.yaml"),         op: "clone",          audit: "clone",          event: "clone" },
    Row { name: "rollback",               write: Write::Rollback,      key: (G, "rolled-back.yaml"),    op: "publish",        audit: "publish",        event: "publish" },
    Row { name: "change-request publish", write: Write::ChangePublish, key: (REVIEWED, "change.yaml"),  op: "change_publish", audit: "change-publish", event: "change-published" },
    Row { name: "rollout step",           write: Write::RolloutStep,   key: (G, "rollout.yaml"),        op: "gray_publish",   audit: "gray-publish",   event: "gray-publish" },
    Row { name: "metadata update",        write: Write::Metadata,      key: (G, "metadata.yaml"),       op: "metadata",       audit: "metadata",       event: "metadata" },
    Row { name: "remove",                 write: Write::Remove,        key: (G, "removed.yaml"),        op: "remove",         audit: "remove",         event: "remove" },
];

/// The formal content every prepared key starts with.
const BEFORE: &str = "v: before\n";
/// The content a row's write publishes (formal, gray, imported, proposed).
const WRITTEN: &str = "v: written\n";
/// The key a clone copies.
const CLONE_SOURCE: &str = "clone-source.yaml";

/// The md5 the webhook event of a write must carry.
#[derive(Debug, Clone, Copy)]
enum Md5 {
    Of(&'static str),
    Null,
}

impl Write {
    /// The event's `md5` (docs/webhooks.md): of the content the key holds after a publish,
    /// gray publish, promote, import or clone (and a change request's proposed content);
    /// `null` for the other kinds.
    fn md5_after(self) -> Md5 {
        match self {
            Write::Formal
            | Write::Beta
            | Write::PromoteBeta
            | Write::Tag
            | Write::Import
            | Write::Clone
            | Write::ChangePublish
            | Write::RolloutStep => Md5::Of(WRITTEN),
            Write::Rollback => Md5::Of(BEFORE),
            Write::StopBeta | Write::Metadata | Write::Remove => Md5::Null,
        }
    }
}

/// The server, the administrator (`nacos`) and a reviewer (`bob`).
struct World {
    s: TestServer,
    /// A client sending the administrator's token.
    admin: Api,
    admin_token: String,
    /// A client sending bob's token (`rwa` on the public namespace).
    bob: Api,
}

impl World {
    /// A request of `api` (the admin's or bob's) to `path`.
    fn request(api: &Api, method: Method, path: &str) -> RequestBuilder {
        api.http.request(method, api.url(path))
    }

    /// A v1 publish of `content` to `key` by the administrator, with `headers` and extra
    /// form fields.
    async fn publish(
        &self,
        (group, data_id): (&str, &str),
        content: &str,
        headers: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> TestResult {
        let mut form = vec![("group", group), ("dataId", data_id), ("content", content)];
        form.extend_from_slice(extra);
        let mut req = Self::request(&self.admin, Method::POST, CONFIGS).form(&form);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = ok(req).await?;
        expect(r.body == "true", || {
            format!("publish of {data_id}: {}", r.body)
        })
    }

    /// What `row` needs before its write (run before the webhook exists): the value its
    /// write takes (a config id, a history nid, a change request id), or `""`.
    async fn prepare(&self, row: &Row) -> TestResult<String> {
        let key = row.key;
        match row.write {
            Write::Formal | Write::Import => Ok(String::new()),
            Write::Beta | Write::Tag | Write::RolloutStep | Write::Metadata | Write::Remove => {
                self.publish(key, BEFORE, &[], &[]).await?;
                Ok(String::new())
            }
            Write::StopBeta | Write::PromoteBeta => {
                self.publish(key, BEFORE, &[], &[]).await?;
                self.publish(key, WRITTEN, &[("betaIps", "127.0.0.2")], &[])
                    .await?;
                Ok(String::new())
            }
            Write::Clone => {
                self.publish((G, CLONE_SOURCE), WRITTEN, &[], &[]).await?;
                let record = self.admin.record("", G, CLONE_SOURCE).await?;
                Ok(record["id"].as_str().ok_or("no config id")?.to_string())
            }
            Write::Rollback => {
                self.publish(key, BEFORE, &[], &[]).await?;
                self.publish(key, "v: later\n", &[], &[]).await?;
                // Newest first; the oldest row is the insert of BEFORE.
                let page = json_of(
                    ok(
                        Self::request(&self.admin, Method::GET, "/nacos/console/api/history")
                            .query(&[("namespace", ""), ("group", key.0), ("dataId", key.1)]),
                    )
                    .await?,
                )?;
                let oldest = page["items"]
                    .as_array()
                    .and_then(|items| items.last())
                    .ok_or_else(|| format!("no history of {}: {page}", key.1))?;
                Ok(oldest["nid"].to_string())
            }
            Write::ChangePublish => {
                let policy = [
                    ("namespaceId", ""),
                    ("groupPattern", key.0),
                    ("requiredApprovals", "1"),
                ];
                data(
                    ok(Self::request(
                        &self.admin,
                        Method::POST,
                        "/nacos/nacelle/v1/review-policies",
                    )
                    .form(&policy))
                    .await?,
                )?;
                let body = json!({"namespaceId": "", "title": "a reviewed write", "items": [
                    {"group": key.0, "dataId": key.1, "content": WRITTEN}]});
                let cr = data(
                    ok(
                        Self::request(&self.admin, Method::POST, "/nacos/nacelle/v1/changes")
                            .json(&body),
                    )
                    .await?,
                )?;
                let id = cr["id"].as_i64().ok_or("no change id")?.to_string();
                let approved = data(
                    ok(
                        Self::request(&self.bob, Method::POST, "/nacos/nacelle/v1/change/approve")
                            .form(&[("id", id.as_str())]),
                    )
                    .await?,
                )?;
                expect(approved["state"] == "approved", || {
                    format!("change {id} not approved: {approved}")
                })?;
                Ok(id)
            }
        }
    }

    /// `row`'s write, `prepared` being what [`World::prepare`] answered.
    async fn perform(&self, row: &Row, prepared: &str) -> TestResult {
        let (group, data_id) = row.key;
        let key = [("group", group), ("dataId", data_id)];
        match row.write {
            Write::Formal => self.publish(row.key, WRITTEN, &[], &[]).await,
            Write::Beta => {
                self.publish(row.key, WRITTEN, &[("betaIps", "127.0.0.2")], &[])
                    .await
            }
            Write::Tag => {
                self.publish(row.key, WRITTEN, &[], &[("tag", "blue")])
                    .await
            }
            Write::StopBeta => {
                let v = json_of(
                    ok(Self::request(&self.admin, Method::DELETE, CONFIGS)
                        .query(&key)
                        .query(&[("beta", "true")]))
                    .await?,
                )?;
                expect(v["message"] == "stop beta ok", || v.to_string())
            }
            Write::PromoteBeta => {
                let v = json_of(
                    ok(Self::request(
                        &self.admin,
                        Method::POST,
                        "/nacos/v2/cs/config/gray/promote",
                    )
                    .form(&[
                        ("group", group),
                        ("dataId", data_id),
                        ("grayName", "beta"),
                    ]))
                    .await?,
                )?;
                expect(v["code"] == 0, || v.to_string())
            }
            Write::Import => {
                let zip = zip_of(&[(&format!("{group}/{data_id}"), WRITTEN.as_bytes())])?;
                let (status, v) = import(&self.admin, "", None, Some(&zip)).await?;
                expect(status == 200 && v["data"]["succCount"] == 1, || {
                    format!("import: {status} {v}")
                })
            }
            Write::Clone => {
                let id: i64 = prepared.parse()?;
                let beans = json!([{"cfgId": id, "dataId": data_id, "group": group}]);
                let v = json_of(
                    ok(Self::request(&self.admin, Method::POST, CONFIGS)
                        .query(&[("clone", "true"), ("tenant", ""), ("policy", "ABORT")])
                        .json(&beans))
                    .await?,
                )?;
                expect(v["data"]["succCount"] == 1, || format!("clone: {v}"))
            }
            Write::Rollback => {
                ok(Self::request(
                    &self.admin,
                    Method::POST,
                    "/nacos/console/api/history/rollback",
                )
                .form(&[
                    ("namespace", ""),
                    ("group", group),
                    ("dataId", data_id),
                    ("nid", prepared),
                ]))
                .await?;
                Ok(())
            }
            Write::ChangePublish => {
                let cr = data(
                    ok(Self::request(
                        &self.admin,
                        Method::POST,
                        "/nacos/nacelle/v1/change/publish",
                    )
                    .form(&[("id", prepared)]))
                    .await?,
                )?;
                expect(cr["state"] == "published", || format!("change: {cr}"))
            }
            Write::RolloutStep => {
                let body = json!({"group": group, "dataId": data_id, "content": WRITTEN,
                                  "steps": [10, 100], "bakeMs": 600_000});
                data(
                    ok(
                        Self::request(&self.admin, Method::POST, "/nacos/nacelle/v1/rollouts")
                            .json(&body),
                    )
                    .await?,
                )?;
                Ok(())
            }
            Write::Metadata => {
                data(
                    ok(Self::request(
                        &self.admin,
                        Method::PUT,
                        "/nacos/v3/admin/cs/config/metadata",
                    )
                    .form(&[
                        ("groupName", group),
                        ("dataId", data_id),
                        ("desc", "described in place"),
                        ("configTags", "a,b"),
                    ]))
                    .await?,
                )?;
                Ok(())
            }
            Write::Remove => {
                let r = self.admin.delete("", group, data_id).await?;
                expect(r.status == 200, || {
                    format!("remove: {} {}", r.status, r.body)
                })
            }
        }
    }

    /// The target of `row`'s audit entry: the key, or the change request's id.
    fn target(row: &Row, prepared: &str) -> String {
        match row.write {
            Write::ChangePublish => prepared.to_string(),
            _ => format!("public/{}/{}", row.key.0, row.key.1),
        }
    }

    /// The audit entries of `row`'s action on `target` with outcome `ok`.
    async fn audited(&self, row: &Row, target: &str) -> TestResult<usize> {
        let entries = audit_entries(
            &self.admin,
            &self.admin_token,
            &[("action", row.audit), ("key", target)],
        )
        .await?;
        Ok(entries
            .iter()
            .filter(|e| e["target"] == target && e["outcome"] == "ok")
            .count())
    }

    /// The sum of `nacelle_config_writes_total{op=<row's>, result="ok"}`.
    async fn writes(&self, row: &Row) -> TestResult<f64> {
        let scraped = scrape(&self.s, "/metrics").await?;
        Ok(scraped.value(WRITES, &[("op", row.op), ("result", "ok")]))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_kind_counts_audits_and_emits_its_event() -> TestResult {
    let s = TestServer::start_with(secure).await?;
    let admin_token = s.admin_token().await?;
    let bob_token = s
        .user_granted(&admin_token, "bob", "public:*:*", "rwa")
        .await?;
    let w = World {
        admin: Api::with_token(s.addr, &admin_token)?,
        bob: Api::with_token(s.addr, &bob_token)?,
        admin_token,
        s,
    };

    // Every row's preparation, before the webhook exists.
    let mut prepared = Vec::with_capacity(ROWS.len());
    for row in ROWS {
        let p = w
            .prepare(row)
            .await
            .map_err(|e| format!("{}: preparing: {e}", row.name))?;
        prepared.push(p);
    }

    // One webhook of the public namespace matching every key and kind; once its creation
    // is in the audit trail, everything prepared is too (one appender, in order).
    let mut rx = Receiver::bind("127.0.0.1:0".parse()?).await?;
    let url = rx.url();
    data(
        ok(
            World::request(&w.admin, Method::POST, "/nacos/nacelle/v1/webhooks")
                .form(&[("url", url.as_str()), ("secret", SECRET)]),
        )
        .await?,
    )?;
    audit_until(
        &w.admin,
        &w.admin_token,
        &[("action", "webhook-change")],
        |e| !e.is_empty(),
    )
    .await?;

    let mut failures = Vec::new();
    for (row, prepared) in ROWS.iter().zip(&prepared) {
        let target = World::target(row, prepared);
        let audited_before = w.audited(row, &target).await?;
        let writes_before = w.writes(row).await?;
        if let Err(e) = w.perform(row, prepared).await {
            failures.push(format!("{}: the write failed: {e}", row.name));
            continue;
        }

        // (2) Its audit entry.
        let what = format!("{} audit entry of {target}", row.audit);
        let audited = wait_for(&what, SOON, || async {
            let n = w.audited(row, &target).await.map_err(anyhow_of)?;
            Ok((n > audited_before).then_some(n))
        })
        .await;
        if let Err(e) = audited {
            failures.push(format!("{}: no audit entry: {e:#}", row.name));
        }

        // (3) Its webhook event.
        let what = format!("{} of {}/{}", row.event, row.key.0, row.key.1);
        match rx
            .event_matching(&what, |e| e["kind"] == row.event && concerns(e, row.key))
            .await
        {
            Ok(e) => {
                if let Err(wrong) = event_fields(row, &e) {
                    failures.push(format!("{}: webhook event {e}: {wrong}", row.name));
                }
            }
            Err(e) => failures.push(format!("{}: no webhook event: {e}", row.name)),
        }

        // (1) The write counted under its op.
        let what = format!("{WRITES}{{op=\"{}\",result=\"ok\"}} to increase", row.op);
        let counted = wait_for(&what, SOON, || async {
            let now = w.writes(row).await.map_err(anyhow_of)?;
            Ok((now > writes_before).then_some(now))
        })
        .await;
        if let Err(e) = counted {
            failures.push(format!("{}: not counted: {e:#}", row.name));
        }
    }
    no_failures(&failures)
}

/// Whether event `e` is about `key` (a key's event, or a change request holding it).
fn concerns(e: &Value, (group, data_id): (&str, &str)) -> bool {
    let on_key = |v: &Value| v["group"] == group && v["dataId"] == data_id;
    on_key(e)
        || e["change"]["keys"]
            .as_array()
            .is_some_and(|keys| keys.iter().any(on_key))
}

/// Checks the fields of `row`'s event `e` as tests/webhooks.rs does: its id, the
/// namespace, and the md5 the key (or the change request's key) holds after.
fn event_fields(row: &Row, e: &Value) -> Result<(), String> {
    if e["id"].as_str().is_none_or(str::is_empty) {
        return Err("no event id".into());
    }
    if e["namespaceId"] != "public" {
        return Err(format!("namespaceId {}", e["namespaceId"]));
    }
    let carried = match row.write {
        Write::ChangePublish => &e["change"]["keys"][0]["md5"],
        _ => &e["md5"],
    };
    let wanted = match row.write.md5_after() {
        Md5::Of(content) => Value::from(md5(content)),
        Md5::Null => Value::Null,
    };
    if *carried != wanted {
        return Err(format!("md5 {carried}, not {wanted}"));
    }
    Ok(())
}

/// Sends `req`: its reply, or an error naming its status and body unless 200.
async fn ok(req: RequestBuilder) -> TestResult<Reply> {
    let r = Reply::read(req.send().await?).await?;
    expect(r.status == 200, || format!("{} {}", r.status, r.body))?;
    Ok(r)
}

/// The body as JSON.
fn json_of(r: Reply) -> TestResult<Value> {
    Ok(r.json()?)
}

/// The `data` of a `{code: 0, data}` envelope.
fn data(r: Reply) -> TestResult<Value> {
    let v = r.json()?;
    expect(v["code"] == 0, || v.to_string())?;
    Ok(v["data"].clone())
}

/// `Ok` when `holds`, else an error saying `why()`.
fn expect(holds: bool, why: impl FnOnce() -> String) -> TestResult {
    if holds {
        Ok(())
    } else {
        Err(why().into())
    }
}

/// A test error as the testkit's waits take it.
fn anyhow_of(e: nacelle_testkit::BoxError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

// ---- refused writes -------------------------------------------------------------------

/// The group under a review policy in the refused-writes table.
const LOCKED: &str = "LOCKED";

/// One write kind refused by a review policy, and the audit entry it must leave.
struct Refused {
    name: &'static str,
    write: Write,
    /// The key in [`LOCKED`] it targets.
    data_id: &'static str,
    /// The `action` of its audit entry.
    audit: &'static str,
}

#[rustfmt::skip]
const REFUSED: &[Refused] = &[
    Refused { name: "formal publish", write: Write::Formal,      data_id: "formal.yaml",   audit: "publish" },
    Refused { name: "gray publish",   write: Write::Beta,        data_id: "beta.yaml",     audit: "gray-publish" },
    Refused { name: "gray stop",      write: Write::StopBeta,    data_id: "stop.yaml",     audit: "gray-stop" },
    Refused { name: "gray promote",   write: Write::PromoteBeta, data_id: "promote.yaml",  audit: "promote" },
    Refused { name: "import",         write: Write::Import,      data_id: "import.yaml",   audit: "import" },
    Refused { name: "clone",          write: Write::Clone,       data_id: "clone.yaml",    audit: "clone" },
    Refused { name: "rollback",       write: Write::Rollback,    data_id: "rollback.yaml", audit: "publish" },
    Refused { name: "rollout start",  write: Write::RolloutStep, data_id: "rollout.yaml",  audit: "rollout-start" },
    Refused { name: "metadata",       write: Write::Metadata,    data_id: "metadata.yaml", audit: "metadata" },
    Refused { name: "remove",         write: Write::Remove,      data_id: "remove.yaml",   audit: "remove" },
];

/// Every write kind refused by a review policy — by a user allowed to write the key, through
/// the endpoint a user would use — leaves the config as it was (formal content, its gray,
/// its description) and exactly one audit entry of its action on the key, refused, with the
/// policy in the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_write_kind_leaves_the_content_and_one_audit_entry() -> TestResult {
    let s = TestServer::start_with(secure).await?;
    let admin_token = s.admin_token().await?;
    let writer_token = s
        .user_granted(&admin_token, "writer", "public:*:*", "rw")
        .await?;
    let admin = Api::with_token(s.addr, &admin_token)?;
    let writer = Api::with_token(s.addr, &writer_token)?;
    let w = World {
        admin: admin.clone(),
        bob: writer.clone(),
        admin_token: admin_token.clone(),
        s,
    };

    // Before the policy: every key's formal config (and the beta a stop or promote needs,
    // the versions a rollback goes back to, the config a clone copies).
    let mut prepared = Vec::new();
    for row in REFUSED {
        let key = (LOCKED, row.data_id);
        let p = match row.write {
            Write::Formal | Write::Import => String::new(),
            Write::Clone => {
                w.publish((G, CLONE_SOURCE), WRITTEN, &[], &[]).await?;
                let record = admin.record("", G, CLONE_SOURCE).await?;
                record["id"].as_str().ok_or("no config id")?.to_string()
            }
            _ => {
                w.prepare(&Row {
                    name: row.name,
                    write: row.write,
                    key,
                    op: "",
                    audit: "",
                    event: "",
                })
                .await?
            }
        };
        if matches!(row.write, Write::Formal | Write::Import | Write::Clone) {
            w.publish(key, BEFORE, &[], &[]).await?;
        }
        prepared.push(p);
    }
    let policy = [
        ("namespaceId", ""),
        ("groupPattern", LOCKED),
        ("requiredApprovals", "1"),
    ];
    data(
        ok(World::request(&admin, Method::POST, "/nacos/nacelle/v1/review-policies").form(&policy))
            .await?,
    )?;

    let mut failures = Vec::new();
    for (row, prepared) in REFUSED.iter().zip(&prepared) {
        let target = format!("public/{LOCKED}/{}", row.data_id);
        let refused_entries = |entries: &[Value]| {
            entries
                .iter()
                .filter(|e| {
                    e["target"] == target.as_str()
                        && e["outcome"]
                            .as_str()
                            .is_some_and(|o| o.starts_with("refused"))
                })
                .count()
        };
        let params = [("action", row.audit), ("key", target.as_str())];
        let before = refused_entries(&audit_entries(&admin, &admin_token, &params).await?);
        let held = admin.record("", LOCKED, row.data_id).await?;
        let beta_before = beta_of(&admin, row.data_id).await?;
        if let Err(e) = refused_write(&writer, row, prepared).await {
            failures.push(format!("{}: {e}", row.name));
            continue;
        }
        // Exactly one refused entry more, naming the policy.
        let entries = audit_until(&admin, &admin_token, &params, |e| {
            refused_entries(e) > before
        })
        .await;
        match entries {
            Ok(entries) => {
                if refused_entries(&entries) != before + 1 {
                    failures.push(format!("{}: not one refused entry: {entries:?}", row.name));
                }
                let reason = entries
                    .iter()
                    .find(|e| e["target"] == target.as_str())
                    .map(|e| e["outcome"].to_string())
                    .unwrap_or_default();
                if !reason.contains("review") {
                    failures.push(format!(
                        "{}: the reason names no policy: {reason}",
                        row.name
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: no refused audit entry: {e}", row.name)),
        }
        // The config as it was.
        let now = admin.record("", LOCKED, row.data_id).await?;
        for field in ["content", "md5", "desc", "configTags"] {
            if now[field] != held[field] {
                failures.push(format!(
                    "{}: {field} changed: {} → {}",
                    row.name, held[field], now[field]
                ));
            }
        }
        let beta_now = beta_of(&admin, row.data_id).await?;
        if beta_now != beta_before {
            failures.push(format!(
                "{}: the beta changed: {beta_before} → {beta_now}",
                row.name
            ));
        }
    }
    no_failures(&failures)
}

/// `row`'s write by `api` on its [`LOCKED`] key: `Ok` when it was refused (not 2xx, or a
/// batch that wrote nothing), an error when it went through.
async fn refused_write(api: &Api, row: &Refused, prepared: &str) -> TestResult {
    let (group, data_id) = (LOCKED, row.data_id);
    let key = [("group", group), ("dataId", data_id)];
    let req = match row.write {
        Write::Formal | Write::Beta => {
            let mut req = World::request(api, Method::POST, CONFIGS).form(&[
                ("group", group),
                ("dataId", data_id),
                ("content", WRITTEN),
            ]);
            if matches!(row.write, Write::Beta) {
                req = req.header("betaIps", "127.0.0.2");
            }
            req
        }
        Write::StopBeta => World::request(api, Method::DELETE, CONFIGS)
            .query(&key)
            .query(&[("beta", "true")]),
        Write::PromoteBeta => World::request(api, Method::POST, "/nacos/v2/cs/config/gray/promote")
            .form(&[("group", group), ("dataId", data_id), ("grayName", "beta")]),
        Write::Import => {
            let zip = zip_of(&[(&format!("{group}/{data_id}"), WRITTEN.as_bytes())])?;
            let (ct, body) = multipart(Some(&zip), &[("namespace", ""), ("policy", "OVERWRITE")]);
            World::request(api, Method::POST, "/nacos/v1/cs/configs?import=true")
                .header("Content-Type", ct)
                .body(body)
        }
        Write::Clone => {
            let id: i64 = prepared.parse()?;
            let beans = json!([{"cfgId": id, "dataId": data_id, "group": group}]);
            World::request(api, Method::POST, CONFIGS)
                .query(&[("clone", "true"), ("tenant", ""), ("policy", "OVERWRITE")])
                .json(&beans)
        }
        Write::Rollback => World::request(api, Method::POST, "/nacos/console/api/history/rollback")
            .form(&[
                ("namespace", ""),
                ("group", group),
                ("dataId", data_id),
                ("nid", prepared),
            ]),
        Write::RolloutStep => {
            let body = json!({"group": group, "dataId": data_id, "content": WRITTEN,
                              "steps": [10, 100], "bakeMs": 600_000});
            World::request(api, Method::POST, "/nacos/nacelle/v1/rollouts").json(&body)
        }
        Write::Metadata => World::request(api, Method::PUT, "/nacos/v3/admin/cs/config/metadata")
            .form(&[
                ("groupName", group),
                ("dataId", data_id),
                ("desc", "changed"),
                ("configTags", "x"),
            ]),
        Write::Remove => World::request(api, Method::DELETE, CONFIGS).query(&key),
        Write::Tag | Write::ChangePublish => return Err("not a refused row".into()),
    };
    let r = Reply::read(req.send().await?).await?;
    expect(!(200..300).contains(&r.status), || {
        format!("went through: {} {}", r.status, r.body)
    })
}

/// The beta of `data_id` in [`LOCKED`] as `GET …/configs?beta=true` answers it.
async fn beta_of(api: &Api, data_id: &str) -> TestResult<String> {
    let r = World::request(api, Method::GET, CONFIGS)
        .query(&[("group", LOCKED), ("dataId", data_id), ("beta", "true")])
        .send()
        .await?;
    Ok(Reply::read(r).await?.body)
}

/// `Ok` when no row failed, else every failure, one a line.
fn no_failures(failures: &[String]) -> TestResult {
    expect(failures.is_empty(), || {
        format!("{} failure(s):\n{}", failures.len(), failures.join("\n"))
    })
}
