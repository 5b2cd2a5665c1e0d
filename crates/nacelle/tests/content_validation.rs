//! The content validation settings reach the service of the real binary: its flags and its
//! TOML file set the global mode and the per-namespace overrides (the modes themselves, on
//! every protocol, are tested in `crates/nacelle-grpc/tests/content_validation.rs`).

use nacelle_testkit::server::BinaryServer;

const NACELLE: &str = env!("CARGO_BIN_EXE_nacelle");
const CONFIGS: &str = "/nacos/v1/cs/configs";
const BROKEN_YAML: &str = "a: 1\nb: c: d\n";

/// Publishes `BROKEN_YAML` as yaml into `tenant` over v1: (status, body).
async fn publish_broken(
    server: &BinaryServer,
    tenant: &str,
    id: &str,
) -> anyhow::Result<(u16, String)> {
    let r = reqwest::Client::new()
        .post(server.url(CONFIGS))
        .form(&[
            ("dataId", id),
            ("group", "G"),
            ("tenant", tenant),
            ("type", "yaml"),
            ("content", BROKEN_YAML),
        ])
        .send()
        .await?;
    Ok((r.status().as_u16(), r.text().await?))
}

#[tokio::test]
async fn flags_set_the_mode_and_the_overrides() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = BinaryServer::spawn(
        NACELLE,
        dir.path(),
        &[
            "--content-validation",
            "reject",
            "--content-validation-namespaces",
            "dev=off",
        ],
    )?;
    server.api.wait_ready().await?;
    let (status, body) = publish_broken(&server, "", "y").await?;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.starts_with("caused: content is not valid yaml at line 2, column"),
        "{body}"
    );
    assert_eq!(server.api.get("", "G", "y").await?, None, "nothing stored");
    let (status, body) = publish_broken(&server, "dev", "y").await?;
    assert_eq!((status, body.as_str()), (200, "true"));
    assert_eq!(
        server.api.get("dev", "G", "y").await?.as_deref(),
        Some(BROKEN_YAML)
    );
    Ok(())
}

#[tokio::test]
async fn the_file_sets_them_and_the_default_warns() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("nacelle.toml");
    std::fs::write(&file, "content_validation_namespaces = \"prod=reject\"\n")?;
    let file = file.to_string_lossy().into_owned();
    let server = BinaryServer::spawn(NACELLE, dir.path(), &["--config", &file])?;
    server.api.wait_ready().await?;
    // No global mode given: the default, warn, stores it.
    let (status, body) = publish_broken(&server, "", "y").await?;
    assert_eq!((status, body.as_str()), (200, "true"));
    let (status, body) = publish_broken(&server, "prod", "y").await?;
    assert_eq!(status, 400, "{body}");
    Ok(())
}

#[test]
fn a_bad_override_stops_the_server_at_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = std::process::Command::new(NACELLE)
        .args([
            "serve",
            "--port",
            "0",
            "--grpc-port",
            "0",
            "--bind",
            "127.0.0.1",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--content-validation-namespaces", "dev=strict"])
        .output()?;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("content_validation_namespaces"), "{stderr}");
    Ok(())
}
