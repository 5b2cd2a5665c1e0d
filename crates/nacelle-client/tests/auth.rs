//! Login and token refresh against a server with authentication on (Nacos's default
//! auth plugin, nacos-compat §8). Not run by `cargo test` until the server side of auth
//! is merged (`test = false` in Cargo.toml); then it must pass — against a server without
//! the login endpoint it fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nacelle::RunningServer;
use nacelle_client::{Client, ClientError, MetricEvent, ServerAddr};
use nacelle_testkit::server::settings_for;
use nacelle_testkit::Api;

/// The administrator's password created at the start of each test.
const ADMIN_PASSWORD: &str = "Admin-Passw0rd-For-Tests";

/// A server with authentication on and a short token TTL (2 s), on a fresh data dir.
async fn auth_server(dir: &std::path::Path) -> Result<RunningServer> {
    let settings = settings_for(dir, |_s| {
        // LEAD: turn authentication on here (e.g. `_s.auth_enabled = true`, a token
        // secret of ≥ 32 bytes, and a token TTL of 2 s so the refresh is exercised).
    });
    let server = nacelle::start(&settings).await?;
    Api::new(server.http_addr)?.wait_ready().await?;
    // Nacos 2.4: the first administrator is created through `users/admin`.
    let resp = reqwest::Client::new()
        .post(format!(
            "http://{}/nacos/v1/auth/users/admin",
            server.http_addr
        ))
        .form(&[("password", ADMIN_PASSWORD)])
        .send()
        .await?;
    if !resp.status().is_success() {
        bail!(
            "creating the administrator: {} {}",
            resp.status(),
            resp.text().await?
        );
    }
    Ok(server)
}

fn addr_of(s: &RunningServer) -> ServerAddr {
    ServerAddr {
        host: "127.0.0.1".into(),
        http_port: s.http_addr.port(),
        grpc_port: s.grpc_addr.port(),
    }
}

#[tokio::test]
async fn login_token_on_every_call_and_refresh_before_expiry() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = auth_server(dir.path()).await?;

    // The login answer is Nacos's.
    let answer = nacelle_client::auth::login(
        &reqwest::Client::new(),
        &addr_of(&server),
        "nacos",
        ADMIN_PASSWORD,
    )
    .await?;
    assert!(!answer.access_token.is_empty());
    assert!(answer.token_ttl > 0);

    let logins = Arc::new(AtomicUsize::new(0));
    let seen = logins.clone();
    let client = Client::builder()
        .server(addr_of(&server))
        .credentials("nacos", ADMIN_PASSWORD)
        .metrics(move |e: &MetricEvent<'_>| {
            if let MetricEvent::Login { .. } = e {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        })
        .build()
        .await?;
    client.publish("secured.txt", "v1").await?;
    assert_eq!(
        client
            .get("secured.txt")
            .await?
            .context("published")?
            .content,
        "v1"
    );
    let mut w = client.watch("secured.txt").await?;
    assert_eq!(logins.load(Ordering::Relaxed), 1);

    // Past 9/10 of the TTL the next call logs in again, and still works.
    tokio::time::sleep(Duration::from_secs(answer.token_ttl.min(5))).await;
    client.publish("secured.txt", "v2").await?;
    assert!(logins.load(Ordering::Relaxed) >= 2, "no refresh login");
    let c = tokio::time::timeout(Duration::from_secs(30), w.next_change())
        .await?
        .context("watch ended")?;
    assert_eq!(c.config.map(|c| c.content), Some("v2".into()));
    let history = client.admin().history("secured.txt", 1, 10).await?;
    assert_eq!(history.page_items.len(), 2);
    Ok(())
}

#[tokio::test]
async fn bad_credentials_and_no_credentials_are_refused() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let server = auth_server(dir.path()).await?;
    let wrong = Client::builder()
        .server(addr_of(&server))
        .credentials("nacos", "wrong")
        .build()
        .await?;
    match wrong.get("x").await {
        Err(ClientError::Auth(m)) => assert!(m.contains("nacos"), "{m}"),
        other => bail!("expected a login failure, got {other:?}"),
    }
    let anonymous = Client::builder().server(addr_of(&server)).build().await?;
    match anonymous.publish("x", "y").await {
        Err(ClientError::Forbidden(_)) => {}
        other => bail!("expected forbidden, got {other:?}"),
    }
    match anonymous.admin().namespaces().await {
        Err(ClientError::Forbidden(_)) => {}
        other => bail!("expected forbidden, got {other:?}"),
    }
    Ok(())
}
