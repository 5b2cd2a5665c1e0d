//! The bodies of the fuzz targets: each function takes arbitrary bytes and must never panic
//! (docs/security.md, "Fuzzing"). `fuzz/` (cargo-fuzz, nightly, outside the workspace) calls
//! them from its `fuzz_target!`s; `tests/corpus.rs` runs them over the committed seed corpus
//! (`fuzz/corpus/<target>/`) on stable, so `cargo test --workspace` exercises every target.
//!
//! # Layout
//! One function per target, named as the target: [`listening_configs`], [`form`],
//! [`grpc_frames`], [`proto_json`], [`gray_rule`], [`jwt`], [`permission`]; [`TARGETS`]
//! lists them.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use nacelle_core::auth::{action_grants, pattern_matches, Action};
use nacelle_core::caller::{Caller, Labels, Protocol};
use nacelle_core::gray::GrayRule;
use nacelle_proto::{cluster, config, connection, Message, Payload};
use nacelle_service::auth::jwt;

/// A fuzz target: its name (the directory of its corpus) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("listening_configs", listening_configs),
    ("form", form),
    ("grpc_frames", grpc_frames),
    ("proto_json", proto_json),
    ("gray_rule", gray_rule),
    ("jwt", jwt),
    ("permission", permission),
];

/// The HTTP long poll's `Listening-Configs` parser.
pub fn listening_configs(data: &[u8]) {
    nacelle_http::fuzzing::listening_configs(data);
}

/// Form/query decoding of every HTTP handler's parameters (and the encoder's round trip).
pub fn form(data: &[u8]) {
    nacelle_http::fuzzing::form(data);
}

/// The gRPC message framing over HTTP/2 DATA frames, and the protobuf `Payload`.
pub fn grpc_frames(data: &[u8]) {
    nacelle_grpc::fuzzing::frames(data);
}

/// The JSON body of every request type a server reads: the first byte picks the type, the
/// rest is the body. What parses must serialise again.
pub fn proto_json(data: &[u8]) {
    let Some((first, body)) = data.split_first() else {
        return;
    };
    let body = body.to_vec();
    match first % 11 {
        0 => parse::<config::ConfigQueryRequest>(body),
        1 => parse::<config::ConfigPublishRequest>(body),
        2 => parse::<config::ConfigRemoveRequest>(body),
        3 => parse::<config::ConfigBatchListenRequest>(body),
        4 => parse::<config::ConfigChangeNotifyRequest>(body),
        5 => parse::<connection::ServerCheckRequest>(body),
        6 => parse::<connection::HealthCheckRequest>(body),
        7 => parse::<connection::ConnectionSetupRequest>(body),
        8 => parse::<connection::ClientDetectionRequest>(body),
        9 => parse::<cluster::ConfigChangeClusterSyncRequest>(body),
        _ => {
            let payload = Payload::new("ConfigQueryRequest", body);
            // Any body: the early-error path reads only its request id; a client reads
            // the head of any answer.
            std::hint::black_box(payload.request_id());
            std::hint::black_box(payload.head().is_ok());
        }
    }
}

fn parse<M: Message>(body: Vec<u8>) {
    let payload = Payload::new(M::TYPE, body);
    if let Ok(msg) = payload.parse::<M>() {
        assert!(serde_json::to_vec(&msg).is_ok(), "{} serialises", M::TYPE);
    }
}

/// Gray rules as stored and as published: the first byte picks the type (`beta`, `tag`,
/// `tagv2`, or a raw type name before a newline), the rest is the expression. A rule that
/// parses is matched against a caller with labels, and its stored form parses again to
/// the same rule.
pub fn gray_rule(data: &[u8]) {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let (kind, expr) = match first % 5 {
        0 => ("beta", text.as_ref()),
        1 => ("tag", text.as_ref()),
        2 => ("tagv2", text.as_ref()),
        3 => ("percent", text.as_ref()),
        _ => text.split_once('\n').unwrap_or((text.as_ref(), "")),
    };
    let Ok(rule) = GrayRule::parse(kind, expr) else {
        return;
    };
    let mut labels = BTreeMap::new();
    labels.insert("env".to_string(), "gray".to_string());
    labels.insert("AppName".to_string(), "fuzz".to_string());
    let caller = Caller {
        labels: Labels::new(labels),
        ..Caller::anonymous(Protocol::Grpc, Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))))
    };
    std::hint::black_box(rule.matches(&caller, Some("fuzz")));
    let again = GrayRule::parse(rule.kind(), &rule.expr());
    assert_eq!(
        again.as_ref().ok(),
        Some(&rule),
        "stored form of {kind} {expr:?}"
    );
}

/// The token secret of the `jwt` target (32 bytes: HS256, as Nacos picks by length).
pub const JWT_KEY: &[u8; 32] = b"nacelle-fuzz-token-secret-32-byt";
/// The "now" the `jwt` target verifies at (epoch seconds).
pub const JWT_NOW: i64 = 1_700_000_000;

/// Token verification (`accessToken`, `Authorization: Bearer`) on arbitrary text; a token
/// that verifies carries claims that, signed again, verify to the same claims.
pub fn jwt(data: &[u8]) {
    let token = String::from_utf8_lossy(data);
    if let Ok(claims) = jwt::verify(JWT_KEY, &token, JWT_NOW) {
        let again = jwt::sign(JWT_KEY, &claims);
        assert_eq!(
            jwt::verify(JWT_KEY, &again, JWT_NOW).ok(),
            Some(claims),
            "re-signed claims"
        );
    }
}

/// Permission patterns (`<ns>:<group>:config/<dataId>` with `*`) and stored actions: the
/// input is a pattern, a newline, a resource, a newline, an action. Besides not panicking:
/// every pattern matches itself, `*` matches everything, and a pattern without `*` matches
/// only its own text.
pub fn permission(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let pattern = parts.next().unwrap_or("");
    let resource = parts.next().unwrap_or("");
    let action = parts.next().unwrap_or("");
    let matched = pattern_matches(pattern, resource);
    if !pattern.contains('*') {
        assert_eq!(matched, pattern == resource, "{pattern:?} ~ {resource:?}");
    }
    assert!(
        pattern_matches(pattern, pattern),
        "{pattern:?} matches itself"
    );
    assert!(pattern_matches("*", resource));
    std::hint::black_box((
        action_grants(action, Action::Read),
        action_grants(action, Action::Write),
    ));
}
