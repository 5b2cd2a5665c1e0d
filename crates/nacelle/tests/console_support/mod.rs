//! Shared by the console suites (`console_auth.rs`, `console_browser.rs`): a real server
//! started with authentication on, as `nacelle serve` starts by default (a generated token
//! secret in the data directory, the first administrator `nacos`), its password given.

use std::time::{Duration, Instant};

use nacelle::settings::AuthSettings;
use nacelle_testkit::server::TestServer;

/// The password of the administrator `nacos` of [`server_with_auth`].
pub const ADMIN_PASSWORD: &str = "console-admin-pass-1";

/// A server with authentication on whose administrator `nacos` can sign in.
pub async fn server_with_auth() -> anyhow::Result<TestServer> {
    let ts = TestServer::start_with(|s| {
        s.auth = AuthSettings {
            admin_password: Some(ADMIN_PASSWORD.into()),
            ..AuthSettings::default()
        };
    })
    .await?;
    // The first administrator is created right after the cache is loaded.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = ts
            .http
            .post(ts.url("/nacos/v1/auth/login"))
            .form(&[("username", "nacos"), ("password", ADMIN_PASSWORD)])
            .send()
            .await?;
        if r.status() == 200 {
            return Ok(ts);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no administrator: {}",
            r.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
