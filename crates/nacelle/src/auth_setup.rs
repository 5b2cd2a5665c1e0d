//! Authentication at start (docs/security.md): the token secret (given; or, on a single
//! node, generated once and kept in the data directory; required in a cluster), and the
//! first administrator when the database has no user at all. No built-in default secret
//! or password exists anywhere.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use nacelle_service::auth::{generate_secret, AuthConfig};
use nacelle_service::ConfigService;

use crate::Settings;

/// The file of a single node's generated token secret.
pub const TOKEN_SECRET_FILE: &str = "auth-token-secret";
/// The file the generated password of the first administrator is written to.
pub const INITIAL_PASSWORD_FILE: &str = "initial-admin-password";

/// How this server authenticates.
pub(crate) fn auth_config(settings: &Settings) -> anyhow::Result<AuthConfig> {
    let auth = &settings.auth;
    if !auth.enabled {
        tracing::warn!(
            "authentication is OFF (--auth off): anyone who can reach the ports can read and \
             change every config"
        );
        return Ok(AuthConfig::off());
    }
    let secret = match &auth.token_secret {
        Some(secret) => secret.clone(),
        None if settings.clustered() => anyhow::bail!(
            "cluster members are configured but there is no auth token secret: every member \
             must sign tokens with the same one. Set --auth-token-secret-file (or \
             NACELLE_AUTH_TOKEN_SECRET): base64 of at least 32 bytes, e.g. \
             `openssl rand -base64 32`"
        ),
        None => local_secret(&settings.data_dir.join(TOKEN_SECRET_FILE))?,
    };
    let mut config = AuthConfig::on(&secret, auth.token_ttl_s)
        .map_err(|e| anyhow::anyhow!("auth token secret: {e}"))?;
    config.anonymous_read = auth.anonymous_read;
    if auth.anonymous_read {
        tracing::warn!("--auth-anonymous-read: unauthenticated callers may read and listen");
    }
    Ok(config)
}

/// A single node's secret: read from `path`, or generated and written there (0600).
fn local_secret(path: &Path) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            return Ok(text.lines().next().unwrap_or("").trim().to_string());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let secret = generate_secret().map_err(|e| anyhow::anyhow!("{e}"))?;
    write_private(path, &secret)?;
    tracing::info!(path = %path.display(), "generated the auth token secret");
    Ok(secret)
}

/// Writes `text` and a newline to a new file only its owner can read.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    writeln!(file, "{text}").with_context(|| format!("writing {}", path.display()))?;
    file.sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Before the service is marked ready (a login right after readiness finds it): creates the
/// administrator `nacos` when the database has no user, with the configured password or a
/// random one written to `<data-dir>/initial-admin-password` (the log says where, never what).
pub(crate) async fn ensure_admin(service: &ConfigService, settings: &Settings) {
    if !service.access().enabled() {
        return;
    }
    let given = settings.auth.admin_password.as_deref();
    let created = match service.access().ensure_initial_admin(given).await {
        Ok(created) => created,
        Err(e) => {
            tracing::error!(error = %e, "creating the first administrator failed");
            return;
        }
    };
    let Some(password) = created else { return };
    if given.is_some() {
        tracing::info!("created the administrator `nacos` with the configured password");
        return;
    }
    let path = settings.data_dir.join(INITIAL_PASSWORD_FILE);
    // A file left by an earlier database is replaced: it no longer holds a valid password.
    if path.exists() {
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::error!(path = %path.display(), error = %e, "could not replace the initial password file");
            return;
        }
    }
    match write_private(&path, &password) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            "created the administrator `nacos`; its password is in this file (readable only \
             by this user): log in and change it"
        ),
        Err(e) => tracing::error!(error = %e, "writing the initial administrator password failed"),
    }
}
