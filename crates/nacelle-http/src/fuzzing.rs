//! The parsers the fuzz targets (`fuzz/`, `crates/nacelle-fuzzing`) drive, exposed only with
//! the `fuzzing` feature. Each takes arbitrary bytes and must never panic.

use crate::params::ParamMap;

/// `Listening-Configs` as the long-poll handler parses it; the first byte chooses whether a
/// separate `tenant` parameter is given. Returns how many records were accepted.
pub fn listening_configs(data: &[u8]) -> usize {
    let Some((first, rest)) = data.split_first() else {
        return 0;
    };
    let raw = String::from_utf8_lossy(rest);
    let tenant = (first & 1 == 1).then_some("fuzz-tenant");
    crate::v1::listener::parse_listening_configs(&raw, tenant).map_or(0, |items| items.len())
}

/// `a=b&c=d` form/query decoding, strict as every handler reads parameters. Returns how
/// many distinct names were decoded.
pub fn form(data: &[u8]) -> usize {
    let mut out = ParamMap::default();
    match crate::params::decode_form_into(data, &mut out) {
        Ok(()) => {
            // What the encoder writes back must decode to the same values.
            for (k, v) in &out {
                let mut encoded = String::new();
                crate::params::java_url_encode(v, &mut encoded);
                let mut again = ParamMap::default();
                let pair = format!("k={encoded}");
                assert!(
                    crate::params::decode_form_into(pair.as_bytes(), &mut again).is_ok(),
                    "re-encoded value of {k:?} does not decode"
                );
                assert_eq!(again.get("k"), Some(v), "round trip of {k:?}");
            }
            out.len()
        }
        Err(_) => 0,
    }
}
