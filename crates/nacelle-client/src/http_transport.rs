//! The HTTP v1 transport (Nacos 1.x; `Transport::HttpLongPolling`): `GET`, `POST` and
//! `DELETE /nacos/v1/cs/configs`, and one long poll at a time on
//! `/nacos/v1/cs/configs/listener` carrying the whole listen set with the md5s the client
//! holds — so a change made while no server answered is seen by the first poll that
//! reaches one. The md5 a key is listened with is that of the content served (HTTP
//! clients hash what they get; Nacelle serves encrypted configs decrypted over HTTP).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use md5::{Digest, Md5};
use percent_encoding::percent_decode_str;
use tokio::sync::oneshot;

use crate::error::{ClientError, Result};
use crate::http::{self, Answer, Build};
use crate::key::Key;
use crate::metrics::MetricEvent;
use crate::options::ServerAddr;
use crate::shared::{lock, Config, PublishOptions, Refresh, Shared};

/// The servers to try: the one that answered last first.
fn order(shared: &Shared) -> (Vec<ServerAddr>, usize) {
    let all = &shared.opts.servers;
    let start = shared.http_server.load(Ordering::Relaxed) % all.len();
    let mut v = all[start..].to_vec();
    v.extend_from_slice(&all[..start]);
    (v, start)
}

/// One request with failover; remembers which server answered.
async fn send(shared: &Shared, kind: &'static str, build: Build<'_>) -> Result<Answer> {
    let started = Instant::now();
    let (servers, start) = order(shared);
    let result = http::send(shared, &servers, build).await;
    match &result {
        Ok(a) => {
            let index = (start + a.server) % shared.opts.servers.len();
            shared.http_server.store(index, Ordering::Relaxed);
            shared.http_up.store(true, Ordering::Relaxed);
        }
        Err(ClientError::Unavailable(m)) => {
            shared.http_up.store(false, Ordering::Relaxed);
            *lock(&shared.last_failure) = m.clone();
        }
        Err(_) => {}
    }
    shared.opts.metrics.record(MetricEvent::Request {
        kind,
        elapsed: started.elapsed(),
        ok: result.as_ref().is_ok_and(|a| a.status.is_success()),
    });
    result
}

fn md5_hex(s: &str) -> String {
    hex::encode(Md5::digest(s.as_bytes()))
}

pub(crate) async fn query(shared: &Shared, key: &Key, tag: Option<&str>) -> Result<Option<Config>> {
    let answer = send(shared, "query", &|http, base| {
        let mut q = key.v1_params();
        q.extend(tag.map(|t| ("tag", t)));
        http.get(format!("{base}/v1/cs/configs")).query(&q)
    })
    .await?;
    if answer.status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !answer.status.is_success() {
        return Err(answer.error(&shared.opts.servers));
    }
    let header = |name: &str| {
        answer
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content = String::from_utf8(answer.body.to_vec())
        .map_err(|_| ClientError::Protocol(format!("{key}: the content is not UTF-8")))?;
    Ok(Some(Config {
        key: key.clone(),
        md5: md5_hex(&content),
        content_type: header("Config-Type").unwrap_or_else(|| "text".into()),
        last_modified: header("Last-Modified")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        beta: header("isBeta").as_deref() == Some("true"),
        content,
    }))
}

pub(crate) async fn publish(
    shared: &Shared,
    key: &Key,
    content: &str,
    opts: &PublishOptions,
) -> Result<()> {
    let beta_ips = opts.beta_ips.join(",");
    let config_tags = opts.config_tags.join(",");
    let answer = send(shared, "publish", &|http, base| {
        let mut form = key.v1_params();
        form.push(("content", content));
        let optional = [
            ("type", opts.content_type.as_deref()),
            ("tag", opts.tag.as_deref()),
            ("appName", opts.app_name.as_deref()),
            ("desc", opts.desc.as_deref()),
            ("message", opts.message.as_deref()),
            (
                "config_tags",
                (!config_tags.is_empty()).then_some(config_tags.as_str()),
            ),
        ];
        form.extend(optional.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        let mut req = http.post(format!("{base}/v1/cs/configs")).form(&form);
        if let Some(cas) = &opts.cas_md5 {
            req = req.header("casMd5", cas);
        }
        if !beta_ips.is_empty() {
            req = req.header("betaIps", &beta_ips);
        }
        req
    })
    .await?;
    answer.ok_body(&shared.opts.servers).map(drop)
}

pub(crate) async fn remove(shared: &Shared, key: &Key, tag: Option<&str>) -> Result<()> {
    let answer = send(shared, "remove", &|http, base| {
        let mut q = key.v1_params();
        q.extend(tag.map(|t| ("tag", t)));
        http.delete(format!("{base}/v1/cs/configs")).query(&q)
    })
    .await?;
    answer.ok_body(&shared.opts.servers).map(drop)
}

/// `Listening-Configs`: `dataId ^B group ^B md5 [^B tenant] ^A` per key.
fn listening_configs(keys: &[(Key, String)]) -> String {
    let mut s = String::new();
    for (k, md5) in keys {
        s.push_str(&k.data_id);
        s.push('\u{2}');
        s.push_str(&k.group);
        s.push('\u{2}');
        s.push_str(md5);
        if !k.namespace.is_empty() {
            s.push('\u{2}');
            s.push_str(&k.namespace);
        }
        s.push('\u{1}');
    }
    s
}

/// The keys of a long poll's answer: URL-encoded `dataId ^B group [^B tenant] ^A …`.
fn changed_keys(body: &str) -> Vec<Key> {
    let decoded = percent_decode_str(body.trim()).decode_utf8_lossy();
    decoded
        .split('\u{1}')
        .filter(|r| !r.trim().is_empty())
        .filter_map(|r| {
            let mut parts = r.split('\u{2}');
            let data_id = parts.next()?;
            let group = parts.next()?;
            let tenant = parts.next().unwrap_or("");
            Some(Key::new(tenant, group, data_id))
        })
        .collect()
}

/// The long-poll loop: until shutdown.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut backoff = shared.opts.backoff_min;
    let hold_ms = shared.opts.long_poll_timeout.as_millis().to_string();
    loop {
        let keys: Vec<(Key, String)> = lock(&shared.listens)
            .iter()
            .map(|(k, e)| (k.clone(), e.md5.clone()))
            .collect();
        if keys.is_empty() {
            tokio::select! {
                () = shared.shutdown.cancelled() => return,
                () = shared.listen_changed.notified() => continue,
            }
        }
        let body = listening_configs(&keys);
        let build = |http: &reqwest::Client, base: &str| {
            http.post(format!("{base}/v1/cs/configs/listener"))
                .header("Long-Pulling-Timeout", hold_ms.as_str())
                .form(&[("Listening-Configs", body.as_str())])
        };
        let poll = send(&shared, "listen", &build);
        let answer = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            // A key added or dropped: poll again with the new set.
            () = shared.listen_changed.notified() => continue,
            a = poll => a,
        };
        let changed = match answer {
            Ok(a) if a.status.is_success() => {
                backoff = shared.opts.backoff_min;
                changed_keys(&a.text())
            }
            Ok(a) => {
                let e = a.error(&shared.opts.servers);
                tracing::warn!(error = %e, "long poll refused");
                sleep_or_stop(&shared, &mut backoff).await;
                continue;
            }
            Err(e) => {
                tracing::debug!(error = %e, "long poll failed");
                sleep_or_stop(&shared, &mut backoff).await;
                continue;
            }
        };
        // Every key the poll names was confirmed unless it changed.
        {
            let mut listens = lock(&shared.listens);
            for (k, md5) in &keys {
                if !changed.contains(k) {
                    if let Some(e) = listens.get_mut(k) {
                        if &e.md5 == md5 {
                            e.fresh = true;
                        }
                    }
                }
            }
        }
        // Re-read the changed keys through the refresh worker (in order with every other
        // read) and wait, so the next poll carries their new md5s.
        for key in changed {
            let (tx, rx) = oneshot::channel();
            let req = Refresh {
                key,
                attempt: 0,
                reply: Some(tx),
            };
            if shared.refresh_tx.send(req).is_err() {
                return;
            }
            match rx.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "re-reading a changed key failed"),
                Err(_) => return,
            }
        }
    }
}

async fn sleep_or_stop(shared: &Shared, backoff: &mut std::time::Duration) {
    tokio::select! {
        () = shared.shutdown.cancelled() => {}
        () = tokio::time::sleep(*backoff) => {}
    }
    *backoff = (*backoff * 2).min(shared.opts.backoff_max);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_records_and_answers() {
        let keys = vec![
            (Key::new("", "G", "a"), "m1".to_string()),
            (Key::new("dev", "G", "b"), String::new()),
        ];
        assert_eq!(
            listening_configs(&keys),
            "a\u{2}G\u{2}m1\u{1}b\u{2}G\u{2}\u{2}dev\u{1}"
        );
        assert_eq!(
            changed_keys("a%02G%01b%02G%02dev%01\n"),
            vec![Key::new("", "G", "a"), Key::new("dev", "G", "b")]
        );
        assert!(changed_keys("").is_empty());
    }
}
