//! Content validation by type: whether a published document parses as its declared type,
//! and the policy (`reject | warn | off`, globally and per namespace) that says what a
//! failure does. The checks are pure functions; the service applies the policy
//! (`nacelle-service/src/write.rs`) and no adapter repeats any of it.
//!
//! What each type checks:
//! - `json`: one JSON value (serde_json), nothing but whitespace after it;
//! - `yaml`: every document of the stream (`---` separated, as Spring's multi-document
//!   files) parses (serde_yaml_ng, libyaml's grammar) and no mapping has a key twice;
//! - `xml`: well-formedness (quick-xml): matching and closed tags, one root element, no
//!   text outside it, well-formed attributes without duplicates, closed references,
//!   comments without `--`. DTDs are not interpreted, so undeclared entities pass;
//! - `toml`: a TOML document (the `toml` crate), duplicate keys included;
//! - `properties`: what Java's `Properties.load` refuses: a malformed `\uxxxx` escape
//!   (fewer than four hex digits), after Java's line continuation rules. Everything else
//!   is a valid properties file to Java (a line without a separator is a key with an empty
//!   value), so nothing else is refused;
//! - `text`, `html`: never checked.
//!
//! A [`ContentError`] names the parser's problem and, where the parser gives it, the line
//! and column (1-based). Its message never quotes a value of the document; it may name a
//! key or an element (a duplicate key, a mismatched end tag).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::de::{Deserialize, IgnoredAny};

use crate::error::CoreError;
use crate::key::{ConfigType, NamespaceId};

/// What a publish whose content does not parse as its type does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ValidationMode {
    /// The publish fails with [`CoreError::Invalid`] naming the problem.
    Reject,
    /// The publish succeeds; the problem is logged (key and problem, never the content).
    #[default]
    Warn,
    /// The content is not parsed.
    Off,
}

impl ValidationMode {
    /// The setting's spelling (`reject`, `warn`, `off`).
    pub fn as_str(self) -> &'static str {
        match self {
            ValidationMode::Reject => "reject",
            ValidationMode::Warn => "warn",
            ValidationMode::Off => "off",
        }
    }
}

impl FromStr for ValidationMode {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, CoreError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "reject" => Ok(ValidationMode::Reject),
            "warn" => Ok(ValidationMode::Warn),
            "off" => Ok(ValidationMode::Off),
            other => Err(CoreError::invalid(format!(
                "unknown content validation mode `{other}` (reject, warn or off)"
            ))),
        }
    }
}

impl fmt::Display for ValidationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The validation mode of every namespace: a default and per-namespace overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationPolicy {
    /// The mode of namespaces without an override.
    pub default: ValidationMode,
    /// Overrides by (normalised) namespace id.
    pub namespaces: HashMap<NamespaceId, ValidationMode>,
}

impl ValidationPolicy {
    /// The same mode everywhere.
    pub fn uniform(mode: ValidationMode) -> Self {
        ValidationPolicy {
            default: mode,
            namespaces: HashMap::new(),
        }
    }

    /// `default` with the overrides of `list`: `ns=mode` entries separated by commas
    /// (`dev=off,prod=reject`); blanks around entries are ignored, `public` (or an empty
    /// id) names the default namespace, a namespace given twice is an error.
    pub fn parse(default: ValidationMode, list: &str) -> Result<Self, CoreError> {
        let mut namespaces = HashMap::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((ns, mode)) = entry.split_once('=') else {
                return Err(CoreError::invalid(format!(
                    "`{entry}` is not `namespace=mode`"
                )));
            };
            let id = NamespaceId::parse(Some(ns))?;
            let mode: ValidationMode = mode.parse()?;
            if namespaces.insert(id, mode).is_some() {
                return Err(CoreError::invalid(format!(
                    "namespace `{}` is given twice",
                    ns.trim()
                )));
            }
        }
        Ok(ValidationPolicy {
            default,
            namespaces,
        })
    }

    /// The mode of `namespace`.
    pub fn mode_for(&self, namespace: &NamespaceId) -> ValidationMode {
        self.namespaces
            .get(namespace)
            .copied()
            .unwrap_or(self.default)
    }
}

/// Content that does not parse as its declared type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentError {
    /// The declared type.
    pub config_type: ConfigType,
    /// 1-based line of the problem, when the parser gives it.
    pub line: Option<usize>,
    /// 1-based column (in characters) of the problem, when the parser gives it.
    pub column: Option<usize>,
    /// The parser's problem, without the position.
    pub message: String,
}

impl fmt::Display for ContentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "content is not valid {}", self.config_type.as_str())?;
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " at line {l}, column {c}")?,
            (Some(l), None) => write!(f, " at line {l}")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ContentError {}

/// Whether content of `config_type` is checked at all (`text` and `html` never are).
pub fn is_checked(config_type: ConfigType) -> bool {
    !matches!(config_type, ConfigType::Text | ConfigType::Html)
}

/// Checks that `content` parses as `config_type`; `text` and `html` always pass.
pub fn check_syntax(config_type: ConfigType, content: &str) -> Result<(), ContentError> {
    let fail = |position: Option<(usize, usize)>, message: String| ContentError {
        config_type,
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
        message,
    };
    match config_type {
        ConfigType::Text | ConfigType::Html => Ok(()),
        ConfigType::Json => check_json(content).map_err(|(p, m)| fail(p, m)),
        ConfigType::Yaml => check_yaml(content).map_err(|(p, m)| fail(p, m)),
        ConfigType::Xml => check_xml(content).map_err(|(p, m)| fail(p, m)),
        ConfigType::Toml => check_toml(content).map_err(|(p, m)| fail(p, m)),
        ConfigType::Properties => check_properties(content).map_err(|(p, m)| fail(p, m)),
    }
}

/// A problem: its position (line, column), when known, and the parser's message.
type Problem = (Option<(usize, usize)>, String);

/// `message` without a position suffix the parser added (` at line L column C`).
pub(crate) fn strip_position(message: String, line: usize, column: usize) -> String {
    let suffix = format!(" at line {line} column {column}");
    match message.find(&suffix) {
        Some(at) => format!("{}{}", &message[..at], &message[at + suffix.len()..]),
        None => message,
    }
}

/// The 1-based (line, column in characters) of byte offset `at` of `text`.
fn position_of(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn check_json(content: &str) -> Result<(), Problem> {
    match serde_json::from_str::<IgnoredAny>(content) {
        Ok(_) => Ok(()),
        Err(e) => {
            let (line, column) = (e.line(), e.column());
            let position = (line > 0).then_some((line, column));
            Err((position, strip_position(e.to_string(), line, column)))
        }
    }
}

fn check_yaml(content: &str) -> Result<(), Problem> {
    for document in serde_yaml_ng::Deserializer::from_str(content) {
        if let Err(e) = yaml::Unique::deserialize(document) {
            let position = e.location().map(|l| (l.line(), l.column()));
            let message = match position {
                Some((line, column)) => strip_position(e.to_string(), line, column),
                None => e.to_string(),
            };
            return Err((position, message));
        }
    }
    Ok(())
}

/// A YAML value walked without being built, refusing a mapping that has a key twice (the
/// YAML spec requires unique keys; libyaml does not check, Spring's loader does). Keys are
/// compared by value as YAML resolves them (`a` and `'a'` are one key, `1` and `"1"` two);
/// complex keys (sequences, mappings) and the merge key `<<` are not compared.
mod yaml {
    use std::collections::HashSet;
    use std::fmt;

    use serde::de::{
        Deserialize, Deserializer, EnumAccess, Error, MapAccess, SeqAccess, VariantAccess, Visitor,
    };

    /// Any value, checked.
    pub struct Unique;

    impl<'de> Deserialize<'de> for Unique {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(UniqueVisitor)
        }
    }

    struct UniqueVisitor;

    macro_rules! scalars {
        ($($f:ident: $t:ty),*) => {
            $(fn $f<E: Error>(self, _: $t) -> Result<Unique, E> { Ok(Unique) })*
        };
    }

    impl<'de> Visitor<'de> for UniqueVisitor {
        type Value = Unique;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any YAML value")
        }

        scalars!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_i128: i128,
            visit_u128: u128, visit_f64: f64, visit_str: &str, visit_bytes: &[u8]);

        fn visit_unit<E: Error>(self) -> Result<Unique, E> {
            Ok(Unique)
        }

        fn visit_none<E: Error>(self) -> Result<Unique, E> {
            Ok(Unique)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Unique, D::Error> {
            Unique::deserialize(d)
        }

        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Unique, D::Error> {
            Unique::deserialize(d)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
            while seq.next_element::<Unique>()?.is_some() {}
            Ok(Unique)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
            let mut seen = HashSet::new();
            while let Some(Key(key)) = map.next_key::<Key>()? {
                map.next_value::<Unique>()?;
                if let Some(key) = key {
                    if key != Scalar::Str("<<".into()) && !seen.insert(key.clone()) {
                        return Err(A::Error::custom(format!(
                            "duplicate key {key} in the mapping that starts here"
                        )));
                    }
                }
            }
            Ok(Unique)
        }

        /// A tagged value (`!tag value`).
        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Unique, A::Error> {
            let (Unique, variant) = data.variant::<Unique>()?;
            variant.newtype_variant::<Unique>()
        }
    }

    /// A mapping key as YAML resolves it; `None` for a key that is not compared.
    struct Key(Option<Scalar>);

    #[derive(Clone, PartialEq, Eq, Hash)]
    enum Scalar {
        Str(String),
        Int(i128),
        Big(u128),
        Float(u64),
        Bool(bool),
        Null,
    }

    impl fmt::Display for Scalar {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Scalar::Str(s) => write!(f, "`{s}`"),
                Scalar::Int(i) => write!(f, "{i}"),
                Scalar::Big(u) => write!(f, "{u}"),
                Scalar::Float(bits) => write!(f, "{}", f64::from_bits(*bits)),
                Scalar::Bool(b) => write!(f, "{b}"),
                Scalar::Null => f.write_str("null"),
            }
        }
    }

    impl<'de> Deserialize<'de> for Key {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(KeyVisitor)
        }
    }

    struct KeyVisitor;

    impl<'de> Visitor<'de> for KeyVisitor {
        type Value = Key;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a YAML mapping key")
        }

        fn visit_bool<E: Error>(self, v: bool) -> Result<Key, E> {
            Ok(Key(Some(Scalar::Bool(v))))
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<Key, E> {
            Ok(Key(Some(Scalar::Int(v.into()))))
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<Key, E> {
            Ok(Key(Some(Scalar::Int(v.into()))))
        }

        fn visit_i128<E: Error>(self, v: i128) -> Result<Key, E> {
            Ok(Key(Some(Scalar::Int(v))))
        }

        fn visit_u128<E: Error>(self, v: u128) -> Result<Key, E> {
            Ok(Key(Some(
                i128::try_from(v).map_or(Scalar::Big(v), Scalar::Int),
            )))
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<Key, E> {
            // `0.0` and `-0.0` are one key; NaN keys are never equal, so never compared.
            let v = if v == 0.0 { 0.0 } else { v };
            Ok(Key((!v.is_nan()).then(|| Scalar::Float(v.to_bits()))))
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Key, E> {
            Ok(Key(Some(Scalar::Str(v.to_string()))))
        }

        fn visit_bytes<E: Error>(self, _: &[u8]) -> Result<Key, E> {
            Ok(Key(None))
        }

        fn visit_unit<E: Error>(self) -> Result<Key, E> {
            Ok(Key(Some(Scalar::Null)))
        }

        fn visit_none<E: Error>(self) -> Result<Key, E> {
            Ok(Key(Some(Scalar::Null)))
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
            Key::deserialize(d)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Key, A::Error> {
            UniqueVisitor.visit_seq(seq).map(|Unique| Key(None))
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Key, A::Error> {
            UniqueVisitor.visit_map(map).map(|Unique| Key(None))
        }

        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Key, A::Error> {
            UniqueVisitor.visit_enum(data).map(|Unique| Key(None))
        }
    }
}

fn check_toml(content: &str) -> Result<(), Problem> {
    match toml::from_str::<toml::Table>(content) {
        Ok(_) => Ok(()),
        // `message()`, not `Display`: the latter quotes the offending line.
        Err(e) => Err((
            e.span().map(|s| position_of(content, s.start)),
            e.message().trim_end().replace('\n', "; "),
        )),
    }
}

fn check_xml(content: &str) -> Result<(), Problem> {
    use quick_xml::events::Event;
    use quick_xml::Reader;

    if let Some(at) = content.find(|c: char| {
        matches!(c, '\0'..='\x08' | '\x0b' | '\x0c' | '\x0e'..='\x1f' | '\u{fffe}' | '\u{ffff}')
    }) {
        return Err((
            Some(position_of(content, at)),
            "a character XML does not allow (a control character)".into(),
        ));
    }
    let mut reader = Reader::from_str(content);
    let config = reader.config_mut();
    config.check_end_names = true;
    config.check_comments = true;
    let at = |pos: u64| {
        Some(position_of(
            content,
            usize::try_from(pos).unwrap_or(usize::MAX),
        ))
    };
    let mut depth = 0usize;
    let mut roots = 0usize;
    let mut open: Vec<String> = Vec::new();
    let mut doctype = false;
    loop {
        let start = reader.buffer_position();
        let event = match reader.read_event() {
            Ok(event) => event,
            Err(e) => return Err((at(reader.error_position()), e.to_string())),
        };
        let element = |name: &str| name.to_string();
        match event {
            Event::Start(e) | Event::Empty(e) if depth == 0 && roots == 1 => {
                return Err((
                    at(start),
                    format!(
                        "a second root element `<{}>`: a document has one",
                        element(e.name().as_ref())
                    ),
                ));
            }
            Event::Start(e) => {
                check_element(&e).map_err(|m| (at(start), m))?;
                if depth == 0 {
                    roots += 1;
                }
                depth += 1;
                open.push(element(e.name().as_ref()));
            }
            Event::Empty(e) => {
                check_element(&e).map_err(|m| (at(start), m))?;
                if depth == 0 {
                    roots += 1;
                }
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                open.pop();
            }
            Event::Text(t) if depth == 0 && !t.trim().is_empty() => {
                return Err((at(start), "text outside the root element".into()));
            }
            Event::GeneralRef(_) | Event::CData(_) if depth == 0 => {
                return Err((at(start), "content outside the root element".into()));
            }
            Event::GeneralRef(r) => check_reference(&r, doctype).map_err(|m| (at(start), m))?,
            Event::DocType(_) => doctype = true,
            Event::Eof => break,
            _ => {}
        }
    }
    if let Some(name) = open.last() {
        return Err((
            at(content.len() as u64),
            format!("start tag not closed: `</{name}>` not found before end of input"),
        ));
    }
    if roots == 0 {
        return Err((None, "no root element".into()));
    }
    Ok(())
}

/// The element's name is an XML name (approximately: ASCII is checked exactly, any
/// non-ASCII character is allowed), its attributes parse (`name="value"`) and none is given
/// twice.
fn check_element(e: &quick_xml::events::BytesStart<'_>) -> Result<(), String> {
    let name = e.name();
    let name: &str = name.as_ref();
    let start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':' || !c.is_ascii();
    let rest = |c: char| start(c) || c.is_ascii_digit() || c == '-' || c == '.';
    let mut chars = name.chars();
    if !chars.next().is_some_and(start) || !chars.all(rest) {
        return Err(format!("`{name}` is not a valid element name"));
    }
    for attribute in e.attributes().with_checks(true) {
        attribute.map_err(|err| err.to_string())?;
    }
    Ok(())
}

/// A character reference names a character XML allows; an entity reference is one of the
/// five predefined ones unless the document has a DTD (which is not interpreted).
fn check_reference(r: &quick_xml::events::BytesRef<'_>, doctype: bool) -> Result<(), String> {
    const PREDEFINED: [&str; 5] = ["lt", "gt", "amp", "apos", "quot"];
    let name: &str = r;
    if r.is_char_ref() {
        return match r.resolve_char_ref() {
            Ok(Some(_)) => Ok(()),
            Ok(None) | Err(_) => Err(format!("`&{name};` is not a valid character reference")),
        };
    }
    if doctype || PREDEFINED.contains(&name) {
        return Ok(());
    }
    Err(format!("undeclared entity `&{name};`"))
}

/// Java's `Properties.load`: logical lines (comment and blank lines skipped, a line ending
/// in an odd number of backslashes continues on the next, whose leading blanks are
/// dropped), then every `\u` escape of a logical line needs four hex digits.
fn check_properties(content: &str) -> Result<(), Problem> {
    // The escape state carries across continued lines, as in Java (the backslash that
    // continues a line is dropped, the rest is joined).
    #[derive(Clone, Copy)]
    enum Escape {
        None,
        Backslash,
        /// `\u` seen at (line, column), with this many hex digits after it.
        Unicode(usize, usize, usize),
    }
    let malformed = |line: usize, column: usize, why: &str| {
        Err((
            Some((line, column)),
            format!("malformed \\uxxxx encoding: {why}"),
        ))
    };
    let mut escape = Escape::None;
    let mut continued = false;
    for (index, raw) in content.split('\n').enumerate() {
        let line_no = index + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        // Java also ends a line at a lone `\r` (lines are numbered by `\n` here).
        for part in line.split('\r') {
            let trimmed = part.trim_start_matches([' ', '\t', '\x0c']);
            let offset = part.chars().count() - trimmed.chars().count();
            if !continued && (trimmed.is_empty() || trimmed.starts_with(['#', '!'])) {
                continue;
            }
            // Java's line reader: an odd run of trailing backslashes continues the line,
            // and that last backslash is dropped before escapes are read.
            let trailing = trimmed.chars().rev().take_while(|&c| c == '\\').count();
            continued = trailing % 2 == 1;
            let body = if continued {
                &trimmed[..trimmed.len() - 1]
            } else {
                trimmed
            };
            for (i, ch) in body.chars().enumerate() {
                let column = offset + i + 1;
                escape = match escape {
                    Escape::Unicode(l, c, n) if ch.is_ascii_hexdigit() => {
                        if n == 3 {
                            Escape::None
                        } else {
                            Escape::Unicode(l, c, n + 1)
                        }
                    }
                    Escape::Unicode(l, c, _) => {
                        return malformed(l, c, "fewer than four hex digits");
                    }
                    Escape::Backslash if ch == 'u' => Escape::Unicode(line_no, column - 1, 0),
                    Escape::Backslash => Escape::None,
                    Escape::None if ch == '\\' => Escape::Backslash,
                    Escape::None => Escape::None,
                };
            }
            if !continued {
                if let Escape::Unicode(l, c, _) = escape {
                    return malformed(l, c, "fewer than four hex digits");
                }
            }
        }
    }
    if let Escape::Unicode(l, c, _) = escape {
        // The input ended inside a continued escape.
        return malformed(l, c, "fewer than four hex digits");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(t: ConfigType, s: &str) -> ContentError {
        match check_syntax(t, s) {
            Err(e) => e,
            Ok(()) => panic!("{t:?} should be invalid: {s:?}"),
        }
    }

    fn ok(t: ConfigType, s: &str) {
        if let Err(e) = check_syntax(t, s) {
            panic!("{t:?} should be valid: {s:?}: {e}");
        }
    }

    #[test]
    fn json() {
        ok(ConfigType::Json, r#"{"a": [1, 2, {"b": null}]}"#);
        ok(ConfigType::Json, " 42 \n");
        let e = err(ConfigType::Json, "{\n  \"a\": 1,\n  \"b\": }\n");
        assert_eq!((e.line, e.column), (Some(3), Some(8)));
        assert_eq!(e.message, "expected value");
        assert_eq!(
            e.to_string(),
            "content is not valid json at line 3, column 8: expected value"
        );
        let e = err(ConfigType::Json, "{\"a\": 1} x");
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("trailing characters"), "{e}");
        err(ConfigType::Json, "{\"a\": \"secret");
    }

    #[test]
    fn yaml() {
        ok(ConfigType::Yaml, "a: 1\nb:\n  - x\n  - y\n");
        ok(
            ConfigType::Yaml,
            "spring:\n  profiles: dev\n---\nspring:\n  profiles: prod\n",
        );
        let e = err(ConfigType::Yaml, "a: 1\nb: c: d\n");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.column.is_some());
        assert!(e.message.contains("mapping values are not allowed"), "{e}");
        assert!(!e.message.contains(" at line 2 column"), "{e}");
        // An error in the second document is found too.
        let e = err(ConfigType::Yaml, "a: 1\n---\nb: [1, 2\n");
        assert!(e.line.is_some_and(|l| l >= 3), "{e}");
        let e = err(ConfigType::Yaml, "a:\n\tb: 1\n");
        assert_eq!(e.line, Some(2), "{e}");
        err(ConfigType::Yaml, "a: *nope\n");
        // Duplicate keys, at any depth; `a` and `'a'` are one key, `1` and `"1"` two.
        for dup in [
            "a: 1\nb: 2\na: 3\n",
            "x:\n  b: 1\n  'b': 2\n",
            "{1: a, 1: b}",
            "- {~: 1, null: 2}",
        ] {
            let e = err(ConfigType::Yaml, dup);
            assert!(e.message.contains("duplicate key"), "{dup:?}: {e}");
            assert!(e.line.is_some(), "{dup:?}: {e}");
        }
        ok(
            ConfigType::Yaml,
            "1: a\n\"1\": b\nbig: 99999999999999999999999999\n",
        );
        ok(
            ConfigType::Yaml,
            "base: &b\n  x: 1\nc:\n  <<: *b\n  y: 2\nt: !custom {k: 1}\n",
        );
        ok(ConfigType::Yaml, "a: 1\n---\na: 2\n");
        // The position of a duplicate is its mapping's; the message names the path.
        let e = err(ConfigType::Yaml, "x:\n  b: 1\n  b: 2\n");
        assert_eq!(
            e.to_string(),
            "content is not valid yaml at line 2, column 3: \
             x: duplicate key `b` in the mapping that starts here"
        );
    }

    #[test]
    fn xml() {
        ok(
            ConfigType::Xml,
            "<?xml version=\"1.0\"?>\n<!-- c -->\n<a x=\"1\"><b/>&amp;<![CDATA[<]]></a>\n",
        );
        let e = err(ConfigType::Xml, "<a>\n  <b></c>\n</a>");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.message.contains("</b>") || e.message.contains("</c>"),
            "{e}"
        );
        let e = err(ConfigType::Xml, "<a>\n<b>\n");
        assert!(e.message.contains("not closed"), "{e}");
        let e = err(ConfigType::Xml, "<a/>\n<b/>");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("root"), "{e}");
        err(ConfigType::Xml, "text only");
        err(ConfigType::Xml, "<a/> trailing");
        let e = err(ConfigType::Xml, "<a>\n<b x=\"1\" x=\"2\"/></a>");
        assert_eq!(e.line, Some(2), "{e}");
        err(ConfigType::Xml, "<a x=1></a>");
        err(ConfigType::Xml, "<a><!-- a -- b --></a>");
        let e = err(ConfigType::Xml, "<a>\n x & y</a>");
        assert_eq!(e.line, Some(2), "{e}");
        let e = err(ConfigType::Xml, "<a>\n<b>&nope;</b></a>");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("undeclared entity"), "{e}");
        ok(
            ConfigType::Xml,
            "<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;&#x41;&#65;&lt;</a>",
        );
        err(ConfigType::Xml, "<a>&#xZZ;</a>");
        err(ConfigType::Xml, "<a>&#0;</a>");
        let e = err(ConfigType::Xml, "<a>\n<1b/></a>");
        assert_eq!(e.line, Some(2), "{e}");
        let e = err(ConfigType::Xml, "<a>\nx\u{0}</a>");
        assert_eq!((e.line, e.column), (Some(2), Some(2)), "{e}");
        ok(
            ConfigType::Xml,
            "<ns:a xmlns:ns=\"u\"><b-c.d_e/><é/></ns:a>",
        );
    }

    #[test]
    fn toml() {
        ok(ConfigType::Toml, "a = 1\n[t]\nb = \"x\"\n");
        let e = err(ConfigType::Toml, "a = 1\nb = \n");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.column.is_some());
        let e = err(ConfigType::Toml, "a = 1\na = 2\n");
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.message.contains("duplicate"), "{e}");
        // The message is the parser's, not its quote of the offending line.
        let e = err(ConfigType::Toml, "password = \"s3cret\nx = 1\n");
        assert!(!e.message.contains("s3cret"), "{e}");
    }

    #[test]
    fn properties() {
        ok(
            ConfigType::Properties,
            "a=1\nb : 2\nc 3\nflag\n# \\u00 in a comment\n! too\n",
        );
        ok(
            ConfigType::Properties,
            "name=\\u0041\\u00e9\nescaped=\\\\u00\n",
        );
        // A `\u` escape may be split by a line continuation, as Java joins the lines.
        ok(ConfigType::Properties, "a=\\u00\\\n    41\n");
        ok(
            ConfigType::Properties,
            "a=x\\\n# not a comment: continued\\u0041\n",
        );
        ok(ConfigType::Properties, "a=\\\n");
        err(ConfigType::Properties, "a=\\u0\\\n");
        let e = err(ConfigType::Properties, "a=1\nb=x\\u12g4\n");
        assert_eq!((e.line, e.column), (Some(2), Some(4)), "{e}");
        assert!(e.message.contains("malformed \\uxxxx"), "{e}");
        let e = err(ConfigType::Properties, "a=1\r\n  b=\\u12\r\nc=3");
        assert_eq!((e.line, e.column), (Some(2), Some(5)), "{e}");
        let e = err(ConfigType::Properties, "key\\u=1");
        assert_eq!((e.line, e.column), (Some(1), Some(4)), "{e}");
        err(ConfigType::Properties, "a=\\u004");
        err(ConfigType::Properties, "a=\\u00\rb=1");
    }

    #[test]
    fn text_and_html_are_never_checked() {
        assert!(!is_checked(ConfigType::Text) && !is_checked(ConfigType::Html));
        assert!(is_checked(ConfigType::Yaml));
        ok(ConfigType::Text, "{not json");
        ok(ConfigType::Html, "<p><b></p>");
    }

    #[test]
    fn modes_and_policy() {
        assert_eq!(
            " Reject ".parse::<ValidationMode>().ok(),
            Some(ValidationMode::Reject)
        );
        assert!("strict".parse::<ValidationMode>().is_err());
        assert_eq!(ValidationMode::default(), ValidationMode::Warn);
        let p = ValidationPolicy::parse(ValidationMode::Warn, " dev=off , prod=reject,public=off")
            .map_err(|e| e.to_string());
        let p = match p {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let ns = |s: &str| NamespaceId::parse(Some(s)).unwrap_or_default();
        assert_eq!(p.mode_for(&ns("dev")), ValidationMode::Off);
        assert_eq!(p.mode_for(&ns("prod")), ValidationMode::Reject);
        assert_eq!(p.mode_for(&ns("")), ValidationMode::Off);
        assert_eq!(p.mode_for(&ns("other")), ValidationMode::Warn);
        assert!(ValidationPolicy::parse(ValidationMode::Warn, "dev").is_err());
        assert!(ValidationPolicy::parse(ValidationMode::Warn, "dev=strict").is_err());
        assert!(ValidationPolicy::parse(ValidationMode::Warn, "dev=off,dev=warn").is_err());
        assert!(ValidationPolicy::parse(ValidationMode::Warn, "a b=off").is_err());
        assert_eq!(
            ValidationPolicy::parse(ValidationMode::Off, " ").ok(),
            Some(ValidationPolicy::uniform(ValidationMode::Off))
        );
    }

    /// A large valid document of each type passes, and the time of its check is printed
    /// (never asserted). The suite checks 64 KiB documents; the figure in
    /// `docs/operations.md` is 1 MiB:
    /// `NACELLE_CONTENT_COST_BYTES=1048576 cargo test -p nacelle-core --release --lib content::tests::cost -- --nocapture`.
    #[test]
    fn cost() {
        let size: usize = std::env::var("NACELLE_CONTENT_COST_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64 * 1024);
        let fill = |entry: &dyn Fn(usize) -> String, head: &str, tail: &str| {
            let mut s = String::from(head);
            let mut i = 0;
            while s.len() < size {
                s.push_str(&entry(i));
                i += 1;
            }
            s.push_str(tail);
            s
        };
        let docs = [
            (
                ConfigType::Json,
                fill(
                    &|i| format!("\"key{i}\": {{\"v\": \"value {i}\", \"n\": {i}}},\n"),
                    "{\n",
                    "\"end\": 0}\n",
                ),
            ),
            (
                ConfigType::Yaml,
                fill(&|i| format!("key{i}:\n  v: value {i}\n  n: {i}\n"), "", ""),
            ),
            (
                ConfigType::Xml,
                fill(
                    &|i| format!("  <e id=\"{i}\"><v>value {i}</v></e>\n"),
                    "<root>\n",
                    "</root>\n",
                ),
            ),
            (
                ConfigType::Toml,
                fill(&|i| format!("[t{i}]\nv = \"value {i}\"\nn = {i}\n"), "", ""),
            ),
            (
                ConfigType::Properties,
                fill(&|i| format!("key.{i}=value {i} \\u0041\n"), "", ""),
            ),
        ];
        for (ty, doc) in &docs {
            ok(*ty, doc);
            let runs = 5;
            let start = std::time::Instant::now();
            for _ in 0..runs {
                ok(*ty, doc);
            }
            let each = start.elapsed() / runs;
            println!(
                "{:<10} {:>8} bytes: {:?} per check",
                ty.as_str(),
                doc.len(),
                each
            );
        }
    }
}
