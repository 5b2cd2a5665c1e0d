//! Users, roles and permissions (Nacos's `users` / `roles` / `permissions`) and Nacelle's
//! `nacelle_user_state`: the one reader of all of them and the executor of an
//! [`IdentityWrite`], each write in one transaction. Every backend runs this code (SQLite on
//! its namespace-writer pool, MySQL and PostgreSQL on their pool).

use nacelle_core::auth::{
    IdentityRecords, IdentityWrite, PermissionRecord, RoleRecord, UserRecord, ADMIN_ROLE,
};
use nacelle_core::StoreError;
use sqlx::Pool;

use crate::dialect::Arg;
use crate::map_err;
use crate::queries::Queries;
use crate::sql::Exec;

/// Every user, role binding, permission and token state.
pub(crate) async fn load<DB: Exec>(
    pool: &Pool<DB>,
    q: &Queries,
) -> Result<IdentityRecords, StoreError> {
    let q = &q.identity;
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
    q: &Queries,
    write: &IdentityWrite,
) -> Result<(), StoreError> {
    let q = &q.identity;
    let mut tx = pool.begin().await.map_err(map_err)?;
    let conn = &mut *tx;
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
    tx.commit().await.map_err(map_err)
}
