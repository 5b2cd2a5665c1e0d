//! The member list: from `--members` or `cluster.conf` (Nacos's format: one `ip:port` per
//! line, `#` starts a comment), re-read when the file changes; this node recognised by
//! its port and a local address; periodic health checks of the others.
//!
//! An entry `dns:<name>:<port>` is every address `name` resolves to, each a member on
//! `port`, resolved again at every health-check round: a Kubernetes headless Service's
//! name lists the ready pods (or every pod with `publishNotReadyAddresses`), so members
//! join and leave with the pods. This node is the address that is local to it. A failed
//! resolution keeps the last member list (logged).
//!
//! The list of the other members is published on a `watch` channel
//! ([`Membership::subscribe_peers`]); whoever needs to act on a change (the notifier)
//! follows it, so this file knows nothing of them.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nacelle_core::now_millis;
use nacelle_service::{MemberInfo, MemberState, MembershipView, NotifyCounts};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::address::parse_member;
use crate::{ClusterError, ClusterOptions};

/// Failed checks after which a member is `DOWN` (before: `SUSPICIOUS`).
const DOWN_AFTER: u32 = 3;

/// Parses the text of a `cluster.conf`.
pub fn parse_conf(text: &str) -> Result<Vec<(String, u16)>, ClusterError> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .flat_map(|l| l.split(',').map(str::trim).filter(|s| !s.is_empty()))
        .map(parse_member)
        .collect()
}

/// The prefix of a member entry resolved through DNS (`dns:<name>:<port>`).
pub const DNS_PREFIX: &str = "dns:";

/// Every address `name:port` resolves to, as members, in address order (a stable list, so
/// an unchanged answer is no change of the member set).
fn resolve_members(name_port: &str) -> Result<Vec<(String, u16)>, ClusterError> {
    let (name, port) = parse_member(name_port)?;
    let mut ips: Vec<IpAddr> = (name.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| ClusterError::Resolve {
            name: format!("{name}:{port}"),
            reason: e.to_string(),
        })?
        .map(|a| a.ip())
        .collect();
    ips.sort();
    ips.dedup();
    Ok(ips.into_iter().map(|ip| (ip.to_string(), port)).collect())
}

/// Whether `ip` is an address of this machine (binding to it succeeds).
fn is_local_ip(ip: IpAddr) -> bool {
    ip.is_loopback()
        || ip.is_unspecified()
        || std::net::TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[derive(Debug, Clone)]
struct Entry {
    host: String,
    port: u16,
    is_self: bool,
    state: MemberState,
    last_refresh_ms: i64,
    fail_count: u32,
}

/// The cluster's members as this node sees them.
#[derive(Debug)]
pub struct Membership {
    explicit: Vec<String>,
    conf_file: PathBuf,
    self_addr: SocketAddr,
    client: reqwest::Client,
    entries: RwLock<Vec<Entry>>,
    conf_mtime: Mutex<Option<SystemTime>>,
    /// The other members' addresses, republished whenever the set changes.
    peers: watch::Sender<Vec<String>>,
}

impl Membership {
    pub(crate) fn new(
        opts: &ClusterOptions,
        client: reqwest::Client,
    ) -> Result<Arc<Self>, ClusterError> {
        let m = Arc::new(Membership {
            explicit: opts.members.clone(),
            conf_file: opts.conf_file.clone(),
            self_addr: opts.self_addr,
            client,
            entries: RwLock::new(Vec::new()),
            conf_mtime: Mutex::new(None),
            peers: watch::Sender::new(Vec::new()),
        });
        match m.reload() {
            Ok(_) => {}
            // A name that does not resolve yet (a pod starting before its DNS record) is no
            // reason not to start: this node alone until a later round resolves it.
            Err(e @ ClusterError::Resolve { .. }) => {
                tracing::warn!(error = %e, "cluster members: this node alone until the name resolves");
                *m.entries.write() = vec![m.self_entry()];
            }
            Err(e) => return Err(e),
        }
        Ok(m)
    }

    /// This node as a member entry.
    fn self_entry(&self) -> Entry {
        Entry {
            host: self.self_addr.ip().to_string(),
            port: self.self_addr.port(),
            is_self: true,
            state: MemberState::Up,
            last_refresh_ms: now_millis(),
            fail_count: 0,
        }
    }

    fn is_self(&self, host: &str, port: u16) -> bool {
        if port != self.self_addr.port() {
            return false;
        }
        match (host, port).to_socket_addrs() {
            Ok(addrs) => addrs
                .map(|a| a.ip())
                .any(|ip| ip == self.self_addr.ip() || is_local_ip(ip)),
            Err(_) => false,
        }
    }

    /// Whether the member list names a DNS entry (re-resolved every round).
    fn has_dns(&self) -> bool {
        self.explicit
            .iter()
            .flat_map(|s| s.split(','))
            .any(|s| s.trim().starts_with(DNS_PREFIX))
    }

    fn read_list(&self) -> Result<Vec<(String, u16)>, ClusterError> {
        if !self.explicit.is_empty() {
            let mut out = Vec::new();
            for entry in self
                .explicit
                .iter()
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                match entry.strip_prefix(DNS_PREFIX) {
                    Some(name) => out.extend(resolve_members(name)?),
                    None => out.push(parse_member(entry)?),
                }
            }
            return Ok(out);
        }
        match std::fs::read_to_string(&self.conf_file) {
            Ok(text) => parse_conf(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(ClusterError::ReadConf {
                path: self.conf_file.clone(),
                source,
            }),
        }
    }

    /// Re-reads the member list, keeping the health state of members that stay.
    /// Returns whether the set of members changed.
    pub fn reload(&self) -> Result<bool, ClusterError> {
        let list = self.read_list()?;
        let mut next: Vec<Entry> = Vec::new();
        let old = self.entries.read().clone();
        for (host, port) in list {
            if next.iter().any(|e| e.host == host && e.port == port) {
                continue;
            }
            let is_self = self.is_self(&host, port);
            let kept = old
                .iter()
                .find(|e| e.host == host && e.port == port)
                .cloned();
            next.push(kept.unwrap_or(Entry {
                host,
                port,
                is_self,
                state: if is_self {
                    MemberState::Up
                } else {
                    MemberState::Suspicious
                },
                last_refresh_ms: 0,
                fail_count: 0,
            }));
        }
        if !next.iter().any(|e| e.is_self) {
            if !next.is_empty() {
                tracing::warn!(self_addr = %self.self_addr, "this node is not in the member list; adding it");
            }
            next.insert(0, self.self_entry());
        }
        let changed = {
            let key = |v: &[Entry]| {
                v.iter()
                    .map(|e| (e.host.clone(), e.port))
                    .collect::<Vec<_>>()
            };
            key(&old) != key(&next)
        };
        *self.entries.write() = next;
        if changed {
            tracing::info!(members = ?self.addresses(), "cluster members");
            self.peers.send_replace(self.peers());
        }
        Ok(changed)
    }

    /// The other members' addresses now and after every change of the member list.
    pub fn subscribe_peers(&self) -> watch::Receiver<Vec<String>> {
        self.peers.subscribe()
    }

    /// Addresses (`host:port`) of the other members.
    pub fn peers(&self) -> Vec<String> {
        self.entries
            .read()
            .iter()
            .filter(|e| !e.is_self)
            .map(|e| format!("{}:{}", e.host, e.port))
            .collect()
    }

    fn addresses(&self) -> Vec<String> {
        self.entries
            .read()
            .iter()
            .map(|e| format!("{}:{}", e.host, e.port))
            .collect()
    }

    fn conf_changed(&self) -> bool {
        if !self.explicit.is_empty() {
            return false;
        }
        // An unreadable time counts as "no file": the change is still seen, and the re-read
        // that follows reports why the file cannot be read (or, when it is gone, shrinks
        // the cluster to this node as a missing cluster.conf does at start).
        let mtime = std::fs::metadata(&self.conf_file)
            .and_then(|m| m.modified())
            .ok();
        let mut seen = self.conf_mtime.lock();
        if *seen != mtime {
            *seen = mtime;
            true
        } else {
            false
        }
    }

    async fn check(&self, host: &str, port: u16) -> bool {
        let url = format!("http://{host}:{port}/nacos/v1/console/health/readiness");
        matches!(
            self.client.get(url).timeout(Duration::from_secs(2)).send().await,
            Ok(r) if r.status().is_success()
        )
    }

    async fn check_all(&self) {
        let targets: Vec<(String, u16)> = self
            .entries
            .read()
            .iter()
            .filter(|e| !e.is_self)
            .map(|e| (e.host.clone(), e.port))
            .collect();
        for (host, port) in targets {
            let ok = self.check(&host, port).await;
            let mut entries = self.entries.write();
            if let Some(e) = entries
                .iter_mut()
                .find(|e| e.host == host && e.port == port)
            {
                if ok {
                    e.state = MemberState::Up;
                    e.fail_count = 0;
                    e.last_refresh_ms = now_millis();
                } else {
                    e.fail_count = e.fail_count.saturating_add(1);
                    e.state = if e.fail_count >= DOWN_AFTER {
                        MemberState::Down
                    } else {
                        MemberState::Suspicious
                    };
                }
            }
        }
        if let Some(me) = self.entries.write().iter_mut().find(|e| e.is_self) {
            me.last_refresh_ms = now_millis();
        }
    }

    /// Health checks and `cluster.conf` re-reads (and DNS entries resolved again) every
    /// `interval` until `shutdown`, on
    /// `tasks`. A check in progress is abandoned at shutdown (it only updates what this
    /// node shows about the others).
    pub(crate) fn spawn_health_checks(
        self: &Arc<Self>,
        interval: Duration,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) {
        let me = self.clone();
        self.conf_changed();
        tasks.spawn(async move {
            loop {
                if me.conf_changed() || me.has_dns() {
                    // A change of the member set is published by `reload` itself.
                    if let Err(e) = me.reload() {
                        tracing::warn!(error = %e, "re-reading cluster members failed");
                    }
                }
                tokio::select! {
                    _ = me.check_all() => {}
                    _ = shutdown.cancelled() => return,
                }
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = shutdown.cancelled() => return,
                }
            }
        });
    }
}

impl MembershipView for Membership {
    fn members(&self) -> Vec<MemberInfo> {
        self.entries
            .read()
            .iter()
            .map(|e| MemberInfo {
                ip: e.host.clone(),
                port: e.port,
                state: e.state,
                last_refresh_ms: e.last_refresh_ms,
                fail_count: e.fail_count,
                is_self: e.is_self,
                notified: NotifyCounts::default(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_conf() {
        // Single addresses are `address.rs`'s tests.
        let conf =
            "# nodes\n10.0.0.1:8848\n\n10.0.0.2:8848 # second\n10.0.0.3:8848,10.0.0.4:8848\n";
        let list = parse_conf(conf).expect("valid conf");
        assert_eq!(list.len(), 4);
        assert!(parse_conf("bad line").is_err());
    }

    #[tokio::test]
    async fn recognises_itself_by_local_address_and_port() -> Result<(), ClusterError> {
        let dir = tempfile::tempdir().map_err(|source| ClusterError::ReadConf {
            path: PathBuf::new(),
            source,
        })?;
        let opts = ClusterOptions {
            members: vec!["127.0.0.1:18001,127.0.0.1:18002".into()],
            conf_file: dir.path().join("cluster.conf"),
            self_addr: "127.0.0.1:18002"
                .parse()
                .map_err(|_| ClusterError::InvalidMember("x".into()))?,
            secret: "s".into(),
            health_interval: Duration::from_secs(1),
        };
        let m = Membership::new(&opts, reqwest::Client::new())?;
        let members = m.members();
        assert_eq!(members.len(), 2);
        assert!(!members[0].is_self);
        assert!(members[1].is_self);
        assert_eq!(m.peers(), vec!["127.0.0.1:18001".to_string()]);
        Ok(())
    }

    #[tokio::test]
    async fn a_dns_entry_is_every_address_its_name_resolves_to(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let opts = ClusterOptions {
            // `localhost` resolves to this machine's loopback address(es): each is a member
            // on the port, and the one on this node's port is this node.
            members: vec!["dns:localhost:18301,127.0.0.1:18302".into()],
            conf_file: dir.path().join("cluster.conf"),
            self_addr: "127.0.0.1:18302".parse()?,
            secret: "s".into(),
            health_interval: Duration::from_secs(1),
        };
        let m = Membership::new(&opts, reqwest::Client::new())?;
        assert!(m.has_dns());
        let peers = m.peers();
        assert!(peers.contains(&"127.0.0.1:18301".to_string()), "{peers:?}");
        assert!(peers.iter().all(|p| p.ends_with(":18301")), "{peers:?}");
        assert!(m.members().iter().any(|e| e.is_self && e.port == 18302));
        assert!(!m.reload()?, "the same answer is no change");
        // A name that does not resolve: the node starts alone, and a re-read that fails
        // keeps the member list as it was.
        let bad = ClusterOptions {
            members: vec!["dns:no-such-host.invalid:18301".into()],
            ..opts
        };
        let alone = Membership::new(&bad, reqwest::Client::new())?;
        assert!(alone.peers().is_empty());
        assert_eq!(alone.members().len(), 1);
        assert!(matches!(alone.reload(), Err(ClusterError::Resolve { .. })));
        assert_eq!(alone.members().len(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn cluster_conf_is_re_read_when_it_changes() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let conf = dir.path().join("cluster.conf");
        std::fs::write(&conf, "# two nodes\n127.0.0.1:18101\n127.0.0.1:18102\n")?;
        let opts = ClusterOptions {
            members: vec![],
            conf_file: conf.clone(),
            self_addr: "127.0.0.1:18101".parse()?,
            secret: "s".into(),
            health_interval: Duration::from_secs(1),
        };
        let m = Membership::new(&opts, reqwest::Client::new())?;
        let mut peers = m.subscribe_peers();
        assert_eq!(
            *peers.borrow_and_update(),
            vec!["127.0.0.1:18102".to_string()]
        );
        assert!(m.conf_changed(), "first look records the file's time");
        assert_eq!(m.peers(), vec!["127.0.0.1:18102".to_string()]);
        assert!(!m.conf_changed());
        // Rewrite with a third member and a newer mtime.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&conf, "127.0.0.1:18101\n127.0.0.1:18102\n127.0.0.1:18103\n")?;
        let file = std::fs::File::options().write(true).open(&conf)?;
        file.set_modified(SystemTime::now() + Duration::from_secs(1))?;
        assert!(m.conf_changed());
        assert!(!peers.has_changed()?);
        assert!(m.reload()?, "the member set changed");
        assert_eq!(m.peers().len(), 2);
        assert!(peers.has_changed()?, "the change is published");
        assert_eq!(*peers.borrow_and_update(), m.peers());
        assert_eq!(m.members().len(), 3);
        // Removing a member is seen too.
        std::fs::write(&conf, "127.0.0.1:18101\n")?;
        assert!(m.reload()?);
        assert!(m.peers().is_empty());
        assert!(peers.borrow_and_update().is_empty());
        assert!(!m.reload()?, "nothing changed");
        assert!(!peers.has_changed()?, "and nothing is published");
        Ok(())
    }
}
