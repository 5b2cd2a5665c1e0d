//! TLS on the client ports (docs/security.md, "TLS"): a test CA, server and client
//! certificates made here with rcgen; HTTPS with reqwest trusting the CA, gRPC over TLS
//! with a tonic client doing a Nacos handshake and a query; mutual TLS refusing a client
//! without a certificate; plain and TLS side by side; a certificate replaced on disk
//! served to new connections.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use anyhow::{bail, Context, Result};
use common::grpc::Registered;
use nacelle::settings::TlsSettings;
use nacelle_testkit::server::{settings_for, TestServer};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

const WAIT: Duration = Duration::from_secs(10);

/// A CA and what it signed, as PEM.
struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

impl Pki {
    /// A CA named `name`, a server certificate for `localhost`/127.0.0.1 and a client
    /// certificate, all signed by it.
    fn new(name: &str) -> Result<Pki> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key)?;
        let leaf = |purpose: ExtendedKeyUsagePurpose, cn: &str| -> Result<(String, String)> {
            let key = KeyPair::generate()?;
            let mut p =
                CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
            p.distinguished_name.push(DnType::CommonName, cn);
            p.extended_key_usages = vec![purpose];
            let cert = p.signed_by(&key, &ca_cert, &ca_key)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        let (server_cert, server_key) = leaf(ExtendedKeyUsagePurpose::ServerAuth, "server")?;
        let (client_cert, client_key) = leaf(ExtendedKeyUsagePurpose::ClientAuth, "client")?;
        Ok(Pki {
            ca: ca_cert.pem(),
            server_cert,
            server_key,
            client_cert,
            client_key,
        })
    }

    /// Writes the server's files (and the CA, for mutual TLS) into `dir`, replacing any.
    fn install(&self, dir: &Path) -> Result<nacelle_tls::TlsFiles> {
        let files = nacelle_tls::TlsFiles {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            client_ca: Some(dir.join("clients-ca.crt")),
        };
        // Written aside, then renamed: a reload never sees half a file.
        for (path, pem) in [
            (&files.cert, &self.server_cert),
            (&files.key, &self.server_key),
            (files.client_ca.as_ref().context("ca path")?, &self.ca),
        ] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, pem)?;
            std::fs::rename(&tmp, path)?;
        }
        Ok(files)
    }

    /// An HTTPS client trusting this CA, presenting the client certificate if `identity`.
    fn https(&self, addr: SocketAddr, identity: bool) -> Result<reqwest::Client> {
        let mut b = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca.as_bytes())?)
            .resolve("localhost", addr)
            .pool_max_idle_per_host(0)
            .timeout(WAIT);
        if identity {
            let pem = format!("{}{}", self.client_cert, self.client_key);
            b = b.identity(reqwest::Identity::from_pem(pem.as_bytes())?);
        }
        Ok(b.build()?)
    }

    /// A gRPC channel over TLS trusting this CA (with the client certificate if
    /// `identity`).
    async fn grpc(&self, addr: SocketAddr, identity: bool) -> Result<Channel> {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&self.ca))
            .domain_name("localhost");
        if identity {
            tls = tls.identity(tonic::transport::Identity::from_pem(
                &self.client_cert,
                &self.client_key,
            ));
        }
        let endpoint = Endpoint::from_shared(format!("https://{addr}"))?
            .tls_config(tls)?
            .connect_timeout(WAIT);
        Ok(endpoint.connect().await?)
    }
}

fn tls_settings(files: nacelle_tls::TlsFiles, separate_ports: bool) -> TlsSettings {
    TlsSettings {
        files,
        port: separate_ports.then_some(0),
        grpc_port: separate_ports.then_some(0),
        reload_interval: Some(Duration::from_millis(100)),
    }
}

fn https_url(addr: SocketAddr, path_and_query: &str) -> String {
    format!("https://localhost:{}{path_and_query}", addr.port())
}

/// Publishes and reads back one config over HTTPS.
async fn https_round_trip(client: &reqwest::Client, addr: SocketAddr, id: &str) -> Result<()> {
    let url = https_url(addr, "/nacos/v1/cs/configs");
    let resp = client
        .post(&url)
        .form(&[("dataId", id), ("group", "TLS"), ("content", "over tls")])
        .send()
        .await?;
    let status = resp.status();
    let body = resp.text().await?;
    if status != 200 || body != "true" {
        bail!("publish over HTTPS: {status} {body}");
    }
    let got = client
        .get(&url)
        .query(&[("dataId", id), ("group", "TLS")])
        .send()
        .await?
        .text()
        .await?;
    anyhow::ensure!(got == "over tls", "read back {got:?}");
    Ok(())
}

/// The Nacos 2.x handshake, then a publish and a query of `id` on one TLS connection.
async fn grpc_round_trip(channel: Channel, id: &str) -> Result<()> {
    let mut conn = Registered::connect(channel).await?;
    let head = conn.publish(id, "TLS", "grpc over tls").await?;
    anyhow::ensure!(head.is_ok(), "publish over gRPC/TLS: {head:?}");
    let got = conn.query(id, "TLS").await?;
    anyhow::ensure!(got.head.is_ok(), "query over gRPC/TLS: {:?}", got.head);
    anyhow::ensure!(
        got.content.as_deref() == Some("grpc over tls"),
        "{:?}",
        got.content
    );
    Ok(())
}

/// Plain and TLS side by side (a migration): the plain ports keep working, the TLS ports
/// serve HTTPS and gRPC over TLS to clients trusting the CA.
#[tokio::test]
async fn https_and_grpc_over_tls_beside_the_plain_ports() -> Result<()> {
    let pki = Pki::new("Nacelle test CA")?;
    let certs = tempfile::tempdir()?;
    let mut files = pki.install(certs.path())?;
    files.client_ca = None;
    let s = TestServer::start_with(|s| s.tls = Some(tls_settings(files, true))).await?;
    let running = s.server.as_ref().context("running")?;
    let https = running.http_tls_addr.context("an HTTPS port")?;
    let grpcs = running.grpc_tls_addr.context("a gRPC TLS port")?;
    assert_ne!(https, running.http_addr);
    assert_ne!(grpcs, running.grpc_addr);

    https_round_trip(&pki.https(https, false)?, https, "http-tls").await?;
    grpc_round_trip(pki.grpc(grpcs, false).await?, "grpc-tls").await?;
    // The plain port sees what was written over TLS.
    assert_eq!(
        s.get("", "TLS", "grpc-tls").await?.as_deref(),
        Some("grpc over tls")
    );

    // A client that does not trust the CA is refused; plain text on the TLS port too.
    let stranger = Pki::new("Another CA")?;
    assert!(https_round_trip(&stranger.https(https, false)?, https, "x")
        .await
        .is_err());
    let plain = reqwest::Client::new()
        .get(format!("http://{https}/nacos/v1/console/health/readiness"))
        .send()
        .await;
    assert!(
        plain.is_err(),
        "plain HTTP answered on the TLS port: {plain:?}"
    );
    Ok(())
}

/// With TLS on and no separate port, the normal ports serve TLS only; with a client CA a
/// client without a certificate is refused (HTTP and gRPC), one with a certificate is
/// served.
#[tokio::test]
async fn mutual_tls_on_the_main_ports_refuses_a_client_without_a_certificate() -> Result<()> {
    let pki = Pki::new("Nacelle test CA")?;
    let certs = tempfile::tempdir()?;
    let data = tempfile::tempdir()?;
    let files = pki.install(certs.path())?;
    let settings = settings_for(data.path(), |s| s.tls = Some(tls_settings(files, false)));
    let server = nacelle::start(&settings).await?;
    assert_eq!(server.http_tls_addr, Some(server.http_addr));
    assert_eq!(server.grpc_tls_addr, Some(server.grpc_addr));
    let (http, grpc) = (server.http_addr, server.grpc_addr);

    // Wait until the cache is loaded (readiness over HTTPS with a certificate).
    let client = pki.https(http, true)?;
    let deadline = Instant::now() + WAIT;
    loop {
        let ready = client
            .get(https_url(http, "/nacos/v1/console/health/readiness"))
            .send()
            .await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    https_round_trip(&client, http, "mtls").await?;
    grpc_round_trip(pki.grpc(grpc, true).await?, "mtls-grpc").await?;

    let anonymous = pki.https(http, false)?;
    let refused = https_round_trip(&anonymous, http, "no-cert").await;
    assert!(
        refused.is_err(),
        "a client without a certificate was served"
    );
    let refused = match pki.grpc(grpc, false).await {
        Ok(channel) => grpc_round_trip(channel, "no-cert-grpc").await,
        Err(e) => Err(e),
    };
    assert!(
        refused.is_err(),
        "a gRPC client without a certificate was served"
    );
    // A client certificate from another CA is refused as well.
    let stranger = Pki::new("Another CA")?;
    let mut mixed = Pki::new("Nacelle test CA")?;
    mixed.ca = pki.ca.clone();
    mixed.client_cert = stranger.client_cert;
    mixed.client_key = stranger.client_key;
    assert!(
        https_round_trip(&mixed.https(http, true)?, http, "wrong-ca")
            .await
            .is_err()
    );
    // Plain text on the TLS-only port gets no answer.
    let plain = reqwest::Client::new()
        .get(format!("http://{http}/nacos/v1/console/health/readiness"))
        .timeout(WAIT)
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP answered: {plain:?}");
    tokio::time::timeout(Duration::from_secs(20), server.shutdown()).await??;
    Ok(())
}

/// Replacing the certificate files makes new connections see the new certificate (the
/// files are checked every 100 ms here); a client trusting only the old CA is then refused.
#[tokio::test]
async fn a_replaced_certificate_is_served_to_new_connections() -> Result<()> {
    let old = Pki::new("Old CA")?;
    let certs = tempfile::tempdir()?;
    let mut files = old.install(certs.path())?;
    files.client_ca = None;
    let s = TestServer::start_with(|s| s.tls = Some(tls_settings(files, true))).await?;
    let running = s.server.as_ref().context("running")?;
    let (https, grpcs) = (
        running.http_tls_addr.context("https")?,
        running.grpc_tls_addr.context("grpcs")?,
    );
    https_round_trip(&old.https(https, false)?, https, "before").await?;

    let new = Pki::new("New CA")?;
    new.install(certs.path())?;
    let deadline = Instant::now() + WAIT;
    while https_round_trip(&new.https(https, false)?, https, "after")
        .await
        .is_err()
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    grpc_round_trip(new.grpc(grpcs, false).await?, "after-grpc").await?;
    assert!(https_round_trip(&old.https(https, false)?, https, "old")
        .await
        .is_err());
    Ok(())
}

/// The real binary with file checks off (`--tls-reload-interval-ms 0`): replaced files are
/// not served until SIGHUP, then they are.
#[tokio::test]
async fn sighup_reloads_the_certificate() -> Result<()> {
    let old = Pki::new("Old CA")?;
    let certs = tempfile::tempdir()?;
    let data = tempfile::tempdir()?;
    let files = old.install(certs.path())?;
    // A free port for HTTPS (the binary reports only its plain HTTP address).
    let https = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let path = |p: &Path| p.to_str().map(str::to_string).context("UTF-8 path");
    let (cert, key, port) = (
        path(&files.cert)?,
        path(&files.key)?,
        https.port().to_string(),
    );
    let server = nacelle_testkit::server::BinaryServer::spawn(
        env!("CARGO_BIN_EXE_nacelle"),
        data.path(),
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-port",
            &port,
            "--tls-reload-interval-ms",
            "0",
        ],
    )?;
    server.api.wait_ready().await?;
    https_round_trip(&old.https(https, false)?, https, "before").await?;

    let new = Pki::new("New CA")?;
    new.install(certs.path())?;
    // No file checks: still the old certificate.
    https_round_trip(&old.https(https, false)?, https, "still-old").await?;
    assert!(https_round_trip(&new.https(https, false)?, https, "x")
        .await
        .is_err());

    let status = std::process::Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill -HUP failed");
    let deadline = Instant::now() + WAIT;
    while https_round_trip(&new.https(https, false)?, https, "after")
        .await
        .is_err()
    {
        anyhow::ensure!(Instant::now() < deadline, "SIGHUP did not reload");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Still serving after the signal (SIGHUP does not stop it).
    server.api.wait_ready().await?;
    Ok(())
}
