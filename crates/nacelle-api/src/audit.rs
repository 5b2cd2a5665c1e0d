//! The audit trail's hash chain (docs/audit.md): the canonical encoding of an entry, its
//! SHA-256, and the verification walk — written once here, used by the server (the store
//! computes each hash when it appends, the service verifies) and by clients (`nacelle
//! audit verify` downloads the entries and checks them itself).
//!
//! # Encoding, version 1
//! The hash of an entry is the lowercase hex SHA-256 of these bytes:
//! ```text
//! "nacelle-audit-v1\n"
//! then, for each field in this order, <byte length in decimal> ":" <UTF-8 bytes> "\n":
//!   seq, time_ms, user, address, protocol, action, target, outcome, detail, change_id,
//!   prev_hash
//! ```
//! Integers are written in decimal without sign padding (`-` for negative); an absent
//! `change_id` is the empty string. `prev_hash` is the previous entry's `hash`, or
//! [`GENESIS_HASH`] (64 `0`s) for the first entry ever appended. Length prefixes make the
//! encoding unambiguous whatever a field contains.

use std::fmt;

use sha2::{Digest, Sha256};

/// The version tag that starts every encoded entry.
pub const ENCODING_V1: &str = "nacelle-audit-v1";

/// The `prev_hash` of the first entry of a chain.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The fields of one entry that its hash covers (all but the hash itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryFields<'a> {
    pub seq: i64,
    pub time_ms: i64,
    pub user: &'a str,
    pub address: &'a str,
    pub protocol: &'a str,
    pub action: &'a str,
    pub target: &'a str,
    pub outcome: &'a str,
    pub detail: &'a str,
    pub change_id: Option<i64>,
    pub prev_hash: &'a str,
}

/// The canonical bytes of `e` (encoding version 1).
pub fn encode(e: &EntryFields<'_>) -> Vec<u8> {
    let seq = e.seq.to_string();
    let time = e.time_ms.to_string();
    let change = e.change_id.map(|c| c.to_string()).unwrap_or_default();
    let fields: [&str; 11] = [
        &seq,
        &time,
        e.user,
        e.address,
        e.protocol,
        e.action,
        e.target,
        e.outcome,
        e.detail,
        &change,
        e.prev_hash,
    ];
    let mut out = Vec::with_capacity(64 + fields.iter().map(|f| f.len() + 8).sum::<usize>());
    out.extend_from_slice(ENCODING_V1.as_bytes());
    out.push(b'\n');
    for f in fields {
        out.extend_from_slice(f.len().to_string().as_bytes());
        out.push(b':');
        out.extend_from_slice(f.as_bytes());
        out.push(b'\n');
    }
    out
}

/// The hash of `e`: lowercase hex SHA-256 of [`encode`].
pub fn entry_hash(e: &EntryFields<'_>) -> String {
    let digest = Sha256::digest(encode(e));
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// What is wrong with the chain at one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The stored hash is not the hash of the stored fields: the entry was altered.
    Altered,
    /// The entry (and any up to `next`) is missing: `next` is the seq of the entry found
    /// after the gap.
    Missing { next: i64 },
    /// The entry's seq goes backwards or repeats.
    Reordered { previous: i64 },
    /// Its `prev_hash` is not the previous entry's hash (that one, or this link, was
    /// altered).
    BrokenLink,
    /// The chain ends before the head says it does: the newest entries were deleted.
    Truncated { head_seq: i64 },
    /// The last entry's hash is not the one the head recorded.
    HeadMismatch,
}

impl Problem {
    /// The problem's name as the server's and the CLI's JSON give it (`problem`): `Altered`,
    /// `Missing`, `Reordered`, `BrokenLink`, `Truncated`, `HeadMismatch`.
    pub fn name(&self) -> &'static str {
        match self {
            Problem::Altered => "Altered",
            Problem::Missing { .. } => "Missing",
            Problem::Reordered { .. } => "Reordered",
            Problem::BrokenLink => "BrokenLink",
            Problem::Truncated { .. } => "Truncated",
            Problem::HeadMismatch => "HeadMismatch",
        }
    }
}

/// The first bad entry of a chain: its seq (for a gap, the first missing seq) and what is
/// wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    pub seq: i64,
    pub problem: Problem,
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = self.seq;
        match &self.problem {
            Problem::Altered => write!(
                f,
                "entry {seq} was altered (its hash does not match its fields)"
            ),
            Problem::Missing { next } if *next == seq + 1 => write!(
                f,
                "entry {seq} is missing (the next entry, {next}, follows entry {})",
                seq - 1
            ),
            Problem::Missing { next } => write!(
                f,
                "entries {seq} to {} are missing (the next entry, {next}, follows entry {})",
                next - 1,
                seq - 1
            ),
            Problem::Reordered { previous } => write!(
                f,
                "entry {seq} is out of order (it follows entry {previous})"
            ),
            Problem::BrokenLink => write!(
                f,
                "entry {seq} does not link to the entry before it (prev_hash differs)"
            ),
            Problem::Truncated { head_seq } => write!(
                f,
                "entries {seq}..={head_seq} are missing (the chain ends before its head)"
            ),
            Problem::HeadMismatch => write!(
                f,
                "entry {seq} is not the entry the head recorded (hash differs)"
            ),
        }
    }
}

impl std::error::Error for Break {}

/// Walks a chain entry by entry from its anchor (the seq and hash of the last entry a
/// retention purge removed, `0` and [`GENESIS_HASH`] when none was), so a long chain can
/// be checked page by page.
#[derive(Debug, Clone)]
pub struct Verifier {
    seq: i64,
    hash: String,
    checked: u64,
}

impl Verifier {
    /// A walk starting after the anchor.
    pub fn new(anchor_seq: i64, anchor_hash: &str) -> Self {
        Verifier {
            seq: anchor_seq,
            hash: anchor_hash.to_string(),
            checked: 0,
        }
    }

    /// Checks the next entry (in seq order) whose stored hash is `hash`.
    pub fn check(&mut self, e: &EntryFields<'_>, hash: &str) -> Result<(), Break> {
        let expected = self.seq + 1;
        if e.seq < expected {
            return Err(Break {
                seq: e.seq,
                problem: Problem::Reordered { previous: self.seq },
            });
        }
        if e.seq > expected {
            return Err(Break {
                seq: expected,
                problem: Problem::Missing { next: e.seq },
            });
        }
        if entry_hash(e) != hash {
            return Err(Break {
                seq: e.seq,
                problem: Problem::Altered,
            });
        }
        if e.prev_hash != self.hash {
            return Err(Break {
                seq: e.seq,
                problem: Problem::BrokenLink,
            });
        }
        self.seq = e.seq;
        self.hash = hash.to_string();
        self.checked += 1;
        Ok(())
    }

    /// The seq of the last entry checked (the anchor before any).
    pub fn position(&self) -> i64 {
        self.seq
    }

    /// How many entries were checked.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// Ends the walk: the last entry must be the head's.
    pub fn finish(&self, head_seq: i64, head_hash: &str) -> Result<u64, Break> {
        if self.seq < head_seq {
            return Err(Break {
                seq: self.seq + 1,
                problem: Problem::Truncated { head_seq },
            });
        }
        if self.seq != head_seq || self.hash != head_hash {
            return Err(Break {
                seq: self.seq,
                problem: Problem::HeadMismatch,
            });
        }
        Ok(self.checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, prev: &str) -> (EntryFields<'_>, String) {
        let e = EntryFields {
            seq,
            time_ms: 1_700_000_000_000 + seq,
            user: "nacos",
            address: "127.0.0.1",
            protocol: "http-v1",
            action: "publish",
            target: "public/DEFAULT_GROUP/a.yaml",
            outcome: "ok",
            detail: "",
            change_id: None,
            prev_hash: prev,
        };
        let h = entry_hash(&e);
        (e, h)
    }

    #[test]
    fn the_encoding_is_length_prefixed_and_versioned() {
        let (e, _) = entry(1, GENESIS_HASH);
        let text = String::from_utf8(encode(&e)).unwrap_or_default();
        assert!(text.starts_with("nacelle-audit-v1\n1:1\n13:1700000000001\n5:nacos\n"));
        assert!(text.ends_with(&format!("0:\n64:{GENESIS_HASH}\n")));
        // A known value, so an external verifier can check its implementation.
        let known = EntryFields {
            seq: 1,
            time_ms: 0,
            user: "",
            address: "",
            protocol: "",
            action: "login",
            target: "",
            outcome: "ok",
            detail: "",
            change_id: Some(7),
            prev_hash: GENESIS_HASH,
        };
        assert_eq!(entry_hash(&known).len(), 64);
        assert_ne!(
            entry_hash(&known),
            entry_hash(&EntryFields {
                change_id: None,
                ..known
            })
        );
    }

    #[test]
    fn a_walk_names_the_first_bad_entry() -> Result<(), Box<dyn std::error::Error>> {
        let (e1, h1) = entry(1, GENESIS_HASH);
        let (e2, h2) = entry(2, &h1);
        let (e3, h3) = entry(3, &h2);
        let mut v = Verifier::new(0, GENESIS_HASH);
        assert!(v.check(&e1, &h1).is_ok() && v.check(&e2, &h2).is_ok());
        assert!(v.check(&e3, &h3).is_ok());
        assert_eq!(v.finish(3, &h3), Ok(3));

        let mut v = Verifier::new(0, GENESIS_HASH);
        assert_eq!(v.check(&e1, &h1), Ok(()));
        let err = v.check(&e3, &h3).err();
        assert_eq!(
            err.clone().map(|b| (b.seq, b.problem)),
            Some((2, Problem::Missing { next: 3 }))
        );
        // In words naming the missing entry, never the enum's debug text.
        let b = err.ok_or("no break")?;
        assert_eq!(
            b.to_string(),
            "entry 2 is missing (the next entry, 3, follows entry 1)"
        );
        assert_eq!(b.problem.name(), "Missing");
        let gap = Break {
            seq: 47,
            problem: Problem::Missing { next: 50 },
        };
        assert_eq!(
            gap.to_string(),
            "entries 47 to 49 are missing (the next entry, 50, follows entry 46)"
        );

        let mut v = Verifier::new(0, GENESIS_HASH);
        let altered = EntryFields {
            user: "mallory",
            ..e1
        };
        assert_eq!(
            v.check(&altered, &h1).err().map(|b| b.problem),
            Some(Problem::Altered)
        );

        let mut v = Verifier::new(0, GENESIS_HASH);
        assert_eq!(v.check(&e1, &h1), Ok(()));
        assert_eq!(v.check(&e2, &h2), Ok(()));
        assert_eq!(
            v.finish(3, &h3).err().map(|b| (b.seq, b.problem)),
            Some((3, Problem::Truncated { head_seq: 3 }))
        );
        Ok(())
    }
}
