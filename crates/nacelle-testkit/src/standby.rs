//! A PostgreSQL primary with a streaming standby for a test (synchronous, or asynchronous
//! through a link the test cuts), reached through HAProxy, from
//! Debian's binaries (PostgreSQL's `initdb`, `pg_ctl`, `pg_basebackup`, `psql`; `haproxy`),
//! on 127.0.0.1 in a temp dir, stopped when the [`PgStandby`] drops (also on panic).
//!
//! - The standby is a `pg_basebackup -R` copy of the primary, streaming its WAL. The primary
//!   runs with `synchronous_standby_names = '*'`: a commit returns only once the standby
//!   has flushed it, so a commit the primary acknowledged survives the primary's death.
//!   (Given on the primary's command line only: the standby, once promoted, has no standby
//!   of its own and must not wait for one.)
//! - The connection point that moves on failover is HAProxy in TCP mode: both servers are
//!   in its backend and an external check (`pg_is_in_recovery()` over `psql`, every
//!   second; down after 3 failures, up after 1 success) keeps up only the writable one. While neither is writable (the primary dead,
//!   the standby not yet promoted) HAProxy closes new connections at once, so clients fail
//!   fast; connections to a server marked down are shut. sqlx 0.8's PostgreSQL driver
//!   has no multi-host URLs or `target_session_attrs` (launchbadge/sqlx#2290), so a
//!   proxy is the way for Nacelle.
//! - [`PgStandby::kill_primary`] SIGKILLs the primary's postmaster and every backend of it
//!   (a crash, no shutdown); [`PgStandby::promote`] promotes the standby (`pg_ctl promote`)
//!   and waits until the proxy leads to it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::{Connection, Executor, Row};

use crate::daemon::{self, Daemon};
use crate::{free_port, Proxy};

/// The user PostgreSQL runs as when we are root (it refuses root).
const PG_USER: &str = "postgres";

/// How often HAProxy checks which server is writable. The check (a `psql` run) must
/// answer within this interval too: at 250 ms, checks on a loaded 2-core machine timed out
/// now and then, and the flapping server's sessions were shut with it.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// One PostgreSQL server.
#[derive(Debug)]
struct PgServer {
    port: u16,
    data: PathBuf,
    log: PathBuf,
    /// Running (started and not killed or stopped).
    running: bool,
}

/// A primary, its synchronous streaming standby and HAProxy in front of them.
#[derive(Debug)]
pub struct PgStandby {
    primary: PgServer,
    standby: PgServer,
    /// Where clients connect: HAProxy's port on 127.0.0.1.
    pub proxy_port: u16,
    haproxy: Daemon,
    /// The replication link of an asynchronous standby ([`PgStandby::start_async`]).
    link: Option<Proxy>,
    /// Holds everything; declared last, removed after the servers are stopped.
    dir: tempfile::TempDir,
}

/// How the standby replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replication {
    /// A commit waits for the standby.
    Synchronous,
    /// A commit does not wait; the standby streams through a [`Proxy`] a test can cut.
    Asynchronous,
}

impl PgStandby {
    /// Starts the primary, copies it into a standby that streams from it synchronously,
    /// and HAProxy in front of both; returns once a connection through HAProxy reaches the
    /// writable primary.
    pub async fn start() -> anyhow::Result<PgStandby> {
        Self::start_with(Replication::Synchronous).await
    }

    /// Like [`PgStandby::start`], but the standby replicates asynchronously, through a
    /// TCP proxy that [`PgStandby::cut_replication`] cuts: commits made after the cut are
    /// acknowledged by the primary and never reach the standby, so promoting it loses
    /// them (what asynchronous replication risks).
    pub async fn start_async() -> anyhow::Result<PgStandby> {
        Self::start_with(Replication::Asynchronous).await
    }

    async fn start_with(replication: Replication) -> anyhow::Result<PgStandby> {
        let haproxy = daemon::find_program("haproxy", &[PathBuf::from("/usr/sbin")])
            .context("haproxy not found (Debian: apt-get install haproxy)")?;
        let (initdb, pg_ctl, basebackup, psql) = (
            daemon::pg_program("initdb")?,
            daemon::pg_program("pg_ctl")?,
            daemon::pg_program("pg_basebackup")?,
            daemon::pg_program("psql")?,
        );
        let dir = tempfile::Builder::new()
            .prefix("nacelle-pg-standby.")
            .tempdir()?;
        // PostgreSQL's user must reach its directories inside.
        daemon::run(Command::new("chmod").arg("755").arg(dir.path()))?;
        daemon::give_to(PG_USER, dir.path())?;
        let server = |name: &str| -> anyhow::Result<PgServer> {
            Ok(PgServer {
                port: free_port()?,
                data: dir.path().join(name),
                log: dir.path().join(format!("{name}.log")),
                running: false,
            })
        };
        let (mut primary, mut standby) = (server("primary")?, server("standby")?);
        daemon::run(
            daemon::command_as(PG_USER, &initdb)
                .arg("-D")
                .arg(&primary.data)
                .args(["-U", "postgres", "-A", "trust", "-E", "UTF8"])
                .args(["--locale=C.UTF-8", "--no-sync"]),
        )
        .context("initdb")?;
        let socket_dir = dir.path().display().to_string();
        // Synchronous replication on the primary only (see the module's comment).
        let synchronous = match replication {
            Replication::Synchronous => "-c synchronous_standby_names=* -c synchronous_commit=on",
            Replication::Asynchronous => "",
        };
        let options = format!(
            "-p {} -k {socket_dir} -c listen_addresses=127.0.0.1 -c wal_level=replica \
             -c max_wal_senders=5 -c max_connections=300 -c fsync=off {synchronous}",
            primary.port
        );
        start_server(&pg_ctl, &mut primary, &options)?;
        // An asynchronous standby copies and streams through the link (`-R` writes the
        // address it was copied from as the one to stream from).
        let link = match replication {
            Replication::Synchronous => None,
            Replication::Asynchronous => {
                let target = format!("127.0.0.1:{}", primary.port).parse()?;
                Some(Proxy::start(target).await?)
            }
        };
        let source = link.as_ref().map_or(primary.port, Proxy::port);
        daemon::run(
            daemon::command_as(PG_USER, &basebackup)
                .args(["-h", "127.0.0.1", "-p", &source.to_string()])
                .args(["-U", "postgres", "-D"])
                .arg(&standby.data)
                .args(["-R", "-X", "stream", "--no-sync"]),
        )
        .context("pg_basebackup")?;
        let options = format!(
            "-p {} -k {socket_dir} -c listen_addresses=127.0.0.1 -c max_connections=300 \
             -c fsync=off -c hot_standby=on",
            standby.port
        );
        start_server(&pg_ctl, &mut standby, &options)?;

        // The health check: up only when the server is writable (not in recovery).
        let check = dir.path().join("check-writable.sh");
        std::fs::write(
            &check,
            format!(
                "#!/bin/sh\n\
                 # HAProxy's external check: $3 is the server's address, $4 its port.\n\
                 PGCONNECT_TIMEOUT=1 {} -X -h \"$3\" -p \"$4\" -U postgres -d postgres -tAc \
                 \"SELECT CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END\" \
                 2>/dev/null | grep -qx primary\n",
                psql.display()
            ),
        )?;
        daemon::run(Command::new("chmod").arg("755").arg(&check))?;
        let proxy_port = free_port()?;
        let inter = CHECK_INTERVAL.as_millis();
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(
            &config,
            format!(
                "global\n    external-check\n    insecure-fork-wanted\n    maxconn 4000\n\
                 defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1h\n\
                 \x20   timeout server 1h\n    timeout check 3s\n\
                 listen postgres\n    bind 127.0.0.1:{proxy_port}\n    balance first\n\
                 \x20   option external-check\n    external-check path \"/usr/bin:/bin\"\n\
                 \x20   external-check command {check}\n\
                 \x20   default-server inter {inter}ms fall 3 rise 1 on-marked-down shutdown-sessions\n\
                 \x20   server primary 127.0.0.1:{} check\n\
                 \x20   server standby 127.0.0.1:{} check\n",
                primary.port,
                standby.port,
                check = check.display(),
            ),
        )?;
        let mut cmd = Command::new(haproxy);
        cmd.arg("-db").arg("-f").arg(&config);
        let haproxy = Daemon::spawn("haproxy", cmd, &dir.path().join("haproxy.log"))?;
        let pg = PgStandby {
            primary,
            standby,
            proxy_port,
            haproxy,
            link,
            dir,
        };
        let wanted = match replication {
            Replication::Synchronous => "sync",
            Replication::Asynchronous => "async",
        };
        // The standby streams (synchronously or not), and HAProxy leads to the primary.
        daemon::wait_for("the standby streaming", Duration::from_secs(30), || async {
            let mut conn = sqlx::PgConnection::connect(&pg.direct_url(true)).await?;
            let row = conn
                .fetch_optional("SELECT sync_state FROM pg_stat_replication")
                .await?;
            conn.close().await?;
            Ok(row
                .map(|r| r.try_get::<String, _>(0))
                .transpose()?
                .filter(|s| s == wanted))
        })
        .await?;
        pg.wait_writable_through_proxy(Duration::from_secs(30))
            .await?;
        Ok(pg)
    }

    /// `postgres://postgres@127.0.0.1:<HAProxy's port>` (no database).
    pub fn server_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}", self.proxy_port)
    }

    /// `postgres://postgres@127.0.0.1:<HAProxy's port>/<database>`.
    pub fn url(&self, database: &str) -> String {
        format!("{}/{database}", self.server_url())
    }

    /// The primary's (`true`) or the standby's URL, not through the proxy, to the
    /// `postgres` database.
    pub fn direct_url(&self, primary: bool) -> String {
        let port = if primary {
            self.primary.port
        } else {
            self.standby.port
        };
        format!("postgres://postgres@127.0.0.1:{port}/postgres")
    }

    /// Creates `name` through the proxy (on the primary; streamed to the standby).
    pub async fn create_database(&self, name: &str) -> anyhow::Result<()> {
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres")).await?;
        conn.execute(
            format!("CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0").as_str(),
        )
        .await?;
        conn.close().await?;
        Ok(())
    }

    /// SIGKILLs the primary's postmaster and all its processes (by PID): a crash.
    pub fn kill_primary(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.primary.running, "the primary is not running");
        let pid_file = self.primary.data.join("postmaster.pid");
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .with_context(|| format!("reading {pid_file:?}"))?
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .with_context(|| format!("no pid in {pid_file:?}"))?;
        // Stopped, the postmaster forks no new backend while its children are listed.
        daemon::run(Command::new("kill").args(["-STOP", &pid.to_string()]))?;
        let mut pids = vec![pid.to_string()];
        pids.extend(children_of(pid).iter().map(u32::to_string));
        // A backend may exit between the listing and the kill: `kill` then fails for it
        // (and still kills the others); what matters is that the postmaster is gone.
        let _some_gone_already = Command::new("kill").arg("-9").args(&pids).output();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the primary (pid {pid}) survived SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.primary.running = false;
        Ok(())
    }

    /// Cuts an asynchronous standby's replication link: what the primary commits from now
    /// on never reaches the standby.
    pub fn cut_replication(&self) -> anyhow::Result<()> {
        self.link
            .as_ref()
            .context("a synchronous standby has no link to cut (start_async)")?
            .cut();
        Ok(())
    }

    /// Waits until the standby has replayed everything the primary committed so far.
    pub async fn wait_replayed(&self) -> anyhow::Result<()> {
        let mut primary = sqlx::PgConnection::connect(&self.direct_url(true)).await?;
        let lsn: String = primary
            .fetch_one("SELECT pg_current_wal_lsn()::text")
            .await?
            .try_get(0)?;
        primary.close().await?;
        let url = self.direct_url(false);
        daemon::wait_for("the standby replaying", Duration::from_secs(30), || async {
            let mut standby = sqlx::PgConnection::connect(&url).await?;
            let behind: bool = sqlx::query("SELECT pg_last_wal_replay_lsn() < $1::pg_lsn")
                .bind(&lsn)
                .fetch_one(&mut standby)
                .await?
                .try_get(0)?;
            standby.close().await?;
            Ok((!behind).then_some(()))
        })
        .await
    }

    /// Promotes the standby (`pg_ctl promote`) and waits until a connection through the
    /// proxy reaches it writable; returns how long that took.
    pub async fn promote(&mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let pg_ctl = daemon::pg_program("pg_ctl")?;
        daemon::run(
            daemon::command_as(PG_USER, &pg_ctl)
                .arg("-D")
                .arg(&self.standby.data)
                .args(["-w", "-t", "60", "promote"]),
        )
        .context("pg_ctl promote")?;
        self.wait_writable_through_proxy(Duration::from_secs(30))
            .await?;
        Ok(started.elapsed())
    }

    /// Waits until a connection through the proxy lands on a server out of recovery.
    async fn wait_writable_through_proxy(&self, within: Duration) -> anyhow::Result<()> {
        let url = self.url("postgres");
        daemon::wait_for("HAProxy leading to a writable server", within, || async {
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            let recovering: bool = conn
                .fetch_one("SELECT pg_is_in_recovery()")
                .await?
                .try_get(0)?;
            conn.close().await?;
            Ok((!recovering).then_some(()))
        })
        .await
        .with_context(|| daemon::tail_file(&self.dir.path().join("haproxy.log"), 10))
    }

    /// HAProxy's log (server state changes).
    pub fn proxy_log(&self) -> String {
        daemon::tail_file(&self.dir.path().join("haproxy.log"), 50)
    }

    /// The process id of HAProxy.
    pub fn proxy_pid(&self) -> u32 {
        self.haproxy.pid()
    }
}

/// `pg_ctl start` with `options`, waiting until it accepts connections.
fn start_server(pg_ctl: &Path, server: &mut PgServer, options: &str) -> anyhow::Result<()> {
    daemon::run(
        daemon::command_as(PG_USER, pg_ctl)
            .arg("-D")
            .arg(&server.data)
            .arg("-l")
            .arg(&server.log)
            .args(["-w", "-t", "60", "-o", options, "start"]),
    )
    .with_context(|| daemon::tail_file(&server.log, 20))?;
    server.running = true;
    Ok(())
}

/// Whether `pid` is a zombie (dead, not yet reaped by its parent).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.split_whitespace().next()? == "Z"))
        .unwrap_or(false)
}

/// The processes whose parent is `pid` (from `/proc/<pid>/stat`).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`; comm may hold spaces, so split after the `)`.
            let after = stat.rsplit_once(')')?.1;
            let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == pid).then_some(child)
        })
        .collect()
}

impl Drop for PgStandby {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("HAProxy's log (the test failed):\n{}", self.proxy_log());
        }
        let Ok(pg_ctl) = daemon::pg_program("pg_ctl") else {
            return;
        };
        for server in [&self.primary, &self.standby] {
            if server.running {
                let stopped = daemon::run(
                    daemon::command_as(PG_USER, &pg_ctl)
                        .arg("-D")
                        .arg(&server.data)
                        .args(["-m", "immediate", "-w", "stop"]),
                );
                if let Err(e) = stopped {
                    eprintln!("could not stop PostgreSQL in {:?}: {e:#}", server.data);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_among_its_parents_children() {
        let me = std::process::id();
        let parent = std::fs::read_to_string(format!("/proc/{me}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, a)| a.split_whitespace().nth(1)?.parse::<u32>().ok())
            });
        if let Some(parent) = parent {
            assert!(children_of(parent).contains(&me));
        }
    }
}
