//! Namespaces: list with config counts, one, exists, create, update, delete. Ids follow
//! the one namespace rule of [`NamespaceId`]; names and descriptions the rules of
//! [`nacelle_core::rules`].

use std::collections::HashMap;

use nacelle_core::key::DEFAULT_NAMESPACE_NAME;
use nacelle_core::rules::{check_namespace_desc, check_namespace_name};
use nacelle_core::{now_millis, Caller, CoreError, Namespace, NamespaceId, StoreError};

use nacelle_metrics::StoreOp;

use crate::service::ConfigService;

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

impl ConfigService {
    /// The namespaces the caller has a permission in (every one for an administrator, or
    /// without authentication): the default namespace then custom ones, with config counts
    /// from memory.
    pub async fn namespaces(&self, caller: &Caller) -> Result<Vec<NamespaceInfo>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let mut all = self.all_namespaces().await?;
        all.retain(|n| self.sees_namespace(caller, n.namespace.id.as_str()));
        Ok(all)
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

    /// One namespace by id as a client sent it (`""`/`public` is the default).
    pub async fn namespace(&self, caller: &Caller, id: &str) -> Result<NamespaceInfo, CoreError> {
        Ok(self.namespace_checked(caller, id).await?)
    }

    /// [`ConfigService::namespace`] with its refusals typed.
    pub async fn namespace_checked(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<NamespaceInfo, NamespaceError> {
        self.guard()?;
        self.authenticated(caller)?;
        let id =
            NamespaceId::parse(Some(id)).map_err(|e| NamespaceError::IllegalId(e.to_string()))?;
        if !self.sees_namespace(caller, id.as_str()) {
            return Err(CoreError::Auth(nacelle_core::AuthFailure::Denied).into());
        }
        self.all_namespaces()
            .await?
            .into_iter()
            .find(|n| n.namespace.id == id)
            .ok_or_else(|| NamespaceError::Missing(format!("namespace `{id}` does not exist")))
    }

    /// Whether a namespace with this id exists. An invalid id does not; a database failure
    /// is an error, never "does not exist".
    pub async fn namespace_exists(&self, caller: &Caller, id: &str) -> Result<bool, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let Ok(id) = NamespaceId::parse(Some(id)) else {
            return Ok(false);
        };
        Ok(self
            .all_namespaces()
            .await?
            .iter()
            .any(|n| n.namespace.id == id))
    }

    /// Creates a namespace. A blank id gets a random UUID. Returns the id.
    pub async fn create_namespace(
        &self,
        caller: &Caller,
        id: Option<&str>,
        name: &str,
        desc: &str,
    ) -> Result<NamespaceId, CoreError> {
        Ok(self
            .create_namespace_checked(caller, id, name, desc)
            .await?)
    }

    /// [`ConfigService::create_namespace`] with its refusals typed: the id (an id meaning
    /// the default namespace is [`NamespaceError::Reserved`]), then the name, then the
    /// description, then a duplicate.
    pub async fn create_namespace_checked(
        &self,
        caller: &Caller,
        id: Option<&str>,
        name: &str,
        desc: &str,
    ) -> Result<NamespaceId, NamespaceError> {
        self.guard()?;
        self.require_admin(caller)?;
        let id = match id.map(str::trim).filter(|s| !s.is_empty()) {
            Some(id) => custom_id(id)?,
            None => NamespaceId::from_trusted(&uuid::Uuid::new_v4().to_string()),
        };
        let name = check_namespace_name(name).map_err(NamespaceError::illegal_name)?;
        check_namespace_desc(desc)?;
        let ns = Namespace {
            id: id.clone(),
            name: name.to_string(),
            desc: desc.to_string(),
        };
        match self
            .store_call(
                StoreOp::Namespaces,
                self.inner.store.create_namespace(&ns, now_millis()),
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

    /// Renames a namespace / changes its description.
    pub async fn update_namespace(
        &self,
        caller: &Caller,
        id: &str,
        name: &str,
        desc: &str,
    ) -> Result<(), CoreError> {
        Ok(self
            .update_namespace_checked(caller, id, name, desc)
            .await?)
    }

    /// [`ConfigService::update_namespace`] with its refusals typed.
    pub async fn update_namespace_checked(
        &self,
        caller: &Caller,
        id: &str,
        name: &str,
        desc: &str,
    ) -> Result<(), NamespaceError> {
        self.guard()?;
        self.require_admin(caller)?;
        let id = custom_id(id)?;
        let name = check_namespace_name(name).map_err(NamespaceError::illegal_name)?;
        check_namespace_desc(desc)?;
        let ns = Namespace {
            id,
            name: name.to_string(),
            desc: desc.to_string(),
        };
        match self
            .store_call(
                StoreOp::Namespaces,
                self.inner.store.update_namespace(&ns, now_millis()),
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

    /// Deletes a namespace; returns whether it existed. The default cannot be deleted.
    pub async fn delete_namespace(&self, caller: &Caller, id: &str) -> Result<bool, CoreError> {
        Ok(self.delete_namespace_checked(caller, id).await?)
    }

    /// [`ConfigService::delete_namespace`] with its refusals typed.
    pub async fn delete_namespace_checked(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<bool, NamespaceError> {
        self.guard()?;
        self.require_admin(caller)?;
        if NamespaceId::parse(Some(id)).is_ok_and(|n| n.is_default()) {
            return Err(NamespaceError::Reserved(
                "the default namespace cannot be deleted".to_string(),
            ));
        }
        let id = custom_id(id)?;
        Ok(self
            .store_call(StoreOp::Namespaces, self.inner.store.delete_namespace(&id))
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
