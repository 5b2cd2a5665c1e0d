//! The history purge on many history rows. The suite runs it on 20 000 rows (SQLite): a check
//! that a purge through batches removes exactly the old rows while publishes go on. The
//! figure in `docs/benchmarks.md` is the same program on 1 000 000 rows:
//!
//! ```text
//! NACELLE_PURGE_ROWS=1000000 cargo test --release -p nacelle-store --test purge_bench -- --nocapture
//! NACELLE_PURGE_ROWS=100000 cargo test …   # another row count
//! NACELLE_PURGE_BATCH=1000 cargo test …     # another batch size
//! NACELLE_PURGE_BACKEND=mariadb cargo test … # or postgres: a test database on the server
//! ```
//!
//! Fills `his_config_info` with the rows of 10 000 keys × 100 versions (bulk insert, 1 000
//! rows per statement; on SQLite in one transaction), 90 of each key's versions 60 days old and 10 from yesterday, then purges
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
    md5_hex, ConfigKey, ConfigMeta, ConfigType, HistoryLog, HistoryRetention, OpSource,
    PublishRecord,
};
use nacelle_testkit::{Backend, TestDb};
use sqlx::Executor;

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
        gray: None,
    }
}

/// The `INSERT` of version `v` of keys `from..to`, at time `t` as `backend` spells it.
fn insert_sql(backend: Backend, from: i64, to: i64, t: i64) -> String {
    let content = "key: value\n".repeat(10);
    let md5 = md5_hex(content.as_bytes());
    let time = match backend {
        Backend::Sqlite => t.to_string(),
        Backend::MariaDb => format!("FROM_UNIXTIME({})", t / 1000),
        Backend::Postgres => format!("(TIMESTAMP '1970-01-01' + {t} * INTERVAL '1 millisecond')"),
    };
    let rows: Vec<String> = (from..to)
        .map(|k| {
            format!(
                "({}, 'k{k}', 'BENCH', '', '', '{content}', '{md5}', {time}, {time}, 'bench', \
                 '127.0.0.1', 'U', '')",
                k + 1
            )
        })
        .collect();
    format!(
        "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, content, md5, \
         gmt_create, gmt_modified, src_user, src_ip, op_type, encrypted_data_key) VALUES {}",
        rows.join(", ")
    )
}

/// The statements that insert `keys` × [`VERSIONS`] history rows, version by version (so a
/// key's rows are spread over the whole log as in life), 1 000 rows per statement.
fn fill_statements(backend: Backend, keys: i64, now: i64) -> Vec<String> {
    let mut out = Vec::new();
    for v in 0..VERSIONS {
        let t = if v < OLD_VERSIONS {
            now - 60 * DAY + v * 1000
        } else {
            now - DAY + v * 1000
        };
        for from in (0..keys).step_by(1000) {
            out.push(insert_sql(backend, from, (from + 1000).min(keys), t));
        }
    }
    out
}

/// Runs the fill straight on the database: SQLite in one transaction, the servers one
/// statement at a time.
async fn fill(db: &TestDb, backend: Backend, statements: Vec<String>) -> anyhow::Result<()> {
    match backend {
        Backend::Sqlite => {
            let path = db.path().context("no SQLite file")?;
            tokio::task::spawn_blocking(move || {
                let mut conn = rusqlite::Connection::open(path)?;
                conn.busy_timeout(Duration::from_secs(10))?;
                let tx = conn.transaction()?;
                for st in &statements {
                    tx.execute_batch(st)?;
                }
                tx.commit()?;
                Ok::<_, anyhow::Error>(())
            })
            .await??;
        }
        Backend::MariaDb => {
            let mut conn = db.mysql().await?;
            for st in &statements {
                conn.execute(st.as_str()).await?;
            }
        }
        Backend::Postgres => {
            let mut conn = db.postgres().await?;
            for st in &statements {
                conn.execute(st.as_str()).await?;
            }
            // Statistics as a table that grew in service has them (autovacuum would gather
            // them later): without them the planner walks the primary key for the
            // newer-row test of every candidate.
            conn.execute("ANALYZE his_config_info").await?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_purge_of_many_rows_keeps_exactly_the_recent_ones() -> anyhow::Result<()> {
    let rows: i64 = std::env::var("NACELLE_PURGE_ROWS")
        .ok()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(20_000);
    let batch: u32 = std::env::var("NACELLE_PURGE_BATCH")
        .ok()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(BATCH);
    let backend = match std::env::var("NACELLE_PURGE_BACKEND").as_deref() {
        Ok("mariadb") => Backend::MariaDb,
        Ok("postgres") => Backend::Postgres,
        _ => Backend::Sqlite,
    };
    let keys = (rows / VERSIONS).max(1);
    let db = TestDb::create(backend).await?;
    let store = nacelle_store::open(&db.url).await?;
    let now = nacelle_core::now_millis();
    let t = Instant::now();
    fill(&db, backend, fill_statements(backend, keys, now)).await?;
    println!(
        "{backend:?}: filled {} history rows ({keys} keys × {VERSIONS}) in {:.1} s",
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
        let step = store
            .purge_history(HistoryLog::Configs, &rule, after, batch)
            .await?;
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
    let left = store
        .changes_since(0, u32::MAX)
        .await?
        .iter()
        .filter(|r| r.key.group() == "BENCH")
        .count() as i64;
    ensure!(
        left == keys * (VERSIONS - OLD_VERSIONS),
        "{left} rows left, expected the recent ones"
    );
    drop(store);
    drop(db);
    Ok(())
}
