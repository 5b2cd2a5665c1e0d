//! The map type of everything the service keys by config key.

use dashmap::DashMap;
use nacelle_core::ConfigKey;

/// A concurrent map keyed by config key. Keys come from clients, so the hash is keyed per
/// process (`ahash`'s random state, resistant to chosen collisions like std's SipHash) and
/// a key's three strings hash in a few dozen instructions instead of SipHash's hundreds:
/// a long poll looks keys up here several times.
pub(crate) type KeyMap<V> = DashMap<ConfigKey, V, ahash::RandomState>;

/// A set of config keys (or of references to them) hashed as [`KeyMap`] is: a long poll
/// builds and checks its keys in such sets on every request (SipHash cost ~1.5k
/// instructions per poll).
pub(crate) type KeySet<K> = std::collections::HashSet<K, ahash::RandomState>;
