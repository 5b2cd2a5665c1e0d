//! `nacelle-bench`: drives a running Nacelle (or any Nacos) server over loopback sockets and
//! prints a table plus one JSON line per scenario. Every loop is bounded in time and count;
//! only loopback addresses are accepted. Method and results: `docs/benchmarks.md`.

mod ceiling;
mod client;
mod client_latency;
mod cluster_fanout;
mod creds;
mod fanout_ceiling;
mod grpc_client;
mod grpc_scenarios;
mod h2_listener;
mod scenarios;
mod stats;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

/// Closes the bench's end of `stream` with a reset, leaving no `TIME_WAIT` behind. The
/// gRPC scenarios bind each connection to a source address (127.0.0.2, …) with port 0
/// before connecting; the kernel then picks a port no socket of that address holds,
/// `TIME_WAIT` ones included, and that search grew with them: after three 10 000-listener
/// runs (40 000 in `TIME_WAIT`) one `bind` took 1.4 ms and connecting 10 000 took 17 s
/// instead of 1 s.
fn no_time_wait(stream: &tokio::net::TcpStream) -> std::io::Result<()> {
    stream.set_zero_linger()
}
use clap::{Args, Parser, Subcommand};

/// The measuring clients' allocator (see Cargo.toml): the less the instrument costs on the
/// cores it shares with the server, the more its figures are the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "nacelle-bench",
    about = "Benchmarks for Nacelle over loopback sockets"
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    /// Access token sent with every HTTP and gRPC request (a server with authentication
    /// on: log in first, `POST /nacos/v1/auth/login`).
    #[arg(long, global = true, env = "NACELLE_BENCH_ACCESS_TOKEN")]
    access_token: Option<String>,
}

/// Options shared by load scenarios.
#[derive(Debug, Clone, Args)]
pub struct Load {
    /// Server HTTP address (loopback only).
    #[arg(long, default_value = "127.0.0.1:8848")]
    pub addr: SocketAddr,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Measured duration in seconds (after a 1 s warm-up).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// GET QPS over N keys of S bytes, keep-alive connections; p50/p99; errors.
    HttpGet {
        #[command(flatten)]
        load: Load,
        /// Number of keys to rotate over.
        #[arg(long, default_value_t = 100)]
        keys: usize,
        /// Content size in bytes.
        #[arg(long, default_value_t = 1024)]
        size: usize,
        /// Also publish a beta of every key for these IPs (an address no bench client has
        /// measures the cost of variant selection on every read).
        #[arg(long, conflicts_with = "gray_percent")]
        beta_ips: Option<String>,
        /// Also give every key a percent gray of this share (a staged rollout held at its
        /// first step; the bench's clients must fall outside it): the cost of the percent
        /// rule's selection on every read. At most 100 keys (the active rollouts' bound).
        #[arg(long)]
        gray_percent: Option<f64>,
        /// Encrypted configs: the keys are `cipher-aes-…` dataIds, so the server encrypts
        /// them on publish and decrypts for every GET (docs/encryption.md).
        #[arg(long)]
        cipher: bool,
    },
    /// The same GET load against a minimal hyper server with a fixed body (this machine's
    /// ceiling); run it in the same session as http-get and compare.
    Ceiling {
        #[command(flatten)]
        load: Load,
        /// Body size in bytes.
        #[arg(long, default_value_t = 1024)]
        size: usize,
    },
    /// Internal: the ceiling server process.
    #[command(hide = true)]
    CeilingServe {
        #[arg(long)]
        size: usize,
    },
    /// ConfigQueryRequest QPS over registered gRPC connections (--addr is the gRPC port),
    /// rotating over N keys of S bytes; p50/p99; errors.
    GrpcQuery {
        #[command(flatten)]
        load: Load,
        /// Number of keys to rotate over.
        #[arg(long, default_value_t = 100)]
        keys: usize,
        /// Content size in bytes.
        #[arg(long, default_value_t = 1024)]
        size: usize,
        /// Calls outstanding at once on each connection (HTTP/2 streams).
        #[arg(long, default_value_t = 1)]
        in_flight: usize,
    },
    /// Publish TPS and latency over HTTP or gRPC (--addr is that protocol's port), on
    /// distinct keys or one hot key.
    Publish {
        #[command(flatten)]
        load: Load,
        /// `http` or `grpc`.
        #[arg(long, default_value = "http")]
        protocol: String,
        /// `distinct` (every request a new key) or `hot` (one key).
        #[arg(long, default_value = "distinct")]
        keys: String,
        /// Content size in bytes.
        #[arg(long, default_value_t = 256)]
        size: usize,
    },
    /// N held long polls on one key, one publish, time to each wake-up; several rounds.
    LongpollFanout {
        #[arg(long, default_value = "127.0.0.1:8848")]
        addr: SocketAddr,
        /// Held polls per round.
        #[arg(long, default_value_t = 1000)]
        n: usize,
        /// Rounds.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// PID of the server, to report its CPU per released poll.
        #[arg(long)]
        server_pid: Option<u32>,
        /// Also publish a beta of the key for these IPs (not the pollers': every wake-up
        /// then goes through per-listener variant selection).
        #[arg(long, conflicts_with = "gray_percent")]
        beta_ips: Option<String>,
        /// Also give the key a percent gray of this share (a staged rollout held at its
        /// first step; the pollers must fall outside it): every wake-up then evaluates the
        /// percent rule per listener.
        #[arg(long)]
        gray_percent: Option<f64>,
        /// Pause in milliseconds before each publish, for every poll to reach the server
        /// and be held, and after each round's answers before the next polls are sent
        /// (default: 500 + n / 10 before, none after). Give more under a profiler, so that
        /// the publish's marker on stderr ("round N: publishing", then one more second
        /// before the publish) and the answers' marker ("round N: answered") bracket the
        /// release alone.
        #[arg(long)]
        pause_ms: Option<u64>,
    },
    /// N gRPC connections listening to one key, one publish per round, time from sending the
    /// publish to the arrival of each push; several rounds.
    GrpcFanout {
        /// Server gRPC address (loopback only).
        #[arg(long, default_value = "127.0.0.1:9848")]
        addr: SocketAddr,
        /// Listening connections.
        #[arg(long, default_value_t = 1000)]
        n: usize,
        /// Rounds.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[command(flatten)]
        sources: SourceArgs,
        /// PID of the server, to report its RSS.
        #[arg(long)]
        server_pid: Option<u32>,
        /// The listeners' client: `h2` (one task per connection on the `h2` crate, the
        /// cheapest instrument) or `tonic` (the bench's tonic client, as before issue 15).
        #[arg(long, value_enum, default_value_t = grpc_scenarios::ListenerClient::H2)]
        client: grpc_scenarios::ListenerClient,
        /// Pause in milliseconds before each publish (default 500) and after each round's
        /// pushes; with it, "round N: publishing" (one more second before the publish) and
        /// "round N: answered" on stderr bracket one round's pushes for a profiler.
        #[arg(long)]
        pause_ms: Option<u64>,
    },
    /// Several nodes on one database (issue 38): gRPC listeners and long polls on every
    /// node, one publish on the first per round; time to each client per node and over
    /// all, RSS per node idle and loaded, then each node's CPU while the first takes
    /// `--follow-rate` publishes a second of a key nobody listens to (the follower's cost).
    ClusterFanout {
        /// The nodes' HTTP addresses (loopback), the first takes the publishes.
        #[arg(long, value_delimiter = ',', required = true)]
        http: Vec<SocketAddr>,
        /// The nodes' client gRPC addresses, in the same order.
        #[arg(long, value_delimiter = ',', required = true)]
        grpc: Vec<SocketAddr>,
        /// The nodes' PIDs, in the same order (RSS and CPU per node).
        #[arg(long, value_delimiter = ',')]
        pids: Vec<u32>,
        /// gRPC listeners per node.
        #[arg(long, default_value_t = 1000)]
        grpc_per_node: usize,
        /// Held long polls per node.
        #[arg(long, default_value_t = 1000)]
        polls_per_node: usize,
        /// Rounds.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Publishes a second in the follower phase.
        #[arg(long, default_value_t = 10)]
        follow_rate: u32,
        /// Seconds of the follower phase.
        #[arg(long, default_value_t = 20)]
        follow_secs: u64,
    },
    /// The fan-out floor of this machine: a minimal raw-TCP push server (its own process)
    /// writes one message to N connections and reads N acks; time from the trigger to each
    /// arrival. Compare with grpc-fanout and longpoll-fanout at the same N.
    FanoutCeiling {
        /// Connections.
        #[arg(long, default_value_t = 1000)]
        n: usize,
        /// Rounds.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Message size in bytes (a framed ConfigChangeNotifyRequest is about 250).
        #[arg(long, default_value_t = 256)]
        size: usize,
    },
    /// Internal: the fan-out ceiling server process.
    #[command(hide = true)]
    FanoutCeilingServe {
        #[arg(long)]
        n: usize,
        #[arg(long)]
        size: usize,
    },
    /// Opens N gRPC connections (handshake + one listened key each), holds them and reports
    /// the server's RSS before and after.
    Connections {
        /// Server gRPC address (loopback only).
        #[arg(long, default_value = "127.0.0.1:9848")]
        addr: SocketAddr,
        /// Connections to open.
        #[arg(long, default_value_t = 10_000)]
        n: usize,
        /// Seconds to hold them after they are all open.
        #[arg(long, default_value_t = 30)]
        hold: u64,
        #[command(flatten)]
        sources: SourceArgs,
        /// PID of the server process (its RSS is read from /proc/PID/status).
        #[arg(long)]
        server_pid: u32,
        /// How far each connection goes (to break the per-connection cost down).
        #[arg(long, value_enum, default_value = "listening")]
        stage: grpc_scenarios::Stage,
    },
    /// End-to-end change latency through a client library: publish sent → the typed value
    /// updated in nacelle-client's bind handle (JSON into a struct), beside nacos-sdk 0.8's
    /// listener callback + the same parse, at each bound-key count (one key published at a
    /// time, round-robin).
    ClientLatency {
        /// Server HTTP address (loopback only).
        #[arg(long, default_value = "127.0.0.1:8848")]
        addr: SocketAddr,
        /// Server gRPC address (default: the HTTP port + 1000).
        #[arg(long)]
        grpc_addr: Option<SocketAddr>,
        /// Bound-key counts to measure at (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "1,1000")]
        keys: Vec<usize>,
        /// Measured changes per client and key count.
        #[arg(long, default_value_t = 500)]
        samples: usize,
    },
    /// Time from process start to readiness, and RSS, with N configs of S bytes.
    Startup {
        /// Path of the `nacelle` binary.
        #[arg(long, default_value = "target/release/nacelle")]
        bin: PathBuf,
        /// Number of configs to seed.
        #[arg(long, default_value_t = 100_000)]
        configs: usize,
        /// Content size in bytes.
        #[arg(long, default_value_t = 1024)]
        size: usize,
        /// Scratch directory (a fresh subdirectory is created).
        #[arg(long, default_value = "target/bench-startup")]
        dir: PathBuf,
    },
}

/// Source addresses of many gRPC connections: connection i binds
/// 127.0.0.(2 + offset + i / per-source) before connecting.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Connections per source address (the server allows 10 000 per client IP by default).
    #[arg(long, default_value_t = 5000)]
    per_source: usize,
    /// Skip this many source addresses (give each of several bench processes its own).
    #[arg(long, default_value_t = 0)]
    source_offset: usize,
}

impl SourceArgs {
    fn sources(&self) -> grpc_scenarios::Sources {
        grpc_scenarios::Sources {
            per_source: self.per_source.max(1),
            offset: self.source_offset,
        }
    }
}

/// Refuses anything but loopback targets.
pub fn check_loopback(addr: &SocketAddr) -> Result<()> {
    if !addr.ip().is_loopback() {
        bail!("{addr} is not a loopback address; nacelle-bench only targets this machine");
    }
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    creds::set(cli.access_token.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // The scenario runs as a task on the runtime's workers, not on the thread that blocks
    // on it: a fan-out scenario collects one arrival per listener from the listeners' tasks,
    // and a wake-up of a task on a worker is a local queue push, where waking the
    // `block_on` thread was a futex call and a context switch per arrival (about 1.4
    // futex calls per push), CPU taken from the server on the cores both share.
    rt.block_on(async move { tokio::spawn(run(cli)).await? })
}

/// The variant `--beta-ips` or `--gray-percent` asks for (clap keeps them apart).
fn variant_of(beta_ips: Option<&str>, gray_percent: Option<f64>) -> Option<scenarios::Variant<'_>> {
    match (beta_ips, gray_percent) {
        (Some(ips), _) => Some(scenarios::Variant::Beta(ips)),
        (None, Some(p)) => Some(scenarios::Variant::Percent(p)),
        (None, None) => None,
    }
}

async fn run(cli: Cli) -> Result<()> {
    match cli.scenario {
        Scenario::HttpGet {
            load,
            keys,
            size,
            beta_ips,
            gray_percent,
            cipher,
        } => {
            check_loopback(&load.addr)?;
            let variant = variant_of(beta_ips.as_deref(), gray_percent);
            scenarios::http_get(&load, keys, size, variant, cipher).await
        }
        Scenario::Ceiling { load, size } => ceiling::run(&load, size).await,
        Scenario::CeilingServe { size } => ceiling::serve(size).await,
        Scenario::FanoutCeiling { n, rounds, size } => fanout_ceiling::run(n, rounds, size).await,
        Scenario::FanoutCeilingServe { n, size } => fanout_ceiling::serve(n, size).await,
        Scenario::GrpcQuery {
            load,
            keys,
            size,
            in_flight,
        } => {
            check_loopback(&load.addr)?;
            grpc_scenarios::grpc_query(&load, keys, size, in_flight).await
        }
        Scenario::Publish {
            load,
            protocol,
            keys,
            size,
        } => {
            check_loopback(&load.addr)?;
            let hot = match keys.as_str() {
                "hot" => true,
                "distinct" => false,
                other => bail!("--keys must be distinct or hot, not {other}"),
            };
            match protocol.as_str() {
                "http" => scenarios::publish(&load, hot, size).await,
                "grpc" => grpc_scenarios::publish(&load, hot, size).await,
                other => bail!("--protocol must be http or grpc, not {other}"),
            }
        }
        Scenario::GrpcFanout {
            addr,
            n,
            rounds,
            sources,
            server_pid,
            client,
            pause_ms,
        } => {
            check_loopback(&addr)?;
            grpc_scenarios::grpc_fanout(
                addr,
                (n, rounds, pause_ms),
                (sources.sources(), client),
                server_pid,
            )
            .await
        }
        Scenario::ClusterFanout {
            http,
            grpc,
            pids,
            grpc_per_node,
            polls_per_node,
            rounds,
            follow_rate,
            follow_secs,
        } => {
            if http.len() != grpc.len() || (!pids.is_empty() && pids.len() != http.len()) {
                bail!("--http, --grpc and --pids must name the same nodes, in the same order");
            }
            for a in http.iter().chain(&grpc) {
                check_loopback(a)?;
            }
            let nodes: Vec<cluster_fanout::Node> = http
                .iter()
                .zip(&grpc)
                .enumerate()
                .map(|(i, (h, g))| cluster_fanout::Node {
                    http: *h,
                    grpc: *g,
                    pid: pids.get(i).copied(),
                })
                .collect();
            let plan = cluster_fanout::Plan {
                grpc_per_node: grpc_per_node.clamp(0, 50_000),
                polls_per_node: polls_per_node.clamp(0, 20_000),
                rounds: rounds.clamp(1, 100),
                follow_rate,
                follow_secs,
            };
            cluster_fanout::run(&nodes, plan).await
        }
        Scenario::Connections {
            addr,
            n,
            hold,
            sources,
            server_pid,
            stage,
        } => {
            check_loopback(&addr)?;
            grpc_scenarios::connections(
                addr,
                n,
                Duration::from_secs(hold.min(3600)),
                sources.sources(),
                (server_pid, stage),
            )
            .await
        }
        Scenario::LongpollFanout {
            addr,
            n,
            rounds,
            server_pid,
            beta_ips,
            gray_percent,
            pause_ms,
        } => {
            check_loopback(&addr)?;
            let variant = variant_of(beta_ips.as_deref(), gray_percent);
            let rounds = rounds.min(100);
            scenarios::longpoll_fanout(addr, (n, rounds, pause_ms), server_pid, variant).await
        }
        Scenario::ClientLatency {
            addr,
            grpc_addr,
            keys,
            samples,
        } => {
            let grpc = match grpc_addr {
                Some(g) => g,
                None => SocketAddr::new(addr.ip(), addr.port().saturating_add(1000)),
            };
            check_loopback(&addr)?;
            check_loopback(&grpc)?;
            if keys.is_empty() || keys.contains(&0) || keys.iter().any(|&k| k > 100_000) {
                bail!("--keys must be counts from 1 to 100000");
            }
            client_latency::run(addr, grpc, &keys, samples.clamp(1, 1_000_000)).await
        }
        Scenario::Startup {
            bin,
            configs,
            size,
            dir,
        } => scenarios::startup(&bin, configs, size, &dir).await,
    }
}

/// Measured duration, bounded to 10 minutes.
pub fn measured(load: &Load) -> Duration {
    Duration::from_secs(load.duration.clamp(1, 600))
}
