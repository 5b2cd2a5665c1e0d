//! Change requests and review policies on every backend (SQLite, MariaDB, PostgreSQL):
//! their life in the store, and the publish of a request as one transaction that writes
//! every key or, when a key moved since its base, nothing.

use std::sync::Arc;

use anyhow::{ensure, Context};
use bytes::Bytes;
use nacelle_core::change::{
    ChangeEventKind, ChangeFilter, ChangeItem, ChangeOp, ChangePublishOutcome, ChangeState,
    ChangeUpdate, ChangeWrite, ChangeWritten, NewChange, NewChangeEvent, ReviewPolicy,
};
use nacelle_core::store::prelude::*;
use nacelle_core::{
    md5_hex, ConfigKey, ConfigMeta, ConfigType, NamespaceId, OpSource, OpType, PageRequest,
    PublishRecord, StoreError,
};
use nacelle_testkit::per_backend;

mod common;
use common::{with_store, TestResult, T0};

per_backend!(
    with with_store:
    a_change_request_lives_through_its_states,
    a_change_publishes_every_key_in_one_transaction,
    a_stale_change_writes_nothing,
    one_of_two_concurrent_publishes_wins,
    review_policies_and_due_changes;
    flavor = "multi_thread", worker_threads = 2
);

fn source() -> OpSource {
    OpSource {
        src_user: "alice".into(),
        src_ip: "10.0.0.1".into(),
        ..OpSource::default()
    }
}

fn record(key: &ConfigKey, content: &str, now_ms: i64) -> PublishRecord {
    PublishRecord {
        key: key.clone(),
        content: Bytes::from(content.to_string()),
        md5: md5_hex(content.as_bytes()),
        config_type: ConfigType::Yaml,
        meta: ConfigMeta::default(),
        source: source(),
        cas_md5: None,
        now_ms,
        gray: None,
    }
}

fn publish_item(data_id: &str, content: &str, base: &str) -> ChangeItem {
    ChangeItem {
        group: "G".into(),
        data_id: data_id.into(),
        op: ChangeOp::Publish {
            content: content.into(),
            config_type: ConfigType::Yaml,
        },
        base_md5: base.into(),
    }
}

fn event(kind: ChangeEventKind, user: &str) -> NewChangeEvent {
    NewChangeEvent {
        kind,
        user: user.into(),
        text: String::new(),
    }
}

fn new_change(ns: &str, items: Vec<ChangeItem>) -> NewChange {
    NewChange {
        namespace: NamespaceId::from_trusted(ns),
        title: "raise limits".into(),
        description: "why: traffic".into(),
        author: "alice".into(),
        state: ChangeState::Open,
        items,
        now_ms: T0,
    }
}

/// Approves `id` (at `version`): the new version.
async fn approve(store: &Arc<dyn ConfigStore>, id: i64, version: i64) -> anyhow::Result<i64> {
    let mut up = ChangeUpdate::event(version, event(ChangeEventKind::Approved, "bob"), T0 + 1);
    up.state = Some(ChangeState::Approved);
    Ok(store.update_change(id, &up).await?)
}

/// The writes of a change's items in namespace `ns`.
fn writes_of(ns: &str, items: &[ChangeItem], now_ms: i64) -> Vec<ChangeWrite> {
    let ns = NamespaceId::from_trusted(ns);
    items
        .iter()
        .map(|item| match &item.op {
            ChangeOp::Publish { content, .. } => ChangeWrite::Publish {
                record: Box::new(record(&item.key(&ns), content, now_ms)),
                base_md5: item.base_md5.clone(),
            },
            ChangeOp::Remove => ChangeWrite::Remove {
                key: item.key(&ns),
                base_md5: item.base_md5.clone(),
                source: source(),
            },
        })
        .collect()
}

async fn a_change_request_lives_through_its_states(store: Arc<dyn ConfigStore>) -> TestResult {
    let items = vec![
        publish_item("a.yaml", "a: 1", ""),
        ChangeItem {
            group: "G".into(),
            data_id: "b.yaml".into(),
            op: ChangeOp::Remove,
            base_md5: md5_hex(b"b"),
        },
    ];
    let id = store
        .create_change(&new_change("dev", items.clone()))
        .await?;
    let other = store.create_change(&new_change("", vec![])).await?;
    ensure!(other > id, "ids grow: {id} then {other}");

    let cr = store.get_change(id).await?.context("created")?;
    assert_eq!(cr.namespace.as_str(), "dev");
    assert_eq!(cr.title, "raise limits");
    assert_eq!(cr.description, "why: traffic");
    assert_eq!(cr.author, "alice");
    assert_eq!(cr.state, ChangeState::Open);
    assert!(!cr.stale);
    assert_eq!(cr.version, 1);
    assert_eq!(cr.created_ms, T0);
    assert_eq!(cr.publish_at_ms, None);
    assert_eq!(cr.items, items);
    assert_eq!(cr.item_count, 2);
    assert_eq!(cr.events.len(), 1);
    assert_eq!(cr.events[0].kind, ChangeEventKind::Created);
    assert_eq!(cr.events[0].user, "alice");
    assert!(store.get_change(id + 1000).await?.is_none());

    // A comment, then an approval at a stale version is refused.
    let comment = NewChangeEvent {
        kind: ChangeEventKind::Commented,
        user: "bob".into(),
        text: "looks right".into(),
    };
    let v2 = store
        .update_change(id, &ChangeUpdate::event(1, comment, T0 + 10))
        .await?;
    assert_eq!(v2, 2, "answers the new version");
    let mut late = ChangeUpdate::event(1, event(ChangeEventKind::Approved, "bob"), T0 + 11);
    late.state = Some(ChangeState::Approved);
    assert!(matches!(
        store.update_change(id, &late).await,
        Err(StoreError::CasMismatch)
    ));
    assert!(matches!(
        store.update_change(id + 1000, &late).await,
        Err(StoreError::NotFound(_))
    ));

    // An edit replaces the items, the title and the schedule.
    let mut edit = ChangeUpdate::event(2, event(ChangeEventKind::Edited, "alice"), T0 + 20);
    edit.items = Some(vec![publish_item("c.yaml", "c: 1", "")]);
    edit.title = Some("raise more limits".into());
    edit.publish_at_ms = Some(Some(T0 + 60_000));
    store.update_change(id, &edit).await?;
    let cr = store.get_change(id).await?.context("edited")?;
    assert_eq!(cr.version, 3);
    assert_eq!(cr.updated_ms, T0 + 20);
    assert_eq!(cr.title, "raise more limits");
    assert_eq!(cr.description, "why: traffic", "left as it was");
    assert_eq!(cr.items, vec![publish_item("c.yaml", "c: 1", "")]);
    assert_eq!(cr.publish_at_ms, Some(T0 + 60_000));
    let kinds: Vec<_> = cr.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            ChangeEventKind::Created,
            ChangeEventKind::Commented,
            ChangeEventKind::Edited
        ]
    );
    assert_eq!(cr.events[1].text, "looks right");

    // Listing: newest first, filtered, paged, with item counts and no bodies.
    let all = store
        .list_changes(
            &ChangeFilter::default(),
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(all.total_count, 2);
    assert_eq!(
        all.items.iter().map(|c| c.id).collect::<Vec<_>>(),
        [other, id]
    );
    assert!(all.items[1].items.is_empty() && all.items[1].events.is_empty());
    assert_eq!(all.items[1].item_count, 1);
    let dev = ChangeFilter {
        namespace: Some(NamespaceId::from_trusted("dev")),
        ..ChangeFilter::default()
    };
    let page = store
        .list_changes(
            &dev,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(page.items.iter().map(|c| c.id).collect::<Vec<_>>(), [id]);
    let public = ChangeFilter {
        namespace: Some(NamespaceId::default_namespace()),
        state: Some(ChangeState::Open),
        author: Some("alice".into()),
        namespaces: None,
    };
    let page = store
        .list_changes(
            &public,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(page.items.iter().map(|c| c.id).collect::<Vec<_>>(), [other]);
    // A set of namespaces (what a user sees): counted and paged by the store.
    let first_page = PageRequest {
        page_no: 1,
        page_size: 10,
    };
    for (set, want) in [
        (vec!["dev"], vec![id]),
        (vec!["", "dev"], vec![id, other]),
        (vec![""], vec![other]),
        (vec!["elsewhere"], vec![]),
    ] {
        let filter = ChangeFilter {
            namespaces: Some(set.iter().map(|n| NamespaceId::from_trusted(n)).collect()),
            ..ChangeFilter::default()
        };
        let page = store.list_changes(&filter, first_page).await?;
        let mut got: Vec<_> = page.items.iter().map(|c| c.id).collect();
        let mut want = want;
        got.sort();
        want.sort();
        assert_eq!(got, want, "{set:?}");
        assert_eq!(page.total_count, want.len() as u64, "{set:?}");
    }
    let closed = ChangeFilter {
        state: Some(ChangeState::Closed),
        ..ChangeFilter::default()
    };
    assert_eq!(
        store
            .list_changes(
                &closed,
                PageRequest {
                    page_no: 1,
                    page_size: 10
                }
            )
            .await?
            .total_count,
        0
    );
    let second = store
        .list_changes(
            &ChangeFilter::default(),
            PageRequest {
                page_no: 2,
                page_size: 1,
            },
        )
        .await?;
    assert_eq!(second.items.iter().map(|c| c.id).collect::<Vec<_>>(), [id]);
    Ok(())
}

async fn a_change_publishes_every_key_in_one_transaction(
    store: Arc<dyn ConfigStore>,
) -> TestResult {
    let a = ConfigKey::from_trusted("dev", "G", "a.yaml");
    let c = ConfigKey::from_trusted("dev", "G", "c.yaml");
    let before_a = store.publish(&record(&a, "a: 1", T0)).await?;
    store.publish(&record(&c, "c: 1", T0)).await?;
    let items = vec![
        publish_item("a.yaml", "a: 2", &before_a.md5),
        publish_item("b.yaml", "b: 1", ""),
        ChangeItem {
            group: "G".into(),
            data_id: "c.yaml".into(),
            op: ChangeOp::Remove,
            base_md5: md5_hex(b"c: 1"),
        },
    ];
    let id = store
        .create_change(&new_change("dev", items.clone()))
        .await?;
    let version = approve(&store, id, 1).await?;

    let writes = writes_of("dev", &items, T0 + 100);
    let published = event(ChangeEventKind::Published, "carol");
    let out = store
        .publish_change(id, version, &writes, &published, T0 + 100)
        .await?;
    let ChangePublishOutcome::Published(written) = out else {
        anyhow::bail!("not published: {out:?}");
    };
    assert_eq!(written.len(), 3);
    let ChangeWritten::Published(new_a) = &written[0] else {
        anyhow::bail!("a: {:?}", written[0]);
    };
    assert_eq!(new_a.content, "a: 2");
    ensure!(new_a.revision > before_a.revision);
    assert!(matches!(&written[1], ChangeWritten::Published(b) if b.content == "b: 1"));
    assert!(matches!(written[2], ChangeWritten::Removed(Some(_))));

    assert_eq!(store.get(&a).await?.context("a")?.content, "a: 2");
    let b = ConfigKey::from_trusted("dev", "G", "b.yaml");
    assert_eq!(store.get(&b).await?.context("b")?.content, "b: 1");
    assert!(store.get(&c).await?.is_none(), "c removed");
    // Every key has its history row, by the request's operator.
    let history = store
        .history_page(
            &a,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(history.items.len(), 2);
    assert_eq!(history.items[0].op_type, OpType::Update);
    assert_eq!(history.items[0].source.src_user, "alice");
    let history = store
        .history_page(
            &c,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(history.items[0].op_type, OpType::Delete);

    let cr = store.get_change(id).await?.context("published")?;
    assert_eq!(cr.state, ChangeState::Published);
    assert_eq!(cr.version, version + 1);
    assert_eq!(cr.updated_ms, T0 + 100);
    let last = cr.events.last().context("events")?;
    assert_eq!(
        (last.kind, last.user.as_str()),
        (ChangeEventKind::Published, "carol")
    );

    // Published once: the same publish again is `Moved`, and writes nothing.
    let again = store
        .publish_change(id, version, &writes, &published, T0 + 200)
        .await?;
    assert_eq!(again, ChangePublishOutcome::Moved);
    let history = store
        .history_page(
            &a,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(history.items.len(), 2);
    // A request named twice is refused before anything is written.
    let twice = vec![writes[0].clone(), writes[0].clone()];
    let id2 = store.create_change(&new_change("dev", vec![])).await?;
    let v2 = approve(&store, id2, 1).await?;
    assert!(matches!(
        store.publish_change(id2, v2, &twice, &published, T0).await,
        Err(StoreError::Rejected(_))
    ));
    assert!(matches!(
        store
            .publish_change(id2 + 1000, 1, &writes, &published, T0)
            .await,
        Err(StoreError::NotFound(_))
    ));
    Ok(())
}

async fn a_stale_change_writes_nothing(store: Arc<dyn ConfigStore>) -> TestResult {
    let a = ConfigKey::from_trusted("", "G", "a.yaml");
    let b = ConfigKey::from_trusted("", "G", "b.yaml");
    let base_a = store.publish(&record(&a, "a: 1", T0)).await?;
    let base_b = store.publish(&record(&b, "b: 1", T0)).await?;
    let items = vec![
        publish_item("a.yaml", "a: 2", &base_a.md5),
        publish_item("b.yaml", "b: 2", &base_b.md5),
        publish_item("new.yaml", "n: 1", ""),
    ];
    let id = store.create_change(&new_change("", items.clone())).await?;
    let version = approve(&store, id, 1).await?;
    // Someone changes b directly after the request was based.
    let moved_b = store.publish(&record(&b, "b: 9", T0 + 50)).await?;

    let writes = writes_of("", &items, T0 + 100);
    let out = store
        .publish_change(
            id,
            version,
            &writes,
            &event(ChangeEventKind::Published, "carol"),
            T0 + 100,
        )
        .await?;
    assert_eq!(out, ChangePublishOutcome::Stale(vec![b.clone()]));
    assert_eq!(store.get(&a).await?.context("a")?.revision, base_a.revision);
    assert_eq!(
        store.get(&b).await?.context("b")?.revision,
        moved_b.revision
    );
    let new = ConfigKey::from_trusted("", "G", "new.yaml");
    assert!(store.get(&new).await?.is_none(), "nothing written");
    let history = store
        .history_page(
            &a,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(history.items.len(), 1);
    let cr = store.get_change(id).await?.context("request")?;
    assert_eq!(cr.state, ChangeState::Approved);
    assert_eq!(cr.version, version, "the request is untouched");
    Ok(())
}

async fn one_of_two_concurrent_publishes_wins(store: Arc<dyn ConfigStore>) -> TestResult {
    let items = vec![
        publish_item("x.yaml", "x: 1", ""),
        publish_item("y.yaml", "y: 1", ""),
    ];
    for round in 0..5 {
        let id = store.create_change(&new_change("", items.clone())).await?;
        let version = approve(&store, id, 1).await?;
        let writes = writes_of("", &items, T0 + round);
        let run = |who: &'static str| {
            let (store, writes) = (Arc::clone(&store), writes.clone());
            tokio::spawn(async move {
                let ev = event(ChangeEventKind::Published, who);
                store
                    .publish_change(id, version, &writes, &ev, T0 + round)
                    .await
            })
        };
        let (one, two) = (run("node-1"), run("node-2"));
        let outcomes = [one.await??, two.await??];
        let published = outcomes
            .iter()
            .filter(|o| matches!(o, ChangePublishOutcome::Published(_)))
            .count();
        assert_eq!(published, 1, "round {round}: {outcomes:?}");
        assert!(
            outcomes.contains(&ChangePublishOutcome::Moved),
            "round {round}: {outcomes:?}"
        );
        // Later rounds publish over the keys the earlier ones created: base them anew.
        let cr = store.get_change(id).await?.context("request")?;
        let publishes = cr
            .events
            .iter()
            .filter(|e| e.kind == ChangeEventKind::Published)
            .count();
        assert_eq!(publishes, 1, "one published event");
        for data_id in ["x.yaml", "y.yaml"] {
            let k = ConfigKey::from_trusted("", "G", data_id);
            store.remove(&k, &source(), T0 + round).await?;
        }
    }
    Ok(())
}

async fn review_policies_and_due_changes(store: Arc<dyn ConfigStore>) -> TestResult {
    assert!(store.review_policies().await?.is_empty());
    let policy = |ns: &str, pattern: &str, n: u32| ReviewPolicy {
        namespace: NamespaceId::from_trusted(ns),
        group_pattern: pattern.into(),
        required_approvals: n,
        updated_by: "admin".into(),
        updated_ms: T0,
    };
    store.set_review_policy(&policy("prod", "*", 1)).await?;
    store.set_review_policy(&policy("prod", "PAY*", 2)).await?;
    store.set_review_policy(&policy("prod", "*", 3)).await?;
    let all = store.review_policies().await?;
    assert_eq!(all, vec![policy("prod", "*", 3), policy("prod", "PAY*", 2)]);
    let prod = NamespaceId::from_trusted("prod");
    assert!(store.delete_review_policy(&prod, "PAY*").await?);
    assert!(!store.delete_review_policy(&prod, "PAY*").await?);
    assert_eq!(store.review_policies().await?, vec![policy("prod", "*", 3)]);

    // Due: approved with a schedule at or before now, oldest schedule first.
    let mut due = Vec::new();
    for (at, approved) in [
        (T0 + 30, true),
        (T0 + 10, true),
        (T0 + 5, false),
        (T0 + 99, true),
    ] {
        let id = store.create_change(&new_change("", vec![])).await?;
        let mut up = ChangeUpdate::event(1, event(ChangeEventKind::Scheduled, "alice"), T0);
        up.publish_at_ms = Some(Some(at));
        if approved {
            up.state = Some(ChangeState::Approved);
        }
        store.update_change(id, &up).await?;
        due.push(id);
    }
    let found = store.due_changes(T0 + 50).await?;
    assert_eq!(found, vec![(due[1], 2), (due[0], 2)]);
    Ok(())
}
