//! `/nacos/v1/cs/configs/listener`: the 1.x long-polling listener, and the listener
//! queries (`GET /v1/cs/configs/listener`, `GET /v1/cs/listener?ip=`).
//!
//! A held poll is one service [`Watch`] over its keys with one waiter; a change of any of
//! them wakes it. Only the waiters of the changed key are touched. The key limit, the
//! readiness check and subscribe-then-compare are the service's.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use nacelle_core::ConfigKey;
use nacelle_service::{ChangeEvent, Subscriber, WatchItem};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Notify;

use super::configs::no_cache;
use super::{json, key_from_params};
use crate::error::ApiError;
use crate::params::{java_url_encode, Params};
use crate::{observe, AppState};

const WORD_SEPARATOR: char = '\u{2}';
const LINE_SEPARATOR: char = '\u{1}';
/// The two separators as `java_url_encode` writes them.
const ENCODED_WORD_SEPARATOR: &str = "%02";
const ENCODED_LINE_SEPARATOR: &str = "%01";
/// Nacos answers this much before the client's timeout so the client never times out first.
const HOLD_MARGIN_MS: u64 = 500;
/// Up to this many keys in one poll, a key sent twice is found by a linear look-up.
const LINEAR_LOOKUP_MAX: usize = 16;

/// One record of `Listening-Configs`: the key, the md5 the client holds, and the record
/// the answer carries when the key changed, encoded when the poll is read — a change
/// releases thousands of polls at once, and the release only copies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListenItem {
    pub key: ConfigKey,
    pub md5: String,
    /// `dataId^Bgroup[^Btenant]^A` URL-encoded, with the names exactly as the client sent
    /// them so the answer echoes them unchanged; the tenant only when the record carried
    /// one (not a separate `tenant` parameter) that is not blank.
    pub answer: String,
}

/// Parses `Listening-Configs`: records `dataId^Bgroup^Bmd5[^Btenant]^A`. Records of three
/// fields take `tenant_param` (the Node client sends the namespace separately). A key sent
/// twice keeps its last record. (How many keys one poll may carry is the service's rule.)
pub(crate) fn parse_listening_configs(
    raw: &str,
    tenant_param: Option<&str>,
) -> Result<Vec<ListenItem>, ApiError> {
    let mut items: Vec<ListenItem> = Vec::new();
    // Where each key is in `items`, built only once a poll carries more keys than a
    // linear look-up handles well (most polls carry a handful).
    let mut seen: Option<HashMap<ConfigKey, usize>> = None;
    for record in raw.split(LINE_SEPARATOR) {
        if record.is_empty() {
            continue;
        }
        let mut fields = record.split(WORD_SEPARATOR);
        let mut field = [""; 4];
        let mut count = 0;
        for f in fields.by_ref().take(4) {
            field[count] = f;
            count += 1;
        }
        count += fields.count();
        // `echo` is the tenant written back in the answer: only what the record carried.
        let (data_id, group, md5, tenant, echo) = match count {
            3 => (field[0], field[1], field[2], tenant_param.unwrap_or(""), ""),
            4 => (field[0], field[1], field[2], field[3], field[3]),
            _ => {
                return Err(ApiError::Invalid(format!(
                    "invalid probeModify: record `{}` has {count} fields, expected 3 or 4",
                    record.escape_debug(),
                )))
            }
        };
        if md5.len() > 64 || !md5.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(ApiError::Invalid(format!(
                "invalid probeModify: md5 `{}` is not hex",
                md5.escape_debug()
            )));
        }
        let key = ConfigKey::parse(Some(tenant), group, data_id)
            .map_err(|e| ApiError::Invalid(format!("invalid probeModify: {e}")))?;
        let at = match &mut seen {
            Some(index) => index.get(&key).copied(),
            None => items.iter().position(|i| i.key == key),
        };
        let item = ListenItem {
            md5: md5.to_string(),
            answer: answer_record(data_id, group, echo),
            key,
        };
        match at {
            Some(i) => items[i] = item,
            None => {
                if let Some(index) = &mut seen {
                    index.insert(item.key.clone(), items.len());
                }
                items.push(item);
                if seen.is_none() && items.len() > LINEAR_LOOKUP_MAX {
                    seen = Some(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, it)| (it.key.clone(), i))
                            .collect(),
                    );
                }
            }
        }
    }
    if items.is_empty() {
        return Err(ApiError::Invalid(
            "invalid probeModify: Listening-Configs has no record".into(),
        ));
    }
    Ok(items)
}

/// The answer's record of one key: `dataId^Bgroup[^Btenant]^A` URL-encoded, part by part.
fn answer_record(data_id: &str, group: &str, tenant: &str) -> String {
    let mut out = String::with_capacity(data_id.len() + group.len() + tenant.len() + 3 * 3);
    java_url_encode(data_id, &mut out);
    out.push_str(ENCODED_WORD_SEPARATOR);
    java_url_encode(group, &mut out);
    if !tenant.trim().is_empty() {
        out.push_str(ENCODED_WORD_SEPARATOR);
        java_url_encode(tenant, &mut out);
    }
    out.push_str(ENCODED_LINE_SEPARATOR);
    out
}

/// The answer body: the record of each changed key, in the order the client listed them,
/// then a newline; empty when nothing changed.
pub(crate) fn changed_body(items: &[ListenItem], changed: &[ConfigKey]) -> String {
    let changed_items = || items.iter().filter(|i| changed.contains(&i.key));
    let room: usize = changed_items().map(|i| i.answer.len()).sum();
    if room == 0 {
        return String::new();
    }
    let mut out = String::with_capacity(room + 1);
    for item in changed_items() {
        out.push_str(&item.answer);
    }
    out.push('\n');
    out
}

/// Nacos's headers on a poll's answer: no caching, and the content type Nacos's servlet
/// writes.
static POLL_HEADERS: LazyLock<HeaderMap> = LazyLock::new(|| {
    let mut h = HeaderMap::with_capacity(4);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html;charset=UTF-8"),
    );
    no_cache(&mut h);
    h
});

/// The answer to a poll: Nacos's no-cache headers over the body. The headers are a copy
/// of one map built once (a copy runs less code than four inserts, and a change releases
/// thousands of polls at once).
fn poll_response(body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.headers_mut() = POLL_HEADERS.clone();
    resp
}

/// A held long poll, woken by the service when a watched key changes.
struct PollWaiter {
    wake: Notify,
    /// What woke it, under one lock (a change takes it once per waiter it wakes).
    woken: Mutex<Woken>,
}

#[derive(Default)]
struct Woken {
    changed: Vec<ConfigKey>,
    /// When the first change that woke it reached the hub (the release latency's start).
    first_change: Option<Instant>,
}

impl Subscriber for PollWaiter {
    fn notify(&self, event: &Arc<ChangeEvent>) {
        let mut woken = self.woken.lock();
        if !woken.changed.contains(&event.key) {
            woken.changed.push(event.key.clone());
        }
        woken.first_change.get_or_insert(event.committed_at);
        drop(woken);
        self.wake.notify_one();
    }

    /// The server is shutting down: the poll answers with what changed so far (nothing).
    fn close(&self) {
        self.wake.notify_one();
    }
}

/// `POST /nacos/v1/cs/configs/listener`, once [`direct`] has read its parameters.
async fn long_poll(st: &AppState, p: Params) -> Result<Response, ApiError> {
    let raw = p.required("Listening-Configs")?;
    let mut items = parse_listening_configs(raw, p.get("tenant"))?;
    let pairs: Vec<(ConfigKey, &str)> = items
        .iter()
        .map(|i| (i.key.clone(), i.md5.as_str()))
        .collect();
    let changed = st.service.changed(&p.caller, &pairs)?;
    drop(pairs);
    let timeout = match p.header("Long-Pulling-Timeout") {
        None => return Ok(poll_response(changed_body(&items, &changed))),
        Some(v) => v
            .trim()
            .parse::<u64>()
            .map_err(|_| ApiError::Invalid(format!("invalid Long-Pulling-Timeout header : {v}")))?,
    };
    let no_hangup = p
        .header("Long-Pulling-Timeout-No-Hangup")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !changed.is_empty() || no_hangup {
        return Ok(poll_response(changed_body(&items, &changed)));
    }
    let min_hold = st.options.long_poll_min_hold;
    let hold = Duration::from_millis(timeout.saturating_sub(HOLD_MARGIN_MS)).max(min_hold);

    // The held-poll limits are the service's, counted there (in all and per caller IP).
    let _held = st
        .service
        .hold_poll(&p.caller)
        .map_err(|e| ApiError::Unavailable(e.0))?;
    let waiter = Arc::new(PollWaiter {
        wake: Notify::new(),
        woken: Mutex::new(Woken::default()),
    });
    let watch = st.service.watch(&p.caller)?;
    let subscriber: Arc<dyn Subscriber> = waiter.clone();
    let added = watch.add(
        &p.caller,
        items
            .iter_mut()
            .map(|i| WatchItem {
                key: i.key.clone(),
                // The poll's answer needs no md5: it moves to the watch.
                md5: std::mem::take(&mut i.md5),
                subscriber: subscriber.clone(),
            })
            .collect(),
    )?;
    // A change may have landed between the first check and the subscription.
    if !added.changed.is_empty() {
        return Ok(poll_response(changed_body(&items, &added.changed)));
    }
    // Shutdown cancels the token and then tells every subscriber: a poll that finds the
    // token not cancelled now, after subscribing, is told. (One shared shutdown future per
    // held poll would register in, and leave, one shared waiter list on every release.)
    if st.service.shutdown_token().is_cancelled() {
        return Ok(poll_response(String::new()));
    }
    // The request's parameters and headers are freed now, not when the poll is released:
    // a release touches as little memory as it can (a change wakes thousands at once).
    drop(p);
    // The wake-up is checked first: a released poll then never polls its hold timer. A
    // wake-up with nothing changed is the shutdown's ([`PollWaiter::close`]).
    tokio::select! {
        biased;
        _ = waiter.wake.notified() => {
            let woken = std::mem::take(&mut *waiter.woken.lock());
            if let Some(at) = woken.first_change {
                st.service.metrics().long_poll_released(at.elapsed());
            }
            Ok(poll_response(changed_body(&items, &woken.changed)))
        }
        _ = tokio::time::sleep(hold) => Ok(poll_response(String::new())),
    }
}

/// `POST /nacos/v1/cs/configs/listener` as the connection hands it over
/// ([`crate::server`]), past the router and its middleware: one change releases thousands
/// of held polls at once, and every future a released poll is nested in is polled, and
/// its code fetched into the instruction cache, once per answer. The request is read by
/// the same extractor as every route's and observed as the router's layer observes every
/// other request ([`observe::observed`]).
pub(crate) async fn direct(st: AppState, req: Request) -> Response {
    let answer = async {
        match Params::from_request(req, &st).await {
            Ok(p) => long_poll(&st, p).await.into_response(),
            Err(e) => e.into_response(),
        }
    };
    let path = observe::RequestPath::Static(observe::LONG_POLL);
    observe::observed::<_, false>(&st, observe::LONG_POLL, "POST", path, answer).await
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListenerStatus {
    collect_status: u16,
    /// Nacos's field name, typo included.
    lisenters_groupkey_status: BTreeMap<String, String>,
}

/// `GET /nacos/v1/cs/configs/listener?dataId&group[&tenant]`: who listens to a key.
pub(crate) async fn listeners_of_key(
    State(st): State<AppState>,
    p: Params,
) -> Result<Response, ApiError> {
    let key = key_from_params(&p, "tenant")?;
    let status = ListenerStatus {
        collect_status: 200,
        lisenters_groupkey_status: st
            .service
            .listeners(&p.caller)?
            .of_key(&key)?
            .into_iter()
            .collect(),
    };
    Ok(json(&status))
}

/// `GET /nacos/v1/cs/listener?ip=`: what a client IP listens to.
pub(crate) async fn keys_of_ip(
    State(st): State<AppState>,
    p: Params,
) -> Result<Response, ApiError> {
    let ip = p.required("ip")?;
    let status = ListenerStatus {
        collect_status: 200,
        lisenters_groupkey_status: st
            .service
            .listeners(&p.caller)?
            .keys_of_ip(ip.trim())?
            .into_iter()
            .map(|(k, md5)| (k.group_key(), md5))
            .collect(),
    };
    Ok(json(&status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_three_and_four_field_records() {
        let raw = "a\u{2}G\u{2}abc\u{1}b\u{2}G\u{2}\u{2}dev\u{1}c\u{2}G\u{2}\u{2}\u{1}";
        let items = parse_listening_configs(raw, None).expect("valid");
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].key.tenant(), "");
        assert_eq!(items[1].key.tenant(), "dev");
        assert_eq!(items[1].answer, "b%02G%02dev%01");
        // A blank tenant in the record is not echoed.
        assert_eq!(items[2].answer, "c%02G%01");
        let items = parse_listening_configs("a\u{2}G\u{2}\u{1}", Some("ns")).expect("valid");
        assert_eq!(items[0].key.tenant(), "ns");
    }

    #[test]
    fn rejects_broken_records() {
        for raw in [
            "",
            "a\u{1}",
            "a\u{2}G\u{1}",
            "a\u{2}G\u{2}m\u{2}t\u{2}x\u{1}",
            "a b\u{2}G\u{2}\u{1}",
        ] {
            assert!(parse_listening_configs(raw, None).is_err(), "{raw:?}");
        }
        let twice = "d\u{2}G\u{2}\u{1}d\u{2}G\u{2}abc\u{1}";
        let items = parse_listening_configs(twice, None).expect("valid");
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].md5, "abc");
    }

    #[test]
    fn a_key_sent_twice_keeps_its_last_record_in_a_large_poll() {
        // Past LINEAR_LOOKUP_MAX keys the look-up switches to an index: keys sent before
        // and after the switch are still found.
        let n = LINEAR_LOOKUP_MAX * 3;
        let mut raw = String::new();
        for round in ["", "abc"] {
            for i in 0..n {
                raw.push_str(&format!("k{i}\u{2}G\u{2}{round}\u{1}"));
            }
        }
        let items = parse_listening_configs(&raw, None).expect("valid");
        assert_eq!(items.len(), n);
        for (i, item) in items.iter().enumerate() {
            assert_eq!(
                item.answer,
                format!("k{i}%02G%01"),
                "first-seen order is kept"
            );
            assert_eq!(item.md5, "abc", "{}", item.answer);
        }
    }

    #[test]
    fn answer_echoes_tenant_as_sent() {
        let raw = "a\u{2}G\u{2}\u{2}public\u{1}b\u{2}G\u{2}\u{1}";
        let items = parse_listening_configs(raw, None).expect("valid");
        let changed = vec![items[0].key.clone(), items[1].key.clone()];
        assert_eq!(
            changed_body(&items, &changed),
            "a%02G%02public%01b%02G%01\n"
        );
    }

    #[test]
    fn answer_encodes_each_changed_record_as_one_line() {
        let raw = "app:v1.yaml\u{2}G:x\u{2}\u{2}ns-1\u{1}same\u{2}G\u{2}\u{1}other\u{2}G\u{2}\u{1}";
        let items = parse_listening_configs(raw, None).expect("valid");
        // Only the changed keys, in the order the client listed them.
        let changed = vec![items[2].key.clone(), items[0].key.clone()];
        let mut expected = String::new();
        for record in ["app:v1.yaml\u{2}G:x\u{2}ns-1\u{1}", "other\u{2}G\u{1}"] {
            java_url_encode(record, &mut expected);
        }
        expected.push('\n');
        assert_eq!(changed_body(&items, &changed), expected);
        assert_eq!(expected, "app%3Av1.yaml%02G%3Ax%02ns-1%01other%02G%01\n");
        assert_eq!(changed_body(&items, &[]), "");
    }
}
