//! What a client is configured with: [`ServerAddr`], [`ClientBuilder`] and the resolved
//! options the client's tasks read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ClientError, Result};
use crate::key::namespace_id;
use crate::metrics::{Metrics, Sink};
use crate::secret::Secret;

/// Nacos's default distance from the HTTP port to the gRPC port (8848 → 9848).
pub const GRPC_PORT_OFFSET: u16 = 1000;

/// One server: its host, HTTP port (login and the admin calls) and gRPC port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerAddr {
    /// Host name or IP.
    pub host: String,
    /// The HTTP port (Nacos: 8848).
    pub http_port: u16,
    /// The gRPC port (Nacos: HTTP port + 1000).
    pub grpc_port: u16,
}

impl ServerAddr {
    /// `host` with its HTTP port; the gRPC port is HTTP + 1000.
    pub fn new(host: impl Into<String>, http_port: u16) -> Result<ServerAddr> {
        let grpc_port = http_port.checked_add(GRPC_PORT_OFFSET).ok_or_else(|| {
            ClientError::Config(format!(
                "HTTP port {http_port} + {GRPC_PORT_OFFSET} is no port: give the gRPC port"
            ))
        })?;
        Ok(ServerAddr {
            host: host.into(),
            http_port,
            grpc_port,
        })
    }

    /// With an explicit gRPC port.
    pub fn with_grpc_port(mut self, grpc_port: u16) -> ServerAddr {
        self.grpc_port = grpc_port;
        self
    }

    /// Parses `host:http_port`, `http://host:http_port`, or `host:http_port/grpc_port`
    /// (a gRPC port that is not HTTP + 1000).
    pub fn parse(s: &str) -> Result<ServerAddr> {
        let bad = || {
            ClientError::Config(format!(
                "server address `{s}`: expected host:port or host:port/grpc_port"
            ))
        };
        let rest = s
            .trim()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .trim_end_matches("/nacos");
        let (addr, grpc) = match rest.split_once('/') {
            Some((a, g)) => (a, Some(g.parse::<u16>().map_err(|_| bad())?)),
            None => (rest, None),
        };
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() {
            return Err(bad());
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server = match grpc {
            Some(g) => ServerAddr {
                host: host.to_string(),
                http_port: port,
                grpc_port: g,
            },
            None => ServerAddr::new(host, port)?,
        };
        Ok(server)
    }

    fn host_for_url(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }

    /// `http://host:grpc_port`, the gRPC endpoint.
    pub(crate) fn grpc_url(&self) -> String {
        format!("http://{}:{}", self.host_for_url(), self.grpc_port)
    }

    /// `http://host:http_port/nacos`, the base of the HTTP API.
    pub(crate) fn http_base(&self) -> String {
        format!("http://{}:{}/nacos", self.host_for_url(), self.http_port)
    }

    /// `host:grpc_port`, as logs and metrics name it.
    pub(crate) fn label(&self) -> String {
        format!("{}:{}", self.host, self.grpc_port)
    }
}

impl std::fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.http_port)
    }
}

/// How the client talks to the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// Nacos 2.x gRPC: pushes on a bi-stream (the default).
    #[default]
    Grpc,
    /// Nacos 1.x HTTP v1 with long polling (`/nacos/v1/cs/configs/listener`), for servers
    /// without the gRPC port; every poll carries the whole listen set with its md5s.
    HttpLongPolling,
}

/// Where the HTTP calls (the admin calls, the HTTP transport) carry the access token. gRPC
/// calls always carry it in the request's `metadata.headers`, as Nacos's clients do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenPlacement {
    /// `Authorization: Bearer <token>` and `accessToken: <token>` headers (the default):
    /// Nacos 1.x to 3.x and Nacelle read them, and they stay out of URLs — and so out of
    /// the access logs of the server and of any proxy.
    #[default]
    Headers,
    /// Nacos's `accessToken` query parameter, for servers that read no header Nacos
    /// sends (r-nacos's open API reads `Authorization` without its `Bearer` scheme). The
    /// token is then in every URL the client sends: never in a message of the client's
    /// own (its errors show no URL), but in the access logs of the server and proxies.
    QueryParameter,
}

/// Username and password for Nacos's login (the password's `Debug` is redacted).
#[derive(Debug, Clone)]
pub(crate) struct Credentials {
    pub(crate) username: String,
    pub(crate) password: Secret,
}

/// The resolved options, shared by the client's tasks.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) servers: Vec<ServerAddr>,
    pub(crate) namespace: String,
    pub(crate) app_name: Option<String>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) credentials: Option<Credentials>,
    pub(crate) access_token: Option<Secret>,
    pub(crate) token_placement: TokenPlacement,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) wait_for_server: Duration,
    pub(crate) backoff_min: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) keepalive: Duration,
    pub(crate) snapshot_dir: Option<PathBuf>,
    pub(crate) metrics: Sink,
    pub(crate) transport: Transport,
    pub(crate) long_poll_timeout: Duration,
    pub(crate) group_watch: GroupWatchMode,
    pub(crate) group_poll_interval: Duration,
}

/// How [`crate::Client::watch_group`] learns which keys a group holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupWatchMode {
    /// The server's fuzzy watch (Nacos 3.0 `ConfigFuzzyWatchRequest`, pushed) when the
    /// server answers it; else polling (a Nacos 2.x server, r-nacos, the HTTP transport).
    #[default]
    Auto,
    /// Always poll: list the group with the search API every `group_poll_interval`.
    Polling,
}

/// Builds a [`crate::Client`]:
///
/// ```no_run
/// # async fn demo() -> Result<(), nacelle_client::ClientError> {
/// let client = nacelle_client::Client::builder()
///     .server_addrs(["10.0.0.1:8848", "10.0.0.2:8848"])
///     .namespace("prod")
///     .app_name("shop")
///     .labels([("zone", "eu-1")])
///     .credentials("nacos", "secret")
///     .snapshot_dir("/var/lib/shop/config-snapshot")
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct ClientBuilder {
    servers: Vec<String>,
    explicit: Vec<ServerAddr>,
    opts: Options,
    metrics: Option<Arc<dyn Metrics>>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("servers", &self.servers)
            .field("explicit", &self.explicit)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            servers: Vec::new(),
            explicit: Vec::new(),
            opts: Options {
                servers: Vec::new(),
                namespace: String::new(),
                app_name: None,
                labels: BTreeMap::new(),
                credentials: None,
                access_token: None,
                token_placement: TokenPlacement::Headers,
                connect_timeout: Duration::from_secs(3),
                request_timeout: Duration::from_secs(5),
                wait_for_server: Duration::from_secs(3),
                backoff_min: Duration::from_millis(100),
                backoff_max: Duration::from_secs(1),
                keepalive: Duration::from_secs(5),
                snapshot_dir: None,
                metrics: Sink::default(),
                transport: Transport::Grpc,
                long_poll_timeout: Duration::from_secs(30),
                group_watch: GroupWatchMode::Auto,
                group_poll_interval: Duration::from_secs(10),
            },
            metrics: None,
        }
    }
}

impl ClientBuilder {
    /// Servers as `host:http_port` (gRPC on HTTP + 1000) or `host:http_port/grpc_port`;
    /// the client fails over between them in this order.
    pub fn server_addrs<I, S>(mut self, addrs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.servers
            .extend(addrs.into_iter().map(|s| s.as_ref().to_string()));
        self
    }

    /// One server with explicit ports.
    pub fn server(mut self, server: ServerAddr) -> Self {
        self.explicit.push(server);
        self
    }

    /// The namespace of every call that names none (default: `""`, the public one; read by
    /// [`crate::namespace_id`], so `public`, blank and `null` are it too).
    pub fn namespace(mut self, namespace: impl AsRef<str>) -> Self {
        self.opts.namespace = namespace_id(namespace.as_ref()).to_string();
        self
    }

    /// The application's name (label `AppName`, used by gray rules).
    pub fn app_name(mut self, app: impl Into<String>) -> Self {
        self.opts.app_name = Some(app.into());
        self
    }

    /// Connection labels for gray targeting; sent with the `app_` prefix Java clients use.
    pub fn labels<I, K, V>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.opts
            .labels
            .extend(labels.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Log in with this user (Nacos's `POST /nacos/v1/auth/login`); the token is
    /// refreshed before it expires and sent with every call.
    pub fn credentials(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.opts.credentials = Some(Credentials {
            username: username.into(),
            password: Secret::new(password),
        });
        self
    }

    /// Send this token (from an earlier login, e.g. a saved CLI profile) instead of
    /// logging in; ignored when credentials are given.
    pub fn access_token(mut self, token: impl Into<String>) -> Self {
        self.opts.access_token = Some(Secret::new(token));
        self
    }

    /// Where HTTP calls carry the token (default [`TokenPlacement::Headers`]; the
    /// login always sends the credentials in a form body).
    pub fn http_token(mut self, placement: TokenPlacement) -> Self {
        self.opts.token_placement = placement;
        self
    }

    /// Keep the last content of every listened key in this directory, and start from it
    /// when no server can be reached.
    pub fn snapshot_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.opts.snapshot_dir = Some(dir.into());
        self
    }

    /// How long one connection attempt may take (default 3 s).
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.opts.connect_timeout = t;
        self
    }

    /// How long one request may take (default 5 s).
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.opts.request_timeout = t;
        self
    }

    /// How long a call waits for a connection when there is none (default 3 s).
    pub fn wait_for_server(mut self, t: Duration) -> Self {
        self.opts.wait_for_server = t;
        self
    }

    /// Reconnect backoff: the first delay, doubled after every failed round of all servers
    /// up to `max` (default 100 ms … 1 s: a restarted server is found within a second).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.opts.backoff_min = min;
        self.opts.backoff_max = max.max(min);
        self
    }

    /// The transport (default gRPC; [`Transport::HttpLongPolling`] for servers without
    /// gRPC, e.g. Nacos 1.x). There is no automatic switch between the two.
    pub fn transport(mut self, transport: Transport) -> Self {
        self.opts.transport = transport;
        self
    }

    /// How long the server may hold a long poll (HTTP transport; default 30 s).
    pub fn long_poll_timeout(mut self, t: Duration) -> Self {
        self.opts.long_poll_timeout = t;
        self
    }

    /// How group watches find the keys of a group (default [`GroupWatchMode::Auto`]).
    pub fn group_watch_mode(mut self, mode: GroupWatchMode) -> Self {
        self.opts.group_watch = mode;
        self
    }

    /// How often a polling group watch lists its group (default 10 s).
    pub fn group_poll_interval(mut self, every: Duration) -> Self {
        self.opts.group_poll_interval = every;
        self
    }

    /// Installs a metrics sink (see [`crate::metrics`]).
    pub fn metrics(mut self, sink: impl Metrics + 'static) -> Self {
        self.metrics = Some(Arc::new(sink));
        self
    }

    /// Resolves the options (without connecting).
    pub(crate) fn options(self) -> Result<Options> {
        let mut opts = self.opts;
        for s in &self.servers {
            opts.servers.push(ServerAddr::parse(s)?);
        }
        opts.servers.extend(self.explicit);
        if opts.servers.is_empty() {
            return Err(ClientError::Config("no server address given".into()));
        }
        opts.metrics = Sink::new(self.metrics);
        Ok(opts)
    }

    /// Builds the client and starts connecting in the background; never waits for a
    /// server (calls do, up to `wait_for_server`).
    pub async fn build(self) -> Result<crate::Client> {
        crate::Client::start(self.options()?).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() -> Result<()> {
        assert_eq!(
            ServerAddr::parse("127.0.0.1:8848")?,
            ServerAddr {
                host: "127.0.0.1".into(),
                http_port: 8848,
                grpc_port: 9848
            }
        );
        assert_eq!(ServerAddr::parse("http://h:1/nacos")?.grpc_port, 1001);
        assert_eq!(ServerAddr::parse("h:80/9000")?.grpc_port, 9000);
        assert_eq!(
            ServerAddr::parse("[::1]:8848")?.grpc_url(),
            "http://[::1]:9848"
        );
        for bad in ["h", ":1", "h:x", "h:65000", "h:1/x"] {
            assert!(ServerAddr::parse(bad).is_err(), "{bad}");
        }
        Ok(())
    }
}
