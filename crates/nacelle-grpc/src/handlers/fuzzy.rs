//! `ConfigFuzzyWatchRequest` → `ConfigFuzzyWatchResponse` (Nacos 3.0's fuzzy watch).
//!
//! `WATCH` watches the keys the pattern covers through the connection's service watch
//! (which owns the limits, the listing and the read filter), then the connection sends
//! the sync batches; `CANCEL_WATCH` stops. Nacos's answers: over the pattern limit
//! `50310 fuzzy watch pattern over limit` (nothing watched); more keys than the match limit
//! `50311 fuzzy watch pattern matched count over limit` — the watch is in place over the
//! first keys, as in Nacos.

use std::collections::HashSet;
use std::sync::Arc;

use nacelle_core::{Caller, ConfigKey, CoreError};
use nacelle_proto::error_code as code;
use nacelle_proto::fuzzy::{self, ConfigFuzzyWatchRequest, ConfigFuzzyWatchResponse};
use nacelle_proto::{Payload, ResponseHead};
use nacelle_service::PatternError;

use crate::connection::Connection;
use crate::errors::fail_head;
use crate::wire::{self, RequestMeta};

pub(super) fn handle(
    conn: &Arc<Connection>,
    caller: &Caller,
    _meta: &RequestMeta,
    req: ConfigFuzzyWatchRequest,
) -> Payload {
    let request_id = req.request_id.clone();
    let head = match apply(conn, caller, req) {
        Ok(()) => ResponseHead::ok(request_id),
        Err(Refused::TooManyPatterns) => ResponseHead::fail(
            code::FUZZY_WATCH_PATTERN_OVER_LIMIT,
            code::FUZZY_WATCH_PATTERN_OVER_LIMIT_MESSAGE,
            request_id,
        ),
        Err(Refused::TooManyKeys) => ResponseHead::fail(
            code::FUZZY_WATCH_PATTERN_MATCH_COUNT_OVER_LIMIT,
            code::FUZZY_WATCH_PATTERN_MATCH_COUNT_OVER_LIMIT_MESSAGE,
            request_id,
        ),
        Err(Refused::Core(e)) => fail_head(&e, request_id),
    };
    wire::message(&ConfigFuzzyWatchResponse { head })
}

enum Refused {
    TooManyPatterns,
    TooManyKeys,
    Core(CoreError),
}

fn apply(
    conn: &Arc<Connection>,
    caller: &Caller,
    req: ConfigFuzzyWatchRequest,
) -> Result<(), Refused> {
    let pattern = req.group_key_pattern.unwrap_or_default();
    match req.watch_type.as_deref().unwrap_or(fuzzy::WATCH) {
        fuzzy::WATCH => {
            // A received key that is not a valid group key cannot be one the server
            // reported: it is left out of the comparison (the client keeps it).
            let received: HashSet<ConfigKey> = req
                .received_group_keys
                .unwrap_or_default()
                .iter()
                .filter_map(|k| fuzzy::parse_group_key(k))
                .filter_map(|(d, g, t)| ConfigKey::parse(Some(&t), &g, &d).ok())
                .collect();
            match conn.watch_pattern(caller, &pattern, &received, req.initializing) {
                Ok(w) if w.truncated => Err(Refused::TooManyKeys),
                Ok(_) => Ok(()),
                Err(PatternError::TooManyPatterns { .. }) => Err(Refused::TooManyPatterns),
                Err(PatternError::Core(e)) => Err(Refused::Core(e)),
            }
        }
        fuzzy::CANCEL_WATCH => conn
            .unwatch_pattern(&pattern)
            .map(|_| ())
            .map_err(Refused::Core),
        other => Err(Refused::Core(CoreError::invalid(format!(
            "invalid watchType : {other} (WATCH or CANCEL_WATCH)"
        )))),
    }
}
