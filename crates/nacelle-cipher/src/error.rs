//! [`CipherError`]: what can go wrong with data keys, ciphertext and the master key. No
//! message ever holds a key or any content.

use thiserror::Error;

/// An error of encryption, decryption or key wrapping.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CipherError {
    /// An `encryptedDataKey` that is not base64 of the hex text of a 128-, 192- or 256-bit
    /// AES key.
    #[error("the data key is not base64 of a hex AES key: {0}")]
    BadDataKey(String),
    /// Stored content that is not hex of whole AES blocks.
    #[error("the ciphertext is not hex of whole AES blocks")]
    BadCiphertext,
    /// The padding did not check out: a wrong data key or damaged content.
    #[error("the ciphertext does not decrypt with its data key (wrong key or damaged content)")]
    Decrypt,
    /// The decrypted bytes are not UTF-8 text (a wrong key that happened to pad right).
    #[error("the decrypted content is not UTF-8 text (wrong key or damaged content)")]
    NotUtf8,
    /// A master key that is not 32 bytes in base64.
    #[error("the master key must be 32 bytes in base64 (e.g. `openssl rand -base64 32`): {0}")]
    BadMasterKey(String),
    /// The data key was wrapped with another master key than the one configured.
    #[error(
        "the data key is wrapped with master key {stored}, but the configured master key is {configured}"
    )]
    WrongMasterKey { stored: String, configured: String },
    /// The data key is wrapped but no master key is configured.
    #[error("the data key is wrapped with master key {0}, but no master key is configured")]
    NoMasterKey(String),
    /// A value with the wrapped prefix that is not in the wrapped format.
    #[error("the wrapped data key is malformed: {0}")]
    BadWrapped(String),
    /// The authentication tag did not verify: the wrapped key was changed, or was wrapped
    /// by another key with the same key id.
    #[error("the wrapped data key does not open with master key {0} (damaged or forged)")]
    Unauthentic(String),
    /// The operating system's random generator failed.
    #[error("the system random generator failed: {0}")]
    Random(String),
}
