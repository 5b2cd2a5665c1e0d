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
        self.guard()?;
        self.authenticated(caller)?;
        let id = NamespaceId::parse(Some(id))?;
        if !self.sees_namespace(caller, id.as_str()) {
            return Err(CoreError::Auth(nacelle_core::AuthFailure::Denied));
        }
        self.all_namespaces()
            .await?
            .into_iter()
            .find(|n| n.namespace.id == id)
            .ok_or_else(|| CoreError::NotFound(format!("namespace `{id}` does not exist")))
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
        self.guard()?;
        self.require_admin(caller)?;
        let id = match id.map(str::trim).filter(|s| !s.is_empty()) {
            Some(id) => custom_id(id)?,
            None => NamespaceId::from_trusted(&uuid::Uuid::new_v4().to_string()),
        };
        let name = check_namespace_name(name)?;
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
            Err(StoreError::Conflict(_)) => Err(CoreError::Conflict(format!(
                "namespace `{id}` already exists"
            ))),
            Err(e) => Err(e.into()),
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
        self.guard()?;
        self.require_admin(caller)?;
        let id = custom_id(id)?;
        let name = check_namespace_name(name)?;
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
            Err(StoreError::NotFound(m)) => Err(CoreError::NotFound(format!("{m} does not exist"))),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a namespace; returns whether it existed. The default cannot be deleted.
    pub async fn delete_namespace(&self, caller: &Caller, id: &str) -> Result<bool, CoreError> {
        self.guard()?;
        self.require_admin(caller)?;
        if NamespaceId::parse(Some(id)).is_ok_and(|n| n.is_default()) {
            return Err(CoreError::invalid(
                "the default namespace cannot be deleted",
            ));
        }
        let id = custom_id(id)?;
        Ok(self
            .store_call(StoreOp::Namespaces, self.inner.store.delete_namespace(&id))
            .await?)
    }
}

/// The id of a custom namespace, with Nacos's wording for a refused one.
fn custom_id(raw: &str) -> Result<NamespaceId, CoreError> {
    NamespaceId::parse_custom(raw).map_err(|e| {
        CoreError::invalid(format!(
            "illegal namespace id `{}`: {e}",
            raw.trim().escape_debug()
        ))
    })
}
