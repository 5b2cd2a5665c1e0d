//! Webhooks and their deliveries on every backend (SQLite, MariaDB, PostgreSQL): the
//! hooks' life, the deliveries' life (enqueue, claim, finish, retry, redeliver, purge),
//! and the claim's lease: two claimers (two nodes on one database) never win the same
//! delivery, and a delivery whose claimer died is claimed again after its lease.

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::{ensure, Context};
use nacelle_core::store::prelude::*;
use nacelle_core::webhook::{DeliveryClaim, DeliveryResult, DeliveryStatus, NewDelivery, Webhook};
use nacelle_core::{NamespaceId, PageRequest};
use nacelle_testkit::{per_backend, run_on, Backend, TestDb};

mod common;
use common::{with_store, TestResult, T0};

per_backend!(
    with with_store:
    webhooks_are_created_updated_listed_and_deleted,
    a_delivery_lives_through_claim_retry_and_delivery,
    an_expired_lease_is_claimed_again_and_the_old_owner_cannot_finish,
    finished_deliveries_are_purged_by_age;
    flavor = "multi_thread", worker_threads = 2
);

fn hook(ns: &str, url: &str) -> Webhook {
    Webhook {
        id: 0,
        namespace: NamespaceId::from_trusted(ns),
        group_pattern: "PAY*".into(),
        data_id_pattern: "*.yaml".into(),
        url: url.into(),
        secret: "0123456789abcdef".into(),
        events: vec!["publish".into(), "change-approved".into()],
        enabled: true,
        description: "payments".into(),
        created_by: "admin".into(),
        created_ms: T0,
        updated_ms: T0,
    }
}

fn delivery(hook_id: i64, n: i64) -> NewDelivery {
    NewDelivery {
        hook_id,
        event_id: format!("event-{n}"),
        kind: "publish".into(),
        body: format!("{{\"n\":{n},\"text\":\"中文 ✓\"}}"),
        created_ms: T0 + n,
    }
}

fn claim(owner: &str, now_ms: i64, limit: u32) -> DeliveryClaim {
    DeliveryClaim {
        owner: owner.into(),
        now_ms,
        lease_until_ms: now_ms + 60_000,
        limit,
    }
}

fn result(status: DeliveryStatus, code: u16, error: &str, next: i64, now: i64) -> DeliveryResult {
    DeliveryResult {
        status,
        code,
        error: error.into(),
        next_attempt_ms: next,
        now_ms: now,
    }
}

async fn webhooks_are_created_updated_listed_and_deleted(
    store: Arc<dyn ConfigStore>,
) -> TestResult {
    let a = store
        .create_webhook(&hook("", "http://127.0.0.1:1/a"))
        .await?;
    let b = store
        .create_webhook(&hook("prod", "https://example.com/b"))
        .await?;
    ensure!(a != b && a > 0 && b > 0, "ids {a}, {b}");
    let all = store.load_webhooks().await?;
    assert_eq!(all.iter().map(|h| h.id).collect::<Vec<_>>(), vec![a, b]);
    let mut want = hook("prod", "https://example.com/b");
    want.id = b;
    assert_eq!(all[1], want);

    // An update replaces the fields but the creation.
    let mut changed = all[1].clone();
    changed.url = "https://example.com/c".into();
    changed.events.clear();
    changed.enabled = false;
    changed.secret = "another-secret".into();
    changed.updated_ms = T0 + 5;
    changed.created_by = "someone else".into();
    ensure!(
        store.update_webhook(&changed).await?,
        "update found nothing"
    );
    // The same values again: still found (MySQL counts changed rows only).
    ensure!(
        store.update_webhook(&changed).await?,
        "same-value update found nothing"
    );
    let mut missing = changed.clone();
    missing.id = b + 1000;
    ensure!(
        !store.update_webhook(&missing).await?,
        "updated a missing hook"
    );
    let reread = store.load_webhooks().await?;
    assert_eq!(reread[1].url, "https://example.com/c");
    assert_eq!(reread[1].secret, "another-secret");
    assert!(reread[1].events.is_empty() && !reread[1].enabled);
    assert_eq!(reread[1].created_by, "admin");
    assert_eq!(reread[1].updated_ms, T0 + 5);

    // Deleting a hook deletes its deliveries.
    store
        .enqueue_deliveries(&[delivery(a, 1), delivery(b, 2)])
        .await?;
    ensure!(store.delete_webhook(a).await?, "delete found nothing");
    ensure!(!store.delete_webhook(a).await?, "deleted twice");
    let page = PageRequest {
        page_no: 1,
        page_size: 10,
    };
    assert_eq!(store.deliveries(a, page).await?.total_count, 0);
    assert_eq!(store.deliveries(b, page).await?.total_count, 1);
    assert_eq!(store.load_webhooks().await?.len(), 1);
    Ok(())
}

async fn a_delivery_lives_through_claim_retry_and_delivery(
    store: Arc<dyn ConfigStore>,
) -> TestResult {
    let h = store
        .create_webhook(&hook("", "http://127.0.0.1:1/a"))
        .await?;
    store
        .enqueue_deliveries(&[delivery(h, 1), delivery(h, 2), delivery(h, 3)])
        .await?;
    // Not due before its time.
    assert!(store
        .claim_deliveries(&claim("x", T0, 10))
        .await?
        .is_empty());
    // Due: oldest first, at most the limit.
    let now = T0 + 10;
    let first = store.claim_deliveries(&claim("o1", now, 2)).await?;
    assert_eq!(
        first
            .iter()
            .map(|d| d.event_id.as_str())
            .collect::<Vec<_>>(),
        vec!["event-1", "event-2"]
    );
    let d = &first[0];
    assert_eq!(d.body, "{\"n\":1,\"text\":\"中文 ✓\"}");
    assert_eq!(
        (d.status, d.attempts, d.hook_id),
        (DeliveryStatus::Pending, 0, h)
    );
    // Leased rows are not claimed again; the third is.
    let second = store.claim_deliveries(&claim("o2", now, 10)).await?;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].event_id, "event-3");

    // A failed attempt: retried later, its code and error kept.
    let retry = result(DeliveryStatus::Pending, 503, "HTTP 503", now + 1_000, now);
    ensure!(store.finish_delivery(d.id, "o1", &retry).await?, "finish");
    // Not due again before its next attempt; then it is.
    let early = store.claim_deliveries(&claim("o3", now + 500, 10)).await?;
    ensure!(
        early.iter().all(|x| x.id != d.id),
        "claimed before its time"
    );
    let again = store
        .claim_deliveries(&claim("o4", now + 1_000, 10))
        .await?;
    let again = again
        .iter()
        .find(|x| x.id == d.id)
        .context("not claimed when due")?;
    assert_eq!((again.attempts, again.last_code), (1, 503));
    assert_eq!(again.last_error, "HTTP 503");
    let done = result(DeliveryStatus::Delivered, 200, "", now + 1_000, now + 1_001);
    ensure!(store.finish_delivery(d.id, "o4", &done).await?, "finish");

    // Give up on the second.
    let failed = result(DeliveryStatus::Failed, 0, "connection refused", 0, now + 2);
    ensure!(
        store.finish_delivery(first[1].id, "o1", &failed).await?,
        "finish"
    );

    let page = store
        .deliveries(
            h,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(page.total_count, 3);
    // Newest first.
    let states: Vec<(String, DeliveryStatus, u32)> = page
        .items
        .iter()
        .map(|d| (d.event_id.clone(), d.status, d.attempts))
        .collect();
    assert_eq!(
        states,
        vec![
            ("event-3".to_string(), DeliveryStatus::Pending, 0),
            ("event-2".to_string(), DeliveryStatus::Failed, 1),
            ("event-1".to_string(), DeliveryStatus::Delivered, 2),
        ]
    );
    assert_eq!(page.items[1].last_error, "connection refused");

    // Redelivery: only of a finished delivery; pending again with its attempts reset.
    ensure!(store.redeliver(first[1].id, now + 5).await?, "redeliver");
    ensure!(
        !store.redeliver(first[1].id, now + 5).await?,
        "redelivered a pending one"
    );
    ensure!(
        !store.redeliver(second[0].id, now + 5).await?,
        "redelivered a leased one"
    );
    let claimed = store.claim_deliveries(&claim("o5", now + 5, 10)).await?;
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].id, claimed[0].attempts), (first[1].id, 0));
    Ok(())
}

async fn an_expired_lease_is_claimed_again_and_the_old_owner_cannot_finish(
    store: Arc<dyn ConfigStore>,
) -> TestResult {
    let h = store
        .create_webhook(&hook("", "http://127.0.0.1:1/a"))
        .await?;
    store.enqueue_deliveries(&[delivery(h, 1)]).await?;
    let now = T0 + 10;
    let dead = store.claim_deliveries(&claim("dead-node", now, 10)).await?;
    assert_eq!(dead.len(), 1);
    // Within the lease nobody else gets it; after it, another node does.
    assert!(store
        .claim_deliveries(&claim("other", now + 59_999, 10))
        .await?
        .is_empty());
    let taken = store
        .claim_deliveries(&claim("other", now + 60_000, 10))
        .await?;
    assert_eq!(taken.len(), 1);
    // The first owner's late outcome is not recorded; the new owner's is.
    let late = result(DeliveryStatus::Delivered, 200, "", 0, now + 60_001);
    ensure!(
        !store
            .finish_delivery(dead[0].id, "dead-node", &late)
            .await?,
        "the expired owner finished the delivery"
    );
    ensure!(store.finish_delivery(taken[0].id, "other", &late).await?);
    Ok(())
}

async fn finished_deliveries_are_purged_by_age(store: Arc<dyn ConfigStore>) -> TestResult {
    let h = store
        .create_webhook(&hook("", "http://127.0.0.1:1/a"))
        .await?;
    let batch: Vec<NewDelivery> = (1..=5).map(|n| delivery(h, n)).collect();
    store.enqueue_deliveries(&batch).await?;
    let claimed = store.claim_deliveries(&claim("o", T0 + 100, 10)).await?;
    assert_eq!(claimed.len(), 5);
    // 1..=4 finished, 5 still pending.
    for d in &claimed[..4] {
        let r = result(DeliveryStatus::Delivered, 204, "", 0, T0 + 100);
        ensure!(store.finish_delivery(d.id, "o", &r).await?);
    }
    // Created before T0 + 4: 1, 2, 3 (finished) — in batches of 2.
    assert_eq!(store.purge_deliveries(T0 + 4, 2).await?, 2);
    assert_eq!(store.purge_deliveries(T0 + 4, 2).await?, 1);
    assert_eq!(store.purge_deliveries(T0 + 4, 2).await?, 0);
    // A pending delivery is never purged, however old.
    assert_eq!(store.purge_deliveries(T0 + 1_000, 10).await?, 1);
    let left = store
        .deliveries(
            h,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    assert_eq!(
        left.items
            .iter()
            .map(|d| d.event_id.as_str())
            .collect::<Vec<_>>(),
        vec!["event-5"]
    );
    Ok(())
}

/// Two store handles (two nodes on one database) claiming the same deliveries at once, over
/// and over: every delivery is won by exactly one claimer.
async fn two_claimers_never_win_the_same_delivery(backend: Backend) -> TestResult {
    let db = TestDb::create(backend).await?;
    let a = nacelle_store::open(&db.url).await?;
    let b = nacelle_store::open(&db.url).await?;
    let h = a.create_webhook(&hook("", "http://127.0.0.1:1/a")).await?;
    let batch: Vec<NewDelivery> = (1..=60).map(|n| delivery(h, n)).collect();
    a.enqueue_deliveries(&batch).await?;
    let mut tasks = Vec::new();
    for (n, store) in [a.clone(), b.clone()].into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            for round in 0..40 {
                let owner = format!("node{n}-{round}");
                let got = store
                    .claim_deliveries(&claim(&owner, T0 + 1_000, 7))
                    .await?;
                won.extend(got.into_iter().map(|d| d.id));
            }
            anyhow::Ok(won)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a delivery was won twice: {all:?}"
    );
    assert_eq!(distinct.len(), 60, "every delivery claimed once");
    drop((a, b));
    drop(db);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_two_claimers_never_win_the_same_delivery() -> nacelle_testkit::TestResult {
    run_on(Backend::Sqlite, two_claimers_never_win_the_same_delivery).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_two_claimers_never_win_the_same_delivery() -> nacelle_testkit::TestResult {
    run_on(Backend::MariaDb, two_claimers_never_win_the_same_delivery).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_claimers_never_win_the_same_delivery() -> nacelle_testkit::TestResult {
    run_on(Backend::Postgres, two_claimers_never_win_the_same_delivery).await
}
