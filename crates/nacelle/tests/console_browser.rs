//! The web console in a real browser: Debian's headless Chromium driven by
//! `playwright-core` (`crates/nacelle-console/e2e/console.mjs`) against a real server
//! started here on port 0, with the real Rust client (`nacos-sdk`, gRPC) listening to
//! the config the browser creates, so the gray page and the listeners page show a real
//! connection. The run with authentication on writes a screenshot of each page to
//! `docs/console/`.
//!
//! Needs `/usr/bin/chromium` and `npm ci` in `crates/nacelle-console/e2e` (`.ci/run`
//! installs both); without them the test fails and says how to get them — it never
//! passes without running the browser.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use nacelle_testkit::grpc::recorder;
use nacelle_testkit::server::{secure, TestServer, ADMIN_PASSWORD};
use nacos_sdk::api::config::{ConfigService, ConfigServiceBuilder};
use nacos_sdk::api::props::ClientProps;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from("../.."))
}

/// The e2e package dir.
fn e2e_dir() -> PathBuf {
    repo_root().join("crates/nacelle-console/e2e")
}

/// Fails, saying how to get them, unless chromium and playwright-core are installed.
fn browser_ready() -> anyhow::Result<()> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !std::path::Path::new(&chromium).exists() {
        bail!("{chromium} is missing: apt-get install -y chromium chromium-driver (.ci/run does)");
    }
    if !e2e_dir().join("node_modules/playwright-core").exists() {
        bail!(
            "playwright-core is not installed: (cd {} && npm ci) (.ci/run does)",
            e2e_dir().display()
        );
    }
    Ok(())
}

/// Runs `node <args…>` in the e2e dir, printing its output; fails unless it exits 0.
async fn node(args: &[&str]) -> anyhow::Result<String> {
    let child = tokio::process::Command::new("node")
        .args(args)
        .current_dir(e2e_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting node (is Node.js installed?)")?;
    // A bound, not a timing assertion: a browser that hangs must not hang the suite.
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .context("node did not finish within 5 minutes")??;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("node {args:?} failed ({}):\n{stdout}", out.status);
    }
    Ok(stdout)
}

/// The walk's namespace `strict` refuses invalid content (`content_validation = reject`);
/// the others keep the default, `warn`, where the console asks before publishing it.
fn strict_namespace(s: &mut nacelle::Settings) {
    s.content_validation =
        nacelle_core::ValidationPolicy::parse(nacelle_core::ValidationMode::Warn, "strict=reject")
            .expect("a valid policy");
}

/// A real client listening (over gRPC, from 127.0.0.1, app `e2e-listener`) to the config
/// the browser is about to create in the namespace it is about to create; with
/// `credentials`, signed in as that user (nacos-sdk's HTTP login).
async fn listener(
    ts: &TestServer,
    credentials: Option<(&str, &str)>,
) -> anyhow::Result<(ConfigService, tempfile::TempDir)> {
    let server = ts.server.as_ref().context("server running")?;
    let cache = tempfile::tempdir()?;
    let mut props = ClientProps::new()
        .server_addr(format!("127.0.0.1:{}", server.http_addr.port()))
        .remote_grpc_port(server.grpc_addr.port())
        .namespace("e2e")
        .app_name("e2e-listener")
        .cache_dir(cache.path())
        .env_first(false);
    let builder = match credentials {
        Some((user, password)) => {
            props = props.auth_username(user).auth_password(password);
            ConfigServiceBuilder::new(props).enable_auth_plugin_http()
        }
        None => ConfigServiceBuilder::new(props),
    };
    let client = builder
        .build()
        .await
        .map_err(|e| anyhow::anyhow!("nacos-sdk: {e}"))?;
    let (rec, _notes) = recorder();
    client
        .add_listener("shop.yaml".into(), "DEFAULT_GROUP".into(), rec)
        .await
        .map_err(|e| anyhow::anyhow!("nacos-sdk add_listener: {e}"))?;
    Ok((client, cache))
}

/// The walk through the console (`e2e/console.mjs`) on a server with
/// authentication on, as `nacelle serve` starts: sign in as the administrator; create a
/// namespace and a YAML config; a syntax error shown and nothing published; the fix
/// diffed and published; compare-and-set against a concurrent publish; history, a diff of
/// two versions, rollback; export and delete a selection; a beta for the address the
/// listening client reports reaching it; promotion; the other pages; dark theme and laptop width. The
/// screenshots in `docs/console/` come from this run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium() -> anyhow::Result<()> {
    let ts = TestServer::start_with(|s| {
        secure(s);
        strict_namespace(s);
    })
    .await?;
    ts.admin_token().await?;
    let _listening = listener(&ts, Some(("nacos", ADMIN_PASSWORD))).await?;
    let server = ts.server.as_ref().context("server running")?;
    let base = format!("http://{}", server.http_addr);
    let shots = repo_root().join("docs/console");
    let shots = shots.to_string_lossy();
    browser_ready()?;
    let out = node(&["console.mjs", &base, &shots, "nacos", ADMIN_PASSWORD]).await?;
    assert!(out.contains("all steps passed"), "{out}");
    Ok(())
}

/// The same walk on a server with authentication off (`--auth off`): no sign-in, the
/// users page says authentication is off. Screenshots go to a temporary directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium_without_auth() -> anyhow::Result<()> {
    let ts = TestServer::start_with(strict_namespace).await?;
    let _listening = listener(&ts, None).await?;
    let server = ts.server.as_ref().context("server running")?;
    let base = format!("http://{}", server.http_addr);
    let shots = tempfile::tempdir()?;
    let shots = shots.path().to_string_lossy().into_owned();
    browser_ready()?;
    let out = node(&["console.mjs", &base, &shots]).await?;
    assert!(out.contains("all steps passed"), "{out}");
    Ok(())
}

/// Sign-in and a user with only `r` on a namespace (`e2e/console-auth.mjs`): the wrong
/// password refused; the token kept out of URLs; no users page for that user, editing the
/// namespace and publishing into it refused with the server's reason shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_auth_in_chromium() -> anyhow::Result<()> {
    run_signed_in_script("console-auth.mjs").await
}

/// Runs `e2e/<script>` against a server with authentication on, given the
/// administrator's name and password; it must print "all steps passed".
async fn run_signed_in_script(script: &str) -> anyhow::Result<()> {
    let ts = TestServer::start_with(secure).await?;
    ts.admin_token().await?;
    let server = ts.server.as_ref().context("server running")?;
    let base = format!("http://{}", server.http_addr);
    let shots = repo_root().join("docs/console");
    let shots = shots.to_string_lossy();
    browser_ready()?;
    let out = node(&[script, &base, &shots, "nacos", ADMIN_PASSWORD]).await?;
    assert!(out.contains("all steps passed"), "{out}");
    Ok(())
}

/// Change requests, review policies and the audit trail in the browser
/// (`e2e/console-review.mjs`): the administrator sets a review policy on a namespace; the
/// editor then proposes a change request instead of publishing (the administrator's
/// emergency publish needs a reason); a writer proposes one, its diff is shown side by
/// side, her own approval is refused with the server's reason (English and Chinese); a
/// user holding the approve permission approves and publishes it, and the config holds
/// the new content; the audit page lists the events, filters them and verifies the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_review_in_chromium() -> anyhow::Result<()> {
    run_signed_in_script("console-review.mjs").await
}
