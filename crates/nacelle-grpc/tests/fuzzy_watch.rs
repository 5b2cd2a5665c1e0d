//! Nacos 3.0's config fuzzy watch (`ConfigFuzzyWatchRequest`) driven by hand: the initial
//! sync in Nacos's batches, added / changed / removed keys, `CANCEL_WATCH`, the pattern and
//! match limits with Nacos's codes, the read filter of a user with a narrow permission, and
//! the cleanup when the connection goes.
//!
//! "Nothing was sent" is shown without waiting: a marker change sent after it must be the
//! next message on the stream.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Msg, RawClient, RawExt, TestServer, SOON};
use nacelle_core::auth::PermissionRecord;
use nacelle_core::{Caller, ConfigKey};
use nacelle_grpc::GrpcOptions;
use nacelle_service::auth::AuthConfig;
use nacelle_service::Limits;
use serde_json::json;

type TestResult = anyhow::Result<()>;

const WAIT: Duration = Duration::from_secs(5);

async fn watch(
    c: &mut RawClient,
    headers: &[(&str, &str)],
    pattern: &str,
    watch_type: &str,
    received: &[&str],
    initializing: bool,
) -> anyhow::Result<Msg> {
    c.call_with_headers(
        "ConfigFuzzyWatchRequest",
        headers,
        json!({"groupKeyPattern": pattern, "watchType": watch_type,
               "receivedGroupKeys": received, "initializing": initializing,
               "module": "config", "headers": {}}),
    )
    .await
}

/// The next message on the stream, acked with the response type its request asks for.
async fn next(c: &mut RawClient) -> anyhow::Result<Msg> {
    let m = c
        .next(WAIT)
        .await?
        .ok_or_else(|| anyhow::anyhow!("stream ended"))?;
    let ack = m.type_name.replace("Request", "Response");
    if let Some(id) = m.str("requestId") {
        c.respond(&ack, id).await?;
    }
    Ok(m)
}

/// Reads one initial sync: the batches up to `FINISH_FUZZY_WATCH_INIT_NOTIFY`; returns the
/// (groupKey, changedType) pairs and the batches' (syncType, currentBatch, totalBatch).
async fn read_sync(
    c: &mut RawClient,
) -> anyhow::Result<(BTreeSet<(String, String)>, Vec<(String, i64, i64)>)> {
    let mut keys = BTreeSet::new();
    let mut batches = Vec::new();
    loop {
        let m = next(c).await?;
        anyhow::ensure!(m.type_name == "ConfigFuzzyWatchSyncRequest", "{m:?}");
        assert_eq!(m.str("module"), Some("config"));
        let sync_type = m.str("syncType").unwrap_or_default().to_string();
        if sync_type == "FINISH_FUZZY_WATCH_INIT_NOTIFY" {
            assert!(m.body.get("contexts").is_none(), "{m:?}");
            assert_eq!(
                (m.int("totalBatch"), m.int("currentBatch")),
                (Some(0), Some(0))
            );
            return Ok((keys, batches));
        }
        let contexts = m.body["contexts"].as_array().cloned().unwrap_or_default();
        assert!(contexts.len() <= 20, "batches of at most 20");
        for ctx in contexts {
            keys.insert((
                ctx["groupKey"].as_str().unwrap_or_default().to_string(),
                ctx["changedType"].as_str().unwrap_or_default().to_string(),
            ));
        }
        batches.push((
            sync_type,
            m.int("currentBatch").unwrap_or_default(),
            m.int("totalBatch").unwrap_or_default(),
        ));
    }
}

/// The next change notification: (groupKey, changeType).
async fn next_change(c: &mut RawClient) -> anyhow::Result<(String, String)> {
    let m = next(c).await?;
    anyhow::ensure!(
        m.type_name == "ConfigFuzzyWatchChangeNotifyRequest",
        "expected a change notification, got {m:?}"
    );
    Ok((
        m.str("groupKey").unwrap_or_default().to_string(),
        m.str("changeType").unwrap_or_default().to_string(),
    ))
}

fn pair(k: &str, t: &str) -> (String, String) {
    (k.to_string(), t.to_string())
}

async fn remove(server: &TestServer, ns: &str, g: &str, d: &str) -> anyhow::Result<()> {
    let key = ConfigKey::parse(Some(ns), g, d)?;
    server
        .service
        .remove(
            &Caller::internal(),
            &key,
            None,
            &nacelle_service::WriteNote::by("test"),
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn sync_in_batches_then_added_changed_removed_and_cancel() -> TestResult {
    let server = TestServer::start(GrpcOptions::default()).await?;
    for i in 0..45 {
        server
            .publish("", "G", &format!("app-{i:02}"), "v1")
            .await?;
    }
    server.publish("", "G", "other", "v1").await?;
    server.publish("", "H", "app-h", "v1").await?;
    server.publish("dev", "G", "app-dev", "v1").await?;
    let mut c = server.raw().await?;
    c.setup("10.0.0.1").await?;

    // The client already holds app-00 and a key that is gone.
    let r = watch(
        &mut c,
        &[],
        ">>G>>app-*",
        "WATCH",
        &["app-00+G", "app-zz+G"],
        true,
    )
    .await?;
    assert_eq!(r.type_name, "ConfigFuzzyWatchResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(200), Some(0))
    );
    let (keys, batches) = read_sync(&mut c).await?;
    let mut expected: BTreeSet<(String, String)> = (1..45)
        .map(|i| pair(&format!("app-{i:02}+G"), "ADD_CONFIG"))
        .collect();
    expected.insert(pair("app-zz+G", "DELETE_CONFIG"));
    assert_eq!(keys, expected);
    // 45 entries in batches of 20: 1/3, 2/3, 3/3.
    assert_eq!(
        batches,
        (1..=3)
            .map(|i| ("FUZZY_WATCH_INIT_NOTIFY".to_string(), i, 3))
            .collect::<Vec<_>>()
    );

    // A key created after the watch, changed, removed.
    server.publish("", "G", "app-new", "v1").await?;
    assert_eq!(next_change(&mut c).await?, pair("app-new+G", "ADD_CONFIG"));
    server.publish("", "G", "app-new", "v2").await?;
    assert_eq!(
        next_change(&mut c).await?,
        pair("app-new+G", "CONFIG_CHANGED")
    );
    remove(&server, "", "G", "app-new").await?;
    assert_eq!(
        next_change(&mut c).await?,
        pair("app-new+G", "DELETE_CONFIG")
    );
    // Keys the pattern does not cover (another dataId, group, namespace) send nothing.
    server.publish("", "G", "other", "v2").await?;
    server.publish("", "H", "app-h", "v2").await?;
    server.publish("dev", "G", "app-dev", "v2").await?;
    server.publish("", "G", "app-01", "v2").await?;
    assert_eq!(
        next_change(&mut c).await?,
        pair("app-01+G", "CONFIG_CHANGED")
    );

    // A second pattern, the default namespace spelled `public`: group keys carry it back.
    let r = watch(&mut c, &[], "public>>H>>*", "WATCH", &[], true).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    let (keys, _) = read_sync(&mut c).await?;
    assert_eq!(keys, BTreeSet::from([pair("app-h+H+public", "ADD_CONFIG")]));

    // CANCEL_WATCH: the first pattern no longer reports; the second still does.
    let r = watch(&mut c, &[], ">>G>>app-*", "CANCEL_WATCH", &[], false).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    server.publish("", "G", "app-after-cancel", "v1").await?;
    server.publish("", "H", "marker", "v1").await?;
    assert_eq!(
        next_change(&mut c).await?,
        pair("marker+H+public", "ADD_CONFIG")
    );
    assert_eq!(
        server
            .service
            .listeners(&Caller::internal())?
            .watched_patterns(),
        1
    );

    // A re-sync (not initializing) of a pattern already watched: only the difference, no
    // closing message. The client holds app-h and a stale key.
    let r = watch(
        &mut c,
        &[],
        "public>>H>>*",
        "WATCH",
        &["app-h+H+public", "marker+H+public", "stale+H+public"],
        false,
    )
    .await?;
    assert_eq!(r.int("resultCode"), Some(200));
    let m = next(&mut c).await?;
    assert_eq!(m.str("syncType"), Some("FUZZY_WATCH_DIFF_SYNC_NOTIFY"));
    assert_eq!(
        m.body["contexts"],
        json!([{"groupKey": "stale+H+public", "changedType": "DELETE_CONFIG"}])
    );
    server.publish("", "H", "marker", "v2").await?;
    assert_eq!(
        next_change(&mut c).await?,
        pair("marker+H+public", "CONFIG_CHANGED")
    );
    assert_eq!(
        server
            .service
            .listeners(&Caller::internal())?
            .watched_patterns(),
        1,
        "replaced, not added"
    );
    Ok(())
}

#[tokio::test]
async fn limits_and_bad_requests_answer_as_nacos_does() -> TestResult {
    let limits = Limits {
        max_watch_patterns: 2,
        max_pattern_keys: 3,
        ..Limits::default()
    };
    let server = TestServer::start_with_limits(GrpcOptions::default(), limits).await?;
    for d in ["a1", "a2", "a3", "a4", "a5"] {
        server.publish("", "G", d, "v1").await?;
    }
    let mut c = server.raw().await?;
    c.setup("10.0.0.1").await?;

    // More keys than the match limit: Nacos's 50311, the watch in place over the first 3.
    let r = watch(&mut c, &[], ">>G>>a*", "WATCH", &[], true).await?;
    assert_eq!(r.type_name, "ConfigFuzzyWatchResponse");
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode"), r.str("message")),
        (
            Some(500),
            Some(50311),
            Some("fuzzy watch pattern matched count over limit")
        )
    );
    let (keys, _) = read_sync(&mut c).await?;
    assert_eq!(
        keys,
        ["a1+G", "a2+G", "a3+G"]
            .into_iter()
            .map(|k| pair(k, "ADD_CONFIG"))
            .collect()
    );
    // A removal frees a place; a key beyond the limit is not reported until then.
    server.publish("", "G", "a6", "v1").await?;
    remove(&server, "", "G", "a1").await?;
    assert_eq!(next_change(&mut c).await?, pair("a1+G", "DELETE_CONFIG"));
    server.publish("", "G", "a7", "v1").await?;
    assert_eq!(next_change(&mut c).await?, pair("a7+G", "ADD_CONFIG"));

    // Pattern limit: a second pattern passes, a third is 50310; watching one again is fine.
    let r = watch(&mut c, &[], ">>G>>b*", "WATCH", &[], true).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    read_sync(&mut c).await?;
    let r = watch(&mut c, &[], ">>G>>c*", "WATCH", &[], true).await?;
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode"), r.str("message")),
        (
            Some(500),
            Some(50310),
            Some("fuzzy watch pattern over limit")
        )
    );
    let r = watch(&mut c, &[], ">>G>>b*", "WATCH", &[], false).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    assert_eq!(
        server
            .service
            .listeners(&Caller::internal())?
            .watched_patterns(),
        2
    );

    // Bad input: Nacos's 400 with the reason.
    for (pattern, watch_type, why) in [
        ("G>>a*", "WATCH", "expected namespace>>group>>dataId"),
        (">>G>>a*b", "WATCH", "invalid fuzzy watch dataId pattern"),
        ("*>>G>>*", "WATCH", "namespace cannot be a wildcard"),
        (">>G>>*", "LISTEN", "invalid watchType"),
    ] {
        let r = watch(&mut c, &[], pattern, watch_type, &[], true).await?;
        assert_eq!(
            (r.int("resultCode"), r.int("errorCode")),
            (Some(500), Some(400)),
            "{pattern} {watch_type}: {r:?}"
        );
        assert!(
            r.str("message").unwrap_or_default().contains(why),
            "{pattern}: {r:?}"
        );
    }
    let r = c
        .call_raw("ConfigFuzzyWatchRequest", b"{not json".to_vec())
        .await?;
    assert_eq!(r.int("errorCode"), Some(502));
    Ok(())
}

/// base64 of 32 bytes: the token secret of the test server.
const SECRET: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

#[tokio::test]
async fn only_keys_the_caller_may_read_are_listed_or_notified() -> TestResult {
    let server = TestServer::start(GrpcOptions::default()).await?;
    let svc = &server.service;
    svc.access().configure_auth(AuthConfig::on(SECRET, 18_000)?);
    let admin = Caller::internal();
    let admin = svc.access().admin(&admin)?;
    admin.create_user("reader", "reader-password").await?;
    admin.add_role("readers", "reader").await?;
    admin
        .add_permission(PermissionRecord {
            role: "readers".into(),
            resource: ":G:config/pub-*".into(),
            action: "r".into(),
        })
        .await?;
    for d in ["pub-1", "pub-2", "secret-1"] {
        server.publish("", "G", d, "v1").await?;
    }
    let token = svc
        .access()
        .login("reader", "reader-password", &Caller::internal())
        .await?
        .token;
    let auth = [("accessToken", token.as_str())];
    let mut c = server.raw().await?;
    c.setup("10.0.0.1").await?;

    // Without credentials: Nacos's 403.
    let r = watch(&mut c, &[], ">>G>>*", "WATCH", &[], true).await?;
    assert_eq!(
        (r.int("resultCode"), r.int("errorCode")),
        (Some(500), Some(403)),
        "{r:?}"
    );
    assert_eq!(
        server
            .service
            .listeners(&Caller::internal())?
            .watched_patterns(),
        0
    );

    let r = watch(&mut c, &auth, ">>G>>*", "WATCH", &["secret-1+G"], true).await?;
    assert_eq!(r.int("resultCode"), Some(200), "{r:?}");
    let (keys, _) = read_sync(&mut c).await?;
    // secret-1 is neither listed nor confirmed: the client is told it is not there.
    assert_eq!(
        keys,
        BTreeSet::from([
            pair("pub-1+G", "ADD_CONFIG"),
            pair("pub-2+G", "ADD_CONFIG"),
            pair("secret-1+G", "DELETE_CONFIG"),
        ])
    );
    server.publish("", "G", "secret-2", "v1").await?;
    server.publish("", "G", "secret-1", "v2").await?;
    server.publish("", "G", "pub-3", "v1").await?;
    assert_eq!(next_change(&mut c).await?, pair("pub-3+G", "ADD_CONFIG"));
    Ok(())
}

#[tokio::test]
async fn a_closed_connection_leaves_no_pattern_behind() -> TestResult {
    let server = TestServer::start(GrpcOptions::default()).await?;
    server.publish("", "G", "a", "v1").await?;
    let mut c = server.raw().await?;
    c.setup("10.0.0.1").await?;
    for p in [">>G>>*", ">>*>>a"] {
        let r = watch(&mut c, &[], p, "WATCH", &[], true).await?;
        assert_eq!(r.int("resultCode"), Some(200));
        read_sync(&mut c).await?;
    }
    assert_eq!(
        server
            .service
            .listeners(&Caller::internal())?
            .watched_patterns(),
        2
    );
    c.close_stream();
    let deadline = Instant::now() + SOON;
    while server
        .service
        .listeners(&Caller::internal())?
        .watched_patterns()
        > 0
    {
        anyhow::ensure!(Instant::now() < deadline, "patterns left after the close");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A change after the close reaches nobody and breaks nothing.
    server.publish("", "G", "a", "v2").await?;
    let mut again = server.raw().await?;
    again.setup("10.0.0.2").await?;
    let r = watch(&mut again, &[], ">>G>>*", "WATCH", &["a+G"], true).await?;
    assert_eq!(r.int("resultCode"), Some(200));
    let (keys, _) = read_sync(&mut again).await?;
    assert!(keys.is_empty(), "it holds the only key: {keys:?}");
    Ok(())
}
