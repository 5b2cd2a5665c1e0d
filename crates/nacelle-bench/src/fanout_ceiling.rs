//! The fan-out ceiling: the least any push server can do on this machine to deliver one
//! message to N connections and read back N acks.
//!
//! A separate process (`fanout-ceiling-serve`) holds N raw TCP connections, one task each.
//! On a trigger it wakes every task through one `watch` channel; each writes a fixed
//! message of `size` bytes and reads a fixed ack back. The client holds the other ends, one
//! task each: read the message, note the arrival, write the ack — what a gRPC client does
//! for a push, without HTTP/2, protobuf or JSON. Latency is measured from the instant the
//! trigger byte is sent to each arrival, as `grpc-fanout` measures from the publish. It is
//! the floor for `grpc-fanout` and `longpoll-fanout`: the wake-ups and the four system
//! calls per connection (write, read, write ack, read ack) on cores shared by both sides.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::ceiling::spawn_server;
use crate::grpc_client::raise_nofile;
use crate::stats::{report, Latencies};

/// Size of the ack a client writes back (about a `ConfigChangeNotifyResponse` frame).
const ACK_BYTES: usize = 64;

/// Serves the ceiling on 127.0.0.1:0 and prints the port on stdout. The first connection
/// is the control connection: each byte it sends starts a round.
pub async fn serve(n: usize, size: usize) -> Result<()> {
    raise_nofile();
    // The accept queue of a server (`nacelle::LISTEN_BACKLOG`): with the 128 of a plain
    // bind, the client's connects overflowed it and waited for SYN retries (4 s for 1 000).
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(([127, 0, 0, 1], 0).into())?;
    let listener = socket.listen(4096)?;
    println!("{}", listener.local_addr()?.port());
    let (mut control, _) = listener.accept().await?;
    let (round_tx, round_rx) = watch::channel(0u64);
    let msg: Arc<[u8]> = vec![b'p'; size].into();
    for _ in 0..n {
        let (mut stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let mut rounds = round_rx.clone();
        let msg = msg.clone();
        tokio::spawn(async move {
            let mut ack = [0u8; ACK_BYTES];
            while rounds.changed().await.is_ok() {
                if stream.write_all(&msg).await.is_err()
                    || stream.read_exact(&mut ack).await.is_err()
                {
                    return;
                }
            }
        });
    }
    let mut byte = [0u8; 1];
    let mut round = 0u64;
    while control.read(&mut byte).await? == 1 {
        round += 1;
        round_tx.send_replace(round);
    }
    Ok(())
}

/// Spawns the ceiling server, opens `n` connections, runs `rounds` rounds.
pub async fn run(n: usize, rounds: usize, size: usize) -> Result<()> {
    let nofile = raise_nofile();
    let n = n.clamp(1, 200_000);
    let rounds = rounds.clamp(1, 100);
    let size = size.clamp(1, 65_536);
    let (mut child, port) = spawn_server(&[
        "fanout-ceiling-serve",
        "--n",
        &n.to_string(),
        "--size",
        &size.to_string(),
    ])
    .await?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));

    let mut control = TcpStream::connect(addr).await?;
    control.set_nodelay(true)?;
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let t0 = Instant::now();
    for i in 0..n {
        let mut stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connection {i} of {n} (open-file limit {nofile})"))?;
        stream.set_nodelay(true)?;
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut msg = vec![0u8; size];
            let ack = [b'a'; ACK_BYTES];
            loop {
                if stream.read_exact(&mut msg).await.is_err() {
                    return;
                }
                if tx.send((i, Instant::now())).is_err() || stream.write_all(&ack).await.is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    let connect_s = t0.elapsed().as_secs_f64();

    let mut all = Latencies::new();
    let mut per_round = Vec::new();
    for round in 1..=rounds {
        // Let every connection be accepted and parked (and the previous round settle).
        tokio::time::sleep(Duration::from_millis(500 + n as u64 / 20)).await;
        while rx.try_recv().is_ok() {}
        let mut seen = vec![false; n];
        let sent = Instant::now();
        control.write_all(&[1]).await?;
        let mut lat = Latencies::new();
        let mut got = 0usize;
        let limit = tokio::time::Instant::from_std(sent + Duration::from_secs(10));
        while got < n {
            match tokio::time::timeout_at(limit, rx.recv()).await {
                Ok(Some((i, at))) if i < n && !seen[i] => {
                    seen[i] = true;
                    got += 1;
                    lat.record(at.saturating_duration_since(sent));
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        if got < n {
            bail!("round {round}: {got} of {n} messages arrived within 10 s");
        }
        all.merge(&lat);
        per_round.push(json!({"round": round, "latency": lat.summary()}));
    }
    child.kill().await?;
    report(
        "fanout-ceiling",
        json!({
            "connections": n,
            "rounds": rounds,
            "message_bytes": size,
            "ack_bytes": ACK_BYTES,
            "connect_s": connect_s,
            "latency_from_trigger_sent": all.summary(),
            "per_round": per_round,
        }),
    );
    Ok(())
}
