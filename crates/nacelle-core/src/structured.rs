//! Structured content as JSON values, what a JSON Schema is checked against
//! (docs/schema-validation.md, "Conversion"):
//! - `json`: the document;
//! - `yaml`: each document of the stream (`---`), merge keys (`<<`) applied; keys that are
//!   numbers or booleans become their text, tagged values (`!tag v`) are `{"!tag": v}`;
//! - `toml`: the table; a date-time is its RFC 3339 text;
//! - `properties`: a flat object of strings, keys as Java's `Properties.load` reads them
//!   (dotted keys kept as they are: `server.port` is one key, not a nested object),
//!   escapes resolved; a key given twice keeps its last value, as in Java.
//!
//! `text`, `xml` and `html` are not structured: [`documents`] answers `None` for them.

use serde_json::{Map, Number, Value};

use crate::content::ContentError;
use crate::key::ConfigType;

/// The types a schema can check.
pub const STRUCTURED_TYPES: &str = "json, yaml, properties, toml";

/// Whether content of `config_type` converts to JSON values.
pub fn is_structured(config_type: ConfigType) -> bool {
    matches!(
        config_type,
        ConfigType::Json | ConfigType::Yaml | ConfigType::Toml | ConfigType::Properties
    )
}

/// The documents of `content` as JSON values (one, except for a YAML stream of several
/// documents); `None` when `config_type` is not structured. Content that does not parse is
/// a [`ContentError`] (the parser's problem, never a value of the document).
pub fn documents(
    config_type: ConfigType,
    content: &str,
) -> Option<Result<Vec<Value>, ContentError>> {
    let fail = |message: String| ContentError {
        config_type,
        line: None,
        column: None,
        message,
    };
    Some(match config_type {
        ConfigType::Json => serde_json::from_str::<Value>(content)
            .map(|v| vec![v])
            .map_err(|e| ContentError {
                config_type,
                line: Some(e.line()),
                column: Some(e.column()),
                message: crate::content::strip_position(e.to_string(), e.line(), e.column()),
            }),
        ConfigType::Yaml => yaml_documents(content).map_err(fail),
        ConfigType::Toml => toml::from_str::<toml::Table>(content)
            .map(|t| vec![toml_value(toml::Value::Table(t))])
            .map_err(|e| fail(e.message().trim_end().replace('\n', "; "))),
        ConfigType::Properties => Ok(vec![Value::Object(properties(content))]),
        ConfigType::Text | ConfigType::Xml | ConfigType::Html => return None,
    })
}

fn yaml_documents(content: &str) -> Result<Vec<Value>, String> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(content) {
        let mut value = serde_yaml_ng::Value::deserialize(document).map_err(|e| e.to_string())?;
        value.apply_merge().map_err(|e| e.to_string())?;
        out.push(yaml_value(value)?);
    }
    if out.is_empty() {
        // An empty stream is one empty document, as YAML loaders read it.
        out.push(Value::Null);
    }
    Ok(out)
}

fn yaml_value(v: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => yaml_number(&n),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(yaml_value)
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    Y::Bool(b) => b.to_string(),
                    Y::Number(n) => n.to_string(),
                    Y::Null => "null".to_string(),
                    _ => return Err(
                        "a mapping key is a sequence or a mapping, which a JSON object cannot hold"
                            .into(),
                    ),
                };
                out.insert(key, yaml_value(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => {
            let mut out = Map::with_capacity(1);
            out.insert(t.tag.to_string(), yaml_value(t.value)?);
            Value::Object(out)
        }
    })
}

fn yaml_number(n: &serde_yaml_ng::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::Number(i.into())
    } else if let Some(u) = n.as_u64() {
        Value::Number(u.into())
    } else {
        // NaN and infinities have no JSON number: their YAML text.
        n.as_f64()
            .and_then(Number::from_f64)
            .map_or_else(|| Value::String(n.to_string()), Value::Number)
    }
}

fn toml_value(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::Number(i.into()),
        toml::Value::Float(f) => {
            Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number)
        }
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_value).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_value(v))).collect())
        }
    }
}

/// Java's `Properties.load` into a flat object: logical lines (comment and blank lines
/// skipped; a line ending in an odd number of backslashes continues on the next, whose
/// leading blanks are dropped), the key up to the first unescaped `=`, `:` or blank, the
/// separator and blanks around it skipped, escapes (`\t`, `\n`, `\r`, `\f`, `\uXXXX`, any
/// other `\c` is `c`) resolved. A malformed `\u` is kept as it is (the syntax check
/// reports it).
fn properties(content: &str) -> Map<String, Value> {
    let mut out = Map::new();
    let mut logical = String::new();
    let mut continued = false;
    for line in content.split(['\n', '\r']) {
        let trimmed = line.trim_start_matches([' ', '\t', '\x0c']);
        if !continued && (trimmed.is_empty() || trimmed.starts_with(['#', '!'])) {
            continue;
        }
        let trailing = trimmed.chars().rev().take_while(|&c| c == '\\').count();
        continued = trailing % 2 == 1;
        if continued {
            logical.push_str(&trimmed[..trimmed.len() - 1]);
            continue;
        }
        logical.push_str(trimmed);
        let (key, value) = property(&logical);
        out.insert(key, Value::String(value));
        logical.clear();
    }
    if continued {
        let (key, value) = property(&logical);
        out.insert(key, Value::String(value));
    }
    out
}

/// One logical line's key and value, escapes resolved.
fn property(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut escaped = false;
    while i < chars.len() {
        let c = chars[i];
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, '=' | ':' | ' ' | '\t' | '\x0c') {
            break;
        }
        i += 1;
    }
    let key: String = chars[..i].iter().collect();
    // Blanks, then at most one `=` or `:`, then blanks.
    let mut j = i;
    while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\x0c') {
        j += 1;
    }
    if j < chars.len() && matches!(chars[j], '=' | ':') {
        j += 1;
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\x0c') {
            j += 1;
        }
    }
    let value: String = chars[j..].iter().collect();
    (unescape(&key), unescape(&value))
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                {
                    Some(code) => {
                        // A lone surrogate half (Java keeps it) has no `char`: U+FFFD.
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        for _ in 0..4 {
                            chars.next();
                        }
                    }
                    None => out.push_str("\\u"),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn docs(t: ConfigType, s: &str) -> Vec<Value> {
        match documents(t, s) {
            Some(Ok(v)) => v,
            other => panic!("{t:?} {s:?}: {other:?}"),
        }
    }

    #[test]
    fn json_yaml_toml_alike() {
        let want = json!({"limits": {"max": 5000, "currency": "EUR"}, "on": true});
        assert_eq!(
            docs(
                ConfigType::Json,
                r#"{"limits":{"max":5000,"currency":"EUR"},"on":true}"#
            ),
            vec![want.clone()]
        );
        assert_eq!(
            docs(
                ConfigType::Yaml,
                "limits:\n  max: 5000\n  currency: EUR\non: true\n"
            ),
            vec![want.clone()]
        );
        assert_eq!(
            docs(
                ConfigType::Toml,
                "on = true\n[limits]\nmax = 5000\ncurrency = \"EUR\"\n"
            ),
            vec![want]
        );
    }

    #[test]
    fn yaml_details() {
        assert_eq!(
            docs(ConfigType::Yaml, "a: 1\n---\na: 2\n"),
            vec![json!({"a": 1}), json!({"a": 2})]
        );
        assert_eq!(docs(ConfigType::Yaml, ""), vec![Value::Null]);
        assert_eq!(
            docs(
                ConfigType::Yaml,
                "b: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n1: one\nt: !k 3\nf: .nan\n"
            ),
            vec![
                json!({"b": {"x": 1}, "c": {"x": 1, "y": 2}, "1": "one", "t": {"!k": 3}, "f": ".nan"})
            ]
        );
        assert!(matches!(
            documents(ConfigType::Yaml, "? [a]\n: 1\n"),
            Some(Err(_))
        ));
        assert!(matches!(
            documents(ConfigType::Yaml, "a: [1\n"),
            Some(Err(_))
        ));
    }

    #[test]
    fn toml_dates_are_text() {
        assert_eq!(
            docs(ConfigType::Toml, "at = 1979-05-27T07:32:00Z\n"),
            vec![json!({"at": "1979-05-27T07:32:00Z"})]
        );
    }

    #[test]
    fn properties_as_java_reads_them() {
        let got = docs(
            ConfigType::Properties,
            "# comment\n! other\nserver.port=8080\nname : Nacelle \\\n    Server\n\
             key\\ with\\ space = v\\u00e9\\tx\nempty\nserver.port = 9090\nlast\\\n",
        );
        assert_eq!(
            got,
            vec![json!({
                "server.port": "9090",
                "name": "Nacelle Server",
                "key with space": "vé\tx",
                "empty": "",
                "last": "",
            })]
        );
    }

    #[test]
    fn unstructured_types_are_none() {
        for t in [ConfigType::Text, ConfigType::Xml, ConfigType::Html] {
            assert!(documents(t, "x").is_none());
            assert!(!is_structured(t));
        }
    }
}
