//! Encrypted configs, as Nacos's AES encryption plugin does them, plus the master-key
//! wrapping of data keys that Nacelle adds at rest.
//!
//! # Layout
//! - [`rule`]: which dataIds are encrypted (`cipher-<algorithm>-…`) and with what.
//! - [`plugin`]: [`DataKey`] — the plugin's algorithm (nacos-group/nacos-plugin,
//!   `AesEncryptionPluginService`): a random AES key as lower-case hex, base64 of that hex
//!   text as the `encryptedDataKey`; AES/CBC/PKCS#5 with the first 16 hex characters as IV;
//!   ciphertext as lower-case hex.
//! - [`master`]: [`MasterKey`] / [`MasterKeys`] (the current key and previous ones, for
//!   rotation) — AES-256-GCM wrapping of a data key at rest, in a
//!   recognisable text format (`nacelle:v1:<key id>:<base64(nonce‖ciphertext‖tag)>`), and
//!   [`open_data_key`], which also reads the unwrapped keys Nacos writes.
//! - [`CipherError`]: every failure, typed.
//!
//! This crate depends on no other Nacelle crate: a client SDK uses it to decrypt what a
//! gRPC query returns (ciphertext + `encryptedDataKey`).

mod error;
pub mod master;
pub mod plugin;
pub mod rule;

pub use error::CipherError;
pub use master::{
    is_wrapped, open_data_key, wrapped_key_id, MasterKey, MasterKeys, WRAPPED_PREFIX,
};
pub use plugin::DataKey;
pub use rule::{cipher_rule, Algorithm, CipherRule};
