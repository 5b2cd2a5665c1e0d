//! Domain types of Nacelle, shared by every other crate.
//!
//! # Layout
//! - [`key`]: the config key (namespace, group, dataId), namespace normalisation and the
//!   Nacos name rules. This is the only place where `public`/blank becomes `""`.
//! - [`model`]: config records, publish requests, history entries, namespaces, pages.
//! - [`rules`]: length and shape rules of metadata, content type and namespace names.
//! - [`content`]: content validation by type (json, yaml, xml, toml, properties) and its
//!   policy (`reject | warn | off`, globally and per namespace).
//! - [`structured`]: structured content (json, yaml, toml, properties) as JSON values, what
//!   a JSON Schema is checked against.
//! - [`store`]: the store's role traits (generated from one list of methods, [`store_roles!`]),
//!   `ConfigStore` (all of them) and the layer every method can be wrapped in once.
//! - [`gray`]: the gray model — rules (beta by IP/CIDR, tag, tagv2 label expressions),
//!   priorities and the first-match selection of a caller's variant.
//! - [`pattern`]: group patterns (`namespace>>group>>dataId`) of wildcard watches.
//! - [`auth`]: identities, Nacos's permission resources and patterns, the records of
//!   `users` / `roles` / `permissions`.
//! - [`change`]: change requests (reviewed multi-key changes) and review policies.
//! - [`audit`]: the audit trail's records (actions, events, chain entries, queries).
//! - [`webhook`]: webhooks and their durable deliveries (claimed with a lease).
//! - [`caller`]: who is asking ([`Caller`]) and the client-IP policy ([`TrustedProxies`]).
//! - [`error`]: typed errors shared by the store and the service.
//!
//! This crate knows nothing of HTTP, gRPC or SQL.

pub mod audit;
pub mod auth;
pub mod caller;
pub mod change;
pub mod content;
pub mod error;
pub mod gray;
pub mod key;
pub mod model;
pub mod pattern;
pub mod rollout;
pub mod rules;
pub mod store;
pub mod structured;
pub mod webhook;

pub use auth::{Action, AuthFailure, Identity};
pub use caller::{Caller, Labels, Protocol, TrustedProxies};
pub use content::{ContentError, ValidationMode, ValidationPolicy};
pub use error::{CoreError, StoreError};
pub use gray::{CohortDraw, GrayRule, GraySpec};
pub use key::{ConfigKey, ConfigType, NamespaceId, DEFAULT_GROUP};
pub use model::*;
pub use pattern::GroupPattern;
pub use store::{BatchItem, BatchOutcome, ConfigStore, SamePolicy};

/// Lowercase hex MD5 of the UTF-8 bytes of `content`, as Nacos computes it.
pub fn md5_hex(content: &[u8]) -> String {
    use md5::{Digest, Md5};
    hex::encode(Md5::digest(content))
}

/// Milliseconds since the Unix epoch, the time unit used throughout Nacelle.
pub fn now_millis() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_matches_known_values() {
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(md5_hex(b"hello"), "5d41402abc4b2a76b9719d911017c592");
        assert_eq!(
            md5_hex("中文".as_bytes()),
            "a7bac2239fcdcb3a067903d8077c4a07"
        );
    }
}
