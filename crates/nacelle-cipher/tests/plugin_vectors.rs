//! Vectors of Nacos's AES plugin algorithm computed independently of this crate, with
//! python3's `cryptography` package (`fixtures/make_vectors.py`, which also shows the
//! equivalent openssl command; the first vector was checked with `openssl enc`): each
//! decrypts to its plaintext, and encrypting the plaintext gives the same hex.

use nacelle_cipher::{CipherError, DataKey, MasterKey, MasterKeys};

fn vectors() -> Vec<(String, String, String)> {
    include_str!("fixtures/plugin_vectors.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.split('\t');
            let key = parts.next().unwrap_or_default().to_string();
            let plain: String =
                serde_json_lite(parts.next().unwrap_or_default()).unwrap_or_default();
            let ct = parts.next().unwrap_or_default().to_string();
            (key, plain, ct)
        })
        .collect()
}

/// The JSON string literals of the fixture use only `\"`, `\\`, `\n` and `\uXXXX`.
fn serde_json_lite(lit: &str) -> Option<String> {
    let inner = lit.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            '"' => out.push('"'),
            '\\' => out.push('\\'),
            'u' => {
                let code: String = chars.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&code, 16).ok()?)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

#[test]
fn plugin_vectors_decrypt_and_encrypt_byte_for_byte() -> Result<(), CipherError> {
    let vectors = vectors();
    assert_eq!(vectors.len(), 5, "fixture read");
    for (key, plain, ct) in &vectors {
        let k = DataKey::parse(key)?;
        assert_eq!(&k.decrypt(ct)?, plain, "decrypt with {key}");
        assert_eq!(&k.encrypt(plain)?, ct, "encrypt with {key}");
        // Upper-case hex reads too (commons-codec's decodeHex accepts it).
        assert_eq!(&k.decrypt(&ct.to_uppercase())?, plain);
    }
    assert_eq!(DataKey::parse(&vectors[4].0)?.bits(), 256);
    assert!(vectors[3].1.contains('密'), "non-ASCII plaintext read");
    Ok(())
}

#[test]
fn a_wrapped_vector_key_still_decrypts() -> Result<(), CipherError> {
    let (key, plain, ct) = vectors().remove(0);
    let master = MasterKeys::single(MasterKey::from_bytes(&[9u8; 32]));
    let wrapped = master.wrap(&key)?;
    let opened = nacelle_cipher::open_data_key(&wrapped, Some(&master))?;
    assert_eq!(DataKey::parse(&opened)?.decrypt(&ct)?, plain);
    Ok(())
}
