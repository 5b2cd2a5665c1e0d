//! The data on disk is private (docs/configuration.md, "File permissions"): a fresh data
//! directory is 0700 and the database, its WAL and shared-memory files and a backup are
//! 0600, whatever the umask the server was started with; an existing directory or
//! database open to other users is named in a warning with its fix, or refused with
//! `--strict-permissions`.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nacelle_testkit::server::{settings_for, BinaryServer};
use nacelle_testkit::TestResult;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");

/// The usual umask of a shell: without the server's own care its files would be 0644.
fn usual_umask() {
    let _previous = rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o022));
}

fn mode(p: &Path) -> TestResult<u32> {
    Ok(std::fs::metadata(p)
        .map_err(|e| format!("{}: {e}", p.display()))?
        .permissions()
        .mode()
        & 0o777)
}

fn set_mode(p: &Path, mode: u32) -> TestResult {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Asserts the data directory is 0700 and the database with its `-wal` and `-shm` 0600.
fn assert_private(data: &Path) -> TestResult {
    assert_eq!(mode(data)?, 0o700, "data directory {}", data.display());
    for name in ["nacelle.db", "nacelle.db-wal", "nacelle.db-shm"] {
        let file = data.join(name);
        assert_eq!(mode(&file)?, 0o600, "{}", file.display());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_started_in_process_creates_its_files_private_under_umask_022() -> TestResult {
    usual_umask();
    let tmp = tempfile::tempdir()?;
    let data = tmp.path().join("fresh").join("data");
    let server = nacelle::start(&settings_for(&data, |_| {})).await?;
    let api = nacelle_testkit::api::Api::new(server.http_addr)?;
    api.wait_ready().await?;
    api.publish("", "MODES", "secret.properties", "password=hunter2")
        .await?;
    assert_private(&data)?;
    server.shutdown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_creates_a_private_data_dir_database_wal_and_backup() -> TestResult {
    usual_umask();
    let tmp = tempfile::tempdir()?;
    let data = tmp.path().join("data");
    let server = BinaryServer::spawn(NACELLE, &data, &[])?;
    server.api.wait_ready().await?;
    server
        .api
        .publish("", "MODES", "secret.properties", "password=hunter2")
        .await?;
    assert_private(&data)?;

    let backups = tmp.path().join("backups");
    std::fs::create_dir(&backups)?;
    set_mode(&backups, 0o755)?;
    let out = backups.join("nacelle-backup.db");
    let done = Command::new(NACELLE)
        .arg("backup")
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .output()?;
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(mode(&out)?, 0o600, "backup {}", out.display());
    Ok(())
}

/// Runs `nacelle serve` on `data` with `extra` flags and returns its log up to the line
/// saying it listens (then it is killed), or its whole log and exit status when it stops
/// before that.
fn log_until_listening(data: &Path, extra: &[&str]) -> TestResult<(Vec<String>, Option<i32>)> {
    let mut child: Child = Command::new(NACELLE)
        .arg("serve")
        .arg("--data-dir")
        .arg(data)
        .args(["--bind", "127.0.0.1", "--port", "0", "--grpc-port", "0"])
        .args(["--auth", "off", "--log-format", "json"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let listening = line.contains("http listening on");
            lines.push(line);
            if listening {
                break;
            }
        }
        // The test may have stopped waiting; nothing to do then.
        let _sent = tx.send(lines);
    });
    let lines = rx.recv_timeout(Duration::from_secs(60))?;
    let status = match child.try_wait()? {
        Some(status) => status.code(),
        None if lines.iter().any(|l| l.contains("http listening on")) => {
            child.kill()?;
            child.wait()?;
            None
        }
        None => child.wait()?.code(),
    };
    Ok((lines, status))
}

#[test]
fn an_open_data_dir_and_database_are_named_with_their_fix_or_refused_when_strict() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let data = tmp.path().join("data");
    std::fs::create_dir(&data)?;
    set_mode(&data, 0o755)?;
    let db = data.join("nacelle.db");
    std::fs::write(&db, b"")?;
    set_mode(&db, 0o644)?;

    let (log, status) = log_until_listening(&data, &[])?;
    let text = log.join("\n");
    assert_eq!(status, None, "it starts (a warning only):\n{text}");
    for fix in [
        format!("chmod 700 {}", data.display()),
        format!("chmod 600 {}", db.display()),
    ] {
        assert!(
            log.iter()
                .any(|l| l.contains("WARN") && l.contains("PRIVATE DATA OPEN") && l.contains(&fix)),
            "no warning with `{fix}`:\n{text}"
        );
    }
    // Nothing was changed behind the operator's back.
    assert_eq!(mode(&data)?, 0o755);

    let (log, status) = log_until_listening(&data, &["--strict-permissions"])?;
    let text = log.join("\n");
    assert!(
        matches!(status, Some(code) if code != 0),
        "refused:\n{text}"
    );
    assert!(
        text.contains("refusing to start (strict_permissions)")
            && text.contains(&format!("chmod 700 {}", data.display())),
        "{text}"
    );

    // Once fixed, the strict server starts.
    set_mode(&data, 0o700)?;
    for name in ["nacelle.db", "nacelle.db-wal", "nacelle.db-shm"] {
        let file = data.join(name);
        if file.exists() {
            set_mode(&file, 0o600)?;
        }
    }
    let (log, status) = log_until_listening(&data, &["--strict-permissions"])?;
    assert_eq!(status, None, "{}", log.join("\n"));
    assert!(!log.iter().any(|l| l.contains("PRIVATE DATA OPEN")));
    Ok(())
}
