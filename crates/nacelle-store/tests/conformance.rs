//! The storage conformance suite: every test body is written once against
//! `Arc<dyn ConfigStore>` and run on each backend (SQLite file, MariaDB, PostgreSQL), each
//! run in a database of its own.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use bytes::Bytes;
use nacelle_api::audit::{Break, EntryFields, Verifier, GENESIS_HASH};
use nacelle_core::audit::{AuditEvent, AuditFilter};
use nacelle_core::store::RemoveOutcome;
use nacelle_core::{
    md5_hex, ConfigKey, ConfigMeta, ConfigStore, ConfigType, GraySpec, HistoryEntry, HistoryLog,
    HistoryRetention, Namespace, OpSource, OpType, PageRequest, PublishRecord, StoreError,
    StoredGray,
};
use nacelle_core::{BatchItem, BatchOutcome, SamePolicy};
use nacelle_store::StoreOptions;
use nacelle_testkit::{per_backend, run_on, Backend, Proxy, ProxyMode, TestDb};

type TestResult = anyhow::Result<()>;

/// Runs `body` on a fresh store of `backend`; the database is dropped afterwards.
async fn with_store<F, Fut>(backend: Backend, body: F) -> TestResult
where
    F: FnOnce(Arc<dyn ConfigStore>, Backend) -> Fut,
    Fut: Future<Output = TestResult>,
{
    let db = TestDb::create(backend).await?;
    let store = nacelle_store::open(&db.url)
        .await
        .with_context(|| format!("opening {backend:?} store"))?;
    let result = body(store, backend).await;
    drop(db);
    result
}

// Each body once per backend: `NAME::sqlite`, `NAME::mariadb`, `NAME::postgres`.
per_backend!(
    with with_store:
    publish_update_remove_with_history,
    compare_and_set,
    concurrent_publishes_of_one_key_lose_nothing,
    concurrent_compare_and_set_has_one_winner,
    content_round_trips,
    nul_characters,
    tag_relations,
    metadata_in_place,
    history_paging_and_previous,
    namespaces,
    identities,
    config_schemas,
    change_log,
    load_all_and_get,
    ping_and_backend_name,
    purge_by_age_keeps_the_newest_row_of_each_key,
    purge_by_count_keeps_the_newest_n_per_key,
    purge_batches_are_bounded,
    gray_publish_update_remove_promote,
    concurrent_gray_compare_and_set_has_one_winner,
    purge_of_the_gray_log_keeps_the_newest_row_of_each_variant;
    flavor = "multi_thread", worker_threads = 4
);

/// A day in 2023, with milliseconds, so precision differences show.
const T0: i64 = 1_700_000_000_123;

fn key(tenant: &str, group: &str, data_id: &str) -> ConfigKey {
    ConfigKey::from_trusted(tenant, group, data_id)
}

fn record(key: &ConfigKey, content: &str, now_ms: i64) -> PublishRecord {
    PublishRecord {
        key: key.clone(),
        content: Bytes::from(content.to_string()),
        md5: md5_hex(content.as_bytes()),
        config_type: ConfigType::Yaml,
        meta: ConfigMeta::default(),
        source: OpSource {
            src_user: "alice".into(),
            src_ip: "10.0.0.1".into(),
            ..OpSource::default()
        },
        cas_md5: None,
        now_ms,
        gray: None,
    }
}

fn page(page_no: u64, page_size: u64) -> PageRequest {
    PageRequest { page_no, page_size }
}

async fn entry(store: &Arc<dyn ConfigStore>, nid: i64) -> anyhow::Result<HistoryEntry> {
    store
        .history_entry(nid)
        .await?
        .with_context(|| format!("history entry {nid} missing"))
}

async fn publish_update_remove_with_history(store: Arc<dyn ConfigStore>, b: Backend) -> TestResult {
    let k = key("", "DEFAULT_GROUP", "app.yaml");
    let mut r1 = record(&k, "a: 1", T0);
    r1.meta = ConfigMeta {
        app_name: "shop".into(),
        desc: "the shop".into(),
        r#use: "prod".into(),
        effect: "all".into(),
        schema: "{}".into(),
        config_tags: String::new(),
        encrypted_data_key: "edk1".into(),
    };
    let p1 = store.publish(&r1).await?;
    ensure!(p1.revision > 0, "revision {}", p1.revision);
    assert_eq!(p1.created_ms, b.stored_ms(T0));
    assert_eq!(p1.modified_ms, b.stored_ms(T0));
    assert_eq!(
        store.get(&k).await?.as_ref(),
        Some(&p1),
        "publish returns what get reads"
    );

    let h1 = entry(&store, p1.revision).await?;
    assert_eq!(h1.op_type, OpType::Insert);
    assert_eq!(h1.config_id, 0, "Nacos records inserts with config id 0");
    assert_eq!(h1.content, "a: 1");
    assert_eq!(h1.md5, md5_hex(b"a: 1"));
    assert_eq!(h1.app_name, "shop");
    assert_eq!(h1.encrypted_data_key, "edk1");
    assert_eq!(h1.source.src_user, "alice");
    assert_eq!(h1.modified_ms, b.stored_ms(T0));
    assert_eq!(h1.key, k);

    let mut r2 = record(&k, "a: 2", T0 + 5_000);
    r2.source.src_user = "bob".into();
    let p2 = store.publish(&r2).await?;
    assert_eq!(p2.id, p1.id);
    ensure!(p2.revision > p1.revision);
    assert_eq!(p2.created_ms, b.stored_ms(T0), "creation time is kept");
    assert_eq!(p2.modified_ms, b.stored_ms(T0 + 5_000));
    assert_eq!(store.get(&k).await?.as_ref(), Some(&p2));

    // An update's history row holds the version it replaced, written by the new source.
    let h2 = entry(&store, p2.revision).await?;
    assert_eq!(h2.op_type, OpType::Update);
    assert_eq!(h2.config_id, p1.id);
    assert_eq!(h2.content, "a: 1");
    assert_eq!(h2.md5, md5_hex(b"a: 1"));
    assert_eq!(h2.app_name, "shop");
    assert_eq!(h2.encrypted_data_key, "edk1");
    assert_eq!(h2.source.src_user, "bob");
    assert_eq!(h2.modified_ms, b.stored_ms(T0 + 5_000));
    assert_eq!(store.history_previous(p1.id).await?, Some(h2.clone()));

    let gone = OpSource {
        src_user: "carol".into(),
        src_ip: "10.0.0.3".into(),
        ..OpSource::default()
    };
    let RemoveOutcome::Removed { revision: r3 } = store.remove(&k, &gone, T0 + 9_000).await? else {
        anyhow::bail!("remove of a present key reported absent");
    };
    ensure!(r3 > p2.revision);
    assert_eq!(store.get(&k).await?, None);
    let h3 = entry(&store, r3).await?;
    assert_eq!(h3.op_type, OpType::Delete);
    assert_eq!(h3.config_id, p1.id);
    assert_eq!(h3.content, "a: 2");
    assert_eq!(h3.md5, md5_hex(b"a: 2"));
    assert_eq!(h3.source, gone);
    assert_eq!(
        store.remove(&k, &gone, T0 + 9_500).await?,
        RemoveOutcome::Absent
    );

    let hist = store.history_page(&k, page(1, 10)).await?;
    assert_eq!(hist.total_count, 3);
    let nids: Vec<i64> = hist.items.iter().map(|h| h.nid).collect();
    assert_eq!(nids, vec![r3, p2.revision, p1.revision]);
    let ops: Vec<OpType> = hist.items.iter().map(|h| h.op_type).collect();
    assert_eq!(ops, vec![OpType::Delete, OpType::Update, OpType::Insert]);
    assert!(store.load_all().await?.is_empty());

    // Publishing again after a delete is a fresh insert with a newer revision.
    let p4 = store.publish(&record(&k, "a: 4", T0 + 10_000)).await?;
    ensure!(p4.revision > r3);
    assert_eq!(entry(&store, p4.revision).await?.op_type, OpType::Insert);
    assert_eq!(store.get(&k).await?, Some(p4));
    Ok(())
}

async fn compare_and_set(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let k = key("", "G", "cas");
    let mut r = record(&k, "v1", T0);

    // Absent: only "" matches.
    r.cas_md5 = Some(md5_hex(b"anything"));
    assert!(matches!(
        store.publish(&r).await,
        Err(StoreError::CasMismatch)
    ));
    assert_eq!(store.get(&k).await?, None);
    assert_eq!(
        store.max_history_nid().await?,
        0,
        "a failed CAS writes nothing"
    );
    r.cas_md5 = Some(String::new());
    let v1 = store.publish(&r).await?;

    // Present: "" and a wrong md5 fail and write nothing.
    let before = store.max_history_nid().await?;
    for wrong in ["", "0123456789abcdef0123456789abcdef"] {
        let mut r2 = record(&k, "v2", T0 + 1_000);
        r2.cas_md5 = Some(wrong.to_string());
        assert!(
            matches!(store.publish(&r2).await, Err(StoreError::CasMismatch)),
            "cas `{wrong}` on a present key"
        );
    }
    assert_eq!(store.max_history_nid().await?, before);
    assert_eq!(store.get(&k).await?, Some(v1.clone()));

    // The current md5 matches.
    let mut r3 = record(&k, "v3", T0 + 2_000);
    r3.cas_md5 = Some(v1.md5.clone());
    let v3 = store.publish(&r3).await?;
    assert_eq!(&store.get(&k).await?.context("missing")?.content[..], b"v3");
    ensure!(v3.revision > v1.revision);
    Ok(())
}

async fn concurrent_publishes_of_one_key_lose_nothing(
    store: Arc<dyn ConfigStore>,
    _b: Backend,
) -> TestResult {
    const TASKS: usize = 8;
    const EACH: usize = 5;
    let k = key("", "G", "contended");
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (store, k) = (store.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in 0..EACH {
                let content = format!("task {t} write {i}");
                let stored = store
                    .publish(&record(&k, &content, T0 + (t * EACH + i) as i64))
                    .await?;
                out.push((stored.revision, content));
            }
            Ok::<_, StoreError>(out)
        }));
    }
    let mut writes = Vec::new();
    for t in tasks {
        writes.extend(t.await??);
    }
    writes.sort();
    assert_eq!(writes.len(), TASKS * EACH);
    let mut revisions: Vec<i64> = writes.iter().map(|w| w.0).collect();
    revisions.dedup();
    assert_eq!(
        revisions.len(),
        writes.len(),
        "every write has its own revision"
    );

    let last = writes.last().context("no writes")?;
    let current = store.get(&k).await?.context("missing")?;
    assert_eq!(current.revision, last.0);
    assert_eq!(String::from_utf8_lossy(&current.content), last.1);

    // The history is one chain: each write replaced exactly the previous one.
    let first = entry(&store, writes[0].0).await?;
    assert_eq!(first.op_type, OpType::Insert);
    assert_eq!(first.content, writes[0].1);
    for pair in writes.windows(2) {
        let h = entry(&store, pair[1].0).await?;
        assert_eq!(h.op_type, OpType::Update);
        assert_eq!(
            h.content, pair[0].1,
            "write {} replaced a lost version",
            pair[1].0
        );
    }
    let hist = store.history_page(&k, page(1, 100)).await?;
    assert_eq!(hist.total_count as usize, TASKS * EACH);
    assert_eq!(store.load_all().await?.len(), 1, "no duplicate rows");
    Ok(())
}

async fn concurrent_compare_and_set_has_one_winner(
    store: Arc<dyn ConfigStore>,
    _b: Backend,
) -> TestResult {
    const TASKS: usize = 50;
    let k = key("", "G", "race");
    // Round 0 races to create the key (CAS ""); round 1 races to replace it.
    for round in 0..2 {
        let expected = match store.get(&k).await? {
            Some(c) => c.md5,
            None => String::new(),
        };
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let (store, k, expected) = (store.clone(), k.clone(), expected.clone());
            tasks.push(tokio::spawn(async move {
                let content = format!("round {round} task {t}");
                let mut r = record(&k, &content, T0 + t as i64);
                r.cas_md5 = Some(expected);
                (content, store.publish(&r).await)
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            match t.await? {
                (content, Ok(_)) => winners.push(content),
                (_, Err(StoreError::CasMismatch)) => {}
                (_, Err(e)) => anyhow::bail!("a racing CAS failed with {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let current = store.get(&k).await?.context("missing")?;
        assert_eq!(String::from_utf8_lossy(&current.content), winners[0]);
    }
    assert_eq!(store.history_page(&k, page(1, 10)).await?.total_count, 2);
    Ok(())
}

/// About 1 MiB mixing ASCII, CJK, 4-byte emoji and CRLF line ends.
fn big_content() -> String {
    let line = "key.αβγ = 値 😀🚀 \u{1F9D1}\u{200D}\u{1F4BB} end\r\n";
    let mut s = String::with_capacity(1 << 20);
    let mut i = 0u64;
    while s.len() < (1 << 20) {
        s.push_str(&format!("{i:08} {line}"));
        i += 1;
    }
    s
}

async fn content_round_trips(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let contents = [
        "中文 ключ ελληνικά 😀🚀 \u{1F9D1}\u{200D}\u{1F4BB} 𝄞".to_string(),
        "line1\r\nline2\r\n\r\n".to_string(),
        "\ttabs\tand trailing spaces   \n".to_string(),
        "'quotes' \"double\" `back` \\ backslash % _ ;".to_string(),
        big_content(),
    ];
    let k = key("", "G", "content");
    let mut previous: Option<String> = None;
    for (i, c) in contents.iter().enumerate() {
        let stored = store.publish(&record(&k, c, T0 + i as i64 * 1000)).await?;
        let got = store.get(&k).await?.context("missing")?;
        assert_eq!(&got.content[..], c.as_bytes(), "content {i}");
        assert_eq!(got.md5, md5_hex(c.as_bytes()));
        assert_eq!(got, stored);
        if let Some(prev) = &previous {
            let h = entry(&store, stored.revision).await?;
            assert_eq!(&h.content, prev, "history keeps content {} intact", i - 1);
            assert_eq!(h.md5, md5_hex(prev.as_bytes()));
        }
        previous = Some(c.clone());
    }
    // Unicode in keys too.
    let uk = key("", "组", "数据.😀");
    store.publish(&record(&uk, "x", T0)).await?;
    assert_eq!(store.get(&uk).await?.context("unicode key")?.key, uk);
    let all = store.load_all().await?;
    assert_eq!(all.len(), 2);
    let big = all.iter().find(|c| c.key == k).context("big missing")?;
    assert_eq!(big.content.len(), contents[4].len());
    Ok(())
}

/// A NUL character round-trips on SQLite and MySQL; PostgreSQL's text cannot hold one, so
/// its backend refuses the value as bad input (`Rejected`, naming the field), never as an
/// outage, and writes nothing.
async fn nul_characters(store: Arc<dyn ConfigStore>, b: Backend) -> TestResult {
    let k = key("", "G", "nul");
    let mut with_nul = record(&k, "a\0b", T0);
    let in_desc = {
        let mut r = record(&k, "v", T0);
        r.meta.desc = "d\0".into();
        r
    };
    let ns = Namespace {
        id: nacelle_core::NamespaceId::from_trusted("nul"),
        name: "n\0".into(),
        desc: String::new(),
    };
    if b == Backend::Postgres {
        for (r, field) in [(&with_nul, "content"), (&in_desc, "desc")] {
            match store.publish(r).await {
                Err(StoreError::Rejected(m)) => ensure!(m.contains(field), "{m}"),
                other => anyhow::bail!("{field} with NUL: {other:?}"),
            }
        }
        let removed = store
            .remove(
                &k,
                &OpSource {
                    src_user: "\0".into(),
                    src_ip: String::new(),
                    ..OpSource::default()
                },
                T0,
            )
            .await;
        ensure!(
            matches!(removed, Err(StoreError::Rejected(_))),
            "{removed:?}"
        );
        let created = store.create_namespace(&ns, T0).await;
        ensure!(
            matches!(created, Err(StoreError::Rejected(_))),
            "{created:?}"
        );
        ensure!(store.get(&k).await?.is_none());
        ensure!(store.max_history_nid().await? == 0);
        return Ok(());
    }
    with_nul.meta.desc = "d\0".into();
    store.publish(&with_nul).await?;
    let got = store.get(&k).await?.context("missing")?;
    assert_eq!(&got.content[..], b"a\0b");
    assert_eq!(got.meta.desc, "d\0");
    store.create_namespace(&ns, T0).await?;
    assert_eq!(store.list_namespaces().await?, vec![ns]);
    Ok(())
}

async fn tag_relations(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let k = key("", "G", "tagged");
    let mut r = record(&k, "x", T0);
    r.meta.config_tags = "a, b,a,,".into();
    let stored = store.publish(&r).await?;
    assert_eq!(stored.meta.config_tags, "a,b");
    assert_eq!(
        store.get(&k).await?.context("missing")?.meta.config_tags,
        "a,b"
    );

    r.meta.config_tags = "c".into();
    r.now_ms += 1000;
    store.publish(&r).await?;
    assert_eq!(
        store.get(&k).await?.context("missing")?.meta.config_tags,
        "c"
    );

    r.meta.config_tags = "z,y,x".into();
    r.now_ms += 1000;
    store.publish(&r).await?;
    let all = store.load_all().await?;
    assert_eq!(all[0].meta.config_tags, "z,y,x", "tags keep their order");

    r.meta.config_tags = String::new();
    r.now_ms += 1000;
    store.publish(&r).await?;
    assert_eq!(
        store.get(&k).await?.context("missing")?.meta.config_tags,
        ""
    );

    // Removing a config removes its relations: a new config with the same key has none.
    r.meta.config_tags = "keep".into();
    r.now_ms += 1000;
    store.publish(&r).await?;
    store.remove(&k, &OpSource::default(), r.now_ms).await?;
    let fresh = store.publish(&record(&k, "y", r.now_ms + 1000)).await?;
    assert_eq!(fresh.meta.config_tags, "");
    assert_eq!(
        store.get(&k).await?.context("missing")?.meta.config_tags,
        ""
    );
    Ok(())
}

/// `update_metadata` changes description and tags in place: no history row, no change of
/// content, md5, times or revision; `None` leaves a field, `Some("")` clears it; an absent
/// config is `NotFound`.
async fn metadata_in_place(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let k = key("ns1", "G", "meta");
    let mut r = record(&k, "x", T0);
    r.meta.desc = "old".into();
    r.meta.config_tags = "a,b".into();
    store.publish(&r).await?;
    let before = store.get(&k).await?.context("missing")?;
    let nid = store.max_history_nid().await?;

    store
        .update_metadata(&k, Some("new description"), Some(" c, d,c,,"))
        .await?;
    let after = store.get(&k).await?.context("missing")?;
    assert_eq!(after.meta.desc, "new description");
    assert_eq!(after.meta.config_tags, "c,d");
    let unchanged = |c: &nacelle_core::StoredConfig| {
        (
            c.id,
            c.content.clone(),
            c.md5.clone(),
            c.created_ms,
            c.modified_ms,
            c.revision,
            c.source.clone(),
            c.meta.app_name.clone(),
        )
    };
    assert_eq!(unchanged(&after), unchanged(&before));
    assert_eq!(store.max_history_nid().await?, nid, "no history row");
    assert!(store.changes_since(nid, 10).await?.is_empty());
    assert_eq!(store.history_page(&k, page(1, 10)).await?.total_count, 1);

    // `None` leaves a field as it is; `Some("")` clears it.
    store.update_metadata(&k, None, Some("")).await?;
    let cleared = store.get(&k).await?.context("missing")?;
    assert_eq!(cleared.meta.desc, "new description");
    assert_eq!(cleared.meta.config_tags, "");
    store.update_metadata(&k, Some(""), None).await?;
    store.update_metadata(&k, None, Some("e")).await?;
    let last = store.get(&k).await?.context("missing")?;
    assert_eq!(
        (last.meta.desc.as_str(), last.meta.config_tags.as_str()),
        ("", "e")
    );
    let loaded = store.load_all().await?;
    let listed = loaded.iter().find(|c| c.key == k).context("not loaded")?;
    assert_eq!(listed.meta.config_tags, "e");

    // A later publish replaces the tags as always.
    r.meta.config_tags = "f".into();
    r.now_ms += 1000;
    assert_eq!(store.publish(&r).await?.meta.config_tags, "f");
    assert_eq!(
        store.get(&k).await?.context("missing")?.meta.config_tags,
        "f"
    );

    // Absent: not found, nothing written.
    let absent = store
        .update_metadata(&key("ns1", "G", "absent"), Some("d"), Some("t"))
        .await;
    assert!(matches!(absent, Err(StoreError::NotFound(_))), "{absent:?}");
    assert!(store.get(&key("ns1", "G", "absent")).await?.is_none());
    Ok(())
}

async fn history_paging_and_previous(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let k = key("", "G", "paged");
    let other = key("", "G", "other");
    let mut revisions = Vec::new();
    for i in 0..12 {
        let s = store
            .publish(&record(&k, &format!("v{i}"), T0 + i * 1000))
            .await?;
        revisions.push(s.revision);
        if i == 5 {
            store.publish(&record(&other, "o", T0)).await?;
        }
    }
    let p1 = store.history_page(&k, page(1, 5)).await?;
    assert_eq!(
        (p1.total_count, p1.page_number, p1.pages_available),
        (12, 1, 3)
    );
    let newest_first: Vec<i64> = revisions.iter().rev().copied().collect();
    assert_eq!(
        p1.items.iter().map(|h| h.nid).collect::<Vec<_>>(),
        newest_first[..5]
    );
    assert_eq!(
        p1.items[0].content, "v10",
        "the newest row keeps the replaced version"
    );
    let p2 = store.history_page(&k, page(2, 5)).await?;
    assert_eq!(
        p2.items.iter().map(|h| h.nid).collect::<Vec<_>>(),
        newest_first[5..10]
    );
    let p3 = store.history_page(&k, page(3, 5)).await?;
    assert_eq!(p3.items.len(), 2);
    assert_eq!(p3.items[1].op_type, OpType::Insert);
    assert_eq!(p3.items[1].content, "v0");
    assert!(store.history_page(&k, page(4, 5)).await?.items.is_empty());
    assert_eq!(
        store
            .history_page(&key("", "G", "never"), page(1, 5))
            .await?
            .total_count,
        0
    );

    let id = store.get(&k).await?.context("missing")?.id;
    let prev = store.history_previous(id).await?.context("no previous")?;
    assert_eq!(prev.nid, *revisions.last().context("none")?);
    assert_eq!(prev.content, "v10");
    assert_eq!(store.history_previous(-1).await?, None);
    assert_eq!(store.history_entry(i64::MAX).await?, None);
    Ok(())
}

async fn identities(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    use nacelle_core::auth::{IdentityWrite as W, PermissionRecord, RoleRecord, UserRecord};
    assert_eq!(store.load_identities().await?, Default::default());
    let hash = "$2a$10$EuWPZHzz32dJN7jexM34MOeYirDdFAZm2kuWj7VEOJhhZkDrxfvUu";
    for name in ["nacos", "dev"] {
        store
            .write_identity(&W::CreateUser {
                username: name.into(),
                hash: hash.into(),
            })
            .await?;
    }
    assert!(matches!(
        store
            .write_identity(&W::CreateUser {
                username: "dev".into(),
                hash: hash.into(),
            })
            .await,
        Err(StoreError::Conflict(_))
    ));
    let role = |role: &str, user: &str| RoleRecord {
        role: role.into(),
        username: user.into(),
    };
    let perm = |role: &str, resource: &str, action: &str| PermissionRecord {
        role: role.into(),
        resource: resource.into(),
        action: action.into(),
    };
    for (r, u) in [("ROLE_ADMIN", "nacos"), ("devs", "dev")] {
        store
            .write_identity(&W::AddRole {
                role: r.into(),
                username: u.into(),
            })
            .await?;
    }
    assert!(matches!(
        store
            .write_identity(&W::AddRole {
                role: "devs".into(),
                username: "dev".into(),
            })
            .await,
        Err(StoreError::Conflict(_))
    ));
    store
        .write_identity(&W::AddPermission(perm("devs", "dev:*:*", "rw")))
        .await?;
    store
        .write_identity(&W::AddPermission(perm(
            "devs",
            ":DEFAULT_GROUP:config/a",
            "r",
        )))
        .await?;
    assert!(matches!(
        store
            .write_identity(&W::AddPermission(perm("devs", "dev:*:*", "rw")))
            .await,
        Err(StoreError::Conflict(_))
    ));
    store
        .write_identity(&W::SetPassword {
            username: "dev".into(),
            hash: "$2a$10$other".into(),
            not_before: 1_700_000_000,
        })
        .await?;
    // Setting it again replaces the state row.
    store
        .write_identity(&W::SetPassword {
            username: "dev".into(),
            hash: "$2a$10$third".into(),
            not_before: 1_700_000_001,
        })
        .await?;
    assert!(matches!(
        store
            .write_identity(&W::SetPassword {
                username: "ghost".into(),
                hash: hash.into(),
                not_before: 1,
            })
            .await,
        Err(StoreError::NotFound(_))
    ));
    let got = store.load_identities().await?;
    assert_eq!(
        got.users,
        vec![
            UserRecord {
                username: "dev".into(),
                password: "$2a$10$third".into(),
                enabled: true,
            },
            UserRecord {
                username: "nacos".into(),
                password: hash.into(),
                enabled: true,
            },
        ]
    );
    assert_eq!(
        got.roles,
        vec![role("ROLE_ADMIN", "nacos"), role("devs", "dev")]
    );
    assert_eq!(
        got.permissions,
        vec![
            perm("devs", ":DEFAULT_GROUP:config/a", "r"),
            perm("devs", "dev:*:*", "rw"),
        ]
    );
    assert_eq!(got.tokens_not_before, vec![("dev".into(), 1_700_000_001)]);

    store
        .write_identity(&W::DeletePermission(perm("devs", "dev:*:*", "rw")))
        .await?;
    assert!(matches!(
        store
            .write_identity(&W::DeletePermission(perm("devs", "dev:*:*", "rw")))
            .await,
        Err(StoreError::NotFound(_))
    ));
    // Deleting a role for everyone drops its permissions too.
    store
        .write_identity(&W::DeleteRole {
            role: "devs".into(),
            username: None,
        })
        .await?;
    // Deleting a user drops its roles and state.
    store
        .write_identity(&W::DeleteUser {
            username: "dev".into(),
        })
        .await?;
    assert!(matches!(
        store
            .write_identity(&W::DeleteUser {
                username: "dev".into(),
            })
            .await,
        Err(StoreError::NotFound(_))
    ));
    let got = store.load_identities().await?;
    assert_eq!(got.users.len(), 1);
    assert_eq!(got.roles, vec![role("ROLE_ADMIN", "nacos")]);
    assert!(got.permissions.is_empty());
    assert!(got.tokens_not_before.is_empty());
    // The first administrator: user and role in one write; a taken name writes nothing.
    let admin = W::CreateAdmin {
        username: "root".into(),
        hash: hash.into(),
    };
    store.write_identity(&admin).await?;
    assert!(matches!(
        store.write_identity(&admin).await,
        Err(StoreError::Conflict(_))
    ));
    let got = store.load_identities().await?;
    assert_eq!(
        got.roles,
        vec![role("ROLE_ADMIN", "nacos"), role("ROLE_ADMIN", "root")]
    );
    Ok(())
}

async fn namespaces(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    assert!(store.list_namespaces().await?.is_empty());
    let dev = Namespace {
        id: nacelle_core::NamespaceId::from_trusted("dev"),
        name: "Development".into(),
        desc: "for developers".into(),
    };
    let test = Namespace {
        id: nacelle_core::NamespaceId::from_trusted("test-ns_1"),
        name: "测试".into(),
        desc: String::new(),
    };
    store.create_namespace(&dev, T0).await?;
    store.create_namespace(&test, T0).await?;
    assert_eq!(
        store.list_namespaces().await?,
        vec![dev.clone(), test.clone()]
    );
    assert!(matches!(
        store.create_namespace(&dev, T0).await,
        Err(StoreError::Conflict(_))
    ));

    let renamed = Namespace {
        name: "Dev 2".into(),
        desc: "changed".into(),
        ..dev.clone()
    };
    store.update_namespace(&renamed, T0 + 1).await?;
    // Updating to the same values is still an update of an existing namespace.
    store.update_namespace(&renamed, T0 + 2).await?;
    assert_eq!(store.list_namespaces().await?[0], renamed);
    let ghost = Namespace {
        id: nacelle_core::NamespaceId::from_trusted("ghost"),
        ..renamed.clone()
    };
    assert!(matches!(
        store.update_namespace(&ghost, T0).await,
        Err(StoreError::NotFound(_))
    ));

    assert!(
        store
            .delete_namespace(&nacelle_core::NamespaceId::from_trusted("dev"))
            .await?
    );
    assert!(
        !store
            .delete_namespace(&nacelle_core::NamespaceId::from_trusted("dev"))
            .await?
    );
    assert_eq!(store.list_namespaces().await?, vec![test]);
    Ok(())
}

/// JSON Schemas of config keys: set, replace, list, delete, unique per namespace and
/// patterns; the text (a large one, non-ASCII) round-trips as given.
async fn config_schemas(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    use nacelle_core::{NamespaceId, SchemaRecord};
    assert!(store.load_schemas().await?.is_empty());
    let limits = SchemaRecord {
        namespace: NamespaceId::from_trusted(""),
        group: "PAYMENTS".into(),
        data_id: "*.yaml".into(),
        schema: r#"{"type":"object","properties":{"max":{"maximum":1000}}}"#.into(),
        description: "payment limits".into(),
        src_user: "nacos".into(),
        modified_ms: T0,
    };
    let big = format!(
        r#"{{"description":"{}","type":"object","title":"名前"}}"#,
        "x".repeat(200_000)
    );
    let dev = SchemaRecord {
        namespace: NamespaceId::from_trusted("dev"),
        schema: big,
        description: String::new(),
        ..limits.clone()
    };
    store.put_schema(&limits).await?;
    store.put_schema(&dev).await?;
    assert_eq!(
        store.load_schemas().await?,
        vec![limits.clone(), dev.clone()]
    );
    // Same namespace and patterns: replaced, not added.
    let replaced = SchemaRecord {
        schema: r#"{"type":"object"}"#.into(),
        description: "changed".into(),
        src_user: "alice".into(),
        modified_ms: T0 + 5,
        ..limits.clone()
    };
    store.put_schema(&replaced).await?;
    assert_eq!(
        store.load_schemas().await?,
        vec![replaced.clone(), dev.clone()]
    );
    // Other patterns of the same namespace are another schema.
    let other = SchemaRecord {
        data_id: "*.json".into(),
        ..replaced.clone()
    };
    store.put_schema(&other).await?;
    assert_eq!(store.load_schemas().await?.len(), 3);
    assert!(
        store
            .delete_schema(&NamespaceId::from_trusted(""), "PAYMENTS", "*.yaml")
            .await?
    );
    assert!(
        !store
            .delete_schema(&NamespaceId::from_trusted(""), "PAYMENTS", "*.yaml")
            .await?
    );
    assert_eq!(store.load_schemas().await?, vec![other, dev]);
    Ok(())
}

async fn change_log(store: Arc<dyn ConfigStore>, b: Backend) -> TestResult {
    assert_eq!(store.max_history_nid().await?, 0);
    assert!(store.changes_since(0, 10).await?.is_empty());

    let a = key("", "G", "a");
    let bk = key("dev", "G", "b");
    let n1 = store.publish(&record(&a, "1", T0)).await?.revision;
    let n2 = store.publish(&record(&bk, "1", T0 + 1000)).await?.revision;
    let n3 = store.publish(&record(&a, "2", T0 + 2000)).await?.revision;
    let RemoveOutcome::Removed { revision: n4 } =
        store.remove(&bk, &OpSource::default(), T0 + 3000).await?
    else {
        anyhow::bail!("b was absent");
    };

    let all = store.changes_since(0, 100).await?;
    let seen: Vec<(i64, ConfigKey, OpType, i64)> = all
        .iter()
        .map(|c| (c.nid, c.key.clone(), c.op_type, c.modified_ms))
        .collect();
    assert_eq!(
        seen,
        vec![
            (n1, a.clone(), OpType::Insert, b.stored_ms(T0)),
            (n2, bk.clone(), OpType::Insert, b.stored_ms(T0 + 1000)),
            (n3, a.clone(), OpType::Update, b.stored_ms(T0 + 2000)),
            (n4, bk.clone(), OpType::Delete, b.stored_ms(T0 + 3000)),
        ]
    );
    assert_eq!(store.max_history_nid().await?, n4);
    let after_first = store.changes_since(n1, 100).await?;
    assert_eq!(
        after_first.iter().map(|c| c.nid).collect::<Vec<_>>(),
        vec![n2, n3, n4]
    );
    let limited = store.changes_since(0, 2).await?;
    assert_eq!(
        limited.iter().map(|c| c.nid).collect::<Vec<_>>(),
        vec![n1, n2]
    );
    assert!(store.changes_since(n4, 10).await?.is_empty());
    Ok(())
}

async fn load_all_and_get(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let keys = [
        key("", "G", "d1"),
        key("", "G", "D1"),
        key("dev", "G", "d1"),
        key("", "G2", "d1"),
    ];
    let mut stored = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let mut r = record(k, &format!("content {i}"), T0 + i as i64 * 1000);
        r.config_type = [
            ConfigType::Properties,
            ConfigType::Json,
            ConfigType::Text,
            ConfigType::Xml,
        ][i];
        r.meta = ConfigMeta {
            app_name: format!("app{i}"),
            desc: format!("desc {i}"),
            r#use: format!("use{i}"),
            effect: format!("effect{i}"),
            schema: format!("schema {i}"),
            config_tags: format!("t{i},shared"),
            encrypted_data_key: format!("edk{i}"),
        };
        r.source = OpSource {
            src_user: format!("user{i}"),
            src_ip: format!("10.0.0.{i}"),
            ..OpSource::default()
        };
        stored.push(store.publish(&r).await?);
    }
    let mut all = store.load_all().await?;
    all.sort_by_key(|c| c.id);
    assert_eq!(all, stored, "load_all returns exactly what was published");
    for s in &stored {
        assert_eq!(store.get(&s.key).await?.as_ref(), Some(s));
    }
    assert_eq!(store.get(&key("", "G", "d2")).await?, None);
    assert_eq!(store.get(&key("other", "G", "d1")).await?, None);
    Ok(())
}

async fn ping_and_backend_name(store: Arc<dyn ConfigStore>, b: Backend) -> TestResult {
    store.ping().await?;
    let expected = match b {
        Backend::Sqlite => "sqlite",
        Backend::MariaDb => "mysql",
        Backend::Postgres => "postgres",
    };
    assert_eq!(store.backend(), expected);
    Ok(())
}

// ------------------------------------------------------------------ outages (networked)

/// Fails the test if `fut` has not finished within a minute: a hang detector, not a
/// timing assertion (measured times are printed).
async fn no_hang<T>(what: &str, fut: impl Future<Output = T>) -> anyhow::Result<T> {
    let start = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .with_context(|| format!("{what} hung"))?;
    println!("{what}: {} ms", start.elapsed().as_millis());
    Ok(out)
}

/// Writes fail fast with `Unavailable` while the database is down or unreachable, reads
/// of the store fail the same way, and the pool recovers on its own afterwards.
async fn outage(backend: Backend) -> TestResult {
    let db = TestDb::create(backend).await?;
    // Create the schema directly, then go through a proxy we can cut.
    drop(nacelle_store::open(&db.url).await?);
    let proxy = Proxy::start(db.server_addr()?).await?;
    let options = StoreOptions {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(1),
        op_timeout: Duration::from_secs(3),
    };
    let store = nacelle_store::open_with(&db.url_via(proxy.addr)?, &options).await?;
    let k = key("", "G", "outage");
    let before = store.publish(&record(&k, "before", T0)).await?;

    for mode in [ProxyMode::Refuse, ProxyMode::Blackhole] {
        proxy.set(mode);
        let write = no_hang(
            &format!("{backend:?} publish while {mode:?}"),
            store.publish(&record(&k, "during", T0 + 1000)),
        )
        .await?;
        assert!(
            matches!(write, Err(StoreError::Unavailable(_))),
            "{mode:?}: {write:?}"
        );
        let removed = no_hang(
            &format!("{backend:?} remove while {mode:?}"),
            store.remove(&k, &OpSource::default(), T0 + 1000),
        )
        .await?;
        assert!(matches!(removed, Err(StoreError::Unavailable(_))));
        let ping = no_hang(&format!("{backend:?} ping while {mode:?}"), store.ping()).await?;
        assert!(ping.is_err());

        proxy.set(ProxyMode::Up);
        let mut recovered = false;
        for _ in 0..40 {
            if store.ping().await.is_ok() {
                recovered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        ensure!(recovered, "{backend:?}: no recovery after {mode:?}");
        // The failed writes left nothing behind.
        assert_eq!(store.get(&k).await?.as_ref(), Some(&before));
    }
    let after = store.publish(&record(&k, "after", T0 + 2000)).await?;
    ensure!(after.revision > before.revision);
    assert_eq!(store.get(&k).await?, Some(after));

    // Opening against a server that is not there fails quickly too.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?
    };
    let opened = no_hang(
        &format!("{backend:?} open with nothing listening"),
        nacelle_store::open_with(&db.url_via(closed)?, &options),
    )
    .await?;
    assert!(opened.is_err());
    drop(store);
    drop(proxy);
    drop(db);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_outage_fails_fast_and_recovers() -> nacelle_testkit::TestResult {
    run_on(Backend::MariaDb, outage).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_outage_fails_fast_and_recovers() -> nacelle_testkit::TestResult {
    run_on(Backend::Postgres, outage).await
}

// ------------------------------------------------------------------ schema creation

/// Nodes starting together on an empty database create the schema once, without errors.
async fn schema_created_once(backend: Backend) -> TestResult {
    let db = TestDb::create(backend).await?;
    let mut opens = Vec::new();
    for _ in 0..4 {
        let url = db.url.clone();
        opens.push(tokio::spawn(async move { nacelle_store::open(&url).await }));
    }
    let mut stores = Vec::new();
    for o in opens {
        stores.push(o.await??);
    }
    let k = key("", "G", "shared");
    let first = stores[0].publish(&record(&k, "x", T0)).await?;
    for s in &stores {
        assert_eq!(s.get(&k).await?.as_ref(), Some(&first));
    }
    let versions: i64 = match backend {
        Backend::MariaDb => {
            let mut conn = db.mysql().await?;
            sqlx::query_scalar("SELECT COUNT(*) FROM nacelle_schema_version")
                .fetch_one(&mut conn)
                .await?
        }
        _ => {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&db.url).await?;
            sqlx::query_scalar("SELECT COUNT(*) FROM nacelle_schema_version")
                .fetch_one(&mut conn)
                .await?
        }
    };
    // Each schema script recorded once (1: Nacos 2.4's tables, 2: gray release, 3: auth,
    // 4: schema validation, 5: audit trail, 6: change requests, 7: webhooks, 8: staged
    // rollouts).
    assert_eq!(versions, 8);
    drop(stores);
    drop(db);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_nodes_starting_together_create_the_schema_once() -> nacelle_testkit::TestResult {
    run_on(Backend::MariaDb, schema_created_once).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_nodes_starting_together_create_the_schema_once() -> nacelle_testkit::TestResult {
    run_on(Backend::Postgres, schema_created_once).await
}

#[tokio::test]
async fn urls_are_checked_before_connecting() -> TestResult {
    for url in [
        "mysql://root@127.0.0.1:3306",
        "mysql://root@127.0.0.1:3306/",
        "mysql://root@127.0.0.1:3306/db?max_connections=lots",
        "postgres://u@127.0.0.1/db?op_timeout_ms=0",
    ] {
        let opened = nacelle_store::open(url).await;
        assert!(
            matches!(opened, Err(nacelle_store::OpenError::InvalidUrl(_))),
            "{url}: {opened:?}"
        );
    }
    assert!(matches!(
        nacelle_store::open("redis://127.0.0.1").await,
        Err(nacelle_store::OpenError::Unsupported(_))
    ));
    Ok(())
}

// ------------------------------------------------------------------ history retention

const DAY: i64 = 86_400_000;

/// Runs a whole purge of the history in batches of `batch`: what each batch deleted.
async fn purge_all(
    store: &Arc<dyn ConfigStore>,
    rule: HistoryRetention,
    batch: u32,
) -> anyhow::Result<Vec<u64>> {
    purge_log(store, rule, batch, HistoryLog::Configs).await
}

/// Runs a whole purge of the history, or of the gray change log, in batches of `batch`:
/// what each batch deleted.
async fn purge_log(
    store: &Arc<dyn ConfigStore>,
    rule: HistoryRetention,
    batch: u32,
    log: HistoryLog,
) -> anyhow::Result<Vec<u64>> {
    let mut after = 0;
    let mut steps = Vec::new();
    loop {
        let step = store.purge_history(log, &rule, after, batch).await?;
        steps.push(step.deleted);
        match step.resume_after {
            Some(next) => {
                ensure!(next > after, "the purge went back from {after} to {next}");
                after = next;
            }
            None => return Ok(steps),
        }
    }
}

/// The history of `k`, newest first: (nid, op, modified_ms).
async fn history_of(
    store: &Arc<dyn ConfigStore>,
    k: &ConfigKey,
) -> anyhow::Result<Vec<(i64, OpType, i64)>> {
    let p = store.history_page(k, page(1, 500)).await?;
    Ok(p.items
        .iter()
        .map(|h| (h.nid, h.op_type, h.modified_ms))
        .collect())
}

/// Publishes `k` once per time in `times`; the revisions.
async fn publish_at(
    store: &Arc<dyn ConfigStore>,
    k: &ConfigKey,
    times: &[i64],
) -> anyhow::Result<Vec<i64>> {
    let mut revisions = Vec::new();
    for (i, t) in times.iter().enumerate() {
        revisions.push(
            store
                .publish(&record(k, &format!("v{i}"), *t))
                .await?
                .revision,
        );
    }
    Ok(revisions)
}

async fn purge_by_age_keeps_the_newest_row_of_each_key(
    store: Arc<dyn ConfigStore>,
    _b: Backend,
) -> TestResult {
    let (a, b, c, d, e) = (
        key("", "G", "a"),
        key("", "G", "b"),
        key("ns", "G", "c"),
        key("", "G", "d"),
        key("", "G2", "a"),
    );
    let ra = publish_at(&store, &a, &[T0, T0 + DAY, T0 + 2 * DAY]).await?;
    let rb = publish_at(&store, &b, &[T0]).await?;
    publish_at(&store, &c, &[T0]).await?;
    let RemoveOutcome::Removed { revision: rc } =
        store.remove(&c, &OpSource::default(), T0 + DAY).await?
    else {
        anyhow::bail!("c was not removed");
    };
    let rd = publish_at(&store, &d, &[T0, T0 + 200 * DAY]).await?;
    // Same data_id as `a`, another group: a key of its own.
    let re = publish_at(&store, &e, &[T0 + 200 * DAY, T0 + 201 * DAY]).await?;
    let a_row = store.get(&a).await?.context("a")?;
    let previous = store.history_previous(a_row.id).await?;

    let rule = HistoryRetention {
        older_than_ms: Some(T0 + 100 * DAY),
        keep_per_key: None,
    };
    let steps = purge_all(&store, rule, 100).await?;
    assert_eq!(
        steps.iter().sum::<u64>(),
        4,
        "a's two older rows, c's insert, d's first"
    );

    let nids = |h: Vec<(i64, OpType, i64)>| h.into_iter().map(|r| r.0).collect::<Vec<_>>();
    assert_eq!(
        nids(history_of(&store, &a).await?),
        vec![ra[2]],
        "old, but the newest"
    );
    assert_eq!(
        nids(history_of(&store, &b).await?),
        rb,
        "one old row: the newest"
    );
    let c_history = history_of(&store, &c).await?;
    assert_eq!(c_history.len(), 1);
    assert_eq!(
        (c_history[0].0, c_history[0].1),
        (rc, OpType::Delete),
        "a deletion stays"
    );
    assert_eq!(nids(history_of(&store, &d).await?), vec![rd[1]]);
    assert_eq!(
        nids(history_of(&store, &e).await?),
        vec![re[1], re[0]],
        "newer than the age"
    );

    // What the newest row serves is unchanged: revision, `previous`, the change log.
    assert_eq!(store.get(&a).await?.context("a")?.revision, a_row.revision);
    assert_eq!(store.history_previous(a_row.id).await?, previous);
    let log: Vec<i64> = store
        .changes_since(0, 100)
        .await?
        .iter()
        .map(|r| r.nid)
        .collect();
    let mut kept = vec![ra[2], rb[0], rc, rd[1], re[0], re[1]];
    kept.sort_unstable();
    assert_eq!(log, kept);
    assert_eq!(store.max_history_nid().await?, re[1]);

    // A second purge finds nothing; a rule without limits never deletes.
    assert_eq!(purge_all(&store, rule, 100).await?.iter().sum::<u64>(), 0);
    let forever = HistoryRetention::default();
    assert_eq!(purge_all(&store, forever, 100).await?, vec![0]);
    Ok(())
}

async fn purge_by_count_keeps_the_newest_n_per_key(
    store: Arc<dyn ConfigStore>,
    _b: Backend,
) -> TestResult {
    let (k, j) = (key("", "G", "k"), key("", "G", "j"));
    let times: Vec<i64> = (0..6).map(|i| T0 + i * 1000).collect();
    let rk = publish_at(&store, &k, &times).await?;
    let rj = publish_at(&store, &j, &times[..2]).await?;
    let keep = |n| HistoryRetention {
        older_than_ms: None,
        keep_per_key: Some(n),
    };
    assert_eq!(purge_all(&store, keep(3), 2).await?.iter().sum::<u64>(), 3);
    let nids = |h: Vec<(i64, OpType, i64)>| h.into_iter().map(|r| r.0).collect::<Vec<_>>();
    assert_eq!(
        nids(history_of(&store, &k).await?),
        vec![rk[5], rk[4], rk[3]]
    );
    assert_eq!(nids(history_of(&store, &j).await?), vec![rj[1], rj[0]]);
    // Keeping 0 keeps the newest all the same.
    assert_eq!(purge_all(&store, keep(0), 10).await?.iter().sum::<u64>(), 3);
    assert_eq!(nids(history_of(&store, &k).await?), vec![rk[5]]);
    assert_eq!(nids(history_of(&store, &j).await?), vec![rj[1]]);

    // Age and count together: a row goes when either condemns it.
    let (m, n) = (key("", "G", "m"), key("", "G", "n"));
    let rm = publish_at(
        &store,
        &m,
        &[T0, T0 + 200 * DAY, T0 + 201 * DAY, T0 + 202 * DAY],
    )
    .await?;
    let rn = publish_at(&store, &n, &[T0, T0 + 200 * DAY]).await?;
    let both = HistoryRetention {
        older_than_ms: Some(T0 + 100 * DAY),
        keep_per_key: Some(2),
    };
    assert_eq!(purge_all(&store, both, 10).await?.iter().sum::<u64>(), 3);
    assert_eq!(nids(history_of(&store, &m).await?), vec![rm[3], rm[2]]);
    assert_eq!(nids(history_of(&store, &n).await?), vec![rn[1]], "by age");
    Ok(())
}

async fn purge_batches_are_bounded(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let long = key("", "G", "long");
    let times: Vec<i64> = (0..30).map(|i| T0 + i * 1000).collect();
    let newest_long = *publish_at(&store, &long, &times)
        .await?
        .last()
        .context("none")?;
    let mut newest = vec![newest_long];
    for i in 0..10 {
        let k = key("", "G", &format!("short{i}"));
        newest.push(
            *publish_at(&store, &k, &times[..3])
                .await?
                .last()
                .context("none")?,
        );
    }
    let rule = HistoryRetention {
        older_than_ms: None,
        keep_per_key: Some(1),
    };
    let steps = purge_all(&store, rule, 7).await?;
    assert!(
        steps.iter().all(|n| *n <= 7),
        "a batch deleted more than 7: {steps:?}"
    );
    assert_eq!(steps.iter().sum::<u64>(), 29 + 10 * 2);
    assert!(steps.len() >= 7, "{steps:?}");
    let mut log: Vec<i64> = store
        .changes_since(0, 100)
        .await?
        .iter()
        .map(|r| r.nid)
        .collect();
    log.sort_unstable();
    newest.sort_unstable();
    assert_eq!(log, newest, "exactly the newest row of each key is left");
    Ok(())
}

fn gray(k: &ConfigKey, content: &str, now_ms: i64, spec: GraySpec) -> PublishRecord {
    PublishRecord {
        gray: Some(spec),
        ..record(k, content, now_ms)
    }
}

async fn gray_publish_update_remove_promote(store: Arc<dyn ConfigStore>, b: Backend) -> TestResult {
    let k = key("ns", "G", "gray.yaml");
    let formal = store.publish(&record(&k, "f: 1", T0)).await?;
    assert!(store.load_grays().await?.is_empty());
    assert_eq!(store.max_gray_nid().await?, 0);

    // Insert, update (CAS against the gray's md5), a second gray.
    let g1 = store
        .publish(&gray(&k, "g: 1", T0 + 1_000, GraySpec::beta("10.0.0.1")?))
        .await?;
    assert!(g1.revision > 0);
    let mut stale = gray(&k, "g: x", T0 + 2_000, GraySpec::beta("10.0.0.1")?);
    stale.cas_md5 = Some(md5_hex(b"f: 1"));
    assert!(matches!(
        store.publish(&stale).await,
        Err(StoreError::CasMismatch)
    ));
    let mut update = gray(
        &k,
        "g: 2",
        T0 + 2_000,
        GraySpec::beta("10.0.0.1,10.0.0.0/24")?,
    );
    update.cas_md5 = Some(md5_hex(b"g: 1"));
    let g2 = store.publish(&update).await?;
    assert_eq!(g2.id, g1.id, "an update keeps the gray row");
    assert!(g2.revision > g1.revision);
    store
        .publish(&gray(
            &k,
            "l: 1",
            T0 + 3_000,
            GraySpec::labels("pre", "env=pre", Some(4))?,
        ))
        .await?;
    // The formal config is untouched by gray writes.
    assert_eq!(
        store.get(&k).await?.map(|c| c.revision),
        Some(formal.revision)
    );

    let grays = store.grays_of(&k).await?;
    let view: Vec<(&str, &str, &str, i32)> = grays
        .iter()
        .map(|g| {
            (
                g.name.as_str(),
                g.rule_type.as_str(),
                g.rule_expr.as_str(),
                g.priority,
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            ("beta", "beta", "10.0.0.1,10.0.0.0/24", i32::MAX),
            ("pre", "tagv2", "env=pre", 4)
        ]
    );
    assert_eq!(&grays[0].config.content[..], b"g: 2");
    assert_eq!(grays[0].config.modified_ms, b.stored_ms(T0 + 2_000));
    assert_eq!(grays[0].config.revision, g2.revision);
    assert_eq!(store.load_grays().await?.len(), 2);
    let log = store.gray_changes_since(0, 10).await?;
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|c| c.key == k));
    assert_eq!(
        log.iter().map(|c| c.op_type).collect::<Vec<_>>(),
        [OpType::Insert, OpType::Update, OpType::Insert]
    );
    assert_eq!(store.max_gray_nid().await?, log[2].nid);

    // Promote the beta: its content becomes formal (one more formal history row), it goes.
    let mut promote = record(&k, "g: 2", T0 + 4_000);
    promote.config_type = ConfigType::Json;
    let promoted = store.promote_gray(&promote, "beta").await?;
    assert_eq!(promoted.id, formal.id);
    assert!(promoted.revision > formal.revision);
    let now = store.get(&k).await?.context("formal")?;
    assert_eq!(&now.content[..], b"g: 2");
    assert_eq!(now.config_type, ConfigType::Json);
    assert_eq!(store.history_page(&k, page(1, 10)).await?.total_count, 2);
    let names: Vec<String> = store
        .grays_of(&k)
        .await?
        .into_iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(names, ["pre"]);
    // A promotion of a gray that is gone, or whose content changed, writes nothing.
    assert!(matches!(
        store.promote_gray(&promote, "beta").await,
        Err(StoreError::NotFound(_))
    ));
    let mut wrong = record(&k, "l: changed", T0 + 5_000);
    wrong.md5 = md5_hex(b"l: changed");
    assert!(matches!(
        store.promote_gray(&wrong, "pre").await,
        Err(StoreError::CasMismatch)
    ));
    assert_eq!(
        store.get(&k).await?.map(|c| c.revision),
        Some(promoted.revision)
    );

    // Remove the label gray; removing it again is Absent.
    assert!(matches!(
        store
            .remove_gray(&k, "pre", &OpSource::default(), T0 + 6_000)
            .await?,
        RemoveOutcome::Removed { .. }
    ));
    assert_eq!(
        store
            .remove_gray(&k, "pre", &OpSource::default(), T0 + 7_000)
            .await?,
        RemoveOutcome::Absent
    );
    assert!(store.grays_of(&k).await?.is_empty());
    let log = store.gray_changes_since(0, 10).await?;
    assert_eq!(
        log.len(),
        5,
        "insert, update, insert, promote's delete, delete"
    );
    assert_eq!(log[3].op_type, OpType::Delete);
    Ok(())
}

async fn purge_of_the_gray_log_keeps_the_newest_row_of_each_variant(
    store: Arc<dyn ConfigStore>,
    _b: Backend,
) -> TestResult {
    let (k, j) = (key("", "G", "grays"), key("", "G", "other"));
    store.publish(&record(&k, "f: 1", T0)).await?;
    store.publish(&record(&j, "f: 1", T0)).await?;
    let beta = || GraySpec::beta("10.0.0.1");
    let mut beta_nids = Vec::new();
    for (i, t) in [T0, T0 + DAY, T0 + 200 * DAY].iter().enumerate() {
        let g = store
            .publish(&gray(&k, &format!("b: {i}"), *t, beta()?))
            .await?;
        beta_nids.push(g.revision);
    }
    // One old row, the newest of its variant; another key's variant of the same name.
    let pre = GraySpec::labels("pre", "env=pre", Some(1))?;
    let pre_nid = store.publish(&gray(&k, "p: 1", T0, pre)).await?.revision;
    let other_beta = store
        .publish(&gray(&j, "b: 1", T0 + DAY, beta()?))
        .await?
        .revision;
    // A stopped variant: its insert goes, the row of its stop stays.
    let canary = GraySpec::labels("canary", "env=canary", Some(2))?;
    store.publish(&gray(&k, "c: 1", T0, canary)).await?;
    let RemoveOutcome::Removed { revision: stopped } = store
        .remove_gray(&k, "canary", &OpSource::default(), T0 + DAY)
        .await?
    else {
        anyhow::bail!("canary was not removed");
    };
    let served = |grays: Vec<StoredGray>| {
        grays
            .into_iter()
            .map(|g| (g.name, g.config.revision))
            .collect::<Vec<_>>()
    };
    let before = served(store.grays_of(&k).await?);
    let log = |store: Arc<dyn ConfigStore>| async move {
        let rows = store.gray_changes_since(0, 100).await?;
        anyhow::Ok(rows.iter().map(|r| r.nid).collect::<Vec<i64>>())
    };
    assert_eq!(log(store.clone()).await?.len(), 7);

    let rule = HistoryRetention {
        older_than_ms: Some(T0 + 100 * DAY),
        keep_per_key: None,
    };
    // The history's purge leaves the gray log alone (and the one formal row of each key).
    assert_eq!(purge_all(&store, rule, 2).await?.iter().sum::<u64>(), 0);
    assert_eq!(log(store.clone()).await?.len(), 7);
    let steps = purge_log(&store, rule, 2, HistoryLog::Grays).await?;
    assert_eq!(
        steps.iter().sum::<u64>(),
        3,
        "the beta's two older rows and the canary's insert"
    );
    let mut kept = vec![beta_nids[2], pre_nid, other_beta, stopped];
    kept.sort_unstable();
    assert_eq!(log(store.clone()).await?, kept);
    assert_eq!(
        served(store.grays_of(&k).await?),
        before,
        "what each variant serves, its revision included, is unchanged"
    );
    assert_eq!(store.max_gray_nid().await?, stopped);
    assert_eq!(store.history_page(&k, page(1, 10)).await?.total_count, 1);

    // By count, per variant: keep the newest 2 of four.
    let mut newer = Vec::new();
    for i in 0..4 {
        let t = T0 + (300 + i) * DAY;
        let g = store
            .publish(&gray(&j, &format!("n: {i}"), t, beta()?))
            .await?;
        newer.push(g.revision);
    }
    let keep_two = HistoryRetention {
        older_than_ms: None,
        keep_per_key: Some(2),
    };
    let steps = purge_log(&store, keep_two, 10, HistoryLog::Grays).await?;
    assert_eq!(steps.iter().sum::<u64>(), 3, "j's older beta rows");
    let mut kept = vec![beta_nids[2], pre_nid, stopped, newer[2], newer[3]];
    kept.sort_unstable();
    assert_eq!(log(store.clone()).await?, kept);
    // Nothing left to purge; a rule without limits never deletes.
    assert_eq!(
        purge_log(&store, keep_two, 10, HistoryLog::Grays)
            .await?
            .iter()
            .sum::<u64>(),
        0
    );
    let forever = HistoryRetention::default();
    assert_eq!(
        purge_log(&store, forever, 10, HistoryLog::Grays).await?,
        vec![0]
    );
    Ok(())
}

async fn concurrent_gray_compare_and_set_has_one_winner(
    store: Arc<dyn ConfigStore>,
    _b: Backend,
) -> TestResult {
    const TASKS: usize = 50;
    let k = key("", "G", "gray-race");
    store.publish(&record(&k, "formal", T0)).await?;
    // Round 0 races to create the beta (CAS ""); round 1 races to replace it.
    for round in 0..2 {
        let expected = store
            .grays_of(&k)
            .await?
            .first()
            .map(|g| g.config.md5.clone())
            .unwrap_or_default();
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let (store, k, expected) = (store.clone(), k.clone(), expected.clone());
            tasks.push(tokio::spawn(async move {
                let content = format!("round {round} task {t}");
                let mut r = gray(&k, &content, T0 + t as i64, GraySpec::beta("10.0.0.1")?);
                r.cas_md5 = Some(expected);
                anyhow::Ok((content, store.publish(&r).await))
            }));
        }
        let mut winners = Vec::new();
        for t in tasks {
            match t.await?? {
                (content, Ok(_)) => winners.push(content),
                (_, Err(StoreError::CasMismatch)) => {}
                (_, Err(e)) => anyhow::bail!("a racing gray CAS failed with {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let grays = store.grays_of(&k).await?;
        assert_eq!(grays.len(), 1);
        assert_eq!(
            String::from_utf8_lossy(&grays[0].config.content),
            winners[0]
        );
    }
    assert_eq!(store.gray_changes_since(0, 100).await?.len(), 2);
    Ok(())
}

// The batch publish of imports and clones (`ConfigStore::publish_batch`), on every backend.
per_backend!(
    with with_store:
    batch_publish_policies,
    a_failing_batch_writes_nothing;
    flavor = "multi_thread", worker_threads = 4
);

/// The keys a batch wrote (`None` for a record it did not write).
fn written(outcome: &BatchOutcome) -> anyhow::Result<Vec<Option<String>>> {
    Ok(outcome
        .items
        .iter()
        .map(|i| match i {
            BatchItem::Written(c) => Some(c.key.data_id().to_string()),
            BatchItem::Skipped | BatchItem::Conflict => None,
        })
        .collect())
}

async fn batch_publish_policies(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let (a, b, c) = (
        key("ns", "G", "a"),
        key("ns", "G", "b"),
        key("ns", "G", "c"),
    );
    let first = store.publish(&record(&a, "a-old", T0)).await?;
    let batch = [
        record(&b, "b1", T0 + 1),
        record(&a, "a1", T0 + 1),
        record(&c, "c1", T0 + 1),
    ];

    // ABORT: stops at the first existing key in the batch's order, as Nacos does: the
    // record before it is written (with its history row), it is the conflict, the one
    // after it is not written.
    let nid = store.max_history_nid().await?;
    let outcome = store.publish_batch(&batch, SamePolicy::Abort).await?;
    assert_eq!(outcome.items.len(), 3);
    assert!(
        matches!(&outcome.items[0], BatchItem::Written(cfg) if cfg.key == b),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.items[1..],
        [BatchItem::Conflict, BatchItem::Skipped]
    );
    assert_eq!(&store.get(&b).await?.context("b")?.content[..], b"b1");
    assert_eq!(store.get(&a).await?.context("a")?.content, "a-old");
    ensure!(store.get(&c).await?.is_none());
    assert_eq!(store.max_history_nid().await?, nid + 1, "one history row");
    // The conflict first: nothing is written.
    let outcome = store
        .publish_batch(
            &[record(&a, "a2", T0 + 1), record(&c, "c0", T0 + 1)],
            SamePolicy::Abort,
        )
        .await?;
    assert_eq!(outcome.items, [BatchItem::Conflict, BatchItem::Skipped]);
    ensure!(store.get(&c).await?.is_none());
    assert_eq!(store.max_history_nid().await?, nid + 1);
    let nid = nid + 1;

    // SKIP: the others are written, in one transaction, each with its history row.
    let outcome = store.publish_batch(&batch[1..], SamePolicy::Skip).await?;
    assert_eq!(written(&outcome)?, [None, Some("c".into())]);
    assert_eq!(store.get(&a).await?.context("a")?.content, "a-old");
    assert_eq!(&store.get(&c).await?.context("c")?.content[..], b"c1");
    assert_eq!(store.max_history_nid().await?, nid + 1);
    for item in &outcome.items {
        if let BatchItem::Written(cfg) = item {
            assert_eq!(Some(cfg.as_ref()), store.get(&cfg.key).await?.as_ref());
        }
    }

    // OVERWRITE: every record is written; the update's history row keeps the replaced
    // version, as a single publish's does.
    let outcome = store.publish_batch(&batch, SamePolicy::Overwrite).await?;
    assert_eq!(written(&outcome)?.iter().flatten().count(), 3);
    let now = store.get(&a).await?.context("a")?;
    assert_eq!((now.id, &now.content[..]), (first.id, &b"a1"[..]));
    let hist = store.history_page(&a, page(1, 10)).await?;
    assert_eq!(hist.items[0].content, "a-old");
    assert_eq!(hist.items[0].op_type, OpType::Update);

    // A repeated key or a compare-and-set is refused before anything is written.
    let nid = store.max_history_nid().await?;
    let twice = [record(&b, "x", T0 + 2), record(&b, "y", T0 + 2)];
    let refused = store.publish_batch(&twice, SamePolicy::Overwrite).await;
    ensure!(
        matches!(refused, Err(StoreError::Rejected(_))),
        "{refused:?}"
    );
    let mut cas = record(&b, "z", T0 + 2);
    cas.cas_md5 = Some(String::new());
    let refused = store.publish_batch(&[cas], SamePolicy::Overwrite).await;
    ensure!(
        matches!(refused, Err(StoreError::Rejected(_))),
        "{refused:?}"
    );
    assert_eq!(store.max_history_nid().await?, nid);
    Ok(())
}

async fn a_failing_batch_writes_nothing(store: Arc<dyn ConfigStore>, b: Backend) -> TestResult {
    // A value the database refuses in the middle of the batch (an app name longer than
    // `app_name varchar(128)`): the records before it are rolled back with it. SQLite does
    // not enforce column lengths, so there the batch commits.
    let (x, y) = (key("ns", "G", "x"), key("ns", "G", "y"));
    let mut long = record(&y, "y", T0);
    long.meta.app_name = "a".repeat(300);
    let nid = store.max_history_nid().await?;
    let outcome = store
        .publish_batch(&[record(&x, "x", T0), long], SamePolicy::Abort)
        .await;
    if b == Backend::Sqlite {
        assert_eq!(written(&outcome?)?.len(), 2);
        return Ok(());
    }
    ensure!(outcome.is_err(), "{b:?}: {outcome:?}");
    ensure!(store.get(&x).await?.is_none(), "{b:?}: x was written");
    assert_eq!(store.max_history_nid().await?, nid);
    Ok(())
}

// ------------------------------------------------------------------ history notes, audit trail

per_backend!(
    with with_store:
    history_rows_carry_their_note,
    audit_append_page_range,
    audit_purge_keeps_the_chain_verifiable;
    flavor = "multi_thread", worker_threads = 4
);

/// A formal write's message and change request are stored with its history row, in its
/// transaction, and read back by every history read; a write without one reads empty.
async fn history_rows_carry_their_note(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    let k = key("", "G", "noted.yaml");
    let mut r1 = record(&k, "a: 1", T0);
    r1.source.message = "first version".into();
    let p1 = store.publish(&r1).await?;
    let mut r2 = record(&k, "a: 2", T0 + 1_000);
    r2.source.change_id = Some(42);
    let p2 = store.publish(&r2).await?;
    let p3 = store.publish(&record(&k, "a: 3", T0 + 2_000)).await?;
    let gone = OpSource {
        src_user: "carol".into(),
        message: "retired".into(),
        ..OpSource::default()
    };
    let RemoveOutcome::Removed { revision: r4 } = store.remove(&k, &gone, T0 + 3_000).await? else {
        anyhow::bail!("remove reported absent");
    };
    let h1 = entry(&store, p1.revision).await?;
    assert_eq!(
        (h1.source.message.as_str(), h1.source.change_id),
        ("first version", None)
    );
    let h2 = entry(&store, p2.revision).await?;
    assert_eq!(
        (h2.source.message.as_str(), h2.source.change_id),
        ("", Some(42))
    );
    let h3 = entry(&store, p3.revision).await?;
    assert_eq!(
        (h3.source.message.as_str(), h3.source.change_id),
        ("", None)
    );
    let h4 = entry(&store, r4).await?;
    assert_eq!(h4.source.message, "retired");
    let listed = store.history_page(&k, page(1, 10)).await?;
    let messages: Vec<&str> = listed
        .items
        .iter()
        .map(|h| h.source.message.as_str())
        .collect();
    assert_eq!(messages, vec!["retired", "", "", "first version"]);
    assert_eq!(
        store
            .history_previous(p1.id)
            .await?
            .map(|h| h.source.message),
        Some("retired".to_string())
    );
    // A gray write's note is kept with its gray-log row (`nacelle_gray_note`).
    let p5 = store.publish(&record(&k, "b: 1", T0 + 4_000)).await?;
    let mut g = gray(&k, "b: 2", T0 + 5_000, GraySpec::beta("10.0.0.9")?);
    g.source.message = "gray note".into();
    store.publish(&g).await?;
    let grays = store.gray_history(&k, page(1, 10)).await?;
    assert_eq!(grays.items.len(), 1);
    assert_eq!(grays.items[0].entry.source.message, "gray note");
    ensure!(p5.revision > r4);
    Ok(())
}

fn audit_event(i: i64, user: &str, action: &str, target: &str) -> AuditEvent {
    AuditEvent {
        time_ms: T0 + i * 1_000,
        user: user.into(),
        address: "10.0.0.1".into(),
        protocol: "http-v1".into(),
        action: action.into(),
        target: target.into(),
        outcome: "ok".into(),
        detail: format!("event {i} \u{0} ünïcödé"),
        change_id: (i % 3 == 0).then_some(i),
    }
}

/// Walks the whole chain from its anchor with the clients' verifier.
async fn verify_chain(store: &Arc<dyn ConfigStore>) -> anyhow::Result<Result<u64, Break>> {
    let first = store.audit_range(0, 0).await?;
    let mut v = Verifier::new(first.head.anchor_seq, &first.head.anchor_hash);
    loop {
        let range = store.audit_range(v.position(), 3).await?;
        if range.entries.is_empty() {
            return Ok(v.finish(range.head.last_seq, &range.head.last_hash));
        }
        for e in &range.entries {
            let fields = EntryFields {
                seq: e.seq,
                time_ms: e.event.time_ms,
                user: &e.event.user,
                address: &e.event.address,
                protocol: &e.event.protocol,
                action: &e.event.action,
                target: &e.event.target,
                outcome: &e.event.outcome,
                detail: &e.event.detail,
                change_id: e.event.change_id,
                prev_hash: &e.prev_hash,
            };
            if let Err(b) = v.check(&fields, &e.hash) {
                return Ok(Err(b));
            }
        }
    }
}

/// Appends get contiguous seqs linked by their hashes; a page filters by time, user,
/// target prefix and action; a range reads what a verification walks.
async fn audit_append_page_range(store: Arc<dyn ConfigStore>, _b: Backend) -> TestResult {
    assert_eq!(
        verify_chain(&store).await?,
        Ok(0),
        "an empty chain verifies"
    );
    let first = store
        .append_audit(&[
            audit_event(1, "alice", "publish", "/G/a.yaml"),
            audit_event(2, "bob", "login", "bob"),
        ])
        .await?;
    assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(first[0].prev_hash, GENESIS_HASH);
    assert_eq!(first[1].prev_hash, first[0].hash);
    assert_eq!(
        first[0].event.detail, "event 1 \u{FFFD} ünïcödé",
        "NUL is stored as U+FFFD"
    );
    let more = store
        .append_audit(&[
            audit_event(3, "alice", "remove", "/G/a.yaml"),
            audit_event(4, "alice", "publish", "dev/G/b.yaml"),
        ])
        .await?;
    assert_eq!(more[0].seq, 3);
    assert_eq!(more[0].prev_hash, first[1].hash);
    assert_eq!(store.append_audit(&[]).await?, Vec::new());

    let all = store
        .audit_page(&AuditFilter::default(), page(1, 10))
        .await?;
    assert_eq!(all.total_count, 4);
    let seqs: Vec<i64> = all.items.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![4, 3, 2, 1], "newest first");
    assert_eq!(all.items[1], more[0], "what is read is what was appended");
    assert_eq!(all.items[1].event.change_id, Some(3));
    let by = |f: AuditFilter| {
        let store = store.clone();
        async move {
            let p = store.audit_page(&f, page(1, 10)).await?;
            anyhow::Ok(p.items.iter().map(|e| e.seq).collect::<Vec<_>>())
        }
    };
    let alice = AuditFilter {
        user: Some("alice".into()),
        ..Default::default()
    };
    assert_eq!(by(alice).await?, vec![4, 3, 1]);
    let publishes = AuditFilter {
        action: Some("publish".into()),
        ..Default::default()
    };
    assert_eq!(by(publishes).await?, vec![4, 1]);
    let key_a = AuditFilter {
        target: Some("/G/a".into()),
        ..Default::default()
    };
    assert_eq!(by(key_a).await?, vec![3, 1]);
    let window = AuditFilter {
        since_ms: Some(T0 + 2_000),
        until_ms: Some(T0 + 4_000),
        ..Default::default()
    };
    assert_eq!(by(window).await?, vec![3, 2]);
    let second = store
        .audit_page(&AuditFilter::default(), page(2, 3))
        .await?;
    assert_eq!((second.total_count, second.items.len()), (4, 1));

    let range = store.audit_range(1, 2).await?;
    assert_eq!(range.head.last_seq, 4);
    assert_eq!(range.head.last_hash, more[1].hash);
    assert_eq!(
        (range.head.anchor_seq, range.head.anchor_hash.as_str()),
        (0, GENESIS_HASH)
    );
    assert_eq!(
        range.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(verify_chain(&store).await?, Ok(4));
    Ok(())
}

/// Retention deletes only a prefix of old entries, moves the anchor, and the rest still
/// verifies; an entry newer than the cut stops the purge even when older ones follow.
async fn audit_purge_keeps_the_chain_verifiable(
    store: Arc<dyn ConfigStore>,
    _b: Backend,
) -> TestResult {
    let events: Vec<AuditEvent> = (1..=6)
        .map(|i| audit_event(i, "alice", "publish", "/G/a"))
        .collect();
    let mut events = events;
    // Entry 5 is older than the cut but follows a newer one: it stays (a prefix only).
    events[4].time_ms = T0;
    store.append_audit(&events).await?;
    let cut = T0 + 3_500;
    let first = store.purge_audit(cut, 2).await?;
    assert_eq!((first.deleted, first.more), (2, true));
    let second = store.purge_audit(cut, 2).await?;
    assert_eq!(second.deleted, 1);
    ensure!(!second.more, "the purge stops at the first newer entry");
    assert_eq!(store.purge_audit(cut, 2).await?.deleted, 0);
    let range = store.audit_range(0, 10).await?;
    assert_eq!(range.head.anchor_seq, 3);
    assert_eq!(
        range.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![4, 5, 6]
    );
    assert_eq!(range.head.anchor_hash, range.entries[0].prev_hash);
    assert_eq!(verify_chain(&store).await?, Ok(3));
    // Appends go on from the head.
    let next = store
        .append_audit(&[audit_event(7, "bob", "login", "bob")])
        .await?;
    assert_eq!(next[0].seq, 7);
    assert_eq!(verify_chain(&store).await?, Ok(4));
    Ok(())
}

/// Two store handles (two nodes) appending to one database at once keep seq contiguous and
/// the chain whole.
async fn concurrent_audit_appends(backend: Backend) -> TestResult {
    let db = TestDb::create(backend).await?;
    let a = nacelle_store::open(&db.url).await?;
    let b = nacelle_store::open(&db.url).await?;
    let mut tasks = Vec::new();
    for (n, store) in [a.clone(), b.clone()].into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                let e = audit_event(i, &format!("node{n}"), "publish", "/G/x");
                store.append_audit(&[e.clone(), e]).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let range = a.audit_range(0, 1_000).await?;
    let seqs: Vec<i64> = range.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=80).collect::<Vec<i64>>());
    assert_eq!(verify_chain(&b).await?, Ok(80));
    drop((a, b));
    drop(db);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_concurrent_audit_appends_keep_seq_contiguous() -> nacelle_testkit::TestResult {
    run_on(Backend::MariaDb, concurrent_audit_appends).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_concurrent_audit_appends_keep_seq_contiguous() -> nacelle_testkit::TestResult {
    run_on(Backend::Postgres, concurrent_audit_appends).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_concurrent_audit_appends_keep_seq_contiguous() -> nacelle_testkit::TestResult {
    run_on(Backend::Sqlite, concurrent_audit_appends).await
}
