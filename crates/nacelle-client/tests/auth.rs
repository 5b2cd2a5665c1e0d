//! Login and token refresh against a real server with authentication on (Nacos's default
//! auth plugin, nacos-compat §8): the login answer, the token on every gRPC and HTTP call,
//! a fresh login before the token expires (a 2 s TTL), and bad or missing credentials
//! refused.

mod common;

use common::addr_of;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nacelle::settings::AuthSettings;
use nacelle::RunningServer;
use nacelle_client::{Client, ClientError, MetricEvent};
use nacelle_testkit::server::settings_for;
use nacelle_testkit::Api;

/// The administrator `nacos`'s password, given to the server.
const ADMIN_PASSWORD: &str = "Admin-Passw0rd-For-Tests";

/// A token secret of 32 bytes, base64.
const TOKEN_SECRET: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// A server with authentication on and a 2 s token TTL, on a fresh data dir; returns once
/// the administrator can log in.
async fn auth_server(dir: &std::path::Path) -> Result<RunningServer> {
    let settings = settings_for(dir, |s| {
        s.auth = AuthSettings {
            token_secret: Some(TOKEN_SECRET.into()),
            admin_password: Some(ADMIN_PASSWORD.into()),
            token_ttl_s: 2,
            ..AuthSettings::default()
        };
    });
    let server = nacelle::start(&settings).await?;
    Api::new(server.http_addr)?.wait_ready().await?;
    // The administrator is created right after the load.
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + nacelle_testkit::SOON;
    loop {
        match nacelle_client::auth::login(&http, &addr_of(&server), "nacos", ADMIN_PASSWORD).await {
            Ok(_) => return Ok(server),
            Err(e) if std::time::Instant::now() > deadline => bail!("no administrator: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
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

    // Past 9/10 of the TTL the next call logs in again, and still works (the old token
    // has expired on the server by then).
    assert_eq!(answer.token_ttl, 2);
    tokio::time::sleep(Duration::from_millis(2500)).await;
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
