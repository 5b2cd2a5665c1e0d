//! TLS of the client ports (HTTP and gRPC): a [`TlsAcceptor`] built from PEM files — the
//! certificate chain, its private key and, for mutual TLS, the CA that client
//! certificates must chain to — with rustls on the `ring` provider. The acceptor is a
//! cheap handle: [`TlsAcceptor::reload`] swaps in a config read anew from the same files,
//! and every connection accepted after that sees it (connections already open keep the
//! one they were accepted with). [`watch`] reloads on SIGHUP and when a file's modification
//! time or size changes. A reload that fails (a half-written file, a key that does not
//! match) keeps the previous config and is logged; it is tried again at the next change.
//!
//! # Layout
//! - [`TlsFiles`]: the paths; [`TlsAcceptor`]: the current config and the handshake;
//!   [`watch`]: the reload task; [`TlsError`]: what can go wrong reading the files.
//!
//! Knows nothing of HTTP or gRPC: the adapters wrap their accepted streams in
//! [`TlsAcceptor::accept`] and ask for their ALPN protocol (`http/1.1`, `h2`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

pub use tokio_rustls::server::TlsStream;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the certificate, its key and the optional client CA are read from (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key of the leaf certificate (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Mutual TLS: clients must present a certificate chaining to one of these CAs; a
    /// client without one is refused during the handshake. `None`: no client certificates.
    pub client_ca: Option<PathBuf>,
}

/// What can go wrong building a TLS config from the files.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("{path}: no certificate in the file")]
    NoCertificate { path: PathBuf },
    #[error("client CA {path}: {reason}")]
    ClientCa { path: PathBuf, reason: String },
    #[error("certificate {cert} with key {key}: {reason}")]
    Config {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
}

/// The TLS side of one port: the current server config (swapped by reloads) and the
/// handshake. Cloning is cheap; clones share the config.
#[derive(Clone)]
pub struct TlsAcceptor {
    inner: Arc<Inner>,
}

struct Inner {
    files: TlsFiles,
    /// ALPN protocols offered, in order of preference (`h2` for gRPC, `http/1.1`).
    alpn: Vec<Vec<u8>>,
    /// What the port is called in logs (`http`, `grpc`).
    name: &'static str,
    /// The config new connections get. A read lock for a pointer copy per connection.
    current: RwLock<Arc<ServerConfig>>,
    /// The files' modification times and sizes when `current` was read.
    stamp: Mutex<Vec<Option<(SystemTime, u64)>>>,
}

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("name", &self.inner.name)
            .field("files", &self.inner.files)
            .finish_non_exhaustive()
    }
}

impl TlsAcceptor {
    /// Reads the files and builds the config; `alpn` are the protocols offered (e.g.
    /// `[b"h2"]`), `name` names the port in logs.
    pub fn new(files: TlsFiles, alpn: &[&[u8]], name: &'static str) -> Result<Self, TlsError> {
        let alpn: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
        let stamp = stamp_of(&files);
        let config = build(&files, &alpn)?;
        Ok(TlsAcceptor {
            inner: Arc::new(Inner {
                files,
                alpn,
                name,
                current: RwLock::new(Arc::new(config)),
                stamp: Mutex::new(stamp),
            }),
        })
    }

    /// The files this acceptor reads.
    pub fn files(&self) -> &TlsFiles {
        &self.inner.files
    }

    /// The config new connections get.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.inner.current.read().clone()
    }

    /// Reads the files again and, if they make a valid config, serves it to every new
    /// connection. On error the previous config stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let stamp = stamp_of(&self.inner.files);
        let config = build(&self.inner.files, &self.inner.alpn)?;
        *self.inner.current.write() = Arc::new(config);
        *self.inner.stamp.lock() = stamp;
        Ok(())
    }

    /// Whether a file changed (modification time or size) since the config was read.
    pub fn changed(&self) -> bool {
        *self.inner.stamp.lock() != stamp_of(&self.inner.files)
    }

    /// The TLS handshake on an accepted stream, with the current config, within
    /// [`HANDSHAKE_TIMEOUT`]. A client without a valid certificate (mutual TLS), speaking
    /// plain text, or too slow fails here.
    pub async fn accept<IO>(&self, io: IO) -> io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config());
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
            Ok(done) => done,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }

    /// Reloads when a file changed; logs the outcome. Returns whether a new config is in
    /// use.
    fn reload_logged(&self, why: &str) -> bool {
        match self.reload() {
            Ok(()) => {
                tracing::info!(port = self.inner.name, cert = %self.inner.files.cert.display(), why, "TLS certificate reloaded");
                true
            }
            Err(e) => {
                tracing::warn!(port = self.inner.name, error = %e, why, "TLS certificate reload failed; keeping the previous one");
                false
            }
        }
    }
}

/// Reloads `acceptors` on SIGHUP (Unix) and, when `poll` is set, whenever one of their
/// files changes (checked at that interval), until `stop`.
pub async fn watch(acceptors: Vec<TlsAcceptor>, poll: Option<Duration>, stop: CancellationToken) {
    if acceptors.is_empty() {
        return;
    }
    let mut hangup = Hangup::new();
    let mut tick = poll.map(|every| {
        let mut t = tokio::time::interval(every);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = hangup.recv() => {
                for a in &acceptors {
                    a.reload_logged("SIGHUP");
                }
            }
            _ = async {
                match tick.as_mut() {
                    Some(t) => { t.tick().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {
                for a in acceptors.iter().filter(|a| a.changed()) {
                    if !a.reload_logged("file changed") {
                        // Not again until the files change once more.
                        *a.inner.stamp.lock() = stamp_of(&a.inner.files);
                    }
                }
            }
        }
    }
}

/// SIGHUP as a stream; never fires where there is no such signal or it cannot be caught.
struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    fn new() -> Self {
        #[cfg(unix)]
        {
            let signal = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGHUP; TLS reloads only on file change");
                    None
                }
            };
            Hangup { signal }
        }
        #[cfg(not(unix))]
        Hangup {}
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = self.signal.as_mut() {
            if s.recv().await.is_some() {
                return;
            }
        }
        std::future::pending::<()>().await
    }
}

fn stamp_of(files: &TlsFiles) -> Vec<Option<(SystemTime, u64)>> {
    [
        Some(&files.cert),
        Some(&files.key),
        files.client_ca.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|p| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    })
    .collect()
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

fn build(files: &TlsFiles, alpn: &[Vec<u8>]) -> Result<ServerConfig, TlsError> {
    let chain = certs(&files.cert)?;
    let key_pem = read(&files.key)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Pem {
        path: files.key.clone(),
        reason: format!("no private key: {e}"),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config_error = |reason: String| TlsError::Config {
        cert: files.cert.clone(),
        key: files.key.clone(),
        reason,
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(e.to_string()))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let ca_error = |reason: String| TlsError::ClientCa {
                path: path.clone(),
                reason,
            };
            let mut roots = RootCertStore::empty();
            for ca in certs(path)? {
                roots.add(ca).map_err(|e| ca_error(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| ca_error(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| config_error(e.to_string()))?;
    config.alpn_protocols = alpn.to_vec();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn write_pair(dir: &Path, name: &str) -> Result<TlsFiles, Box<dyn std::error::Error>> {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()])?;
        let files = TlsFiles {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
            client_ca: None,
        };
        std::fs::write(&files.cert, cert.cert.pem())?;
        std::fs::write(&files.key, cert.key_pair.serialize_pem())?;
        Ok(files)
    }

    #[test]
    fn loads_reloads_and_keeps_the_old_config_on_a_bad_file() -> TestResult {
        let dir = tempfile::tempdir()?;
        let files = write_pair(dir.path(), "a")?;
        let acceptor = TlsAcceptor::new(files.clone(), &[b"h2"], "test")?;
        assert_eq!(acceptor.config().alpn_protocols, vec![b"h2".to_vec()]);
        assert!(!acceptor.changed());
        let before = acceptor.config();
        std::fs::write(&files.key, "not a key")?;
        assert!(acceptor.changed());
        let err = acceptor.reload().expect_err("a bad key");
        assert!(err.to_string().contains("a.key"), "{err}");
        assert!(Arc::ptr_eq(&before, &acceptor.config()));
        let other = write_pair(dir.path(), "b")?;
        std::fs::copy(&other.cert, &files.cert)?;
        std::fs::copy(&other.key, &files.key)?;
        acceptor.reload()?;
        assert!(!Arc::ptr_eq(&before, &acceptor.config()));
        Ok(())
    }

    #[test]
    fn clear_errors_for_missing_and_empty_files() -> TestResult {
        let dir = tempfile::tempdir()?;
        let files = write_pair(dir.path(), "a")?;
        let missing = TlsFiles {
            cert: dir.path().join("nope.crt"),
            ..files.clone()
        };
        let err = TlsAcceptor::new(missing, &[], "test").expect_err("missing file");
        assert!(matches!(err, TlsError::Read { .. }), "{err}");
        std::fs::write(dir.path().join("empty.crt"), "")?;
        let empty = TlsFiles {
            cert: dir.path().join("empty.crt"),
            ..files.clone()
        };
        let err = TlsAcceptor::new(empty, &[], "test").expect_err("empty file");
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
        let bad_ca = TlsFiles {
            client_ca: Some(dir.path().join("empty.crt")),
            ..files
        };
        let err = TlsAcceptor::new(bad_ca, &[], "test").expect_err("empty CA");
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
        Ok(())
    }
}
