//! Identity and permissions: who a caller is ([`Identity`]), why credentials were refused
//! ([`AuthFailure`], with Nacos's messages), the records of Nacos's `users` / `roles` /
//! `permissions` tables, and the permission rule — Nacos's resource strings
//! (`<namespace>:<group>:config/<dataId>`, the public namespace as an empty id) matched
//! against stored patterns where `*` means anything, and actions `r`, `w`, `rw` (and
//! Nacelle's `a`, approving change requests, in any combination: `rwa`).
//!
//! Pure data and matching; verifying tokens and passwords is the service's.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use crate::error::AuthFailure;
use crate::key::ConfigKey;

/// The role that may do everything (Nacos's `ROLE_ADMIN`).
pub const ADMIN_ROLE: &str = "ROLE_ADMIN";
/// The name of the first administrator (Nacos's default user).
pub const DEFAULT_ADMIN: &str = "nacos";

/// Who a caller is, as the adapter established it from the request's credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Identity {
    /// No credentials were presented.
    #[default]
    Anonymous,
    /// Verified credentials of this user.
    User(Arc<str>),
    /// Credentials were presented and refused: every secured operation answers this.
    Refused(AuthFailure),
    /// A user name and password from a (user, address) pair or an address that failed too
    /// often: refused without checking, for this many more seconds.
    Throttled { retry_after_s: u64 },
    /// The server itself or a cluster member holding the cluster secret.
    Trusted,
}

impl Identity {
    /// The user's name, when verified.
    pub fn user(&self) -> Option<&str> {
        match self {
            Identity::User(u) => Some(u),
            _ => None,
        }
    }
}

/// What an operation does to a resource (Nacos's `r` / `w`, and Nacelle's `a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Read,
    Write,
    /// Approve (or reject) a change request touching the resource: Nacelle's own action,
    /// stored as the letter `a` beside Nacos's (docs/change-requests.md).
    Approve,
}

impl Action {
    /// The letter stored in `permissions.action`.
    pub fn letter(self) -> char {
        match self {
            Action::Read => 'r',
            Action::Write => 'w',
            Action::Approve => 'a',
        }
    }
}

/// Nacos's resource string of a config: `<namespace>:<group>:config/<dataId>`, the public
/// namespace as an empty id.
pub fn config_resource(key: &ConfigKey) -> String {
    format!(
        "{}:{}:config/{}",
        key.namespace().as_str(),
        key.group(),
        key.data_id()
    )
}

/// The resource of everything in a namespace (what a namespace-wide operation — listing,
/// exporting by namespace, listening in a namespace — is checked against).
pub fn namespace_resource(namespace: &str) -> String {
    format!("{namespace}:*:config/*")
}

/// Whether the stored resource `pattern` matches `resource`: `*` matches any run of
/// characters (including none); every other character matches itself. (Nacos turns the
/// pattern into a regular expression replacing only `*`; Nacelle takes the other characters
/// literally, so a `.` in a stored pattern never matches another character.)
pub fn pattern_matches(pattern: &str, resource: &str) -> bool {
    let (p, r) = (pattern.as_bytes(), resource.as_bytes());
    let (mut pi, mut ri) = (0, 0);
    // The position of the last `*` seen and of the resource when it was seen, to backtrack.
    let mut star: Option<(usize, usize)> = None;
    while ri < r.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ri));
            pi += 1;
        } else if pi < p.len() && p[pi] == r[ri] {
            pi += 1;
            ri += 1;
        } else if let Some((sp, sr)) = star {
            pi = sp + 1;
            ri = sr + 1;
            star = Some((sp, sr + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Whether a stored action (`r`, `w`, `rw`) grants `action` (Nacos: the stored action
/// contains the requested letter).
pub fn action_grants(stored: &str, action: Action) -> bool {
    stored.contains(action.letter())
}

/// A row of `users`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub username: String,
    /// The BCrypt hash.
    pub password: String,
    pub enabled: bool,
}

/// A row of `roles`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoleRecord {
    pub role: String,
    pub username: String,
}

/// A row of `permissions`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermissionRecord {
    pub role: String,
    pub resource: String,
    pub action: String,
}

/// Everything the authorizer needs, read from the database in one go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityRecords {
    pub users: Vec<UserRecord>,
    pub roles: Vec<RoleRecord>,
    pub permissions: Vec<PermissionRecord>,
    /// Nacelle's own per-user state (`nacelle_user_state`): tokens issued before this
    /// time (epoch seconds) are refused — set when the password changes.
    pub tokens_not_before: Vec<(String, i64)>,
}

/// A change to users, roles or permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityWrite {
    /// Insert a user; a taken name is a conflict.
    CreateUser { username: String, hash: String },
    /// Insert a user holding `ROLE_ADMIN`, both rows in one transaction (the first
    /// administrator: no node ever sees it without its role); a taken name is a conflict.
    CreateAdmin { username: String, hash: String },
    /// Set a user's password hash and refuse tokens issued before `not_before` (epoch s).
    SetPassword {
        username: String,
        hash: String,
        not_before: i64,
    },
    /// Delete a user, its roles and its state.
    DeleteUser { username: String },
    /// Bind a role to a user; an existing binding is a conflict.
    AddRole { role: String, username: String },
    /// Unbind a role from one user, or from everyone (and drop its permissions).
    DeleteRole {
        role: String,
        username: Option<String>,
    },
    /// Grant a permission to a role; an existing grant is a conflict.
    AddPermission(PermissionRecord),
    /// Revoke a permission.
    DeletePermission(PermissionRecord),
}

/// The records indexed for checks: a user's roles, a role's permissions.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    users: HashMap<String, DirectoryUser>,
    roles_of: HashMap<String, Vec<String>>,
    permissions_of: HashMap<String, Vec<Grant>>,
    admins: HashSet<String>,
}

/// A permission as checks use it: the record as stored, and its pattern with the default
/// namespace spelled as resources spell it.
#[derive(Debug, Clone)]
struct Grant {
    record: PermissionRecord,
    /// `record.resource` with a namespace part of `public` or `null` (Nacos 3's consoles
    /// and tools grant `public:*:*`) made the empty id that [`config_resource`] writes for
    /// the default namespace, as a key's namespace is normalised ([`crate::NamespaceId`]).
    pattern: String,
}

impl Grant {
    fn new(record: PermissionRecord) -> Self {
        let pattern = match record.resource.split_once(':') {
            Some((ns, rest)) if crate::key::DEFAULT_NAMESPACE_ALIASES.contains(&ns.trim()) => {
                format!(":{rest}")
            }
            _ => record.resource.clone(),
        };
        Grant { record, pattern }
    }
}

/// A user as the directory knows it.
#[derive(Debug, Clone)]
pub struct DirectoryUser {
    /// The BCrypt hash (shared: compared by identity to keep password caches valid).
    pub hash: Arc<str>,
    pub enabled: bool,
    /// Tokens issued before this (epoch seconds) are refused.
    pub not_before: i64,
}

impl Directory {
    /// Indexes `records`.
    pub fn new(records: IdentityRecords) -> Self {
        let mut dir = Directory::default();
        for u in records.users {
            dir.users.insert(
                u.username,
                DirectoryUser {
                    hash: u.password.into(),
                    enabled: u.enabled,
                    not_before: 0,
                },
            );
        }
        for (name, at) in records.tokens_not_before {
            if let Some(u) = dir.users.get_mut(&name) {
                u.not_before = at;
            }
        }
        for r in records.roles {
            if r.role == ADMIN_ROLE {
                dir.admins.insert(r.username.clone());
            }
            dir.roles_of.entry(r.username).or_default().push(r.role);
        }
        for p in records.permissions {
            dir.permissions_of
                .entry(p.role.clone())
                .or_default()
                .push(Grant::new(p));
        }
        dir
    }

    /// The user `name`.
    pub fn user(&self, name: &str) -> Option<&DirectoryUser> {
        self.users.get(name)
    }

    /// How many users there are.
    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// Whether `name` holds `ROLE_ADMIN`.
    pub fn is_admin(&self, name: &str) -> bool {
        self.admins.contains(name)
    }

    /// The users holding `ROLE_ADMIN`.
    pub fn admin_count(&self) -> usize {
        self.admins
            .iter()
            .filter(|u| self.users.contains_key(u.as_str()))
            .count()
    }

    /// Every user name, sorted.
    pub fn user_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.users.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Every role binding, sorted by role, then user.
    pub fn role_records(&self) -> Vec<RoleRecord> {
        let mut out: Vec<RoleRecord> = self
            .roles_of
            .iter()
            .flat_map(|(user, roles)| {
                roles.iter().map(|role| RoleRecord {
                    role: role.clone(),
                    username: user.clone(),
                })
            })
            .collect();
        out.sort();
        out
    }

    /// Every permission, sorted by role, resource, action.
    pub fn permission_records(&self) -> Vec<PermissionRecord> {
        let mut out: Vec<PermissionRecord> = self
            .permissions_of
            .values()
            .flatten()
            .map(|g| g.record.clone())
            .collect();
        out.sort();
        out
    }

    /// Whether any user holds `role`.
    pub fn role_exists(&self, role: &str) -> bool {
        self.roles_of
            .values()
            .any(|roles| roles.iter().any(|r| r == role))
    }

    /// The roles of `name`.
    pub fn roles_of(&self, name: &str) -> &[String] {
        self.roles_of.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether user `name` may do `action` on `resource`: an admin may do anything, others
    /// need a permission of one of their roles whose pattern matches and whose action grants.
    pub fn allows(&self, name: &str, resource: &str, action: Action) -> bool {
        if self.is_admin(name) {
            return true;
        }
        self.permissions(name).any(|g| {
            action_grants(&g.record.action, action) && pattern_matches(&g.pattern, resource)
        })
    }

    /// Whether user `name` has any permission in namespace `ns` (the namespace part of a
    /// pattern matches it): what decides whether a namespace is listed to the user.
    pub fn sees_namespace(&self, name: &str, ns: &str) -> bool {
        if self.is_admin(name) {
            return true;
        }
        self.permissions(name).any(|g| {
            let ns_part = g.pattern.split(':').next().unwrap_or("");
            pattern_matches(ns_part, ns)
        })
    }

    /// Whether user `name` holds any permission through its roles.
    pub fn holds_any_permission(&self, name: &str) -> bool {
        self.permissions(name).next().is_some()
    }

    fn permissions<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Grant> + 'a {
        self.roles_of(name)
            .iter()
            .filter_map(|role| self.permissions_of.get(role))
            .flatten()
            .collect::<Vec<_>>()
            .into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_nacos_globs() {
        let cases = [
            ("*", "", true),
            ("*", "ns:G:config/a", true),
            (
                ":DEFAULT_GROUP:config/app.yaml",
                ":DEFAULT_GROUP:config/app.yaml",
                true,
            ),
            (
                ":DEFAULT_GROUP:config/app.yaml",
                ":DEFAULT_GROUP:config/appxyaml",
                false,
            ),
            ("dev:*:*", "dev:G:config/a.yaml", true),
            ("dev:*:*", "prod:G:config/a.yaml", false),
            ("dev:*:*", "dev2:G:config/a", false),
            ("dev*:*:*", "dev2:G:config/a", true),
            ("*:G:config/a*", ":G:config/abc", true),
            ("*:G:config/a*", ":G:config/b", false),
            ("a*b*c", "abbbc", true),
            ("a*b*c", "acb", false),
            ("", "", true),
            ("", "x", false),
            ("**", "x", true),
        ];
        for (p, r, want) in cases {
            assert_eq!(pattern_matches(p, r), want, "{p} vs {r}");
        }
    }

    #[test]
    fn actions_grant_by_letter() {
        assert!(action_grants("rw", Action::Read));
        assert!(action_grants("rw", Action::Write));
        assert!(action_grants("r", Action::Read));
        assert!(!action_grants("r", Action::Write));
        assert!(!action_grants("w", Action::Read));
    }

    #[test]
    fn resources_follow_nacos() -> Result<(), crate::CoreError> {
        let key = ConfigKey::parse(Some("public"), "DEFAULT_GROUP", "app.yaml")?;
        assert_eq!(config_resource(&key), ":DEFAULT_GROUP:config/app.yaml");
        let key = ConfigKey::parse(Some("dev"), "G", "a")?;
        assert_eq!(config_resource(&key), "dev:G:config/a");
        Ok(())
    }

    #[test]
    fn directory_checks_roles_and_admin() {
        let dir = Directory::new(IdentityRecords {
            users: ["nacos", "dev", "nobody"]
                .iter()
                .map(|u| UserRecord {
                    username: u.to_string(),
                    password: "h".into(),
                    enabled: true,
                })
                .collect(),
            roles: vec![
                RoleRecord {
                    role: ADMIN_ROLE.into(),
                    username: "nacos".into(),
                },
                RoleRecord {
                    role: "devs".into(),
                    username: "dev".into(),
                },
            ],
            permissions: vec![PermissionRecord {
                role: "devs".into(),
                resource: "dev:*:*".into(),
                action: "r".into(),
            }],
            tokens_not_before: vec![("dev".into(), 7)],
        });
        assert!(dir.allows("nacos", "x:y:config/z", Action::Write));
        assert!(dir.allows("dev", "dev:G:config/a", Action::Read));
        assert!(!dir.allows("dev", "dev:G:config/a", Action::Write));
        assert!(!dir.allows("dev", "prod:G:config/a", Action::Read));
        assert!(!dir.allows("nobody", "dev:G:config/a", Action::Read));
        assert!(dir.sees_namespace("dev", "dev"));
        assert!(!dir.sees_namespace("dev", "prod"));
        assert_eq!(dir.admin_count(), 1);
        assert_eq!(dir.user("dev").map(|u| u.not_before), Some(7));
    }

    /// Nacos 3 grants the default namespace as `public:*:*`, 2.x as `:*:*`: both mean the
    /// default namespace (and only it), in checks and in the namespaces a user sees; the
    /// stored record is listed as it was granted.
    #[test]
    fn public_in_a_grant_is_the_default_namespace() -> Result<(), crate::CoreError> {
        let grant = |user: &str, resource: &str| IdentityRecords {
            users: vec![UserRecord {
                username: user.into(),
                password: "h".into(),
                enabled: true,
            }],
            roles: vec![RoleRecord {
                role: format!("role-{user}"),
                username: user.into(),
            }],
            permissions: vec![PermissionRecord {
                role: format!("role-{user}"),
                resource: resource.into(),
                action: "rw".into(),
            }],
            tokens_not_before: vec![],
        };
        let default_key = ConfigKey::parse(Some("public"), "DEFAULT_GROUP", "app.yaml")?;
        let dev_key = ConfigKey::parse(Some("dev"), "DEFAULT_GROUP", "app.yaml")?;
        for resource in ["public:*:*", ":*:*", "null:*:*", " public :*:*"] {
            let dir = Directory::new(grant("u", resource));
            for action in [Action::Read, Action::Write] {
                assert!(
                    dir.allows("u", &config_resource(&default_key), action),
                    "{resource}"
                );
                assert!(
                    !dir.allows("u", &config_resource(&dev_key), action),
                    "{resource}"
                );
            }
            assert!(dir.sees_namespace("u", ""), "{resource}");
            assert!(!dir.sees_namespace("u", "dev"), "{resource}");
            assert_eq!(dir.permission_records()[0].resource, resource);
        }
        // A namespace that merely starts with "public" is its own.
        let dir = Directory::new(grant("u", "publicity:*:*"));
        assert!(!dir.allows("u", &config_resource(&default_key), Action::Read));
        Ok(())
    }
}
