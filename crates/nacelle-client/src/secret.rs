//! Passwords and tokens kept out of every message: [`Secret`] (a redacted `Debug`, no
//! `Display`) and [`scrub`] for text a server answered.

/// What a redacted secret shows.
pub(crate) const REDACTED: &str = "<redacted>";

/// A password or token: its `Debug` shows [`REDACTED`], and it has no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, to send.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// `text` (something a server answered) with every occurrence of the non-empty `secrets`
/// replaced by [`REDACTED`]: a server that echoes a request must not put its credentials
/// into an error.
pub(crate) fn scrub(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        if out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    out
}
