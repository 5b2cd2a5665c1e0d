//! [`DataKey`]: the algorithm of Nacos's AES encryption plugin
//! (nacos-group/nacos-plugin, `AesEncryptionPluginService`), byte for byte:
//!
//! - key generation: a random AES key (the JDK's `KeyGenerator("AES")`: 128 bits, 256 from
//!   JDK 19 on) → lower-case hex → base64 of that hex text. That base64 string is the
//!   `encryptedDataKey` (Nacos wraps it with nothing).
//! - `AES/CBC/PKCS5Padding`, key = hex-decode(base64-decode(dataKey)), IV = the first 16
//!   characters of the hex text as UTF-8 bytes; plaintext is UTF-8; ciphertext is written
//!   as lower-case hex.
//!
//! Decryption accepts 128-, 192- and 256-bit keys, as the plugin does (it takes whatever
//! length the hex gives).

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use zeroize::Zeroizing;

use crate::error::CipherError;

/// Standard base64, padding optional when reading (commons-codec's decoder is lenient).
pub(crate) const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Bytes of a freshly generated data key (AES-128, the JDK default the plugin gets).
const GENERATED_KEY_BYTES: usize = 16;
/// IV length, in characters of the key's hex text.
const IV_CHARS: usize = 16;

/// A data key of one config: the plugin's `encryptedDataKey` text and the AES key in it.
/// Its `Debug` shows neither.
pub struct DataKey {
    /// base64 of the hex text, as stored by Nacos and sent to clients.
    encoded: Zeroizing<String>,
    /// The AES key (16, 24 or 32 bytes).
    key: Zeroizing<Vec<u8>>,
    /// The first 16 characters of the hex text.
    iv: [u8; 16],
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataKey")
            .field("bits", &(self.key.len() * 8))
            .finish_non_exhaustive()
    }
}

impl DataKey {
    /// A fresh random AES-128 key, as the plugin's `generateSecretKey` makes one.
    pub fn generate() -> Result<DataKey, CipherError> {
        let mut raw = Zeroizing::new([0u8; GENERATED_KEY_BYTES]);
        getrandom::getrandom(raw.as_mut()).map_err(|e| CipherError::Random(e.to_string()))?;
        let hex_text = Zeroizing::new(hex::encode(raw.as_ref()));
        DataKey::parse(&BASE64.encode(hex_text.as_bytes()))
    }

    /// Reads an `encryptedDataKey` as the plugin does: base64 → hex text → AES key.
    pub fn parse(encoded: &str) -> Result<DataKey, CipherError> {
        let hex_bytes = Zeroizing::new(
            BASE64
                .decode(encoded.trim())
                .map_err(|_| CipherError::BadDataKey("not base64".into()))?,
        );
        let hex_text = std::str::from_utf8(&hex_bytes)
            .map_err(|_| CipherError::BadDataKey("the decoded key is not hex text".into()))?;
        let key = Zeroizing::new(
            hex::decode(hex_text)
                .map_err(|_| CipherError::BadDataKey("the decoded key is not hex text".into()))?,
        );
        if !matches!(key.len(), 16 | 24 | 32) {
            return Err(CipherError::BadDataKey(format!(
                "an AES key has 128, 192 or 256 bits, this one {}",
                key.len() * 8
            )));
        }
        let mut iv = [0u8; 16];
        // A valid key has at least 32 hex characters, all ASCII.
        iv.copy_from_slice(&hex_text.as_bytes()[..IV_CHARS]);
        Ok(DataKey {
            encoded: Zeroizing::new(encoded.trim().to_string()),
            key,
            iv,
        })
    }

    /// The `encryptedDataKey` text (base64 of the hex key).
    pub fn as_str(&self) -> &str {
        &self.encoded
    }

    /// Key size in bits.
    pub fn bits(&self) -> usize {
        self.key.len() * 8
    }

    /// Encrypts `plaintext` (UTF-8) and returns the lower-case hex ciphertext.
    pub fn encrypt(&self, plaintext: &str) -> Result<String, CipherError> {
        let data = plaintext.as_bytes();
        let ct = match self.key.len() {
            16 => cbc_encrypt::<aes::Aes128>(&self.key, &self.iv, data),
            24 => cbc_encrypt::<aes::Aes192>(&self.key, &self.iv, data),
            _ => cbc_encrypt::<aes::Aes256>(&self.key, &self.iv, data),
        }?;
        Ok(hex::encode(ct))
    }

    /// Decrypts a hex ciphertext (either case) into its UTF-8 plaintext.
    pub fn decrypt(&self, ciphertext_hex: &str) -> Result<String, CipherError> {
        let ct = hex::decode(ciphertext_hex.trim()).map_err(|_| CipherError::BadCiphertext)?;
        if ct.is_empty() || ct.len() % 16 != 0 {
            return Err(CipherError::BadCiphertext);
        }
        let plain = match self.key.len() {
            16 => cbc_decrypt::<aes::Aes128>(&self.key, &self.iv, &ct),
            24 => cbc_decrypt::<aes::Aes192>(&self.key, &self.iv, &ct),
            _ => cbc_decrypt::<aes::Aes256>(&self.key, &self.iv, &ct),
        }?;
        String::from_utf8(plain).map_err(|_| CipherError::NotUtf8)
    }
}

fn cbc_encrypt<C>(key: &[u8], iv: &[u8; 16], data: &[u8]) -> Result<Vec<u8>, CipherError>
where
    C: aes::cipher::BlockEncrypt + aes::cipher::BlockCipher + aes::cipher::KeyInit,
{
    // The key length was checked when the key was parsed, so this does not fail.
    let enc = cbc::Encryptor::<C>::new_from_slices(key, iv)
        .map_err(|_| CipherError::BadDataKey("key length".into()))?;
    Ok(enc.encrypt_padded_vec_mut::<Pkcs7>(data))
}

fn cbc_decrypt<C>(key: &[u8], iv: &[u8; 16], ct: &[u8]) -> Result<Vec<u8>, CipherError>
where
    C: aes::cipher::BlockDecrypt + aes::cipher::BlockCipher + aes::cipher::KeyInit,
{
    let dec = cbc::Decryptor::<C>::new_from_slices(key, iv).map_err(|_| CipherError::Decrypt)?;
    dec.decrypt_padded_vec_mut::<Pkcs7>(ct)
        .map_err(|_| CipherError::Decrypt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_plugin_shape() -> Result<(), CipherError> {
        let k = DataKey::generate()?;
        let hex_text = String::from_utf8(
            BASE64
                .decode(k.as_str())
                .map_err(|_| CipherError::BadDataKey("test".into()))?,
        )
        .map_err(|_| CipherError::BadDataKey("test".into()))?;
        assert_eq!(hex_text.len(), 32);
        assert!(hex_text.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
        assert_eq!(k.bits(), 128);
        let other = DataKey::generate()?;
        assert_ne!(k.as_str(), other.as_str());
        let ct = k.encrypt("a: 1")?;
        assert!(ct.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
        assert_eq!(k.decrypt(&ct)?, "a: 1");
        assert!(!format!("{k:?}").contains(k.as_str()));
        Ok(())
    }

    #[test]
    fn bad_keys_and_ciphertexts_are_typed_errors() -> Result<(), CipherError> {
        assert!(matches!(
            DataKey::parse("%%%"),
            Err(CipherError::BadDataKey(_))
        ));
        // base64 of "zz…" (not hex), and of a 64-bit hex key.
        let not_hex = BASE64.encode("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
        assert!(matches!(
            DataKey::parse(&not_hex),
            Err(CipherError::BadDataKey(_))
        ));
        let short = BASE64.encode("0011223344556677");
        assert!(matches!(
            DataKey::parse(&short),
            Err(CipherError::BadDataKey(_))
        ));
        let k = DataKey::generate()?;
        assert_eq!(k.decrypt("xyz"), Err(CipherError::BadCiphertext));
        assert_eq!(k.decrypt("00ff"), Err(CipherError::BadCiphertext));
        assert_eq!(k.decrypt(""), Err(CipherError::BadCiphertext));
        let ct = k.encrypt("secret")?;
        let other = DataKey::generate()?;
        assert!(matches!(
            other.decrypt(&ct),
            Err(CipherError::Decrypt | CipherError::NotUtf8) | Ok(_)
        ));
        assert_ne!(other.decrypt(&ct).ok().as_deref(), Some("secret"));
        Ok(())
    }
}
