//! Namespaces: list with config counts, one, exists, create, update, delete. Ids follow
//! the one namespace rule of [`NamespaceId`]; names and descriptions the rules of
//! [`nacelle_core::rules`].

use std::collections::HashMap;

use nacelle_core::key::DEFAULT_NAMESPACE_NAME;
use nacelle_core::rules::{check_namespace_desc, check_namespace_name};
use nacelle_core::{now_millis, Caller, CoreError, Namespace, NamespaceId, StoreError};

use nacelle_metrics::StoreOp;

use nacelle_core::audit::AuditAction;

use crate::config::audit::Audited;
use crate::config::service::ConfigService;

/// Description of the built-in default namespace, as Nacos shows it.
const DEFAULT_NAMESPACE_DESC: &str = "Public Namespace";

/// A namespace with the number of configs it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceInfo {
    pub namespace: Namespace,
    pub config_count: usize,
    /// 0 for the built-in default namespace, 2 for custom ones (Nacos's values).
    pub kind: u8,
}

/// The namespace operations for one caller: what [`ConfigService::namespaces`] hands out
/// once the service is ready (not shutting down) and the caller's credentials are good, so
/// no operation here can skip either check. Creating, changing and deleting need an
/// administrator besides.
#[derive(Debug, Clone, Copy)]
pub struct Namespaces<'a> {
    service: &'a ConfigService,
    caller: &'a Caller,
}

impl ConfigService {
    /// The namespace operations for `caller`: refused unless the service is ready and the
    /// caller's credentials are good (or authentication is off).
    pub fn namespaces<'a>(&'a self, caller: &'a Caller) -> Result<Namespaces<'a>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        Ok(Namespaces {
            service: self,
            caller,
        })
    }

    /// Every namespace, for no caller in particular.
    async fn all_namespaces(&self) -> Result<Vec<NamespaceInfo>, CoreError> {
        let stored = self
            .store_call(StoreOp::Namespaces, self.inner.store.list_namespaces())
            .await?;
        let mut counts: HashMap<String, usize> = HashMap::new();
        for e in self.inner.cache.iter() {
            *counts.entry(e.key.tenant().to_string()).or_default() += 1;
        }
        let mut out = vec![NamespaceInfo {
            namespace: Namespace {
                id: NamespaceId::default_namespace(),
                name: DEFAULT_NAMESPACE_NAME.to_string(),
                desc: DEFAULT_NAMESPACE_DESC.to_string(),
            },
            config_count: counts.get("").copied().unwrap_or(0),
            kind: 0,
        }];
        for ns in stored {
            let config_count = counts.get(ns.id.as_str()).copied().unwrap_or(0);
            out.push(NamespaceInfo {
                namespace: ns,
                config_count,
                kind: 2,
            });
        }
        Ok(out)
    }

    /// Whether a namespace with this id exists (`false` for an invalid id); a database
    /// failure is an error, never "does not exist".
    pub(crate) async fn namespace_exists(&self, id: &str) -> Result<bool, CoreError> {
        let Ok(id) = NamespaceId::parse(Some(id)) else {
            return Ok(false);
        };
        Ok(self
            .all_namespaces()
            .await?
            .iter()
            .any(|n| n.namespace.id == id))
    }
}

impl Namespaces<'_> {
    /// The namespaces the caller has a permission in (every one for an administrator, or
    /// without authentication): the default namespace then custom ones, with config counts
    /// from memory.
    pub async fn list(&self) -> Result<Vec<NamespaceInfo>, CoreError> {
        let mut all = self.service.all_namespaces().await?;
        all.retain(|n| {
            self.service
                .sees_namespace(self.caller, n.namespace.id.as_str())
        });
        Ok(all)
    }

    /// One namespace by id as a client sent it (`""`/`public` is the default).
    pub async fn get(&self, id: &str) -> Result<NamespaceInfo, NamespaceError> {
        let id =
            NamespaceId::parse(Some(id)).map_err(|e| NamespaceError::IllegalId(e.to_string()))?;
        if !self.service.sees_namespace(self.caller, id.as_str()) {
            return Err(CoreError::Auth(nacelle_core::AuthFailure::Denied).into());
        }
        self.service
            .all_namespaces()
            .await?
            .into_iter()
            .find(|n| n.namespace.id == id)
            .ok_or_else(|| NamespaceError::Missing(format!("namespace `{id}` does not exist")))
    }

    /// Whether a namespace with this id exists. An invalid id does not; a database
    /// failure is an error, never "does not exist".
    pub async fn exists(&self, id: &str) -> Result<bool, CoreError> {
        self.service.namespace_exists(id).await
    }

    /// Creates a namespace (an administrator only); a blank id gets a random UUID. Returns
    /// the id. Refusals, in this order: the id (an id meaning the default namespace is
    /// [`NamespaceError::Reserved`]), the name, the description, a duplicate.
    pub async fn create(
        &self,
        id: Option<&str>,
        name: &str,
        desc: &str,
    ) -> Result<NamespaceId, NamespaceError> {
        let result = self.create_checked(id, name, desc).await;
        let target = match &result {
            Ok(id) => id.as_str().to_string(),
            Err(_) => id.unwrap_or_default().to_string(),
        };
        let event = Audited::new(AuditAction::NamespaceCreate, "namespace.create", target);
        self.service.audit(
            self.caller,
            event.detail(format!("name={name}")).outcome(&result),
        );
        result
    }

    async fn create_checked(
        &self,
        id: Option<&str>,
        name: &str,
        desc: &str,
    ) -> Result<NamespaceId, NamespaceError> {
        self.service.require_admin(self.caller)?;
        let id = match id.map(str::trim).filter(|s| !s.is_empty()) {
            Some(id) => custom_id(id)?,
            None => NamespaceId::from_trusted(&uuid::Uuid::new_v4().to_string()),
        };
        let ns = namespace_of(id.clone(), name, desc)?;
        match self
            .service
            .store_call(
                StoreOp::Namespaces,
                self.service.inner.store.create_namespace(&ns, now_millis()),
            )
            .await
        {
            Ok(()) => Ok(id),
            Err(StoreError::Conflict(_)) => Err(NamespaceError::Exists(format!(
                "namespace `{id}` already exists"
            ))),
            Err(e) => Err(CoreError::from(e).into()),
        }
    }

    /// Renames a namespace / changes its description (an administrator only).
    pub async fn update(&self, id: &str, name: &str, desc: &str) -> Result<(), NamespaceError> {
        let result = self.update_checked(id, name, desc).await;
        let event = Audited::new(AuditAction::NamespaceUpdate, "namespace.update", id.into());
        self.service.audit(
            self.caller,
            event.detail(format!("name={name}")).outcome(&result),
        );
        result
    }

    async fn update_checked(&self, id: &str, name: &str, desc: &str) -> Result<(), NamespaceError> {
        self.service.require_admin(self.caller)?;
        let ns = namespace_of(custom_id(id)?, name, desc)?;
        match self
            .service
            .store_call(
                StoreOp::Namespaces,
                self.service.inner.store.update_namespace(&ns, now_millis()),
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound(m)) => {
                Err(NamespaceError::Missing(format!("{m} does not exist")))
            }
            Err(e) => Err(CoreError::from(e).into()),
        }
    }

    /// Deletes a namespace (an administrator only); returns whether it existed. The
    /// default one cannot be deleted.
    pub async fn delete(&self, id: &str) -> Result<bool, NamespaceError> {
        let result = self.delete_checked(id).await;
        let event = Audited::new(AuditAction::NamespaceDelete, "namespace.delete", id.into());
        let event = match &result {
            Ok(false) => event.detail("absent"),
            _ => event.outcome(&result),
        };
        self.service.audit(self.caller, event);
        result
    }

    async fn delete_checked(&self, id: &str) -> Result<bool, NamespaceError> {
        self.service.require_admin(self.caller)?;
        if NamespaceId::parse(Some(id)).is_ok_and(|n| n.is_default()) {
            return Err(NamespaceError::Reserved(
                "the default namespace cannot be deleted".to_string(),
            ));
        }
        let id = custom_id(id)?;
        Ok(self
            .service
            .store_call(
                StoreOp::Namespaces,
                self.service.inner.store.delete_namespace(&id),
            )
            .await
            .map_err(CoreError::from)?)
    }
}

/// Why a namespace operation was refused, by the rule that refused it (Nacos 3 answers
/// each with its own code). Where a protocol does not tell them apart they are
/// [`CoreError`]s (`From`): the id and name rules and a reserved id are `Invalid`, a
/// duplicate `Conflict`, an absent namespace `NotFound`.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// The id breaks the namespace id rule ([`NamespaceId::parse_custom`]).
    #[error("{0}")]
    IllegalId(String),
    /// The id means the default namespace, which always exists and cannot be created,
    /// changed or deleted.
    #[error("{0}")]
    Reserved(String),
    /// The name breaks the namespace name rule ([`check_namespace_name`]).
    #[error("{0}")]
    IllegalName(String),
    /// A namespace with this id already exists.
    #[error("{0}")]
    Exists(String),
    /// No namespace with this id.
    #[error("{0}")]
    Missing(String),
    /// Not ready, not allowed, another bad input (the description), or the store failed.
    #[error(transparent)]
    Core(#[from] CoreError),
}

impl NamespaceError {
    fn illegal_name(e: CoreError) -> Self {
        match e {
            CoreError::Invalid(m) => NamespaceError::IllegalName(m),
            e => NamespaceError::Core(e),
        }
    }
}

impl From<NamespaceError> for CoreError {
    fn from(e: NamespaceError) -> Self {
        match e {
            NamespaceError::IllegalId(m)
            | NamespaceError::Reserved(m)
            | NamespaceError::IllegalName(m) => CoreError::Invalid(m),
            NamespaceError::Exists(m) => CoreError::Conflict(m),
            NamespaceError::Missing(m) => CoreError::NotFound(m),
            NamespaceError::Core(e) => e,
        }
    }
}

/// The id of a custom namespace, with Nacos's wording for a refused one: an id meaning
/// the default namespace is [`NamespaceError::Reserved`], any other refused id
/// [`NamespaceError::IllegalId`].
fn custom_id(raw: &str) -> Result<NamespaceId, NamespaceError> {
    NamespaceId::parse_custom(raw).map_err(|e| {
        let message = format!("illegal namespace id `{}`: {e}", raw.trim().escape_debug());
        if NamespaceId::parse(Some(raw)).is_ok_and(|n| n.is_default()) {
            NamespaceError::Reserved(message)
        } else {
            NamespaceError::IllegalId(message)
        }
    })
}

/// A namespace to create or update, its name and description checked.
fn namespace_of(id: NamespaceId, name: &str, desc: &str) -> Result<Namespace, NamespaceError> {
    let name = check_namespace_name(name).map_err(NamespaceError::illegal_name)?;
    check_namespace_desc(desc)?;
    Ok(Namespace {
        id,
        name: name.to_string(),
        desc: desc.to_string(),
    })
}
