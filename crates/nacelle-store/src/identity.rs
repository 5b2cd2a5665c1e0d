//! Users, roles and permissions (Nacos's `users` / `roles` / `permissions`) and Nacelle's
//! `nacelle_user_state`: their statements, spelled once per dialect, the one reader of all
//! of them and the executor of an [`IdentityWrite`], each write in one transaction. Every
//! backend runs this code (SQLite on its namespace-writer pool, MySQL and PostgreSQL on
//! their pool).

use nacelle_core::auth::{
    IdentityRecords, IdentityWrite, PermissionRecord, RoleRecord, UserRecord, ADMIN_ROLE,
};
use nacelle_core::StoreError;
use sqlx::Pool;

use crate::dialect::{spell, Arg, Dialect};
use crate::map_err;
use crate::sql::{self, Exec};

/// The statements of users, roles and permissions.
#[derive(Debug, Clone)]
pub(crate) struct IdentityQueries {
    pub users: String,
    pub roles: String,
    pub permissions: String,
    pub states: String,
    pub insert_user: String,
    pub update_password: String,
    pub user_exists: String,
    pub delete_user: String,
    pub delete_user_roles: String,
    pub delete_state: String,
    pub insert_state: String,
    pub insert_role: String,
    pub delete_role_of_user: String,
    pub delete_role: String,
    pub delete_role_permissions: String,
    pub insert_permission: String,
    pub delete_permission: String,
}

impl IdentityQueries {
    /// The statements as `D` spells them.
    pub(crate) fn new<D: Dialect>() -> Self {
        let q = |sql: String| spell::<D>(&sql);
        IdentityQueries {
            // `enabled` is a boolean in PostgreSQL and an integer elsewhere: read as text.
            users: q("SELECT username, password, \
                 CASE WHEN enabled THEN 'Y' ELSE 'N' END AS enabled \
                 FROM users ORDER BY username"
                .into()),
            roles: q("SELECT role, username FROM roles ORDER BY role, username".into()),
            permissions: q(
                "SELECT role, resource, action FROM permissions ORDER BY role, resource".into(),
            ),
            states: q("SELECT username, tokens_not_before FROM nacelle_user_state".into()),
            insert_user: q(
                "INSERT INTO users (username, password, enabled) VALUES (?, ?, TRUE)".into(),
            ),
            update_password: q("UPDATE users SET password = ? WHERE username = ?".into()),
            user_exists: q(format!(
                "SELECT {} AS n FROM users WHERE username = ?",
                D::signed("COUNT(*)")
            )),
            delete_user: q("DELETE FROM users WHERE username = ?".into()),
            delete_user_roles: q("DELETE FROM roles WHERE username = ?".into()),
            delete_state: q("DELETE FROM nacelle_user_state WHERE username = ?".into()),
            insert_state: q(
                "INSERT INTO nacelle_user_state (username, tokens_not_before) VALUES (?, ?)".into(),
            ),
            insert_role: q("INSERT INTO roles (role, username) VALUES (?, ?)".into()),
            delete_role_of_user: q("DELETE FROM roles WHERE role = ? AND username = ?".into()),
            delete_role: q("DELETE FROM roles WHERE role = ?".into()),
            delete_role_permissions: q("DELETE FROM permissions WHERE role = ?".into()),
            insert_permission: q(
                "INSERT INTO permissions (role, resource, action) VALUES (?, ?, ?)".into(),
            ),
            delete_permission: q(
                "DELETE FROM permissions WHERE role = ? AND resource = ? AND action = ?".into(),
            ),
        }
    }
}

/// Every user, role binding, permission and token state.
pub(crate) async fn load<DB: Exec>(
    pool: &Pool<DB>,
    q: &IdentityQueries,
) -> Result<IdentityRecords, StoreError> {
    let mut conn = pool.acquire().await.map_err(map_err)?;
    let mut records = IdentityRecords::default();
    for row in DB::rows(&mut conn, &q.users, &[]).await.map_err(map_err)? {
        records.users.push(UserRecord {
            username: DB::text(&row, "username")?,
            password: DB::text(&row, "password")?,
            enabled: DB::text(&row, "enabled")? == "Y",
        });
    }
    for row in DB::rows(&mut conn, &q.roles, &[]).await.map_err(map_err)? {
        records.roles.push(RoleRecord {
            role: DB::text(&row, "role")?,
            username: DB::text(&row, "username")?,
        });
    }
    for row in DB::rows(&mut conn, &q.permissions, &[])
        .await
        .map_err(map_err)?
    {
        records.permissions.push(PermissionRecord {
            role: DB::text(&row, "role")?,
            resource: DB::text(&row, "resource")?,
            action: DB::text(&row, "action")?,
        });
    }
    for row in DB::rows(&mut conn, &q.states, &[]).await.map_err(map_err)? {
        records.tokens_not_before.push((
            DB::text(&row, "username")?,
            DB::int(&row, "tokens_not_before")?,
        ));
    }
    Ok(records)
}

/// Applies `write` in one transaction.
pub(crate) async fn write<DB: Exec>(
    pool: &Pool<DB>,
    q: &IdentityQueries,
    write: &IdentityWrite,
) -> Result<(), StoreError> {
    sql::in_transaction(pool, async |conn| {
        let not_found = |what: String| Err(StoreError::NotFound(what));
        macro_rules! run {
            ($sql:expr, $($arg:expr),*) => {
                DB::rows_affected(&DB::run(conn, $sql, &[$($arg),*]).await.map_err(map_err)?)
            };
        }
        match write {
            IdentityWrite::CreateUser { username, hash } => {
                run!(&q.insert_user, Arg::Text(username), Arg::Text(hash));
            }
            IdentityWrite::CreateAdmin { username, hash } => {
                run!(&q.insert_user, Arg::Text(username), Arg::Text(hash));
                run!(&q.insert_role, Arg::Text(ADMIN_ROLE), Arg::Text(username));
            }
            IdentityWrite::SetPassword {
                username,
                hash,
                not_before,
            } => {
                let exists = DB::row(conn, &q.user_exists, &[Arg::Text(username)])
                    .await
                    .map_err(map_err)?
                    .map(|r| DB::int(&r, "n"))
                    .transpose()?
                    .unwrap_or(0);
                if exists == 0 {
                    return not_found(format!("user {username} not exist!"));
                }
                run!(&q.update_password, Arg::Text(hash), Arg::Text(username));
                run!(&q.delete_state, Arg::Text(username));
                run!(&q.insert_state, Arg::Text(username), Arg::Int(*not_before));
            }
            IdentityWrite::DeleteUser { username } => {
                if run!(&q.delete_user, Arg::Text(username)) == 0 {
                    return not_found(format!("user {username} not exist!"));
                }
                run!(&q.delete_user_roles, Arg::Text(username));
                run!(&q.delete_state, Arg::Text(username));
            }
            IdentityWrite::AddRole { role, username } => {
                run!(&q.insert_role, Arg::Text(role), Arg::Text(username));
            }
            IdentityWrite::DeleteRole { role, username } => {
                let removed = match username {
                    Some(user) => run!(&q.delete_role_of_user, Arg::Text(role), Arg::Text(user)),
                    None => {
                        run!(&q.delete_role_permissions, Arg::Text(role));
                        run!(&q.delete_role, Arg::Text(role))
                    }
                };
                if removed == 0 {
                    return not_found(format!("role {role} not exist!"));
                }
            }
            IdentityWrite::AddPermission(p) => {
                run!(
                    &q.insert_permission,
                    Arg::Text(&p.role),
                    Arg::Text(&p.resource),
                    Arg::Text(&p.action)
                );
            }
            IdentityWrite::DeletePermission(p) => {
                let removed = run!(
                    &q.delete_permission,
                    Arg::Text(&p.role),
                    Arg::Text(&p.resource),
                    Arg::Text(&p.action)
                );
                if removed == 0 {
                    return not_found("permission not exist!".into());
                }
            }
        }
        Ok(())
    })
    .await
}
