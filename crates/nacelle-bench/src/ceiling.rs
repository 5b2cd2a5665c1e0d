//! The ceiling: a minimal hyper server answering a fixed body, run as a separate process
//! like the server under test, loaded exactly like `http-get`.

use std::convert::Infallible;
use std::process::Stdio;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Response;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::Child;

use crate::scenarios::get_load;
use crate::stats::report;
use crate::Load;

/// Serves a fixed body on 127.0.0.1:0 and prints the port on stdout.
pub async fn serve(size: usize) -> Result<()> {
    let body = Bytes::from(vec![b'x'; size]);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let body = body.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |_req| {
                let body = body.clone();
                async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
            });
            // A client that leaves ends its connection; the ceiling server has nothing to
            // report about it.
            let _ended = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// Runs this binary with `args` as a server process of its own, which prints its port on
/// the first line of stdout; the child is killed when dropped.
pub async fn spawn_server(args: &[&str]) -> Result<(Child, u16)> {
    let exe = std::env::current_exe()?;
    let mut child = tokio::process::Command::new(exe)
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await?;
    let port: u16 = line
        .trim()
        .parse()
        .with_context(|| format!("port of the {} process", args.join(" ")))?;
    Ok((child, port))
}

/// Spawns the ceiling server process and loads it like `http-get`.
pub async fn run(load: &Load, size: usize) -> Result<()> {
    let (mut child, port) = spawn_server(&["ceiling-serve", "--size", &size.to_string()]).await?;
    let target = Load {
        addr: ([127, 0, 0, 1], port).into(),
        ..load.clone()
    };
    let result = get_load(&target, vec!["/".to_string()]).await?;
    child.kill().await?;
    report("ceiling", result);
    Ok(())
}
