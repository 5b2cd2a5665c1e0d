//! What the client suites share: the address of a running server as the client names it,
//! and a server on fixed ports that a client finds again after a restart.
#![allow(dead_code)]

use std::path::Path;

use anyhow::Result;
use nacelle::{RunningServer, Settings};
use nacelle_client::ServerAddr;
use nacelle_testkit::server::settings_for;
use nacelle_testkit::Api;

/// The client's name for a running server's two ports.
pub fn addr_of(s: &RunningServer) -> ServerAddr {
    ServerAddr {
        host: "127.0.0.1".into(),
        http_port: s.http_addr.port(),
        grpc_port: s.grpc_addr.port(),
    }
}

/// A server on `dir` with fixed ports (so a client finds it again after a restart).
pub async fn start_on(dir: &Path, http: u16, grpc: u16) -> Result<RunningServer> {
    let settings = settings_for(dir, |s: &mut Settings| {
        s.port = http;
        s.grpc_port = Some(grpc);
    });
    let server = nacelle::start(&settings).await?;
    Api::new(server.http_addr)?.wait_ready().await?;
    Ok(server)
}
