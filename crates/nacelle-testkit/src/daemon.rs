//! What the replicated database clusters ([`crate::galera`], [`crate::standby`]) share:
//! a child process killed by its PID when its guard drops (also when the test panics),
//! finding Debian's binaries, running a command as the user a server must run as, and
//! waiting with a bound.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A server process started by a test; SIGKILLed (by its PID) and reaped when dropped.
#[derive(Debug)]
pub struct Daemon {
    /// What it is, for messages.
    pub name: String,
    child: Child,
}

impl Daemon {
    /// Starts `cmd` with its output going to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> anyhow::Result<Daemon> {
        let out = std::fs::File::create(log).with_context(|| format!("creating {log:?}"))?;
        let err = out.try_clone()?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {name}: {cmd:?}"))?;
        Ok(Daemon {
            name: name.to_string(),
            child,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` when it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        // Err: it had already exited; the wait reaps it either way.
        let _gone = self.child.kill();
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Errors: already exited (and reaped).
        let _killed = self.child.kill();
        let _reaped = self.child.wait();
    }
}

/// Whether this process runs as root (then database servers run as their own users:
/// PostgreSQL refuses root, and Galera's rsync state transfer cannot write as `nobody`).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `cmd` run as `user` when we are root (through `runuser`), as ourselves otherwise.
pub fn command_as(user: &str, program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", user, "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// Gives `path` (recursively) to `user` when we are root; nothing otherwise.
pub fn give_to(user: &str, path: &Path) -> anyhow::Result<()> {
    if is_root() {
        run(Command::new("chown").arg("-R").arg(user).arg(path))?;
    }
    Ok(())
}

/// Runs `cmd` to completion; fails with its output when it fails.
pub fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!("{cmd:?} failed ({}):\n{}", out.status, tail(&text, 30));
    }
    Ok(text)
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The last `n` lines of the file at `path` (empty when unreadable).
pub fn tail_file(path: &Path, n: usize) -> String {
    std::fs::read(path)
        .map(|b| tail(&String::from_utf8_lossy(&b), n))
        .unwrap_or_default()
}

/// A program from `PATH`, or from one of `dirs` (the first that has it).
pub fn find_program(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(dirs.iter().cloned())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// PostgreSQL's program `name`: from `PATH`, else Debian's `/usr/lib/postgresql/<newest>/bin`
/// (where `scripts/test-databases.sh` finds it too).
pub fn pg_program(name: &str) -> anyhow::Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(v.0));
    let dirs: Vec<PathBuf> = versions.into_iter().map(|(_, d)| d).collect();
    // Debian's /usr/bin wrappers pick a cluster; the versioned directory is what we want.
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .or_else(|| find_program(name, &[]))
        .with_context(|| {
            format!("PostgreSQL's {name} not found (Debian: apt-get install postgresql)")
        })
}

/// Polls `check` every 100 ms until it answers `Some`, failing after `within` with the
/// last error and `what`.
pub async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + within;
    let mut last = String::from("not yet");
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() > deadline {
            bail!("{what}: not within {within:?} ({last})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
