//! Shared by the console suites (`console_auth.rs`, `console_browser.rs`): a real server
//! with authentication switched on through its service (`configure_auth` and the initial
//! administrator `nacos`, as `nacelle serve` does at first start).

use anyhow::Context;
use nacelle_service::auth::{generate_secret, AuthConfig};
use nacelle_testkit::server::TestServer;

/// The password of the administrator `nacos` of [`server_with_auth`].
pub const ADMIN_PASSWORD: &str = "console-admin-pass-1";

/// A server with authentication on and the administrator `nacos`.
pub async fn server_with_auth() -> anyhow::Result<TestServer> {
    let ts = TestServer::start().await?;
    let service = ts.server.as_ref().context("running")?.service();
    service.configure_auth(AuthConfig::on(&generate_secret()?, 18_000)?);
    let created = service.ensure_initial_admin(Some(ADMIN_PASSWORD)).await?;
    anyhow::ensure!(created.is_some(), "a fresh server has no users");
    Ok(ts)
}
