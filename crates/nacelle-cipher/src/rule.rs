//! Which dataIds are encrypted, as Nacos's `EncryptionHandler` decides: a dataId that
//! starts with `cipher-` (and is not just `cipher-`) names its algorithm in its second
//! `-`-separated token (`cipher-aes-db.yml` → `aes`). The algorithm name is looked up as
//! written (case-sensitive: Nacos's plugin map is keyed by `"aes"`). An algorithm no
//! plugin implements is not an error in Nacos: the config is stored in clear, without a
//! data key, and a warning is logged — [`CipherRule::Unknown`] says so to the caller.

/// An encryption algorithm Nacelle implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Nacos's AES plugin (`nacos-aes-encryption-plugin`), name `aes`.
    Aes,
}

impl Algorithm {
    /// The name in the dataId.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Aes => "aes",
        }
    }
}

/// What the dataId rule says of one dataId.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherRule<'a> {
    /// Not a `cipher-` dataId: stored and served as given.
    Plain,
    /// A `cipher-` dataId of an algorithm Nacelle implements.
    Known(Algorithm),
    /// A `cipher-` dataId of an algorithm nobody implements (e.g. `cipher-AES-x`, `cipher-sm4-x`):
    /// Nacos stores it in clear; so does Nacelle, with a warning.
    Unknown(&'a str),
}

/// The rule for `data_id`.
pub fn cipher_rule(data_id: &str) -> CipherRule<'_> {
    const PREFIX: &str = "cipher-";
    if !data_id.starts_with(PREFIX) || data_id == PREFIX {
        return CipherRule::Plain;
    }
    // Java's `dataId.split("-")` then `skip(1).findFirst()`: the second token. (Java drops
    // trailing empty tokens; every such case ends in an empty or absent name, which is an
    // unknown algorithm either way.)
    match data_id.split('-').nth(1).unwrap_or("") {
        "aes" => CipherRule::Known(Algorithm::Aes),
        other => CipherRule::Unknown(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_token_names_the_algorithm() {
        let aes = CipherRule::Known(Algorithm::Aes);
        assert_eq!(cipher_rule("cipher-aes-db.yml"), aes);
        assert_eq!(cipher_rule("cipher-aes"), aes);
        assert_eq!(cipher_rule("cipher-aes-"), aes);
        assert_eq!(cipher_rule("cipher-aes-a-b-c"), aes);
        assert_eq!(cipher_rule("cipher-AES-db"), CipherRule::Unknown("AES"));
        assert_eq!(cipher_rule("cipher-sm4-db"), CipherRule::Unknown("sm4"));
        assert_eq!(cipher_rule("cipher--db"), CipherRule::Unknown(""));
        assert_eq!(cipher_rule("cipher-"), CipherRule::Plain);
        assert_eq!(cipher_rule("cipher"), CipherRule::Plain);
        assert_eq!(cipher_rule("Cipher-aes-db"), CipherRule::Plain);
        assert_eq!(cipher_rule("app-cipher-aes"), CipherRule::Plain);
        assert_eq!(cipher_rule("app.yaml"), CipherRule::Plain);
    }
}
