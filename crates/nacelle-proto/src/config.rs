//! The config messages: query, publish, remove, batch listen, and the change push.
//!
//! Requests are read as Nacos reads them: every field may be missing or `null` (hence the
//! `Option`s), and on the wire an empty string means "not given" for `tag`, `casMd5` and
//! the `additionMap` values. A namespace is `tenant`; `""`, `public` and `null` all mean the
//! default one.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error_code::{CONFIG_NOT_EXIST, CONFIG_NOT_FOUND};
use crate::response::ResponseHead;
use crate::{lenient, messages, server_request, types};

/// The `module` of the config requests the server sends.
pub const MODULE_CONFIG: &str = "config";

/// Declares a request a client sends about one config (Nacos's `AbstractConfigRequest`):
/// `requestId`, `dataId`, `group` and `tenant`, then the message's own fields, each
/// `Option` and left out when absent; with `with_request_id` and a private `for_key`.
macro_rules! config_request {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($(#[$field_attr:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct $name {
            /// Echoed in the response.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub request_id: Option<String>,
            /// The config's data id.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub data_id: Option<String>,
            /// Its group.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub group: Option<String>,
            /// Its namespace.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub tenant: Option<String>,
            $($(#[$field_attr])* pub $field: $ty,)*
        }

        impl $name {
            /// A request about `(data_id, group, tenant)`, every other field absent.
            fn for_key(data_id: &str, group: &str, tenant: &str) -> Self {
                $name {
                    data_id: Some(data_id.to_string()),
                    group: Some(group.to_string()),
                    tenant: Some(tenant.to_string()),
                    ..Default::default()
                }
            }

            /// Sets the request id.
            pub fn with_request_id(mut self, id: impl Into<String>) -> Self {
                self.request_id = Some(id.into());
                self
            }
        }
    };
}

/// Declares requests that name one config, or its tagged variant, and nothing else: one
/// message under several type names.
macro_rules! key_requests {
    ($($(#[$attr:meta])* $name:ident;)*) => {$(
        config_request! {
            $(#[$attr])*
            pub struct $name {
                /// A tagged variant (blank: the formal config).
                #[serde(skip_serializing_if = "Option::is_none")]
                pub tag: Option<String>,
            }
        }

        impl $name {
            /// The request of `(data_id, group, tenant)`: its formal config.
            pub fn new(data_id: &str, group: &str, tenant: &str) -> Self {
                Self::for_key(data_id, group, tenant)
            }
        }
    )*};
}

key_requests! {
    /// `ConfigQueryRequest`: read one config.
    ConfigQueryRequest;
    /// `ConfigRemoveRequest`: remove one config (success also when nothing was stored).
    ConfigRemoveRequest;
}

/// `ConfigQueryResponse`. `lastModified` and `beta` are always written (the Rust SDK cannot
/// parse a response without them, failures included); `tag` never is (Python 3.x rejects
/// `null`/`""`, Rust rejects a bool), and is ignored when read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigQueryResponse {
    /// The common fields; not found is `errorCode 300`, `config data not exist`.
    #[serde(flatten)]
    pub head: ResponseHead,
    /// The config's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The data key of an encrypted config (`""` when not encrypted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_data_key: Option<String>,
    /// `text`, `yaml`, `json`, `properties`, `xml`, `html`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The md5 of the content (lowercase hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// Last modification, ms since the epoch (0 when failed).
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub last_modified: i64,
    /// Whether the content is a beta (gray) variant.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub beta: bool,
}

impl ConfigQueryResponse {
    /// A failed query with `head`: no content, `lastModified 0`, `beta false`.
    pub fn failed(head: ResponseHead) -> Self {
        ConfigQueryResponse {
            head,
            ..Default::default()
        }
    }

    /// Nacos's "not found": `resultCode 500, errorCode 300, config data not exist`.
    pub fn not_found(request_id: Option<String>) -> Self {
        Self::failed(ResponseHead::fail(
            CONFIG_NOT_FOUND,
            CONFIG_NOT_EXIST,
            request_id,
        ))
    }
}

/// The `additionMap` keys of a `ConfigPublishRequest` that Nacos reads.
pub mod addition {
    /// The content type (`yaml`, `json`, …).
    pub const TYPE: &str = "type";
    /// The publishing application.
    pub const APP_NAME: &str = "appName";
    /// Beta (gray) release to these client IPs, comma-separated.
    pub const BETA_IPS: &str = "betaIps";
    /// Publish a tagged variant.
    pub const TAG: &str = "tag";
    /// The publishing user.
    pub const SRC_USER: &str = "src_user";
    /// The data key of encrypted content.
    pub const ENCRYPTED_DATA_KEY: &str = "encryptedDataKey";
    /// The config's own tags, comma-separated.
    pub const CONFIG_TAGS: &str = "config_tags";
    /// Description.
    pub const DESC: &str = "desc";
    /// Usage note.
    pub const USE: &str = "use";
    /// Effect note.
    pub const EFFECT: &str = "effect";
    /// Schema.
    pub const SCHEMA: &str = "schema";
    /// Nacelle's publish message, recorded with the history row.
    pub const MESSAGE: &str = "message";
}

config_request! {
    /// `ConfigPublishRequest`: publish one config. A compare-and-set failure is answered
    /// `resultCode 500` with `Cas publish fail,server md5 may have changed.`.
    pub struct ConfigPublishRequest {
        /// The new content.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub content: Option<String>,
        /// Compare-and-set: publish only if the stored md5 is this (blank: unconditionally).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub cas_md5: Option<String>,
        /// Further fields, keyed by the names in [`addition`] (a `null` value reads as
        /// `None`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub addition_map: Option<HashMap<String, Option<String>>>,
    }
}

impl ConfigPublishRequest {
    /// A publish of `content` to `(data_id, group, tenant)`.
    pub fn new(data_id: &str, group: &str, tenant: &str, content: &str) -> Self {
        ConfigPublishRequest {
            content: Some(content.to_string()),
            ..Self::for_key(data_id, group, tenant)
        }
    }

    /// Sets one `additionMap` field (see [`addition`]).
    pub fn with_addition(mut self, key: &str, value: impl Into<String>) -> Self {
        self.addition_map
            .get_or_insert_with(HashMap::new)
            .insert(key.to_string(), Some(value.into()));
        self
    }

    /// One `additionMap` value, `None` when absent, `null` or blank.
    pub fn addition(&self, key: &str) -> Option<&str> {
        self.addition_map
            .as_ref()?
            .get(key)?
            .as_deref()
            .filter(|v| !v.trim().is_empty())
    }
}

/// `ConfigBatchListenRequest`: listen to keys (or, with `listen: false`, stop). `listen`
/// absent or `null` means true, as in the Java client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigBatchListenRequest {
    /// Echoed in the response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// `false`: stop listening to these keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<bool>,
    /// The keys, each with the md5 the client has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_listen_contexts: Option<Vec<ConfigListenContext>>,
}

impl ConfigBatchListenRequest {
    /// Listens (`listen: true`) or stops listening to `keys`.
    pub fn new(listen: bool, keys: Vec<ConfigListenContext>) -> Self {
        ConfigBatchListenRequest {
            request_id: None,
            listen: Some(listen),
            config_listen_contexts: Some(keys),
        }
    }
}

/// One key of a `ConfigBatchListenRequest` and the md5 the client has (`""`: none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigListenContext {
    /// The config's data id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_id: Option<String>,
    /// Its group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Its namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The md5 of the client's content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
}

impl ConfigListenContext {
    /// `(data_id, group, tenant)` with the client's `md5`.
    pub fn new(data_id: &str, group: &str, tenant: &str, md5: &str) -> Self {
        ConfigListenContext {
            data_id: Some(data_id.to_string()),
            group: Some(group.to_string()),
            tenant: Some(tenant.to_string()),
            md5: Some(md5.to_string()),
        }
    }
}

/// `ConfigChangeBatchListenResponse`: the listened keys whose md5 already differs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigChangeBatchListenResponse {
    /// The common fields.
    #[serde(flatten)]
    pub head: ResponseHead,
    /// The changed keys, named as the client named them.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub changed_configs: Vec<ConfigContext>,
}

/// A key as the client named it (its tenant spelling kept: clients rebuild their cache key
/// from it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigContext {
    /// The config's data id.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub data_id: String,
    /// Its group.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub group: String,
    /// Its namespace.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub tenant: String,
}

server_request! {
    /// `ConfigChangeNotifyRequest` (server → client, on the stream): a listened key
    /// changed; the client re-reads it and answers with any response type carrying the
    /// same `requestId`. Its `module` is `config`.
    pub struct ConfigChangeNotifyRequest {
        /// The changed config's data id.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub data_id: String,
        /// Its group.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub group: String,
        /// Its namespace, as the client spelled it when listening.
        #[serde(default, deserialize_with = "lenient::or_default")]
        pub tenant: String,
    }
}

impl ConfigChangeNotifyRequest {
    /// The push of a change of `(data_id, group, tenant)`.
    pub fn new(request_id: impl Into<String>, data_id: &str, group: &str, tenant: &str) -> Self {
        ConfigChangeNotifyRequest {
            request_id: Some(request_id.into()),
            headers: BTreeMap::new(),
            module: MODULE_CONFIG.to_string(),
            data_id: data_id.to_string(),
            group: group.to_string(),
            tenant: tenant.to_string(),
        }
    }
}

messages! {
    ConfigQueryRequest => types::CONFIG_QUERY_REQUEST,
    ConfigQueryResponse => types::CONFIG_QUERY_RESPONSE,
    ConfigPublishRequest => types::CONFIG_PUBLISH_REQUEST,
    ConfigRemoveRequest => types::CONFIG_REMOVE_REQUEST,
    ConfigBatchListenRequest => types::CONFIG_BATCH_LISTEN_REQUEST,
    ConfigChangeBatchListenResponse => types::CONFIG_BATCH_LISTEN_RESPONSE,
    ConfigChangeNotifyRequest => types::CONFIG_CHANGE_NOTIFY_REQUEST,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T>(v: &T)
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let json = serde_json::to_vec(v).expect("serialises");
        let back: T = serde_json::from_slice(&json).expect("parses back");
        assert_eq!(&back, v, "{}", String::from_utf8_lossy(&json));
    }

    #[test]
    fn every_config_message_round_trips() {
        round_trip(&ConfigQueryRequest::new("d", "G", "t").with_request_id("1"));
        round_trip(&ConfigQueryRequest::default());
        round_trip(&ConfigQueryResponse {
            head: ResponseHead::ok(Some("1".into())),
            content: Some("a: 1".into()),
            encrypted_data_key: Some(String::new()),
            content_type: Some("yaml".into()),
            md5: Some("abc".into()),
            last_modified: 1_700_000_000_000,
            beta: false,
        });
        round_trip(&ConfigQueryResponse::not_found(None));
        round_trip(
            &ConfigPublishRequest::new("d", "G", "", "x")
                .with_request_id("2")
                .with_addition(addition::TYPE, "yaml"),
        );
        round_trip(&ConfigRemoveRequest::new("d", "G", "public"));
        round_trip(&ConfigBatchListenRequest::new(
            true,
            vec![ConfigListenContext::new("d", "G", "", "")],
        ));
        round_trip(&ConfigChangeBatchListenResponse {
            head: ResponseHead::ok(None),
            changed_configs: vec![ConfigContext {
                data_id: "d".into(),
                group: "G".into(),
                tenant: "public".into(),
            }],
        });
        round_trip(&ConfigChangeNotifyRequest::new("5", "d", "G", ""));
    }

    #[test]
    fn the_server_s_messages_keep_their_bytes() {
        let json = serde_json::to_string(&ConfigQueryResponse::not_found(None)).expect("json");
        assert_eq!(
            json,
            r#"{"resultCode":500,"errorCode":300,"message":"config data not exist","success":false,"lastModified":0,"beta":false}"#
        );
        let json = serde_json::to_string(&ConfigChangeNotifyRequest::new("12", "d", "G", ""))
            .expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"12","headers":{},"module":"config","dataId":"d","group":"G","tenant":""}"#
        );
        let json = serde_json::to_string(&ConfigChangeBatchListenResponse {
            head: ResponseHead::ok(Some("l".into())),
            changed_configs: vec![ConfigContext {
                data_id: "d".into(),
                group: "G".into(),
                tenant: "".into(),
            }],
        })
        .expect("json");
        assert_eq!(
            json,
            r#"{"resultCode":200,"errorCode":0,"requestId":"l","success":true,"changedConfigs":[{"dataId":"d","group":"G","tenant":""}]}"#
        );
    }

    #[test]
    fn the_client_s_requests_keep_their_bytes() {
        let json =
            serde_json::to_string(&ConfigQueryRequest::new("d", "G", "t").with_request_id("1"))
                .expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"1","dataId":"d","group":"G","tenant":"t"}"#
        );
        let json = serde_json::to_string(&ConfigRemoveRequest {
            tag: Some("x".into()),
            ..ConfigRemoveRequest::new("d", "G", "")
        })
        .expect("json");
        assert_eq!(json, r#"{"dataId":"d","group":"G","tenant":"","tag":"x"}"#);
        let json = serde_json::to_string(
            &ConfigPublishRequest::new("d", "G", "", "x")
                .with_request_id("2")
                .with_addition(addition::TYPE, "yaml"),
        )
        .expect("json");
        assert_eq!(
            json,
            r#"{"requestId":"2","dataId":"d","group":"G","tenant":"","content":"x","additionMap":{"type":"yaml"}}"#
        );
    }

    #[test]
    fn requests_as_real_clients_send_them() {
        // Java 2.x / nacos-sdk-python 2.0.9: headers and module in the body, nulls.
        let q: ConfigQueryRequest = serde_json::from_str(
            r#"{"headers":{"notify":"false"},"dataId":"app.yaml","group":"DEFAULT_GROUP",
                "tenant":"","tag":null,"module":"config","requestId":"17"}"#,
        )
        .expect("parses");
        assert_eq!(
            q,
            ConfigQueryRequest {
                tag: None,
                ..ConfigQueryRequest::new("app.yaml", "DEFAULT_GROUP", "").with_request_id("17")
            }
        );
        let p: ConfigPublishRequest = serde_json::from_str(
            r#"{"headers":{},"dataId":"d","group":"G","tenant":null,"content":"x","casMd5":null,
                "additionMap":{"type":"yaml","tag":null,"betaIps":"","appName":"app"},
                "module":"config","requestId":"3","unknown":1}"#,
        )
        .expect("parses");
        assert_eq!(p.tenant, None);
        assert_eq!(p.cas_md5, None);
        assert_eq!(p.addition(addition::TYPE), Some("yaml"));
        assert_eq!(p.addition(addition::TAG), None);
        assert_eq!(p.addition(addition::BETA_IPS), None, "blank means absent");
        assert_eq!(p.addition(addition::APP_NAME), Some("app"));
        let l: ConfigBatchListenRequest = serde_json::from_str(
            r#"{"headers":{},"listen":true,"configListenContexts":[
                {"group":"G","md5":"","dataId":"d","tenant":"public"}],"module":"config","requestId":"4"}"#,
        )
        .expect("parses");
        assert_eq!(l.listen, Some(true));
        assert_eq!(
            l.config_listen_contexts,
            Some(vec![ConfigListenContext::new("d", "G", "public", "")])
        );
        let r: ConfigRemoveRequest =
            serde_json::from_str(r#"{"dataId":"d","group":"G","tag":""}"#).expect("parses");
        assert_eq!(r.tag.as_deref(), Some(""));
        assert!(serde_json::from_slice::<ConfigPublishRequest>(b"garbage").is_err());
    }

    #[test]
    fn responses_as_java_nacos_writes_them() {
        let q: ConfigQueryResponse = serde_json::from_str(
            r#"{"resultCode":200,"errorCode":0,"message":null,"requestId":"17","content":"a: 1",
                "encryptedDataKey":null,"contentType":"yaml","md5":"abc","lastModified":1700000000000,
                "isBeta":false,"beta":false,"tag":null,"success":true}"#,
        )
        .expect("parses");
        assert!(q.head.is_ok());
        assert_eq!(q.content.as_deref(), Some("a: 1"));
        assert_eq!(q.encrypted_data_key, None);
        assert_eq!(q.last_modified, 1_700_000_000_000);
        let n: ConfigChangeNotifyRequest = serde_json::from_str(
            r#"{"headers":{},"requestId":"8","dataId":"d","group":"G","tenant":null,"module":"config"}"#,
        )
        .expect("parses");
        assert_eq!((n.data_id.as_str(), n.tenant.as_str()), ("d", ""));
        let b: ConfigChangeBatchListenResponse = serde_json::from_str(
            r#"{"resultCode":200,"errorCode":0,"changedConfigs":null,"success":true}"#,
        )
        .expect("parses");
        assert!(b.changed_configs.is_empty());
    }
}
