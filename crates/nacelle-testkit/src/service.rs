//! The config service over a SQLite file, as the gRPC and service suites run it, and
//! publishing through it (as the HTTP adapter or the console would).

use std::path::Path;
use std::sync::Arc;

use nacelle_core::{Caller, ConfigKey, ConfigMeta, Variant};
use nacelle_service::{ConfigService, Limits, PublishRequest, Services};
use nacelle_store::SqliteStore;

/// The service over the SQLite file at `db` with default limits; `load` fills its cache
/// (until then the service is "starting" and not ready).
pub async fn open_sqlite(db: &Path, load: bool) -> anyhow::Result<ConfigService> {
    open_sqlite_with(db, load, Limits::default()).await
}

/// [`open_sqlite`] with the service's limits set.
pub async fn open_sqlite_with(
    db: &Path,
    load: bool,
    limits: Limits,
) -> anyhow::Result<ConfigService> {
    Ok(open_services(db, load, limits).await?.config)
}

/// The config core and its features over a SQLite file (loaded when `load`), as the
/// server wires them.
pub async fn open_services(db: &Path, load: bool, limits: Limits) -> anyhow::Result<Services> {
    let store = SqliteStore::open_path(db).await?;
    let services = Services::new(Arc::new(store), limits)?;
    if load {
        services.load().await?;
    }
    Ok(services)
}

/// A plain publish of `content` (type `text`, no metadata, no CAS) to `key`.
pub fn publish_request(key: &ConfigKey, content: &str) -> PublishRequest {
    PublishRequest {
        key: key.clone(),
        content: content.to_string(),
        config_type: Some("text".into()),
        meta: ConfigMeta::default(),
        src_user: String::new(),
        cas_md5: None,
        variant: Variant::Formal,
        message: String::new(),
        change_id: None,
    }
}

/// Publishes `content` to `key` through `service`, as the server itself
/// ([`Caller::internal`]).
pub async fn publish(
    service: &ConfigService,
    key: &ConfigKey,
    content: &str,
) -> anyhow::Result<()> {
    service
        .publish(&Caller::internal(), publish_request(key, content))
        .await?;
    Ok(())
}
