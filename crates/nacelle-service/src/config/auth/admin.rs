//! Administration of users, roles and permissions: `ROLE_ADMIN` only, except that a user
//! may change their own password. Listings come from the in-memory directory; every change
//! is one store write, then the directory is re-read and the change audited.
//!
//! Beyond Nacos: the last administrator cannot be deleted or lose `ROLE_ADMIN` (Nacos
//! refuses to delete any administrator); a password change refuses the user's older tokens.

use nacelle_core::auth::{IdentityWrite, PermissionRecord, RoleRecord, ADMIN_ROLE, DEFAULT_ADMIN};
use nacelle_core::{Caller, CoreError, Page, PageRequest, StoreError};

use nacelle_core::audit::AuditAction;

use super::{generate_password, now_s, password};
use crate::config::service::ConfigService;

/// Longest user and role name (Nacos's `varchar(50)`).
pub const MAX_NAME: usize = 50;
/// Longest permission resource (Nacos's `varchar(128)`).
pub const MAX_RESOURCE: usize = 128;

/// How a listing matches names: exactly (Nacos `search=accurate`; blank matches all) or
/// as a substring (`search=blur`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameFilter {
    pub text: String,
    pub blur: bool,
}

impl NameFilter {
    fn matches(&self, name: &str) -> bool {
        if self.text.is_empty() {
            true
        } else if self.blur {
            name.contains(self.text.as_str())
        } else {
            name == self.text
        }
    }
}

fn page_of<T>(items: Vec<T>, page: PageRequest) -> Page<T> {
    let total = items.len() as u64;
    let size = page.page_size.max(1);
    let skip = page.page_no.saturating_sub(1).saturating_mul(size);
    let items = items
        .into_iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(usize::try_from(size).unwrap_or(usize::MAX))
        .collect();
    Page::new(total, page.page_no.max(1), size, items)
}

fn check_name(what: &str, name: &str) -> Result<(), CoreError> {
    if name.trim().is_empty() {
        return Err(CoreError::Invalid(format!(
            "Required parameter '{what}' is not present"
        )));
    }
    if name.chars().count() > MAX_NAME {
        return Err(CoreError::Invalid(format!(
            "{what} is longer than {MAX_NAME} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(CoreError::Invalid(format!(
            "{what} has a control character"
        )));
    }
    Ok(())
}

fn check_password(password: &str) -> Result<(), CoreError> {
    if password.is_empty() {
        return Err(CoreError::Invalid("the password must not be empty".into()));
    }
    // BCrypt reads at most 72 bytes; a longer password would be silently cut.
    if password.len() > 72 {
        return Err(CoreError::Invalid(
            "the password is longer than 72 bytes".into(),
        ));
    }
    Ok(())
}

/// The first administrator's password — `given` when not empty, else a random one — and
/// its hash.
async fn admin_password(given: Option<&str>) -> Result<(String, String), CoreError> {
    let password = match given.filter(|p| !p.is_empty()) {
        Some(p) => p.to_string(),
        None => generate_password()?,
    };
    check_password(&password)?;
    let hash = password::hash(password.clone()).await?;
    Ok((password, hash))
}

fn conflict(e: CoreError, message: String) -> CoreError {
    match e {
        CoreError::Store(StoreError::Conflict(_)) => CoreError::Conflict(message),
        CoreError::Store(StoreError::NotFound(m)) => CoreError::NotFound(m),
        e => e,
    }
}

impl ConfigService {
    async fn identity_write(&self, write: IdentityWrite) -> Result<(), CoreError> {
        let result = self
            .inner
            .store
            .write_identity(&write)
            .await
            .map_err(CoreError::from);
        // Re-read also after a failure: the directory may have been stale.
        if let Err(e) = self.refresh_identities().await {
            tracing::warn!(error = %e, "re-reading users and permissions failed");
        }
        result
    }
}

/// The administration of users, roles and permissions, for one administrator: what
/// [`ConfigService::auth_admin`] hands out once the service is ready (not shutting down)
/// and the caller holds `ROLE_ADMIN`, so no operation here can skip either check.
#[derive(Debug, Clone, Copy)]
pub struct AuthAdmin<'a> {
    service: &'a ConfigService,
    caller: &'a Caller,
}

impl ConfigService {}

impl AuthAdmin<'_> {
    /// Users whose name matches `filter`, one page.
    pub fn users(&self, filter: &NameFilter, page: PageRequest) -> Result<Page<String>, CoreError> {
        let dir = self.service.directory();
        let names = dir
            .user_names()
            .into_iter()
            .filter(|n| filter.matches(n))
            .map(str::to_string)
            .collect();
        Ok(page_of(names, page))
    }

    /// User names containing `text` (Nacos's `users/search`).
    pub fn search_users(&self, text: &str) -> Result<Vec<String>, CoreError> {
        Ok(self
            .service
            .directory()
            .user_names()
            .into_iter()
            .filter(|n| n.contains(text))
            .map(str::to_string)
            .collect())
    }

    /// Creates a user.
    pub async fn create_user(&self, username: &str, password: &str) -> Result<(), CoreError> {
        check_name("username", username)?;
        check_password(password)?;
        let hash = password::hash(password.to_string()).await?;
        let result = self
            .service
            .identity_write(IdentityWrite::CreateUser {
                username: username.into(),
                hash,
            })
            .await
            .map_err(|e| conflict(e, format!("user '{username}' already exist!")));
        self.service.audit_outcome(
            AuditAction::UserCreate,
            "user.create",
            self.caller,
            username,
            result.is_ok(),
        );
        result
    }

    /// Deletes a user (never the last administrator).
    pub async fn delete_user(&self, username: &str) -> Result<(), CoreError> {
        let dir = self.service.directory();
        if dir.user(username).is_none() {
            return Err(CoreError::NotFound(format!("user {username} not exist!")));
        }
        if dir.is_admin(username) && dir.admin_count() <= 1 {
            return Err(CoreError::Invalid(format!(
                "cannot delete the last admin: {username}"
            )));
        }
        let result = self
            .service
            .identity_write(IdentityWrite::DeleteUser {
                username: username.into(),
            })
            .await;
        self.service.auth().passwords.forget(username);
        self.service.audit_outcome(
            AuditAction::UserDelete,
            "user.delete",
            self.caller,
            username,
            result.is_ok(),
        );
        result
    }

    /// Role bindings matching `role` and `username` filters, one page.
    pub fn roles(
        &self,
        role: &NameFilter,
        username: &NameFilter,
        page: PageRequest,
    ) -> Result<Page<RoleRecord>, CoreError> {
        let items = self
            .service
            .directory()
            .role_records()
            .into_iter()
            .filter(|r| role.matches(&r.role) && username.matches(&r.username))
            .collect();
        Ok(page_of(items, page))
    }

    /// Role names containing `text` (Nacos's `roles/search`).
    pub fn search_roles(&self, text: &str) -> Result<Vec<String>, CoreError> {
        let mut names: Vec<String> = self
            .service
            .directory()
            .role_records()
            .into_iter()
            .map(|r| r.role)
            .filter(|r| r.contains(text))
            .collect();
        names.dedup();
        Ok(names)
    }

    /// Binds `role` to `username` (an existing user).
    pub async fn add_role(&self, role: &str, username: &str) -> Result<(), CoreError> {
        check_name("role", role)?;
        check_name("username", username)?;
        if self.service.directory().user(username).is_none() {
            return Err(CoreError::NotFound(format!("user '{username}' not found!")));
        }
        // As Nacos: the administrator role is never granted through the roles API (the
        // first administrator is created at start or by `users/admin`).
        if role == ADMIN_ROLE {
            return Err(CoreError::Invalid(format!(
                "role '{ADMIN_ROLE}' is not permitted to create!"
            )));
        }
        let result = self
            .service
            .identity_write(IdentityWrite::AddRole {
                role: role.into(),
                username: username.into(),
            })
            .await
            .map_err(|e| {
                conflict(
                    e,
                    format!("user '{username}' already bound to the role '{role}'!"),
                )
            });
        self.service.audit_outcome(
            AuditAction::RoleAdd,
            "role.add",
            self.caller,
            &format!("{role} {username}"),
            result.is_ok(),
        );
        result
    }

    /// Unbinds `role` from `username`, or from everyone (dropping its permissions);
    /// never takes `ROLE_ADMIN` from the last administrator.
    pub async fn delete_role(&self, role: &str, username: Option<&str>) -> Result<(), CoreError> {
        if role == ADMIN_ROLE {
            let dir = self.service.directory();
            let remaining = match username {
                Some(u) if dir.is_admin(u) => dir.admin_count().saturating_sub(1),
                Some(_) => dir.admin_count(),
                None => 0,
            };
            if remaining == 0 {
                return Err(CoreError::Invalid(
                    "cannot take ROLE_ADMIN from the last admin".into(),
                ));
            }
        }
        let result = self
            .service
            .identity_write(IdentityWrite::DeleteRole {
                role: role.into(),
                username: username.map(Into::into),
            })
            .await;
        let detail = format!("{role} {}", username.unwrap_or("*"));
        self.service.audit_outcome(
            AuditAction::RoleDelete,
            "role.delete",
            self.caller,
            &detail,
            result.is_ok(),
        );
        result
    }

    /// Permissions of roles matching `role`, one page.
    pub fn permissions(
        &self,
        role: &NameFilter,
        page: PageRequest,
    ) -> Result<Page<PermissionRecord>, CoreError> {
        let items = self
            .service
            .directory()
            .permission_records()
            .into_iter()
            .filter(|p| role.matches(&p.role))
            .collect();
        Ok(page_of(items, page))
    }

    /// Grants `action` (`r`, `w`, `rw`, and Nacelle's `a` — approve change requests — alone
    /// or after them: `a`, `ra`, `wa`, `rwa`) on the resource pattern to `role` (a role
    /// bound to some user).
    pub async fn add_permission(&self, permission: PermissionRecord) -> Result<(), CoreError> {
        check_name("role", &permission.role)?;
        if permission.resource.is_empty() || permission.resource.chars().count() > MAX_RESOURCE {
            return Err(CoreError::Invalid(format!(
                "resource must have 1 to {MAX_RESOURCE} characters"
            )));
        }
        if !matches!(
            permission.action.as_str(),
            "r" | "w" | "rw" | "a" | "ra" | "wa" | "rwa"
        ) {
            return Err(CoreError::Invalid(
                "action must be r, w or rw (or, to approve change requests, a, ra, wa or rwa)"
                    .into(),
            ));
        }
        if !self.service.directory().role_exists(&permission.role) {
            return Err(CoreError::NotFound(format!(
                "role {} not found!",
                permission.role
            )));
        }
        let detail = format!(
            "{} {} {}",
            permission.role, permission.resource, permission.action
        );
        let result = self
            .service
            .identity_write(IdentityWrite::AddPermission(permission))
            .await
            .map_err(|e| conflict(e, "permission already exist!".into()));
        self.service.audit_outcome(
            AuditAction::PermissionAdd,
            "permission.add",
            self.caller,
            &detail,
            result.is_ok(),
        );
        result
    }

    /// Revokes a permission.
    pub async fn delete_permission(&self, permission: PermissionRecord) -> Result<(), CoreError> {
        let detail = format!(
            "{} {} {}",
            permission.role, permission.resource, permission.action
        );
        let result = self
            .service
            .identity_write(IdentityWrite::DeletePermission(permission))
            .await;
        self.service.audit_outcome(
            AuditAction::PermissionDelete,
            "permission.delete",
            self.caller,
            &detail,
            result.is_ok(),
        );
        result
    }
}

impl<'a> super::Access<'a> {
    /// Changes a password (an administrator, or the user themself). Tokens issued before
    /// are refused from now on.
    pub async fn change_password(
        &self,
        caller: &Caller,
        username: &str,
        new_password: &str,
    ) -> Result<(), CoreError> {
        self.core.guard()?;
        if caller.user() != Some(username) {
            self.core.require_admin(caller)?;
        } else {
            self.core.authenticated(caller)?;
        }
        check_password(new_password)?;
        if self.core.directory().user(username).is_none() {
            return Err(CoreError::NotFound(format!("user {username} not exist!")));
        }
        let hash = password::hash(new_password.to_string()).await?;
        let result = self
            .core
            .identity_write(IdentityWrite::SetPassword {
                username: username.into(),
                hash,
                // A token issued in this very second predates the change: refused too.
                not_before: now_s() + 1,
            })
            .await;
        self.core.auth().passwords.forget(username);
        self.core.audit_outcome(
            AuditAction::PasswordChange,
            "user.password",
            caller,
            username,
            result.is_ok(),
        );
        result
    }
    /// Creates the administrator `nacos` when no administrator exists (Nacos's
    /// `users/admin`): with `password`, or a random one; answers the password.
    /// [`CoreError::Conflict`] once an administrator exists.
    pub async fn create_admin(
        &self,
        caller: &Caller,
        password: Option<&str>,
    ) -> Result<String, CoreError> {
        self.core.guard()?;
        if self.core.directory().admin_count() > 0 {
            return Err(CoreError::Conflict("have admin user cannot use it".into()));
        }
        let (password, hash) = admin_password(password).await?;
        let created = self
            .core
            .identity_write(IdentityWrite::CreateUser {
                username: DEFAULT_ADMIN.into(),
                hash: hash.clone(),
            })
            .await;
        match created {
            Ok(()) => {}
            // `nacos` exists without the role: give it a new password, then the role.
            Err(CoreError::Store(StoreError::Conflict(_))) => {
                self.core
                    .identity_write(IdentityWrite::SetPassword {
                        username: DEFAULT_ADMIN.into(),
                        hash,
                        not_before: now_s(),
                    })
                    .await?;
            }
            Err(e) => return Err(e),
        }
        let bound = self
            .core
            .identity_write(IdentityWrite::AddRole {
                role: ADMIN_ROLE.into(),
                username: DEFAULT_ADMIN.into(),
            })
            .await;
        match bound {
            Ok(()) | Err(CoreError::Store(StoreError::Conflict(_))) => {}
            Err(e) => return Err(e),
        }
        self.core.audit_outcome(
            AuditAction::UserCreate,
            "user.admin",
            caller,
            DEFAULT_ADMIN,
            true,
        );
        Ok(password)
    }
    /// At first start: when the database has no user at all, creates the administrator
    /// `nacos` with `password` (or a random one) and answers the password; otherwise
    /// `None`. Members of a cluster starting together race for it: one creates it, the
    /// others find it taken and answer `None` (only the creator knows the password).
    pub async fn ensure_initial_admin(
        &self,
        password: Option<&str>,
    ) -> Result<Option<String>, CoreError> {
        self.core.refresh_identities().await?;
        if self.core.directory().user_count() > 0 {
            return Ok(None);
        }
        let (password, hash) = admin_password(password).await?;
        let created = self
            .core
            .identity_write(IdentityWrite::CreateAdmin {
                username: DEFAULT_ADMIN.into(),
                hash,
            })
            .await;
        match created {
            Ok(()) => {}
            Err(CoreError::Store(StoreError::Conflict(_))) => return Ok(None),
            Err(e) => return Err(e),
        }
        self.core.audit_outcome(
            AuditAction::UserCreate,
            "user.admin",
            &Caller::internal(),
            DEFAULT_ADMIN,
            true,
        );
        Ok(Some(password))
    }
    /// The administration of users, roles and permissions for `caller`: refused unless the
    /// service is ready and `caller` is an administrator.
    pub fn admin(&self, caller: &'a Caller) -> Result<AuthAdmin<'a>, CoreError> {
        self.core.guard()?;
        self.core.require_admin(caller)?;
        Ok(AuthAdmin {
            service: self.core,
            caller,
        })
    }
}
