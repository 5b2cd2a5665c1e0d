//! The change-log follower keeps working across a history purge: two services (two nodes)
//! on one database, node A writes, node B learns of A's changes only by following the
//! change log. A purge removes rows B has read and rows it has not read yet (never the
//! newest row of a key); every change still reaches B, on every backend.

use std::sync::Arc;

use nacelle_core::{Caller, ConfigKey, ConfigStore, HistoryLog, HistoryRetention};
use nacelle_service::{ChangeFollower, ConfigService, Limits};
use nacelle_testkit::service::publish;
use nacelle_testkit::{per_backend, Backend, BoxError, TestDb};

per_backend!(a_change_after_a_purge_reaches_the_follower);

/// The content node `service` serves for `key`, `None` when absent.
fn content(service: &ConfigService, key: &ConfigKey) -> Result<Option<String>, BoxError> {
    let served = service.get(&Caller::internal(), key, None)?;
    Ok(served.map(|s| s.config.content_text().into_owned()))
}

/// Purges everything but the newest row of each key, in batches of 2.
async fn purge(store: &Arc<dyn ConfigStore>) -> Result<u64, BoxError> {
    let rule = HistoryRetention {
        older_than_ms: None,
        keep_per_key: Some(1),
    };
    let (mut after, mut deleted) = (0, 0);
    loop {
        let step = store
            .purge_history(HistoryLog::Configs, &rule, after, 2)
            .await?;
        deleted += step.deleted;
        match step.resume_after {
            Some(next) => after = next,
            None => return Ok(deleted),
        }
    }
}

async fn a_change_after_a_purge_reaches_the_follower(backend: Backend) -> Result<(), BoxError> {
    let db = TestDb::create(backend).await?;
    let store_a = nacelle_store::open(&db.url).await?;
    let store_b = nacelle_store::open(&db.url).await?;
    let a = ConfigService::new(store_a.clone(), Limits::default());
    let b = ConfigService::new(store_b, Limits::default());
    a.load().await?;
    let position = b.replication().change_log_position().await?;
    b.load().await?;
    let mut follower = ChangeFollower::starting_at(position);

    let (k1, k2, k3) = (
        ConfigKey::parse(None, "G", "k1")?,
        ConfigKey::parse(None, "G", "k2")?,
        ConfigKey::parse(None, "G", "k3")?,
    );
    for v in ["v1", "v2", "v3"] {
        publish(&a, &k1, v).await?;
    }
    publish(&a, &k2, "x1").await?;
    follower.poll(&b).await?;
    assert_eq!(content(&b, &k1)?.as_deref(), Some("v3"));

    // Rows B has read are purged; a change after the purge still reaches B.
    assert_eq!(purge(&store_a).await?, 2, "k1's two older rows");
    publish(&a, &k1, "v4").await?;
    publish(&a, &k3, "y1").await?;
    follower.poll(&b).await?;
    assert_eq!(content(&b, &k1)?.as_deref(), Some("v4"));
    assert_eq!(content(&b, &k3)?.as_deref(), Some("y1"));

    // Rows B has not read yet are purged before it polls: the newest row of each key is
    // left, so B still reloads every changed key (an update, and a delete).
    publish(&a, &k1, "v5").await?;
    publish(&a, &k1, "v6").await?;
    a.remove(&Caller::internal(), &k2, None, &Default::default())
        .await?;
    assert!(purge(&store_a).await? >= 2);
    follower.poll(&b).await?;
    assert_eq!(content(&b, &k1)?.as_deref(), Some("v6"));
    assert_eq!(
        content(&b, &k2)?,
        None,
        "the D row stays, so the delete arrives"
    );

    // And the follower goes on after that.
    publish(&a, &k3, "y2").await?;
    follower.poll(&b).await?;
    assert_eq!(content(&b, &k3)?.as_deref(), Some("y2"));
    assert_eq!(follower.position(), store_a.max_history_nid().await?);
    Ok(())
}
