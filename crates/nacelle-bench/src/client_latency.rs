//! `client-latency`: end-to-end change latency as an application sees it — from sending
//! a publish to the new typed value being visible — through `nacelle-client`'s bind
//! handle (JSON into a struct), and, on the same keys of the same server, through
//! `nacos-sdk` 0.8's listener callback plus the same serde parse. Keys are published one
//! at a time, round-robin over the bound set, so each sample is one change of one key.
//!
//! Each client is measured in a phase of its own (only one client listens at a time), at
//! each key count; every key gets one unmeasured change first (both clients then have
//! every listen in place — `nacos-sdk` sends its listens in the background).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nacelle_client::{Binding, Client, Format, PublishOptions, ServerAddr};
use nacos_sdk::api::config::{
    ConfigChangeListener, ConfigResponse, ConfigService as SdkService, ConfigServiceBuilder,
};
use nacos_sdk::api::props::ClientProps;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;

use crate::stats::{report, Latencies};

/// The group of the benchmark's keys.
const GROUP: &str = "BENCH_CLIENT_LATENCY";

/// How long one change may take before the run is declared broken.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// The typed value both clients build from each version.
#[derive(Debug, Deserialize)]
struct Sample {
    seq: u64,
    #[allow(dead_code)] // parsed for a realistic payload, never read
    name: String,
    #[allow(dead_code)]
    tags: Vec<String>,
}

fn content(i: usize, seq: u64) -> String {
    json!({"seq": seq, "name": format!("service-{i}"), "tags": ["a", "b", "c"]}).to_string()
}

fn data_id(i: usize) -> String {
    format!("latency-{i}.json")
}

/// Runs the scenario at each key count.
pub async fn run(
    http: SocketAddr,
    grpc: SocketAddr,
    key_counts: &[usize],
    samples: usize,
) -> Result<()> {
    let server = ServerAddr {
        host: http.ip().to_string(),
        http_port: http.port(),
        grpc_port: grpc.port(),
    };
    let publisher = Client::builder()
        .server(server.clone())
        .app_name("bench-publisher")
        .build()
        .await?;
    publisher
        .wait_connected()
        .await
        .context("publisher: no server")?;
    let mut seq = 1u64;
    let max = key_counts.iter().copied().max().unwrap_or(1);
    for i in 0..max {
        publish(&publisher, i, seq).await?;
    }
    for &n in key_counts {
        let l = nacelle_phase(&publisher, &server, n, samples, &mut seq).await?;
        print("nacelle-client bind (JSON → struct)", n, &l);
        let l = sdk_phase(&publisher, http, grpc, n, samples, &mut seq).await?;
        print("nacos-sdk 0.8 listener + serde parse", n, &l);
    }
    Ok(())
}

fn print(client: &str, keys: usize, l: &Latencies) {
    let mut fields = l.summary();
    fields["client"] = json!(client);
    fields["bound_keys"] = json!(keys);
    fields["p90_ms"] = json!(l.quantile_ms(0.90));
    report("client-latency", fields);
}

async fn publish(publisher: &Client, i: usize, seq: u64) -> Result<()> {
    publisher
        .publish_with(
            (GROUP, data_id(i).as_str()),
            &content(i, seq),
            &PublishOptions::typed("json"),
        )
        .await
        .with_context(|| format!("publishing {}", data_id(i)))
}

/// Binds `n` keys and times `samples` changes (after one unmeasured change per key).
async fn nacelle_phase(
    publisher: &Client,
    server: &ServerAddr,
    n: usize,
    samples: usize,
    seq: &mut u64,
) -> Result<Latencies> {
    let client = Client::builder()
        .server(server.clone())
        .app_name("bench-nacelle-client")
        .build()
        .await?;
    let mut bound: Vec<Binding<Sample>> = Vec::with_capacity(n);
    for i in 0..n {
        bound.push(
            client
                .bind::<Sample>((GROUP, data_id(i).as_str()), Format::Json)
                .await?,
        );
    }
    let mut lat = Latencies::new();
    for s in 0..(n + samples) {
        let i = s % n;
        *seq += 1;
        let want = *seq;
        let b = &bound[i];
        let mut changed = b.subscribe();
        let started = Instant::now();
        publish(publisher, i, want).await?;
        tokio::time::timeout(CHANGE_TIMEOUT, async {
            while b.get().seq < want {
                changed.changed().await?;
            }
            Ok::<(), tokio::sync::watch::error::RecvError>(())
        })
        .await
        .map_err(|_| anyhow!("nacelle-client: {} not updated to {want}", data_id(i)))??;
        if s >= n {
            lat.record(started.elapsed());
        }
    }
    Ok(lat)
}

/// What the `nacos-sdk` listener saw: the key's index and the parsed value's `seq`.
struct SdkListener {
    index: usize,
    tx: mpsc::UnboundedSender<(usize, u64)>,
}

impl ConfigChangeListener for SdkListener {
    fn notify(&self, resp: ConfigResponse) {
        // The same work as the bind handle: parse the content into the struct.
        match serde_json::from_str::<Sample>(resp.content()) {
            Ok(v) => {
                // Err: the phase ended and dropped its receiver.
                let _phase_over = self.tx.send((self.index, v.seq));
            }
            Err(e) => eprintln!("nacos-sdk: {} does not parse: {e}", resp.data_id()),
        }
    }
}

/// Adds `n` listeners on a `nacos-sdk` client and times `samples` changes.
async fn sdk_phase(
    publisher: &Client,
    http: SocketAddr,
    grpc: SocketAddr,
    n: usize,
    samples: usize,
    seq: &mut u64,
) -> Result<Latencies> {
    let cache = std::env::temp_dir().join(format!("nacelle-bench-sdk-{}-{n}", std::process::id()));
    let props = ClientProps::new()
        .server_addr(http.to_string())
        .remote_grpc_port(grpc.port())
        .namespace("")
        .app_name("bench-nacos-sdk")
        .cache_dir(cache.clone())
        .env_first(false);
    let sdk: SdkService = ConfigServiceBuilder::new(props)
        .build()
        .await
        .map_err(|e| anyhow!("nacos-sdk: {e}"))?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut listeners = Vec::with_capacity(n);
    for i in 0..n {
        let l = Arc::new(SdkListener {
            index: i,
            tx: tx.clone(),
        });
        sdk.add_listener(data_id(i), GROUP.to_string(), l.clone())
            .await
            .map_err(|e| anyhow!("nacos-sdk add_listener: {e}"))?;
        listeners.push(l);
    }
    let mut lat = Latencies::new();
    for s in 0..(n + samples) {
        let i = s % n;
        *seq += 1;
        let want = *seq;
        let started = Instant::now();
        publish(publisher, i, want).await?;
        tokio::time::timeout(CHANGE_TIMEOUT, async {
            loop {
                match rx.recv().await {
                    Some((j, got)) if j == i && got >= want => return Ok(()),
                    Some(_) => {}
                    None => bail!("listener channel closed"),
                }
            }
        })
        .await
        .map_err(|_| anyhow!("nacos-sdk: no notification of {} = {want}", data_id(i)))??;
        if s >= n {
            lat.record(started.elapsed());
        }
    }
    for (i, l) in listeners.into_iter().enumerate() {
        let l: Arc<dyn ConfigChangeListener> = l;
        sdk.remove_listener(data_id(i), GROUP.to_string(), l)
            .await
            .map_err(|e| anyhow!("nacos-sdk remove_listener: {e}"))?;
    }
    drop(sdk);
    if let Err(e) = std::fs::remove_dir_all(&cache) {
        if e.kind() != std::io::ErrorKind::NotFound {
            eprintln!("cannot remove {}: {e}", cache.display());
        }
    }
    Ok(lat)
}
