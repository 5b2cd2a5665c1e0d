//! The 1.x long-polling listener over real HTTP: immediate answers, holds, wake-ups,
//! timeouts, the no-hangup header, tenant echo, fan-out to 1000 held polls, shutdown; each
//! test run on SQLite, MariaDB and PostgreSQL (`per_backend!`).

use std::time::{Duration, Instant};

use nacelle_testkit::server::TestServer;
use nacelle_testkit::{listening_configs, md5, per_backend, Backend, TestResult};

const LISTENER: &str = "/nacos/v1/cs/configs/listener";

async fn poll(
    s: &TestServer,
    listening: &str,
    timeout_ms: Option<u64>,
    extra: &[(&str, &str)],
) -> TestResult<(u16, String)> {
    let reply = s.api.long_poll(listening, timeout_ms, extra).await?;
    Ok((reply.status, reply.body))
}

/// A server whose shortest hold is 1 s, so timeout paths are quick to test.
async fn quick_server(backend: Backend) -> TestResult<TestServer> {
    Ok(TestServer::start_with_on(backend, |s| {
        s.long_poll_min_hold = Duration::from_millis(1000)
    })
    .await?)
}

per_backend!(stale_md5_is_answered_at_once);
async fn stale_md5_is_answered_at_once(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("", "DEFAULT_GROUP", "app", "v1").await?;
    let started = Instant::now();
    let lc = listening_configs(&[("app", "DEFAULT_GROUP", &md5("v0"), None)]);
    let (status, body) = poll(&s, &lc, Some(30_000), &[]).await?;
    assert_eq!(status, 200);
    assert_eq!(body, "app%02DEFAULT_GROUP%01\n");
    println!("stale md5 answered in {:?}", started.elapsed());

    // Up to date (and a missing key with md5 "") → nothing changed; without the timeout
    // header the answer is immediate and empty.
    let lc = listening_configs(&[
        ("app", "DEFAULT_GROUP", &md5("v1"), None),
        ("missing", "DEFAULT_GROUP", "", None),
    ]);
    let (status, body) = poll(&s, &lc, None, &[]).await?;
    assert_eq!((status, body.as_str()), (200, ""));
    // A listener whose md5 is set for a config that does not exist is told it changed.
    let lc = listening_configs(&[("missing", "DEFAULT_GROUP", &md5("x"), None)]);
    let (_, body) = poll(&s, &lc, None, &[]).await?;
    assert_eq!(body, "missing%02DEFAULT_GROUP%01\n");
    Ok(())
}

per_backend!(held_poll_is_released_by_a_publish_to_its_key);
async fn held_poll_is_released_by_a_publish_to_its_key(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("dev", "G", "watched", "v1").await?;
    let lc = listening_configs(&[("watched", "G", &md5("v1"), Some("dev"))]);
    let waiter = {
        let http = s.http.clone();
        let url = s.url(LISTENER);
        let lc = lc.clone();
        tokio::spawn(async move {
            let resp = http
                .post(url)
                .header("Long-Pulling-Timeout", "30000")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?;
            let body = resp.text().await?;
            Ok::<_, reqwest::Error>((body, Instant::now()))
        })
    };
    wait_for_listeners(&s, "watched", "G", "dev", 1).await?;
    let sent = Instant::now();
    s.publish("dev", "G", "watched", "v2").await?;
    let (body, woke) = tokio::time::timeout(Duration::from_secs(10), waiter).await???;
    assert_eq!(body, "watched%02G%02dev%01\n");
    println!(
        "long poll released {:?} after the publish request was sent (publish round trip {:?})",
        woke.saturating_duration_since(sent),
        sent.elapsed()
    );
    Ok(())
}

/// Waits until the server reports `n` listeners of a key (so a poll is really held).
async fn wait_for_listeners(
    s: &TestServer,
    data_id: &str,
    group: &str,
    tenant: &str,
    n: usize,
) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = s.api.listeners(tenant, group, data_id).await?;
        assert_eq!(v["collectStatus"], 200);
        let count = v["lisentersGroupkeyStatus"]
            .as_object()
            .map(|m| m.len())
            .unwrap_or(0);
        // All test clients share 127.0.0.1, so the map has one entry once any is held.
        if (n == 0 && count == 0) || (n > 0 && count >= 1) {
            if n <= 1 {
                return Ok(());
            }
            let held = held_count(s).await?;
            if held >= n {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("listeners of {data_id} never reached {n}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Number of keys 127.0.0.1 listens to, as `GET /v1/cs/listener?ip=` reports.
async fn held_count(s: &TestServer) -> TestResult<usize> {
    let svc = s.server.as_ref().ok_or("stopped")?.service();
    Ok(svc.listeners(&nacelle_core::Caller::internal())?.count() as usize)
}

per_backend!(a_poll_on_another_key_is_not_woken);
async fn a_poll_on_another_key_is_not_woken(backend: Backend) -> TestResult {
    let s = quick_server(backend).await?;
    s.publish("", "G", "quiet", "q").await?;
    let lc = listening_configs(&[("quiet", "G", &md5("q"), None)]);
    let waiter = {
        let http = s.http.clone();
        let url = s.url(LISTENER);
        tokio::spawn(async move {
            let started = Instant::now();
            let resp = http
                .post(url)
                .header("Long-Pulling-Timeout", "1500")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?;
            Ok::<_, reqwest::Error>((resp.text().await?, started.elapsed()))
        })
    };
    wait_for_listeners(&s, "quiet", "G", "", 1).await?;
    s.publish("", "G", "noisy", "1").await?;
    s.publish("", "G", "noisy", "2").await?;
    let (body, held) = tokio::time::timeout(Duration::from_secs(20), waiter).await???;
    assert_eq!(
        body, "",
        "a change of another key must not answer this poll"
    );
    println!("poll held {held:?} and timed out with an empty body");
    Ok(())
}

per_backend!(timeout_answers_empty_200_and_no_hangup_answers_at_once);
async fn timeout_answers_empty_200_and_no_hangup_answers_at_once(backend: Backend) -> TestResult {
    let s = quick_server(backend).await?;
    s.publish("", "G", "t", "x").await?;
    let lc = listening_configs(&[("t", "G", &md5("x"), None)]);
    let started = Instant::now();
    let (status, body) = poll(&s, &lc, Some(1000), &[]).await?;
    assert_eq!((status, body.as_str()), (200, ""));
    println!("short-timeout poll answered after {:?}", started.elapsed());

    let started = Instant::now();
    let resp = s
        .http
        .post(s.url(LISTENER))
        .header("Long-Pulling-Timeout", "30000")
        .header("Long-Pulling-Timeout-No-Hangup", "true")
        .form(&[("Listening-Configs", lc.as_str())])
        .send()
        .await?;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await?, "");
    let elapsed = started.elapsed();
    println!("no-hangup poll answered in {elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(25),
        "no-hangup must not hold the poll"
    );
    Ok(())
}

per_backend!(tenant_is_echoed_as_the_client_sent_it);
async fn tenant_is_echoed_as_the_client_sent_it(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("", "G", "a", "1").await?;
    s.publish("ns", "G", "b", "1").await?;
    // Four fields with "public" (Python 1.0.0 style): echoed as "public", not dropped.
    let lc = listening_configs(&[("a", "G", "", Some("public"))]);
    let (_, body) = poll(&s, &lc, None, &[]).await?;
    assert_eq!(body, "a%02G%02public%01\n");
    // Four fields with an empty tenant: no tenant in the answer.
    let lc = listening_configs(&[("a", "G", "", Some(""))]);
    let (_, body) = poll(&s, &lc, None, &[]).await?;
    assert_eq!(body, "a%02G%01\n");
    // Node style: three fields plus a separate tenant form field.
    let lc = listening_configs(&[("b", "G", "", None)]);
    let (_, body) = poll(&s, &lc, None, &[("tenant", "ns")]).await?;
    assert_eq!(body, "b%02G%01\n");
    // Unicode and reserved characters are URL-encoded like Java's URLEncoder.
    s.publish("", "组", "配置.yaml", "1").await?;
    let lc = listening_configs(&[("配置.yaml", "组", "", None)]);
    let (_, body) = poll(&s, &lc, None, &[]).await?;
    assert_eq!(body, "%E9%85%8D%E7%BD%AE.yaml%02%E7%BB%84%01\n");
    Ok(())
}

per_backend!(delete_wakes_the_listeners_of_the_key);
async fn delete_wakes_the_listeners_of_the_key(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("", "G", "doomed", "x").await?;
    let lc = listening_configs(&[("doomed", "G", &md5("x"), None)]);
    let waiter = {
        let http = s.http.clone();
        let url = s.url(LISTENER);
        tokio::spawn(async move {
            http.post(url)
                .header("Long-Pulling-Timeout", "30000")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?
                .text()
                .await
        })
    };
    wait_for_listeners(&s, "doomed", "G", "", 1).await?;
    let resp = s
        .http
        .delete(s.url("/nacos/v1/cs/configs?dataId=doomed&group=G"))
        .send()
        .await?;
    assert_eq!(resp.text().await?, "true");
    let body = tokio::time::timeout(Duration::from_secs(10), waiter).await???;
    assert_eq!(body, "doomed%02G%01\n");
    Ok(())
}

per_backend!(one_publish_releases_1000_held_polls);
async fn one_publish_releases_1000_held_polls(backend: Backend) -> TestResult {
    let s = TestServer::start_on(backend).await?;
    s.publish("", "G", "hot", "v1").await?;
    let lc = listening_configs(&[("hot", "G", &md5("v1"), None)]);
    const N: usize = 1000;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(N)
        .timeout(Duration::from_secs(60))
        .build()?;
    let mut waiters = Vec::with_capacity(N);
    for _ in 0..N {
        let http = http.clone();
        let url = s.url(LISTENER);
        let lc = lc.clone();
        waiters.push(tokio::spawn(async move {
            let resp = http
                .post(url)
                .header("Long-Pulling-Timeout", "30000")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?;
            let body = resp.text().await?;
            Ok::<_, reqwest::Error>((body, Instant::now()))
        }));
    }
    wait_for_listeners(&s, "hot", "G", "", N).await?;
    s.publish("", "G", "hot", "v2").await?;
    let acked = Instant::now();
    let mut delays = Vec::with_capacity(N);
    for w in waiters {
        let (body, woke) = tokio::time::timeout(Duration::from_secs(30), w).await???;
        assert_eq!(body, "hot%02G%01\n");
        delays.push(woke.saturating_duration_since(acked));
    }
    delays.sort();
    println!(
        "1000 held polls released: p50 {:?}, p99 {:?}, max {:?}",
        delays[N / 2],
        delays[N * 99 / 100],
        delays[N - 1]
    );
    assert_eq!(held_count(&s).await?, 0, "released polls must unsubscribe");
    Ok(())
}

per_backend!(shutdown_answers_held_polls);
async fn shutdown_answers_held_polls(backend: Backend) -> TestResult {
    let mut s = TestServer::start_on(backend).await?;
    s.publish("", "G", "k", "v").await?;
    let lc = listening_configs(&[("k", "G", &md5("v"), None)]);
    let waiter = {
        let http = s.http.clone();
        let url = s.url(LISTENER);
        tokio::spawn(async move {
            let resp = http
                .post(url)
                .header("Long-Pulling-Timeout", "60000")
                .form(&[("Listening-Configs", lc.as_str())])
                .send()
                .await?;
            Ok::<_, reqwest::Error>((resp.status().as_u16(), resp.text().await?))
        })
    };
    wait_for_listeners(&s, "k", "G", "", 1).await?;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(20), s.stop()).await??;
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), waiter).await???;
    assert_eq!((status, body.as_str()), (200, ""));
    println!(
        "graceful shutdown with a held poll took {:?}",
        started.elapsed()
    );
    Ok(())
}
