//! `nacelle backup`, `restore` and `check` on the embedded SQLite database, with the real
//! binary: a backup taken while clients keep publishing holds every write acknowledged
//! before it began, restores into a working server, and damaged or foreign files are
//! refused without touching the target.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacelle_testkit::server::BinaryServer;
use nacelle_testkit::TestResult;
use parking_lot::Mutex;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");
const GROUP: &str = "BACKUP";

fn nacelle(args: &[&str]) -> TestResult<Output> {
    Ok(Command::new(NACELLE).args(args).output()?)
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn path_arg(p: &Path) -> TestResult<&str> {
    p.to_str().ok_or_else(|| "a non-UTF-8 temp path".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_during_a_publish_storm_holds_every_acknowledged_write() -> TestResult {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    // The storm writes far faster than one address may by default (docs/security.md,
    // Limits): the write rate limit is off for it.
    let server = BinaryServer::spawn(NACELLE, &data, &["--write-rate-per-ip", "0"])?;
    server.api.wait_ready().await?;

    // Eight writers publish distinct keys until told to stop, recording when each write
    // was acknowledged.
    let acked: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..8 {
        let api = server.api.clone();
        let acked = acked.clone();
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("k-{w}-{i}");
                api.publish("", GROUP, &id, &format!("v {id}")).await?;
                acked.lock().push((id, Instant::now()));
                i += 1;
            }
            anyhow::Ok(())
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;

    let backup_file = dir.path().join("backup.db");
    let began = Instant::now();
    let args: Vec<String> = [
        "backup",
        "--data-dir",
        path_arg(&data)?,
        "--out",
        path_arg(&backup_file)?,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nacelle(&args).map_err(|e| e.to_string())
    })
    .await??;
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await??;
    }
    assert!(out.status.success(), "backup failed: {}", text(&out));
    let before: Vec<String> = acked
        .lock()
        .iter()
        .filter(|(_, at)| *at < began)
        .map(|(id, _)| id.clone())
        .collect();
    let during = acked
        .lock()
        .iter()
        .filter(|(_, at)| *at >= began && *at < ended)
        .count();
    println!(
        "backup took {:?}; {} writes acknowledged before it, {during} while it ran; {}",
        ended - began,
        before.len(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    assert!(!before.is_empty(), "the storm acknowledged nothing");
    drop(server);

    // Restore into a fresh data directory and serve it.
    let restored = dir.path().join("restored");
    let out = nacelle(&[
        "restore",
        "--data-dir",
        path_arg(&restored)?,
        "--from",
        path_arg(&backup_file)?,
    ])?;
    assert!(out.status.success(), "restore failed: {}", text(&out));
    let out = nacelle(&["check", "--data-dir", path_arg(&restored)?])?;
    assert!(out.status.success(), "check failed: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ok: "));

    let server = BinaryServer::spawn(NACELLE, &restored, &[])?;
    server.api.wait_ready().await?;
    let mut missing = Vec::new();
    for id in &before {
        let got = server.api.get("", GROUP, id).await?;
        if got.as_deref() != Some(format!("v {id}").as_str()) {
            missing.push(id.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} writes acknowledged before the backup are not in it: {:?}",
        missing.len(),
        before.len(),
        &missing[..missing.len().min(10)]
    );
    Ok(())
}

#[tokio::test]
async fn damaged_or_foreign_files_are_refused_and_nothing_is_overwritten() -> TestResult {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    {
        let server = BinaryServer::spawn(NACELLE, &data, &[])?;
        server.api.wait_ready().await?;
        server.api.publish("", GROUP, "kept", "original").await?;
    }
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![42u8; 16 * 1024])?;
    let foreign = dir.path().join("foreign.db");
    {
        let conn = rusqlite::Connection::open(&foreign)?;
        conn.execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('hi');")?;
    }

    for (what, file) in [("garbage", &garbage), ("foreign", &foreign)] {
        let out = nacelle(&["check", "--db", &format!("sqlite://{}", path_arg(file)?)])?;
        assert!(
            !out.status.success(),
            "check accepted {what}: {}",
            text(&out)
        );
        let out = nacelle(&[
            "restore",
            "--data-dir",
            path_arg(&data)?,
            "--from",
            path_arg(file)?,
            "--force",
        ])?;
        assert!(!out.status.success(), "restore took {what}: {}", text(&out));
    }
    // An existing database is replaced only with --force; a backup never overwrites.
    let good = dir.path().join("good.db");
    let out = nacelle(&[
        "backup",
        "--data-dir",
        path_arg(&data)?,
        "--out",
        path_arg(&good)?,
    ])?;
    assert!(out.status.success(), "{}", text(&out));
    let out = nacelle(&[
        "backup",
        "--data-dir",
        path_arg(&data)?,
        "--out",
        path_arg(&good)?,
    ])?;
    assert!(
        !out.status.success(),
        "a backup overwrote {}",
        good.display()
    );
    let out = nacelle(&[
        "restore",
        "--data-dir",
        path_arg(&data)?,
        "--from",
        path_arg(&good)?,
    ])?;
    assert!(
        !out.status.success(),
        "restore replaced a database without --force"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    // Servers on MySQL/PostgreSQL are told to use their own tools.
    let out = nacelle(&[
        "backup",
        "--db",
        "mysql://root@127.0.0.1:3306/x",
        "--out",
        "x.db",
    ])?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("mysqldump"));

    // The original data is untouched by every refused attempt.
    let server = BinaryServer::spawn(NACELLE, &data, &[])?;
    server.api.wait_ready().await?;
    assert_eq!(
        server.api.get("", GROUP, "kept").await?.as_deref(),
        Some("original")
    );
    Ok(())
}
