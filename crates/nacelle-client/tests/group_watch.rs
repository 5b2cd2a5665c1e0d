//! `Client::watch_group` against a real Nacelle server, in both modes: the server's fuzzy
//! watch (pushed membership) and the polling fallback (forced by the option). Each shows a
//! key that existed, a key created after the watch (with its content), a change, a
//! removal, and that a key outside the pattern reports nothing (the next event is the
//! one made after it). Then a server restart with a key created while it was down.

mod common;

use common::{addr_of, start_on};

use std::time::Duration;

use anyhow::{Context, Result};
use nacelle_client::{Client, GroupEvent, GroupWatch, GroupWatchMode};
use nacelle_testkit::server::TestServer;
use nacelle_testkit::{free_port, Api, SOON};

async fn next(w: &mut GroupWatch) -> Result<GroupEvent> {
    tokio::time::timeout(SOON, w.next_event())
        .await
        .context("no group event within SOON")?
        .context("group watch ended")
}

fn added(e: &GroupEvent) -> Option<(&str, &str)> {
    match e {
        GroupEvent::Added(c) => Some((c.key.data_id.as_str(), c.content.as_str())),
        _ => None,
    }
}

#[tokio::test]
async fn both_modes_report_added_changed_and_removed_keys() -> Result<()> {
    for mode in [GroupWatchMode::Auto, GroupWatchMode::Polling] {
        let ts = TestServer::start().await?;
        let server = ts.server.as_ref().context("running")?;
        let client = Client::builder()
            .server(addr_of(server))
            .group_watch_mode(mode)
            .group_poll_interval(Duration::from_millis(100))
            .build()
            .await?;
        client.publish(("G", "svc-a"), "a: 1\n").await?;
        client.publish(("G", "other"), "o: 1\n").await?;

        let mut w = client.watch_group("G", "svc-*").await?;
        assert_eq!(w.is_server_push(), mode == GroupWatchMode::Auto, "{mode:?}");
        let e = next(&mut w).await?;
        assert_eq!(added(&e), Some(("svc-a", "a: 1\n")), "{mode:?}: {e:?}");

        client.publish(("G", "svc-b"), "b: 1\n").await?;
        let e = next(&mut w).await?;
        assert_eq!(added(&e), Some(("svc-b", "b: 1\n")), "{mode:?}: {e:?}");

        client.publish(("G", "other"), "o: 2\n").await?;
        client.publish(("H", "svc-h"), "h: 1\n").await?;
        client.publish(("G", "svc-b"), "b: 2\n").await?;
        match next(&mut w).await? {
            GroupEvent::Changed(c) => {
                assert_eq!(
                    (c.key.data_id.as_str(), c.content.as_str()),
                    ("svc-b", "b: 2\n")
                )
            }
            other => anyhow::bail!("{mode:?}: expected a change, got {other:?}"),
        }

        client.remove(("G", "svc-a")).await?;
        match next(&mut w).await? {
            GroupEvent::Removed(k) => assert_eq!(k.data_id, "svc-a"),
            other => anyhow::bail!("{mode:?}: expected a removal, got {other:?}"),
        }
        // Bad patterns are refused before anything is sent.
        assert!(client.watch_group("G", "a*b").await.is_err());
        assert!(client.watch_group("*", "a").await.is_err());
    }
    Ok(())
}

#[tokio::test]
async fn a_pushed_group_watch_is_re_sent_after_a_server_restart() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (http, grpc) = (free_port()?, free_port()?);
    let server = start_on(dir.path(), http, grpc).await?;
    let api = Api::new(server.http_addr)?;
    api.publish("", "G", "svc-a", "a: 1\n").await?;
    let client = Client::builder().server(addr_of(&server)).build().await?;
    let mut w = client.watch_group("G", "svc-*").await?;
    assert!(w.is_server_push());
    assert_eq!(added(&next(&mut w).await?), Some(("svc-a", "a: 1\n")));

    // Down: another server on the same data directory creates a key and goes.
    server.shutdown().await?;
    let other = start_on(dir.path(), 0, 0).await?;
    Api::new(other.http_addr)?
        .publish("", "G", "svc-new", "n: 1\n")
        .await?;
    other.shutdown().await?;

    let _server = start_on(dir.path(), http, grpc).await?;
    let e = next(&mut w).await?;
    assert_eq!(added(&e), Some(("svc-new", "n: 1\n")), "{e:?}");
    // And pushes work on the new connection.
    client.publish(("G", "svc-later"), "l: 1\n").await?;
    let e = next(&mut w).await?;
    assert_eq!(added(&e), Some(("svc-later", "l: 1\n")), "{e:?}");
    Ok(())
}
