//! The JSON Schemas a node holds, compiled ([`SchemaState`]), and the check content passes
//! against them: the config core's content gate on every publish
//! ([`crate::config::gates::ContentGate`]), and the dry run callers ask for.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use nacelle_core::pattern::Part;
use nacelle_core::structured::{documents, STRUCTURED_TYPES};
use nacelle_core::{ConfigKey, ConfigType, CoreError, NamespaceId, SchemaRecord};
use parking_lot::RwLock;
use serde_json::Value;

use crate::config::gates::{ContentGate, GateFuture};

/// The largest schema document accepted, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;
/// The most problems a check reports (a publish names the first).
pub const MAX_REPORTED_PROBLEMS: usize = 20;
/// Content up to this many bytes is checked on the calling task, larger on the blocking
/// pool (as the syntax check by type).
const INLINE_CHECK_BYTES: usize = 16 * 1024;

/// Why content does not pass the schemas of its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    /// The schema's name (`namespace>>group>>dataId`).
    pub schema: String,
    /// The document of a YAML stream (1-based), when the stream has several.
    pub document: Option<usize>,
    /// JSON pointer of the failing value (`""` is the whole document); `None` when the
    /// content could not be checked at all (not structured, does not parse).
    pub path: Option<String>,
    /// The rule that failed: a JSON Schema keyword (`maximum`, `required` …), `syntax`
    /// (the content does not parse) or `content-type` (not a structured type).
    pub rule: String,
    /// Where the rule is in the schema (JSON pointer), for a keyword.
    pub schema_path: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "schema {} refused ", self.schema)?;
        if let Some(d) = self.document {
            write!(f, "document {d} ")?;
        }
        match &self.path {
            Some(p) if p.is_empty() => write!(f, "/ (the document)")?,
            Some(p) => write!(f, "{p}")?,
            None => write!(f, "the content")?,
        }
        write!(f, ": {} (rule {}", self.message, self.rule)?;
        if let Some(at) = &self.schema_path {
            write!(f, " at #{at}")?;
        }
        write!(f, ")")
    }
}

/// The result of checking content against the schemas of its key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaCheck {
    /// The names of the schemas that apply to the key, in order.
    pub schemas: Vec<String>,
    /// What fails (at most [`MAX_REPORTED_PROBLEMS`]); empty: the content passes.
    pub problems: Vec<SchemaProblem>,
}

/// The display name of a schema: `namespace>>group>>dataId` (`public` for the default
/// namespace), the shape of a fuzzy-watch pattern.
pub(crate) fn schema_name(namespace: &NamespaceId, group: &str, data_id: &str) -> String {
    let ns = if namespace.as_str().is_empty() {
        "public"
    } else {
        namespace.as_str()
    };
    format!("{ns}>>{group}>>{data_id}")
}

/// A `$ref` outside the document is never fetched.
struct Offline;

impl jsonschema::Retrieve for Offline {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("{uri} is outside the schema: external references are not fetched").into())
    }
}

/// Compiles a schema document; the problem as text.
pub(crate) fn compile(text: &str) -> Result<jsonschema::Validator, String> {
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "the schema is {} bytes, more than the limit of {MAX_SCHEMA_BYTES}",
            text.len()
        ));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("the schema is not JSON: {e}"))?;
    if !matches!(value, Value::Object(_) | Value::Bool(_)) {
        return Err("a JSON Schema is an object (or true/false)".into());
    }
    jsonschema::options()
        .with_retriever(Offline)
        .build(&value)
        .map_err(|e| format!("the schema does not compile: {e}"))
}

/// The problems of `content` (of `config_type`) against `schemas`: at most `limit`.
fn problems_of(
    schemas: &[Arc<Compiled>],
    config_type: ConfigType,
    content: &str,
    limit: usize,
) -> Vec<SchemaProblem> {
    let mut out = Vec::new();
    let Some(first) = schemas.first() else {
        return out;
    };
    let whole = |rule: &str, message: String| SchemaProblem {
        schema: first.name.clone(),
        document: None,
        path: None,
        rule: rule.to_string(),
        schema_path: None,
        message,
    };
    let docs = match documents(config_type, content) {
        None => {
            out.push(whole(
                "content-type",
                format!(
                    "a schema applies to this key and its content type `{}` is not one a schema checks ({STRUCTURED_TYPES}): publish it with its type",
                    config_type.as_str()
                ),
            ));
            return out;
        }
        Some(Err(e)) => {
            out.push(whole("syntax", e.to_string()));
            return out;
        }
        Some(Ok(docs)) => docs,
    };
    let several = docs.len() > 1;
    for schema in schemas {
        for (i, doc) in docs.iter().enumerate() {
            for error in schema.validator.iter_errors(doc) {
                if out.len() >= limit {
                    return out;
                }
                out.push(SchemaProblem {
                    schema: schema.name.clone(),
                    document: several.then_some(i + 1),
                    path: Some(error.instance_path().to_string()),
                    rule: error.kind().keyword().to_string(),
                    schema_path: Some(error.schema_path().to_string()),
                    message: error.to_string(),
                });
            }
        }
    }
    out
}

/// One schema, compiled.
pub(crate) struct Compiled {
    pub(crate) record: SchemaRecord,
    pub(crate) name: String,
    pub(crate) group: Part,
    pub(crate) data_id: Part,
    pub(crate) validator: jsonschema::Validator,
}

impl Compiled {
    pub(crate) fn covers(&self, key: &ConfigKey) -> bool {
        self.group.matches(key.group()) && self.data_id.matches(key.data_id())
    }
}

/// The schemas a node holds: by namespace, in (group, dataId) pattern order.
#[derive(Default)]
pub(crate) struct SchemaState {
    pub(crate) current: RwLock<Arc<HashMap<NamespaceId, Vec<Arc<Compiled>>>>>,
    /// One re-read at a time, so an older read never replaces a newer one.
    pub(crate) refresh: tokio::sync::Mutex<()>,
}

impl SchemaState {
    /// The compiled schemas that apply to `key`.
    fn of(&self, key: &ConfigKey) -> Vec<Arc<Compiled>> {
        let current = self.current.read().clone();
        current
            .get(key.namespace())
            .map(|list| list.iter().filter(|s| s.covers(key)).cloned().collect())
            .unwrap_or_default()
    }

    /// Checks content against the schemas of its key, on the blocking pool when large.
    pub(crate) async fn check(
        &self,
        key: &ConfigKey,
        config_type: ConfigType,
        content: &bytes::Bytes,
        limit: usize,
    ) -> Result<SchemaCheck, CoreError> {
        let schemas = self.of(key);
        if schemas.is_empty() {
            return Ok(SchemaCheck::default());
        }
        let names = schemas.iter().map(|s| s.name.clone()).collect();
        let text = std::str::from_utf8(content)
            .map_err(|_| CoreError::invalid("the content is not UTF-8"))?;
        let problems = if content.len() <= INLINE_CHECK_BYTES {
            problems_of(&schemas, config_type, text, limit)
        } else {
            let content = content.clone();
            tokio::task::spawn_blocking(move || {
                let text = std::str::from_utf8(&content).unwrap_or_default();
                problems_of(&schemas, config_type, text, limit)
            })
            .await
            .map_err(|e| CoreError::invalid(format!("the schema check failed: {e}")))?
        };
        Ok(SchemaCheck {
            schemas: names,
            problems,
        })
    }

    /// Replaces the schemas by `records` (as the database holds them), compiling those
    /// whose text changed. A stored schema that does not compile (written by another version, or by hand) is
    /// left out with a warning: it checks nothing until it is set again.
    pub(crate) fn replace(&self, records: Vec<SchemaRecord>) {
        let old = self.current.read().clone();
        let mut next: HashMap<NamespaceId, Vec<Arc<Compiled>>> = HashMap::new();
        for record in records {
            let reused = old.get(&record.namespace).and_then(|list| {
                list.iter()
                    .find(|c| {
                        c.record.group == record.group
                            && c.record.data_id == record.data_id
                            && c.record.schema == record.schema
                    })
                    .cloned()
            });
            let compiled = match reused {
                Some(c) if c.record == record => c,
                Some(c) => Arc::new(Compiled {
                    record,
                    name: c.name.clone(),
                    group: c.group.clone(),
                    data_id: c.data_id.clone(),
                    validator: c.validator.clone(),
                }),
                None => match compiled(record) {
                    Ok(c) => Arc::new(c),
                    Err((name, e)) => {
                        tracing::warn!(schema = %name, error = %e, "a stored schema is left out: it does not compile");
                        continue;
                    }
                },
            };
            next.entry(compiled.record.namespace.clone())
                .or_default()
                .push(compiled);
        }
        *self.current.write() = Arc::new(next);
    }
}

/// One record compiled; its name and the problem when it does not compile.
fn compiled(record: SchemaRecord) -> Result<Compiled, (String, String)> {
    let name = schema_name(&record.namespace, &record.group, &record.data_id);
    let fail = |e: String| (name.clone(), e);
    let group = Part::glob(&record.group).ok_or_else(|| fail("bad group pattern".into()))?;
    let data_id = Part::glob(&record.data_id).ok_or_else(|| fail("bad dataId pattern".into()))?;
    let validator = compile(&record.schema).map_err(fail)?;
    Ok(Compiled {
        name: name.clone(),
        record,
        group,
        data_id,
        validator,
    })
}

impl ContentGate for SchemaState {
    /// The publish hook (called on the plaintext, for every variant and every protocol):
    /// the first problem is [`CoreError::Invalid`] naming the schema, the failing path
    /// and the rule.
    fn check<'a>(
        &'a self,
        key: &'a ConfigKey,
        config_type: ConfigType,
        content: &'a Bytes,
    ) -> GateFuture<'a> {
        Box::pin(async move {
            let check = SchemaState::check(self, key, config_type, content, 1).await?;
            match check.problems.into_iter().next() {
                Some(problem) => Err(CoreError::Invalid(problem.to_string())),
                None => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nacelle_core::pattern::check_pattern;

    fn compiled(group: &str, data_id: &str, schema: &str) -> Arc<Compiled> {
        let record = SchemaRecord {
            namespace: NamespaceId::from_trusted(""),
            group: group.into(),
            data_id: data_id.into(),
            schema: schema.into(),
            description: String::new(),
            src_user: String::new(),
            modified_ms: 0,
        };
        match super::compiled(record) {
            Ok(c) => Arc::new(c),
            Err((_, e)) => panic!("{e}"),
        }
    }

    const LIMITS: &str = r#"{"type":"object","required":["limits"],
        "properties":{"limits":{"type":"object","properties":{"max":{"type":"integer","maximum":1000}}}}}"#;

    #[test]
    fn problems_name_the_path_and_the_rule() {
        let s = [compiled("PAYMENTS", "*.yaml", LIMITS)];
        let p = problems_of(&s, ConfigType::Yaml, "limits:\n  max: 5000\n", 5);
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].to_string(),
            "schema public>>PAYMENTS>>*.yaml refused /limits/max: 5000 is greater than the \
             maximum of 1000 (rule maximum at #/properties/limits/properties/max/maximum)"
        );
        let p = problems_of(&s, ConfigType::Properties, "other=1\n", 5);
        assert_eq!(p[0].rule, "required");
        assert_eq!(p[0].path.as_deref(), Some(""));
        assert!(problems_of(&s, ConfigType::Toml, "[limits]\nmax = 10\n", 5).is_empty());
        let p = problems_of(&s, ConfigType::Yaml, "limits: {max: 1}\n---\nx: 1\n", 5);
        assert_eq!(p[0].document, Some(2));
        let p = problems_of(&s, ConfigType::Text, "x", 5);
        assert_eq!(p[0].rule, "content-type");
        let p = problems_of(&s, ConfigType::Json, "{", 5);
        assert_eq!(p[0].rule, "syntax");
    }

    #[test]
    fn bad_schemas_and_patterns_are_refused() {
        assert!(compile("{").is_err());
        assert!(compile("[1]").is_err());
        let e = compile(r#"{"type": 12}"#).expect_err("bad type");
        assert!(e.contains("does not compile"), "{e}");
        let e = compile(r#"{"$ref": "https://example.com/s.json"}"#).expect_err("remote");
        assert!(e.contains("does not compile"), "{e}");
        assert!(compile("true").is_ok());
        for bad in ["", " G", "a*b", "**", "a>>b"] {
            assert!(check_pattern(bad, "group", 128).is_err(), "{bad:?}");
        }
        assert!(check_pattern("*.yaml", "dataId", 255).is_ok());
    }

    #[test]
    fn recursive_and_internal_references_work() {
        // A schema referring to itself (a tree of any depth) and to its own `$defs`.
        let tree = r##"{"type":"object","properties":{"max":{"$ref":"#/$defs/small"},
            "children":{"type":"array","items":{"$ref":"#"}}},
            "$defs":{"small":{"type":"integer","maximum":10}}}"##;
        let s = [compiled("G", "*", tree)];
        let deep = r#"{"children":[{"children":[{"max":11}]}]}"#;
        let p = problems_of(&s, ConfigType::Json, deep, 5);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].path.as_deref(), Some("/children/0/children/0/max"));
        assert!(problems_of(&s, ConfigType::Json, r#"{"max":3}"#, 5).is_empty());
        // Only itself: compiles, and accepts anything (nothing else constrains it).
        let only_self = super::compiled(SchemaRecord {
            schema: r##"{"$ref":"#"}"##.into(),
            ..s[0].record.clone()
        });
        let Ok(only_self) = only_self else {
            panic!("a self reference does not compile")
        };
        assert!(problems_of(&[Arc::new(only_self)], ConfigType::Json, "[1]", 5).is_empty());
    }
}
