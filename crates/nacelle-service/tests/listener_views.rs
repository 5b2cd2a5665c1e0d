//! `listener_views`: what the console shows of the listeners of a key or of an IP — each
//! listener's caller, the md5 it holds, and the variant and md5 the service would serve it
//! now (so a gray's reach is the service's own selection, not the console's). Real SQLite
//! store, real service.

use std::net::IpAddr;
use std::sync::Arc;

use nacelle_core::{md5_hex, Caller, ConfigKey, GraySpec, Protocol, Variant};
use nacelle_service::{ChangeEvent, Subscriber, WatchItem};
use nacelle_testkit::service::{open_sqlite, publish_request};
use nacelle_testkit::{Backend, TestDb, TestResult};

struct Quiet;

impl Subscriber for Quiet {
    fn notify(&self, _event: &Arc<ChangeEvent>) {}
}

fn from(ip: &str, app: &str) -> Result<Caller, std::net::AddrParseError> {
    let mut c = Caller::anonymous(Protocol::Grpc, Some(ip.parse::<IpAddr>()?));
    c.app_name = Some(app.into());
    Ok(c)
}

#[tokio::test]
async fn listeners_with_what_they_hold_and_what_they_would_be_served() -> TestResult {
    let db = TestDb::create(Backend::Sqlite).await?;
    let service = open_sqlite(&db.path().ok_or("no SQLite file")?, true).await?;
    let admin = Caller::internal();
    let key = ConfigKey::parse(Some("ns"), "G", "app.yaml")?;
    let other = ConfigKey::parse(Some("ns"), "G", "other.yaml")?;
    service.publish(&admin, publish_request(&key, "v1")).await?;
    service
        .publish(&admin, publish_request(&other, "o1"))
        .await?;

    // Two clients: one on 10.0.0.1 holding v1, one on 10.0.0.2 holding something old.
    let a = from("10.0.0.1", "shop")?;
    let b = from("10.0.0.2", "pay")?;
    let wa = service.watch(&a)?;
    wa.add(
        &a,
        vec![
            WatchItem {
                key: key.clone(),
                md5: md5_hex(b"v1"),
                subscriber: Arc::new(Quiet),
            },
            WatchItem {
                key: other.clone(),
                md5: md5_hex(b"o1"),
                subscriber: Arc::new(Quiet),
            },
        ],
    )?;
    let wb = service.watch(&b)?;
    wb.add(
        &b,
        vec![WatchItem {
            key: key.clone(),
            md5: "stale".into(),
            subscriber: Arc::new(Quiet),
        }],
    )?;

    let mut views = service.listeners(&admin)?.views_of_key(&key)?;
    views.sort_by_key(|v| v.listener.ip_string());
    assert_eq!(views.len(), 2);
    assert_eq!(views[0].listener.app_name.as_deref(), Some("shop"));
    assert!(views[0].in_sync && views[0].gray.is_none());
    assert_eq!(views[0].served_md5, md5_hex(b"v1"));
    assert!(
        !views[1].in_sync,
        "a listener holding another md5 is behind"
    );
    assert_eq!(views[1].held_md5, "stale");

    // A beta for 10.0.0.1: it is served the beta (and told, so it holds it now); the
    // other one still gets the formal config.
    let mut beta = publish_request(&key, "v2-beta");
    beta.variant = Variant::Gray(GraySpec::beta("10.0.0.1")?);
    service.publish(&admin, beta).await?;
    let mut views = service.listeners(&admin)?.views_of_key(&key)?;
    views.sort_by_key(|v| v.listener.ip_string());
    assert_eq!(views[0].gray.as_deref(), Some("beta"));
    assert_eq!(views[0].served_md5, md5_hex(b"v2-beta"));
    assert_eq!(views[0].held_md5, md5_hex(b"v2-beta"), "told of the beta");
    assert!(views[0].in_sync);
    assert_eq!(views[1].gray, None);

    // By IP: every key the client at that IP listens to.
    let mut by_ip = service.listeners(&admin)?.views_of_ip("10.0.0.1")?;
    by_ip.sort_by_key(|v| v.key.data_id().to_string());
    let keys: Vec<&str> = by_ip.iter().map(|v| v.key.data_id()).collect();
    assert_eq!(keys, ["app.yaml", "other.yaml"]);
    assert!(service
        .listeners(&admin)?
        .views_of_ip("10.9.9.9")?
        .is_empty());

    // A listener that leaves is no longer shown.
    drop(wb);
    assert_eq!(service.listeners(&admin)?.views_of_key(&key)?.len(), 1);
    Ok(())
}
