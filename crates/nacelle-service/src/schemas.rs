//! JSON Schemas of config keys (docs/schema-validation.md): a schema binds a JSON Schema
//! document to the keys of one namespace whose group and dataId match two patterns (the
//! five shapes of [`Part::glob`]: `*`, `x*`, `*x`, `*x*`, exact). A publish of a matching
//! key whose content is structured (json, yaml, properties, toml: converted by
//! [`nacelle_core::structured`]) must satisfy every matching schema; one that is not
//! structured is refused while a schema applies to its key.
//!
//! The schemas live in memory, compiled once per change ([`jsonschema::Validator`]): read
//! at `load`, again after every local `set`/`remove`, and every
//! [`SCHEMA_REFRESH`] by [`ConfigService::follow_schemas`] on a node that shares its
//! database (a schema set on another node applies here within that delay). A re-read
//! compiles only the schemas whose text changed.
//!
//! Schemas always refuse: they are an explicit opt-in, so the namespace's content
//! validation mode (`reject | warn | off`, which governs the syntax check by type) does
//! not soften them. `$ref` to anything outside the document (a URL, a file) is never
//! fetched: the validator is built with a retriever that refuses.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::pattern::{check_pattern, Part};
use nacelle_core::structured::{documents, STRUCTURED_TYPES};
use nacelle_core::{
    now_millis, Action, Caller, ConfigKey, ConfigType, CoreError, NamespaceId, SchemaRecord,
};
use nacelle_metrics::StoreOp;
use serde_json::Value;

use crate::schema_state::Compiled;
use crate::service::ConfigService;

/// The largest schema document accepted, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;
/// The most schemas a server holds, all namespaces together.
pub const MAX_SCHEMAS: usize = 1000;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 256;
/// The longest group pattern (the `group_id` column's length) and dataId pattern.
pub use nacelle_core::pattern::{MAX_DATA_ID_PATTERN_CHARS, MAX_GROUP_PATTERN_CHARS};
/// The most problems a check reports (a publish names the first).
pub const MAX_REPORTED_PROBLEMS: usize = 20;
/// How often a node re-reads the schemas when it shares its database with others.
pub const SCHEMA_REFRESH: Duration = Duration::from_secs(2);
/// Content up to this many bytes is checked on the calling task, larger on the blocking
/// pool (as the syntax check by type).
const INLINE_CHECK_BYTES: usize = 16 * 1024;

/// What a caller asks to set.
#[derive(Debug, Clone)]
pub struct SchemaSpec {
    pub namespace: NamespaceId,
    /// Group pattern.
    pub group: String,
    /// DataId pattern.
    pub data_id: String,
    /// The JSON Schema document, as text.
    pub schema: String,
    pub description: String,
}

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
fn schema_name(namespace: &NamespaceId, group: &str, data_id: &str) -> String {
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
fn compile(text: &str) -> Result<jsonschema::Validator, String> {
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

impl ConfigService {
    /// The compiled schemas that apply to `key`.
    fn schemas_of(&self, key: &ConfigKey) -> Vec<Arc<Compiled>> {
        let current = self.inner.schemas.current.read().clone();
        current
            .get(key.namespace())
            .map(|list| list.iter().filter(|s| s.covers(key)).cloned().collect())
            .unwrap_or_default()
    }

    /// Checks content against the schemas of its key, on the blocking pool when large.
    async fn run_check(
        &self,
        key: &ConfigKey,
        config_type: ConfigType,
        content: &bytes::Bytes,
        limit: usize,
    ) -> Result<SchemaCheck, CoreError> {
        let schemas = self.schemas_of(key);
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

    /// The publish hook (called on the plaintext, for every variant and every protocol):
    /// the first problem is [`CoreError::Invalid`] naming the schema, the failing path
    /// and the rule.
    pub(crate) async fn check_schemas(
        &self,
        key: &ConfigKey,
        config_type: ConfigType,
        content: &bytes::Bytes,
    ) -> Result<(), CoreError> {
        let check = self.run_check(key, config_type, content, 1).await?;
        match check.problems.into_iter().next() {
            Some(problem) => Err(CoreError::Invalid(problem.to_string())),
            None => Ok(()),
        }
    }

    /// Re-reads every schema from the database and compiles those whose text changed. A
    /// stored schema that does not compile (written by another version, or by hand) is
    /// left out with a warning: it checks nothing until it is set again.
    pub async fn refresh_schemas(&self) -> Result<(), CoreError> {
        let _one = self.inner.schemas.refresh.lock().await;
        let records = self
            .store_call(StoreOp::Schemas, self.inner.store.load_schemas())
            .await?;
        let old = self.inner.schemas.current.read().clone();
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
                None => match Self::compiled(record) {
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
        *self.inner.schemas.current.write() = Arc::new(next);
        Ok(())
    }

    fn compiled(record: SchemaRecord) -> Result<Compiled, (String, String)> {
        let name = schema_name(&record.namespace, &record.group, &record.data_id);
        let fail = |e: String| (name.clone(), e);
        let group = Part::glob(&record.group).ok_or_else(|| fail("bad group pattern".into()))?;
        let data_id =
            Part::glob(&record.data_id).ok_or_else(|| fail("bad dataId pattern".into()))?;
        let validator = compile(&record.schema).map_err(fail)?;
        Ok(Compiled {
            name: name.clone(),
            record,
            group,
            data_id,
            validator,
        })
    }

    /// Re-reads the schemas every `every` until shutdown: how a node learns of schemas
    /// set on another node sharing its database.
    pub async fn follow_schemas(&self, every: Duration) {
        self.periodically(every, || async {
            if let Err(e) = self.refresh_schemas().await {
                tracing::debug!(error = %e, "re-reading the schemas failed");
            }
        })
        .await
    }

    /// Whether the caller may read the schema of these patterns: read permission on the
    /// resource `namespace:group:config/dataId` the patterns spell.
    fn may_read_schema(&self, caller: &Caller, r: &SchemaRecord) -> Result<(), CoreError> {
        self.authorize(caller, Action::Read, || {
            format!("{}:{}:config/{}", r.namespace.as_str(), r.group, r.data_id)
        })
    }

    /// The schemas the caller may read, of one namespace or of all, in (namespace, group,
    /// dataId) order.
    pub fn list_schemas(
        &self,
        caller: &Caller,
        namespace: Option<&NamespaceId>,
    ) -> Result<Vec<SchemaRecord>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let current = self.inner.schemas.current.read().clone();
        let mut out: Vec<SchemaRecord> = current
            .iter()
            .filter(|(ns, _)| namespace.is_none_or(|want| want == *ns))
            .flat_map(|(_, list)| list.iter().map(|c| c.record.clone()))
            .filter(|r| self.may_read_schema(caller, r).is_ok())
            .collect();
        out.sort_by(|a, b| {
            (a.namespace.as_str(), &a.group, &a.data_id).cmp(&(
                b.namespace.as_str(),
                &b.group,
                &b.data_id,
            ))
        });
        Ok(out)
    }

    /// One schema, by its namespace and patterns (as written when it was set).
    pub fn get_schema(
        &self,
        caller: &Caller,
        namespace: &NamespaceId,
        group: &str,
        data_id: &str,
    ) -> Result<SchemaRecord, CoreError> {
        self.guard()?;
        let probe = SchemaRecord {
            namespace: namespace.clone(),
            group: group.to_string(),
            data_id: data_id.to_string(),
            schema: String::new(),
            description: String::new(),
            src_user: String::new(),
            modified_ms: 0,
        };
        self.may_read_schema(caller, &probe)?;
        let current = self.inner.schemas.current.read().clone();
        current
            .get(namespace)
            .and_then(|list| {
                list.iter()
                    .find(|c| c.record.group == group && c.record.data_id == data_id)
            })
            .map(|c| c.record.clone())
            .ok_or_else(|| {
                CoreError::NotFound(format!(
                    "no schema {}",
                    schema_name(namespace, group, data_id)
                ))
            })
    }

    /// Sets (creates or replaces) a schema: `ROLE_ADMIN` only. Refused with
    /// [`CoreError::Invalid`] when a pattern is not one of the five shapes, the
    /// description is too long or the schema does not compile (the message names the
    /// problem); with [`CoreError::TooLarge`] past [`MAX_SCHEMAS`] or
    /// [`MAX_SCHEMA_BYTES`]. Applies on this node when the call returns.
    pub async fn set_schema(
        &self,
        caller: &Caller,
        spec: SchemaSpec,
        src_user: &str,
    ) -> Result<SchemaRecord, CoreError> {
        self.guard()?;
        self.require_admin(caller)?;
        let name = schema_name(&spec.namespace, &spec.group, &spec.data_id);
        let result = self.set_schema_checked(caller, spec, src_user).await;
        self.audit_outcome(
            nacelle_core::audit::AuditAction::SchemaSet,
            "schema.set",
            caller,
            &name,
            result.is_ok(),
        );
        result
    }

    async fn set_schema_checked(
        &self,
        caller: &Caller,
        spec: SchemaSpec,
        src_user: &str,
    ) -> Result<SchemaRecord, CoreError> {
        check_pattern(&spec.group, "group", MAX_GROUP_PATTERN_CHARS)?;
        check_pattern(&spec.data_id, "dataId", MAX_DATA_ID_PATTERN_CHARS)?;
        if spec.description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(CoreError::invalid(format!(
                "the description is longer than {MAX_DESCRIPTION_CHARS} characters"
            )));
        }
        if spec
            .description
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return Err(CoreError::invalid(
                "the description contains a control character",
            ));
        }
        if spec.schema.len() > MAX_SCHEMA_BYTES {
            return Err(CoreError::TooLarge(format!(
                "the schema is {} bytes, more than the limit of {MAX_SCHEMA_BYTES}",
                spec.schema.len()
            )));
        }
        compile(&spec.schema).map_err(CoreError::Invalid)?;
        {
            let current = self.inner.schemas.current.read().clone();
            let exists = current.get(&spec.namespace).is_some_and(|list| {
                list.iter()
                    .any(|c| c.record.group == spec.group && c.record.data_id == spec.data_id)
            });
            let count: usize = current.values().map(Vec::len).sum();
            if !exists && count >= MAX_SCHEMAS {
                return Err(CoreError::TooLarge(format!(
                    "there are {count} schemas already, the limit is {MAX_SCHEMAS}"
                )));
            }
        }
        let record = SchemaRecord {
            namespace: spec.namespace,
            group: spec.group,
            data_id: spec.data_id,
            schema: spec.schema,
            description: spec.description,
            src_user: caller.operator(src_user).to_string(),
            modified_ms: now_millis(),
        };
        self.store_call(StoreOp::Schemas, self.inner.store.put_schema(&record))
            .await?;
        self.refresh_schemas().await?;
        Ok(record)
    }

    /// Removes a schema: `ROLE_ADMIN` only. `Ok(false)` when there was none.
    pub async fn remove_schema(
        &self,
        caller: &Caller,
        namespace: &NamespaceId,
        group: &str,
        data_id: &str,
    ) -> Result<bool, CoreError> {
        self.guard()?;
        self.require_admin(caller)?;
        let removed = self
            .store_call(
                StoreOp::Schemas,
                self.inner.store.delete_schema(namespace, group, data_id),
            )
            .await;
        let name = schema_name(namespace, group, data_id);
        self.audit_outcome(
            nacelle_core::audit::AuditAction::SchemaRemove,
            "schema.remove",
            caller,
            &name,
            removed.is_ok(),
        );
        let removed = removed?;
        self.refresh_schemas().await?;
        Ok(removed)
    }

    /// Checks content against the schemas of `key` without publishing (what a console
    /// or a change request asks before a publish): the schemas that apply and every
    /// problem (at most [`MAX_REPORTED_PROBLEMS`]). Needs read permission on the key.
    pub async fn check_against_schemas(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        config_type: Option<&str>,
        content: &str,
    ) -> Result<SchemaCheck, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Read)?;
        nacelle_core::rules::check_content(content, self.inner.limits.max_content_bytes)?;
        let config_type = nacelle_core::rules::parse_config_type(config_type)?;
        let content = bytes::Bytes::copy_from_slice(content.as_bytes());
        self.run_check(key, config_type, &content, MAX_REPORTED_PROBLEMS)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        match ConfigService::compiled(record) {
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
        let only_self = ConfigService::compiled(SchemaRecord {
            schema: r##"{"$ref":"#"}"##.into(),
            ..s[0].record.clone()
        });
        let Ok(only_self) = only_self else {
            panic!("a self reference does not compile")
        };
        assert!(problems_of(&[Arc::new(only_self)], ConfigType::Json, "[1]", 5).is_empty());
    }
}
