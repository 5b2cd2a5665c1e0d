//! The access token every request of a run carries (`--access-token`), for measuring a
//! server with authentication on: HTTP requests send it as the `accessToken` parameter,
//! gRPC requests in `metadata.headers`, as Nacos clients do.

use std::sync::OnceLock;

static TOKEN: OnceLock<String> = OnceLock::new();

/// Sets the token of this run (once, before any request).
pub fn set(token: Option<String>) {
    if let Some(t) = token.filter(|t| !t.is_empty()) {
        // Set once at start; a second call keeps the first token.
        let _first_wins = TOKEN.set(t);
    }
}

/// The token of this run, if any.
pub fn token() -> Option<&'static str> {
    TOKEN.get().map(String::as_str)
}
