//! Server settings: one typed struct, filled from flags, `NACELLE_*` environment variables
//! and an optional TOML file, with precedence flag > env > file > default.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use nacelle_http::HttpOptions;
use nacelle_service::Limits;
use serde::Deserialize;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `nacelle serve` flags. Every flag also reads a `NACELLE_*` variable; unset ones fall
/// back to the TOML file and then to the default.
#[derive(Debug, Clone, Default, Parser)]
pub struct ServeArgs {
    /// TOML settings file (keys as the long flags, with `_` for `-`).
    #[arg(long, env = "NACELLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory (SQLite database, cluster.conf). Default `./nacelle-data`.
    #[arg(long, env = "NACELLE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on. Default 0.0.0.0.
    #[arg(long, env = "NACELLE_BIND")]
    pub bind: Option<IpAddr>,
    /// HTTP port. Default 8848; 0 picks a free port.
    #[arg(long, env = "NACELLE_PORT")]
    pub port: Option<u16>,
    /// gRPC port. Default HTTP port + 1000.
    #[arg(long, env = "NACELLE_GRPC_PORT")]
    pub grpc_port: Option<u16>,
    /// Cluster gRPC port (member-to-member calls; only in a cluster). Default HTTP port +
    /// 1001, which is where the other members look for it; 0 picks a free one.
    #[arg(long, env = "NACELLE_CLUSTER_GRPC_PORT")]
    pub cluster_grpc_port: Option<u16>,
    /// Database URL: `sqlite://path`. Default: `nacelle.db` in the data directory.
    #[arg(long, env = "NACELLE_DB")]
    pub db: Option<String>,
    /// Log format.
    #[arg(long, env = "NACELLE_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log filter (tracing `EnvFilter` syntax). Default `info`.
    #[arg(long, env = "NACELLE_LOG")]
    pub log: Option<String>,
    /// Largest config content in bytes. Default 10 MiB.
    #[arg(long, env = "NACELLE_MAX_CONTENT_BYTES")]
    pub max_content_bytes: Option<usize>,
    /// Largest HTTP request (URL or body) in bytes. Default 3 × max content + 64 KiB.
    #[arg(long, env = "NACELLE_MAX_REQUEST_BYTES")]
    pub max_request_bytes: Option<usize>,
    /// Most keys one listen request may carry. Default 10000.
    #[arg(long, env = "NACELLE_MAX_LISTEN_KEYS")]
    pub max_listen_keys: Option<usize>,
    /// Most long polls held at once (more get 503). Default 100000.
    #[arg(long, env = "NACELLE_MAX_HELD_POLLS")]
    pub max_held_polls: Option<usize>,
    /// Shortest hold of a long poll in ms. Default 10000 (Nacos's value).
    #[arg(long, env = "NACELLE_LONG_POLL_MIN_HOLD_MS")]
    pub long_poll_min_hold_ms: Option<u64>,
    /// Cluster members, `host:port,…` (HTTP ports). Default: `cluster.conf` in the data
    /// directory if present, else a single node.
    #[arg(long, env = "NACELLE_MEMBERS")]
    pub members: Option<String>,
    /// Shared secret of the cluster; required when there are members.
    #[arg(long, env = "NACELLE_CLUSTER_SECRET", hide_env_values = true)]
    pub cluster_secret: Option<String>,
    /// File holding the cluster secret (its first line).
    #[arg(long, env = "NACELLE_CLUSTER_SECRET_FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// How often the database's change log is followed, in ms. Default 500.
    #[arg(long, env = "NACELLE_FOLLOW_INTERVAL_MS")]
    pub follow_interval_ms: Option<u64>,
    /// How often members are health-checked and cluster.conf re-read, in ms. Default 2000.
    #[arg(long, env = "NACELLE_MEMBER_CHECK_INTERVAL_MS")]
    pub member_check_interval_ms: Option<u64>,
    /// Most gRPC connections at once (more are told to reconnect elsewhere). Default 200000.
    #[arg(long, env = "NACELLE_GRPC_MAX_CONNECTIONS")]
    pub grpc_max_connections: Option<usize>,
    /// Most gRPC connections from one client IP. Default 10000.
    #[arg(long, env = "NACELLE_GRPC_MAX_CONNECTIONS_PER_IP")]
    pub grpc_max_connections_per_ip: Option<usize>,
    /// Test-only fault injection: drop change notifications received from members.
    #[arg(long, hide = true)]
    pub fault_drop_cluster_notifications: bool,
}

/// The same settings as read from the TOML file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    pub data_dir: Option<PathBuf>,
    pub bind: Option<IpAddr>,
    pub port: Option<u16>,
    pub grpc_port: Option<u16>,
    pub cluster_grpc_port: Option<u16>,
    pub db: Option<String>,
    pub log_format: Option<LogFormat>,
    pub log: Option<String>,
    pub max_content_bytes: Option<usize>,
    pub max_request_bytes: Option<usize>,
    pub max_listen_keys: Option<usize>,
    pub max_held_polls: Option<usize>,
    pub long_poll_min_hold_ms: Option<u64>,
    pub members: Option<String>,
    pub cluster_secret: Option<String>,
    pub cluster_secret_file: Option<PathBuf>,
    pub follow_interval_ms: Option<u64>,
    pub member_check_interval_ms: Option<u64>,
    pub grpc_max_connections: Option<usize>,
    pub grpc_max_connections_per_ip: Option<usize>,
}

/// Error reading settings.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("reading settings file {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing settings file {path}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("invalid setting: {0}")]
    Invalid(String),
}

/// Resolved settings of a server.
#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub bind: IpAddr,
    pub port: u16,
    /// `None`: HTTP port + 1000.
    pub grpc_port: Option<u16>,
    /// `None`: HTTP port + 1001 (0 when the HTTP port is 0).
    pub cluster_grpc_port: Option<u16>,
    /// `None`: SQLite file in the data directory.
    pub db: Option<String>,
    pub log_format: LogFormat,
    pub log: String,
    pub max_content_bytes: usize,
    pub max_request_bytes: usize,
    pub max_listen_keys: usize,
    pub max_held_polls: usize,
    pub long_poll_min_hold: Duration,
    /// Explicit members (`host:port`); empty means `cluster.conf` or a single node.
    pub members: Vec<String>,
    /// The cluster secret, if any.
    pub cluster_secret: Option<String>,
    pub follow_interval: Duration,
    pub member_check_interval: Duration,
    pub fault_drop_cluster_notifications: bool,
    /// Limits and timings of the gRPC adapter.
    pub grpc: nacelle_grpc::GrpcOptions,
}

impl Default for Settings {
    fn default() -> Self {
        Self::merge(ServeArgs::default(), FileSettings::default())
            .unwrap_or_else(|_| unreachable_defaults())
    }
}

/// Defaults are always valid; this is only the type-level fallback of `Default`.
fn unreachable_defaults() -> Settings {
    let limits = Limits::default();
    Settings {
        data_dir: PathBuf::from("nacelle-data"),
        bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        port: 8848,
        grpc_port: None,
        cluster_grpc_port: None,
        db: None,
        log_format: LogFormat::Text,
        log: "info".into(),
        max_content_bytes: limits.max_content_bytes,
        max_request_bytes: 3 * limits.max_content_bytes + 64 * 1024,
        max_listen_keys: limits.max_listen_keys,
        max_held_polls: limits.max_held_polls,
        long_poll_min_hold: Duration::from_secs(10),
        members: Vec::new(),
        cluster_secret: None,
        follow_interval: Duration::from_millis(500),
        member_check_interval: Duration::from_secs(2),
        fault_drop_cluster_notifications: false,
        grpc: nacelle_grpc::GrpcOptions::default(),
    }
}

impl Settings {
    /// Reads the TOML file named by `args.config` (if any) and merges.
    pub fn load(args: ServeArgs) -> Result<Self, SettingsError> {
        let file = match &args.config {
            Some(path) => Self::read_file(path)?,
            None => FileSettings::default(),
        };
        Self::merge(args, file)
    }

    fn read_file(path: &Path) -> Result<FileSettings, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| SettingsError::Parse {
            path: path.to_path_buf(),
            source: Box::new(source),
        })
    }

    /// Flag/env values win over file values, which win over defaults.
    pub fn merge(a: ServeArgs, f: FileSettings) -> Result<Self, SettingsError> {
        let limits = Limits::default();
        let max_content_bytes = a
            .max_content_bytes
            .or(f.max_content_bytes)
            .unwrap_or(limits.max_content_bytes);
        if max_content_bytes == 0 {
            return Err(SettingsError::Invalid(
                "max_content_bytes must be > 0".into(),
            ));
        }
        let max_request_bytes = a.max_request_bytes.or(f.max_request_bytes).unwrap_or(
            max_content_bytes
                .saturating_mul(3)
                .saturating_add(64 * 1024),
        );
        let max_listen_keys = a
            .max_listen_keys
            .or(f.max_listen_keys)
            .unwrap_or(limits.max_listen_keys);
        if max_listen_keys == 0 {
            return Err(SettingsError::Invalid("max_listen_keys must be > 0".into()));
        }
        let secret_file = a
            .cluster_secret_file
            .clone()
            .or(f.cluster_secret_file.clone());
        let cluster_secret = match (
            a.cluster_secret.clone().or(f.cluster_secret.clone()),
            secret_file,
        ) {
            (Some(s), _) => Some(s),
            (None, Some(path)) => {
                let text =
                    std::fs::read_to_string(&path).map_err(|source| SettingsError::Read {
                        path: path.clone(),
                        source,
                    })?;
                Some(text.lines().next().unwrap_or("").trim().to_string())
            }
            (None, None) => None,
        }
        .filter(|s| !s.is_empty());
        if cluster_secret.as_ref().is_some_and(|s| s.len() < 16) {
            return Err(SettingsError::Invalid(
                "cluster_secret must be at least 16 characters".into(),
            ));
        }
        let members: Vec<String> = a
            .members
            .clone()
            .or(f.members.clone())
            .unwrap_or_default()
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect();
        let grpc_defaults = nacelle_grpc::GrpcOptions::default();
        let grpc = nacelle_grpc::GrpcOptions {
            max_connections: a
                .grpc_max_connections
                .or(f.grpc_max_connections)
                .unwrap_or(grpc_defaults.max_connections),
            max_connections_per_ip: a
                .grpc_max_connections_per_ip
                .or(f.grpc_max_connections_per_ip)
                .unwrap_or(grpc_defaults.max_connections_per_ip),
            max_inbound_message_bytes: grpc_defaults
                .max_inbound_message_bytes
                .max(max_content_bytes.saturating_add(64 * 1024)),
            ..grpc_defaults
        };
        grpc.validate()
            .map_err(|e| SettingsError::Invalid(e.to_string()))?;
        Ok(Settings {
            grpc,
            members,
            cluster_secret,
            follow_interval: Duration::from_millis(
                a.follow_interval_ms
                    .or(f.follow_interval_ms)
                    .unwrap_or(500)
                    .max(50),
            ),
            member_check_interval: Duration::from_millis(
                a.member_check_interval_ms
                    .or(f.member_check_interval_ms)
                    .unwrap_or(2000)
                    .max(100),
            ),
            fault_drop_cluster_notifications: a.fault_drop_cluster_notifications,
            data_dir: a
                .data_dir
                .or(f.data_dir)
                .unwrap_or_else(|| PathBuf::from("nacelle-data")),
            bind: a
                .bind
                .or(f.bind)
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            port: a.port.or(f.port).unwrap_or(8848),
            grpc_port: a.grpc_port.or(f.grpc_port),
            cluster_grpc_port: a.cluster_grpc_port.or(f.cluster_grpc_port),
            db: a.db.or(f.db).filter(|s| !s.trim().is_empty()),
            log_format: a.log_format.or(f.log_format).unwrap_or_default(),
            log: a.log.or(f.log).unwrap_or_else(|| "info".into()),
            max_content_bytes,
            max_request_bytes,
            max_listen_keys,
            max_held_polls: a
                .max_held_polls
                .or(f.max_held_polls)
                .unwrap_or(limits.max_held_polls),
            long_poll_min_hold: Duration::from_millis(
                a.long_poll_min_hold_ms
                    .or(f.long_poll_min_hold_ms)
                    .unwrap_or(10_000),
            ),
        })
    }

    /// The database URL: `--db`, or the SQLite file in the data directory.
    pub fn database_url(&self) -> String {
        match &self.db {
            Some(url) => url.clone(),
            None => format!("sqlite://{}", self.data_dir.join("nacelle.db").display()),
        }
    }

    /// The database URL with any password masked, for logs and errors.
    pub fn database_display(&self) -> String {
        let url = self.database_url();
        match (url.find("://"), url.rfind('@')) {
            (Some(s), Some(at)) if at > s => {
                let creds = &url[s + 3..at];
                match creds.split_once(':') {
                    Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                    None => url,
                }
            }
            _ => url,
        }
    }

    /// Limits of the config service.
    pub fn limits(&self) -> Limits {
        Limits {
            max_content_bytes: self.max_content_bytes,
            max_listen_keys: self.max_listen_keys,
            max_held_polls: self.max_held_polls,
        }
    }

    /// Options of the HTTP adapter; `self_address` is the bound HTTP address.
    pub fn http_options(&self, self_address: std::net::SocketAddr) -> HttpOptions {
        HttpOptions {
            max_request_bytes: self.max_request_bytes,
            long_poll_min_hold: self.long_poll_min_hold,
            cluster_secret: self.cluster_secret.clone(),
            self_address: Some(self_address),
            drop_cluster_notifications: self.fault_drop_cluster_notifications,
            trusted_proxies: self.grpc.trusted_proxies.clone(),
        }
    }

    /// Options of the cluster gRPC port, given the cluster secret.
    pub fn cluster_grpc_options(&self, secret: &str) -> nacelle_grpc::ClusterGrpcOptions {
        nacelle_grpc::ClusterGrpcOptions {
            drop_notifications: self.fault_drop_cluster_notifications,
            ..nacelle_grpc::ClusterGrpcOptions::new(secret)
        }
    }

    /// `cluster.conf` in the data directory.
    pub fn cluster_conf(&self) -> PathBuf {
        self.data_dir.join("cluster.conf")
    }

    /// Whether this node runs in a cluster (members given or `cluster.conf` present).
    pub fn clustered(&self) -> bool {
        !self.members.is_empty() || self.cluster_conf().exists()
    }

    /// Whether the database can be shared with other nodes (anything but SQLite).
    pub fn shared_database(&self) -> bool {
        !self.database_url().starts_with("sqlite:")
    }

    /// The gRPC port: explicit, else HTTP port + 1000 (0 when the HTTP port is 0).
    pub fn effective_grpc_port(&self, http_port: u16) -> u16 {
        match self.grpc_port {
            Some(p) => p,
            None if self.port == 0 => 0,
            None => http_port.saturating_add(1000),
        }
    }

    /// The cluster gRPC port: explicit, else HTTP port + 1001 (where the other members
    /// look for it), or 0 when the HTTP port is 0. Independent of the gRPC port.
    pub fn effective_cluster_grpc_port(&self, http_port: u16) -> u16 {
        match self.cluster_grpc_port {
            Some(p) => p,
            None if self.port == 0 => 0,
            None => nacelle_cluster::cluster_grpc_port(http_port).unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_flag_env_over_file_over_default() {
        let file: FileSettings = toml::from_str(
            "port = 9000\ndata_dir = \"/tmp/x\"\nmax_listen_keys = 5\nlog_format = \"json\"",
        )
        .expect("valid toml");
        let args = ServeArgs {
            port: Some(7000),
            ..Default::default()
        };
        let s = Settings::merge(args, file).expect("valid");
        assert_eq!(s.port, 7000);
        assert_eq!(s.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(s.max_listen_keys, 5);
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.max_content_bytes, 10 * 1024 * 1024);
        assert_eq!(s.effective_grpc_port(7000), 8000);
        assert_eq!(s.effective_cluster_grpc_port(7000), 8001);
    }

    #[test]
    fn cluster_grpc_port_defaults() {
        let explicit_grpc = ServeArgs {
            port: Some(8848),
            grpc_port: Some(7000),
            ..Default::default()
        };
        let s = Settings::merge(explicit_grpc, FileSettings::default()).expect("valid");
        assert_eq!(s.effective_cluster_grpc_port(8848), 9849);
        let any_port = ServeArgs {
            port: Some(0),
            grpc_port: Some(7000),
            ..Default::default()
        };
        let s = Settings::merge(any_port, FileSettings::default()).expect("valid");
        assert_eq!(s.effective_cluster_grpc_port(41000), 0);
        let file: FileSettings = toml::from_str("cluster_grpc_port = 9999").expect("valid toml");
        let s = Settings::merge(ServeArgs::default(), file).expect("valid");
        assert_eq!(s.effective_cluster_grpc_port(8848), 9999);
    }

    #[test]
    fn unknown_file_keys_are_rejected() {
        assert!(toml::from_str::<FileSettings>("prot = 1").is_err());
    }

    #[test]
    fn database_defaults_and_masking() {
        let mut s = Settings::default();
        assert!(s.database_url().starts_with("sqlite://"));
        s.db = Some("mysql://root:secret@db:3306/nacos".into());
        assert_eq!(s.database_display(), "mysql://root:***@db:3306/nacos");
    }
}
