//! TLS through the URL's own parameters (`sslmode` / `ssl-mode`), against the machine's
//! servers: what they offer decides what is expected.

use anyhow::Context;
use bytes::Bytes;
use nacelle_core::{md5_hex, ConfigKey, ConfigMeta, ConfigType, OpSource, PublishRecord};
use nacelle_testkit::per_backend::skipped;
use nacelle_testkit::{Backend, TestDb};
use sqlx::{Connection, Row};

type TestResult = anyhow::Result<()>;

fn record(content: &str) -> PublishRecord {
    PublishRecord {
        key: ConfigKey::from_trusted("", "G", "tls"),
        content: Bytes::from(content.to_string()),
        md5: md5_hex(content.as_bytes()),
        config_type: ConfigType::Text,
        meta: ConfigMeta::default(),
        source: OpSource::default(),
        cas_md5: None,
        now_ms: 1_700_000_000_000,
        gray: None,
    }
}

#[tokio::test]
async fn postgres_sslmode_is_honoured() -> TestResult {
    if skipped(Backend::Postgres) {
        return Ok(());
    }
    let db = TestDb::create(Backend::Postgres).await?;
    let mut conn = sqlx::PgConnection::connect(&db.url).await?;
    let ssl: String = sqlx::query_scalar("SHOW ssl").fetch_one(&mut conn).await?;
    drop(conn);
    let required = nacelle_store::open(&format!("{}?sslmode=require", db.url)).await;
    if ssl == "on" {
        let store = required.context("sslmode=require against a TLS server")?;
        let stored = store.publish(&record("over tls")).await?;
        assert_eq!(store.get(&stored.key).await?, Some(stored));
        // The server's certificate is not signed by a CA we trust: verification refuses it.
        let verified = nacelle_store::open(&format!("{}?sslmode=verify-full", db.url)).await;
        assert!(
            verified.is_err(),
            "verify-full accepted an untrusted certificate"
        );
    } else {
        assert!(
            required.is_err(),
            "sslmode=require without TLS on the server"
        );
    }
    drop(db);
    Ok(())
}

#[tokio::test]
async fn mysql_ssl_mode_is_honoured() -> TestResult {
    if skipped(Backend::MariaDb) {
        return Ok(());
    }
    let db = TestDb::create(Backend::MariaDb).await?;
    let mut conn = db.mysql().await?;
    let row = sqlx::query("SHOW VARIABLES LIKE 'have_ssl'")
        .fetch_one(&mut conn)
        .await?;
    let have_ssl: String = row.try_get_unchecked(1)?;
    drop(conn);
    let required = nacelle_store::open(&format!("{}?ssl-mode=REQUIRED", db.url)).await;
    if have_ssl == "YES" {
        let store = required.context("ssl-mode=REQUIRED against a TLS server")?;
        store.publish(&record("over tls")).await?;
    } else {
        let err = required
            .err()
            .context("ssl-mode=REQUIRED connected to a server without TLS")?;
        println!("ssl-mode=REQUIRED without server TLS: {err}");
    }
    let plain = nacelle_store::open(&format!("{}?ssl-mode=DISABLED", db.url)).await?;
    plain.ping().await?;
    drop(db);
    Ok(())
}
