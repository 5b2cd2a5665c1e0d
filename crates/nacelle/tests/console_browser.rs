//! The web console in a real browser: Debian's headless Chromium driven by
//! `playwright-core` (`crates/nacelle-console/e2e/console.mjs`) against a real server
//! started here on port 0, with the real Rust client (`nacos-sdk`, gRPC) listening to
//! the config the browser creates, so the gray page and the listeners page show a real
//! connection. The script writes a screenshot of each page to `docs/console/`.
//!
//! Needs `/usr/bin/chromium` and `npm ci` in `crates/nacelle-console/e2e` (`.ci/run`
//! installs both); without them the test fails and says how to get them — it never
//! passes without running the browser.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

mod console_support;

use anyhow::{bail, Context};
use console_support::{server_with_auth, ADMIN_PASSWORD};
use nacelle_testkit::grpc::{recorder, Sdk};
use nacelle_testkit::server::TestServer;

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

/// The editor's highlighter never changes the text it colours (node's test runner over
/// `e2e/highlight.test.mjs`; no browser needed).
#[tokio::test]
async fn highlighter_keeps_the_text() -> anyhow::Result<()> {
    let out = node(&["--test", "highlight.test.mjs"]).await?;
    assert!(out.contains("# fail 0"), "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium() -> anyhow::Result<()> {
    let ts = TestServer::start().await?;
    let server = ts.server.as_ref().context("server running")?;
    // A real client listening (over gRPC, from 127.0.0.1) to the config the browser is
    // about to create in the namespace it is about to create.
    let sdk = Sdk::connect(
        server.http_addr.port(),
        server.grpc_addr.port(),
        "e2e",
        "e2e-listener",
    )
    .await?;
    let (rec, _notes) = recorder();
    sdk.client
        .add_listener("shop.yaml".into(), "DEFAULT_GROUP".into(), rec)
        .await
        .map_err(|e| anyhow::anyhow!("nacos-sdk add_listener: {e}"))?;
    let base = format!("http://{}", server.http_addr);
    let shots = repo_root().join("docs/console");
    let shots = shots.to_string_lossy();
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
    let ts = server_with_auth().await?;
    let server = ts.server.as_ref().context("server running")?;
    let base = format!("http://{}", server.http_addr);
    let shots = repo_root().join("docs/console");
    let shots = shots.to_string_lossy();
    browser_ready()?;
    let out = node(&["console-auth.mjs", &base, &shots, "nacos", ADMIN_PASSWORD]).await?;
    assert!(out.contains("all steps passed"), "{out}");
    Ok(())
}
