//! The real Nacos Python client `nacos-sdk-python==2.0.9` — its `v2.nacos` API, which speaks
//! gRPC through grpcio (gRPC's C core: an HTTP/2 and gRPC stack independent of the h2 and
//! tonic ones the server and the Rust SDK use) — runs get, publish, compare-and-set, a 1 MiB
//! config, listen (a callback after a server push), the client's keepalive (HTTP/2 PINGs and
//! an idle `HealthCheckRequest`) and remove against a real server: in the default namespace,
//! in a custom namespace holding the same dataId, and with the namespace spelled `public`,
//! three clients at once. The test checks over HTTP that the client's writes landed, that
//! the server counted the pushes the clients acknowledged, and that their connections are
//! gone once they shut down.
//!
//! The client has no gRPC port setting: it always connects to the port of its server address
//! plus 1000. So the server runs on a chosen HTTP port P with the default gRPC port P + 1000.
//! The client runs from a virtualenv that `scripts/python-venv.sh` creates once (it installs
//! the package from PyPI). SQLite only, like the 1.x client test: the backend does not change
//! the wire protocol.

mod python;

use std::time::Duration;

use nacelle_testkit::server::TestServer;
use nacelle_testkit::TestResult;
use python::ClientRun;

const CLIENT_VERSION: &str = "2.0.9";
const GROUP: &str = "PY2_GROUP";

/// A run of the 2.x script on one key.
fn client<'a>(python: &'a std::path::Path, namespace: &'a str, data_id: &'a str) -> ClientRun<'a> {
    ClientRun {
        python,
        script: "v2_grpc_roundtrip.py",
        namespace,
        group: GROUP,
        data_id,
        client_log: Some("logs/config.log"),
        credentials: None,
        extra_args: Vec::new(),
        reviewers: None,
    }
}

/// Starts a server whose gRPC port is its HTTP port + 1000, the only one the client uses.
async fn start_server() -> TestResult<TestServer> {
    start_server_with(|_| {}).await
}

/// [`start_server`] with settings adjusted by `tweak`.
async fn start_server_with(tweak: impl Fn(&mut nacelle::Settings)) -> TestResult<TestServer> {
    python::start_server_grpc_plus_1000(tweak).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_2_0_9_round_trip_over_grpc() -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv(CLIENT_VERSION)).await??;
    let mut ts = start_server().await?;
    let stats = ts.server.as_ref().ok_or("no server")?.grpc_stats.clone();
    println!(
        "server: http {} grpc {}",
        ts.addr,
        ts.server.as_ref().ok_or("no server")?.grpc_addr
    );

    python::create_namespace(&ts, "py2-dev", "python2").await?;

    // Three clients at once, each on its own gRPC connection: the same dataId in the default
    // namespace and in `py2-dev` must stay apart; `public` is the default namespace spelled
    // out, which pushes must echo as sent.
    python::run_together(
        &ts,
        vec![
            client(&python, "", "py2-roundtrip.yaml"),
            client(&python, "py2-dev", "py2-roundtrip.yaml"),
            client(&python, "public", "py2-public.yaml"),
        ],
    )
    .await?;

    // Every client removed its configs at the end.
    for (tenant, data_id) in [
        ("", "py2-roundtrip.yaml"),
        ("", "py2-roundtrip.yaml.large"),
        ("py2-dev", "py2-roundtrip.yaml"),
        ("py2-dev", "py2-roundtrip.yaml.large"),
        ("", "py2-public.yaml"),
        ("", "py2-public.yaml.large"),
    ] {
        assert_eq!(
            ts.get(tenant, GROUP, data_id).await?,
            None,
            "{tenant}/{data_id}"
        );
    }

    // Each client acknowledged the pushes it got (at least the test's publish and the
    // remove), on the bi-stream, with its own response type.
    let s = stats.snapshot();
    println!("grpc stats after the clients: {s:?}");
    assert!(s.pushes_sent >= 6, "pushes sent: {s:?}");
    assert!(s.push_acks >= 6, "push acks: {s:?}");
    // The clients shut down: their connections and listens are gone once the server saw
    // their streams end.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = stats.snapshot();
        if s.connections == 0 && s.listened_keys == 0 {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("connections still registered 20 s after the clients left: {s:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    ts.stop().await?;
    Ok(())
}

/// With authentication on: the 2.x client logs in (`/nacos/v1/auth/users/login`) and
/// sends its token on every gRPC request; publish, get, listen and remove work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_2_0_9_logs_in_and_round_trips_over_grpc() -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv(CLIENT_VERSION)).await??;
    let mut ts = start_server_with(nacelle_testkit::server::secure).await?;
    ts.api = nacelle_testkit::Api::with_token(ts.addr, &ts.admin_token().await?)?;
    let mut run = client(&python, "", "py2-auth.yaml");
    run.credentials = Some(("nacos", nacelle_testkit::server::ADMIN_PASSWORD));
    python::run_together(&ts, vec![run]).await?;
    ts.stop().await?;
    Ok(())
}

/// With a wrong password the 2.x client's calls fail with the server's 403, clearly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_2_0_9_with_a_wrong_password_fails_clearly() -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv(CLIENT_VERSION)).await??;
    let mut ts = start_server_with(nacelle_testkit::server::secure).await?;
    ts.admin_token().await?;
    python::assert_wrong_password_refused(&ts, client(&python, "", "py2-wrong.yaml"), "v2").await?;
    ts.stop().await?;
    Ok(())
}

/// A review policy on the client's group (Nacelle's change requests): with authentication
/// on, the 2.x client logged in as a writer cannot publish, remove or create a key of the
/// group (it raises `NacosException` with the server's errorCode 403 and message, which
/// names the policy); a change request opened by that user, approved by another and
/// published reaches its listener (a server push) and `get_config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_2_0_9_is_refused_by_a_review_policy_and_hears_the_reviewed_change(
) -> TestResult {
    let python = tokio::task::spawn_blocking(|| python::venv(CLIENT_VERSION)).await??;
    let mut ts = start_server_with(nacelle_testkit::server::secure).await?;
    ts.api = nacelle_testkit::Api::with_token(ts.addr, &ts.admin_token().await?)?;
    let mut run = client(&python, "", "py2-reviewed.yaml");
    run.group = "PY2_REVIEWED";
    python::assert_review_policy_refuses_and_reviewed_change_arrives(&ts, run, "v2").await?;
    ts.stop().await?;
    Ok(())
}
