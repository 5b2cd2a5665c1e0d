//! JSON Schemas of config keys (docs/schema-validation.md): a schema binds a JSON Schema
//! document to the keys of one namespace whose group and dataId match two patterns (the
//! five shapes of [`Part::glob`]: `*`, `x*`, `*x`, `*x*`, exact). A publish of a matching
//! key whose content is structured (json, yaml, properties, toml: converted by
//! [`nacelle_core::structured`]) must satisfy every matching schema; one that is not
//! structured is refused while a schema applies to its key.
//!
//! The schemas live in memory, compiled once per change ([`jsonschema::Validator`]): read
//! at `load`, again after every local `set`/`remove`, and every
//! [`SCHEMA_REFRESH`] by [`Schemas::follow`] on a node that shares its
//! database (a schema set on another node applies here within that delay). A re-read
//! compiles only the schemas whose text changed.
//!
//! Schemas always refuse: they are an explicit opt-in, so the namespace's content
//! validation mode (`reject | warn | off`, which governs the syntax check by type) does
//! not soften them. `$ref` to anything outside the document (a URL, a file) is never
//! fetched: the validator is built with a retriever that refuses.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::pattern::check_pattern;
use nacelle_core::store::Schemas as SchemaStore;
use nacelle_core::{now_millis, Action, Caller, ConfigKey, CoreError, NamespaceId, SchemaRecord};
use nacelle_metrics::StoreOp;

mod compiled;

pub use compiled::{SchemaCheck, SchemaProblem, MAX_REPORTED_PROBLEMS, MAX_SCHEMA_BYTES};

use crate::config::service::ConfigService;
use compiled::{compile, schema_name, SchemaState};

/// The most schemas a server holds, all namespaces together.
pub const MAX_SCHEMAS: usize = 1000;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 256;
/// The longest group pattern (the `group_id` column's length) and dataId pattern.
pub use nacelle_core::pattern::{MAX_DATA_ID_PATTERN_CHARS, MAX_GROUP_PATTERN_CHARS};
/// How often a node re-reads the schemas when it shares its database with others.
pub const SCHEMA_REFRESH: Duration = Duration::from_secs(2);

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

/// The JSON Schemas of config keys: a component that owns its compiled schemas and
/// reaches the config core through its handle. Cheap to clone.
#[derive(Clone)]
pub struct Schemas {
    core: ConfigService,
    store: Arc<dyn SchemaStore>,
    state: Arc<SchemaState>,
}

impl fmt::Debug for Schemas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schemas").finish_non_exhaustive()
    }
}

impl Schemas {
    /// The schemas of `core`'s keys; every publish through `core` is checked against them
    /// from now on (the core's content gate). One per core: a second one is refused.
    pub fn new(core: &ConfigService) -> Result<Schemas, CoreError> {
        let state = Arc::new(SchemaState::default());
        if !core.set_content_gate(state.clone()) {
            return Err(CoreError::Conflict(
                "the config core has its schemas already".into(),
            ));
        }
        Ok(Schemas {
            core: core.clone(),
            store: core.store().clone(),
            state,
        })
    }

    /// Re-reads every schema from the database and compiles those whose text changed.
    pub async fn refresh(&self) -> Result<(), CoreError> {
        let _one = self.state.refresh.lock().await;
        let records = self
            .core
            .store_call(StoreOp::Schemas, self.store.load_schemas())
            .await?;
        self.state.replace(records);
        Ok(())
    }

    /// Re-reads the schemas every `every` until shutdown: how a node learns of schemas
    /// set on another node sharing its database.
    pub async fn follow(&self, every: Duration) {
        self.core
            .periodically(every, || async {
                if let Err(e) = self.refresh().await {
                    tracing::debug!(error = %e, "re-reading the schemas failed");
                }
            })
            .await
    }

    /// Whether the caller may read the schema of these patterns: read permission on the
    /// resource `namespace:group:config/dataId` the patterns spell.
    fn may_read_schema(&self, caller: &Caller, r: &SchemaRecord) -> Result<(), CoreError> {
        self.core.authorize(caller, Action::Read, || {
            format!("{}:{}:config/{}", r.namespace.as_str(), r.group, r.data_id)
        })
    }

    /// The schemas the caller may read, of one namespace or of all, in (namespace, group,
    /// dataId) order.
    pub fn list(
        &self,
        caller: &Caller,
        namespace: Option<&NamespaceId>,
    ) -> Result<Vec<SchemaRecord>, CoreError> {
        self.core.guard()?;
        self.core.authenticated(caller)?;
        let current = self.state.current.read().clone();
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
    pub fn get(
        &self,
        caller: &Caller,
        namespace: &NamespaceId,
        group: &str,
        data_id: &str,
    ) -> Result<SchemaRecord, CoreError> {
        self.core.guard()?;
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
        let current = self.state.current.read().clone();
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
    pub async fn set(
        &self,
        caller: &Caller,
        spec: SchemaSpec,
        src_user: &str,
    ) -> Result<SchemaRecord, CoreError> {
        self.core.guard()?;
        self.core.require_admin(caller)?;
        let name = schema_name(&spec.namespace, &spec.group, &spec.data_id);
        let result = self.set_checked(caller, spec, src_user).await;
        self.core.audit_outcome(
            nacelle_core::audit::AuditAction::SchemaSet,
            "schema.set",
            caller,
            &name,
            result.is_ok(),
        );
        result
    }

    async fn set_checked(
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
            let current = self.state.current.read().clone();
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
        self.core
            .store_call(StoreOp::Schemas, self.store.put_schema(&record))
            .await?;
        self.refresh().await?;
        Ok(record)
    }

    /// Removes a schema: `ROLE_ADMIN` only. `Ok(false)` when there was none.
    pub async fn remove(
        &self,
        caller: &Caller,
        namespace: &NamespaceId,
        group: &str,
        data_id: &str,
    ) -> Result<bool, CoreError> {
        self.core.guard()?;
        self.core.require_admin(caller)?;
        let removed = self
            .core
            .store_call(
                StoreOp::Schemas,
                self.store.delete_schema(namespace, group, data_id),
            )
            .await;
        let name = schema_name(namespace, group, data_id);
        self.core.audit_outcome(
            nacelle_core::audit::AuditAction::SchemaRemove,
            "schema.remove",
            caller,
            &name,
            removed.is_ok(),
        );
        let removed = removed?;
        self.refresh().await?;
        Ok(removed)
    }

    /// Checks content against the schemas of `key` without publishing (what a console
    /// or a change request asks before a publish): the schemas that apply and every
    /// problem (at most [`MAX_REPORTED_PROBLEMS`]). Needs read permission on the key.
    pub async fn check(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        config_type: Option<&str>,
        content: &str,
    ) -> Result<SchemaCheck, CoreError> {
        self.core.guard()?;
        self.core.authorize_key(caller, key, Action::Read)?;
        nacelle_core::rules::check_content(content, self.core.limits().max_content_bytes)?;
        let config_type = nacelle_core::rules::parse_config_type(config_type)?;
        let content = bytes::Bytes::copy_from_slice(content.as_bytes());
        self.state
            .check(key, config_type, &content, MAX_REPORTED_PROBLEMS)
            .await
    }
}
