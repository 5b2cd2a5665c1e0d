//! The master key: wrapping of data keys at rest, which Nacos does not do (its plugin's
//! `encryptSecretKey` is the identity, so `encrypted_data_key` holds the data key in
//! clear next to the ciphertext).
//!
//! Format of a wrapped data key, as stored in `encrypted_data_key`:
//!
//! ```text
//! nacelle:v1:<key id>:<base64(nonce ‖ ciphertext ‖ tag)>
//! ```
//!
//! - `nacelle:` — the prefix that tells a wrapped key from Nacos's (base64 has no `:`);
//! - `v1` — AES-256-GCM, a random 96-bit nonce, the 128-bit tag, and the text before the
//!   last `:` (`nacelle:v1:<key id>:`) as associated data;
//! - `<key id>` — 8 lower-case hex characters naming the master key: the first 4 bytes of
//!   AES-256 of the block `nacelle-key-id\0\0` under that key (a key check value: it shows
//!   which key wrapped a row without revealing the key);
//! - the plaintext is the data key's own text (base64 of hex).
//!
//! A wrapped key of 16 bytes is 98 characters (the column holds 1024).

use aes::cipher::{BlockEncrypt, KeyInit};
use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use zeroize::Zeroizing;

use crate::error::CipherError;
use crate::plugin::BASE64;

/// The prefix of every wrapped data key.
pub const WRAPPED_PREFIX: &str = "nacelle:";
/// The prefix of version 1 (the only one).
const V1_PREFIX: &str = "nacelle:v1:";
const NONCE_BYTES: usize = 12;
const TAG_BYTES: usize = 16;
const KEY_ID_BLOCK: &[u8; 16] = b"nacelle-key-id\0\0";

/// A 256-bit master key. Its `Debug` shows only the key id.
pub struct MasterKey {
    aead: Aes256Gcm,
    id: String,
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterKey").field("id", &self.id).finish()
    }
}

impl MasterKey {
    /// A master key from the text of a key file: base64 of exactly 32 bytes, surrounding
    /// whitespace ignored (`openssl rand -base64 32 > master.key`).
    pub fn from_base64(text: &str) -> Result<MasterKey, CipherError> {
        let raw = Zeroizing::new(
            BASE64
                .decode(text.trim())
                .map_err(|_| CipherError::BadMasterKey("the file is not base64".into()))?,
        );
        let bytes: &[u8; 32] = raw.as_slice().try_into().map_err(|_| {
            CipherError::BadMasterKey(format!("it decodes to {} bytes, not 32", raw.len()))
        })?;
        Ok(MasterKey::from_bytes(bytes))
    }

    /// A master key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> MasterKey {
        let block_cipher = aes::Aes256::new(bytes.into());
        let mut block = (*KEY_ID_BLOCK).into();
        block_cipher.encrypt_block(&mut block);
        MasterKey {
            aead: Aes256Gcm::new(bytes.into()),
            id: hex::encode(&block[..4]),
        }
    }

    /// The key id written into every key this master key wraps.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Wraps a data key's text into the `nacelle:v1:` format, with a fresh random nonce.
    pub fn wrap(&self, data_key: &str) -> Result<String, CipherError> {
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::getrandom(&mut nonce).map_err(|e| CipherError::Random(e.to_string()))?;
        let header = format!("{V1_PREFIX}{}:", self.id);
        let sealed = self
            .aead
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: data_key.as_bytes(),
                    aad: header.as_bytes(),
                },
            )
            .map_err(|_| CipherError::Unauthentic(self.id.clone()))?;
        let mut body = Vec::with_capacity(NONCE_BYTES + sealed.len());
        body.extend_from_slice(&nonce);
        body.extend_from_slice(&sealed);
        Ok(format!("{header}{}", BASE64.encode(body)))
    }

    /// Opens a wrapped data key; the text of the data key it holds.
    pub fn unwrap(&self, stored: &str) -> Result<String, CipherError> {
        let (key_id, body) = split_wrapped(stored)?;
        if key_id != self.id {
            return Err(CipherError::WrongMasterKey {
                stored: key_id.to_string(),
                configured: self.id.clone(),
            });
        }
        let body = BASE64
            .decode(body)
            .map_err(|_| CipherError::BadWrapped("the body is not base64".into()))?;
        if body.len() < NONCE_BYTES + TAG_BYTES {
            return Err(CipherError::BadWrapped("the body is too short".into()));
        }
        let (nonce, sealed) = body.split_at(NONCE_BYTES);
        // The associated data: `nacelle:v1:<key id>:`.
        let header_len = V1_PREFIX.len() + key_id.len() + 1;
        let plain = Zeroizing::new(
            self.aead
                .decrypt(
                    Nonce::from_slice(nonce),
                    Payload {
                        msg: sealed,
                        aad: &stored.as_bytes()[..header_len],
                    },
                )
                .map_err(|_| CipherError::Unauthentic(self.id.clone()))?,
        );
        String::from_utf8(plain.to_vec())
            .map_err(|_| CipherError::BadWrapped("the data key is not text".into()))
    }
}

/// The configured master keys: the current one, which wraps every new data key, and
/// previous ones, which only unwrap (key rotation, `docs/encryption.md`). Read from a key
/// file of one base64 key per line, the current key first; blank lines and `#` comments
/// are ignored.
#[derive(Debug)]
pub struct MasterKeys {
    /// Never empty; the first is the current key.
    keys: Vec<MasterKey>,
}

impl MasterKeys {
    /// The keys of a key file's text.
    pub fn parse(text: &str) -> Result<MasterKeys, CipherError> {
        let mut keys: Vec<MasterKey> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let key = MasterKey::from_base64(line).map_err(|e| match e {
                CipherError::BadMasterKey(m) => {
                    CipherError::BadMasterKey(format!("line {}: {m}", n + 1))
                }
                other => other,
            })?;
            if keys.iter().any(|k| k.id() == key.id()) {
                return Err(CipherError::BadMasterKey(format!(
                    "line {}: the key {} is listed twice",
                    n + 1,
                    key.id()
                )));
            }
            keys.push(key);
        }
        if keys.is_empty() {
            return Err(CipherError::BadMasterKey("the file holds no key".into()));
        }
        Ok(MasterKeys { keys })
    }

    /// One key, current, with no previous ones.
    pub fn single(key: MasterKey) -> MasterKeys {
        MasterKeys { keys: vec![key] }
    }

    /// The key that wraps new data keys.
    pub fn current(&self) -> &MasterKey {
        // `keys` is never empty (see `parse` and `single`).
        &self.keys[0]
    }

    /// The ids of every key, the current one first.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(MasterKey::id).collect()
    }

    /// Wraps a data key with the current key.
    pub fn wrap(&self, data_key: &str) -> Result<String, CipherError> {
        self.current().wrap(data_key)
    }

    /// Opens a wrapped data key with whichever configured key wrapped it.
    pub fn unwrap(&self, stored: &str) -> Result<String, CipherError> {
        let (key_id, _) = split_wrapped(stored)?;
        match self.keys.iter().find(|k| k.id() == key_id) {
            Some(k) => k.unwrap(stored),
            None => Err(CipherError::WrongMasterKey {
                stored: key_id.to_string(),
                configured: self.ids().join(", "),
            }),
        }
    }
}

/// Whether a stored `encrypted_data_key` is wrapped by a master key (Nacelle's format)
/// rather than a data key in clear (Nacos's).
pub fn is_wrapped(stored: &str) -> bool {
    stored.starts_with(WRAPPED_PREFIX)
}

/// The key id of a wrapped data key, `None` for a key in clear or a malformed value.
pub fn wrapped_key_id(stored: &str) -> Option<&str> {
    split_wrapped(stored).ok().map(|(id, _)| id)
}

/// `(key id, base64 body)` of a `nacelle:v1:` value.
fn split_wrapped(stored: &str) -> Result<(&str, &str), CipherError> {
    let Some(rest) = stored.strip_prefix(V1_PREFIX) else {
        return Err(CipherError::BadWrapped(if is_wrapped(stored) {
            "unknown format version".into()
        } else {
            "not a wrapped key".into()
        }));
    };
    let Some((key_id, body)) = rest.split_once(':') else {
        return Err(CipherError::BadWrapped("no key id".into()));
    };
    if key_id.len() != 8 || !key_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CipherError::BadWrapped("bad key id".into()));
    }
    Ok((key_id, body))
}

/// The data key text of a stored `encrypted_data_key`: unwrapped with `master` when it is
/// in Nacelle's wrapped format; as stored when it is in clear (rows Nacos wrote, or rows
/// written without a master key). A wrapped key without a master key is
/// [`CipherError::NoMasterKey`].
pub fn open_data_key(stored: &str, master: Option<&MasterKeys>) -> Result<String, CipherError> {
    if !is_wrapped(stored) {
        return Ok(stored.to_string());
    }
    match master {
        Some(m) => m.unwrap(stored),
        None => Err(CipherError::NoMasterKey(
            wrapped_key_id(stored).unwrap_or("?").to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> MasterKey {
        MasterKey::from_bytes(&[b; 32])
    }

    #[test]
    fn wrap_then_unwrap() -> Result<(), CipherError> {
        let m = key(7);
        let dk = "MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmY=";
        let w = m.wrap(dk)?;
        assert!(w.starts_with(&format!("nacelle:v1:{}:", m.id())), "{w}");
        assert!(is_wrapped(&w));
        assert_eq!(wrapped_key_id(&w), Some(m.id()));
        assert!(!w.contains(dk));
        assert_eq!(m.unwrap(&w)?, dk);
        // A fresh nonce each time.
        assert_ne!(m.wrap(dk)?, w);
        assert!(w.len() < 1024);
        let keys = MasterKeys::single(key(7));
        assert_eq!(open_data_key(&w, Some(&keys))?, dk);
        assert_eq!(open_data_key(dk, Some(&keys))?, dk);
        assert_eq!(open_data_key(dk, None)?, dk);
        Ok(())
    }

    #[test]
    fn wrong_missing_or_damaged_keys_are_typed_errors() -> Result<(), CipherError> {
        let m = key(7);
        let w = m.wrap("ZGF0YQ==")?;
        let other = key(8);
        assert_ne!(m.id(), other.id());
        assert!(matches!(
            other.unwrap(&w),
            Err(CipherError::WrongMasterKey { .. })
        ));
        assert!(
            matches!(open_data_key(&w, None), Err(CipherError::NoMasterKey(id)) if id == m.id())
        );
        // Flip one character of the body.
        let mut damaged = w.clone().into_bytes();
        let last = damaged.len() - 3;
        damaged[last] = if damaged[last] == b'A' { b'B' } else { b'A' };
        let damaged =
            String::from_utf8(damaged).map_err(|_| CipherError::BadWrapped("t".into()))?;
        assert!(matches!(
            m.unwrap(&damaged),
            Err(CipherError::Unauthentic(_))
        ));
        // The key id is authenticated too: a row relabelled with another id fails.
        let relabelled = w.replacen(m.id(), other.id(), 1);
        assert!(matches!(
            other.unwrap(&relabelled),
            Err(CipherError::Unauthentic(_))
        ));
        assert!(matches!(
            m.unwrap("nacelle:v9:x"),
            Err(CipherError::BadWrapped(_))
        ));
        assert!(matches!(
            m.unwrap("nacelle:v1:zz:AAAA"),
            Err(CipherError::BadWrapped(_))
        ));
        Ok(())
    }

    #[test]
    fn previous_keys_unwrap_and_the_current_one_wraps() -> Result<(), CipherError> {
        let old = key(1).wrap("ZGF0YQ==")?;
        let text = format!(
            "# current\n{}\n\n{}\n",
            BASE64.encode([2u8; 32]),
            BASE64.encode([1u8; 32])
        );
        let keys = MasterKeys::parse(&text)?;
        assert_eq!(keys.ids(), vec![key(2).id(), key(1).id()]);
        assert_eq!(keys.unwrap(&old)?, "ZGF0YQ==");
        let new = keys.wrap("ZGF0YQ==")?;
        assert_eq!(wrapped_key_id(&new), Some(key(2).id()));
        let unknown = key(3).wrap("ZGF0YQ==")?;
        assert!(matches!(
            keys.unwrap(&unknown),
            Err(CipherError::WrongMasterKey { .. })
        ));
        let twice = format!(
            "{}\n{}\n",
            BASE64.encode([2u8; 32]),
            BASE64.encode([2u8; 32])
        );
        assert!(
            matches!(MasterKeys::parse(&twice), Err(CipherError::BadMasterKey(m)) if m.contains("twice"))
        );
        assert!(matches!(
            MasterKeys::parse("# nothing\n"),
            Err(CipherError::BadMasterKey(_))
        ));
        assert!(
            matches!(MasterKeys::parse("short\n"), Err(CipherError::BadMasterKey(m)) if m.contains("line 1"))
        );
        Ok(())
    }

    #[test]
    fn master_key_files() -> Result<(), CipherError> {
        let text = format!("{}\n", BASE64.encode([3u8; 32]));
        let m = MasterKey::from_base64(&text)?;
        assert_eq!(m.id(), key(3).id());
        assert!(!format!("{m:?}").contains(&text.trim().to_string()));
        assert!(matches!(
            MasterKey::from_base64(&BASE64.encode([3u8; 16])),
            Err(CipherError::BadMasterKey(m)) if m.contains("16 bytes")
        ));
        assert!(matches!(
            MasterKey::from_base64("not base64!"),
            Err(CipherError::BadMasterKey(_))
        ));
        assert!(matches!(
            MasterKey::from_base64(""),
            Err(CipherError::BadMasterKey(_))
        ));
        Ok(())
    }
}
