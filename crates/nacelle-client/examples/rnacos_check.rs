//! Runs the SDK against a Nacos-protocol server and prints PASS/FAIL per item; exits 1 on a
//! failure. Used by `scripts/rnacos-client-check.sh` against r-nacos:
//! `RNACOS_CHECK_SERVER=127.0.0.1:8848 RNACOS_CHECK_USER=admin RNACOS_CHECK_PASSWORD=…
//! cargo run -p nacelle-client --example rnacos_check`.

use std::future::Future;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use nacelle_client::{Client, ClientError, Format, GroupEvent, PublishOptions, TokenPlacement};

/// How long a push or a poll may take to show a change.
const WAIT: Duration = Duration::from_secs(15);

async fn within<T>(what: &str, f: impl Future<Output = Option<T>>) -> Result<T> {
    tokio::time::timeout(WAIT, f)
        .await
        .with_context(|| format!("no {what} within {WAIT:?}"))?
        .with_context(|| format!("{what}: stream ended"))
}

#[tokio::main]
async fn main() -> Result<()> {
    let server = std::env::var("RNACOS_CHECK_SERVER").unwrap_or_else(|_| "127.0.0.1:8848".into());
    let user = std::env::var("RNACOS_CHECK_USER").unwrap_or_else(|_| "admin".into());
    let password = std::env::var("RNACOS_CHECK_PASSWORD").unwrap_or_else(|_| "admin".into());
    // Unique names, so a rerun on the same data directory starts clean.
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let group = format!("CHECK_{run}");
    let client = Client::builder()
        .server_addrs([server.as_str()])
        .credentials(&user, &password)
        // r-nacos's open API reads `Authorization` without its `Bearer` scheme, so the
        // token goes as Nacos's `accessToken` parameter, which it reads.
        .http_token(TokenPlacement::QueryParameter)
        .group_poll_interval(Duration::from_millis(500))
        .build()
        .await?;
    let mut failed = 0;
    let mut report = |item: &str, r: Result<String>| match r {
        Ok(note) => println!(
            "PASS  {item}{}",
            if note.is_empty() {
                note
            } else {
                format!(" ({note})")
            }
        ),
        Err(e) => {
            failed += 1;
            println!("FAIL  {item}: {e:#}");
        }
    };
    let g = group.as_str();

    report(
        "login (credentials, then a gRPC call)",
        async {
            ensure!(
                client.get((g, "absent")).await?.is_none(),
                "an absent key was found"
            );
            Ok(String::new())
        }
        .await,
    );

    report(
        "login refused for a wrong password",
        async {
            let bad = Client::builder()
                .server_addrs([server.as_str()])
                .credentials(&user, "wrong-password")
                .build()
                .await?;
            match bad.get((g, "absent")).await {
                Err(ClientError::Auth(_)) | Err(ClientError::Forbidden(_)) => Ok(String::new()),
                other => bail!("expected an auth error, got {other:?}"),
            }
        }
        .await,
    );

    report(
        "publish with type, get",
        async {
            client
                .publish_with((g, "app.yaml"), "a: 1\n", &PublishOptions::typed("yaml"))
                .await?;
            let c = client
                .get((g, "app.yaml"))
                .await?
                .context("published key missing")?;
            ensure!(c.content == "a: 1\n", "content {:?}", c.content);
            ensure!(c.content_type == "yaml", "type {:?}", c.content_type);
            Ok(format!("md5 {}", c.md5))
        }
        .await,
    );

    report(
        "compare-and-set publish",
        async {
            let c = client.get((g, "app.yaml")).await?.context("missing")?;
            let cas = |md5: &str| PublishOptions {
                cas_md5: Some(md5.into()),
                ..PublishOptions::typed("yaml")
            };
            client
                .publish_with((g, "app.yaml"), "a: 2\n", &cas(&c.md5))
                .await?;
            match client
                .publish_with((g, "app.yaml"), "a: 3\n", &cas(&c.md5))
                .await
            {
                Err(ClientError::CasConflict) => {}
                other => bail!("a stale md5 was not refused: {other:?}"),
            }
            let now = client.get((g, "app.yaml")).await?.context("missing")?;
            ensure!(now.content == "a: 2\n", "content {:?}", now.content);
            Ok(String::new())
        }
        .await,
    );

    report(
        "tagged variant",
        async {
            let tagged = PublishOptions {
                tag: Some("canary".into()),
                ..Default::default()
            };
            client
                .publish_with((g, "tagged"), "t: formal\n", &PublishOptions::default())
                .await?;
            client
                .publish_with((g, "tagged"), "t: canary\n", &tagged)
                .await?;
            let t = client
                .get_tagged((g, "tagged"), "canary")
                .await?
                .context("tag variant missing")?;
            ensure!(t.content == "t: canary\n", "tag content {:?}", t.content);
            let formal = client
                .get((g, "tagged"))
                .await?
                .context("formal config missing")?;
            ensure!(
                formal.content == "t: formal\n",
                "the tagged publish replaced the formal config (now {:?})",
                formal.content
            );
            Ok(String::new())
        }
        .await,
    );

    report(
        "remove",
        async {
            client.remove((g, "app.yaml")).await?;
            ensure!(client.get((g, "app.yaml")).await?.is_none(), "still there");
            client.remove((g, "never-there")).await?;
            Ok(String::new())
        }
        .await,
    );

    report(
        "listen: the first value of a key created after the listener",
        async {
            let mut w = client.watch((g, "new-key")).await?;
            ensure!(w.initial().is_none(), "exists already");
            client.publish((g, "new-key"), "n: 1\n").await?;
            let c = within("change", w.next_change()).await?;
            ensure!(
                c.config.map(|c| c.content).as_deref() == Some("n: 1\n"),
                "wrong first value"
            );
            client.publish((g, "new-key"), "n: 2\n").await?;
            let c = within("change", w.next_change()).await?;
            ensure!(
                c.config.map(|c| c.content).as_deref() == Some("n: 2\n"),
                "wrong change"
            );
            Ok(String::new())
        }
        .await,
    );

    report(
        "bind (typed hot reload)",
        async {
            client
                .publish_with(
                    (g, "bound.yaml"),
                    "pool: 1\n",
                    &PublishOptions::typed("yaml"),
                )
                .await?;
            let b = client
                .bind::<serde_json::Value>((g, "bound.yaml"), Format::Yaml)
                .await?;
            ensure!(b.get()["pool"] == 1, "first value {:?}", b.get());
            let mut versions = b.subscribe();
            client
                .publish_with(
                    (g, "bound.yaml"),
                    "pool: 2\n",
                    &PublishOptions::typed("yaml"),
                )
                .await?;
            tokio::time::timeout(WAIT, versions.wait_for(|_| b.get()["pool"] == 2))
                .await
                .context("no reload")??;
            Ok(String::new())
        }
        .await,
    );

    report(
        "namespace listing",
        async {
            let ns = client.admin().namespaces().await?;
            ensure!(!ns.is_empty(), "no namespace listed");
            Ok(format!("{} namespaces", ns.len()))
        }
        .await,
    );

    report(
        "watch_group (fuzzy watch or the polling fallback)",
        async {
            client.publish((g, "svc-a"), "a: 1\n").await?;
            let mut w = client.watch_group(g, "svc-*").await?;
            let mode = if w.is_server_push() {
                "server push"
            } else {
                "polling fallback"
            };
            match within("first event", w.next_event()).await? {
                GroupEvent::Added(c) if c.key.data_id == "svc-a" => {}
                other => bail!("expected svc-a added, got {other:?}"),
            }
            client.publish((g, "svc-b"), "b: 1\n").await?;
            match within("added key", w.next_event()).await? {
                GroupEvent::Added(c) if c.key.data_id == "svc-b" && c.content == "b: 1\n" => {}
                other => bail!("expected svc-b added with its content, got {other:?}"),
            }
            client.publish((g, "svc-b"), "b: 2\n").await?;
            match within("change", w.next_event()).await? {
                GroupEvent::Changed(c) if c.content == "b: 2\n" => {}
                other => bail!("expected svc-b changed, got {other:?}"),
            }
            client.remove((g, "svc-a")).await?;
            match within("removal", w.next_event()).await? {
                GroupEvent::Removed(k) if k.data_id == "svc-a" => {}
                other => bail!("expected svc-a removed, got {other:?}"),
            }
            Ok(mode.to_string())
        }
        .await,
    );

    if failed > 0 {
        println!("{failed} item(s) failed");
        std::process::exit(1);
    }
    println!("all items passed");
    Ok(())
}
