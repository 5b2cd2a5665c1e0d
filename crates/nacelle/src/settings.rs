//! Server settings: one typed struct, filled from flags, `NACELLE_*` environment variables
//! and an optional TOML file, with precedence flag > env > file > default.
//!
//! Each setting is declared once, in [`ServeArgs`]: its flag, its environment variable and
//! its TOML key (the field name) come from that one field. A layer leaves a setting `None`
//! when it does not give it; [`ServeArgs::or`] stacks layers (clap already puts the flag
//! above the variable), and [`Settings::merge`] fills what is still unset from the default.
//! Each default is written once: the adapters' option structs own theirs
//! ([`HttpOptions::default`], [`GrpcOptions::default`], [`Limits::default`]) and this file
//! takes them from there; the few that belong to no adapter are the `DEFAULT_*` constants
//! below.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use nacelle_cipher::MasterKeys;
use nacelle_core::{TrustedProxies, ValidationMode, ValidationPolicy};
use nacelle_grpc::GrpcOptions;
use nacelle_http::HttpOptions;
use nacelle_service::Limits;
use serde::Deserialize;

/// Default data directory (relative to the working directory).
const DEFAULT_DATA_DIR: &str = "nacelle-data";
/// Default listen address: every interface.
const DEFAULT_BIND: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
/// Default HTTP port (Nacos's).
const DEFAULT_PORT: u16 = 8848;
/// Default log filter.
const DEFAULT_LOG: &str = "info";
/// Default interval of the change-log follower.
const DEFAULT_FOLLOW_INTERVAL: Duration = Duration::from_millis(500);
/// Shortest follow interval accepted (a smaller one is raised to it): the follower queries
/// the database on every tick.
const MIN_FOLLOW_INTERVAL: Duration = Duration::from_millis(50);
/// Default interval of member health checks and `cluster.conf` re-reads.
const DEFAULT_MEMBER_CHECK_INTERVAL: Duration = Duration::from_secs(2);
/// Shortest member check interval accepted (a smaller one is raised to it).
const MIN_MEMBER_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// Default history retention (Nacos keeps 30 days).
const DEFAULT_HISTORY_RETENTION_DAYS: u32 = 30;
/// Default days a finished webhook delivery stays in the delivery log.
const DEFAULT_WEBHOOK_RETENTION_DAYS: u32 = 7;
/// Default interval between history purges.
const DEFAULT_HISTORY_PURGE_INTERVAL: Duration = Duration::from_secs(3600);
/// Shortest purge interval accepted (a smaller one is raised to it).
const MIN_HISTORY_PURGE_INTERVAL: Duration = Duration::from_secs(1);
/// Default interval of the TLS files' change check.
const DEFAULT_TLS_RELOAD_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest cluster secret accepted.
const MIN_SECRET_LEN: usize = 16;
/// Fewest different characters a cluster secret must hold (`aaaa…`, `abab…` and
/// `passwordpassword` are refused).
const MIN_SECRET_DISTINCT: usize = 8;
/// Words of example values that must never be taken for a real secret or password
/// (`CHANGE-ME-…` of `packaging/k8s/secret.example.yaml`): compared case-insensitively
/// with `-`, `_`, `.` and spaces left out.
const PLACEHOLDER_WORDS: &[&str] = &["changeme", "replaceme", "placeholder", "example"];

/// `auth`: whether callers must authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Every operation is checked (the default).
    #[default]
    On,
    /// Anyone who reaches the ports may do anything.
    Off,
}

/// The authentication settings, resolved (the secret itself is resolved at start, where
/// the data directory and the cluster are known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    pub enabled: bool,
    pub anonymous_read: bool,
    /// The token secret given (flag, variable or file), base64.
    pub token_secret: Option<String>,
    pub token_ttl_s: u64,
    /// The first administrator's password, when given.
    pub admin_password: Option<String>,
}

impl AuthSettings {
    /// Authentication off (tests of other features).
    pub fn off() -> Self {
        AuthSettings {
            enabled: false,
            ..AuthSettings::default()
        }
    }
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            enabled: true,
            anonymous_read: false,
            token_secret: None,
            token_ttl_s: nacelle_service::auth::DEFAULT_TOKEN_TTL_S,
            admin_password: None,
        }
    }
}

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

/// `content_validation`: what a publish whose content does not parse as its type does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentValidation {
    /// The publish fails (HTTP 400, gRPC error code 400) naming the problem and its line.
    Reject,
    /// The publish succeeds; a warning names the key and the problem.
    Warn,
    /// The content is not parsed.
    Off,
}

impl From<ContentValidation> for ValidationMode {
    fn from(v: ContentValidation) -> Self {
        match v {
            ContentValidation::Reject => ValidationMode::Reject,
            ContentValidation::Warn => ValidationMode::Warn,
            ContentValidation::Off => ValidationMode::Off,
        }
    }
}

/// `trusted_proxies` as a layer gives it: one comma-separated string (flag, environment,
/// TOML string) or a TOML list whose entries may themselves hold commas.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ProxyList {
    /// `"10.0.0.0/8,::1"`.
    One(String),
    /// `["10.0.0.0/8", "::1"]`.
    Many(Vec<String>),
}

impl ProxyList {
    /// The policy these entries describe.
    pub fn parse(&self) -> Result<TrustedProxies, SettingsError> {
        let joined = match self {
            ProxyList::One(s) => s.clone(),
            ProxyList::Many(v) => v.join(","),
        };
        TrustedProxies::parse_list(&joined)
            .map_err(|e| SettingsError::Invalid(format!("trusted_proxies: {e}")))
    }
}

impl FromStr for ProxyList {
    type Err = std::convert::Infallible;
    /// Kept as given; checked by [`ProxyList::parse`], so a bad entry is a settings error
    /// naming the setting, from whichever layer it came.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ProxyList::One(s.to_string()))
    }
}

/// Declares the layer struct once: its extra fields verbatim, and its layered settings
/// (each an `Option`), from which it derives [`ServeArgs::or`] and [`ServeArgs::KEYS`].
macro_rules! layer {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$xmeta:meta])* pub $x:ident : $xt:ty, )*
            ;
            $( $(#[$fmeta:meta])* pub $f:ident : Option<$t:ty>, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$xmeta])* pub $x: $xt, )*
            $( $(#[$fmeta])* pub $f: Option<$t>, )*
        }

        impl $name {
            /// The TOML keys of every layered setting (the field names).
            pub const KEYS: &'static [&'static str] = &[$(stringify!($f)),*];

            /// This layer over `lower`: each setting `self` leaves unset is taken from
            /// `lower`. Fields that are not layered (`config`, test faults) are `self`'s.
            pub fn or(self, lower: Self) -> Self {
                Self {
                    $( $f: self.$f.or(lower.$f), )*
                    ..self
                }
            }
        }
    };
}

layer! {
    // `nacelle serve` flags, and the same settings as read from the TOML file (keys as the
    // long flags, with `_` for `-`). Every flag also reads a `NACELLE_*` variable; unset
    // ones fall back to the TOML file and then to the default (docs/configuration.md).
    #[derive(Debug, Clone, Default, Parser, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ServeArgs {
        /// TOML settings file (keys as the long flags, with `_` for `-`).
        #[arg(long, env = "NACELLE_CONFIG")]
        #[serde(skip)]
        pub config: Option<PathBuf>,
        /// Test-only fault injection: drop change notifications received from members.
        #[cfg(feature = "fault-injection")]
        #[arg(
            long,
            hide = true,
            num_args = 0..=1,
            default_missing_value = "true",
            default_value_t = false,
            action = clap::ArgAction::Set,
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        #[serde(skip)]
        pub fault_drop_cluster_notifications: bool,
        ;
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
        /// File holding the database URL (its first line), so that a password in it need
        /// not be in the environment or the command line; `db` wins when both are given.
        #[arg(long, env = "NACELLE_DB_FILE")]
        pub db_file: Option<PathBuf>,
        /// Log format.
        #[arg(long, env = "NACELLE_LOG_FORMAT", value_enum)]
        pub log_format: Option<LogFormat>,
        /// Log filter: a level (`warn`), or a level and per-module levels
        /// (`warn,nacelle_http=debug`). Default `info`.
        #[arg(long, env = "NACELLE_LOG")]
        pub log: Option<String>,
        /// Largest config content in bytes. Default 10 MiB.
        #[arg(long, env = "NACELLE_MAX_CONTENT_BYTES")]
        pub max_content_bytes: Option<usize>,
        /// Largest HTTP request (URL or body) in bytes. Default 3 × max content + 64 KiB.
        #[arg(long, env = "NACELLE_MAX_REQUEST_BYTES")]
        pub max_request_bytes: Option<usize>,
        /// Largest HTTP request head (request line and headers: long query strings, as
        /// the Python 1.x client sends) in bytes; also what a connection reads ahead at
        /// once. Default 1 MiB (never more than max_request_bytes).
        #[arg(long, env = "NACELLE_MAX_HEAD_BYTES")]
        pub max_head_bytes: Option<usize>,
        /// What all HTTP request bodies being read may take together, in bytes; a body
        /// that does not fit is answered 503 before it is read. Default 256 MiB.
        #[arg(long, env = "NACELLE_MAX_BODY_MEMORY_BYTES")]
        pub max_body_memory_bytes: Option<usize>,
        /// Of it, what the bodies of requests without a valid access token in a header or
        /// the query string may take, with authentication on. Default 32 MiB.
        #[arg(long, env = "NACELLE_MAX_UNAUTHENTICATED_BODY_MEMORY_BYTES")]
        pub max_unauthenticated_body_memory_bytes: Option<usize>,
        /// Most keys one listen request may carry. Default 10000.
        #[arg(long, env = "NACELLE_MAX_LISTEN_KEYS")]
        pub max_listen_keys: Option<usize>,
        /// Most long polls held at once (more get 503). Default 100000.
        #[arg(long, env = "NACELLE_MAX_HELD_POLLS")]
        pub max_held_polls: Option<usize>,
        /// Shortest hold of a long poll in ms. Default 10000 (Nacos's value).
        #[arg(long, env = "NACELLE_LONG_POLL_MIN_HOLD_MS")]
        pub long_poll_min_hold_ms: Option<u64>,
        /// Cluster members, `host:port,…` (HTTP ports); `dns:<name>:<port>` is every
        /// address the name resolves to (a headless Service). Default: `cluster.conf` in
        /// the data directory if present, else a single node.
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
        /// Requests (HTTP and gRPC) taking at least this many ms are logged at warn with
        /// their route and cause; 0 logs every request. Default 1000.
        #[arg(long, env = "NACELLE_SLOW_REQUEST_MS")]
        pub slow_request_ms: Option<u64>,
        /// Most gRPC connections at once (more are told to reconnect elsewhere). Default 200000.
        #[arg(long, env = "NACELLE_GRPC_MAX_CONNECTIONS")]
        pub grpc_max_connections: Option<usize>,
        /// Most gRPC connections from one client IP. Default 10000.
        #[arg(long, env = "NACELLE_GRPC_MAX_CONNECTIONS_PER_IP")]
        pub grpc_max_connections_per_ip: Option<usize>,
        /// Proxies whose forwarded client addresses are believed: comma-separated CIDRs or
        /// addresses (`10.0.0.0/8,::1`). Default: none.
        #[arg(long, env = "NACELLE_TRUSTED_PROXIES")]
        pub trusted_proxies: Option<ProxyList>,
        /// What a publish whose content does not parse as its type (json, yaml, xml, toml,
        /// properties) does: reject, warn or off. Default warn.
        #[arg(long, env = "NACELLE_CONTENT_VALIDATION", value_enum)]
        pub content_validation: Option<ContentValidation>,
        /// Per-namespace content validation modes, `namespace=mode,…` (`dev=off,prod=reject`;
        /// `public` is the default namespace). Default: none.
        #[arg(long, env = "NACELLE_CONTENT_VALIDATION_NAMESPACES")]
        pub content_validation_namespaces: Option<String>,
        /// Days of config history kept; older rows are purged in the background (the newest
        /// row of a config always stays). Default 30 (as Nacos); 0 keeps history forever.
        #[arg(long, env = "NACELLE_HISTORY_RETENTION_DAYS")]
        pub history_retention_days: Option<u32>,
        /// Most history rows kept per config (the newest N); older ones are purged whatever
        /// their age. Default: no count limit (0 too).
        #[arg(long, env = "NACELLE_HISTORY_KEEP_PER_KEY")]
        pub history_keep_per_key: Option<u32>,
        /// Seconds between history purges. Default 3600 (at least 1).
        #[arg(long, env = "NACELLE_HISTORY_PURGE_INTERVAL_S")]
        pub history_purge_interval_s: Option<u64>,
        /// Days of audit trail kept; older entries are purged with the history (the chain
        /// stays verifiable from its new anchor). Default 0: kept forever.
        #[arg(long, env = "NACELLE_AUDIT_RETENTION_DAYS")]
        pub audit_retention_days: Option<u32>,
        /// Days a finished (delivered or failed) webhook delivery is kept in the delivery
        /// log; older ones are purged with the history. Default 7; 0 keeps them forever.
        #[arg(long, env = "NACELLE_WEBHOOK_RETENTION_DAYS")]
        pub webhook_retention_days: Option<u32>,
        /// Base URL of the Prometheus that staged rollouts' guards query
        /// (`http://prometheus:9090`) when a guard names none (docs/rollouts.md). Default:
        /// none.
        #[arg(long, env = "NACELLE_PROMETHEUS_URL")]
        pub prometheus_url: Option<String>,
        /// The addresses a rollout's guards may name besides `prometheus_url`:
        /// comma-separated URL prefixes (`http://shop.internal/health,https://prom2:9090`).
        /// The server fetches guard URLs on behalf of whoever starts a rollout, so any other
        /// address is refused (docs/rollouts.md). Default: none.
        #[arg(long, env = "NACELLE_ROLLOUT_GUARD_URLS")]
        pub rollout_guard_urls: Option<String>,
        /// File holding the master key that wraps the data keys of encrypted configs
        /// (`cipher-aes-…`) at rest: 32 random bytes in base64 (`openssl rand -base64 32`),
        /// then, one per line, previous keys that only unwrap (rotation). Default: none —
        /// data keys are stored in clear, as Nacos does (docs/encryption.md).
        #[arg(long, env = "NACELLE_CIPHER_MASTER_KEY_FILE")]
        pub cipher_master_key_file: Option<PathBuf>,
        /// TLS certificate chain (PEM) of the HTTP and gRPC client ports; with --tls-key,
        /// turns TLS on (docs/security.md, "TLS"). Default: none, plain text.
        #[arg(long, env = "NACELLE_TLS_CERT")]
        pub tls_cert: Option<PathBuf>,
        /// Private key (PEM) of --tls-cert.
        #[arg(long, env = "NACELLE_TLS_KEY")]
        pub tls_key: Option<PathBuf>,
        /// Mutual TLS: CA certificates (PEM) that client certificates must chain to; a
        /// client without a valid certificate is refused. Default: none.
        #[arg(long, env = "NACELLE_TLS_CLIENT_CA")]
        pub tls_client_ca: Option<PathBuf>,
        /// Serve HTTPS on this port as well, keeping --port plain (a migration). Default:
        /// with TLS on, --port serves TLS only.
        #[arg(long, env = "NACELLE_TLS_PORT")]
        pub tls_port: Option<u16>,
        /// Serve gRPC over TLS on this port as well, keeping --grpc-port plain. Default: with
        /// TLS on, --grpc-port serves TLS only.
        #[arg(long, env = "NACELLE_GRPC_TLS_PORT")]
        pub grpc_tls_port: Option<u16>,
        /// How often the TLS files are checked for a change (then reloaded), in ms; 0: only
        /// on SIGHUP. Default 5000.
        #[arg(long, env = "NACELLE_TLS_RELOAD_INTERVAL_MS")]
        pub tls_reload_interval_ms: Option<u64>,
        /// Most open HTTP connections from one address (over it: 503). Default 10000.
        #[arg(long, env = "NACELLE_HTTP_MAX_CONNECTIONS_PER_IP")]
        pub http_max_connections_per_ip: Option<usize>,
        /// Most long polls held at once for one client IP (more get 503). Default 2000.
        #[arg(long, env = "NACELLE_MAX_HELD_POLLS_PER_IP")]
        pub max_held_polls_per_ip: Option<usize>,
        /// Writes (publish, remove; HTTP and gRPC together) per second one client IP may
        /// make on average; 0: no limit. Over it: HTTP 429, gRPC error code 503. Default 100.
        #[arg(long, env = "NACELLE_WRITE_RATE_PER_IP")]
        pub write_rate_per_ip: Option<u32>,
        /// Writes one client IP may make in a burst above the rate. Default 1000.
        #[arg(long, env = "NACELLE_WRITE_BURST_PER_IP")]
        pub write_burst_per_ip: Option<u32>,
        /// Authentication: on or off. Default on; off logs a warning at every start
        /// (docs/security.md).
        #[arg(long, env = "NACELLE_AUTH", value_enum)]
        pub auth: Option<AuthMode>,
        /// Let unauthenticated callers read and listen (writes still need a user). A bare
        /// `--auth-anonymous-read` is true; `=false`/`=true` (or `false`/`true`, yes/no,
        /// on/off, 1/0) set it either way. Default false.
        #[arg(
            long,
            env = "NACELLE_AUTH_ANONYMOUS_READ",
            num_args = 0..=1,
            default_missing_value = "true",
            value_name = "BOOL",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub auth_anonymous_read: Option<bool>,
        /// Token signing secret: base64 of at least 32 bytes (Nacos's
        /// `nacos.core.auth.plugin.nacos.token.secret.key`). Default: generated once and
        /// kept in `<data-dir>/auth-token-secret` on a single node; required in a cluster.
        #[arg(long, env = "NACELLE_AUTH_TOKEN_SECRET", hide_env_values = true)]
        pub auth_token_secret: Option<String>,
        /// File holding the token secret (its first line).
        #[arg(long, env = "NACELLE_AUTH_TOKEN_SECRET_FILE")]
        pub auth_token_secret_file: Option<PathBuf>,
        /// Lifetime of issued tokens in seconds. Default 18000 (Nacos's).
        #[arg(long, env = "NACELLE_AUTH_TOKEN_TTL_S")]
        pub auth_token_ttl_s: Option<u64>,
        /// Password of the administrator `nacos` created at first start (when the database
        /// has no user). Default: a random one, written to
        /// `<data-dir>/initial-admin-password`. Prefer NACELLE_ADMIN_PASSWORD or
        /// --admin-password-file: other users can see a flag in the process list.
        #[arg(long, env = "NACELLE_ADMIN_PASSWORD", hide_env_values = true)]
        pub admin_password: Option<String>,
        /// File holding that password (its first line).
        #[arg(long, env = "NACELLE_ADMIN_PASSWORD_FILE")]
        pub admin_password_file: Option<PathBuf>,
        /// Refuse to start when the data directory, the SQLite database (or its -wal/-shm)
        /// or a secret file in the data directory is open to other users (group or other
        /// permission bits). Default false: a warning naming each path and its `chmod`.
        /// A bare `--strict-permissions` is true.
        #[arg(
            long,
            env = "NACELLE_STRICT_PERMISSIONS",
            num_args = 0..=1,
            default_missing_value = "true",
            value_name = "BOOL",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub strict_permissions: Option<bool>,
    }
}

/// The settings as read from the TOML file: the same layer as the flags, without `config`.
pub type FileSettings = ServeArgs;

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
    pub max_head_bytes: usize,
    pub max_body_memory_bytes: usize,
    pub max_unauthenticated_body_memory_bytes: usize,
    pub max_listen_keys: usize,
    pub max_held_polls: usize,
    pub long_poll_min_hold: Duration,
    /// Explicit members (`host:port`); empty means `cluster.conf` or a single node.
    pub members: Vec<String>,
    /// The cluster secret, if any.
    pub cluster_secret: Option<String>,
    pub follow_interval: Duration,
    pub member_check_interval: Duration,
    /// Requests taking at least this long are logged at warn (`slow_request_ms`).
    pub slow_request: Duration,
    /// The Prometheus of rollout guards that name none (`prometheus_url`).
    pub prometheus_url: Option<String>,
    /// The URL prefixes rollout guards may name besides it (`rollout_guard_urls`).
    pub rollout_guard_urls: Vec<String>,
    /// Proxies whose forwarded client addresses both adapters believe.
    pub trusted_proxies: TrustedProxies,
    /// Content validation: the default mode and the per-namespace overrides.
    pub content_validation: ValidationPolicy,
    /// Test-only fault: drop change notifications received from members.
    #[cfg(feature = "fault-injection")]
    pub fault_drop_cluster_notifications: bool,
    /// Limits and timings of the gRPC adapter.
    pub grpc: GrpcOptions,
    /// What history the background purge removes, and how often it runs.
    pub retention: Retention,
    /// The master key of encrypted configs, read from `cipher_master_key_file`; `None`:
    /// data keys are stored in clear (as Nacos does). Never a built-in default.
    pub cipher_master_key: Option<Arc<MasterKeys>>,
    /// TLS of the client ports, when `tls_cert` and `tls_key` are given.
    pub tls: Option<TlsSettings>,
    /// Most open HTTP connections from one address.
    pub http_max_connections_per_ip: usize,
    /// The abuse limits of the service: held polls per IP, write rate per IP.
    pub max_held_polls_per_ip: usize,
    pub write_rate_per_ip: u32,
    pub write_burst_per_ip: u32,
    /// Authentication (docs/security.md).
    pub auth: AuthSettings,
    /// Refuse to start when private files are open to other users (else: a warning).
    pub strict_permissions: bool,
}

/// TLS settings, resolved (docs/security.md, "TLS").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub files: nacelle_tls::TlsFiles,
    /// A separate HTTPS port (the HTTP port stays plain); `None`: the HTTP port is TLS.
    pub port: Option<u16>,
    /// A separate gRPC TLS port; `None`: the gRPC port is TLS.
    pub grpc_port: Option<u16>,
    /// How often the files are checked for changes; `None`: only on SIGHUP.
    pub reload_interval: Option<Duration>,
}

/// The history retention settings, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// History older than this is purged; `None`: kept forever (`history_retention_days`
    /// 0).
    pub max_age: Option<Duration>,
    /// Only the newest N rows of a config are kept; `None`: no count limit.
    pub keep_per_key: Option<u32>,
    /// Time between purges.
    pub interval: Duration,
    /// Audit entries older than this are purged; `None`: kept forever
    /// (`audit_retention_days` 0, the default).
    pub audit_max_age: Option<Duration>,
    /// Finished webhook deliveries older than this are purged; `None`: kept forever
    /// (`webhook_retention_days` 0; default 7 days).
    pub webhook_max_age: Option<Duration>,
}

impl Retention {
    /// Whether any history is ever purged.
    pub fn enabled(&self) -> bool {
        self.max_age.is_some() || self.keep_per_key.is_some()
    }

    /// The time before which audit entries are purged, for a purge starting at `now_ms`;
    /// `None`: the audit trail is kept forever.
    pub fn audit_cutoff(&self, now_ms: i64) -> Option<i64> {
        self.audit_max_age
            .map(|age| now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)))
    }

    /// The time before which finished webhook deliveries are purged, for a purge starting
    /// at `now_ms`; `None`: kept forever.
    pub fn webhook_cutoff(&self, now_ms: i64) -> Option<i64> {
        self.webhook_max_age
            .map(|age| now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)))
    }

    /// The store's rule for a purge starting at `now_ms`.
    pub fn rule(&self, now_ms: i64) -> nacelle_core::HistoryRetention {
        nacelle_core::HistoryRetention {
            older_than_ms: self.max_age.map(|age| {
                now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
            }),
            keep_per_key: self.keep_per_key,
        }
    }
}

impl Default for Settings {
    /// Every setting at its default (what [`Settings::merge`] gives for empty layers).
    fn default() -> Self {
        Settings::resolve(
            ServeArgs::default(),
            None,
            TrustedProxies::none(),
            Limits::default().content_validation,
        )
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

    /// Flag/env values win over file values, which win over defaults; then the result is
    /// checked.
    pub fn merge(a: ServeArgs, f: FileSettings) -> Result<Self, SettingsError> {
        let layer = a.or(f);
        if layer.tls_cert.is_some() != layer.tls_key.is_some() {
            return Err(SettingsError::Invalid(
                "tls_cert and tls_key go together: give both or neither".into(),
            ));
        }
        let tls_only = layer.tls_client_ca.is_some()
            || layer.tls_port.is_some()
            || layer.grpc_tls_port.is_some();
        if tls_only && layer.tls_cert.is_none() {
            return Err(SettingsError::Invalid(
                "tls_client_ca, tls_port and grpc_tls_port need tls_cert and tls_key".into(),
            ));
        }
        let cipher_master_key = match &layer.cipher_master_key_file {
            Some(path) => Some(Arc::new(read_master_key(path)?)),
            None => None,
        };
        let cluster_secret = read_secret(
            layer.cluster_secret.clone(),
            layer.cluster_secret_file.as_deref(),
        )?;
        let trusted_proxies = match &layer.trusted_proxies {
            Some(list) => list.parse()?,
            None => TrustedProxies::none(),
        };
        let default_mode = layer
            .content_validation
            .map_or(Limits::default().content_validation.default, Into::into);
        let content_validation = ValidationPolicy::parse(
            default_mode,
            layer.content_validation_namespaces.as_deref().unwrap_or(""),
        )
        .map_err(|e| SettingsError::Invalid(format!("content_validation_namespaces: {e}")))?;
        let token_secret = read_secret(
            layer.auth_token_secret.clone(),
            layer.auth_token_secret_file.as_deref(),
        )?;
        let admin_password = read_secret(
            layer.admin_password.clone(),
            layer.admin_password_file.as_deref(),
        )?;
        let db = read_secret(layer.db.clone(), layer.db_file.as_deref())?
            .filter(|url| !url.trim().is_empty());
        let mut settings =
            Settings::resolve(layer, cluster_secret, trusted_proxies, content_validation);
        settings.cipher_master_key = cipher_master_key;
        settings.auth.token_secret = token_secret;
        settings.auth.admin_password = admin_password;
        settings.db = db;
        settings.validate()?;
        Ok(settings)
    }

    /// Fills every setting `layer` leaves unset with its default. Infallible: what can fail
    /// (reading the secret file, parsing the proxies and the validation overrides) was done before, and checks come
    /// after ([`Settings::validate`]).
    fn resolve(
        layer: ServeArgs,
        cluster_secret: Option<String>,
        trusted_proxies: TrustedProxies,
        content_validation: ValidationPolicy,
    ) -> Settings {
        let limits = Limits::default();
        let http = HttpOptions::default();
        let grpc = GrpcOptions::default();
        let max_content_bytes = layer.max_content_bytes.unwrap_or(limits.max_content_bytes);
        let millis = |ms: Option<u64>, default: Duration| ms.map_or(default, Duration::from_millis);
        Settings {
            data_dir: layer
                .data_dir
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            bind: layer.bind.unwrap_or(DEFAULT_BIND),
            port: layer.port.unwrap_or(DEFAULT_PORT),
            grpc_port: layer.grpc_port,
            cluster_grpc_port: layer.cluster_grpc_port,
            db: layer.db.filter(|s| !s.trim().is_empty()),
            log_format: layer.log_format.unwrap_or_default(),
            log: layer.log.unwrap_or_else(|| DEFAULT_LOG.into()),
            max_content_bytes,
            max_request_bytes: layer
                .max_request_bytes
                .unwrap_or_else(|| HttpOptions::request_bytes_for(max_content_bytes)),
            max_head_bytes: layer
                .max_head_bytes
                .unwrap_or(nacelle_http::DEFAULT_MAX_HEAD_BYTES),
            max_body_memory_bytes: layer
                .max_body_memory_bytes
                .unwrap_or(nacelle_http::DEFAULT_MAX_BODY_MEMORY),
            max_unauthenticated_body_memory_bytes: layer
                .max_unauthenticated_body_memory_bytes
                .unwrap_or(nacelle_http::DEFAULT_MAX_UNAUTHENTICATED_BODY_MEMORY),
            max_listen_keys: layer.max_listen_keys.unwrap_or(limits.max_listen_keys),
            max_held_polls: layer.max_held_polls.unwrap_or(limits.max_held_polls),
            long_poll_min_hold: millis(layer.long_poll_min_hold_ms, http.long_poll_min_hold),
            members: layer
                .members
                .unwrap_or_default()
                .split(',')
                .map(|m| m.trim().to_string())
                .filter(|m| !m.is_empty())
                .collect(),
            cluster_secret,
            follow_interval: millis(layer.follow_interval_ms, DEFAULT_FOLLOW_INTERVAL)
                .max(MIN_FOLLOW_INTERVAL),
            member_check_interval: millis(
                layer.member_check_interval_ms,
                DEFAULT_MEMBER_CHECK_INTERVAL,
            )
            .max(MIN_MEMBER_CHECK_INTERVAL),
            slow_request: millis(layer.slow_request_ms, nacelle_metrics::DEFAULT_SLOW_REQUEST),
            rollout_guard_urls: layer
                .rollout_guard_urls
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .map(|u| u.trim().to_string())
                .filter(|u| !u.is_empty())
                .collect(),
            prometheus_url: layer
                .prometheus_url
                .map(|u| u.trim().trim_end_matches('/').to_string())
                .filter(|u| !u.is_empty()),
            trusted_proxies: trusted_proxies.clone(),
            content_validation,
            #[cfg(feature = "fault-injection")]
            fault_drop_cluster_notifications: layer.fault_drop_cluster_notifications,
            grpc: GrpcOptions {
                max_connections: layer.grpc_max_connections.unwrap_or(grpc.max_connections),
                max_connections_per_ip: layer
                    .grpc_max_connections_per_ip
                    .unwrap_or(grpc.max_connections_per_ip),
                max_inbound_message_bytes: GrpcOptions::inbound_message_bytes_for(
                    max_content_bytes,
                ),
                trusted_proxies,
                ..grpc
            },
            retention: Retention {
                max_age: Some(
                    layer
                        .history_retention_days
                        .unwrap_or(DEFAULT_HISTORY_RETENTION_DAYS),
                )
                .filter(|days| *days > 0)
                .map(|days| Duration::from_secs(u64::from(days) * 86_400)),
                keep_per_key: layer.history_keep_per_key.filter(|n| *n > 0),
                interval: layer
                    .history_purge_interval_s
                    .map_or(DEFAULT_HISTORY_PURGE_INTERVAL, Duration::from_secs)
                    .max(MIN_HISTORY_PURGE_INTERVAL),
                audit_max_age: layer
                    .audit_retention_days
                    .filter(|days| *days > 0)
                    .map(|days| Duration::from_secs(u64::from(days) * 86_400)),
                webhook_max_age: Some(
                    layer
                        .webhook_retention_days
                        .unwrap_or(DEFAULT_WEBHOOK_RETENTION_DAYS),
                )
                .filter(|days| *days > 0)
                .map(|days| Duration::from_secs(u64::from(days) * 86_400)),
            },
            // Read from its file in `merge` (it can fail); none by default.
            cipher_master_key: None,
            tls: match (layer.tls_cert, layer.tls_key) {
                (Some(cert), Some(key)) => Some(TlsSettings {
                    files: nacelle_tls::TlsFiles {
                        cert,
                        key,
                        client_ca: layer.tls_client_ca,
                    },
                    port: layer.tls_port,
                    grpc_port: layer.grpc_tls_port,
                    reload_interval: Some(millis(
                        layer.tls_reload_interval_ms,
                        DEFAULT_TLS_RELOAD_INTERVAL,
                    ))
                    .filter(|d| !d.is_zero()),
                }),
                // Half a pair is refused by `merge` before this.
                _ => None,
            },
            http_max_connections_per_ip: layer
                .http_max_connections_per_ip
                .unwrap_or(nacelle_http::DEFAULT_MAX_CONNECTIONS_PER_IP),
            max_held_polls_per_ip: layer
                .max_held_polls_per_ip
                .unwrap_or(limits.max_held_polls_per_ip),
            write_rate_per_ip: layer.write_rate_per_ip.unwrap_or(limits.write_rate_per_ip),
            write_burst_per_ip: layer
                .write_burst_per_ip
                .unwrap_or(limits.write_burst_per_ip),
            auth: AuthSettings {
                enabled: layer.auth.unwrap_or_default() == AuthMode::On,
                anonymous_read: layer.auth_anonymous_read.unwrap_or(false),
                // Read in `merge` (a file can fail to read).
                token_secret: None,
                token_ttl_s: layer
                    .auth_token_ttl_s
                    .unwrap_or(nacelle_service::auth::DEFAULT_TOKEN_TTL_S)
                    .max(1),
                admin_password: None,
            },
            strict_permissions: layer.strict_permissions.unwrap_or(false),
        }
    }

    /// Rejects settings a server cannot run with.
    fn validate(&self) -> Result<(), SettingsError> {
        if self.max_content_bytes == 0 {
            return Err(SettingsError::Invalid(
                "max_content_bytes must be > 0".into(),
            ));
        }
        if self.max_listen_keys == 0 {
            return Err(SettingsError::Invalid("max_listen_keys must be > 0".into()));
        }
        if self.max_unauthenticated_body_memory_bytes > self.max_body_memory_bytes {
            return Err(SettingsError::Invalid(
                "max_unauthenticated_body_memory_bytes must not exceed max_body_memory_bytes"
                    .into(),
            ));
        }
        if self.http_max_connections_per_ip == 0 || self.max_held_polls_per_ip == 0 {
            return Err(SettingsError::Invalid(
                "http_max_connections_per_ip and max_held_polls_per_ip must be > 0".into(),
            ));
        }
        if let Some(secret) = &self.cluster_secret {
            check_cluster_secret(secret)
                .map_err(|why| SettingsError::Invalid(format!("cluster_secret: {why}")))?;
        }
        if let Some(word) = self.auth.admin_password.as_deref().and_then(placeholder) {
            return Err(SettingsError::Invalid(format!(
                "admin_password looks like the placeholder of an example (`{word}`): \
                 give a password of your own"
            )));
        }
        if let Some(secret) = &self.auth.token_secret {
            nacelle_service::auth::decode_secret(secret)
                .map_err(|e| SettingsError::Invalid(format!("auth_token_secret: {e}")))?;
        }
        self.grpc
            .validate()
            .map_err(|e| SettingsError::Invalid(e.to_string()))
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
            max_held_polls_per_ip: self.max_held_polls_per_ip,
            write_rate_per_ip: self.write_rate_per_ip,
            write_burst_per_ip: self.write_burst_per_ip,
            content_validation: self.content_validation.clone(),
            cipher_master_key: self.cipher_master_key.clone(),
            // Nacos's fixed defaults (20 patterns, 500 keys each); not settings yet.
            max_watch_patterns: Limits::default().max_watch_patterns,
            max_pattern_keys: Limits::default().max_pattern_keys,
        }
    }

    /// Options of the HTTP adapter; `self_address` is the bound HTTP address.
    pub fn http_options(&self, self_address: std::net::SocketAddr) -> HttpOptions {
        HttpOptions {
            max_request_bytes: self.max_request_bytes,
            max_body_memory: self.max_body_memory_bytes,
            max_unauthenticated_body_memory: self.max_unauthenticated_body_memory_bytes,
            long_poll_min_hold: self.long_poll_min_hold,
            cluster_secret: self.cluster_secret.clone(),
            self_address: Some(self_address),
            trusted_proxies: self.trusted_proxies.clone(),
            #[cfg(feature = "fault-injection")]
            drop_cluster_notifications: self.fault_drop_cluster_notifications,
        }
    }

    /// Options of the cluster gRPC port, given the cluster secret.
    pub fn cluster_grpc_options(&self, secret: &str) -> nacelle_grpc::ClusterGrpcOptions {
        nacelle_grpc::ClusterGrpcOptions {
            #[cfg(feature = "fault-injection")]
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

/// The master keys in `path`: one base64 key of 32 bytes per line, the current key first
/// (previous ones only unwrap); blank lines and `#` comments ignored. An unreadable file
/// or a key of another length stops the start with the path and the reason.
fn read_master_key(path: &Path) -> Result<MasterKeys, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    MasterKeys::parse(&text).map_err(|e| {
        SettingsError::Invalid(format!("cipher_master_key_file {}: {e}", path.display()))
    })
}

/// The placeholder word `text` contains, if any ([`PLACEHOLDER_WORDS`]).
fn placeholder(text: &str) -> Option<&'static str> {
    let folded: String = text
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    PLACEHOLDER_WORDS
        .iter()
        .copied()
        .find(|w| folded.contains(w))
}

/// The rule of a cluster secret: at least [`MIN_SECRET_LEN`] characters, of which at least
/// [`MIN_SECRET_DISTINCT`] different, and no placeholder word. The reason when it fails.
fn check_cluster_secret(secret: &str) -> Result<(), String> {
    if secret.chars().count() < MIN_SECRET_LEN {
        return Err(format!(
            "must be at least {MIN_SECRET_LEN} characters (e.g. `openssl rand -base64 32`)"
        ));
    }
    if let Some(word) = placeholder(secret) {
        return Err(format!(
            "looks like the placeholder of an example (`{word}`): generate one, e.g. \
             `openssl rand -base64 32`"
        ));
    }
    let distinct: std::collections::HashSet<char> = secret.chars().collect();
    if distinct.len() < MIN_SECRET_DISTINCT {
        return Err(format!(
            "is too weak: it must hold at least {MIN_SECRET_DISTINCT} different characters \
             (e.g. `openssl rand -base64 32`)"
        ));
    }
    Ok(())
}

/// A secret (the cluster secret, the token secret, a password, the database URL): given
/// directly, else the first line of its file; blank means none.
fn read_secret(
    given: Option<String>,
    file: Option<&Path>,
) -> Result<Option<String>, SettingsError> {
    let secret = match (given, file) {
        (Some(s), _) => Some(s),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            Some(text.lines().next().unwrap_or("").trim().to_string())
        }
        (None, None) => None,
    };
    Ok(secret.filter(|s| !s.is_empty()))
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
    fn history_retention_settings() -> Result<(), Box<dyn std::error::Error>> {
        let d = Settings::default().retention;
        assert_eq!(
            d.max_age,
            Some(Duration::from_secs(30 * 86_400)),
            "Nacos's 30 days"
        );
        assert_eq!(
            (d.keep_per_key, d.interval),
            (None, Duration::from_secs(3600))
        );
        assert!(d.enabled());
        let rule = d.rule(40 * 86_400_000);
        assert_eq!(rule.older_than_ms, Some(10 * 86_400_000));
        assert_eq!(rule.keep_per_key, None);

        let file: FileSettings = toml::from_str(
            "history_retention_days = 0\nhistory_keep_per_key = 5\nhistory_purge_interval_s = 0",
        )?;
        let r = Settings::merge(ServeArgs::default(), file)?.retention;
        assert_eq!(r.max_age, None, "0 days: kept forever");
        assert_eq!(r.keep_per_key, Some(5));
        assert_eq!(r.interval, MIN_HISTORY_PURGE_INTERVAL);
        assert_eq!(r.rule(1).older_than_ms, None);

        let off = Settings::merge(
            parse(&[
                "--history-retention-days",
                "0",
                "--history-keep-per-key",
                "0",
            ])?,
            FileSettings::default(),
        )?;
        assert!(!off.retention.enabled(), "nothing is ever purged");
        Ok(())
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

    /// `nacelle serve ARGS` as the binary parses it (the environment included).
    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        ServeArgs::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
    }

    #[test]
    fn precedence_through_flag_env_file_and_default() -> Result<(), Box<dyn std::error::Error>> {
        // The only test that sets a variable, and no other test looks at this setting.
        const VAR: &str = "NACELLE_LONG_POLL_MIN_HOLD_MS";
        let file: FileSettings = toml::from_str("long_poll_min_hold_ms = 3000")?;
        let hold =
            |args: &[&str], file: &FileSettings| -> Result<u128, Box<dyn std::error::Error>> {
                Ok(Settings::merge(parse(args)?, file.clone())?
                    .long_poll_min_hold
                    .as_millis())
            };
        std::env::set_var(VAR, "2000");
        let flag = hold(&["--long-poll-min-hold-ms", "1000"], &file);
        let env = hold(&[], &file);
        std::env::remove_var(VAR);
        assert_eq!(flag?, 1000, "the flag wins over env and file");
        assert_eq!(env?, 2000, "env wins over the file");
        assert_eq!(hold(&[], &file)?, 3000, "the file wins over the default");
        assert_eq!(
            hold(&[], &FileSettings::default())?,
            HttpOptions::default().long_poll_min_hold.as_millis(),
            "the default last"
        );
        Ok(())
    }

    /// `--auth-anonymous-read` is a switch: bare it is true, and `=true`/`=false` (the
    /// old `--auth-anonymous-read true` too) say which; its variable and the file still
    /// set it, below the flag.
    #[test]
    fn boolean_switches_work_bare_and_with_a_value() -> Result<(), Box<dyn std::error::Error>> {
        // The only test that sets this variable or looks at this setting.
        const VAR: &str = "NACELLE_AUTH_ANONYMOUS_READ";
        let anonymous = |args: &[&str], file: &str| -> Result<bool, Box<dyn std::error::Error>> {
            let file: FileSettings = toml::from_str(file)?;
            Ok(Settings::merge(parse(args)?, file)?.auth.anonymous_read)
        };
        let cases: [(&[&str], bool); 9] = [
            (&[], false),
            (&["--auth-anonymous-read"], true),
            (&["--auth-anonymous-read=true"], true),
            (&["--auth-anonymous-read=false"], false),
            (&["--auth-anonymous-read", "true"], true),
            (&["--auth-anonymous-read", "false"], false),
            (&["--auth-anonymous-read=yes"], true),
            (&["--auth-anonymous-read=0"], false),
            (&["--auth-anonymous-read", "--port", "1"], true),
        ];
        for (args, want) in cases {
            assert_eq!(anonymous(args, "")?, want, "{args:?}");
        }
        assert!(parse(&["--auth-anonymous-read=maybe"]).is_err());
        #[cfg(feature = "fault-injection")]
        for (args, want) in [
            (&["--fault-drop-cluster-notifications"][..], true),
            (
                &["--fault-drop-cluster-notifications", "--port", "1"][..],
                true,
            ),
            (&["--fault-drop-cluster-notifications=false"][..], false),
            (&[][..], false),
        ] {
            assert_eq!(
                parse(args)?.fault_drop_cluster_notifications,
                want,
                "{args:?}"
            );
        }
        // The file, and the flag over it.
        assert!(anonymous(&[], "auth_anonymous_read = true")?);
        assert!(!anonymous(
            &["--auth-anonymous-read=false"],
            "auth_anonymous_read = true"
        )?);
        // The variable over the file, the flag over the variable.
        std::env::set_var(VAR, "true");
        let env = anonymous(&[], "auth_anonymous_read = false");
        let flag = anonymous(&["--auth-anonymous-read=false"], "");
        std::env::set_var(VAR, "false");
        let env_false = anonymous(&[], "auth_anonymous_read = true");
        let bare_over_env = anonymous(&["--auth-anonymous-read"], "");
        std::env::remove_var(VAR);
        assert!(env?, "NACELLE_AUTH_ANONYMOUS_READ=true over the file");
        assert!(!flag?, "--auth-anonymous-read=false over the variable");
        assert!(
            !env_false?,
            "NACELLE_AUTH_ANONYMOUS_READ=false over the file"
        );
        assert!(bare_over_env?, "the bare flag over the variable");
        Ok(())
    }

    /// Each default is written once: where a setting is also an adapter's option, the
    /// resolved default is that option's `Default`.
    #[test]
    fn defaults_are_the_option_structs_defaults() {
        let s = Settings::default();
        assert!(s.validate().is_ok(), "the defaults are valid");
        let limits = Limits::default();
        assert_eq!(s.limits().max_content_bytes, limits.max_content_bytes);
        assert_eq!(s.limits().max_listen_keys, limits.max_listen_keys);
        assert_eq!(s.limits().max_held_polls, limits.max_held_polls);
        assert_eq!(s.limits().content_validation, limits.content_validation);
        assert_eq!(
            s.limits().max_held_polls_per_ip,
            limits.max_held_polls_per_ip
        );
        assert_eq!(s.limits().write_rate_per_ip, limits.write_rate_per_ip);
        assert_eq!(s.limits().write_burst_per_ip, limits.write_burst_per_ip);
        assert_eq!(
            s.http_max_connections_per_ip,
            nacelle_http::ServeOptions::default().max_connections_per_ip
        );
        assert_eq!(s.tls, None, "plain text unless a certificate is given");
        assert_eq!(s.grpc, GrpcOptions::default());
        let http = HttpOptions::default();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 8848));
        let resolved = s.http_options(addr);
        assert_eq!(resolved.max_request_bytes, http.max_request_bytes);
        assert_eq!(resolved.long_poll_min_hold, http.long_poll_min_hold);
        assert_eq!(resolved.cluster_secret, http.cluster_secret);
        assert_eq!(resolved.trusted_proxies, http.trusted_proxies);
        // Empty layers merge to the same settings as `Default`.
        let merged = Settings::merge(ServeArgs::default(), FileSettings::default())
            .map(|m| format!("{m:?}"));
        assert_eq!(merged.ok(), Some(format!("{s:?}")));
    }

    #[test]
    fn tls_settings_come_as_a_pair() -> Result<(), SettingsError> {
        let half = ServeArgs {
            tls_cert: Some("/etc/nacelle/server.crt".into()),
            ..Default::default()
        };
        let err = Settings::merge(half, FileSettings::default()).expect_err("a half pair");
        assert!(err.to_string().contains("tls_cert and tls_key"), "{err}");
        let ca_alone = ServeArgs {
            tls_client_ca: Some("/etc/nacelle/ca.crt".into()),
            ..Default::default()
        };
        assert!(Settings::merge(ca_alone, FileSettings::default()).is_err());
        let file: FileSettings = toml::from_str(
            "tls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\ntls_port = 8443\ntls_reload_interval_ms = 0",
        )
        .expect("valid toml");
        let s = Settings::merge(ServeArgs::default(), file)?;
        let tls = s.tls.expect("TLS on");
        assert_eq!(tls.files.cert, PathBuf::from("/c.pem"));
        assert_eq!(tls.port, Some(8443));
        assert_eq!(tls.grpc_port, None, "the gRPC port serves TLS itself");
        assert_eq!(tls.reload_interval, None, "0: SIGHUP only");
        Ok(())
    }

    #[test]
    fn limits_derived_from_the_content_limit_follow_it() -> Result<(), SettingsError> {
        let args = ServeArgs {
            max_content_bytes: Some(20 * 1024 * 1024),
            ..Default::default()
        };
        let s = Settings::merge(args, FileSettings::default())?;
        assert_eq!(
            s.max_request_bytes,
            HttpOptions::request_bytes_for(20 * 1024 * 1024)
        );
        assert_eq!(
            s.grpc.max_inbound_message_bytes,
            20 * 1024 * 1024 + GrpcOptions::MESSAGE_OVERHEAD_BYTES
        );
        Ok(())
    }

    /// A new setting without documentation fails here: every flag, its variable and its
    /// TOML key must appear in docs/configuration.md.
    #[test]
    fn docs_list_every_setting() {
        use clap::CommandFactory;
        let docs = include_str!("../../../docs/configuration.md");
        let mut missing = Vec::new();
        let command = ServeArgs::command();
        let args: Vec<_> = command
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .collect();
        assert!(args.len() > ServeArgs::KEYS.len(), "every key and --config");
        for arg in args {
            let Some(long) = arg.get_long() else {
                missing.push(format!("{} has no long flag", arg.get_id()));
                continue;
            };
            let flag = format!("`--{long}`");
            if !docs.contains(&flag) {
                missing.push(flag);
            }
            match arg.get_env().and_then(|e| e.to_str()) {
                Some(env) if docs.contains(&format!("`{env}`")) => {}
                Some(env) => missing.push(env.to_string()),
                None => missing.push(format!("--{long} reads no environment variable")),
            }
        }
        for key in ServeArgs::KEYS {
            if !docs.contains(&format!("`{key}`")) {
                missing.push(format!("TOML key {key}"));
            }
        }
        assert!(
            missing.is_empty(),
            "not in docs/configuration.md: {missing:?}"
        );
    }

    /// The commented settings file of the Debian package lists every key, parses as it is,
    /// and still parses with every example line uncommented.
    #[test]
    fn the_packaged_settings_file_lists_every_key() -> Result<(), Box<dyn std::error::Error>> {
        let text = include_str!("../../../packaging/nacelle.toml");
        let missing: Vec<_> = ServeArgs::KEYS
            .iter()
            .filter(|key| {
                !text
                    .lines()
                    .any(|l| l.trim_start_matches('#').starts_with(&format!("{key} = ")))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "not in packaging/nacelle.toml: {missing:?}"
        );
        let as_shipped: FileSettings = toml::from_str(text)?;
        assert_eq!(
            as_shipped.data_dir.as_deref(),
            Some(Path::new("/var/lib/nacelle"))
        );
        let uncommented: String = text
            .lines()
            .map(|l| match l.strip_prefix('#') {
                Some(rest)
                    if ServeArgs::KEYS
                        .iter()
                        .any(|k| rest.starts_with(&format!("{k} = "))) =>
                {
                    rest
                }
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let every: FileSettings = toml::from_str(&uncommented)?;
        assert_eq!(every.port, Some(8848));
        Ok(())
    }

    /// Every TOML key is its flag with `_` for `-`, and its variable `NACELLE_` + the key in
    /// capitals, as documented.
    #[test]
    fn keys_flags_and_variables_are_one_name() {
        use clap::CommandFactory;
        let command = ServeArgs::command();
        for key in ServeArgs::KEYS {
            let long = key.replace('_', "-");
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(&long));
            let env = arg.and_then(|a| a.get_env()).and_then(|e| e.to_str());
            assert_eq!(
                env,
                Some(format!("NACELLE_{}", key.to_uppercase()).as_str()),
                "{key}"
            );
        }
        assert!(toml::from_str::<FileSettings>("config = \"x.toml\"").is_err());
    }

    #[test]
    fn trusted_proxies_from_every_layer() -> Result<(), Box<dyn std::error::Error>> {
        let peer: IpAddr = "10.1.2.3".parse()?;
        let none = Settings::merge(ServeArgs::default(), FileSettings::default())?;
        assert!(none.trusted_proxies.is_empty(), "default: none");
        let flag = Settings::merge(
            parse(&["--trusted-proxies", "10.0.0.0/8, ::1"])?,
            FileSettings::default(),
        )?;
        assert!(flag.trusted_proxies.trusts(peer));
        assert!(flag.trusted_proxies.trusts("::1".parse()?));
        let string: FileSettings = toml::from_str("trusted_proxies = \"10.0.0.0/8,192.168.0.1\"")?;
        let list: FileSettings =
            toml::from_str("trusted_proxies = [\"10.0.0.0/8\", \"192.168.0.1, ::1\"]")?;
        for file in [string, list] {
            let s = Settings::merge(ServeArgs::default(), file)?;
            assert!(s.trusted_proxies.trusts(peer));
            assert!(s.trusted_proxies.trusts("192.168.0.1".parse()?));
            assert!(!s.trusted_proxies.trusts("192.168.0.2".parse()?));
            // Both adapters get the same policy.
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 8848));
            assert_eq!(s.http_options(addr).trusted_proxies, s.trusted_proxies);
            assert_eq!(s.grpc.trusted_proxies, s.trusted_proxies);
        }
        Ok(())
    }

    #[test]
    fn invalid_trusted_proxies_are_a_settings_error() -> Result<(), Box<dyn std::error::Error>> {
        for bad in ["proxy.local", "10.0.0.0/33", "10.0.0.1,nope"] {
            let args = parse(&["--trusted-proxies", bad])?;
            match Settings::merge(args, FileSettings::default()) {
                Err(SettingsError::Invalid(msg)) => {
                    assert!(msg.starts_with("trusted_proxies:"), "{msg}");
                }
                other => panic!("{bad}: expected an invalid setting, got {other:?}"),
            }
        }
        let file: FileSettings = toml::from_str("trusted_proxies = [\"10.0.0.0/8\", \"x\"]")?;
        assert!(matches!(
            Settings::merge(ServeArgs::default(), file),
            Err(SettingsError::Invalid(_))
        ));
        assert!(toml::from_str::<FileSettings>("trusted_proxies = 7").is_err());
        Ok(())
    }

    #[test]
    fn content_validation_from_every_layer() -> Result<(), Box<dyn std::error::Error>> {
        let ns = |s: &str| nacelle_core::NamespaceId::parse(Some(s));
        let default = Settings::merge(ServeArgs::default(), FileSettings::default())?;
        assert_eq!(default.content_validation.default, ValidationMode::Warn);
        assert!(default.content_validation.namespaces.is_empty());
        let file: FileSettings = toml::from_str(
            "content_validation = \"off\"\ncontent_validation_namespaces = \"prod=reject\"",
        )?;
        let s = Settings::merge(parse(&["--content-validation", "reject"])?, file.clone())?;
        assert_eq!(
            s.content_validation.default,
            ValidationMode::Reject,
            "flag over file"
        );
        let s = Settings::merge(ServeArgs::default(), file)?;
        assert_eq!(s.limits().content_validation.default, ValidationMode::Off);
        assert_eq!(
            s.limits().content_validation.mode_for(&ns("prod")?),
            ValidationMode::Reject
        );
        assert_eq!(
            s.limits().content_validation.mode_for(&ns("dev")?),
            ValidationMode::Off
        );
        assert!(parse(&["--content-validation", "strict"]).is_err());
        assert!(toml::from_str::<FileSettings>("content_validation = \"strict\"").is_err());
        for bad in ["prod", "prod=strict", "a b=off", "x=off,x=warn"] {
            let args = parse(&["--content-validation-namespaces", bad])?;
            match Settings::merge(args, FileSettings::default()) {
                Err(SettingsError::Invalid(msg)) => {
                    assert!(msg.starts_with("content_validation_namespaces:"), "{msg}");
                }
                other => panic!("{bad}: expected an invalid setting, got {other:?}"),
            }
        }
        Ok(())
    }

    #[test]
    fn the_fault_switch_is_a_hidden_flag_only() -> Result<(), Box<dyn std::error::Error>> {
        // The tests of this crate build it with `fault-injection`; a release build has no
        // such flag.
        let s = Settings::merge(
            parse(&["--fault-drop-cluster-notifications"])?,
            FileSettings::default(),
        )?;
        assert!(s.fault_drop_cluster_notifications);
        assert!(!Settings::default().fault_drop_cluster_notifications);
        assert!(toml::from_str::<FileSettings>("fault_drop_cluster_notifications = true").is_err());
        Ok(())
    }

    #[test]
    fn the_master_key_file_is_read_or_stops_the_start() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let good = dir.path().join("master.key");
        // `openssl rand -base64 32` output: 44 characters and a newline.
        std::fs::write(&good, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")?;
        assert!(
            Settings::default().cipher_master_key.is_none(),
            "no default key"
        );
        let file: FileSettings = toml::from_str(&format!(
            "cipher_master_key_file = {:?}",
            good.display().to_string()
        ))?;
        let s = Settings::merge(ServeArgs::default(), file)?;
        let key = s.cipher_master_key.as_ref().ok_or("key read")?;
        assert_eq!(
            s.limits()
                .cipher_master_key
                .as_ref()
                .map(|k| k.current().id().to_string()),
            Some(key.current().id().to_string())
        );
        let short = dir.path().join("short.key");
        std::fs::write(&short, "AAECAwQFBgcICQoLDA0ODw==")?;
        let args = ServeArgs {
            cipher_master_key_file: Some(short),
            ..ServeArgs::default()
        };
        match Settings::merge(args, FileSettings::default()) {
            Err(SettingsError::Invalid(m)) => {
                assert!(
                    m.contains("short.key") && m.contains("16 bytes, not 32"),
                    "{m}"
                )
            }
            other => panic!("a short key must stop the start: {other:?}"),
        }
        let args = ServeArgs {
            cipher_master_key_file: Some(dir.path().join("absent.key")),
            ..ServeArgs::default()
        };
        assert!(matches!(
            Settings::merge(args, FileSettings::default()),
            Err(SettingsError::Read { .. })
        ));
        Ok(())
    }

    #[test]
    fn cluster_secrets_that_are_placeholders_or_weak_are_refused(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let merge = |secret: &str| {
            Settings::merge(
                ServeArgs {
                    cluster_secret: Some(secret.into()),
                    ..ServeArgs::default()
                },
                FileSettings::default(),
            )
        };
        for (secret, why) in [
            // packaging/k8s/secret.example.yaml, as it is.
            ("CHANGE-ME-at-least-16-characters", "placeholder"),
            ("change_me_please_0123456789", "placeholder"),
            ("Replace.Me.With.A.Real.Secret", "placeholder"),
            ("placeholder-0123456789abc", "placeholder"),
            ("an-EXAMPLE-secret-0123456789", "placeholder"),
            ("short-secret", "at least 16"),
            ("aaaaaaaaaaaaaaaaaaaaaaaa", "different characters"),
            ("abababababababababababab", "different characters"),
            ("passwordpassword", "different characters"),
        ] {
            match merge(secret) {
                Err(SettingsError::Invalid(m)) => {
                    assert!(
                        m.contains("cluster_secret") && m.contains(why),
                        "{secret}: {m}"
                    );
                    assert!(!m.contains(secret), "the secret is not echoed: {m}");
                }
                other => panic!("{secret} accepted: {other:?}"),
            }
        }
        for good in [
            "test-cluster-secret-0123456789",
            "0123456789abcdef",
            // `openssl rand -base64 24`
            "mQ2Vb8hS0vFZ4n1oYl7TqkXc3eJ9u6Ra",
        ] {
            assert_eq!(merge(good)?.cluster_secret.as_deref(), Some(good));
        }
        // The same rule for a secret from a file.
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("cluster-secret");
        std::fs::write(&file, "CHANGE-ME-at-least-16-characters\n")?;
        let from_file = Settings::merge(
            ServeArgs {
                cluster_secret_file: Some(file),
                ..ServeArgs::default()
            },
            FileSettings::default(),
        );
        assert!(
            matches!(&from_file, Err(SettingsError::Invalid(m)) if m.contains("placeholder")),
            "{from_file:?}"
        );
        // The example's administrator password is refused too.
        let admin = Settings::merge(
            ServeArgs {
                admin_password: Some("CHANGE-ME".into()),
                ..ServeArgs::default()
            },
            FileSettings::default(),
        );
        assert!(
            matches!(&admin, Err(SettingsError::Invalid(m)) if m.contains("admin_password")),
            "{admin:?}"
        );
        Ok(())
    }

    #[test]
    fn the_database_url_comes_from_db_or_else_db_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("db-url");
        let url = "postgres://nacelle:s3cret@db.internal:5432/nacelle";
        std::fs::write(&file, format!("{url}\n"))?;
        let toml_file: FileSettings =
            toml::from_str(&format!("db_file = {:?}", file.display().to_string()))?;
        let s = Settings::merge(ServeArgs::default(), toml_file.clone())?;
        assert_eq!(s.database_url(), url);
        assert!(s.shared_database());
        assert!(
            !s.database_display().contains("s3cret"),
            "{}",
            s.database_display()
        );
        // `db` (any layer) wins over the file.
        let args = ServeArgs {
            db: Some("sqlite:///tmp/x.db".into()),
            ..ServeArgs::default()
        };
        assert_eq!(
            Settings::merge(args, toml_file)?.database_url(),
            "sqlite:///tmp/x.db"
        );
        // A file that cannot be read stops the start, naming it.
        let args = ServeArgs {
            db_file: Some(dir.path().join("absent")),
            ..ServeArgs::default()
        };
        assert!(matches!(
            Settings::merge(args, FileSettings::default()),
            Err(SettingsError::Read { .. })
        ));
        Ok(())
    }
}
