//! Users, roles and permissions over Nacos 2.x's auth admin API (`/nacos/v1/auth/…`,
//! `docs/security.md`): listings are raw pages, writes answer a `RestResult`. Only an
//! administrator may call them (a user may change its own password).

use serde::Deserialize;

use crate::admin::{lenient_string, Admin, Page};
use crate::error::{ClientError, Result};

/// A user as the server lists it (never its password hash).
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// The user name.
    #[serde(default, deserialize_with = "lenient_string")]
    pub username: String,
}

/// A role granted to a user.
#[derive(Debug, Clone, Deserialize)]
pub struct RoleGrant {
    /// The role.
    #[serde(default, deserialize_with = "lenient_string")]
    pub role: String,
    /// The user holding it.
    #[serde(default, deserialize_with = "lenient_string")]
    pub username: String,
}

/// A permission of a role: an action on a resource pattern.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Permission {
    /// The role.
    #[serde(default, deserialize_with = "lenient_string")]
    pub role: String,
    /// `<namespace>:<group>:config/<dataId>`, `*` matching anything (`dev:*:*`; the
    /// public namespace is the empty id, `:DEFAULT_GROUP:config/app.yaml`).
    #[serde(default, deserialize_with = "lenient_string")]
    pub resource: String,
    /// `r`, `w` or `rw`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub action: String,
}

/// A `RestResult` write answer: `code` 200 on success.
#[derive(Deserialize)]
struct RestResult {
    #[serde(default)]
    code: i32,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    data: serde_json::Value,
}

fn page_params(page_no: u32, page_size: u32) -> [(&'static str, String); 2] {
    [
        ("pageNo", page_no.to_string()),
        ("pageSize", page_size.to_string()),
    ]
}

impl Admin {
    /// A write of the auth API; fails unless its `RestResult` says 200.
    async fn auth_write(&self, kind: &'static str, build: crate::http::Build<'_>) -> Result<()> {
        let body = self.send(kind, build).await?;
        let r: RestResult = serde_json::from_slice(&body)
            .map_err(|e| ClientError::Protocol(format!("{kind}: {e}")))?;
        if r.code == 200 {
            return Ok(());
        }
        let message = match (r.message, r.data) {
            (Some(m), _) if !m.is_empty() => m,
            (_, serde_json::Value::String(s)) => s,
            (_, other) => other.to_string(),
        };
        Err(ClientError::Server {
            code: r.code,
            message,
        })
    }

    /// A page of users.
    pub async fn users(&self, page_no: u32, page_size: u32) -> Result<Page<User>> {
        let q = page_params(page_no, page_size);
        self.json("users", &|http, base| {
            http.get(format!("{base}/v1/auth/users")).query(&q)
        })
        .await
    }

    /// Creates a user.
    pub async fn create_user(&self, username: &str, password: &str) -> Result<()> {
        self.auth_write("user-create", &|http, base| {
            http.post(format!("{base}/v1/auth/users"))
                .form(&[("username", username), ("password", password)])
        })
        .await
    }

    /// Changes a user's password (an administrator: anyone's; a user: its own).
    pub async fn change_password(&self, username: &str, new_password: &str) -> Result<()> {
        self.auth_write("user-passwd", &|http, base| {
            http.put(format!("{base}/v1/auth/users"))
                .form(&[("username", username), ("newPassword", new_password)])
        })
        .await
    }

    /// Deletes a user.
    pub async fn delete_user(&self, username: &str) -> Result<()> {
        self.auth_write("user-delete", &|http, base| {
            http.delete(format!("{base}/v1/auth/users"))
                .query(&[("username", username)])
        })
        .await
    }

    /// A page of role grants, optionally of one user only.
    pub async fn roles(
        &self,
        username: Option<&str>,
        page_no: u32,
        page_size: u32,
    ) -> Result<Page<RoleGrant>> {
        let q = page_params(page_no, page_size);
        self.json("roles", &|http, base| {
            let mut req = http.get(format!("{base}/v1/auth/roles")).query(&q);
            if let Some(u) = username {
                req = req.query(&[("username", u)]);
            }
            req
        })
        .await
    }

    /// Grants `role` to `username` (a new role exists once granted).
    pub async fn add_role(&self, role: &str, username: &str) -> Result<()> {
        self.auth_write("role-add", &|http, base| {
            http.post(format!("{base}/v1/auth/roles"))
                .form(&[("role", role), ("username", username)])
        })
        .await
    }

    /// Takes `role` from `username`, or from everyone (and deletes it) when `None`.
    pub async fn delete_role(&self, role: &str, username: Option<&str>) -> Result<()> {
        self.auth_write("role-delete", &|http, base| {
            let mut q = vec![("role", role)];
            if let Some(u) = username {
                q.push(("username", u));
            }
            http.delete(format!("{base}/v1/auth/roles")).query(&q)
        })
        .await
    }

    /// A page of permissions, optionally of one role only.
    pub async fn permissions(
        &self,
        role: Option<&str>,
        page_no: u32,
        page_size: u32,
    ) -> Result<Page<Permission>> {
        let q = page_params(page_no, page_size);
        self.json("permissions", &|http, base| {
            let mut req = http.get(format!("{base}/v1/auth/permissions")).query(&q);
            if let Some(r) = role {
                req = req.query(&[("role", r)]);
            }
            req
        })
        .await
    }

    /// Gives `role` the `action` (`r`, `w`, `rw`) on `resource`.
    pub async fn add_permission(&self, role: &str, resource: &str, action: &str) -> Result<()> {
        self.auth_write("permission-add", &|http, base| {
            http.post(format!("{base}/v1/auth/permissions")).form(&[
                ("role", role),
                ("resource", resource),
                ("action", action),
            ])
        })
        .await
    }

    /// Takes a permission away.
    pub async fn delete_permission(&self, role: &str, resource: &str, action: &str) -> Result<()> {
        self.auth_write("permission-delete", &|http, base| {
            http.delete(format!("{base}/v1/auth/permissions")).query(&[
                ("role", role),
                ("resource", resource),
                ("action", action),
            ])
        })
        .await
    }
}
