//! Backup, restore and check of the embedded SQLite database, usable while a server runs
//! on it (`nacelle backup`, `nacelle restore`, `nacelle check`).
//!
//! A backup uses SQLite's online backup API with the whole copy done in one step, so it
//! reads one consistent snapshot: in WAL mode that snapshot holds every transaction that
//! committed before the copy began (every write a client got an answer for) and none that
//! committed after, and writers are never blocked by it. The copy is written to a temporary
//! file beside the destination, switched to a self-contained rollback journal, checked with
//! `PRAGMA integrity_check`, synced, and only then renamed into place: a backup file that
//! exists is complete.
//!
//! MySQL/MariaDB and PostgreSQL are backed up with their own tools (`mysqldump`,
//! `pg_dump`); see `docs/operations.md`.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use thiserror::Error;

use crate::schema::missing_columns;

/// How long a backup or check waits for a lock the server holds (a checkpoint) before
/// giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// What went wrong with a backup, restore or check.
#[derive(Debug, Error)]
pub enum BackupError {
    /// SQLite refused an operation.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A file could not be read, written, synced or renamed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The operation would destroy or misuse something; nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// `PRAGMA integrity_check` found damage.
    #[error("integrity check failed: {0}")]
    Corrupt(String),
    /// Tables or columns Nacelle needs are missing: not a Nacelle/Nacos database.
    #[error("not a Nacelle database: missing {}", .0.join(", "))]
    Schema(Vec<String>),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
    let what = what.into();
    move |source| BackupError::Io { what, source }
}

/// What a database holds, as a backup, restore or check reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbSummary {
    /// Size of the database file in bytes.
    pub bytes: u64,
    /// Rows of `config_info`.
    pub configs: i64,
    /// Rows of `his_config_info`.
    pub history_rows: i64,
    /// The newest history `nid`: the last change the file holds.
    pub max_nid: i64,
}

/// The file of a `sqlite://path` URL (with or without `?options`); `None` for any other
/// scheme.
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// Copies the database at `src` (which a server may be using) to a new file `out`.
pub fn backup(src: &Path, out: &Path) -> Result<DbSummary, BackupError> {
    if !src.is_file() {
        return Err(BackupError::Refused(format!(
            "no database at {}",
            src.display()
        )));
    }
    if out.exists() {
        return Err(BackupError::Refused(format!(
            "{} exists; choose a new file",
            out.display()
        )));
    }
    let source = open_read_only(src)?;
    let tmp = partial_path(out);
    remove_if_present(&tmp)?;
    let result = copy_into(&source, &tmp).and_then(|()| finish_file(&tmp, out));
    if result.is_err() {
        // A failed backup leaves no partial file behind; the error says what failed.
        let _removed = fs::remove_file(&tmp);
    }
    result?;
    summarize(&open_read_only(out)?, out)
}

/// Replaces the database at `target` with the backup `from`, after checking the backup.
/// The server must be stopped: a running one would keep serving what it loaded. Refuses
/// to overwrite an existing database unless `force`.
pub fn restore(from: &Path, target: &Path, force: bool) -> Result<DbSummary, BackupError> {
    let backup = open_read_only(from)?;
    verify(&backup)?;
    if target.exists() && !force {
        return Err(BackupError::Refused(format!(
            "{} exists; stop its server and pass --force to replace it",
            target.display()
        )));
    }
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    // Through SQLite, not a file copy: it replaces the pages under SQLite's own locks and
    // takes care of a WAL file the target may still have.
    let mut dest = Connection::open(target)?;
    dest.busy_timeout(BUSY_TIMEOUT)?;
    copy_all(&backup, &mut dest)?;
    // The server runs in WAL mode; so does the restored file from now on.
    dest.pragma_update(None, "journal_mode", "WAL")?;
    verify(&dest)?;
    drop(dest);
    summarize(&open_read_only(target)?, target)
}

/// Checks a database file: integrity and the tables and columns Nacelle needs.
pub fn check(path: &Path) -> Result<DbSummary, BackupError> {
    let conn = open_read_only(path)?;
    verify(&conn)?;
    summarize(&conn, path)
}

/// Copies every page of `src` into `dest` in one backup step: one read transaction on the
/// source, so one consistent snapshot. A lock held by a writer of the destination, or a
/// checkpoint of the source, is waited out (up to [`BUSY_TIMEOUT`]).
fn copy_all(src: &Connection, dest: &mut Connection) -> Result<(), BackupError> {
    let backup = Backup::new(src, dest)?;
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        // -1: all remaining pages at once.
        match backup.step(-1)? {
            StepResult::Done => return Ok(()),
            StepResult::More => {}
            StepResult::Busy | StepResult::Locked => {
                if std::time::Instant::now() > deadline {
                    return Err(BackupError::Refused(format!(
                        "the database stayed locked for {} s",
                        BUSY_TIMEOUT.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // A future variant of rusqlite's non-exhaustive enum: step again.
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn open_read_only(path: &Path) -> Result<Connection, BackupError> {
    if !path.is_file() {
        return Err(BackupError::Refused(format!(
            "no database at {}",
            path.display()
        )));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

fn partial_path(out: &Path) -> PathBuf {
    let mut name = out
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".partial");
    out.with_file_name(name)
}

fn remove_if_present(path: &Path) -> Result<(), BackupError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(format!("removing {}", path.display()))(e)),
    }
}

/// Copies `source` into a new file at `tmp` as one snapshot, then makes the copy a single
/// self-contained file and checks it.
fn copy_into(source: &Connection, tmp: &Path) -> Result<(), BackupError> {
    let mut dest = Connection::open(tmp)?;
    copy_all(source, &mut dest)?;
    dest.pragma_update(None, "journal_mode", "DELETE")?;
    verify(&dest)?;
    Ok(())
}

/// Syncs `tmp`, renames it to `out` and syncs the directory, so a crash leaves either no
/// backup or a complete one.
fn finish_file(tmp: &Path, out: &Path) -> Result<(), BackupError> {
    File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(io(format!("syncing {}", tmp.display())))?;
    fs::rename(tmp, out).map_err(io(format!("renaming into {}", out.display())))?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(format!("syncing {}", dir.display())))?;
    }
    Ok(())
}

fn verify(conn: &Connection) -> Result<(), BackupError> {
    let problems: Vec<String> = conn
        .prepare("PRAGMA integrity_check")?
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    if problems.iter().any(|p| p != "ok") {
        return Err(BackupError::Corrupt(problems.join("; ")));
    }
    let present: Vec<(String, String)> = conn
        .prepare(
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table'",
        )?
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<_, _>>()?;
    let missing = missing_columns(&present);
    if !missing.is_empty() {
        return Err(BackupError::Schema(missing));
    }
    Ok(())
}

fn summarize(conn: &Connection, path: &Path) -> Result<DbSummary, BackupError> {
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
    Ok(DbSummary {
        bytes: fs::metadata(path)
            .map_err(io(format!("reading {}", path.display())))?
            .len(),
        configs: count("SELECT COUNT(*) FROM config_info")?,
        history_rows: count("SELECT COUNT(*) FROM his_config_info")?,
        max_nid: count("SELECT COALESCE(MAX(nid), 0) FROM his_config_info")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls() {
        assert_eq!(
            sqlite_file("sqlite:///var/n/nacelle.db?mode=rwc"),
            Some(PathBuf::from("/var/n/nacelle.db"))
        );
        assert_eq!(
            sqlite_file("sqlite://rel.db"),
            Some(PathBuf::from("rel.db"))
        );
        assert_eq!(sqlite_file("mysql://root@h/db"), None);
        assert_eq!(sqlite_file("sqlite://"), None);
    }

    #[test]
    fn refuses_what_is_not_a_nacelle_database() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let other = dir.path().join("other.db");
        Connection::open(&other)?.execute_batch("CREATE TABLE t (x INTEGER);")?;
        assert!(matches!(check(&other), Err(BackupError::Schema(_))));
        let garbage = dir.path().join("garbage.db");
        fs::write(&garbage, vec![7u8; 8192])?;
        assert!(check(&garbage).is_err());
        assert!(matches!(
            check(&dir.path().join("absent.db")),
            Err(BackupError::Refused(_))
        ));
        Ok(())
    }
}
