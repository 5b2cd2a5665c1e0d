//! Staged rollouts on every backend (SQLite, MariaDB, PostgreSQL): their life in the store
//! (create, read, version-checked transitions), one active rollout per key, and the
//! drivers' lease (taken, renewed, refused to another node until it expires, given up
//! with the rollout's end).

use std::sync::Arc;

use anyhow::{ensure, Context};
use nacelle_core::rollout::{Canary, Guards, NewRollout, PromGuard, RolloutPlan, RolloutState};
use nacelle_core::store::prelude::*;
use nacelle_core::{
    md5_hex, ConfigKey, ConfigMeta, ConfigType, GraySpec, OpSource, PageRequest, PublishRecord,
    StoreError,
};
use nacelle_testkit::per_backend;

mod common;
use common::{with_store, TestResult, T0};

per_backend!(
    with with_store:
    a_rollout_lives_through_its_states,
    one_active_rollout_per_key,
    the_lease_has_one_holder_until_it_expires,
    gray_log_rows_carry_their_note;
    flavor = "multi_thread", worker_threads = 2
);

fn plan() -> RolloutPlan {
    RolloutPlan {
        canary: Some(Canary {
            labels: Some("env=canary".into()),
            ips: vec!["10.0.0.7".into()],
        }),
        steps: vec![5.0, 25.0, 50.0, 100.0],
        bake_ms: 600_000,
        manual: true,
        guards: Guards {
            prometheus: Some(PromGuard {
                query: "rate(errors_total[1m]) > 0".into(),
                threshold: Some(0.5),
                url: None,
            }),
            http: Some("http://127.0.0.1:9/health".into()),
            delivery_ms: Some(30_000),
        },
        draw: nacelle_core::CohortDraw::Independent,
    }
}

fn new_rollout(key: &ConfigKey) -> NewRollout {
    NewRollout {
        key: key.clone(),
        content: "feature: on\nünïcode: ✓\n".into(),
        config_type: ConfigType::Yaml,
        base_md5: "0123456789abcdef0123456789abcdef".into(),
        plan: plan(),
        author: "alice".into(),
        now_ms: T0,
    }
}

async fn a_rollout_lives_through_its_states(store: Arc<dyn ConfigStore>) -> TestResult {
    let key = ConfigKey::from_trusted("ns1", "G", "app.yaml");
    let id = store.create_rollout(&new_rollout(&key)).await?;
    let r = store.get_rollout(id).await?.context("created rollout")?;
    ensure!(r.id == id && r.key == key, "{r:?}");
    ensure!(r.content == "feature: on\nünïcode: ✓\n" && r.config_type == ConfigType::Yaml);
    ensure!(r.plan == plan(), "plan round trip: {:?}", r.plan);
    ensure!(r.state == RolloutState::Running && r.step == 0 && r.advanced_to == -1);
    ensure!(r.step_started_ms == T0 && r.created_ms == T0 && r.version == 1);
    ensure!(r.author == "alice" && r.lease_holder.is_empty() && r.reason.is_empty());
    ensure!(store.get_rollout(id + 1000).await?.is_none());

    // A transition at the current version applies and bumps it.
    let mut next = r.update(T0 + 5);
    next.step = 1;
    next.step_started_ms = T0 + 5;
    next.reason = "step 2/5 (5%)".into();
    let r2 = store.update_rollout(id, &next).await?;
    ensure!(
        r2.step == 1 && r2.version == 2 && r2.updated_ms == T0 + 5,
        "{r2:?}"
    );
    ensure!(r2.reason == "step 2/5 (5%)");
    // The same update again is stale: nothing changes.
    match store.update_rollout(id, &next).await {
        Err(StoreError::CasMismatch) => {}
        other => anyhow::bail!("stale update: {other:?}"),
    }
    match store.update_rollout(id + 1000, &next).await {
        Err(StoreError::NotFound(_)) => {}
        other => anyhow::bail!("update of a missing rollout: {other:?}"),
    }
    let mut paused = r2.update(T0 + 6);
    paused.state = RolloutState::Paused;
    paused.advanced_to = 1;
    let r3 = store.update_rollout(id, &paused).await?;
    ensure!(r3.state == RolloutState::Paused && r3.advanced_to == 1 && r3.version == 3);

    // Listing: all, newest first; active only.
    let key2 = ConfigKey::from_trusted("", "G", "other");
    let id2 = store.create_rollout(&new_rollout(&key2)).await?;
    let all = store.list_rollouts(false, 10).await?;
    ensure!(all.iter().map(|r| r.id).collect::<Vec<_>>() == vec![id2, id]);
    ensure!(store.list_rollouts(false, 1).await?.len() == 1);
    let mut done = r3.update(T0 + 7);
    done.state = RolloutState::Promoted;
    store.update_rollout(id, &done).await?;
    let active = store.list_rollouts(true, 10).await?;
    ensure!(
        active.iter().map(|r| r.id).collect::<Vec<_>>() == vec![id2],
        "{active:?}"
    );
    Ok(())
}

async fn one_active_rollout_per_key(store: Arc<dyn ConfigStore>) -> TestResult {
    let key = ConfigKey::from_trusted("", "G", "one.yaml");
    let first = store.create_rollout(&new_rollout(&key)).await?;
    match store.create_rollout(&new_rollout(&key)).await {
        Err(StoreError::Conflict(_)) => {}
        other => anyhow::bail!("second active rollout of a key: {other:?}"),
    }
    // Another key, or the same key in another namespace, is free.
    store
        .create_rollout(&new_rollout(&ConfigKey::from_trusted("x", "G", "one.yaml")))
        .await?;
    // Once the first is over, the key takes a new one; finished ones do not collide.
    for state in [RolloutState::RolledBack, RolloutState::Aborted] {
        let active = store.list_rollouts(true, 10).await?;
        let r = active
            .into_iter()
            .find(|r| r.key == key)
            .context("the key's active rollout")?;
        let mut end = r.update(T0 + 1);
        end.state = state;
        store.update_rollout(r.id, &end).await?;
        store.create_rollout(&new_rollout(&key)).await?;
    }
    let all = store.list_rollouts(false, 10).await?;
    ensure!(
        all.len() == 4 && all.iter().any(|r| r.id == first),
        "{all:?}"
    );
    Ok(())
}

async fn the_lease_has_one_holder_until_it_expires(store: Arc<dyn ConfigStore>) -> TestResult {
    let key = ConfigKey::from_trusted("", "G", "lease.yaml");
    let id = store.create_rollout(&new_rollout(&key)).await?;
    ensure!(store.claim_rollout(id, "node-a", T0, 5_000).await?);
    // Renewed by its holder, refused to another while it runs.
    ensure!(store.claim_rollout(id, "node-a", T0 + 1_000, 5_000).await?);
    ensure!(!store.claim_rollout(id, "node-b", T0 + 5_999, 5_000).await?);
    let r = store.get_rollout(id).await?.context("rollout")?;
    ensure!(
        r.lease_holder == "node-a" && r.lease_until_ms == T0 + 6_000,
        "{r:?}"
    );
    // Expired: the other node takes it, and the first is refused.
    ensure!(store.claim_rollout(id, "node-b", T0 + 6_001, 5_000).await?);
    ensure!(!store.claim_rollout(id, "node-a", T0 + 6_002, 5_000).await?);
    // Two nodes racing for an expired lease: exactly one wins.
    let (a, b) = tokio::join!(
        store.claim_rollout(id, "node-c", T0 + 20_000, 5_000),
        store.claim_rollout(id, "node-d", T0 + 20_000, 5_000)
    );
    ensure!(
        a? ^ b?,
        "exactly one of two racing nodes takes an expired lease"
    );
    // The lease does not move the version (operators' transitions compare it).
    let r = store.get_rollout(id).await?.context("rollout")?;
    ensure!(r.version == 1, "{r:?}");
    // A finished rollout is driven by nobody.
    let mut end = r.update(T0 + 21_000);
    end.state = RolloutState::Promoted;
    store.update_rollout(id, &end).await?;
    ensure!(
        !store
            .claim_rollout(id, &r.lease_holder, T0 + 21_001, 5_000)
            .await?
    );
    ensure!(
        !store
            .claim_rollout(id, "node-e", T0 + 99_000, 5_000)
            .await?
    );
    // An unknown rollout is nobody's.
    ensure!(!store.claim_rollout(id + 99, "node-a", T0, 5_000).await?);
    Ok(())
}

/// A gray publish's message (a rollout step's) is kept with its gray-log row and read back
/// by the gray history; its removal's too; a row without one reads `""`.
async fn gray_log_rows_carry_their_note(store: Arc<dyn ConfigStore>) -> TestResult {
    let key = ConfigKey::from_trusted("", "G", "noted.yaml");
    let rec = |content: &str, gray: Option<GraySpec>, message: &str, t: i64| PublishRecord {
        key: key.clone(),
        content: content.to_string().into(),
        md5: md5_hex(content.as_bytes()),
        config_type: ConfigType::Yaml,
        meta: ConfigMeta::default(),
        source: OpSource {
            src_user: "alice".into(),
            message: message.into(),
            ..OpSource::default()
        },
        cas_md5: None,
        now_ms: t,
        gray,
    };
    store.publish(&rec("v: 1", None, "", T0)).await?;
    let step = |p: f64| -> anyhow::Result<GraySpec> {
        Ok(nacelle_core::rollout::gray_spec(
            3,
            nacelle_core::CohortDraw::Independent,
            &nacelle_core::rollout::Stage::Percent(p),
        )?)
    };
    store
        .publish(&rec(
            "v: 2",
            Some(step(10.0)?),
            "rollout 3 step 1/2 (10%)",
            T0 + 1,
        ))
        .await?;
    store
        .publish(&rec(
            "v: 2",
            Some(step(100.0)?),
            "rollout 3 step 2/2 (100%)",
            T0 + 2,
        ))
        .await?;
    let beta = GraySpec::beta("10.0.0.9")?;
    store
        .publish(&rec("v: beta", Some(beta), "", T0 + 3))
        .await?;
    let removal = OpSource {
        message: "rollout 3 rolled back".into(),
        ..OpSource::default()
    };
    store
        .remove_gray(&key, "rollout-3", &removal, T0 + 4)
        .await?;
    let page = store
        .gray_history(
            &key,
            PageRequest {
                page_no: 1,
                page_size: 10,
            },
        )
        .await?;
    let notes: Vec<(String, String)> = page
        .items
        .iter()
        .rev()
        .map(|h| (h.gray_name.clone(), h.entry.source.message.clone()))
        .collect();
    let want = [
        ("rollout-3", "rollout 3 step 1/2 (10%)"),
        ("rollout-3", "rollout 3 step 2/2 (100%)"),
        ("beta", ""),
        ("rollout-3", "rollout 3 rolled back"),
    ];
    ensure!(
        notes
            == want
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>(),
        "{notes:?}"
    );
    Ok(())
}
