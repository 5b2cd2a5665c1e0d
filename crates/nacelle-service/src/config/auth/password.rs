//! Passwords: BCrypt as Nacos stores them (`$2a$10$…`, cost 10), hashed and verified on the
//! blocking pool (a verification takes tens of milliseconds of CPU), and a cache of
//! verified (user, password) pairs so that clients sending `username`/`password` on every
//! request (the Node client) pay BCrypt once, not per request.
//!
//! The cache keeps, per user, a salted SHA-256 of the password that verified and the hash
//! it verified against; it answers only while the user's stored hash is still that one, so
//! a password change or a deleted user invalidates it at once.

use std::sync::Arc;

use dashmap::DashMap;
use nacelle_core::CoreError;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Nacos's BCrypt cost.
pub(crate) const BCRYPT_COST: u32 = 10;
/// Most users whose verified password is cached; the cache is cleared when full.
const CACHE_MAX: usize = 10_000;

/// Hashes `password` with BCrypt (on the blocking pool).
pub(crate) async fn hash(password: String) -> Result<String, CoreError> {
    tokio::task::spawn_blocking(move || bcrypt::hash(password, BCRYPT_COST))
        .await
        .map_err(|e| CoreError::Invalid(format!("hashing the password failed: {e}")))?
        .map_err(|e| CoreError::Invalid(format!("hashing the password failed: {e}")))
}

/// Verified passwords, per user.
pub(crate) struct PasswordCache {
    /// A per-process random salt of the digests, so the cache never holds a plain hash of
    /// a password.
    salt: [u8; 16],
    verified: DashMap<String, (Arc<str>, [u8; 32])>,
}

impl PasswordCache {
    pub(crate) fn new() -> Self {
        let mut salt = [0u8; 16];
        // Without randomness the salt stays zero: the cache still works, digests are only
        // less protected in a memory dump.
        if getrandom::getrandom(&mut salt).is_err() {
            tracing::warn!("no randomness for the password cache salt");
        }
        PasswordCache {
            salt,
            verified: DashMap::new(),
        }
    }

    fn digest(&self, user: &str, password: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.salt);
        h.update(user.as_bytes());
        h.update([0]);
        h.update(password.as_bytes());
        h.finalize().into()
    }

    /// Whether `password` matches `stored` (the user's BCrypt hash).
    pub(crate) async fn verify(&self, user: &str, password: &str, stored: &Arc<str>) -> bool {
        let digest = self.digest(user, password);
        if let Some(hit) = self.verified.get(user) {
            let (hash, known) = hit.value();
            if **hash == **stored && bool::from(known.ct_eq(&digest)) {
                return true;
            }
        }
        let (pw, hash) = (password.to_string(), stored.to_string());
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(pw, &hash).unwrap_or(false))
            .await
            .unwrap_or(false);
        if ok {
            if self.verified.len() >= CACHE_MAX {
                self.verified.clear();
            }
            self.verified
                .insert(user.to_string(), (Arc::clone(stored), digest));
        }
        ok
    }

    /// Forgets what was verified for `user`.
    pub(crate) fn forget(&self, user: &str) {
        self.verified.remove(user);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hash made by Nacos (Spring's `BCryptPasswordEncoder`) for `nacos`, as its
    /// schema scripts up to 2.3 inserted it.
    const NACOS_HASH: &str = "$2a$10$EuWPZHzz32dJN7jexM34MOeYirDdFAZm2kuWj7VEOJhhZkDrxfvUu";

    #[tokio::test]
    async fn verifies_nacos_hashes_and_caches() -> Result<(), CoreError> {
        let cache = PasswordCache::new();
        let stored: Arc<str> = NACOS_HASH.into();
        assert!(cache.verify("nacos", "nacos", &stored).await);
        assert!(!cache.verify("nacos", "wrong", &stored).await);
        // Cached now; still only for the same stored hash.
        assert!(cache.verify("nacos", "nacos", &stored).await);
        let other: Arc<str> = hash("other".into()).await?.into();
        assert!(!cache.verify("nacos", "nacos", &other).await);
        assert!(cache.verify("nacos", "other", &other).await);
        assert!(other.starts_with("$2"));
        Ok(())
    }
}
