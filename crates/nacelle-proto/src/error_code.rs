//! Nacos's error codes (`errorCode` of a response with `resultCode 500`) and the messages
//! Nacos sends with them, as they appear on the wire.

/// `resultCode` of a successful response.
pub const RESULT_OK: i32 = 200;
/// `resultCode` of a failed response.
pub const RESULT_FAIL: i32 = 500;

/// The server is starting (cache not loaded) — `INVALID_SERVER_STATUS`.
pub const SERVER_NOT_READY: i32 = 300;
/// `ConfigQueryResponse.CONFIG_NOT_FOUND` (the same number as [`SERVER_NOT_READY`]; the
/// response type tells them apart).
pub const CONFIG_NOT_FOUND: i32 = 300;
/// The connection has not completed `ConnectionSetupRequest` — `UN_REGISTER`.
pub const UNREGISTERED: i32 = 301;
/// No handler for the request type — `NO_HANDLER`.
pub const NO_HANDLER: i32 = 302;
/// Invalid parameters (names, lengths, too many keys) — `INVALID_PARAM`.
pub const INVALID_PARAM: i32 = 400;
/// The caller may not make this call — `NO_RIGHT`.
pub const NO_RIGHT: i32 = 403;
/// A conflicting write — `CONFLICT`.
pub const CONFLICT: i32 = 409;
/// A server error, also a compare-and-set failure — `SERVER_ERROR`.
pub const SERVER_ERROR: i32 = 500;
/// Not supported (yet) — `NOT_IMPLEMENTED`.
pub const NOT_IMPLEMENTED: i32 = 501;
/// Too many failed logins (Nacelle's throttle; Nacos has none).
pub const TOO_MANY_REQUESTS: i32 = 429;
/// The body could not be parsed — `BAD_GATEWAY`.
pub const BAD_GATEWAY: i32 = 502;
/// Over a TPS (rate) limit: Nacos's `NacosException.OVER_THRESHOLD`, answered by its TPS
/// control with [`TPS_RESTRICTED_PREFIX`] before the reason.
pub const OVER_THRESHOLD: i32 = 503;
/// A fuzzy watch over the pattern limit — Nacos 3.0's `FUZZY_WATCH_PATTERN_OVER_LIMIT`.
pub const FUZZY_WATCH_PATTERN_OVER_LIMIT: i32 = 50310;
/// A fuzzy watch pattern matching more keys than the limit —
/// `FUZZY_WATCH_PATTERN_MATCH_COUNT_OVER_LIMIT`.
pub const FUZZY_WATCH_PATTERN_MATCH_COUNT_OVER_LIMIT: i32 = 50311;

/// The message of [`FUZZY_WATCH_PATTERN_OVER_LIMIT`].
pub const FUZZY_WATCH_PATTERN_OVER_LIMIT_MESSAGE: &str = "fuzzy watch pattern over limit";
/// The message of [`FUZZY_WATCH_PATTERN_MATCH_COUNT_OVER_LIMIT`].
pub const FUZZY_WATCH_PATTERN_MATCH_COUNT_OVER_LIMIT_MESSAGE: &str =
    "fuzzy watch pattern matched count over limit";
/// The message of [`SERVER_NOT_READY`].
pub const SERVER_NOT_READY_MESSAGE: &str = "Server is starting,please try later.";
/// The start of the message of an [`OVER_THRESHOLD`] answer (Nacos's TPS control puts the
/// reason after it).
pub const TPS_RESTRICTED_PREFIX: &str = "Tps Flow restricted:";
/// The message of [`UNREGISTERED`].
pub const UNREGISTERED_MESSAGE: &str = "Connection is unregistered.";
/// The message of [`NO_HANDLER`].
pub const NO_HANDLER_MESSAGE: &str = "RequestHandler Not Found";
/// The message of [`CONFIG_NOT_FOUND`].
pub const CONFIG_NOT_EXIST: &str = "config data not exist";
/// The message Nacos's gRPC publish handler sends on a compare-and-set failure (no space
/// after the comma, unlike HTTP v1).
pub const CAS_FAILED: &str = "Cas publish fail,server md5 may have changed.";
