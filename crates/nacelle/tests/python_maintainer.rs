//! The Nacos 3 operator SDK for Python, `nacos-maintainer-sdk-python==0.5.3` (PyPI), against a
//! real server with authentication on (`tests/python/maintainer_sdk.py`).
//!
//! The SDK's only service is `NacosAIMaintainerService` (MCP servers, A2A agents): it has no
//! config, history, listener or namespace call. The script drives the v3 admin API through the
//! SDK's own transport (`ClientHttpProxy`, built by the SDK's factory: its login over
//! `/nacos/v1/auth/users/login`, its `accessToken` header, its form and query encoding, its
//! retries and its `NacosException` for a non-200), with the paths, methods and parameters of
//! the Java `nacos-maintainer-client` (tested in `compat/java/nacos-maintainer-client`), and
//! holds real listeners open with the `nacos-sdk-python` 3.x gRPC client the SDK depends on.
//! So the server runs on a chosen HTTP port P with the default gRPC port P + 1000.
//!
//! Covered: namespaces (create, get, list, check, update, delete, refusals), config (publish,
//! get, metadata, list accurate / blur / configDetail / type / paging, beta publish / query /
//! stop, clone, delete, batch delete), history (list, detail, previous, configs of a
//! namespace), listeners (by config and by IP), the SDK's own MCP call (a 404: Nacelle has no
//! AI registry); a wrong password and a user without permissions get 403 for every call and
//! write nothing. The virtualenv comes from `scripts/python-venv.sh "" 0.5.3
//! nacos-maintainer-sdk-python`. SQLite only: the backend does not change the wire protocol.

// The shared client-test module: this test uses its venv, run and server parts only.
#[allow(dead_code)]
mod python;

use nacelle_testkit::server::{secure, TestServer, ADMIN_PASSWORD};
use nacelle_testkit::TestResult;
use python::ClientRun;

const PACKAGE: &str = "nacos-maintainer-sdk-python";
const VERSION: &str = "0.5.3";
const GROUP: &str = "PY_OPS_GROUP";
const DATA_ID: &str = "py-ops.yaml";

/// A run of the script in `mode` with `credentials`.
fn run<'a>(
    python: &'a std::path::Path,
    mode: &'a str,
    credentials: (&'a str, &'a str),
) -> ClientRun<'a> {
    ClientRun {
        python,
        script: "maintainer_sdk.py",
        namespace: "",
        group: GROUP,
        data_id: DATA_ID,
        client_log: Some("logs/ai.log"),
        credentials: Some(credentials),
        extra_args: vec!["--mode", mode],
        reviewers: None,
    }
}

/// A server with authentication on whose gRPC port is its HTTP port + 1000, and whose test
/// side calls carry the admin's token.
async fn start() -> TestResult<(std::path::PathBuf, TestServer)> {
    let python = tokio::task::spawn_blocking(|| python::venv_of(PACKAGE, VERSION)).await??;
    let mut ts = python::start_server_grpc_plus_1000(secure).await?;
    ts.api = nacelle_testkit::Api::with_token(ts.addr, &ts.admin_token().await?)?;
    Ok((python, ts))
}

/// What a refused run must not have written: its config, and its namespace.
async fn assert_nothing_written(ts: &TestServer) -> TestResult {
    assert_eq!(ts.get("", GROUP, DATA_ID).await?, None);
    let namespaces = ts
        .http
        .get(ts.url("/nacos/v3/admin/core/namespace/check"))
        .query(&[("namespaceId", "py-intruders")])
        .send()
        .await?
        .json::<serde_json::Value>()
        .await?;
    assert_eq!(namespaces["data"], 0, "{namespaces}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintainer_sdk_0_5_3_drives_namespaces_config_history_and_listeners() -> TestResult {
    let (python, mut ts) = start().await?;
    python::run_together(&ts, vec![run(&python, "admin", ("nacos", ADMIN_PASSWORD))]).await?;
    // The script removed what it wrote.
    assert_eq!(ts.get("py-ops", GROUP, DATA_ID).await?, None);
    assert_eq!(ts.get("", GROUP, "watched.properties").await?, None);
    ts.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintainer_sdk_0_5_3_with_a_wrong_password_is_refused() -> TestResult {
    let (python, mut ts) = start().await?;
    python::run_together(
        &ts,
        vec![run(
            &python,
            "wrong-password",
            ("nacos", "not-the-password"),
        )],
    )
    .await?;
    assert_nothing_written(&ts).await?;
    ts.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintainer_sdk_0_5_3_as_a_user_without_permissions_is_refused() -> TestResult {
    let (python, mut ts) = start().await?;
    let created = ts
        .http
        .post(ts.url("/nacos/v1/auth/users"))
        .form(&[("username", "visitor"), ("password", "visitor-pass")])
        .send()
        .await?;
    assert_eq!(created.status(), 200, "{}", created.text().await?);
    ts.publish("", GROUP, "guarded.txt", "kept").await?;
    python::run_together(
        &ts,
        vec![run(&python, "no-permission", ("visitor", "visitor-pass"))],
    )
    .await?;
    assert_nothing_written(&ts).await?;
    assert_eq!(
        ts.get("", GROUP, "guarded.txt").await?.as_deref(),
        Some("kept")
    );
    ts.stop().await?;
    Ok(())
}
