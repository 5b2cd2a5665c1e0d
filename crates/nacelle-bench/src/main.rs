//! `nacelle-bench`: drives a running Nacelle (or any Nacos) server over loopback sockets and
//! prints a table plus one JSON line per scenario. Every loop is bounded in time and count;
//! only loopback addresses are accepted. Method and results: `docs/benchmarks.md`.

mod ceiling;
mod client;
mod scenarios;
mod stats;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "nacelle-bench",
    about = "Benchmarks for Nacelle over loopback sockets"
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
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
    /// Publish TPS and latency over HTTP, on distinct keys or one hot key.
    Publish {
        #[command(flatten)]
        load: Load,
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

/// Refuses anything but loopback targets.
pub fn check_loopback(addr: &SocketAddr) -> Result<()> {
    if !addr.ip().is_loopback() {
        bail!("{addr} is not a loopback address; nacelle-bench only targets this machine");
    }
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match cli.scenario {
            Scenario::HttpGet { load, keys, size } => {
                check_loopback(&load.addr)?;
                scenarios::http_get(&load, keys, size).await
            }
            Scenario::Ceiling { load, size } => ceiling::run(&load, size).await,
            Scenario::CeilingServe { size } => ceiling::serve(size).await,
            Scenario::Publish { load, keys, size } => {
                check_loopback(&load.addr)?;
                let hot = match keys.as_str() {
                    "hot" => true,
                    "distinct" => false,
                    other => bail!("--keys must be distinct or hot, not {other}"),
                };
                scenarios::publish(&load, hot, size).await
            }
            Scenario::LongpollFanout { addr, n, rounds } => {
                check_loopback(&addr)?;
                scenarios::longpoll_fanout(addr, n, rounds.min(100)).await
            }
            Scenario::Startup {
                bin,
                configs,
                size,
                dir,
            } => scenarios::startup(&bin, configs, size, &dir).await,
        }
    })
}

/// Measured duration, bounded to 10 minutes.
pub fn measured(load: &Load) -> Duration {
    Duration::from_secs(load.duration.clamp(1, 600))
}
