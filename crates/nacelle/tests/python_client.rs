//! The real Nacos Python client `nacos-sdk-python==1.0.0` (HTTP v1 with long polling) runs
//! publish, get, list, listen and remove against a server on port 0: in the default
//! namespace, in a custom namespace holding the same dataId, and with the namespace spelled
//! `public` (which the server must echo back as sent). The client runs from a virtualenv that
//! `scripts/python-venv.sh` creates once (it installs the package from PyPI).
//!
//! SQLite only, unlike the other single-node suites: this one tests the wire protocol as a
//! real client speaks it, which the backend does not change; storage on MariaDB and
//! PostgreSQL is covered by `http_api`, `long_polling`, `bad_input` and `durability`.

mod python;

use nacelle_testkit::server::TestServer;
use nacelle_testkit::TestResult;
use python::ClientRun;

const GROUP: &str = "PY_GROUP";

/// A run of the 1.x script on one key.
fn client<'a>(python: &'a std::path::Path, namespace: &'a str, data_id: &'a str) -> ClientRun<'a> {
    ClientRun {
        python,
        script: "v1_client_roundtrip.py",
        namespace,
        group: GROUP,
        data_id,
        client_log: None,
        credentials: None,
        extra_args: Vec::new(),
        reviewers: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_1_0_0_round_trip_with_long_polling() -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv("1.0.0")).await??;
    let ts = TestServer::start().await?;

    python::create_namespace(&ts, "py-dev", "python").await?;

    // Three clients at once, each with its own long poll: the same dataId in the default
    // namespace and in `py-dev` must stay apart; `public` is the default namespace spelled
    // out, which the listener must echo back as sent for the client to match its callback.
    python::run_together(
        &ts,
        vec![
            client(&python, "", "py-roundtrip.yaml"),
            client(&python, "py-dev", "py-roundtrip.yaml"),
            client(&python, "public", "py-public.yaml"),
        ],
    )
    .await?;

    // Every client removed its config at the end.
    for (tenant, data_id) in [
        ("", "py-roundtrip.yaml"),
        ("py-dev", "py-roundtrip.yaml"),
        ("", "py-public.yaml"),
    ] {
        assert_eq!(
            ts.get(tenant, GROUP, data_id).await?,
            None,
            "{tenant}/{data_id}"
        );
    }
    let mut ts = ts;
    ts.stop().await?;
    Ok(())
}

/// With authentication on: the client logs in with a user name and password and runs the
/// whole round trip with its token; the server records the user in history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_1_0_0_logs_in_and_round_trips_with_credentials() -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv("1.0.0")).await??;
    let mut ts = TestServer::start_with(nacelle_testkit::server::secure).await?;
    // What the test itself publishes for the script goes with the admin's token.
    ts.api = nacelle_testkit::Api::with_token(ts.addr, &ts.admin_token().await?)?;
    let mut run = client(&python, "", "py-auth.yaml");
    run.credentials = Some(("nacos", nacelle_testkit::server::ADMIN_PASSWORD));
    python::run_together(&ts, vec![run]).await?;
    // Without credentials the server refuses the same calls.
    let r = reqwest::Client::new()
        .get(ts.url("/nacos/v1/cs/configs"))
        .query(&[("dataId", "py-auth.yaml"), ("group", GROUP)])
        .send()
        .await?;
    assert_eq!(r.status(), 403);
    ts.stop().await?;
    Ok(())
}

/// With a wrong password the client's calls fail with the server's 403, clearly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_1_0_0_with_a_wrong_password_fails_clearly() -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv("1.0.0")).await??;
    let mut ts = TestServer::start_with(nacelle_testkit::server::secure).await?;
    ts.admin_token().await?;
    python::assert_wrong_password_refused(&ts, client(&python, "", "py-wrong.yaml"), "v1").await?;
    ts.stop().await?;
    Ok(())
}

/// A review policy on the client's group (Nacelle's change requests): with authentication
/// on, the client logged in as a writer cannot publish, remove or create a key of the group
/// (1.0.0 raises `NacosException("Insufficient privilege.")` for the server's 403; the
/// server's message does not reach it); a change request opened by that user, approved by
/// another and published reaches its watcher and `get_config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_1_0_0_is_refused_by_a_review_policy_and_hears_the_reviewed_change(
) -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv("1.0.0")).await??;
    let mut ts = TestServer::start_with(nacelle_testkit::server::secure).await?;
    ts.api = nacelle_testkit::Api::with_token(ts.addr, &ts.admin_token().await?)?;
    let mut run = client(&python, "", "py-reviewed.yaml");
    run.group = "PY_REVIEWED";
    python::assert_review_policy_refuses_and_reviewed_change_arrives(&ts, run, "v1").await?;
    ts.stop().await?;
    Ok(())
}
