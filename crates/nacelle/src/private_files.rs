//! The data on disk is private (docs/deploy.md, "File permissions"). The SQLite database
//! holds every config (often credentials), the user hashes and, without a master key, the
//! data keys of encrypted configs; the data directory also holds the generated token
//! secret and the first administrator's password.
//!
//! - The data directory is created `0700` and a missing SQLite database file `0600`, with
//!   the mode given at creation (whatever the process umask). SQLite creates the `-wal`
//!   and `-shm` files of a database with the database file's own mode, so they are `0600`
//!   too.
//! - The `nacelle` binary also sets its umask to `0o077` for `serve`, `backup`,
//!   `restore` and `check` (`main.rs`), so whatever else it creates (a backup, a restored
//!   database, a directory on the way) is private as well.
//! - At start, an existing data directory, database file (with its `-wal`/`-shm`) or
//!   secret file in the data directory that other users may read or write is reported:
//!   a warning per path naming the fix (`chmod 700 …`), or a refusal to start with
//!   `strict_permissions`.
//!
//! Everything here is Unix-only; elsewhere the functions do nothing.

use std::io;
use std::path::{Path, PathBuf};

use crate::Settings;

/// Mode of the data directory.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the database, its WAL and shared-memory files, backups and secret files.
pub const FILE_MODE: u32 = 0o600;
/// The umask the binary sets for its server and maintenance commands.
pub const UMASK: u32 = 0o077;

/// Creates `dir` (and missing parents) with the data directory's mode on the last
/// component; parents are created as `create_dir_all` creates them (the process umask
/// decides). An existing directory is left as it is ([`loose_paths`] reports it).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(DIR_MODE);
    }
    match builder.create(dir) {
        Ok(()) => Ok(()),
        // Created meanwhile by someone else: it exists, which is all that was asked.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The SQLite file a database URL names, when it is a file on disk (not `:memory:`, not
/// an in-memory URI).
pub fn sqlite_path(url: &str) -> Option<PathBuf> {
    if url.contains("mode=memory") {
        return None;
    }
    nacelle_store::backup::sqlite_file(url).filter(|p| !p.to_string_lossy().starts_with(':'))
}

/// Creates the database file empty with [`FILE_MODE`] when it does not exist yet (SQLite
/// takes an empty file as an empty database), so SQLite never creates it with its own
/// default mode (`0644` less the umask). Returns whether it created the file. A missing
/// parent directory is left for the store to report.
pub fn create_private_file(path: &Path) -> io::Result<bool> {
    if path
        .parent()
        .is_some_and(|p| !p.as_os_str().is_empty() && !p.is_dir())
    {
        return Ok(false);
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    match options.open(path) {
        Ok(_file) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// A path other users may read or write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoosePath {
    pub path: PathBuf,
    /// Its permission bits (`0o755`).
    pub mode: u32,
    /// Whether it is a directory.
    pub dir: bool,
}

impl LoosePath {
    /// The command that makes it private.
    pub fn fix(&self) -> String {
        let mode = if self.dir { "700" } else { "600" };
        format!("chmod {mode} {}", self.path.display())
    }
}

/// The group/other permission bits of `path`, when it exists and has any.
#[cfg(unix)]
fn loose(path: &Path) -> Option<LoosePath> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| LoosePath {
        path: path.to_path_buf(),
        mode,
        dir: meta.is_dir(),
    })
}

#[cfg(not(unix))]
fn loose(_path: &Path) -> Option<LoosePath> {
    None
}

/// Every private path of a server with these settings that other users may read or
/// write: the data directory, the SQLite database (and the directory holding it, when
/// that is not the data directory) with its `-wal` and `-shm` files, and the secret files
/// the server keeps in the data directory.
pub fn loose_paths(settings: &Settings) -> Vec<LoosePath> {
    let mut paths = vec![settings.data_dir.clone()];
    if let Some(db) = sqlite_path(&settings.database_url()) {
        if let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !same_dir(parent, &settings.data_dir) {
                paths.push(parent.to_path_buf());
            }
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut name = db.clone().into_os_string();
            name.push(suffix);
            paths.push(PathBuf::from(name));
        }
    }
    for file in [
        crate::auth_setup::TOKEN_SECRET_FILE,
        crate::auth_setup::INITIAL_PASSWORD_FILE,
    ] {
        paths.push(settings.data_dir.join(file));
    }
    paths.iter().filter_map(|p| loose(p)).collect()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Creates the data directory and the SQLite file privately, then reports what other
/// users can reach: a warning per path (with the fix), or an error when
/// `settings.strict_permissions`.
pub fn prepare(settings: &Settings) -> anyhow::Result<()> {
    use anyhow::Context;
    create_private_dir(&settings.data_dir)
        .with_context(|| format!("creating data directory {}", settings.data_dir.display()))?;
    if let Some(db) = sqlite_path(&settings.database_url()) {
        create_private_file(&db).with_context(|| format!("creating database {}", db.display()))?;
    }
    let loose = loose_paths(settings);
    if loose.is_empty() {
        return Ok(());
    }
    for p in &loose {
        let what = if p.dir { "directory" } else { "file" };
        if settings.strict_permissions {
            tracing::error!(
                path = %p.path.display(),
                mode = format!("{:o}", p.mode),
                fix = %p.fix(),
                "private {what} is open to other users of this machine"
            );
        } else {
            tracing::warn!(
                path = %p.path.display(),
                mode = format!("{:o}", p.mode),
                fix = %p.fix(),
                "PRIVATE DATA OPEN TO OTHER USERS: this {what} holds configs and secrets \
                 but other users of this machine may read it; run the fix, or start with \
                 --strict-permissions to refuse"
            );
        }
    }
    if settings.strict_permissions {
        let fixes: Vec<String> = loose.iter().map(LoosePath::fix).collect();
        anyhow::bail!(
            "refusing to start (strict_permissions): other users of this machine may read \
             private data; fix with: {}",
            fixes.join("; ")
        );
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn mode(p: &Path) -> io::Result<u32> {
        Ok(std::fs::metadata(p)?.permissions().mode() & 0o777)
    }

    fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
    }

    #[test]
    fn a_created_directory_and_file_are_private() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("a/b/data");
        create_private_dir(&dir)?;
        assert_eq!(mode(&dir)?, DIR_MODE);
        let db = dir.join("nacelle.db");
        assert!(create_private_file(&db)?);
        assert_eq!(mode(&db)?, FILE_MODE);
        assert!(!create_private_file(&db)?, "an existing file is kept");
        Ok(())
    }

    #[test]
    fn sqlite_paths_skip_memory_databases() {
        assert_eq!(sqlite_path("sqlite::memory:"), None);
        assert_eq!(sqlite_path("sqlite://x.db?mode=memory"), None);
        assert_eq!(sqlite_path("mysql://h/db"), None);
        assert_eq!(
            sqlite_path("sqlite:///var/lib/nacelle/nacelle.db?mode=rwc"),
            Some(PathBuf::from("/var/lib/nacelle/nacelle.db"))
        );
    }

    #[test]
    fn loose_paths_name_each_open_path_and_its_fix() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("data");
        std::fs::create_dir(&dir)?;
        set_mode(&dir, 0o755)?;
        let db = dir.join("nacelle.db");
        std::fs::write(&db, b"")?;
        set_mode(&db, 0o640)?;
        let settings = Settings {
            data_dir: dir.clone(),
            ..Settings::default()
        };
        let found = loose_paths(&settings);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].fix(), format!("chmod 700 {}", dir.display()));
        assert_eq!(found[1].fix(), format!("chmod 600 {}", db.display()));
        assert_eq!(found[1].mode, 0o640);
        set_mode(&dir, 0o700)?;
        set_mode(&db, 0o600)?;
        assert!(loose_paths(&settings).is_empty());
        Ok(())
    }
}
