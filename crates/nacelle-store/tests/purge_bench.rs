//! The history purge on 1 000 000 history rows (SQLite), ignored by default:
//!
//! ```text
//! cargo test --release -p nacelle-store --test purge_bench -- --ignored --nocapture
//! NACELLE_PURGE_ROWS=100000 cargo test …   # another row count
//! NACELLE_PURGE_BATCH=1000 cargo test …     # another batch size
//! ```
//!
//! Fills `his_config_info` with the rows of 10 000 keys × 100 versions (bulk insert in one
//! transaction), 90 of each key's versions 60 days old and 10 from yesterday, then purges
//! with the server's defaults (30 days, batches of 250 rows, 10 ms pause between batches)
//! while a task publishes to other keys the whole time. Prints the rows/s of the purge, the
//! longest single batch and the longest publish during it; checks that exactly the 10 recent
//! rows of every key are left.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use bytes::Bytes;
use nacelle_core::{
    md5_hex, ConfigKey, ConfigMeta, ConfigStore, ConfigType, HistoryRetention, OpSource,
    PublishRecord,
};

const DAY: i64 = 86_400_000;
/// As the server purges (`crates/nacelle/src/retention.rs`).
const BATCH: u32 = 250;
const PAUSE: Duration = Duration::from_millis(10);
const VERSIONS: i64 = 100;
const OLD_VERSIONS: i64 = 90;

fn record(key: &ConfigKey, content: &str) -> PublishRecord {
    PublishRecord {
        key: key.clone(),
        content: Bytes::from(content.to_string()),
        md5: md5_hex(content.as_bytes()),
        config_type: ConfigType::Text,
        meta: ConfigMeta::default(),
        source: OpSource::default(),
        cas_md5: None,
        now_ms: nacelle_core::now_millis(),
    }
}

/// Inserts `keys` × [`VERSIONS`] history rows straight into the file, in one transaction.
fn fill(path: &std::path::Path, keys: i64, now: i64) -> anyhow::Result<()> {
    let mut conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, \
             md5, gmt_create, gmt_modified, src_user, src_ip, op_type, encrypted_data_key) \
             VALUES (?1, ?2, 'BENCH', '', '', ?3, ?4, ?5, ?5, 'bench', '127.0.0.1', 'U', '')",
        )?;
        let content = "key: value\n".repeat(10);
        let md5 = md5_hex(content.as_bytes());
        // Version by version, so a key's rows are spread over the whole log as in life.
        for v in 0..VERSIONS {
            let t = if v < OLD_VERSIONS {
                now - 60 * DAY + v * 1000
            } else {
                now - DAY + v * 1000
            };
            for k in 0..keys {
                insert.execute(rusqlite::params![k + 1, format!("k{k}"), content, md5, t])?;
            }
        }
    }
    tx.commit()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: fills 1 000 000 history rows"]
async fn purge_one_million_history_rows() -> anyhow::Result<()> {
    let rows: i64 = std::env::var("NACELLE_PURGE_ROWS")
        .ok()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let batch: u32 = std::env::var("NACELLE_PURGE_BATCH")
        .ok()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(BATCH);
    let keys = (rows / VERSIONS).max(1);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.db");
    let store: Arc<dyn ConfigStore> = Arc::new(nacelle_store::SqliteStore::open_path(&path).await?);
    let now = nacelle_core::now_millis();
    let t = Instant::now();
    let fill_path = path.clone();
    tokio::task::spawn_blocking(move || fill(&fill_path, keys, now)).await??;
    println!(
        "filled {} history rows ({keys} keys × {VERSIONS}) in {:.1} s",
        keys * VERSIONS,
        t.elapsed().as_secs_f64()
    );

    // Publishes go on the whole time; the longest one shows how long a batch holds them up.
    let done = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0u64;
            while !done.load(Ordering::Relaxed) {
                let key = ConfigKey::from_trusted("", "PUB", &format!("p{}", i % 100));
                let t = Instant::now();
                store.publish(&record(&key, &format!("v{i}"))).await?;
                latencies.push(t.elapsed());
                i += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Ok::<_, anyhow::Error>(latencies)
        })
    };

    let rule = HistoryRetention {
        older_than_ms: Some(now - 30 * DAY),
        keep_per_key: None,
    };
    let started = Instant::now();
    let (mut after, mut deleted, mut batches) = (0, 0u64, 0u32);
    let mut longest = Duration::ZERO;
    loop {
        let t = Instant::now();
        let step = store.purge_history(&rule, after, batch).await?;
        longest = longest.max(t.elapsed());
        batches += 1;
        deleted += step.deleted;
        let Some(next) = step.resume_after else { break };
        after = next;
        tokio::time::sleep(PAUSE).await;
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let mut latencies = publisher.await??;
    latencies.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(i).copied().unwrap_or_default()
    };

    println!(
        "purged {deleted} rows in {batches} batches of at most {batch}, {:.1} s ({:.0} rows/s, pauses included); \
         longest batch {:.1} ms",
        elapsed.as_secs_f64(),
        deleted as f64 / elapsed.as_secs_f64(),
        longest.as_secs_f64() * 1000.0
    );
    println!(
        "{} publishes during the purge: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        latencies.len(),
        pct(0.5).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0,
        pct(1.0).as_secs_f64() * 1000.0
    );

    ensure!(deleted == (keys * OLD_VERSIONS) as u64, "deleted {deleted}");
    let conn = rusqlite::Connection::open(&path)?;
    let left: i64 = conn.query_row(
        "SELECT COUNT(*) FROM his_config_info WHERE group_id = 'BENCH'",
        [],
        |r| r.get(0),
    )?;
    ensure!(
        left == keys * (VERSIONS - OLD_VERSIONS),
        "{left} rows left, expected the recent ones"
    );
    let latest = store
        .max_history_nid()
        .await
        .context("the log is still readable")?;
    ensure!(latest > 0);
    Ok(())
}
