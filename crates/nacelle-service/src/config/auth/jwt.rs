//! Nacos-format JSON Web Tokens: header `{"alg":"HS256"}` (HS384 / HS512 when the secret
//! is at least 48 / 64 bytes, as Nacos picks them), payload `{"sub":"<user>","exp":<epoch
//! s>}`, base64url without padding, HMAC over `header.payload` with the decoded secret. A
//! token a Nacos node signs with the same secret verifies here, and the other way round.
//!
//! Verification never panics on any input, compares signatures in constant time (the
//! `hmac` crate's `verify_slice`), and refuses `alg: none` and every algorithm but the
//! three HMACs.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use nacelle_core::AuthFailure;
use serde::{Deserialize, Serialize};
use sha2::{Sha256, Sha384, Sha512};

/// The signing algorithm of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Hs256,
    Hs384,
    Hs512,
}

impl Algorithm {
    /// The algorithm Nacos signs with for a secret of `len` bytes.
    pub fn for_secret(len: usize) -> Self {
        if len >= 64 {
            Algorithm::Hs512
        } else if len >= 48 {
            Algorithm::Hs384
        } else {
            Algorithm::Hs256
        }
    }

    fn name(self) -> &'static str {
        match self {
            Algorithm::Hs256 => "HS256",
            Algorithm::Hs384 => "HS384",
            Algorithm::Hs512 => "HS512",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "HS256" => Some(Algorithm::Hs256),
            "HS384" => Some(Algorithm::Hs384),
            "HS512" => Some(Algorithm::Hs512),
            _ => None,
        }
    }

    fn sign(self, key: &[u8], input: &[u8]) -> Vec<u8> {
        macro_rules! mac {
            ($h:ty) => {{
                // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
                match Hmac::<$h>::new_from_slice(key) {
                    Ok(mut m) => {
                        m.update(input);
                        m.finalize().into_bytes().to_vec()
                    }
                    Err(_) => Vec::new(),
                }
            }};
        }
        match self {
            Algorithm::Hs256 => mac!(Sha256),
            Algorithm::Hs384 => mac!(Sha384),
            Algorithm::Hs512 => mac!(Sha512),
        }
    }

    fn verify(self, key: &[u8], input: &[u8], signature: &[u8]) -> bool {
        macro_rules! mac {
            ($h:ty) => {{
                match Hmac::<$h>::new_from_slice(key) {
                    Ok(mut m) => {
                        m.update(input);
                        m.verify_slice(signature).is_ok()
                    }
                    Err(_) => false,
                }
            }};
        }
        match self {
            Algorithm::Hs256 => mac!(Sha256),
            Algorithm::Hs384 => mac!(Sha384),
            Algorithm::Hs512 => mac!(Sha512),
        }
    }
}

#[derive(Serialize)]
struct HeaderOut<'a> {
    alg: &'a str,
}

#[derive(Deserialize)]
struct HeaderIn {
    alg: Option<String>,
}

/// The claims Nacos puts in a token, in its field order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub exp: i64,
}

/// Signs `claims` with `key` (the decoded secret).
pub fn sign(key: &[u8], claims: &Claims) -> String {
    let alg = Algorithm::for_secret(key.len());
    let header = serde_json::to_vec(&HeaderOut { alg: alg.name() }).unwrap_or_default();
    let payload = serde_json::to_vec(claims).unwrap_or_default();
    let mut token = URL_SAFE_NO_PAD.encode(header);
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(payload));
    let signature = alg.sign(key, token.as_bytes());
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(signature));
    token
}

/// Verifies `token` with `key` at `now` (epoch s): its claims, or Nacos's reason.
pub fn verify(key: &[u8], token: &str, now: i64) -> Result<Claims, AuthFailure> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthFailure::TokenInvalid);
    };
    let decode = |part: &str| {
        URL_SAFE_NO_PAD
            .decode(part.trim_end_matches('='))
            .map_err(|_| AuthFailure::TokenInvalid)
    };
    let header: HeaderIn =
        serde_json::from_slice(&decode(header)?).map_err(|_| AuthFailure::TokenInvalid)?;
    let alg = header
        .alg
        .as_deref()
        .and_then(Algorithm::parse)
        .ok_or(AuthFailure::UnsupportedAlgorithm)?;
    let signed_len = token.len() - signature.len() - 1;
    if !alg.verify(key, &token.as_bytes()[..signed_len], &decode(signature)?) {
        return Err(AuthFailure::InvalidSignature);
    }
    let claims: Claims =
        serde_json::from_slice(&decode(payload)?).map_err(|_| AuthFailure::TokenInvalid)?;
    if claims.sub.is_empty() {
        return Err(AuthFailure::TokenInvalid);
    }
    // Nacos keeps a token valid through the second of its `exp` (`exp >= now`).
    if claims.exp < now {
        return Err(AuthFailure::TokenExpired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn claims(exp: i64) -> Claims {
        Claims {
            sub: "nacos".into(),
            exp,
        }
    }

    #[test]
    fn signs_in_nacos_format() -> Result<(), base64::DecodeError> {
        let token = sign(KEY, &claims(1_700_000_000));
        let parts: Vec<_> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[0])?, br#"{"alg":"HS256"}"#);
        assert_eq!(
            URL_SAFE_NO_PAD.decode(parts[1])?,
            br#"{"sub":"nacos","exp":1700000000}"#
        );
        assert!(!token.contains('='));
        assert_eq!(
            verify(KEY, &token, 1_699_999_999),
            Ok(claims(1_700_000_000))
        );
        Ok(())
    }

    /// Nacos signs with HS384 / HS512 when the decoded secret has 384 / 512 bits.
    #[test]
    fn picks_the_algorithm_by_secret_length() {
        assert_eq!(Algorithm::for_secret(32), Algorithm::Hs256);
        assert_eq!(Algorithm::for_secret(48), Algorithm::Hs384);
        assert_eq!(Algorithm::for_secret(64), Algorithm::Hs512);
        let long = [7u8; 64];
        let token = sign(&long, &claims(10));
        assert!(token.starts_with(&URL_SAFE_NO_PAD.encode(br#"{"alg":"HS512"}"#)));
        assert!(verify(&long, &token, 9).is_ok());
    }

    #[test]
    fn refuses_what_nacos_refuses() {
        let good = sign(KEY, &claims(100));
        assert!(
            verify(KEY, &good, 100).is_ok(),
            "valid through its exp second"
        );
        assert_eq!(verify(KEY, &good, 101), Err(AuthFailure::TokenExpired));
        assert_eq!(
            verify(b"another secret of thirty-two bytes", &good, 1),
            Err(AuthFailure::InvalidSignature)
        );
        // A tampered payload keeps the old signature.
        let parts: Vec<_> = good.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(br#"{"sub":"admin","exp":100}"#);
        let tampered = format!("{}.{}.{}", parts[0], forged, parts[2]);
        assert_eq!(
            verify(KEY, &tampered, 1),
            Err(AuthFailure::InvalidSignature)
        );
        // alg none, with or without a signature.
        let none = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        for sig in ["", parts[2]] {
            let t = format!("{none}.{}.{sig}", parts[1]);
            assert_eq!(verify(KEY, &t, 1), Err(AuthFailure::UnsupportedAlgorithm));
        }
        let rs = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256"}"#);
        let t = format!("{rs}.{}.{}", parts[1], parts[2]);
        assert_eq!(verify(KEY, &t, 1), Err(AuthFailure::UnsupportedAlgorithm));
        let empty_header = format!("e30.{}.{}", parts[1], parts[2]);
        assert_eq!(
            verify(KEY, &empty_header, 1),
            Err(AuthFailure::UnsupportedAlgorithm)
        );
        for junk in ["", "a", "a.b", "a.b.c.d", "!!.!!.!!", "..."] {
            assert_eq!(
                verify(KEY, junk, 1),
                Err(AuthFailure::TokenInvalid),
                "{junk}"
            );
        }
    }
}
