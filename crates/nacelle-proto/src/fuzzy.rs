//! Nacos 3.0's config fuzzy watch: a client watches every key matching a pattern
//! (`ConfigFuzzyWatchRequest`); the server answers at once, then sends the keys the
//! pattern matches in batches (`ConfigFuzzyWatchSyncRequest`) and, later, one
//! `ConfigFuzzyWatchChangeNotifyRequest` per key added to or removed from the match.
//!
//! Facts from Nacos 3.0.3 (`api/…/config/remote/request/ConfigFuzzyWatch*.java`,
//! `common/…/FuzzyGroupKeyPattern.java`, `config/…/utils/GroupKey2.java`):
//! - a pattern is `namespace>>group>>dataId`; the namespace is matched exactly (blank means
//!   the default one), group and dataId are each `*`, `x*`, `*x`, `*x*` or exact;
//! - a key is named by its *group key* `dataId+group[+tenant]` with `+` → `%2B` and
//!   `%` → `%25` inside each part ([`group_key`], [`parse_group_key`]);
//! - the Java field `isInitializing` travels as `initializing` (Jackson drops the `is` of a
//!   boolean getter); both spellings are read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::MODULE_CONFIG;
use crate::response::ResponseHead;
use crate::{lenient, messages, server_request, types};

/// The separator of a pattern's three parts.
pub const PATTERN_SPLITTER: &str = ">>";
/// `watchType`: start (or refresh) watching a pattern.
pub const WATCH: &str = "WATCH";
/// `watchType`: stop watching a pattern.
pub const CANCEL_WATCH: &str = "CANCEL_WATCH";
/// A change type: the key now matches (created, or first reported).
pub const ADD_CONFIG: &str = "ADD_CONFIG";
/// A change type: the key no longer exists (or no longer matches).
pub const DELETE_CONFIG: &str = "DELETE_CONFIG";
/// A change type: the key's content changed (Nacos 3.0 sends it for a key that entered
/// the match, as it cannot tell a creation from an update; Nacelle for an update).
pub const CONFIG_CHANGED: &str = "CONFIG_CHANGED";
/// `syncType` of the batches answering a request with `initializing: true`.
pub const INIT_NOTIFY: &str = "FUZZY_WATCH_INIT_NOTIFY";
/// `syncType` of the message that ends an initial sync (no `contexts`, batches 0/0).
pub const FINISH_INIT_NOTIFY: &str = "FINISH_FUZZY_WATCH_INIT_NOTIFY";
/// `syncType` of the batches answering a request with `initializing: false` (a re-sync).
pub const DIFF_SYNC_NOTIFY: &str = "FUZZY_WATCH_DIFF_SYNC_NOTIFY";
/// Keys per `ConfigFuzzyWatchSyncRequest` (Nacos's `nacos.config.push.batchSize`, 20).
pub const SYNC_BATCH_SIZE: usize = 20;

/// The group key of `(data_id, group, tenant)`: `dataId+group`, plus `+tenant` when the
/// tenant is not empty, with `+` and `%` escaped inside each part.
pub fn group_key(data_id: &str, group: &str, tenant: &str) -> String {
    fn push(out: &mut String, part: &str) {
        for c in part.chars() {
            match c {
                '+' => out.push_str("%2B"),
                '%' => out.push_str("%25"),
                c => out.push(c),
            }
        }
    }
    let mut out = String::with_capacity(data_id.len() + group.len() + tenant.len() + 2);
    push(&mut out, data_id);
    out.push('+');
    push(&mut out, group);
    if !tenant.is_empty() {
        out.push('+');
        push(&mut out, tenant);
    }
    out
}

/// A group key's parts: `(data_id, group, tenant)` (`""` when it has none); `None` when it
/// is not a group key (one part, a fourth part, a bad escape, an empty group), as Nacos's
/// `GroupKey2.parseKey` refuses it.
pub fn parse_group_key(key: &str) -> Option<(String, String, String)> {
    let mut parts: Vec<String> = vec![String::new()];
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '+' => {
                if parts.len() == 3 {
                    return None;
                }
                parts.push(String::new());
            }
            '%' => {
                let escaped = match (chars.next(), chars.next()) {
                    (Some('2'), Some('B')) => '+',
                    (Some('2'), Some('5')) => '%',
                    _ => return None,
                };
                parts.last_mut()?.push(escaped);
            }
            c => parts.last_mut()?.push(c),
        }
    }
    let mut it = parts.into_iter();
    let (data_id, group) = (it.next()?, it.next()?);
    if group.is_empty() {
        return None;
    }
    Some((data_id, group, it.next().unwrap_or_default()))
}

/// The pattern `namespace>>group>>data_id` (Nacos's `FuzzyGroupKeyPattern.generatePattern`
/// writes `public` for a blank namespace; Nacelle reads both as the default one).
pub fn pattern(namespace: &str, group: &str, data_id: &str) -> String {
    format!("{namespace}{PATTERN_SPLITTER}{group}{PATTERN_SPLITTER}{data_id}")
}

/// `ConfigFuzzyWatchRequest` (unary): watch (`WATCH`) or stop watching (`CANCEL_WATCH`)
/// the keys matching `groupKeyPattern`. `receivedGroupKeys` are the keys the client already
/// knows (on a re-send after a reconnect); the server's sync reports only the difference.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigFuzzyWatchRequest {
    /// Echoed in the response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// `namespace>>group>>dataId`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_key_pattern: Option<String>,
    /// Group keys the client holds for this pattern.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::or_default"
    )]
    pub received_group_keys: Option<Vec<String>>,
    /// [`WATCH`] or [`CANCEL_WATCH`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch_type: Option<String>,
    /// Whether this is the client's first request for the pattern (the sync then ends with
    /// a [`FINISH_INIT_NOTIFY`] message).
    #[serde(alias = "isInitializing", deserialize_with = "lenient::flag")]
    pub initializing: bool,
    /// `config`, as Java clients write it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
}

/// `ConfigFuzzyWatchResponse`: nothing but the common fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFuzzyWatchResponse {
    /// The common fields.
    #[serde(flatten)]
    pub head: ResponseHead,
}

/// One key of a sync batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FuzzyWatchContext {
    /// The key's group key.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub group_key: String,
    /// [`ADD_CONFIG`] or [`DELETE_CONFIG`] (Nacos's field is `changedType` here and
    /// `changeType` in the change notification).
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub changed_type: String,
}

server_request! {
    /// `ConfigFuzzyWatchSyncRequest` (server → client, stream): batch `currentBatch` of
    /// `totalBatch` (from 1) of a sync, or, with `syncType` [`FINISH_INIT_NOTIFY`], the end of
    /// an initial sync (no `contexts`, `0`/`0`).
    pub struct ConfigFuzzyWatchSyncRequest {
        /// The pattern, as the client sent it.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub group_key_pattern: String,
        /// The keys of this batch; absent in a [`FINISH_INIT_NOTIFY`].
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "lenient::or_default"
        )]
        pub contexts: Option<Vec<FuzzyWatchContext>>,
        /// [`INIT_NOTIFY`], [`DIFF_SYNC_NOTIFY`] or [`FINISH_INIT_NOTIFY`].
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub sync_type: String,
        /// How many batches the sync has.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub total_batch: u32,
        /// This batch's number, from 1.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub current_batch: u32,
    }
}

impl ConfigFuzzyWatchSyncRequest {
    /// Batch `current` of `total` of a sync of `pattern`.
    pub fn batch(
        request_id: impl Into<String>,
        pattern: &str,
        sync_type: &str,
        contexts: Vec<FuzzyWatchContext>,
        total: u32,
        current: u32,
    ) -> Self {
        ConfigFuzzyWatchSyncRequest {
            request_id: Some(request_id.into()),
            headers: BTreeMap::new(),
            module: MODULE_CONFIG.to_string(),
            group_key_pattern: pattern.to_string(),
            contexts: Some(contexts),
            sync_type: sync_type.to_string(),
            total_batch: total,
            current_batch: current,
        }
    }

    /// The end of the initial sync of `pattern`.
    pub fn finish(request_id: impl Into<String>, pattern: &str) -> Self {
        ConfigFuzzyWatchSyncRequest {
            contexts: None,
            ..Self::batch(request_id, pattern, FINISH_INIT_NOTIFY, Vec::new(), 0, 0)
        }
    }
}

server_request! {
    /// `ConfigFuzzyWatchChangeNotifyRequest` (server → client, stream): one key matching a
    /// watched pattern changed.
    pub struct ConfigFuzzyWatchChangeNotifyRequest {
        /// The key's group key.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub group_key: String,
        /// [`ADD_CONFIG`], [`CONFIG_CHANGED`] or [`DELETE_CONFIG`].
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub change_type: String,
    }
}

impl ConfigFuzzyWatchChangeNotifyRequest {
    /// The notification of `change_type` for `group_key`.
    pub fn new(request_id: impl Into<String>, group_key: String, change_type: &str) -> Self {
        ConfigFuzzyWatchChangeNotifyRequest {
            request_id: Some(request_id.into()),
            headers: BTreeMap::new(),
            module: MODULE_CONFIG.to_string(),
            group_key,
            change_type: change_type.to_string(),
        }
    }
}

/// `ConfigFuzzyWatchSyncResponse`: the client's ack of a sync batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFuzzyWatchSyncResponse {
    /// The common fields.
    #[serde(flatten)]
    pub head: ResponseHead,
}

/// `ConfigFuzzyWatchChangeNotifyResponse`: the client's ack of a change notification.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFuzzyWatchChangeNotifyResponse {
    /// The common fields.
    #[serde(flatten)]
    pub head: ResponseHead,
}

messages! {
    ConfigFuzzyWatchRequest => types::CONFIG_FUZZY_WATCH_REQUEST,
    ConfigFuzzyWatchResponse => types::CONFIG_FUZZY_WATCH_RESPONSE,
    ConfigFuzzyWatchSyncRequest => types::CONFIG_FUZZY_WATCH_SYNC_REQUEST,
    ConfigFuzzyWatchSyncResponse => types::CONFIG_FUZZY_WATCH_SYNC_RESPONSE,
    ConfigFuzzyWatchChangeNotifyRequest => types::CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_REQUEST,
    ConfigFuzzyWatchChangeNotifyResponse => types::CONFIG_FUZZY_WATCH_CHANGE_NOTIFY_RESPONSE,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_keys_escape_and_parse_as_nacos_does() {
        assert_eq!(group_key("a+b", "G%", ""), "a%2Bb+G%25");
        assert_eq!(group_key("d", "G", "ns"), "d+G+ns");
        assert_eq!(
            parse_group_key("a%2Bb+G%25"),
            Some(("a+b".into(), "G%".into(), String::new()))
        );
        assert_eq!(
            parse_group_key("d+G+ns"),
            Some(("d".into(), "G".into(), "ns".into()))
        );
        assert_eq!(parse_group_key("d"), None);
        assert_eq!(parse_group_key("d+"), None);
        assert_eq!(parse_group_key("a+b+c+d"), None);
        assert_eq!(parse_group_key("a%2+b"), None);
    }

    #[test]
    fn a_java_request_reads() {
        let r: ConfigFuzzyWatchRequest = serde_json::from_str(
            r#"{"headers":{},"groupKeyPattern":"public>>DEFAULT_GROUP>>app*",
                "receivedGroupKeys":["app.yaml+DEFAULT_GROUP+public"],"watchType":"WATCH",
                "initializing":true,"module":"config","requestId":"9"}"#,
        )
        .expect("parses");
        assert!(r.initializing);
        assert_eq!(r.watch_type.as_deref(), Some(WATCH));
        assert_eq!(r.received_group_keys.map(|k| k.len()), Some(1));
        let r: ConfigFuzzyWatchRequest = serde_json::from_str(
            r#"{"groupKeyPattern":"a>>b>>c","isInitializing":true,"receivedGroupKeys":null}"#,
        )
        .expect("parses");
        assert!(r.initializing);
        assert_eq!(r.received_group_keys, None);
    }

    #[test]
    fn the_server_s_messages_keep_their_bytes() {
        let json = serde_json::to_string(&ConfigFuzzyWatchSyncRequest::finish("f-1", "p>>G>>*"))
            .expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"f-1","headers":{},"module":"config","groupKeyPattern":"p>>G>>*","syncType":"FINISH_FUZZY_WATCH_INIT_NOTIFY","totalBatch":0,"currentBatch":0}"#
        );
        let json = serde_json::to_string(&ConfigFuzzyWatchChangeNotifyRequest::new(
            "3",
            group_key("d", "G", ""),
            ADD_CONFIG,
        ))
        .expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"3","headers":{},"module":"config","groupKey":"d+G","changeType":"ADD_CONFIG"}"#
        );
    }
}
