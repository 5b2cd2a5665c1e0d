//! Deserialisers for Nacos's lenient reading: a `null` reads as the default, as a missing
//! field does.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

/// `null` (or, with `#[serde(default)]`, a missing field) as `T::default()`.
pub(crate) fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// A string map that may be `null` or hold `null` values (dropped).
pub(crate) fn string_map<'de, D>(d: D) -> Result<BTreeMap<String, String>, D::Error>
where
    D: Deserializer<'de>,
{
    let m = Option::<BTreeMap<String, Option<String>>>::deserialize(d)?;
    Ok(m.unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect())
}

/// A flag that Nacos versions write as a bool (`true`) or a string (`"Y"`, `"true"`); any
/// other value (a number, `null`, another string) reads as `false`.
pub(crate) fn flag<'de, D>(d: D) -> Result<bool, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(b) => b,
        serde_json::Value::String(s) => s.eq_ignore_ascii_case("y") || s == "true",
        _ => false,
    })
}
