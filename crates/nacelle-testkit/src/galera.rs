//! A MariaDB Galera cluster of its own for a test, from Debian's binaries (`mariadbd` of
//! mariadb-server, `/usr/lib/galera/libgalera_smm.so` of galera-4): every node on 127.0.0.1
//! with four ports of its own (SQL, group communication, IST, SST), in a temp dir, killed
//! when the [`Galera`] drops (also when the test panics).
//!
//! The first node bootstraps the cluster (`--wsrep-new-cluster`); the others join it one
//! at a time by a full state transfer (SST, method `rsync`, which needs no root and no
//! credentials). A node a test SIGKILLs ([`Galera::kill`]) is brought back by
//! [`Galera::restart`] as an operator would: `mariadbd --wsrep-recover` reads the position
//! its InnoDB holds, and it rejoins from there by an incremental transfer (IST) from a
//! donor's gcache.
//!
//! As root, `mariadbd` runs as the `mysql` user (Debian's): rsync's daemon, which the SST
//! runs, would write as `nobody` under root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor, Row};

use crate::daemon::{self, Daemon};
use crate::free_port;

/// Galera's provider library as Debian's galera-4 installs it.
pub const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

/// The user `mariadbd` runs as when we are root.
const MYSQL_USER: &str = "mysql";

/// How long a node may take to start and sync (a full state transfer included).
const SYNC_WITHIN: Duration = Duration::from_secs(90);

/// One database node of the cluster.
#[derive(Debug)]
pub struct GaleraNode {
    /// The SQL port clients connect to.
    pub sql_port: u16,
    /// Group communication (`gmcast.listen_addr`), where the members reach each other.
    pub gcomm_port: u16,
    /// Where this node receives an incremental state transfer.
    pub ist_port: u16,
    /// Where this node receives a full state transfer (rsync's daemon).
    pub sst_port: u16,
    /// Its directory: `data/`, `error.log`, `mysqld.sock`.
    dir: PathBuf,
    /// The running server (`None` while killed).
    process: Option<Daemon>,
}

impl GaleraNode {
    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn error_log(&self) -> PathBuf {
        self.dir.join("error.log")
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("mysqld.sock")
    }
}

/// How a killed node came back ([`Galera::restart`]).
#[derive(Debug, Clone)]
pub struct Rejoin {
    /// The position `--wsrep-recover` read from its InnoDB (`uuid:seqno`).
    pub position: String,
    /// `"IST"` when it caught up incrementally, `"SST"` for a full copy.
    pub transfer: &'static str,
    /// From the restart to `Synced`.
    pub took: Duration,
}

/// A Galera cluster on 127.0.0.1; every node is killed when this drops.
#[derive(Debug)]
pub struct Galera {
    nodes: Vec<GaleraNode>,
    /// `gcomm://` with every node's group port.
    cluster_address: String,
    /// Holds every node's directory; declared last, removed after the nodes are killed.
    _dir: tempfile::TempDir,
}

impl Galera {
    /// Starts an `n`-node cluster (the first bootstraps it, the others join by SST, one at
    /// a time) and waits until every node is `Synced`. `root@127.0.0.1` may connect
    /// without a password ([`Galera::url`]).
    pub async fn start(n: usize) -> anyhow::Result<Galera> {
        anyhow::ensure!(n >= 1, "a cluster needs a node");
        let mariadbd = daemon::find_program("mariadbd", &[PathBuf::from("/usr/sbin")])
            .context("mariadbd not found (Debian: apt-get install mariadb-server)")?;
        anyhow::ensure!(
            Path::new(PROVIDER).is_file(),
            "{PROVIDER} not found (Debian: apt-get install galera-4)"
        );
        let install = daemon::find_program("mariadb-install-db", &[PathBuf::from("/usr/bin")])
            .context("mariadb-install-db not found (Debian: apt-get install mariadb-server)")?;
        let dir = tempfile::Builder::new()
            .prefix("nacelle-galera.")
            .tempdir()?;
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let node_dir = dir.path().join(format!("node{}", i + 1));
            std::fs::create_dir_all(&node_dir)?;
            nodes.push(GaleraNode {
                sql_port: free_port()?,
                gcomm_port: free_port()?,
                ist_port: free_port()?,
                sst_port: free_port()?,
                dir: node_dir,
                process: None,
            });
        }
        // One system database, copied to every node: a joiner's is replaced by its SST
        // anyway, but mariadbd needs one to start.
        let mut cmd = Command::new(install);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", nodes[0].data().display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
        if daemon::is_root() {
            cmd.arg(format!("--user={MYSQL_USER}"));
        }
        daemon::run(&mut cmd).context("mariadb-install-db")?;
        for node in &nodes[1..] {
            daemon::run(
                Command::new("cp")
                    .arg("-a")
                    .arg(nodes[0].data())
                    .arg(node.data()),
            )?;
        }
        daemon::give_to(MYSQL_USER, dir.path())?;
        let cluster_address = format!(
            "gcomm://{}",
            nodes
                .iter()
                .map(|n| format!("127.0.0.1:{}", n.gcomm_port))
                .collect::<Vec<_>>()
                .join(",")
        );
        let mut galera = Galera {
            nodes,
            cluster_address,
            _dir: dir,
        };
        galera.spawn(0, &mariadbd, &["--wsrep-new-cluster"])?;
        galera.wait_synced(0).await?;
        // root over TCP from 127.0.0.1, as Nacelle and the tests connect (no password: the
        // cluster listens on loopback only and lives for one test). Replicated to the
        // joiners by their SST.
        let mut conn = galera.local(0).await?;
        conn.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
            .await?;
        conn.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
            .await?;
        conn.close().await?;
        for i in 1..n {
            galera.spawn(i, &mariadbd, &[])?;
            galera.wait_synced(i).await?;
        }
        Ok(galera)
    }

    /// The nodes.
    pub fn nodes(&self) -> &[GaleraNode] {
        &self.nodes
    }

    /// `mysql://root@127.0.0.1:<node i's SQL port>/<database>`.
    pub fn url(&self, i: usize, database: &str) -> String {
        format!(
            "mysql://root@127.0.0.1:{}/{database}",
            self.nodes[i].sql_port
        )
    }

    /// Creates `name` (utf8mb4) through node `i`; DDL replicates to every node.
    pub async fn create_database(&self, i: usize, name: &str) -> anyhow::Result<()> {
        let mut conn = self.connect(i).await?;
        conn.execute(format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4").as_str())
            .await?;
        conn.close().await?;
        Ok(())
    }

    /// A connection to node `i` (no database selected).
    pub async fn connect(&self, i: usize) -> anyhow::Result<sqlx::MySqlConnection> {
        let url = format!("mysql://root@127.0.0.1:{}", self.nodes[i].sql_port);
        Ok(sqlx::MySqlConnection::connect(&url).await?)
    }

    /// A connection to node `i` over its socket, as root.
    async fn local(&self, i: usize) -> anyhow::Result<sqlx::MySqlConnection> {
        MySqlConnectOptions::new()
            .socket(self.nodes[i].socket())
            .username("root")
            .connect()
            .await
            .with_context(|| format!("connecting to galera node {}'s socket", i + 1))
    }

    /// The status variable `name` (letters and `_`) of node `i` (`wsrep_cluster_size`…).
    pub async fn status(&self, i: usize, name: &str) -> anyhow::Result<String> {
        anyhow::ensure!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "not a variable name: {name}"
        );
        let mut conn = self.local(i).await?;
        let row = conn
            .fetch_optional(format!("SHOW STATUS LIKE '{name}'").as_str())
            .await?;
        conn.close().await?;
        match row {
            Some(r) => Ok(r.try_get::<String, _>(1)?),
            None => bail!("no status variable {name}"),
        }
    }

    /// SIGKILLs node `i`'s server (by its PID).
    pub fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        let node = &mut self.nodes[i];
        let mut process = node.process.take().context("node already down")?;
        process.kill9()
    }

    /// Brings node `i` back after [`Galera::kill`]: recovers its position from InnoDB
    /// (`--wsrep-recover`), starts it there and waits until it is `Synced`.
    pub async fn restart(&mut self, i: usize) -> anyhow::Result<Rejoin> {
        let started = Instant::now();
        let mariadbd = daemon::find_program("mariadbd", &[PathBuf::from("/usr/sbin")])
            .context("mariadbd not found")?;
        let recover_log = self.nodes[i].dir.join("recover.log");
        let mut cmd = Command::new(&mariadbd);
        cmd.args(self.args(i, &recover_log))
            .args(["--wsrep-recover", "--skip-networking"]);
        daemon::run(&mut cmd).context("mariadbd --wsrep-recover")?;
        let log = std::fs::read_to_string(&recover_log).unwrap_or_default();
        let position = log
            .lines()
            .rev()
            .find_map(|l| l.split("Recovered position: ").nth(1))
            .map(|p| p.trim().to_string())
            .with_context(|| {
                format!(
                    "no recovered position in {recover_log:?}:\n{}",
                    daemon::tail(&log, 10)
                )
            })?;
        let start_at = format!("--wsrep-start-position={position}");
        // What the server logs from here on tells how it caught up.
        let error_log = self.nodes[i].error_log();
        let logged_before = std::fs::metadata(&error_log).map_or(0, |m| m.len());
        self.spawn(i, &mariadbd, &[start_at.as_str()])?;
        self.wait_synced(i).await?;
        let log = std::fs::read(&error_log).unwrap_or_default();
        let from = usize::try_from(logged_before).unwrap_or(0).min(log.len());
        let log = String::from_utf8_lossy(&log[from..]);
        let transfer = if log.contains("IST received") {
            "IST"
        } else {
            "SST"
        };
        Ok(Rejoin {
            position,
            transfer,
            took: started.elapsed(),
        })
    }

    /// The arguments of node `i`'s server, its error log at `log`.
    fn args(&self, i: usize, log: &Path) -> Vec<String> {
        let node = &self.nodes[i];
        let mut args = vec![
            "--no-defaults".to_string(),
            format!("--datadir={}", node.data().display()),
            "--bind-address=127.0.0.1".into(),
            format!("--port={}", node.sql_port),
            format!("--socket={}", node.socket().display()),
            format!("--pid-file={}", node.dir.join("mysqld.pid").display()),
            format!("--log-error={}", log.display()),
            "--wsrep-on=ON".into(),
            format!("--wsrep-provider={PROVIDER}"),
            "--wsrep-cluster-name=nacelle-test".into(),
            format!("--wsrep-cluster-address={}", self.cluster_address),
            format!("--wsrep-node-address=127.0.0.1:{}", node.gcomm_port),
            format!("--wsrep-node-name=node{}", i + 1),
            format!(
                "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{};\
                 ist.recv_addr=127.0.0.1:{};gcache.size=128M",
                node.gcomm_port, node.ist_port
            ),
            "--wsrep-sst-method=rsync".into(),
            format!("--wsrep-sst-receive-address=127.0.0.1:{}", node.sst_port),
            // What Galera requires.
            "--binlog-format=ROW".into(),
            "--default-storage-engine=InnoDB".into(),
            "--innodb-autoinc-lock-mode=2".into(),
            // Tuned for tests, as scripts/test-databases.sh's server.
            "--innodb-flush-log-at-trx-commit=2".into(),
            "--innodb-buffer-pool-size=64M".into(),
            "--max-connections=500".into(),
            "--character-set-server=utf8mb4".into(),
            "--collation-server=utf8mb4_general_ci".into(),
        ];
        if daemon::is_root() {
            args.push(format!("--user={MYSQL_USER}"));
        }
        args
    }

    fn spawn(&mut self, i: usize, mariadbd: &Path, extra: &[&str]) -> anyhow::Result<()> {
        let log = self.nodes[i].error_log();
        let mut cmd = Command::new(mariadbd);
        cmd.args(self.args(i, &log)).args(extra);
        let out = self.nodes[i].dir.join("stdout.log");
        let process = Daemon::spawn(&format!("galera node {}", i + 1), cmd, &out)?;
        self.nodes[i].process = Some(process);
        Ok(())
    }

    /// Waits until node `i` is `Synced` and ready; fails early when its server exits.
    pub async fn wait_synced(&mut self, i: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + SYNC_WITHIN;
        loop {
            if let Some(p) = self.nodes[i].process.as_mut() {
                if let Some(status) = p.exited() {
                    bail!(
                        "galera node {} exited ({status}):\n{}",
                        i + 1,
                        daemon::tail_file(&self.nodes[i].error_log(), 25)
                    );
                }
            }
            let state = self.status(i, "wsrep_local_state_comment").await;
            let ready = self.status(i, "wsrep_ready").await;
            if matches!((&state, &ready), (Ok(s), Ok(r)) if s == "Synced" && r == "ON") {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "galera node {} not Synced within {SYNC_WITHIN:?} ({state:?}):\n{}",
                    i + 1,
                    daemon::tail_file(&self.nodes[i].error_log(), 25)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
