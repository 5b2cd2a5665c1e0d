//! The walk over a key's listeners runs after the key's write lock is released: a listener
//! that takes long to be told (here: one that blocks until the test lets it go) never holds
//! up the next write of the key. Real SQLite store, real service.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nacelle_core::{Caller, ConfigKey, Protocol};
use nacelle_service::{ChangeEvent, Subscriber, WatchItem};
use nacelle_testkit::service::{open_sqlite, publish_request};
use nacelle_testkit::{Backend, TestDb, TestResult};

/// Reports each notification, then blocks until released.
struct Slow {
    entered: mpsc::Sender<String>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl Subscriber for Slow {
    fn notify(&self, event: &Arc<ChangeEvent>) {
        // A test that stopped listening has already failed; nothing to report to.
        let _gone = self.entered.send(event.md5.clone());
        if let Ok(release) = self.release.lock() {
            // A timeout just lets the walk go on; the test checks what happened by then.
            let _released = release.recv_timeout(Duration::from_secs(30));
        }
    }
}

/// The md5 of the next notification the slow listener receives (waits at most 10 s).
async fn next_notification(entered: &Arc<Mutex<mpsc::Receiver<String>>>) -> Result<String, String> {
    let entered = entered.clone();
    tokio::task::spawn_blocking(move || {
        entered
            .lock()
            .map_err(|_| "poisoned".to_string())?
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| "no notification within 10 s".to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_slow_listener_walk_does_not_hold_the_key_write_lock() -> TestResult {
    let db = TestDb::create(Backend::Sqlite).await?;
    let service = open_sqlite(&db.path().ok_or("no SQLite file")?, true).await?;
    let key = ConfigKey::parse(None, "G", "slow-walk")?;

    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let caller = Caller::anonymous(Protocol::Internal, None);
    let watch = service.watch(&caller)?;
    watch.add(
        &caller,
        vec![WatchItem {
            key: key.clone(),
            md5: String::new(),
            subscriber: Arc::new(Slow {
                entered: entered_tx,
                release: Mutex::new(release_rx),
            }),
        }],
    )?;
    let entered = Arc::new(Mutex::new(entered));

    let s = service.clone();
    let k = key.clone();
    let c = caller.clone();
    let first = tokio::spawn(async move { s.publish(&c, publish_request(&k, "v1")).await });
    assert_eq!(
        next_notification(&entered).await?,
        nacelle_core::md5_hex(b"v1")
    );

    // The first publish is still telling its listener. The second write of the same key
    // commits, becomes visible and reaches its own walk meanwhile.
    let s = service.clone();
    let k = key.clone();
    let c = caller.clone();
    let second = tokio::spawn(async move { s.publish(&c, publish_request(&k, "v2")).await });
    assert_eq!(
        next_notification(&entered).await?,
        nacelle_core::md5_hex(b"v2")
    );
    let visible = service
        .get(&caller, &key, None)?
        .map(|s| s.config.content().clone());
    assert_eq!(visible.as_deref(), Some(&b"v2"[..]));
    assert!(
        !first.is_finished(),
        "the first publish returns only after its walk"
    );

    release.send(())?;
    release.send(())?;
    first.await??;
    second.await??;
    Ok(())
}
