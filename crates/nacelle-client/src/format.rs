//! [`Format`]: the document formats a binding reads (YAML, JSON, TOML, Java properties),
//! each parsed into one JSON value tree so that layers merge alike whatever their format.

use serde_json::{Map, Value};

/// A document format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML (the first document).
    Yaml,
    /// JSON.
    Json,
    /// TOML.
    Toml,
    /// Java `.properties`: dotted keys nest (`server.port=8080` is `{server: {port:
    /// 8080}}`), and a value that reads as a boolean or a number is one.
    Properties,
}

impl Format {
    /// The format of a Nacos content type or a file extension (`yaml`, `yml`, `json`,
    /// `toml`, `properties`).
    pub fn from_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            "toml" => Some(Format::Toml),
            "properties" => Some(Format::Properties),
            _ => None,
        }
    }

    /// Parses a document into a value tree; the error names the parser's problem.
    pub fn parse(self, text: &str) -> Result<Value, String> {
        match self {
            Format::Yaml => {
                serde_yaml_ng::from_str::<Value>(text).map_err(|e| format!("invalid YAML: {e}"))
            }
            Format::Json => {
                serde_json::from_str::<Value>(text).map_err(|e| format!("invalid JSON: {e}"))
            }
            Format::Toml => {
                let v: toml::Value =
                    toml::from_str(text).map_err(|e| format!("invalid TOML: {e}"))?;
                serde_json::to_value(v).map_err(|e| format!("invalid TOML: {e}"))
            }
            Format::Properties => Ok(properties_tree(&parse_properties(text))),
        }
    }
}

/// Deep merge: objects merge key by key, anything else in `over` replaces `base`.
pub(crate) fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, over) => *slot = over,
    }
}

/// The key/value pairs of a `.properties` document, by `java.util.Properties.load`'s
/// rules: `#`/`!` comments, `=`, `:` or whitespace as separator, `\` line continuation,
/// `\t \n \r \f \uXXXX` escapes.
pub(crate) fn parse_properties(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut logical = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if logical.is_empty() && (trimmed.is_empty() || trimmed.starts_with(['#', '!'])) {
            continue;
        }
        let continued = trimmed.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1;
        if continued {
            logical.push_str(&trimmed[..trimmed.len() - 1]);
            if lines.clone().next().is_some() {
                continue;
            }
        } else {
            logical.push_str(trimmed);
        }
        let (key, value) = split_pair(&logical);
        pairs.push((unescape(&key), unescape(value.trim_start())));
        logical.clear();
    }
    pairs
}

fn split_pair(line: &str) -> (String, &str) {
    let mut key = String::new();
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                key.push(c);
                if let Some((_, n)) = chars.next() {
                    key.push(n);
                }
            }
            '=' | ':' => return (key, &line[i + 1..]),
            c if c.is_whitespace() => {
                let rest = line[i..].trim_start();
                let rest = rest
                    .strip_prefix('=')
                    .or_else(|| rest.strip_prefix(':'))
                    .unwrap_or(rest);
                return (key, rest);
            }
            c => key.push(c),
        }
    }
    (key, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// A scalar of a properties file: a boolean or number when it reads as one.
fn scalar(v: &str) -> Value {
    match v {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = v.parse::<f64>() {
        if f.is_finite() && v.chars().any(|c| c.is_ascii_digit()) {
            return Value::from(f);
        }
    }
    Value::String(v.to_string())
}

fn properties_tree(pairs: &[(String, String)]) -> Value {
    let mut root = Value::Object(Map::new());
    for (key, value) in pairs {
        let mut node = &mut root;
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if !node.is_object() {
                *node = Value::Object(Map::new());
            }
            let Value::Object(map) = node else {
                break;
            };
            if i + 1 == parts.len() {
                map.insert((*part).to_string(), scalar(value));
                break;
            }
            node = map
                .entry((*part).to_string())
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn properties_read_as_java_reads_them() {
        let text = "# comment\n! also\nserver.port = 8080\nserver.name:shop\nflag true\n\
                    long = a\\\n   b\nesc = tab\\there \\u00e9\nratio=0.5\n";
        assert_eq!(
            Format::Properties.parse(text),
            Ok(
                json!({"server": {"port": 8080, "name": "shop"}, "flag": true,
                      "long": "ab", "esc": "tab\there é", "ratio": 0.5})
            )
        );
    }

    #[test]
    fn every_format_reads_into_one_tree_and_layers_merge() -> Result<(), String> {
        let mut base = Format::Yaml.parse("a: 1\nb: {c: 2, d: 3}\n")?;
        merge(&mut base, Format::Toml.parse("[b]\nc = 20\n")?);
        merge(&mut base, Format::Json.parse(r#"{"e": [1]}"#)?);
        assert_eq!(base, json!({"a": 1, "b": {"c": 20, "d": 3}, "e": [1]}));
        assert!(Format::Yaml.parse("a: [").is_err());
        assert_eq!(Format::from_name("YML"), Some(Format::Yaml));
        Ok(())
    }
}
